"""The Prefect flow `audit`: a batch of concurrent queries decided as one (Algorithm 5) over the
state database, with the same knowledge dictionary and audit log as `privpub audit ask`. The
decision itself is flows/audit.py `decide_batch`; the CLI calls it directly when no Prefect
server is configured (flows/run.py), as `privpub publish` does."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from privpub.flows.attempts import flow_run_id
from privpub.flows.audit import decide_batch
from privpub.flows.publish import failed_state


@task(name="audit-decide", cache_policy=NO_CACHE, persist_result=False)
def decide_batch_task(
    state: str, queries: list[dict], actor: str, table: str | None, flow_run_id: str | None, ids: bool = False
) -> list[dict]:
    return decide_batch(state, queries, actor, table, flow_run_id, ids)


@flow(name="audit", persist_result=False, validate_parameters=True)
def audit_flow(
    state: str, queries: list[dict], actor: str = "batch", table: str | None = None, ids: bool = False
) -> list[dict]:
    """Decide a batch of concurrent queries ({"where": predicate, "as": requester, "id": name});
    answers carry their person ids only with `ids`."""
    try:
        return decide_batch_task(state, queries, actor, table, flow_run_id(), ids)
    except Exception as exc:  # the run ends Failed with one line; nothing pickled (see run_attempt)
        return failed_state(exc)

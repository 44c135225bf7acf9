"""The Prefect flow `audit`: a batch of concurrent queries decided as one (Algorithm 5) over the
state database, with the same knowledge dictionary and audit log as `privpub audit ask`."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from privpub.flows.attempts import flow_run_id
from privpub.flows.audit import log_entry, open_session, pick_table, refused_entry, response_json
from privpub.flows.publish import failed_state
from privpub.schemas.errors import SpecError
from privpub.state.store import Store
from privpub.tasks.audit import ask_batch, select_ids


@task(name="audit-decide", cache_policy=NO_CACHE, persist_result=False)
def decide_batch_task(
    state: str, queries: list[dict], actor: str, table: str | None, flow_run_id: str | None
) -> list[dict]:
    store = Store(state)
    name = pick_table(store, table)
    refused: list[str] = []
    with store.audit_session(name) as session:
        spec, auditor = open_session(session)
        batch = []
        for i, q in enumerate(queries):
            try:
                batch.append(
                    (q.get("id") or f"b{i + 1}", select_ids(auditor.population, q["where"], spec.dataset.person_id))
                )
            except ValueError as exc:
                refused.append(f"query {i + 1}: {exc}")
                session["log"].append(refused_entry(q["where"], q.get("as") or actor, str(exc), flow_run_id))
        if not refused:  # a batch with a refused query is refused whole (it is decided as one)
            decisions = ask_batch(auditor, batch)
            session["knowledge"] = auditor.to_state()
            session["log"] = [
                log_entry(d, q["where"], q.get("as") or actor, flow_run_id) for d, q in zip(decisions, queries)
            ]
    if refused:
        raise SpecError("batch refused, nothing decided: " + "; ".join(refused))
    return [response_json(d) for d in decisions]


@flow(name="audit", persist_result=False, validate_parameters=True)
def audit_flow(state: str, queries: list[dict], actor: str = "batch", table: str | None = None) -> list[dict]:
    """Decide a batch of concurrent queries ({"where": predicate, "as": requester, "id": name})."""
    try:
        return decide_batch_task(state, queries, actor, table, flow_run_id())
    except Exception as exc:  # the run ends Failed with one line; nothing pickled (see run_attempt)
        return failed_state(exc)

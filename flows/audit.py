"""The online auditor over the state database: `privpub audit init|ask|log` (the Prefect flow
`audit` for batches is in flows/audit_batch.py, so that one `ask` does not import Prefect).

The population's ids and QI values and the multiset of sensitive values are public knowledge
(as the thesis assumes); the secret is which person holds which value. The secret table is read
from the spec's input each time, and the auditor consults it only after its simulatable check.
Each decision is committed (knowledge dictionary + audit-log row, one transaction) before the
response is returned.
"""

from __future__ import annotations

import json
from typing import Any

from privpub.schemas.errors import SpecError, StateError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import ReleaseSpec, spec_from_dict
from privpub.state.store import Store
from privpub.tasks.audit import Auditor, ask_batch, secret_from_mapping, select_ids
from privpub.tasks.validate import load_input

# seconds of simulatable work per decision; keeps the p95 latency of tests/benchmarks/bench_audit.py
# under 1 s (docs/auditing.md, Scale). A query that needs more is denied without reading the secret.
DEFAULT_TIME_BUDGET = 0.8


def audit_settings(spec: ReleaseSpec) -> dict[str, Any]:
    section = spec.section("audit")
    l = section.get("l")
    if not isinstance(l, int) or isinstance(l, bool) or l < 1:
        raise SpecError("[audit] l must be an integer >= 1")
    budget = section.get("budget")
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise SpecError("[audit] budget must be a positive integer (integer programs per decision)")
    time_budget = section.get("time_budget", DEFAULT_TIME_BUDGET)
    if time_budget is not None and (
        isinstance(time_budget, bool) or not isinstance(time_budget, (int, float)) or not time_budget > 0
    ):
        raise SpecError("[audit] time_budget must be a positive number of seconds per decision")
    strategy = section.get("strategy", "simulatable")
    return {"l": l, "budget": budget, "strategy": strategy, "time_budget": time_budget}


def _secret_table(spec: ReleaseSpec):
    """The validated secret table: (public population, public value multiset, secret reader, fingerprint)."""
    frame, fingerprint = load_input(spec)
    frame = validate_input(frame, spec)  # an audit spec needs no [technique]
    ds = spec.dataset
    population = frame[[ds.person_id, *ds.qi_names]]
    values = frame[ds.sensitive].tolist()
    mapping = dict(zip(frame[ds.person_id].tolist(), values))
    return population, values, secret_from_mapping(mapping), fingerprint


def _auditor(spec: ReleaseSpec, knowledge: dict | None):
    settings = audit_settings(spec)
    population, values, secret, fingerprint = _secret_table(spec)
    if knowledge is None:
        return Auditor(
            population,
            values,
            settings["l"],
            secret,
            budget=settings["budget"],
            strategy=settings["strategy"],
            time_budget=settings["time_budget"],
            id_column=spec.dataset.person_id,
        ), fingerprint
    return Auditor.from_state(knowledge, population, values, secret, id_column=spec.dataset.person_id), fingerprint


def init_audit(spec: ReleaseSpec, actor: str) -> str:
    auditor, fingerprint = _auditor(spec, None)
    Store(spec.state_path).register_audit_table(
        spec.dataset.name, spec.model_dump(), fingerprint, auditor.to_state(), actor
    )
    return spec.dataset.name


def pick_table(store: Store, name: str | None) -> str:
    names = store.audit_tables()
    if name:
        return name
    if len(names) == 1:
        return names[0]
    if not names:
        raise StateError(f"no table registered with the auditor in {store.path} (privpub audit init SPEC)")
    raise StateError(f"several tables are registered ({', '.join(names)}): choose one with --table")


def _spec_of(session: dict) -> ReleaseSpec:
    data = session["spec"]
    return spec_from_dict({k: v for k, v in data.items() if k != "base_dir"}, base_dir=data.get("base_dir", "."))


def open_session(session: dict):
    """The registered spec and its auditor, restored from the stored knowledge dictionary; a
    secret table that changed since registration is refused (the knowledge would be wrong)."""
    spec = _spec_of(session)
    auditor, fingerprint = _auditor(spec, session["knowledge"])
    if fingerprint != session["fingerprint"]:
        raise StateError(
            f"the secret table {spec.dataset.input} changed since it was registered; "
            "the auditor's knowledge no longer describes it"
        )
    return spec, auditor


def response_json(decision) -> dict[str, Any]:
    """The contract's JSON object: ids and values only for an answer."""
    out: dict[str, Any] = {"response": decision.response, "query_id": decision.query_id, "reason": decision.reason}
    if decision.response == "answer":
        out["ids"] = [*decision.ids]
        out["values"] = [*decision.values]
    return out


def log_entry(decision, predicate: str, actor: str, flow_run_id: str | None = None) -> dict:
    return {
        "actor": actor,
        "response": decision.response,
        "flow_run_id": flow_run_id,
        "detail": {
            "query_id": decision.query_id,
            "query": predicate,
            "why": decision.reason,
            "budget_hit": decision.budget_hit,
            "selected": len(decision.ids) or None,
            "joint": list(decision.joint),
            "integer_programs": decision.solves,
        },
    }


RESPONSE_KINDS = ("answer", "negative-denial", "budget-denied", "positive-denial", "delayed", "refused")


def summary(log) -> list[dict[str, Any]]:
    """Per registered table, how its queries ended (from the audit log's audit-query rows):
    counts per kind, a budget denial (the auditor's own limit, not the privacy model) apart from
    the exact negative denials, and each kind's share of the decisions (refusals left out: they
    were never decided)."""
    rows = log[log.action == "audit-query"]
    budget_hit = rows.detail.map(lambda d: bool(json.loads(d or "{}").get("budget_hit")))
    kinds = rows.outcome.where(~budget_hit, "budget-denied")
    out = []
    for table, part in kinds.groupby(rows.target, sort=True):
        counts = {k: int((part == k).sum()) for k in RESPONSE_KINDS}
        decided = len(part) - counts["refused"]
        shares = {k: round(counts[k] / decided, 4) if decided else None for k in RESPONSE_KINDS if k != "refused"}
        out.append({"table": table, "decisions": decided, **counts, "shares": shares})
    return out


def refused_entry(predicate: str, actor: str, why: str, flow_run_id: str | None = None) -> dict:
    return {
        "actor": actor,
        "response": "refused",
        "flow_run_id": flow_run_id,
        "detail": {"query": predicate, "why": why},
    }


def ask(state, where: str, actor: str, table: str | None = None) -> dict[str, Any]:
    """Decide one query and remember it; returns the response object."""
    store = Store(state)
    name = pick_table(store, table)
    refused = None
    with store.audit_session(name) as session:
        spec, auditor = open_session(session)
        try:
            ids = select_ids(auditor.population, where, spec.dataset.person_id)
        except ValueError as exc:  # logged, the knowledge unchanged; raised once committed
            refused = str(exc)
            session["log"] = [refused_entry(where, actor, refused)]
        else:
            decision = auditor.ask(ids)
            resolved = auditor.take_resolved()
            session["knowledge"] = auditor.to_state()
            session["log"] = [log_entry(decision, where, actor)] + [
                log_entry(d, "(earlier query)", actor) for d in resolved
            ]
    if refused:
        raise SpecError(refused)
    out = response_json(decision)
    if resolved:
        out["resolved_earlier"] = [response_json(d) for d in resolved]
    return out


def decide_batch(state: str, queries: list[dict], actor: str, table: str | None, run_id: str | None) -> list[dict]:
    """A batch of concurrent queries decided as one (Algorithm 5); a batch with a refused query
    is refused whole (nothing decided), each refused query still logged."""
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
                session["log"].append(refused_entry(q["where"], q.get("as") or actor, str(exc), run_id))
        if not refused:  # decided as one
            decisions = ask_batch(auditor, batch)
            session["knowledge"] = auditor.to_state()
            session["log"] = [
                log_entry(d, q["where"], q.get("as") or actor, run_id) for d, q in zip(decisions, queries)
            ]
    if refused:
        raise SpecError("batch refused, nothing decided: " + "; ".join(refused))
    return [response_json(d) for d in decisions]

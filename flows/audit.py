"""The online auditor over the state database: `privpub audit init|ask|log` (the Prefect flow
`audit` for batches is in flows/audit_batch.py, so that one `ask` does not import Prefect).

The population's ids and QI values and the multiset of sensitive values are public knowledge
(as the thesis assumes); the secret is which person holds which value. The secret table is read
from the spec's input each time, and the auditor consults it only after its simulatable check.
Each decision is committed (knowledge dictionary + audit-log row, one transaction) before the
response is returned.

A decision holds no lock of the state while it runs (issue 41): the knowledge is read under the
readers' lock, the decision is made with nothing held, and the writers' lock is taken only to
record it, after checking that the knowledge is still the one decided on (`Store.audit_session`
with its version). When another decision or setting was recorded meanwhile, the decision is
made again on the new history (at most ATTEMPTS times, then the request is refused with one
logged line): a decision on a stale history is never recorded, because the auditor's guarantee
holds only for a decision made on every answer given before it. A publish, `history` or a
reader waits for an auditor request only while it records.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

import pandas as pd
import pyarrow as pa

from privpub.schemas.dates import date32
from privpub.schemas.errors import SpecError, StaleHistory, StateError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import AuditSpec, ReleaseSpec, check_known_keys, spec_from_dict
from privpub.state.store import Store
from privpub.tasks.audit import DEFAULT_BUDGET, Auditor, ask_batch, secret_from_mapping
from privpub.tasks.audit.after_denial import DEFAULT_POLICY
from privpub.tasks.audit.auditor import Selection, default_request_budget, legacy_budget
from privpub.tasks.audit.grid import DEFAULT_MIN_CELL, Grid, GridQI, auto_grid, top_level, width_grid
from privpub.tasks.audit.query import MAX_CHARS
from privpub.tasks.validate import load_input


def audit_settings(spec: ReleaseSpec) -> dict[str, Any]:
    """[audit] as the auditor takes it: the keys' own domains checked by schemas/spec.py AuditSpec,
    the defaults that depend on the grid and the grid's bands (by each QI's kind) here."""
    section = spec.audit
    grid = grid_settings(spec, section)
    after_denial = section.after_denial or DEFAULT_POLICY[grid.get("grid") is not None]
    budget = DEFAULT_BUDGET if section.budget is None else section.budget
    request = default_request_budget(budget) if section.request_budget is None else section.request_budget
    return {
        "l": section.l,
        "budget": budget,
        "request_budget": request,
        "strategy": section.strategy,
        "after_denial": after_denial,
        **grid,
    }


def whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_band(q, value: object) -> None:
    """One QI's entry of `[audit] grid = { ... }`, by the QI's kind; refused with one line."""
    where = f"[audit] grid {q.name}"
    if q.kind == "numeric":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise SpecError(f"{where}: the band width must be a positive number")
    elif q.kind == "date":
        if not whole(value) or not value >= 1:
            raise SpecError(f"{where}: the band width of a date QI must be a positive whole number of days")
    elif q.kind == "ordinal":
        if not whole(value) or not value >= 1:
            raise SpecError(f"{where}: the band width of an ordinal QI must be a positive whole number of values")
    elif q.hierarchy is None:
        if not whole(value) or value != 0:
            raise SpecError(
                f'{where}: a categorical QI without a hierarchy takes level 0 (each value alone) or grid = "auto"'
            )
    elif not whole(value) or not 0 <= value <= (top_level(q.tree) if q.tree else value):
        top = f"from 0 to {top_level(q.tree)}" if q.tree else "from 0"
        raise SpecError(f"{where}: the level of a categorical QI's hierarchy must be a whole number {top}")


def grid_qis(spec: ReleaseSpec) -> dict[str, GridQI]:
    """What the grid needs of each QI's declaration: its kind, order and hierarchy."""
    return {
        q.name: GridQI(q.kind, tuple(q.order_labels or ()), q.hierarchy if q.kind == "categorical" else None)
        for q in spec.dataset.qi
    }


def grid_settings(spec: ReleaseSpec, section: AuditSpec) -> dict[str, Any]:
    """`[audit] grid` ("auto" or { QI = band, ... } naming every QI: a band width for a numeric,
    date (days) or ordinal (values) QI, a hierarchy level for a categorical one), `min_cell` (with
    "auto", default 30) and `snap` (default true); strict, refused with one line naming the key."""
    grid = section.grid
    if grid is None:
        for key in ("min_cell", "snap"):
            if getattr(section, key) is not None:
                raise SpecError(f'[audit] {key}: only with a grid ([audit] grid = "auto" or band widths)')
        return {}
    qis = spec.dataset.qi_names
    if isinstance(grid, dict):
        check_known_keys("[audit] grid", grid, qis)
        for q in spec.dataset.qi:
            if q.name not in grid:
                raise SpecError(f"[audit] grid: no band width for QI {q.name} (every QI needs one)")
            check_band(q, grid[q.name])
        if section.min_cell is not None:
            raise SpecError('[audit] min_cell: only with grid = "auto" (band widths set the cells)')
    out: dict[str, Any] = {"grid": grid, "snap": True if section.snap is None else section.snap}
    if grid == "auto":
        out["min_cell"] = DEFAULT_MIN_CELL if section.min_cell is None else section.min_cell
    return out


def build_grid(settings: dict[str, Any], qi_table, qis: dict[str, GridQI] | None = None) -> Grid | None:
    """The public query grid from the public QI table alone (ids and QIs: never the secret);
    `qis` declares the QIs' kinds (numeric when absent)."""
    grid = settings.get("grid")
    columns = [str(c) for c in qi_table.columns]
    try:
        if grid == "auto":
            return auto_grid(qi_table, columns, settings["min_cell"], qis)
        if isinstance(grid, dict):
            return width_grid(qi_table, columns, grid, qis)
    except ValueError as exc:
        raise SpecError(f"[audit] {exc}") from None
    return None


def valid_budget(budget: object) -> bool:
    """A budget is a positive whole number (units of work: solves + solver nodes); no bool, no text."""
    return isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1


def _secret_table(spec: ReleaseSpec):
    """The validated secret table: (public population, public value multiset, secret reader, fingerprint)."""
    frame, fingerprint = load_input(spec)
    frame = validate_input(frame, spec)  # an audit spec needs no [technique]
    ds = spec.dataset
    population = query_table(frame[[ds.person_id, *ds.qi_names]], spec)
    values = frame[ds.sensitive].tolist()
    mapping = dict(zip(frame[ds.person_id].tolist(), values))
    return population, values, secret_from_mapping(mapping), fingerprint


def query_table(population: pd.DataFrame, spec: ReleaseSpec) -> pd.DataFrame:
    """The public table as predicates read it: a date QI's day numbers as dates (DATE in SQL,
    compared with 'YYYY-MM-DD' texts), an ordinal QI's values as ordered categories (compared in
    the declared order, tasks/audit/query.py)."""
    out = population.copy()
    for q in spec.dataset.qi:
        if q.kind == "date":
            out[q.name] = pd.Series(date32(out[q.name].to_numpy()), dtype=pd.ArrowDtype(pa.date32()), index=out.index)
        elif q.kind == "ordinal":
            out[q.name] = pd.Categorical(out[q.name].astype(str), categories=q.order_labels, ordered=True)
    return out


def _auditor(spec: ReleaseSpec, knowledge: dict | None):
    settings = audit_settings(spec)
    population, values, secret, fingerprint = _secret_table(spec)
    if knowledge is None:
        grid = build_grid(settings, population[spec.dataset.qi_names], grid_qis(spec))
        return Auditor(
            population,
            values,
            settings["l"],
            secret,
            budget=settings["budget"],
            strategy=settings["strategy"],
            id_column=spec.dataset.person_id,
            grid=grid,
            snap=settings.get("snap", True),
            after_denial=settings["after_denial"],
            request_budget=settings["request_budget"],
        ), fingerprint
    auditor = Auditor.from_state(knowledge, population, values, secret, id_column=spec.dataset.person_id)
    if "request_budget" not in knowledge:  # registered before request ceilings: the default one
        auditor.request_budget = default_request_budget(auditor.budget)
    return auditor, fingerprint


def init_audit(spec: ReleaseSpec, actor: str) -> str:
    auditor, fingerprint = _auditor(spec, None)
    Store(spec.state_path).register_audit_table(
        spec.dataset.name, spec.model_dump(), fingerprint, auditor.to_state(), actor
    )
    return spec.dataset.name


def pick_table(store: Store, name: str | None, spec_table: str | None = None) -> str:
    """The registered table a request is for: `name` (--table), else the one a --spec registered
    (its dataset name), else the only one; several and none named: one line naming them all."""
    names = store.audit_tables()
    if not names:
        raise StateError(f"no table registered with the auditor in {store.path} (privpub audit init SPEC)")
    if name:
        if name not in names:
            raise StateError(
                f"no table '{name}' registered with the auditor in {store.path}; the registered tables: {', '.join(names)}"
            )
        return name
    if spec_table in names:
        return spec_table
    if len(names) == 1:
        return names[0]
    raise StateError(
        f"several tables are registered with the auditor ({', '.join(names)}): choose one with --table NAME "
        f"(e.g. --table {names[0]})"
    )


def _spec_of(session: dict) -> ReleaseSpec:
    data = {k: v for k, v in session["spec"].items() if k != "base_dir"}
    if isinstance(data.get("audit"), dict):
        # registered before budgets were counts of work: the stored wall-clock time_budget is
        # ignored (the state's budget governs, see tasks/audit/auditor.py legacy_budget)
        data["audit"] = {k: v for k, v in data["audit"].items() if k != "time_budget"}
    return spec_from_dict(data, base_dir=session["spec"].get("base_dir", "."), stored=True)


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


def response_json(decision, ids: bool = False) -> dict[str, Any]:
    """The contract's JSON object: for an answer, how many people it selected, their sorted values
    and the count of each value, and their ids only when asked (`ids=True`, `--ids`: an analyst
    asking for a count gets no list of people); `budget_hit` only on a budget denial."""
    out: dict[str, Any] = {"response": decision.response, "query_id": decision.query_id, "reason": decision.reason}
    if decision.budget_hit:
        out["budget_hit"] = True
    if decision.predicate is not None:  # a grid: the predicate decided, and how much wider it is
        out["predicate"] = decision.predicate
        out["widened"] = decision.widened
    if decision.response == "answer":
        out["selected"] = len(decision.ids)
        if ids:
            out["ids"] = [*decision.ids]
        out["values"] = [*decision.values]
        out["counts"] = decision.to_dict()["counts"]
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
            "decided_as": decision.predicate,
            "widened": decision.widened,
            "integer_programs": decision.solves,
            "work": decision.work,
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


# decisions made again when another was recorded meanwhile, before the request is refused
ATTEMPTS = 3


class Refused(Exception):
    """A predicate refused with one line (its message), found while deciding."""


def stored_query(predicate: str) -> str:
    """The predicate as the audit log keeps it: a refused over-long one cut at the bound."""
    if len(predicate) <= MAX_CHARS:
        return predicate
    return f"{predicate[:MAX_CHARS]}... ({len(predicate)} characters)"


def select_all(auditor: Auditor, predicates: list[str]) -> list[Selection | str]:
    """Each predicate's people (a Selection) or the one line refusing it (a str). The public
    population and the grid are fixed at registration, so what a predicate selects does not
    depend on the knowledge that decisions change."""
    out: list[Selection | str] = []
    for predicate in predicates:
        try:
            out.append(auditor.select(predicate))
        except ValueError as exc:
            out.append(str(exc))
    return out


def select_unlocked(store: Store, name: str, predicates: list[str]) -> list[Selection | str]:
    """`select_all` on the registered table, read under a short readers' lock."""
    _, auditor = open_session(store.audit_table(name))
    return select_all(auditor, predicates)


def record_refusals(store: Store, name: str, entries: list[dict]) -> None:
    """Refusals logged; the knowledge is unchanged (written back as read under the lock)."""
    with store.audit_session(name) as session:
        session["log"] = entries


def decide_and_record(store: Store, name: str, decide) -> Any:
    """`decide(auditor)` -> (result, log entries) on the knowledge read under a short readers'
    lock, with no lock held while it runs; recorded under the writers' lock only if no other
    decision or setting was recorded meanwhile, else made again on the new history; after
    ATTEMPTS stale decisions, StaleHistory (nothing recorded)."""
    for _ in range(ATTEMPTS):
        session = store.audit_table(name)
        _, auditor = open_session(session)
        result, log = decide(auditor)
        try:
            with store.audit_session(name, session["version"]) as record:
                record["knowledge"] = auditor.to_state()
                record["log"] = log
        except StaleHistory:
            continue
        return result
    raise StaleHistory(
        f"the auditor's history of table '{name}' changed {ATTEMPTS} times while this request was decided "
        "(other requests recorded first); nothing was decided, ask again"
    )


def ask(
    state, where: str, actor: str, table: str | None = None, *, ids: bool = False, spec_table: str | None = None
) -> dict[str, Any]:
    """Decide one query and remember it; returns the response object (an answer's person ids only
    with `ids=True`). `table`: which registered table (needed when several are and `spec_table`,
    the dataset of the spec the request came with, is not one of them)."""
    store = Store(state)
    name = pick_table(store, table, spec_table)

    def decide(auditor: Auditor) -> tuple[Any, list[dict]]:
        (selection,) = select_all(auditor, [where])
        if isinstance(selection, str):
            raise Refused(selection)
        decision = selection.annotate(auditor.ask(selection.ids))
        resolved = auditor.take_resolved()
        log = [log_entry(decision, where, actor)] + [log_entry(d, "(earlier query)", actor) for d in resolved]
        return (decision, resolved), log

    try:
        decision, resolved = decide_and_record(store, name, decide)
    except (Refused, StaleHistory) as exc:  # logged, the knowledge unchanged; raised once committed
        record_refusals(store, name, [refused_entry(stored_query(where), actor, str(exc))])
        if isinstance(exc, Refused):
            raise SpecError(str(exc)) from None
        raise
    out = response_json(decision, ids)
    if resolved:
        out["resolved_earlier"] = [response_json(d, ids) for d in resolved]
    return out


def positive_whole(flag: str, text: str, what: str) -> int:
    """A command line's count: a positive whole number, nothing else; one line naming the flag."""
    if not text.isascii() or not text.isdigit() or not valid_budget(int(text)):
        raise SpecError(f"{flag} {text!r}: must be a positive whole number ({what})")
    return int(text)


def set_budget(state, table: str, budget: str | None, actor: str, request_budget: str | None = None) -> dict[str, Any]:
    """`privpub audit set TABLE --budget N` (units of work of one decision's check) or
    `--request-budget N` (of one request, all its checks): a registered table's limit for later
    decisions. Logged as an "audit-set" row; the knowledge is unchanged. The values are the
    command line's text: a positive whole number, nothing else."""
    if (budget is None) == (request_budget is None):
        raise SpecError("audit set: give one of --budget N or --request-budget N")
    if budget is not None:
        key, value = "budget", positive_whole("--budget", budget, "units of work per decision")
    else:
        key, value = (
            "request_budget",
            positive_whole("--request-budget", str(request_budget), "units of work per request"),
        )
    store = Store(state)
    with store.audit_session(table) as session:
        knowledge = session["knowledge"]
        was = (
            legacy_budget(knowledge)
            if key == "budget"
            else knowledge.get(key, default_request_budget(legacy_budget(knowledge)))
        )
        session["knowledge"] = {k: v for k, v in knowledge.items() if k != "time_budget"}
        session["knowledge"][key] = value
        session["log"] = [
            {
                "actor": actor,
                "action": "audit-set",
                "response": "set",
                "flow_run_id": None,
                "detail": {key: value, "was": was},
            }
        ]
    return {"table": table, key: value, "was": was}


def decide_batch(
    state: str,
    queries: list[dict],
    actor: str,
    table: str | None,
    run_id: str | None,
    ids: bool = False,
    spec_table: str | None = None,
) -> list[dict]:
    """A batch of concurrent queries decided as one (Algorithm 5); a batch with a refused query
    is refused whole (nothing decided), each refused query still logged. Answers carry their
    person ids only with `ids=True`."""
    store = Store(state)
    name = pick_table(store, table, spec_table)
    selections = select_unlocked(store, name, [q["where"] for q in queries])
    refused = [f"query {i + 1}: {s}" for i, s in enumerate(selections) if isinstance(s, str)]
    if refused:
        record_refusals(
            store,
            name,
            [
                refused_entry(stored_query(q["where"]), q.get("as") or actor, s, run_id)
                for q, s in zip(queries, selections)
                if isinstance(s, str)
            ],
        )
        raise SpecError("batch refused, nothing decided: " + "; ".join(refused))
    chosen = [s for s in selections if isinstance(s, Selection)]

    def decide(auditor: Auditor) -> tuple[Any, list[dict]]:  # decided as one
        batch = [(q.get("id") or f"b{i + 1}", s.ids) for i, (q, s) in enumerate(zip(queries, chosen))]
        decisions = [s.annotate(d) for s, d in zip(chosen, ask_batch(auditor, batch))]
        return decisions, [log_entry(d, q["where"], q.get("as") or actor, run_id) for d, q in zip(decisions, queries)]

    try:
        decisions = decide_and_record(store, name, decide)
    except StaleHistory as exc:
        entries = [refused_entry(q["where"], q.get("as") or actor, str(exc), run_id) for q in queries]
        record_refusals(store, name, entries)
        raise
    return [response_json(d, ids) for d in decisions]

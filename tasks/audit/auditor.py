"""The l-uncertainty auditor: Algorithm 2 with the delay (Definition 5) and joint (Definition 6)
strategies, over the knowledge dictionary of knowledge.py.

The secret table is a callable `secret(ids) -> values` that the auditor calls in exactly one place,
`_read_secret`, and only after the simulatable stage (compute_delta, a function of the knowledge
and the query alone) has declared the query l-safe. Negative denials, delays and budget denials
therefore never touch it, which tests check by instrumenting the callable.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, NotRequired, TypedDict

import pandas as pd

from privpub.tasks.audit import reasons
from privpub.tasks.audit.after_denial import LEGACY_POLICY, POLICIES, delta_within_allowance, must_list
from privpub.tasks.audit.decide import (
    Answer,
    DeltaReport,
    answer_facts,
    answer_is_unsafe,
    compute_delta,
    materialize,
    restricted,
)
from privpub.tasks.audit.grid import Grid
from privpub.tasks.audit.knowledge import Denial, Knowledge, Universe, plain, sort_values
from privpub.tasks.audit.nested import decide_delta
from privpub.tasks.audit.program import BudgetExceeded, Ceiling, CeilingReached, Constraint, Work
from privpub.tasks.audit.query import PublicTable
from privpub.tasks.audit.snap import snap

STATE_FORMAT = "privpub.audit/1"
STRATEGIES = ("simulatable", "delay", "joint")
SecretReader = Callable[[Sequence[Hashable]], Sequence[Hashable]]
# units of work per decision when the steward sets none (`[audit] budget`; tests/benchmarks/bench_audit.py)
DEFAULT_BUDGET = 150
# units of work one request (an ask, a batch) may spend over all its checks when the steward sets
# none (`[audit] request_budget`): about 1 s of CPU (program.UNITS_PER_CPU_SECOND, measured on the
# demo census table; issue 42: 10,000 let a free predicate run about a minute before its denial).
# It bounds the check (DEFAULT_BUDGET) and its listing allowance together.
DEFAULT_REQUEST_BUDGET = 160


def default_request_budget(budget: int | None) -> int:
    """The request budget when the steward sets none: about 1 s of CPU, or the check's budget when
    the steward raised that above it (a default ceiling below an explicit budget would void it)."""
    return max(DEFAULT_REQUEST_BUDGET, budget or 0)


def budget_reason(budget: int | None, err: BudgetExceeded, ceiling: int | None = None) -> str:
    """The reason of a budget denial (one sentence; `err` says which work ran out: the check's
    budget, or the request's ceiling)."""
    if isinstance(err, CeilingReached):
        return reasons.ceiling(ceiling, str(err))
    return reasons.budget(budget, str(err))


def legacy_budget(state: dict[str, Any]) -> int | None:
    """The budget of a saved state. States written before budgets were counts of work may carry a
    wall-clock `time_budget`: it is ignored, and when it was the only limit (no `budget`), the
    default count budget takes its place, so that a decision still cannot run unbounded."""
    if state["budget"] is None and state.get("time_budget") is not None:
        return DEFAULT_BUDGET
    budget: int | None = state["budget"]
    return budget


class DecisionStats(TypedDict):
    """The figures of Decision that describe the work behind it (passed on as keywords)."""

    floor_delta: int | None
    solves: int
    work: int
    possible_answers: int | None
    unsafe_answers: int | None
    route: NotRequired[str]


@dataclass(frozen=True)
class Decision:
    query_id: str
    response: str  # answer | negative-denial | positive-denial | delayed
    ids: tuple[Hashable, ...] = ()  # the selected people, for an answer
    values: tuple[Hashable, ...] = ()  # their sorted sensitive values, for an answer
    counts: tuple[tuple[Hashable, int], ...] = ()  # (value, count) per value held by the selected people, for an answer
    reason: str = ""
    budget_hit: bool = False
    joint: tuple[str, ...] = ()  # ids of the queries decided together with this one (joint strategy)
    floor_delta: int | None = None  # floor(Delta) when computed (None: Delta empty or unknown)
    possible_answers: int | None = None  # how many answers the adversary considers possible
    unsafe_answers: int | None = None
    predicate: str | None = None  # with a grid: the grid-aligned predicate actually decided
    widened: int = 0  # with a grid: how many more people it selects than the query asked
    solves: int = 0  # solves (LP relaxations, LP bounds, integer programs) this decision needed
    work: int = 0  # units of work it spent: solves + branch-and-bound nodes (what `budget` counts)
    route: str = ""  # "nested" when the nested path (nested.py) decided it without a solver

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ids"] = [plain(i) for i in self.ids]
        d["values"] = [plain(v) for v in self.values]
        d["counts"] = {str(plain(v)): int(t) for v, t in self.counts}  # JSON keys are text
        d["joint"] = list(self.joint)
        return d


def secret_from_mapping(mapping: Mapping[Hashable, Hashable]) -> SecretReader:
    """A secret reader over an in-memory id -> value mapping."""
    return lambda ids: [mapping[i] for i in ids]


@dataclass(frozen=True)
class Selection:
    """The people a predicate selects; with a grid, the grid-aligned predicate that selects them
    and how many more people that is than the predicate as asked."""

    ids: tuple[Hashable, ...]
    predicate: str | None = None
    widened: int = 0

    def annotate(self, decision: Decision) -> Decision:
        """The decision with the predicate it was decided for (and, when widened, the reason says so)."""
        if self.predicate is None:
            return decision
        reason = reasons.snapped(decision.reason, self.predicate, self.widened) if self.widened else decision.reason
        return replace(decision, predicate=self.predicate, widened=self.widened, reason=reason)


@dataclass
class Pending:
    query_id: str
    ids: tuple[Hashable, ...]


class Auditor:
    """Decides microdata queries under l-uncertainty.

    population: a DataFrame with the id column and the public QI columns.
    sensitive_values: the public multiset of sensitive values (closed world), or with
        open_world=True the public domain of values.
    secret: reads the real values of the given ids; consulted only after the simulatable check.
    budget: maximal units of work (solves and branch-and-bound nodes, program.Work) of one
        decision's simulatable stage; beyond it the query is denied without reading the secret
        (a simulatable denial is always safe). A count, never a duration: decisions do not
        depend on the machine or its load.
    grid: a public query grid (grid.py, built from the public QI table alone); with it a
        predicate is widened outward to the grid (`snap=True`) or refused when off the grid
        (`snap=False`). Without one, predicates are decided as written. The grid applies to
        predicates (`ask_where`, `select`); `ask(ids)` decides the given set as it is.
    after_denial: "implicit" (the class's default, the behaviour before issue 31) or "list": a
        query only route 4 proved l-safe is read only once its Delta is listed within an
        allowance of `budget` units of its own, else denied unread (after_denial.py), so a
        positive denial never leaves an unlisted Delta behind.
    request_budget: maximal units of work of one request (`ask`, `ask_where`, a batch) over all
        the checks it runs (program.Ceiling); None: no ceiling beyond each check's budget (the
        class's default; the flows set `[audit] request_budget`, default DEFAULT_REQUEST_BUDGET).
    """

    def __init__(
        self,
        population: pd.DataFrame,
        sensitive_values: Sequence[Hashable],
        l: int,
        secret: SecretReader | None = None,
        *,
        id_column: str | None = None,
        budget: int | None = None,
        strategy: str = "simulatable",
        open_world: bool = False,
        max_joint: int = 3,
        grid: Grid | None = None,
        snap: bool = True,
        after_denial: str = LEGACY_POLICY,
        request_budget: int | None = None,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}")
        if l < 1:
            raise ValueError("l must be at least 1")
        self.id_column = id_column or population.columns[0]
        self.population = population.reset_index(drop=True)
        self._public: PublicTable | None = None  # the population in DuckDB, for predicates
        people = [plain(i) for i in self.population[self.id_column].tolist()]
        if len(set(people)) != len(people):
            raise ValueError(f"column '{self.id_column}' repeats an id")
        values = [plain(v) for v in sensitive_values]
        self.universe = Universe.open(people, values) if open_world else Universe.closed(people, values)
        self.l = l
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ValueError("budget must be a positive whole number of units of work")
        self.budget = budget
        if request_budget is not None and (
            isinstance(request_budget, bool) or not isinstance(request_budget, int) or request_budget < 1
        ):
            raise ValueError("request_budget must be a positive whole number of units of work")
        self.request_budget = request_budget
        self._ceiling = Ceiling(request_budget)  # the current request's; begin_request renews it
        self.strategy = strategy
        self.max_joint = max_joint
        if grid is not None and not set(grid.columns) <= set(map(str, self.population.columns)) - {self.id_column}:
            raise ValueError("the grid's columns must be public QI columns of the population")
        self.grid = grid
        self.snap = snap
        if after_denial not in POLICIES:
            raise ValueError(f"after_denial must be one of {POLICIES}")
        self.after_denial = after_denial
        self.knowledge = Knowledge(self.universe)
        self.pool: list[Pending] = []  # delayed queries (delay) / waiting pool (joint)
        self.resolved: list[Decision] = []  # decisions on pooled queries, oldest first
        self._secret = secret
        self._counter = 0

    def new_work(self) -> Work:
        """The work budget of one simulatable check, within what the request has left."""
        return Work(self.budget, self._ceiling)

    def begin_request(self) -> None:
        """A new request: its checks share a fresh ceiling of `request_budget` units."""
        self._ceiling = Ceiling(self.request_budget)

    # -- asking ----------------------------------------------------------------------------------
    def ask(self, ids: Iterable[Hashable], query_id: str | None = None) -> Decision:
        """Decide one query given as the set of selected ids."""
        query_id = query_id or self._next_id()
        ids = tuple(sort_values({plain(i) for i in ids}))
        self.begin_request()
        decision = self._decide_new(query_id, ids)
        if self.strategy != "simulatable" and decision.response in ("answer", "positive-denial"):
            self._revisit_pool()
        return decision

    def ask_where(self, predicate: str, query_id: str | None = None) -> Decision:
        """Decide the query selecting the people whose public QI values satisfy a SQL predicate
        (with a grid: widened to it, see `select`)."""
        selection = self.select(predicate)
        return selection.annotate(self.ask(selection.ids, query_id))

    def select(self, predicate: str) -> Selection:
        """The people a predicate selects (ValueError with one line when it is not allowed). With
        a grid and `snap`, widened outward to the grid; with `snap=False`, an off-grid predicate
        is refused naming the grid-aligned predicate nearest to it (its outward widening)."""
        if self._public is None:  # opened on the first predicate, kept for the next ones
            self._public = PublicTable(self.population, self.id_column)
        ids = self._public.select_ids(predicate)
        if self.grid is None:
            return Selection(tuple(ids))
        columns = [str(c) for c in self.population.columns if c != self.id_column]
        snapped = snap(self.population, predicate, self.grid, columns)
        wide = [plain(i) for i in self.population[self.id_column][snapped.selected].tolist()]
        extra = len(wide) - len(ids)
        if extra and not self.snap:
            raise ValueError(
                f"off-grid query: this table answers queries aligned to its public grid; the nearest "
                f"grid-aligned query is {snapped.predicate}"
            )
        return Selection(tuple(wide), snapped.predicate, extra)

    def take_resolved(self) -> list[Decision]:
        """Decisions reached on earlier delayed / pooled queries since the last call."""
        out, self.resolved = self.resolved, []
        return out

    def possible_values(self) -> dict[Hashable, list[Hashable]]:
        """Every person's values across the knowledge dictionary (what the adversary knows)."""
        sets = materialize(self.knowledge, Work()).possible_values(Work())
        return {p: sort_values(s) for p, s in zip(self.universe.people, sets)}

    def add_public_fact(self, ids: Iterable[Hashable], values: Sequence[Hashable]) -> None:
        """Record a fact the adversary already has (released before this auditor existed, e.g.
        the thesis's F1). It narrows the knowledge without any check."""
        fact = Constraint(
            self.universe.members([plain(i) for i in ids]), self.universe.counts_of([plain(v) for v in values])
        )
        self.knowledge = materialize(self.knowledge, Work()).restrict([fact])
        if not self.knowledge.branches:
            raise ValueError("the fact contradicts what is already known")

    # -- Algorithm 2 -----------------------------------------------------------------------------
    def _decide_new(self, query_id: str, ids: tuple[Hashable, ...]) -> Decision:
        sets = [self.universe.members(ids)]
        checked = self.check(query_id, sets)
        if isinstance(checked, Decision):
            return checked
        report, stats = checked
        if not report.is_safe_query(self.l):
            if self.strategy == "simulatable":
                return Decision(query_id, "negative-denial", reason=reasons.negative(self.l), **stats)
            self.pool.append(Pending(query_id, ids))
            return Decision(query_id, "delayed", reason=reasons.delayed(self.l), **stats)
        return self._consult(query_id, ids, sets, report, stats)

    def check(self, query_id: str, sets: list[frozenset[int]]) -> Decision | tuple[DeltaReport, DecisionStats]:
        """The simulatable stage of one query (a function of G, q, l and the limits, never of the
        secret): Delta within the budget and, under after_denial "list", an unlisted Delta listed
        within its allowance. A denial by those limits, or the report and its figures."""
        work = self.new_work()
        try:
            report = decide_delta(self.knowledge, sets, self.l, work, need=self.l)
        except BudgetExceeded as err:
            return Decision(
                query_id,
                "negative-denial",
                reason=budget_reason(self.budget, err, self.request_budget),
                budget_hit=True,
                solves=work.solves,
                work=work.used,
            )
        solves, used = work.solves, work.used
        listed = must_list(self.after_denial, report, self.l)
        if listed:
            allowance = self.new_work()  # as many units as the budget, counted apart from it
            try:
                report = delta_within_allowance(self.knowledge, sets, self.l, allowance)
            except BudgetExceeded as err:
                return Decision(
                    query_id,
                    "negative-denial",
                    reason=budget_reason(self.budget, err, self.request_budget)
                    if isinstance(err, CeilingReached)
                    else reasons.unlisted(self.budget, str(err)),
                    budget_hit=True,
                    floor_delta=report.floor(),
                    solves=solves + allowance.solves,
                    work=used + allowance.used,
                )
            solves, used = solves + allowance.solves, used + allowance.used
        stats = DecisionStats(
            floor_delta=report.floor(),
            solves=solves,
            work=used,
            possible_answers=None if report.answers is None else len(report.answers),
            unsafe_answers=None if report.everything or report.implicit else len(report.unsafe),
            route="nested" if report.shortcut == "nested" else "",
        )
        if listed:
            # route 4 decides single-branch knowledge only, so an answer restricts G whole, as on
            # the implicit path: `Knowledge.restrict` keeps the new branch's integer point, which
            # the next decisions start from (a listing's answers alone would not keep one)
            report = replace(report, answers=None)
        return report, stats

    def _consult(
        self,
        query_id: str,
        ids: tuple[Hashable, ...],
        sets: list[frozenset[int]],
        report: DeltaReport,
        stats: DecisionStats,
        joint: tuple[str, ...] = (),
    ) -> Decision:
        """The non-simulatable stage: read the secret, answer or deny positively, update G."""
        if report.everything:
            # Delta = G: every instance gets a denial, so the response is known without the secret
            # and G := Delta leaves the knowledge unchanged.
            return Decision(
                query_id,
                "positive-denial",
                reason=reasons.structural(self.l),
                joint=joint,
                **stats,
            )
        answer = self._read_secret(sets)
        if report.answers is not None and answer not in report.answers:
            raise ValueError("the secret table contradicts the public knowledge")
        after = None
        if report.implicit:
            unsafe, after = answer_is_unsafe(self.knowledge, sets, answer, self.l)
            if unsafe:
                self.knowledge = Knowledge(self.universe, denial=Denial(self.knowledge, tuple(sets), self.l))
                return Decision(
                    query_id,
                    "positive-denial",
                    reason=reasons.positive(self.l),
                    joint=joint,
                    **stats,
                )
        if answer in report.unsafe:
            self.knowledge = Knowledge.union(
                self.universe, [restricted(self.knowledge, sets, a, b) for a, b in report.unsafe.items()]
            )
            return Decision(
                query_id,
                "positive-denial",
                reason=reasons.positive(self.l),
                joint=joint,
                **stats,
            )
        self.knowledge = after if after is not None else self._with_answer(sets, answer, report)
        return Decision(
            query_id,
            "answer",
            ids=ids,
            values=tuple(self.universe.multiset(answer[0])),
            counts=self._counts(answer[0]),
            reason=reasons.answered(self.l),
            joint=joint,
            **stats,
        )

    def _counts(self, counts: Sequence[int]) -> tuple[tuple[Hashable, int], ...]:
        """(value, how many of the selected people hold it) for every value held, in value order."""
        return tuple((v, int(t)) for v, t in zip(self.universe.values, counts) if t)

    def _with_answer(self, sets: list[frozenset[int]], answer: Answer, report: DeltaReport) -> Knowledge:
        if report.possible is not None:  # the nested path: no solve
            branches = report.possible(answer)
            if not branches:
                raise ValueError("the secret table contradicts the public knowledge")
            return restricted(self.knowledge, sets, answer, branches)
        if report.answers is not None:
            return restricted(self.knowledge, sets, answer, report.answers[answer])
        restricted_g = self.knowledge.restrict(answer_facts(sets, answer))
        if not restricted_g.branches:
            raise ValueError("the secret table contradicts the public knowledge")
        return restricted_g

    def _read_secret(self, sets: list[frozenset[int]]) -> Answer:
        if self._secret is None:
            raise RuntimeError("no secret table: this auditor can only simulate")
        counts = []
        for s in sets:
            ids = [self.universe.people[p] for p in sorted(s)]
            counts.append(self.universe.counts_of([plain(v) for v in self._secret(ids)]))
        return tuple(counts)

    # -- delay and joint strategies --------------------------------------------------------------
    def _revisit_pool(self) -> None:
        """Knowledge changed: pooled queries may now be decidable."""
        changed = True
        while changed and self.pool:
            changed = self._delay_round() if self.strategy == "delay" else self._joint_round()

    def _delay_round(self) -> bool:
        """Definition 5: answer a delayed query iff Delta(q_v, G, l) is empty."""
        for pending in list(self.pool):
            sets = [self.universe.members(pending.ids)]
            work = self.new_work()
            try:
                report = decide_delta(self.knowledge, sets, self.l, work, need=self.l)
            except BudgetExceeded:
                continue
            if report.empty:
                self.pool.remove(pending)
                stats = DecisionStats(
                    floor_delta=None,
                    solves=work.solves,
                    work=work.used,
                    unsafe_answers=0,
                    possible_answers=None if report.answers is None else len(report.answers),
                )
                self.resolved.append(self._consult(pending.query_id, pending.ids, sets, report, stats))
                return True
        return False

    def _joint_round(self) -> bool:
        """Definition 6: find pooled queries that together pass the check, decide them at once.

        The definition's trigger (sum of the separate floor(Delta) >= l) only selects candidates;
        the group is then checked as one compound query against every instance (the "subtlety"
        the thesis discusses), since the summed floors can overstate the uncertainty.
        """
        if len(self.pool) < 2:
            return False
        floors = {}
        for pending in self.pool:
            work = self.new_work()
            try:
                rep = compute_delta(self.knowledge, [self.universe.members(pending.ids)], self.l, work)
            except BudgetExceeded:
                continue
            floors[pending.query_id] = rep.floor() or 0
        for size in range(2, min(self.max_joint, len(self.pool)) + 1):
            for group in itertools.combinations(self.pool, size):
                if any(p.query_id not in floors for p in group):
                    continue
                if sum(floors[p.query_id] for p in group) < self.l:
                    continue
                sets = [self.universe.members(p.ids) for p in group]
                work = self.new_work()
                try:
                    report = compute_delta(self.knowledge, sets, self.l, work, need=self.l)
                except BudgetExceeded:
                    continue
                if not report.is_safe_query(self.l):
                    continue
                self._decide_group(group, sets, report, work)
                return True
        return False

    def _decide_group(
        self, group: tuple[Pending, ...], sets: list[frozenset[int]], report: DeltaReport, work: Work
    ) -> None:
        for p in group:
            self.pool.remove(p)
        names = tuple(p.query_id for p in group)
        stats = DecisionStats(
            floor_delta=report.floor(),
            solves=work.solves,
            work=work.used,
            possible_answers=None if report.answers is None else len(report.answers),
            unsafe_answers=None if report.everything or report.implicit else len(report.unsafe),
        )
        answer = None if report.everything else self._read_secret(sets)
        if answer is None or answer in report.unsafe:
            if answer is not None:
                self.knowledge = Knowledge.union(
                    self.universe, [restricted(self.knowledge, sets, a, b) for a, b in report.unsafe.items()]
                )
            for p in group:
                self.resolved.append(
                    Decision(
                        p.query_id,
                        "positive-denial",
                        joint=names,
                        reason=reasons.joint_denied(self.l, names),
                        **stats,
                    )
                )
            return
        self.knowledge = self._with_answer(sets, answer, report)
        for p, counts in zip(group, answer):
            self.resolved.append(
                Decision(
                    p.query_id,
                    "answer",
                    ids=p.ids,
                    joint=names,
                    values=tuple(self.universe.multiset(counts)),
                    counts=self._counts(counts),
                    reason=reasons.joint_answered(self.l, names),
                    **stats,
                )
            )

    # -- persistence -----------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot of everything the auditor must remember."""
        return {
            "format": STATE_FORMAT,
            "l": self.l,
            "budget": self.budget,
            "request_budget": self.request_budget,
            "strategy": self.strategy,
            "max_joint": self.max_joint,
            "grid": None if self.grid is None else self.grid.to_state(),
            "snap": self.snap,
            "after_denial": self.after_denial,
            "universe": self.universe.fingerprint(),
            "knowledge": self.knowledge.to_state(),
            "pool": [{"query_id": p.query_id, "ids": [plain(i) for i in p.ids]} for p in self.pool],
            "counter": self._counter,
        }

    @classmethod
    def from_state(
        cls,
        state: dict[str, Any],
        population: pd.DataFrame,
        sensitive_values: Sequence[Hashable],
        secret: SecretReader | None = None,
        *,
        id_column: str | None = None,
    ) -> Auditor:
        """Rebuild an auditor after a restart; the population and values must be the same."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"not an auditor state ({state.get('format')!r})")
        open_world = state["universe"]["totals"] is None
        auditor = cls(
            population,
            sensitive_values,
            state["l"],
            secret,
            id_column=id_column,
            budget=legacy_budget(state),
            strategy=state["strategy"],
            open_world=open_world,
            max_joint=state["max_joint"],
            grid=Grid.from_state(state["grid"]) if state.get("grid") else None,  # older states: none
            snap=state.get("snap", True),
            after_denial=state.get("after_denial", LEGACY_POLICY),  # older states: as before issue 31
            request_budget=state.get("request_budget"),  # older states: none (the flows set one)
        )
        if auditor.universe.fingerprint() != state["universe"]:
            raise ValueError("the population or the sensitive values differ from the saved state")
        auditor.knowledge = Knowledge.from_state(auditor.universe, state["knowledge"])
        auditor.pool = [Pending(p["query_id"], tuple(p["ids"])) for p in state["pool"]]
        auditor._counter = state["counter"]
        return auditor

    def _next_id(self) -> str:
        self._counter += 1
        return f"q{self._counter}"

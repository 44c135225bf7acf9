"""Delta(q, G, l) and the l-uncertainty simulatable strategy (Definitions 2-4, Algorithms 1-2).

A query may be a single set of people or several sets decided together (the joint strategy); an
*answer* is then one multiset per set. For every possible answer m:
    m is unsafe  <=>  some set's multiset has fewer than l distinct values, or
                      G restricted to m leaves some person fewer than l possible values.
Delta = the instances of G whose answer is unsafe = union over unsafe m of (G and q = m).
The query is l-safe (l SQ) when Delta is empty or every person keeps at least l values across
Delta; only then may the secret table be read.

Everything here is a function of (G, q, l) and never of the secret table: that is what makes the
first stage simulatable.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from privpub.tasks.audit.exchange import fact_structure, never_pinned
from privpub.tasks.audit.knowledge import Knowledge
from privpub.tasks.audit.program import BudgetExceeded, CellProgram, Constraint, Work
from privpub.tasks.audit.witness import witness_coverage

Answer = tuple[tuple[int, ...], ...]  # per query set, count per value index


@dataclass
class DeltaReport:
    """What the simulatable stage found for one query (all of it computable by the adversary)."""

    answers: dict[Answer, list[int]] | None  # possible answer -> branches; None when not listed
    unsafe: dict[Answer, list[int]]  # unsafe answer -> branches where possible (empty if everything)
    coverage: list[set[Hashable]] = field(default_factory=list)  # per person: values held across Delta
    everything: bool = False  # Delta = G: every answer is unsafe
    shortcut: str = ""  # how the result was obtained when not by listing answers
    implicit: bool = False  # Delta is not empty but its answers were not listed (route 4)
    # the nested path (nested.py), which lists no answers: the branches where an answer is possible
    possible: Callable[[Answer], list[int]] | None = None

    @property
    def empty(self) -> bool:
        return not self.everything and not self.unsafe and not self.implicit

    def floor(self) -> int | None:
        """The thesis's floor(Delta): least number of values a person holds across Delta
        (None for an empty Delta, which narrows nobody)."""
        if self.empty:
            return None
        return min(len(s) for s in self.coverage)

    def is_safe_query(self, l: int) -> bool:
        floor = self.floor()  # None: empty
        return floor is None or floor >= l


def distinct_count(counts: Iterable[int]) -> int:
    return sum(1 for t in counts if t)


def answer_facts(sets: list[frozenset[int]], answer: Answer) -> list[Constraint]:
    return [Constraint(s, counts) for s, counts in zip(sets, answer)]


def restricted(g: Knowledge, sets: list[frozenset[int]], answer: Answer, branches: list[int]) -> Knowledge:
    """G and q = answer, built only from the branches where that answer is possible."""
    facts = tuple(answer_facts(sets, answer))
    return Knowledge(g.universe, [g.branches[b] + facts for b in branches])


def possible_answers(g: Knowledge, sets: list[frozenset[int]], work: Work) -> dict[Answer, list[int]]:
    answers: dict[Answer, list[int]] = {}
    for b, branch in enumerate(g.branches):
        for a in g.program(branch, sets).answers(work):
            answers.setdefault(a, []).append(b)
    return answers


def compute_delta(
    g: Knowledge,
    sets: list[frozenset[int]],
    l: int,
    work: Work,
    need: int | None = None,
    list_answers: bool = False,
    witness: bool = True,
) -> DeltaReport:
    """Delta(q, G, l) as the unsafe answers, plus the coverage of every person across it.

    `need` bounds the coverage sets (each exact below `need`); None gives the exact floor(Delta).
    Five exact routes, cheapest first:
    1. a group of < l people determined by any answer: Delta = G;
    2. no group can be narrowed to < l values by any answer (checked by one integer program per
       group): the unsafe answers are exactly those with < l distinct values, listed directly;
    3. every group that can hold < l values in some instance is *derived* (its multiset is a
       linear function of the answer): the unsafe answers are the low-diversity ones of the
       query and of those groups, each found by one integer program per value choice;
    4. (with `need`, Algorithm 2's question) instances of Delta show everyone keeping `need`
       values: l-safe, the unsafe answers left unlisted (`implicit`; witness.py). Tried before
       routes 2-3 when their low-diversity listings outnumber the values;
    5. otherwise list every possible answer and test each (always, with `list_answers`).
    """
    materialize(g, work)
    if list_answers:
        return listed_delta(g, sets, l, work, need)
    if all_answers_unsafe(g, sets, l, work):
        return DeltaReport(
            None,
            {},
            g.possible_values(work, need=need),
            everything=True,
            shortcut="a group of fewer than l people is determined by any answer",
        )
    # Routes 2 and 3 list the low-diversity answers: one restricted listing per choice of l - 1
    # values, C(values, l - 1) of them (1,225 for 50 values and l = 3). When the choices that can
    # fill the query at all are more than one per value, route 4 goes first: it needs a few of
    # those regions, not all of them.
    witness_first = low_diversity_listings(g, sets, l, limit=len(g.universe.values)) > len(g.universe.values)
    if need is not None and witness and witness_first:
        report = witness_report(g, sets, l, work, need)
        if report is not None:
            return report
    if l >= 2:
        narrow = narrowable_groups(g, sets, l, work)
        if narrow is not None:
            candidates = low_diversity_answers(g, sets, l, work)
            for cell in narrow:
                for a in derived_low_diversity_answers(g, sets, l, work, cell):
                    candidates.setdefault(a, [0])
            report = classify(g, sets, l, work, need, candidates, assume_pins=False)
            report.shortcut = (
                "only answers with fewer than l distinct values are unsafe"
                if not narrow
                else "only answers giving the query or a derived group fewer than l values are unsafe"
            )
            return report
    if need is not None and witness and not witness_first:
        report = witness_report(g, sets, l, work, need)
        if report is not None:
            return report
    return listed_delta(g, sets, l, work, need)


def low_diversity_listings(g: Knowledge, sets: list[frozenset[int]], l: int, limit: int) -> int:
    """How many restricted listings routes 2-3 would solve for the query's low-diversity answers:
    the (branch, set, l - 1 values) choices `can_fill` does not rule out without a solve (counting
    stops above `limit`). It orders the routes only (every route is exact): C(values, l - 1) can be
    1,225, but on queries aligned to a grid of large cells most choices cannot fill the query and
    cost nothing, so routes 2-3 go first when few are left (issue 31)."""
    n_values = len(g.universe.values)
    if math.comb(n_values, max(l - 1, 0)) <= limit:  # no more than the values: nothing to count
        return math.comb(n_values, max(l - 1, 0))
    count = 0
    for branch in g.branches:
        prog = g.program(branch, sets)
        for i in range(len(sets)):
            inside = np.flatnonzero(prog.cell_inside_open[i])
            usable = [v for v in range(n_values) if len(prog.answer_vars[i][v])]
            for chosen in itertools.combinations(usable, min(l - 1, len(usable))):
                count += can_fill(prog, inside, list(chosen))
                if count > limit:
                    return count
    return count


def witness_report(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work, need: int) -> DeltaReport | None:
    """Route 4: Delta is not empty and everyone keeps >= l values across it (unsafe answers not
    listed), or None when its regions do not show that."""
    coverage = witness_coverage(g, sets, l, work, need)
    if coverage is None:
        return None
    return DeltaReport(
        None, {}, coverage, implicit=True, shortcut="instances of Delta show everyone keeping at least l values"
    )


def materialize(g: Knowledge, work: Work) -> Knowledge:
    """List the branches of an implicit G (a positive denial decided by route 4) under `work`:
    Delta(sets, base, l) by routes 1-3 or by listing. G stays implicit when the budget runs out
    (BudgetExceeded propagates: the decision is denied, simulatably, as G is the adversary's)."""
    if g.denial is None:
        return g
    d = g.denial
    try:
        report = compute_delta(d.base, list(d.sets), d.l, work, need=d.l, witness=False)
    except BudgetExceeded as err:  # say why: every later query waits for this listing
        raise BudgetExceeded(f"listing what an earlier positive denial revealed: {err}") from None
    if report.everything:
        g.set_branches(d.base.branches)
    else:
        g.set_branches([b for a, bs in report.unsafe.items() for b in restricted(d.base, list(d.sets), a, bs).branches])
    return g


def answer_is_unsafe(g: Knowledge, sets: list[frozenset[int]], answer: Answer, l: int) -> tuple[bool, Knowledge]:
    """Definition 2 for one answer, exactly (no budget: it runs after the secret was read, when
    the outcome may not depend on the auditor's limits); with G and q = answer, which is the
    new knowledge when the answer is safe."""
    after = g.restrict(answer_facts(sets, answer))
    if not after.branches:
        raise ValueError("the secret table contradicts the public knowledge")
    if any(distinct_count(m) < l for m in answer):
        return True, after
    return min(len(s) for s in after.possible_values(Work(), need=l)) < l, after


def listed_delta(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work, need: int | None) -> DeltaReport:
    answers = possible_answers(g, sets, work)
    report = classify(g, sets, l, work, need, answers, assume_pins=True)
    report.answers = answers
    return report


def classify(
    g: Knowledge,
    sets: list[frozenset[int]],
    l: int,
    work: Work,
    need: int | None,
    candidates: dict[Answer, list[int]],
    assume_pins: bool,
) -> DeltaReport:
    """Sort candidate answers into unsafe ones and accumulate the coverage across them.

    With assume_pins=False every candidate is already known to be unsafe."""
    unsafe: dict[Answer, list[int]] = {}
    coverage: list[set[Hashable]] = [set() for _ in range(g.universe.n)]
    check = l if need is None else max(l, need)
    for answer, branches in candidates.items():
        after = restricted(g, sets, answer, branches)
        if assume_pins and not any(distinct_count(m) < l for m in answer):
            values_after = after.possible_values(work, need=check)
            if min(len(s) for s in values_after) >= l:
                continue
            unsafe[answer] = branches
            if need is not None:  # the bounded sets suffice for a bounded coverage
                merge(coverage, values_after)
                continue
        unsafe[answer] = branches
        if need is None or any(len(s) < need for s in coverage):
            merge(coverage, after.possible_values(work, need=need))
    return DeltaReport(None, unsafe, coverage)


def row_space_projector(rows: np.ndarray) -> np.ndarray:
    """The orthogonal projector onto the span of `rows` (a cell's unit vector lies in the span
    exactly when its diagonal entry is 1)."""
    if rows.size == 0:
        return np.zeros((rows.shape[1], rows.shape[1]))
    _, sing, vt = np.linalg.svd(rows, full_matrices=False)
    basis = vt[sing > sing.max() * max(rows.shape) * 1e-12]
    projector: np.ndarray = basis.T @ basis
    return projector


SPAN_TOL = 1e-7


def spanning_rows(
    g: Knowledge, branch: Sequence[Constraint], prog: CellProgram, sets: Sequence[frozenset[int]]
) -> tuple[np.ndarray, np.ndarray]:
    """Indicator rows over the cells: (population if closed, released facts) and the query sets."""
    cell_ids = np.array([int(cell[0]) for cell in prog.cells], dtype=np.int64)
    fixed = [np.ones(len(prog.cells))] if g.universe.totals is not None else []
    fixed += [np.isin(cell_ids, list(c.members)).astype(float) for c in branch]
    query = [np.isin(cell_ids, list(s)).astype(float) for s in sets]
    shape = (0, len(prog.cells))
    return (
        np.array(fixed).reshape(-1, len(prog.cells)) if fixed else np.zeros(shape),
        np.array(query).reshape(-1, len(prog.cells)) if query else np.zeros(shape),
    )


def exact_combination(rows: np.ndarray, cell: int) -> bool:
    """Is the unit vector of `cell` a rational combination of `rows` with a nonzero share of the
    last row (the query)? Checked exactly, with the least-squares coefficients rounded to
    fractions, so a float near-miss can only make the answer False (a slower exact route)."""
    target = np.zeros(rows.shape[1])
    target[cell] = 1.0
    coef, *_ = np.linalg.lstsq(rows.T, target, rcond=None)
    fracs = [Fraction(float(c)).limit_denominator(10**6) for c in coef]
    if fracs[-1] == 0:
        return False
    total = [Fraction(0)] * rows.shape[1]
    for f, row in zip(fracs, rows):
        if f:
            for j in np.flatnonzero(row):
                total[j] += f
    return all(t == (1 if j == cell else 0) for j, t in enumerate(total))


def narrowable_groups(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work) -> list[int] | None:
    """The groups (cells) an answer could narrow, when routes 2 and 3 apply; None otherwise.

    Returns [] when no group can hold < l distinct values in any instance (route 2): a group
    pinned by some answer holds < l values in every instance of that answer. Otherwise, with one
    branch and one query set, returns the narrowable cells when each is *derived from the query*:
    its indicator is a combination of the population, the facts and q with a nonzero share of q,
    so its multiset is a one-to-one function of the answer and its people hold exactly the
    multiset's values. Such a group is pinned exactly by the answers giving it < l values.
    A narrowable group that is not derived (or is derived without q) gives None: only listing
    every answer is exact then.
    A group that is a whole query set is skipped: its possible values are exactly its answer's
    values, so that case is the low-diversity one.
    """
    single = len(g.branches) == 1 and len(sets) == 1
    found: list[int] = []
    for branch in g.branches:
        prog = g.program(branch, sets)
        if prog.solve(work) is None:
            continue
        known = [k.members for k in branch]
        derived = np.zeros(len(prog.cells), dtype=bool)
        if single:
            fixed_rows, query_rows = spanning_rows(g, branch, prog, sets)
            with_q = np.diag(row_space_projector(np.vstack([fixed_rows, query_rows])))
            without_q = np.diag(row_space_projector(fixed_rows))
            derived = (with_q > 1 - SPAN_TOL) & (without_q < 1 - SPAN_TOL)
            rows = np.vstack([fixed_rows, query_rows])
            for c in np.flatnonzero(derived).tolist():  # the float test is confirmed by exact arithmetic
                derived[c] = exact_combination(rows, c)
        exchange = None  # (facts, counts, patterns), built for the first non-derived narrowable group
        # non-derived groups first: one narrowable among them ends the search
        for c in sorted(range(len(prog.cells)), key=lambda c: derived[c]):
            cell = prog.cells[c]
            if any(len(s) == len(cell) and int(cell[0]) in s for s in sets):
                continue
            if g.universe.totals is None and not any(int(cell[0]) in s for s in known + list(sets)):
                continue  # open world, in no set: every value stays possible whatever the answer
            if prog.can_be_narrow(work, c, l - 1):
                if not derived[c]:
                    if not single or l != 2 or g.universe.totals is None:
                        return None
                    exchange = exchange or fact_structure(fixed_rows, query_rows, branch, g.universe.totals)
                    if not never_pinned(prog, *exchange, c):
                        return None
                    continue  # no answer pins it (exchange.py)
                found.append(c)
    return found


def derived_low_diversity_answers(
    g: Knowledge, sets: list[frozenset[int]], l: int, work: Work, cell: int
) -> list[Answer]:
    """The answers giving a derived cell (see narrowable_groups) fewer than l distinct values.

    The cell's multiset determines the answer, so each choice of at most l - 1 values for the
    cell needs one solve (l = 2: the cell all one value) or a short listing (l > 2)."""
    prog = g.program(g.branches[0], sets)
    size = int(prog.sizes[cell])
    usable = [v for v in range(len(g.universe.values)) if prog.var_index[cell, v] >= 0]
    out: list[Answer] = []
    if l == 2:
        for v in usable:
            if prog.ub[cell, v] < size:
                continue
            x = prog.solve(work, at_least={(cell, v): size})
            if x is not None:
                out.append(prog.answer_of(x))
        return out
    for chosen in itertools.combinations(usable, min(l - 1, len(usable))):
        if can_fill(prog, np.array([cell]), list(chosen)):
            out.extend(prog.limited(np.array([cell]), list(chosen)).answers(work))
    return out


def low_diversity_answers(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work) -> dict[Answer, list[int]]:
    """Every possible answer in which some query set holds fewer than l distinct values,
    listed by restricting that set to each choice of l - 1 values (l = 2 and one set: the set
    all one value, one solve per value)."""
    out: dict[Answer, list[int]] = {}
    n_values = len(g.universe.values)
    for b, branch in enumerate(g.branches):
        prog = g.program(branch, sets)
        if l == 2 and len(sets) == 1:
            size = len(sets[0])
            inside = np.flatnonzero(prog.cell_inside_open[0])
            for v in range(n_values):
                if not can_fill(prog, inside, [v]):
                    continue
                if prog.solve(work, fixed={(0, v): size}) is not None:
                    out.setdefault((tuple(size if w == v else 0 for w in range(n_values)),), []).append(b)
            continue
        for i in range(len(sets)):
            inside = np.flatnonzero(prog.cell_inside_open[i])
            usable = [v for v in range(n_values) if len(prog.answer_vars[i][v])]
            for chosen in itertools.combinations(usable, min(l - 1, len(usable))):
                if not can_fill(prog, inside, list(chosen)):
                    continue
                for a in prog.limited(inside, list(chosen)).answers(work):
                    if b not in out.setdefault(a, []):
                        out[a].append(b)
    return out


def can_fill(prog: CellProgram, cells: np.ndarray, values: list[int]) -> bool:
    """Can these cells be filled with these values at all? Each cell needs enough room among
    them (upper bounds of x[c, v]) and, in the closed world, the cells together at most the
    public count of each value. False proves the restricted program infeasible without a solve
    (with 50 values and l = 3, 1,225 value pairs per query are mostly settled here)."""
    room = prog.ub[np.ix_(cells, np.asarray(values))]
    if (room.sum(axis=1) < prog.sizes[cells]).any():
        return False
    per_value = room.sum(axis=0)
    if prog.totals is not None:
        per_value = np.minimum(per_value, np.asarray(prog.totals)[values])
    return bool(per_value.sum() >= prog.sizes[cells].sum())


def merge(coverage: list[set[Hashable]], values: list[set[Hashable]]) -> None:
    for p, vals in enumerate(values):
        coverage[p] |= vals


def all_answers_unsafe(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work) -> bool:
    """True when every answer is unsafe for a structural reason, whatever the values.

    With a single branch, a group of interchangeable people whose indicator vector is a linear
    combination of the released sets, the query sets and the whole population has its multiset
    fixed by the answer (differencing, Table 4's "subtracting F1 from F2"); a group of fewer than
    l people then has fewer than l possible values in every answer. Then Delta = G.
    """
    if len(g.branches) != 1 or l < 2:
        return False
    prog = g.program(g.branches[0], sets)
    if len(prog.cells) == 0:
        return False
    fixed_rows, query_rows = spanning_rows(g, g.branches[0], prog, sets)
    in_span = np.diag(row_space_projector(np.vstack([fixed_rows, query_rows]))) > 1 - SPAN_TOL
    return bool((in_span & (prog.sizes < l)).any())

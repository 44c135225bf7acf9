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
from dataclasses import dataclass, field

import numpy as np

from tasks.audit.knowledge import Knowledge
from tasks.audit.program import Constraint, Work

Answer = tuple[tuple[int, ...], ...]  # per query set, count per value index


@dataclass
class DeltaReport:
    """What the simulatable stage found for one query (all of it computable by the adversary)."""

    answers: dict[Answer, list[int]] | None  # possible answer -> branches; None when not listed
    unsafe: dict[Answer, list[int]]  # unsafe answer -> branches where possible (empty if everything)
    coverage: list[set] = field(default_factory=list)  # per person: values held across Delta
    everything: bool = False  # Delta = G: every answer is unsafe
    shortcut: str = ""  # how the result was obtained when not by listing answers

    @property
    def empty(self) -> bool:
        return not self.everything and not self.unsafe

    def floor(self) -> int | None:
        """The thesis's floor(Delta): least number of values a person holds across Delta
        (None for an empty Delta, which narrows nobody)."""
        if self.empty:
            return None
        return min(len(s) for s in self.coverage)

    def is_safe_query(self, l: int) -> bool:
        return self.empty or self.floor() >= l


def distinct_values(counts: tuple[int, ...]) -> int:
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


def compute_delta(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work,
                  need: int | None = None, list_answers: bool = False) -> DeltaReport:
    """Delta(q, G, l) as the unsafe answers, plus the coverage of every person across it.

    `need` bounds the coverage sets (each exact below `need`); None gives the exact floor(Delta).
    Three exact routes, cheapest first:
    1. a group of < l people determined by any answer: Delta = G;
    2. no group can be narrowed to < l values by any answer (checked by one integer program per
       group): the unsafe answers are exactly those with < l distinct values, listed directly;
    3. otherwise list every possible answer and test each (always, with `list_answers`).
    """
    if list_answers:
        answers = possible_answers(g, sets, work)
        report = classify(g, sets, l, work, need, answers, assume_pins=True)
        report.answers = answers
        return report
    if all_answers_unsafe(g, sets, l, work):
        return DeltaReport(None, {}, g.possible_values(work, need=need), everything=True,
                           shortcut="a group of fewer than l people is determined by any answer")
    if l >= 2 and not any_group_narrowable(g, sets, l, work):
        candidates = low_diversity_answers(g, sets, l, work)
        report = classify(g, sets, l, work, need, candidates, assume_pins=False)
        report.shortcut = "only answers with fewer than l distinct values are unsafe"
        return report
    answers = possible_answers(g, sets, work)
    report = classify(g, sets, l, work, need, answers, assume_pins=True)
    report.answers = answers
    return report


def classify(g, sets, l, work, need, candidates: dict[Answer, list[int]], assume_pins: bool) -> DeltaReport:
    """Sort candidate answers into unsafe ones and accumulate the coverage across them."""
    unsafe: dict[Answer, list[int]] = {}
    coverage = [set() for _ in range(g.universe.n)]
    check = l if need is None else max(l, need)
    for answer, branches in candidates.items():
        after = restricted(g, sets, answer, branches)
        if not any(distinct_values(m) < l for m in answer):
            if not assume_pins:
                continue
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


def any_group_narrowable(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work) -> bool:
    """Could some answer leave a group of interchangeable people with < l possible values?

    Only if some instance gives that group's people < l distinct values, which one integer
    program per group decides. A group that is a whole query set is skipped: its possible
    values are exactly its answer's values, so that case is the low-diversity one.
    """
    for branch in g.branches:
        prog = g.program(branch, sets)
        if prog.solve(work) is None:
            continue
        known = [k.members for k in branch]
        for c, cell in enumerate(prog.cells):
            if any(len(s) == len(cell) and int(cell[0]) in s for s in sets):
                continue
            if g.universe.totals is None and not any(int(cell[0]) in s for s in known + list(sets)):
                continue  # open world, in no set: every value stays possible whatever the answer
            if prog.can_be_narrow(work, c, l - 1):
                return True
    return False


def low_diversity_answers(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work) -> dict[Answer, list[int]]:
    """Every possible answer in which some query set holds fewer than l distinct values,
    listed by restricting that set to each choice of l - 1 values."""
    out: dict[Answer, list[int]] = {}
    n_values = len(g.universe.values)
    for b, branch in enumerate(g.branches):
        prog = g.program(branch, sets)
        for i in range(len(sets)):
            inside = np.flatnonzero(prog.cell_inside_open[i])
            usable = [v for v in range(n_values) if len(prog.answer_vars[i][v])]
            for chosen in itertools.combinations(usable, min(l - 1, len(usable))):
                for a in prog.limited(inside, list(chosen)).answers(work):
                    if b not in out.setdefault(a, []):
                        out[a].append(b)
    return out


def merge(coverage: list[set], values: list[set]) -> None:
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
    all_sets = [c.members for c in g.branches[0]] + list(sets)
    rows = [np.ones(len(prog.cells))] if g.universe.totals is not None else []
    for s in all_sets:
        rows.append(np.array([1.0 if int(cell[0]) in s else 0.0 for cell in prog.cells]))
    basis = np.array(rows)
    rank = np.linalg.matrix_rank(basis)
    for c, size in enumerate(prog.sizes):
        if size >= l:
            continue
        unit = np.zeros(len(prog.cells))
        unit[c] = 1.0
        if np.linalg.matrix_rank(np.vstack([basis, unit])) == rank:
            return True
    return False

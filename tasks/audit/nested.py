"""The nested path (issue 31): Delta(q, G, l) with no solver and no budget when every branch of G
and the query form a tree (laminar.py).

In one branch, an answer is base + x with x a multiset of size a drawn from the split region's
multiset c (or free). G and q = answer keeps every region but splits R into A (holding x) and B
(holding c - x), so x is unsafe iff
    |supp(x)| < l (A's people), or B is not empty and |supp(c - x)| < l (B's people)
(|supp(base + x)| < l implies the first), and every x is unsafe when a person outside R already
has fewer than l values (then Delta = G). A query that splits nothing (A empty) has one answer,
base: Delta is G or empty. The unsafe x are listed directly: for each choice W of l - 1 values,
the splits of c with x, or c - x, inside W (C(values, l - 1) choices, each a short run of bounded
compositions). Across Delta, a person outside R keeps their region's
values; A's people hold the union of supp(x) and B's the union of supp(c - x) over the unsafe x.
When every possible x is unsafe (their count is a closed-form coefficient), Delta = G.

With several branches (after a positive denial) an answer is possible in some of them, and its
safety depends on the union of what each person can hold across those: every branch's possible
answers are listed and merged, up to MAX_LISTED (answer, branch) pairs (a count, so the choice is
deterministic); beyond it, or when some branch is not laminar with the query, the other routes
decide (decide.compute_delta).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Sequence

import numpy as np

from privpub.tasks.audit.decide import Answer, DeltaReport, compute_delta, distinct_count
from privpub.tasks.audit.knowledge import Knowledge
from privpub.tasks.audit.laminar import RegionSplit, split_of
from privpub.tasks.audit.program import Work

ENABLED = True  # tests/benchmarks/bench_audit.py --no-nested turns it off to measure the other routes beside it
MAX_LISTED = 20_000  # (answer, branch) pairs a several-branch decision may list
ROUTE = "nested"


def decide_delta(g: Knowledge, sets: list[frozenset[int]], l: int, work: Work, need: int | None = None) -> DeltaReport:
    """Algorithm 2's Delta: the nested path when it applies, else the other routes (compute_delta)."""
    report = nested_delta(g, sets, l)
    return report if report is not None else compute_delta(g, sets, l, work, need=need)


def nested_delta(g: Knowledge, sets: list[frozenset[int]], l: int) -> DeltaReport | None:
    """Delta(q, G, l) exactly by the nested path, or None when it does not apply (several query
    sets, an implicit G, a family that is not laminar, too many answers across branches)."""
    if not ENABLED or len(sets) != 1 or g.denial is not None or not g.branches:
        return None
    u = g.universe
    splits = [split_of(u.n, u.totals, len(u.values), b, sets[0]) for b in g.branches]
    if any(s is None for s in splits):
        return None
    if len(splits) == 1:
        return one_branch(g, splits[0], l)  # type: ignore[arg-type]
    return several_branches(g, splits, l)  # type: ignore[arg-type]


# -- one branch: closed form ---------------------------------------------------------------------
def one_branch(g: Knowledge, s: RegionSplit, l: int, branches: list[int] | None = None) -> DeltaReport:
    """Delta when every answer is possible in all `branches` (default: the one branch) alike."""
    branches = [0] if branches is None else branches
    present = s.present()
    if s.a == 0:  # the answer is fixed: Delta is G or empty
        low = distinct_count(s.base) < l or (s.support[present].sum(axis=1) < l).any()
        return report_for(g, s, {}, bool(low), branches)
    others = present.copy()
    others[s.a_id] = False
    if s.pool is not None:  # a free B keeps the whole domain: it counts among the others
        others[s.b_id] = False
    if (s.support[others].sum(axis=1) < l).any():
        return report_for(g, s, {}, True, branches)
    xs = low_splits(s, l)
    if len(xs) == count_splits(s.pool, s.a, s.support.shape[1]):
        return report_for(g, s, {}, True, branches)
    unsafe: dict[Answer, list[int]] = {answer_of(s, x): branches for x in xs}
    report = report_for(g, s, unsafe, False, branches)
    if xs:
        x = np.array(sorted(xs), dtype=np.int64)
        support = s.support.copy()
        support[s.a_id] = (x > 0).any(axis=0)
        if s.pool is not None and s.b > 0:
            support[s.b_id] = ((s.pool - x) > 0).any(axis=0)
        report.coverage = coverage_of(g, s.label, support)
    return report


def report_for(
    g: Knowledge, s: RegionSplit, unsafe: dict[Answer, list[int]], everything: bool, branches: list[int]
) -> DeltaReport:
    """The DeltaReport of one_branch; answers are never listed, `possible` says where one is."""
    coverage = coverage_of(g, s.label, s.support) if everything else []
    return DeltaReport(
        None,
        unsafe,
        coverage,
        everything=everything,
        shortcut=ROUTE,
        possible=lambda answer: list(branches) if possible_in(s, answer) else [],
    )


def possible_in(s: RegionSplit, answer: Answer) -> bool:
    if len(answer) != 1:
        return False
    return s.possible(np.asarray(answer[0], dtype=np.int64) - s.base)


def answer_of(s: RegionSplit, x: Sequence[int] | np.ndarray) -> Answer:
    return (tuple(int(t) for t in s.base + np.asarray(x, dtype=np.int64)),)


def low_splits(s: RegionSplit, l: int) -> set[tuple[int, ...]]:
    """Every unsafe x (A's multiset, A not empty): at most l - 1 values in x or (B not empty) in
    c - x. (|supp(base + x)| < l needs no listing of its own: supp(x) is part of it.)"""
    n_values = s.support.shape[1]
    usable = list(range(n_values)) if s.pool is None else np.flatnonzero(s.pool).tolist()
    width = min(l - 1, len(usable))
    out: set[tuple[int, ...]] = set()
    for chosen in itertools.combinations(usable, width):  # A's people hold < l values
        out.update(on_values(s, chosen, s.a))
    if s.pool is not None and s.b > 0:  # B's people hold < l values
        for chosen in itertools.combinations(usable, width):
            out.update(tuple(int(c - y) for c, y in zip(s.pool, rest)) for rest in on_values(s, chosen, s.b))
    return out


def on_values(s: RegionSplit, chosen: Sequence[int], total: int) -> Iterator[tuple[int, ...]]:
    """Every multiset of `total` values taken from `chosen` within the split region's counts."""
    caps = [total if s.pool is None else int(s.pool[v]) for v in chosen]
    for parts in compositions(caps, total):
        x = [0] * s.support.shape[1]
        for v, t in zip(chosen, parts):
            x[v] = t
        yield tuple(x)


def compositions(caps: list[int], total: int) -> Iterator[tuple[int, ...]]:
    """Every (t_1..t_k) with 0 <= t_i <= caps[i] and sum total."""
    if not caps:
        if total == 0:
            yield ()
        return
    room = sum(caps[1:])
    for t in range(max(0, total - room), min(caps[0], total) + 1):
        for rest in compositions(caps[1:], total - t):
            yield (t, *rest)


def count_splits(pool: np.ndarray | None, a: int, n_values: int) -> int:
    """How many multisets of size a the split region can give A: the coefficient of t^a in
    prod_v (1 + t + ... + t^c_v), or C(a + values - 1, values - 1) when the region is free."""
    if pool is None:
        return math.comb(a + n_values - 1, n_values - 1)
    ways = [1] + [0] * a
    for cap in pool.tolist():
        prefix = list(itertools.accumulate(ways))
        ways = [prefix[t] - (prefix[t - cap - 1] if t > cap else 0) for t in range(a + 1)]
    return ways[a]


def all_splits(s: RegionSplit) -> Iterator[tuple[int, ...]]:
    return on_values(s, list(range(s.support.shape[1])), s.a)


# -- several branches: listed and merged ---------------------------------------------------------
def several_branches(g: Knowledge, splits: list[RegionSplit], l: int) -> DeltaReport | None:
    cells, cell_of = np.unique(np.stack([s.label for s in splits]), axis=1, return_inverse=True)
    cell_of = np.asarray(cell_of).reshape(-1)
    alike = one_split(splits, cells, cell_of)
    if alike is not None:  # every answer is possible in every branch: one branch, values merged
        return one_branch(g, alike, l, list(range(len(splits))))
    return listed_branches(g, splits, l, cells, cell_of)


def one_split(splits: list[RegionSplit], cells: np.ndarray, cell_of: np.ndarray) -> RegionSplit | None:
    """When the query splits every branch the same way (same people in A and in B, same base,
    same split multiset: e.g. a query away from what a positive denial left open), the branches
    have the same answers, and across those a person holds the union of their values in each
    branch: one RegionSplit over the cells (people labelled alike in every branch) with merged supports.
    None otherwise."""
    first = splits[0]

    def key(j: int, s: RegionSplit) -> tuple[int, int, bytes, bytes | None, bytes, bytes]:
        pool = None if s.pool is None else s.pool.tobytes()
        return (s.a, s.b, s.base.tobytes(), pool, (cells[j] == s.a_id).tobytes(), (cells[j] == s.b_id).tobytes())

    if any(key(j, s) != key(0, first) for j, s in enumerate(splits)):
        return None
    n_cells = cells.shape[1]
    support = np.zeros((n_cells + 1, first.support.shape[1]), dtype=bool)  # the last row: an empty B
    for j, s in enumerate(splits):
        support[:n_cells] |= s.support[cells[j]]
    if first.a == 0:
        return RegionSplit(cell_of, support, first.base, first.pool, 0, 0, -1, -1)
    a_cells = np.flatnonzero(cells[0] == first.a_id)
    b_cells = np.flatnonzero(cells[0] == first.b_id)
    b_id = int(b_cells[0]) if len(b_cells) else n_cells
    return RegionSplit(cell_of, support, first.base, first.pool, first.a, first.b, int(a_cells[0]), b_id)


def listed_branches(
    g: Knowledge, splits: list[RegionSplit], l: int, cells: np.ndarray, cell_of: np.ndarray
) -> DeltaReport | None:
    """Every branch's answers listed and merged (the branches' answers differ)."""
    n_values = len(g.universe.values)
    if sum(1 if s.a == 0 else count_splits(s.pool, s.a, n_values) for s in splits) > MAX_LISTED:
        return None
    merged: dict[Answer, tuple[list[int], np.ndarray]] = {}  # answer -> branches, values per cell
    for j, s in enumerate(splits):
        region = cells[j]
        held = s.support[region]
        for x in all_splits(s) if s.a else [()]:
            cover = held.copy()
            if s.a:
                xv = np.asarray(x, dtype=np.int64)
                cover[region == s.a_id] = xv > 0
                if s.pool is not None:
                    cover[region == s.b_id] = (s.pool - xv) > 0
            answer = answer_of(s, x if s.a else np.zeros(n_values, dtype=np.int64))
            if answer in merged:
                merged[answer][0].append(j)
                np.logical_or(merged[answer][1], cover, out=merged[answer][1])
            else:
                merged[answer] = ([j], cover)
    unsafe = {m: bs for m, (bs, cover) in merged.items() if distinct_count(m[0]) < l or (cover.sum(axis=1) < l).any()}
    covered = np.zeros((cells.shape[1], n_values), dtype=bool)
    for m in unsafe:
        covered |= merged[m][1]
    report = DeltaReport({m: bs for m, (bs, _) in merged.items()}, unsafe, [], shortcut=ROUTE, possible=None)
    if unsafe:
        report.coverage = coverage_of(g, cell_of, covered)
    return report


def coverage_of(g: Knowledge, label: np.ndarray, support: np.ndarray) -> list[set[Hashable]]:
    """Per person, the values their region (or cell) can hold."""
    values = g.universe.values
    per_row = [{values[v] for v in np.flatnonzero(row)} for row in support]
    return [set(per_row[r]) for r in label.tolist()]

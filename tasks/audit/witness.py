"""Route 4 of Delta: prove floor(Delta) >= l from instances of Delta, without listing answers.

Algorithm 2 needs two things from Delta before it reads the secret: is it empty, and if not, does
everyone keep at least l values across it. A large query has too many answers to list, but a
lower bound on everyone's values across Delta suffices for "l-safe" as soon as it reaches l, and
such a bound comes from instances that are *known* to lie in Delta.

Regions inside Delta. Let c be a group of interchangeable people inside the query set q, and S_c
the values its people can hold at all in G (the values the counts of its facts allow; a superset
of its possible values). For any W of l - 1 values, every instance of G in which q holds no value
of S_c - W lies in Delta: with its answer m, the people of c hold, in every instance of G and
q = m, a value of S_c that q holds, hence of W: fewer than l values, so m is unsafe. With
S_c = every value, the region is "q holds only W", the low-diversity answers. Each region is G
with some (cell, value) pairs of q capped at zero: one integer program.

Regions (b) (`heavy_regions`), tried when those above do not suffice: for a cell c and l - 1
values W, "c's side of q holds more values of W than the side's other cells have room for",
so c's people hold only W in every instance of the answer's fiber (outside q through the
complement, whose multiset q's answer fixes in the closed world). The other cells' room is
bounded first in integer arithmetic, then (for the regions that bound leaves empty) by one
LP each, certified by weak duality.

Coverage. People of one cell are interchangeable in G and in q's answer, so an instance of Delta
where a cell holds values V shows each of its people holding each value of V somewhere in Delta
(a swap inside the cell stays in the same fiber). Steered solves in each region collect values
until every cell has l of them. Coverage of a subset of Delta is a lower bound of Delta's, so
when it reaches l for everyone the query is l-safe (and Delta is not empty). When it does not,
this route proves nothing and the caller goes on to list answers.

After the read the real answer is classified by Definition 2 directly (`answer_is_unsafe`).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterator, Sequence

import numpy as np

from privpub.tasks.audit.knowledge import Knowledge
from privpub.tasks.audit.program import CellProgram, Work

MAX_REGIONS = 60  # regions tried per query, smallest banned value sets first


def regions_inside_delta(prog: CellProgram, l: int) -> list[frozenset[int]]:
    """Banned value sets U such that "q holds no value of U" implies an unsafe answer, smallest
    first (a small U is the likeliest to be feasible and the largest region)."""
    inside = np.flatnonzero(prog.cell_inside_open[0])
    supports = {frozenset(np.flatnonzero(prog.ub[c] > 0).tolist()) for c in inside}
    supports.add(frozenset(range(prog.n_values)))  # the low-diversity answers
    banned = set()
    for s in supports:
        for keep in itertools.combinations(sorted(s), min(l - 1, len(s))):
            banned.add(s - frozenset(keep))
    return sorted(banned, key=lambda u: (len(u), sorted(u)))[:MAX_REGIONS]


MAX_HEAVY_VALUE_SETS = 5_000  # value sets W considered for regions (b)


def heavy_regions(prog: CellProgram, l: int, work: Work) -> Iterator[tuple[np.ndarray, float, float]]:
    """Regions (b): for a cell c and l - 1 values W, answers under which the rest of c's side of
    the query cannot hold all of the side's W-values, so c's people hold only W.

    K = an upper bound, over G, of how many of the other cells on c's side hold a value of W.
    c inside q: q holds >= |c| + K values of W, so c holds >= |c| of them in every instance of
    the answer's fiber; c outside q (closed world, where q's answer fixes the complement's
    multiset): q holds <= total(W) - |c| - K of W, same conclusion for the complement.
    Yielded lazily as (answer variables of W, lo, hi), in two passes: first with K = the sum of
    the other cells' rooms min(|d|, d's upper bounds over W) (integer arithmetic, no solve), the
    regions with the most to spare first; then, for the (c, W) that bound left empty, with K from
    one LP each (`Work.upper_bound`, certified by weak duality), at most MAX_REGIONS of them."""
    inside = prog.cell_inside_open[0]
    combos = np.array(
        list(itertools.islice(itertools.combinations(range(prog.n_values), max(l - 1, 1)), MAX_HEAVY_VALUE_SETS)),
        dtype=np.int64,
    )
    if not len(combos):
        return
    room = np.minimum(prog.sizes[:, None], prog.ub[:, combos].sum(axis=2))  # cells x W
    side_room = {True: room[inside].sum(axis=0), False: room[~inside].sum(axis=0)}
    totals = None if prog.totals is None else np.asarray(prog.totals)[combos].sum(axis=1)

    def region(c: int, k: int, rest: int) -> tuple[int, float, float]:
        """(slack, lo, hi) of the region for cell c and W = combos[k], the rest bounded by `rest`."""
        size = int(prog.sizes[c])
        if inside[c]:
            lo = size + rest
            return int(side_room[True][k]) - lo, float(lo), np.inf
        assert totals is not None  # cells outside the query are skipped without totals
        hi = int(totals[k]) - size - rest
        return hi, -np.inf, float(hi)

    def ids(k: int) -> np.ndarray:
        return np.concatenate([prog.answer_vars[0][v] for v in combos[k]])

    ready: list[tuple[int, int, int, int, float, float]] = []
    later: list[tuple[int, int, int, int, float, float]] = []
    for c in range(len(prog.cells)):
        if not inside[c] and totals is None:
            continue
        for k in np.flatnonzero(room[c] >= prog.sizes[c]).tolist():  # c can be filled with W at all
            slack, lo, hi = region(c, k, int(side_room[bool(inside[c])][k] - room[c, k]))
            (ready if slack >= 0 else later).append((-slack, int(prog.sizes[c]), c, int(k), lo, hi))
    for _, _, _, k, lo, hi in sorted(ready):
        yield ids(k), lo, hi
    upper = prog.ub[prog.var_cell, prog.var_value]
    for _, _, c, k, _, _ in sorted(later)[:MAX_REGIONS]:
        rest = np.isin(prog.var_value, combos[k]) & (inside[prog.var_cell] == inside[c]) & (prog.var_cell != c)
        slack, lo, hi = region(c, k, work.upper_bound(rest.astype(np.int64), prog.base.A, prog.base.lb, upper))
        if slack >= 0:
            yield ids(k), lo, hi


def region_is_hopeless(prog: CellProgram, inside: np.ndarray, allowed: np.ndarray) -> bool:
    """Some cell of q cannot be filled with the allowed values: no solve needed."""
    return bool((prog.ub[inside][:, allowed].sum(axis=1) < prog.sizes[inside]).any())


def witness_coverage(
    g: Knowledge, sets: list[frozenset[int]], l: int, work: Work, need: int
) -> list[set[Hashable]] | None:
    """Per person, at least `need` values held across instances of Delta, or None when the
    regions do not show that many for everyone (then nothing is proved)."""
    if len(g.branches) != 1 or len(sets) != 1 or l < 2 or need < l:
        return None
    prog = g.program(g.branches[0], sets)
    if prog.trivially_infeasible or prog.n_vars == 0:
        return None
    inside = np.flatnonzero(prog.cell_inside_open[0])
    covered = np.zeros(prog.ub.shape, dtype=bool)
    regions: list[
        tuple[CellProgram, Sequence[tuple[np.ndarray, float, float]]]
    ] = []  # (program, extra sums) per region, in the order tried
    for banned in regions_inside_delta(prog, l):
        allowed = np.ones(prog.n_values, dtype=bool)
        allowed[list(banned)] = False
        if not region_is_hopeless(prog, inside, allowed):
            regions.append((prog.limited(inside, np.flatnonzero(allowed).tolist()), ()))

    def heavy() -> Iterator[
        tuple[CellProgram, list[tuple[np.ndarray, float, float]]]
    ]:  # regions (b), built only when those of (a) did not suffice
        yield from ((prog, [row]) for row in heavy_regions(prog, l, work))

    for region, sums in itertools.islice(itertools.chain(regions, heavy()), MAX_REGIONS):
        while True:
            short = covered.sum(axis=1) < need
            if not short.any():
                return coverage_of_people(g, prog, covered)
            wanted = short[:, None] & ~covered & (prog.ub > 0)
            steer = np.zeros(prog.n_vars)
            steer[prog.var_index[wanted]] = -1.0
            x = region.solve(work, objective=steer, sums=sums)
            if x is None:
                break
            gained = (x > 0) & wanted
            covered |= x > 0
            if not gained.any():
                break
    return None


def coverage_of_people(g: Knowledge, prog: CellProgram, covered: np.ndarray) -> list[set[Hashable]]:
    values = g.universe.values
    out: list[set[Hashable]] = [set() for _ in range(g.universe.n)]
    for c, cell in enumerate(prog.cells):
        held = {values[v] for v in np.flatnonzero(covered[c])}
        for p in cell:
            out[p] = set(held)
    return out

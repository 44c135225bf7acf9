"""Proofs that no answer of a query can pin a group (l = 2), so routes 2-3 may skip it.

A group d is *pinned* by an answer m when, in every instance of G and q = m, its people hold one
value a. Routes 2-3 are exact only when every group that could be pinned is derived; a group
that cannot be pinned by any answer can be left out of that test.

Exchange. Let d, d2, e, e2 be cells (of the facts and q) whose membership patterns are S, S ^ A,
S ^ B and S ^ A ^ B, for disjoint non-empty sets A, B of facts (q counts as a fact). Moving one
person's value b -> a in d2 and e and a -> b in d and e2 keeps every fact's multiset, q's and
the population's (a set holding one of the four cells holds its partner with the opposite
move): the new instance has the same answer and d holds b. It applies to an instance where d
holds a, e2 holds a and d2, e both hold b.

So if, in *every* instance of G where d is all a, some exchange applies, no answer pins d to a:
its fiber would contain such an instance and the exchanged one. Per exchange, "d2 and e share
some b != a" is shown by values one of them always holds and a lower bound of how many of those
the other holds; where e2 may lack a, the instances where it does are a smaller case proved with
the other exchanges. The bounds are integer arithmetic over the released facts (exact counts),
valid for every instance of the case; a loose bound only fails a proof, never makes one.
For l > 2 (a group pinned to l - 1 values) nothing is proved here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privpub.tasks.audit.program import CellProgram, Constraint

MAX_RECTANGLES = 30  # exchanges tried per (group, value), largest cells first


class FactBounds:
    """Bounds over the instances of G with the (cell, value) upper bounds `ub`: the facts
    (population included in the closed world) fix their multisets exactly."""

    def __init__(self, facts: np.ndarray, counts: np.ndarray, ub: np.ndarray, sizes: np.ndarray):
        self.facts, self.counts, self.ub, self.sizes = facts, counts, ub, sizes

    def upper(self, cells: np.ndarray, values: list[int]) -> int:
        """An upper bound of how many people of `cells` (a mask) hold a value of `values`: a
        cover of those cells by facts (each holds exactly its count of them) and single cells
        (each at most its room), chosen greedily; any cover is a bound."""
        room = np.minimum(self.sizes, self.ub[:, values].sum(axis=1))
        left = cells & (room > 0)
        cost = self.counts[:, values].sum(axis=1)
        used = np.zeros(len(self.facts), dtype=bool)
        total = 0
        while left.any():
            gain = (self.facts & left[None, :]).astype(np.int64) @ room - cost
            gain[used] = -1
            f = int(np.argmax(gain))
            if gain[f] <= 0:
                break
            used[f] = True
            total += int(cost[f])
            left &= ~self.facts[f]
        return total + int(room[left].sum())

    def lower(self, cell: int, values: list[int]) -> int:
        """A lower bound of how many people of `cell` hold a value of `values`: what a fact
        holding the cell must place there after the rest of the fact is full, or what the cell's
        own size leaves after its other values."""
        others = np.ones(self.ub.shape[1], dtype=bool)
        others[values] = False
        best = int(self.sizes[cell]) - int(min(self.sizes[cell], self.ub[cell, others].sum()))
        for f in np.flatnonzero(self.facts[:, cell]):
            rest = self.facts[f].copy()
            rest[cell] = False
            best = max(best, int(self.counts[f, values].sum()) - self.upper(rest, values))
        return best


def rectangles(patterns: np.ndarray, sizes: np.ndarray, d: int) -> list[tuple[int, int, int]]:
    """(d2, e, e2) with patterns S ^ A, S ^ B, S ^ A ^ B (A, B disjoint), largest cells first."""
    index = {p.tobytes(): c for c, p in enumerate(patterns)}
    s = patterns[d]
    found = []
    for d2 in range(len(patterns)):
        if d2 == d:
            continue
        a = s ^ patterns[d2]
        for e in range(d2 + 1, len(patterns)):
            b = s ^ patterns[e]
            if e == d or (a & b).any():
                continue
            e2 = index.get((s ^ a ^ b).tobytes())
            if e2 is not None:
                found.append((-int(min(sizes[d2], sizes[e], sizes[e2])), d2, e, e2))
    return [r[1:] for r in sorted(found)[:MAX_RECTANGLES]]


def never_pinned(prog: CellProgram, facts: np.ndarray, counts: np.ndarray, patterns: np.ndarray, d: int) -> bool:
    """True when exchanges prove that no answer leaves the people of cell d one value (l = 2).

    facts / counts: the released facts and the population as cell masks and multisets;
    patterns: each cell's membership of the facts and the query (the population left out)."""
    sizes = prog.sizes
    rects = rectangles(patterns, sizes, d)
    for a in np.flatnonzero(prog.ub[d] >= sizes[d]):  # values d could be all of
        ub = prog.ub.copy()
        ub[d] = 0
        ub[d, a] = sizes[d]
        if not _always_exchangeable(facts, counts, ub, sizes, rects, int(a), [MAX_CASES]):
            return False
    return True


MAX_CASES = 12  # cases ("e2 holds no a") one (group, value) may split into


def _always_exchangeable(
    facts: np.ndarray,
    counts: np.ndarray,
    ub: np.ndarray,
    sizes: np.ndarray,
    rects: list[tuple[int, int, int]],
    a: int,
    cases: list[int],
) -> bool:
    """Does some exchange apply in every instance of G within `ub` (where d is all a)?

    An exchange whose d2 / e always share a value b != a applies wherever e2 holds a; the
    instances where e2 holds no a are a smaller case (e2's bound on a set to 0), proved the
    same way with the other exchanges. An empty case (a fact or a cell that `ub` cannot fill)
    is proved outright."""
    if (ub.sum(axis=1) < sizes).any() or ((facts.astype(np.int64) @ ub) < counts).any():
        return True  # no instance of G within ub
    bounds = FactBounds(facts, counts, ub, sizes)
    held: dict[int, list[int]] = {}

    def always_held(c: int) -> list[int]:  # values != a that c holds in every instance
        if c not in held:
            held[c] = [b for b in np.flatnonzero(ub[c] > 0).tolist() if b != a and bounds.lower(c, [b]) >= 1]
        return held[c]

    def share(d2: int, e: int) -> bool:
        return any(len(t) and bounds.lower(other, t) >= 1 for t, other in ((always_held(d2), e), (always_held(e), d2)))

    for d2, e, e2 in rects:
        if ub[e2, a] == 0 or not share(d2, e):
            continue
        if bounds.lower(e2, [a]) >= 1:
            return True
        if cases[0] > 0:
            cases[0] -= 1
            without = ub.copy()
            without[e2, a] = 0
            if _always_exchangeable(facts, counts, without, sizes, rects, a, cases):
                return True
    return False


def fact_structure(
    fixed_rows: np.ndarray, query_rows: np.ndarray, branch: Sequence[Constraint], totals: tuple[int, ...] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(facts, counts, patterns) from decide.spanning_rows' indicator rows over the cells (the
    population first in the closed world, then the branch's facts; the query sets)."""
    facts = fixed_rows.astype(bool)
    counts = [f.counts for f in branch] if totals is None else [totals, *(f.counts for f in branch)]
    released = facts if totals is None else facts[1:]
    patterns = np.vstack([released, query_rows.astype(bool)]).T.copy()
    return facts, np.array(counts, dtype=np.int64).reshape(len(facts), -1), patterns

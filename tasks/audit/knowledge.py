"""The knowledge dictionary G: every instance the adversary still considers possible.

An instance assigns a sensitive value to every person. G is kept as a union of *branches*; each
branch is a conjunction of released facts (a set of people and the multiset of their values).
Answers add a fact to every branch; a positive denial replaces G by Delta(q, G, l), the union over
the unsafe answers m of "G and q answers m", which is why G can have several branches.

Two worlds are supported:
- closed (the issue's contract and Section 3.3 of the thesis): the multiset of all sensitive
  values in the table is public, so every instance is a permutation of it;
- open (what the thesis's Table 4-6 and 9-11 examples compute): only the domain of values is
  public and people outside every fact may hold any value of it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privpub.tasks.audit.program import CellProgram, Constraint, Work

Branch = tuple[Constraint, ...]


@dataclass(frozen=True)
class Universe:
    """Public knowledge before any query: the people and the sensitive values."""

    people: tuple[Hashable, ...]
    values: tuple[Hashable, ...]  # distinct values, sorted; value index = position
    totals: tuple[int, ...] | None  # how many people hold each value (closed world), else None
    index: dict[Hashable, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.index.update({p: i for i, p in enumerate(self.people)})

    @classmethod
    def closed(cls, people: Sequence[Hashable], multiset: Sequence[Hashable]) -> Universe:
        if len(multiset) != len(people):
            raise ValueError(f"the public multiset has {len(multiset)} values for {len(people)} people")
        values = sort_values(set(multiset))
        counts = {v: 0 for v in values}
        for v in multiset:
            counts[v] += 1
        return cls(tuple(people), tuple(values), tuple(counts[v] for v in values))

    @classmethod
    def open(cls, people: Sequence[Hashable], domain: Sequence[Hashable]) -> Universe:
        return cls(tuple(people), tuple(sort_values(set(domain))), None)

    @property
    def n(self) -> int:
        return len(self.people)

    def members(self, ids: Sequence[Hashable]) -> frozenset[int]:
        try:
            return frozenset(self.index[i] for i in ids)
        except KeyError as err:
            raise KeyError(f"unknown person id {err.args[0]!r}") from None

    def counts_of(self, values: Sequence[Hashable]) -> tuple[int, ...]:
        pos = {v: k for k, v in enumerate(self.values)}
        counts = [0] * len(self.values)
        for v in values:
            if v not in pos:
                raise ValueError(f"value {v!r} is not among the public sensitive values")
            counts[pos[v]] += 1
        return tuple(counts)

    def multiset(self, counts: Sequence[int]) -> list[Hashable]:
        """Counts per value back to the sorted list of values."""
        return [v for v, t in zip(self.values, counts) for _ in range(t)]

    def fingerprint(self) -> dict[str, Any]:
        return {
            "people": [plain(p) for p in self.people],
            "values": [plain(v) for v in self.values],
            "totals": None if self.totals is None else list(self.totals),
        }


def sort_values(values: Iterable[Any]) -> list[Any]:
    # Any: the values are whatever the table holds, compared as they are when they can be
    try:
        return sorted(values)
    except TypeError:  # mixed types: a stable, documented order
        return sorted(values, key=lambda v: (type(v).__name__, str(v)))


def plain(v: Hashable) -> Hashable:
    """numpy scalars to Python scalars, so states and decisions are JSON-serialisable."""
    return v.item() if isinstance(v, np.generic) else v


@dataclass(frozen=True)
class Denial:
    """G = Delta(sets, base, l): the knowledge after a positive denial whose unsafe answers were
    not listed (decide.py, route 4). `decide.materialize` lists them when a later decision can."""

    base: Knowledge
    sets: tuple[frozenset[int], ...]
    l: int


class Knowledge:
    """G as a union of branches over one universe (immutable: updates return a new object).

    An implicit G (`denial`) has no branches until `decide.materialize` lists them; the set of
    instances it describes never changes, only its representation."""

    def __init__(self, universe: Universe, branches: list[Branch] | None = None, denial: Denial | None = None):
        self.universe = universe
        self.denial = denial
        # one integer point per branch (cell of every person, cells x values), found when the
        # branch was built: a function of G alone, so any program over G starts from it
        self._points: dict[Branch, tuple[np.ndarray, np.ndarray]] = {}
        self._branches: list[Branch] | None = None
        if denial is None:
            self._branches = [()] if branches is None else list(branches)

    @property
    def branches(self) -> list[Branch]:
        if self._branches is None:
            raise RuntimeError("the knowledge is implicit (a positive denial): materialize it first")
        return self._branches

    def set_branches(self, branches: list[Branch]) -> None:
        """The listed form of an implicit G (the same instances)."""
        self._branches, self.denial = list(branches), None

    # -- programs ------------------------------------------------------------------------------
    def program(
        self, branch: Branch, open_sets: Sequence[frozenset[int]] = (), extra: tuple[Constraint, ...] = ()
    ) -> CellProgram:
        u = self.universe
        prog = CellProgram(u.n, u.totals, len(u.values), list(branch) + list(extra), list(open_sets))
        if not extra and branch in self._points:
            prog.seed(*self._points[branch])
        return prog

    def is_empty(self, work: Work | None = None) -> bool:
        work = work or Work()
        return all(self.program(b).solve(work) is None for b in self.branches)

    # -- updates -------------------------------------------------------------------------------
    def restrict(self, facts: list[Constraint], work: Work | None = None) -> Knowledge:
        """G and these facts: add them to every branch, dropping branches that become empty."""
        work = work or Work()
        kept, points = [], {}
        for b in self.branches:
            nb = b + tuple(facts)
            prog = self.program(nb)
            x = prog.solve(work)
            if x is not None:
                kept.append(nb)
                points[nb] = (prog.cell_of, x)
        out = Knowledge(self.universe, kept)
        out._points = points
        return out

    @staticmethod
    def union(universe: Universe, parts: list[Knowledge]) -> Knowledge:
        return Knowledge(universe, [b for k in parts for b in k.branches])

    # -- what the adversary can say about each person -----------------------------------------
    def possible_values(self, work: Work | None = None, need: int | None = None) -> list[set[Hashable]]:
        """For every person, the values they hold in at least one instance of G.

        With `need`, a person's set may stop growing once it has `need` values (sets below
        `need` are always exact).
        """
        work = work or Work()
        found: list[set[Hashable]] = [set() for _ in range(self.universe.n)]
        for b in self.branches:
            prog = self.program(b)
            skip = None
            if need is not None:
                skip = np.array([all(len(found[p]) >= need for p in cell) for cell in prog.cells])
            possible = prog.possible_values(work, need=need, skip=skip)
            if possible is None:
                continue
            for c, cell in enumerate(prog.cells):
                vals = {self.universe.values[v] for v in np.flatnonzero(possible[c])}
                for p in cell:
                    found[p] |= vals
        return found

    def uncertainty(self, work: Work | None = None, need: int | None = None) -> int:
        """The least number of values any person can still hold (0 for an empty G)."""
        sets = self.possible_values(work, need)
        return min((len(s) for s in sets), default=0)

    def views(self, work: Work | None = None) -> list[list[dict[str, Any]]]:
        """Per branch, the views of Section 5.1 (Table 10): groups of interchangeable people with
        their determined values (held in every instance) and possible values (held in some
        instances beyond the determined ones)."""
        work = work or Work()
        u = self.universe
        out = []
        for b in self.branches:
            prog = self.program(b)
            if prog.solve(work) is None:
                continue
            branch_views = []
            for c, cell in enumerate(prog.cells):
                low, high = [], []
                for v in range(len(u.values)):
                    if prog.ub[c, v] == 0:
                        low.append(0)
                        high.append(0)
                        continue
                    obj = np.zeros(prog.n_vars)
                    obj[prog.var_index[c, v]] = 1.0
                    least, most = prog.solve(work, objective=obj), prog.solve(work, objective=-obj)
                    assert least is not None and most is not None  # prog has a point (solved above)
                    low.append(int(least[c, v]))
                    high.append(int(most[c, v]))
                branch_views.append(
                    {
                        "ids": [u.people[p] for p in cell],
                        "determined": u.multiset(low),
                        "possible": [u.values[v] for v in range(len(u.values)) if high[v] > low[v]],
                        "undetermined_slots": len(cell) - sum(low),
                    }
                )
            out.append(branch_views)
        return out

    def view_sets(self, work: Work | None = None) -> list[list[tuple[tuple[Hashable, ...], tuple[Hashable, ...]]]]:
        """The sets of views of Table 11: every way to give each group of interchangeable people
        a multiset of values. Enumerates answers of all cells at once, so it is for small cases
        (explanations and tests), not for decisions."""
        work = work or Work()
        u = self.universe
        out = []
        for b in self.branches:
            base = self.program(b)
            cells = [frozenset(int(p) for p in cell) for cell in base.cells]
            prog = self.program(b, cells)
            for answer in prog.answers(work):
                out.append(
                    [
                        (tuple(u.people[p] for p in sorted(cell)), tuple(u.multiset(counts)))
                        for cell, counts in zip(cells, answer)
                    ]
                )
        return out

    # -- persistence ---------------------------------------------------------------------------
    def to_state(self) -> list[list[dict[str, Any]]] | dict[str, Any]:
        """The branches as lists of facts; an implicit G as {"denied": base, query sets, l}."""
        u = self.universe
        if self.denial is not None:
            return {
                "denied": {
                    "base": self.denial.base.to_state(),
                    "l": self.denial.l,
                    "sets": [[plain(u.people[p]) for p in sorted(s)] for s in self.denial.sets],
                }
            }
        return [
            [
                {
                    "ids": [plain(u.people[p]) for p in sorted(c.members)],
                    "values": [plain(v) for v in u.multiset(c.counts)],
                }
                for c in b
            ]
            for b in self.branches
        ]

    @classmethod
    def from_state(cls, universe: Universe, branches: list[list[dict[str, Any]]] | dict[str, Any]) -> Knowledge:
        if isinstance(branches, dict):
            d = branches["denied"]
            return cls(
                universe,
                denial=Denial(
                    cls.from_state(universe, d["base"]), tuple(universe.members(s) for s in d["sets"]), d["l"]
                ),
            )
        return cls(
            universe,
            [
                tuple(Constraint(universe.members(f["ids"]), universe.counts_of(f["values"])) for f in b)
                for b in branches
            ],
        )

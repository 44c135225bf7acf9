"""Integer programs over groups of interchangeable people.

People who belong to exactly the same released facts (and the same queries under study) are
interchangeable: any instance stays an instance when two of them swap values. So an instance is
summarised, up to such swaps, by the integer matrix x[c, v] = how many people of group (cell) c
hold value v. A set of instances is then the integer points of

    sum_v x[c, v] = |c|                      every cell is filled
    sum_c x[c, v] = total(v)                 the public multiset (closed world only)
    sum_{c in F} x[c, v] = count_F(v)        every released fact F and every fixed answer
    0 <= x[c, v] <= min(|c|, count bounds)

and a person of cell c can hold v exactly when some integer point has x[c, v] >= 1. Every
question the auditor asks (is this answer possible, which values can this person still have) is
a feasibility question on such a program, answered by scipy's MILP solver (HiGHS). Nothing here
enumerates instances.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import highspy
import numpy as np
import numpy.typing as npt
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array


class MilpResult(Protocol):
    """What is read of scipy's `milp` result (scipy ships no type information)."""

    status: int
    message: str
    x: npt.NDArray[np.float64] | None
    fun: float
    mip_node_count: int | None


# units of work per second of CPU, measured on the demo census table (tests/benchmarks/bench_audit_cpu.py:
# 167 at 5,000 rows, 230-290 at 300-1,000; the lowest taken), so that a count can be told in seconds.
# Only words: the limits stay counts, and a decision never depends on the machine.
UNITS_PER_CPU_SECOND = 160


def cpu_seconds(units: int | None) -> str:
    """About how long `units` of work take (the reasons' words): "~1 s", "under 1 s"."""
    if units is None:
        return "no limit"
    seconds = units / UNITS_PER_CPU_SECOND
    return "under 1 s" if seconds < 0.5 else f"~{round(seconds):,} s"


class BudgetExceeded(Exception):
    """Raised when a decision needs more work than its budget (a count, never a duration)."""


class CeilingReached(BudgetExceeded):
    """Raised when a request's checks together need more work than its ceiling (a count too)."""


class Ceiling:
    """The units of work one request (an `ask`, a batch) may spend over all the checks it runs
    (`[audit] request_budget`): its query's, the listing allowance, pooled queries revisited,
    every query of a batch. Each check's Work stops at its own budget or at what the ceiling has
    left, whichever comes first; like the budget it is a count, so a denial by it is a function
    of the history, the query and the limits, never of the machine, its load or the secret."""

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self.used = 0

    def left(self) -> int | None:
        return None if self.limit is None else self.limit - self.used


class Work:
    """Counts the work of one decision and enforces its budget.

    A unit of work is one solve (an LP relaxation, an LP bound or an integer program) or one
    branch-and-bound node an integer program explored (HiGHS's node count). Both counts are
    functions of the program alone, so a budget denial depends on (G, q) and the budget only:
    the same history and query give the same decision on any machine under any load, and never
    on the secret table (which is read only after the check), so the denial is simulatable.
    Each integer program runs with HiGHS's node limit set to the units left; a solver stopped by
    it proves nothing and is a budget denial, never read as "infeasible".
    """

    def __init__(self, budget: int | None = None, ceiling: Ceiling | None = None):
        self.budget = budget
        self.ceiling = ceiling or Ceiling()
        self.solves = 0
        self.nodes = 0
        self._lp_models: dict[int, tuple[csr_array, highspy.Highs]] = {}  # see upper_bound

    @property
    def used(self) -> int:
        """Units of work spent so far (solves + branch-and-bound nodes)."""
        return self.solves + self.nodes

    def left(self) -> int | None:
        """Units left under the budget and the request's ceiling (None: neither is set)."""
        own = None if self.budget is None else self.budget - self.used
        shared = self.ceiling.left()
        return shared if own is None else own if shared is None else min(own, shared)

    def _over(self, units: int) -> type[BudgetExceeded] | None:
        """Which limit `units` more would exceed (the check's budget first), or None."""
        if self.budget is not None and self.used + units > self.budget:
            return BudgetExceeded
        left = self.ceiling.left()
        return CeilingReached if left is not None and units > left else None

    def expect(self, units: int) -> None:
        """Deny now when at least `units` more units are certainly needed and the budget cannot
        hold them: the same denial the work would reach later, reached without the work."""
        over = self._over(units)
        if over is not None:
            raise over(f"at least {units} more solves needed, {self.left()} left")

    def charge(self, solves: int = 1, nodes: int = 0) -> None:
        """Solves (and the branch-and-bound nodes they explored) spent."""
        self.solves += solves
        self.nodes += nodes
        self.ceiling.used += solves + nodes
        if self.budget is not None and self.used > self.budget:
            raise BudgetExceeded(f"more than {self.budget} units of work needed")
        if self.ceiling.limit is not None and self.ceiling.used > self.ceiling.limit:
            raise CeilingReached(f"more than {self.ceiling.limit} units of work needed by this request")

    def run(self, c: npt.NDArray[np.float64], **kw: Any) -> MilpResult:
        """One MILP (or its LP relaxation when no integrality is given), its nodes limited to the
        units left after this solve (HiGHS stops *at* its node limit, even on a tree that the
        last node would have closed, hence the limit one above what may be charged)."""
        self.charge()
        left = self.left()
        if left is not None and kw.get("integrality") is not None:
            kw["options"] = {"node_limit": left + 1}
        res: MilpResult = milp(c, **kw)
        if res.status in (1, 4):  # node/iteration limit or solver trouble: undecided
            shared, own = self.ceiling.left(), None if self.budget is None else self.budget - self.used
            stopped = CeilingReached if shared is not None and (own is None or shared < own) else BudgetExceeded
            raise stopped(f"the integer-program solver stopped early ({res.message})")
        if kw.get("integrality") is not None:
            self.charge(0, int(res.mip_node_count or 0))
        return res

    def upper_bound(self, f: np.ndarray, a: csr_array, b: np.ndarray, upper: np.ndarray) -> int:
        """An upper bound of f.x over the integer points of {a x = b, 0 <= x <= upper} (f, a, b,
        upper integer), certified by weak duality: for ANY multipliers y and every such x,
        f.x = y.(a x) + (f - a^T y).x <= y.b + sum_j upper_j * max(0, (f - a^T y)_j).
        y is the LP's dual (HiGHS, one model per matrix and decision, warm-started across
        objectives), rounded to multiples of 2^-20 so that the bound is computed in exact integer
        arithmetic; a poor y only loosens the bound, never invalidates it."""
        self.charge()
        model = self._lp_model(a, b, upper)
        model.changeColsCost(len(f), np.arange(len(f), dtype=np.int32), np.asarray(f, dtype=float))
        model.run()
        status = model.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:  # G itself has no point
            return 0
        if status != highspy.HighsModelStatus.kOptimal:
            raise BudgetExceeded(f"the LP solver stopped early ({model.modelStatusToString(status)})")
        dual = np.asarray(model.getSolution().row_dual)
        return min(dual_bound(f, a, b, upper, y) for y in (dual, -dual))  # either sign convention

    def _lp_model(self, a: csr_array, b: np.ndarray, upper: np.ndarray) -> highspy.Highs:
        key = id(a)
        if key not in self._lp_models:
            csr = csr_array(a)
            model = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy's Highs.__init__ is unannotated
            model.setOptionValue("output_flag", False)
            model.setOptionValue("threads", 1)
            n = csr.shape[1]
            model.addVars(n, np.zeros(n), np.asarray(upper, dtype=float))
            model.addRows(
                csr.shape[0],
                np.asarray(b, float),
                np.asarray(b, float),
                csr.nnz,
                csr.indptr[:-1].astype(np.int32),
                csr.indices.astype(np.int32),
                csr.data.astype(float),
            )
            model.changeObjectiveSense(highspy.ObjSense.kMaximize)
            self._lp_models[key] = (a, model)  # `a` kept alive so that its id stays its own
        return self._lp_models[key][1]

    def integer_point(
        self, c: np.ndarray, lower: np.ndarray, upper: np.ndarray, constraints: list[LinearConstraint]
    ) -> np.ndarray | None:
        """An integer point of {lower <= x <= upper, constraints} minimising c, or None if none.

        The LP relaxation is solved first, and it decides exactly in two cases: an infeasible
        relaxation has no integer point, and an LP optimum that rounds to a point satisfying every
        constraint exactly is an integer point (with an integer objective within 1/2 of the LP
        optimum, an optimal one: the integer optimum lies between the two and is an integer).
        Otherwise the integer program is solved. `c` must be integer-valued.
        """
        relaxed = self.run(c, bounds=Bounds(lower, upper), constraints=constraints)
        if relaxed.status == 2:  # the relaxation is infeasible, so is the integer program
            return None
        if relaxed.status == 0 and relaxed.x is not None:
            x = np.rint(relaxed.x)
            if satisfied(x, lower, upper, constraints) and c @ x <= relaxed.fun + 0.5:
                return x.astype(np.int64)
        res = self.run(c, integrality=np.ones(len(c)), bounds=Bounds(lower, upper), constraints=constraints)
        if res.status != 0 or res.x is None:
            return None
        return np.rint(res.x).astype(np.int64)


def dual_bound(f: np.ndarray, a: csr_array, b: np.ndarray, upper: np.ndarray, dual: np.ndarray) -> int:
    """floor(y.b + sum_j upper_j * max(0, (f - a^T y)_j)) for y = dual rounded to multiples of
    2^-20, in integer arithmetic: an upper bound of f.x over integer x with a x = b and
    0 <= x <= upper, whatever `dual` is (huge or non-finite multipliers are replaced by 0)."""
    if not np.isfinite(dual).all() or np.abs(dual).max(initial=0) > 1e6:
        dual = np.zeros_like(dual)
    scale = 1 << 20
    f, b, upper = (np.asarray(v).astype(np.int64) for v in (f, b, upper))
    y = np.rint(dual * scale).astype(np.int64)
    reduced = f * scale - csr_array(a).astype(np.int64).T @ y  # integers: exact
    total = sum(int(t) for t in y * b) + sum(int(t) for t in np.maximum(reduced, 0) * upper)
    return total // scale  # f.x is an integer <= total / scale


def satisfied(x: np.ndarray, lower: np.ndarray, upper: np.ndarray, constraints: list[LinearConstraint]) -> bool:
    """Does the integer vector x satisfy the bounds and constraints exactly? (small integer matrices,
    integer right-hand sides: every product is an exact small integer in floating point)."""
    if (x < lower).any() or (x > upper).any():
        return False
    return all(((con.A @ x) >= con.lb).all() and ((con.A @ x) <= con.ub).all() for con in constraints)


def partition_cells(n_people: int, sets: list[frozenset[int]]) -> tuple[list[np.ndarray], np.ndarray]:
    """Group people by which of `sets` they belong to.

    Returns the cells (arrays of person indices, in order of first member) and a boolean
    matrix `inside[s, c]`: cell c lies inside set s.
    """
    membership = np.zeros((len(sets), n_people), dtype=bool)
    for s, members in enumerate(sets):
        if members:
            membership[s, list(members)] = True
    if sets:
        keys = np.packbits(membership, axis=0).T  # one byte-string signature per person
        _, first, cell_of = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        cell_of = np.asarray(cell_of).reshape(-1)
        order = np.argsort(first)  # stable cell numbering: by first member
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        cell_of = rank[cell_of]
        n_cells = len(order)
    else:
        cell_of = np.zeros(n_people, dtype=int)
        n_cells = 1 if n_people else 0
    cells = [np.flatnonzero(cell_of == c) for c in range(n_cells)]
    inside = np.zeros((len(sets), n_cells), dtype=bool)
    for c, people in enumerate(cells):
        inside[:, c] = membership[:, people[0]] if sets else False
    return cells, inside


@dataclass(frozen=True)
class Constraint:
    """A set of people whose multiset of values is fixed: counts[v] people hold value v."""

    members: frozenset[int]
    counts: tuple[int, ...]


class CellProgram:
    """The integer points of one branch of knowledge, with some query sets left open.

    `known` constraints have fixed counts; `open_sets` are query sets whose answer (a count per
    value) is the unknown we reason about. Variables exist only for (cell, value) pairs that the
    constraints do not already force to zero.
    """

    def __init__(
        self,
        n_people: int,
        totals: tuple[int, ...] | None,
        n_values: int,
        known: list[Constraint],
        open_sets: list[frozenset[int]],
    ):
        self.n_values = n_values
        self.totals = totals
        self.open_sets = list(open_sets)
        all_sets = [k.members for k in known] + self.open_sets
        self.cells, inside = partition_cells(n_people, all_sets)
        self.sizes = np.array([len(c) for c in self.cells], dtype=np.int64)
        n_cells = len(self.cells)
        self.cell_of = np.zeros(n_people, dtype=np.int64)
        for c, people in enumerate(self.cells):
            self.cell_of[people] = c

        # Upper bound of every x[c, v]; zero means the pair is impossible outright.
        ub = np.repeat(self.sizes[:, None], n_values, axis=1)
        if totals is not None:
            ub = np.minimum(ub, np.array(totals, dtype=np.int64)[None, :])
        for k, con in enumerate(known):
            cells_in = inside[k]
            ub[cells_in] = np.minimum(ub[cells_in], np.array(con.counts, dtype=np.int64)[None, :])
        self.ub = ub
        self.trivially_infeasible = bool((ub.sum(axis=1) < self.sizes).any())

        pairs = np.argwhere(ub > 0)  # (cell, value) of every variable
        self.var_cell = pairs[:, 0]
        self.var_value = pairs[:, 1]
        self.var_index = -np.ones((n_cells, n_values), dtype=np.int64)
        self.var_index[self.var_cell, self.var_value] = np.arange(len(pairs))
        self.n_vars = len(pairs)

        rows: list[int] = []
        cols: list[int] = []
        lo: list[int] = []

        def add_row(var_ids: np.ndarray, rhs: int) -> None:
            r = len(lo)
            rows.extend([r] * len(var_ids))
            cols.extend(var_ids.tolist())
            lo.append(rhs)

        for c in range(n_cells):
            add_row(self.var_index[c][self.var_index[c] >= 0], int(self.sizes[c]))
        if totals is not None:
            for v in range(n_values):
                add_row(self.var_index[:, v][self.var_index[:, v] >= 0], int(totals[v]))
        for k, con in enumerate(known):
            block = self.var_index[inside[k]]
            for v in range(n_values):
                ids = block[:, v][block[:, v] >= 0]
                if len(ids) or con.counts[v]:
                    add_row(ids, int(con.counts[v]))
        rhs = np.array(lo, dtype=float)
        self.base = LinearConstraint(
            csr_array((np.ones(len(rows)), (rows, cols)), shape=(len(lo), self.n_vars)), rhs, rhs
        )

        # answer[i][v] = the variables summing to "how many in open set i hold v"
        self.answer_vars = []
        for i in range(len(self.open_sets)):
            block = self.var_index[inside[len(known) + i]]
            self.answer_vars.append([block[:, v][block[:, v] >= 0] for v in range(n_values)])
        self.open_sizes = [len(s) for s in self.open_sets]
        self.cap: np.ndarray | None = None  # optional extra upper bounds (see `limited`)
        self._plain_point: np.ndarray | Literal[False] | None = None  # solve() without options, once solved
        self.cell_inside_open = inside[len(known) :]

    def seed(self, cell_of: np.ndarray, x: np.ndarray) -> None:
        """Take an integer point of a coarser program over the same facts (`cell_of`: its cell of
        every person; `x`: its cells x values) as this program's own point. The open sets only
        split cells, and any split of a cell's values among its parts satisfies every constraint
        of the finer program (the open sets' answers are free); it is checked all the same."""
        if self.trivially_infeasible or self.n_vars == 0:
            return
        left = x.copy()
        point = np.zeros((len(self.cells), self.n_values), dtype=np.int64)
        for c, people in enumerate(self.cells):
            row, want = left[cell_of[people[0]]], int(self.sizes[c])
            take = np.minimum(row, np.maximum(want - (np.cumsum(row) - row), 0))
            point[c] = take
            row -= take
        flat = point[self.var_cell, self.var_value]
        upper = self.ub[self.var_cell, self.var_value]
        if point.sum() == flat.sum() and satisfied(flat, np.zeros(self.n_vars), upper, [self.base]):
            self._plain_point = point

    # -- solving ---------------------------------------------------------------------------------
    def solve(
        self,
        work: Work,
        fixed: dict[tuple[int, int], int] | None = None,
        at_least: dict[tuple[int, int], int] | None = None,
        objective: np.ndarray | None = None,
        sums: Sequence[tuple[np.ndarray, float, float]] = (),
    ) -> np.ndarray | None:
        """One integer point (as a cells x values matrix) or None when there is none.

        fixed[(i, v)] = t pins open set i to hold value v exactly t times; at_least[(c, v)] = t
        asks for at least t people of cell c holding v; each (variables, lo, hi) of `sums` asks
        for lo <= the sum of those variables <= hi.
        """
        if self.trivially_infeasible:
            return None
        plain = not fixed and not at_least and objective is None and self.cap is None and not sums
        if plain and self._plain_point is not None:  # the program's own feasibility, asked again
            return None if self._plain_point is False else self._plain_point.copy()
        x = self._solve(work, fixed, at_least, objective, sums)
        if plain:
            self._plain_point = False if x is None else x.copy()
        return x

    def _solve(
        self,
        work: Work,
        fixed: dict[tuple[int, int], int] | None,
        at_least: dict[tuple[int, int], int] | None,
        objective: np.ndarray | None,
        sums: Sequence[tuple[np.ndarray, float, float]] = (),
    ) -> np.ndarray | None:
        lower = np.zeros(self.n_vars)
        upper = self.ub[self.var_cell, self.var_value].astype(float)
        if self.cap is not None:
            upper = np.minimum(upper, self.cap[self.var_cell, self.var_value])
        for (c, v), t in (at_least or {}).items():
            j = self.var_index[c, v]
            if j < 0 or upper[j] < t:
                return None
            lower[j] = max(lower[j], t)
        constraints = [self.base]
        if fixed:
            rows: list[int] = []
            cols: list[int] = []
            rhs: list[int] = []
            for (i, v), t in fixed.items():
                ids = self.answer_vars[i][v]
                if len(ids) == 0:
                    if t:
                        return None
                    continue
                rows.extend([len(rhs)] * len(ids))
                cols.extend(ids.tolist())
                rhs.append(t)
            if rhs:
                a = csr_array((np.ones(len(rows)), (rows, cols)), shape=(len(rhs), self.n_vars))
                constraints.append(LinearConstraint(a, np.array(rhs, float), np.array(rhs, float)))
        for ids, lo, hi in sums:
            row = np.zeros((1, self.n_vars))
            row[0, ids] = 1.0
            constraints.append(LinearConstraint(csr_array(row), lo, hi))
        if self.n_vars == 0:
            return np.zeros((len(self.cells), self.n_values), dtype=np.int64) if not len(self.cells) else None
        point = work.integer_point(np.zeros(self.n_vars) if objective is None else objective, lower, upper, constraints)
        if point is None:
            return None
        x = np.zeros((len(self.cells), self.n_values), dtype=np.int64)
        x[self.var_cell, self.var_value] = point
        return x

    def limited(self, cells: np.ndarray, values: list[int]) -> CellProgram:
        """The same program where the given cells may only hold the given values."""
        other = copy.copy(self)
        cap = np.full(self.ub.shape, np.inf) if self.cap is None else self.cap.copy()
        banned = np.ones(self.n_values, dtype=bool)
        banned[list(values)] = False
        cap[np.ix_(cells, banned)] = 0
        other.cap = cap
        return other

    def can_be_narrow(self, work: Work, cell: int, k: int) -> bool:
        """Is there an integer point where the people of `cell` hold at most k distinct values?

        Adds a binary z_v per value: x[cell, v] <= |cell| * z_v and sum_v z_v <= k.
        """
        size = int(self.sizes[cell])
        if size <= k:
            return self.solve(work) is not None
        upper_row = self.ub[cell].astype(float)
        if self.cap is not None:
            upper_row = np.minimum(upper_row, self.cap[cell])
        if np.sort(upper_row)[::-1][:k].sum() < size:
            return False  # no k values can fill the cell even one at a time: no solve needed
        vals = np.flatnonzero(self.var_index[cell] >= 0)
        nz = len(vals)
        n = self.n_vars + nz
        rows, cols, data = [], [], []
        for r, v in enumerate(vals):
            rows += [r, r]
            cols += [int(self.var_index[cell, v]), self.n_vars + r]
            data += [1.0, -float(size)]
        rows += [nz] * nz
        cols += list(range(self.n_vars, n))
        data += [1.0] * nz
        link = LinearConstraint(
            csr_array((data, (rows, cols)), shape=(nz + 1, n)),
            np.r_[np.full(nz, -np.inf), -np.inf],
            np.r_[np.zeros(nz), k],
        )
        base = self.base.A
        wide = csr_array((base.data, base.indices, base.indptr), shape=(base.shape[0], n))
        upper = self.ub[self.var_cell, self.var_value].astype(float)
        if self.cap is not None:
            upper = np.minimum(upper, self.cap[self.var_cell, self.var_value])
        return (
            work.integer_point(
                np.zeros(n),
                np.zeros(n),
                np.r_[upper, np.ones(nz)],
                [LinearConstraint(wide, self.base.lb, self.base.ub), link],
            )
            is not None
        )

    def answer_of(self, x: np.ndarray) -> tuple[tuple[int, ...], ...]:
        """The counts per value that each open set holds in the integer point x."""
        out = []
        for i in range(len(self.open_sets)):
            out.append(tuple(int(x[self.cell_inside_open[i], v].sum()) for v in range(self.n_values)))
        return tuple(out)

    def possible_values(
        self,
        work: Work,
        fixed: dict[tuple[int, int], int] | None = None,
        need: int | None = None,
        skip: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """possible[c, v]: can a person of cell c hold v (given the fixed answers)?

        With `need`, a cell is settled as soon as `need` values are shown possible (rows of such
        cells may be incomplete, all others are exact). Cells flagged in `skip` are not examined.
        Returns None when the program has no integer point.
        """
        x = self.solve(work, fixed)
        if x is None:
            return None
        possible = x > 0
        skip = np.zeros(len(self.cells), dtype=bool) if skip is None else skip
        unknown = (self.ub > 0) & ~possible
        for c in range(len(self.cells)):
            for v in range(self.n_values):
                if skip[c] or (need is not None and possible[c].sum() >= need):
                    break
                if not unknown[c, v]:
                    continue
                # Ask for a point using (c, v), steering it towards other still-unknown pairs so
                # one solve settles many pairs.
                steer = np.zeros(self.n_vars)
                open_pairs = unknown & ~possible
                steer[self.var_index[open_pairs]] = -1.0
                y = self.solve(work, fixed, at_least={(c, v): 1}, objective=steer)
                if y is None:
                    unknown[c, v] = False
                else:
                    possible |= y > 0
                    unknown &= ~possible
        return possible

    def answers(self, work: Work) -> list[tuple[tuple[int, ...], ...]]:
        """Every possible answer of the open sets: a tuple (per open set) of counts per value.

        Depth-first over (open set, value) pairs; at each node the exact integer minimum and
        maximum of the next count given the counts fixed so far bound the branching.
        """
        upper = self.ub[self.var_cell, self.var_value].astype(float)
        if self.cap is not None:
            upper = np.minimum(upper, self.cap[self.var_cell, self.var_value])
        # pairs that `limited` capped to zero always count 0: no solves spent on them
        pairs = [
            (i, v)
            for i in range(len(self.open_sets))
            for v in range(self.n_values)
            if upper[self.answer_vars[i][v]].sum() > 0
        ]
        out: list[tuple[tuple[int, ...], ...]] = []
        if self.solve(work) is None:
            return out

        def extremes(fixed: dict[tuple[int, int], int], i: int, v: int) -> tuple[int, int] | None:
            obj = np.zeros(self.n_vars)
            obj[self.answer_vars[i][v]] = 1.0
            low = self.solve(work, fixed, objective=obj)
            if low is None:
                return None
            high = self.solve(work, fixed, objective=-obj)
            assert high is not None  # the same constraints as low's, which has a point
            return int(low[self.cell_inside_open[i], v].sum()), int(high[self.cell_inside_open[i], v].sum())

        def dfs(depth: int, fixed: dict[tuple[int, int], int]) -> None:
            if depth == len(pairs):
                counts = [[0] * self.n_values for _ in self.open_sets]
                for (i, v), t in fixed.items():
                    counts[i][v] = t
                out.append(tuple(tuple(c) for c in counts))
                return
            i, v = pairs[depth]
            rest_of_set = [p for p in pairs[depth + 1 :] if p[0] == i]
            if not rest_of_set:  # the last value of a set is what its size leaves over
                t = self.open_sizes[i] - sum(t for (j, _), t in fixed.items() if j == i)
                child = {**fixed, (i, v): t}
                if t >= 0 and self.solve(work, child) is not None:
                    dfs(depth + 1, child)
                return
            bounds = extremes(fixed, i, v)
            if bounds is None:
                return
            work.expect(bounds[1] - bounds[0] + 1)  # each count branches into >= 1 solve
            for t in range(bounds[0], bounds[1] + 1):
                dfs(depth + 1, {**fixed, (i, v): t})

        dfs(0, {})
        return out

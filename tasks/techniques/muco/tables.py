"""MuCo random output tables (Li et al., Section 4): one linear program per QI-group and QI.

For a group of m tuples with original values x_1..x_m and the n distinct values v_1..v_n of the
group as output columns, the random output table P (m x n) solves

    min  sum_ij dis(x_i, v_j) p_ij
    s.t. sum_j p_ij = 1,   p_ij >= 0,   p_ij <= delta * sum_k p_kj      (delta-probability)

Speed-ups, all exact (tests/test_muco_tables.py checks them against the LP above, row by row):

1. Class reduction. Tuples with the same original value have the same cost row, and the feasible
   set is convex and invariant under permuting them, so averaging the rows of an optimal P over
   each such class gives a feasible P with the same cost. Hence an optimal P exists with one row
   per distinct value ("class"): an n x n table Q with class weights w_j (tuples per class), the
   column mass c_k = sum_j w_j q_jk, and constraints q_jk <= delta c_k.
2. Trivial groups need no solver: with one distinct value, P is all ones; when every class holds
   at least ceil(1/delta) tuples, keeping every value (Q = I) costs 0, the lower bound, and is
   feasible (1 <= delta w_j).
3. Batching. The remaining LPs are independent, so many of them form one block-diagonal sparse
   LP solved by one HiGHS call. c_k is kept as a variable so the cap rows have two non-zeros
   (q_jk - delta c_k <= 0) instead of n. Blocks of ~2,000 variables are fastest (the simplex
   cost grows faster than linearly in the block size; one call per group costs ~2 ms overhead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import highspy
import numpy as np
import numpy.typing as npt

from privpub.tasks.core.microdata import QIDomain

# HiGHS's default primal feasibility tolerance (1e-7) is looser than the verifier's check;
# presolve finds nothing to remove in these blocks and costs ~25% of the solve time
LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10, "presolve": False}
# What scipy's linprog(method="highs-ds", options=LP_OPTIONS) sets on HiGHS: the blocks are passed
# to HiGHS directly with these (issue 43: linprog's wrapper cost ~30% of the solve in Python
# loops and option checks), so the solver sees the same model and returns the same tables
HIGHS_OPTIONS: dict[str, bool | int | float | str] = {
    "presolve": "off",
    "solver": "simplex",
    "simplex_strategy": 1,  # dual simplex
    "primal_feasibility_tolerance": 1e-10,
    "dual_feasibility_tolerance": 1e-10,
    "output_flag": False,
    "log_to_console": False,
}
ZERO = 1e-12  # probabilities below this are solver noise and are set to 0
CHUNK_VARS = 2000


class MuCoError(ValueError):
    """The data or the parameters admit no delta-probability release."""


def min_group_size(delta: Fraction) -> int:
    """Property 1: a group of m tuples can meet delta only if delta >= 1/m, i.e. m >= ceil(1/delta)."""
    return math.ceil(1 / Fraction(delta))


# --- distances -------------------------------------------------------------------------------


def hierarchy_distances(domain: QIDomain) -> np.ndarray:
    """Edges on the tree path between every pair of leaves (a forest gets a virtual root)."""
    parent: dict[str, str] = {}
    for p, kids in (domain.hierarchy or {}).items():
        for c in kids:
            parent[c] = p
    chains = []
    for leaf in domain.values:
        chain = [str(leaf)]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        chains.append(chain[::-1] if chain else chain)  # root ... leaf
    size = domain.size
    out = np.zeros((size, size))
    for a in range(size):
        for b in range(a + 1, size):
            ca, cb = chains[a], chains[b]
            common = 0
            while common < min(len(ca), len(cb)) and ca[common] == cb[common]:
                common += 1
            # no common root: the two trees hang under one virtual root
            out[a, b] = out[b, a] = len(ca) + len(cb) - 2 * common
    return out


class Distance:
    """dis() of Definition 4.1 on the integer codes of one QI.

    numeric: l1 on the values; ordinal: l1 on the codes (positions in the order);
    categorical: tree distance with a hierarchy, else 0/1.
    """

    def __init__(self, domain: QIDomain):
        self.domain = domain
        self.flat = domain.kind == "categorical" and not domain.hierarchy
        self.matrix = hierarchy_distances(domain) if domain.kind == "categorical" and domain.hierarchy else None
        self.points = domain.values.astype(float) if domain.kind == "numeric" else np.arange(domain.size, dtype=float)

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        dist: npt.NDArray[np.float64]
        if self.matrix is not None:
            dist = self.matrix[a, b]
        elif self.flat:
            dist = (np.asarray(a) != np.asarray(b)).astype(float)
        else:
            dist = np.abs(self.points[a] - self.points[b])
        return dist

    def max_over(self, codes: np.ndarray) -> float:
        """dis_max: the largest distance between two of the given codes."""
        u = np.unique(codes)
        if len(u) < 2:
            return 0.0
        if self.matrix is not None:
            return float(self.matrix[np.ix_(u, u)].max())
        if self.flat:
            return 1.0
        return float(self.points[u].max() - self.points[u].min())

    @property
    def domain_max(self) -> float:
        """Largest distance in the whole domain (the ILoss normaliser)."""
        return self.max_over(np.arange(self.domain.size))


# --- the tables of one attribute over all groups ---------------------------------------------


@dataclass
class ClassTables:
    """Class-reduced output tables of one QI for every group.

    Group g owns classes ptr[g]..ptr[g+1]-1 (its distinct values, in code order). Class c has
    `code[c]` and `weight[c]` tuples; its output distribution is q[qptr[c]:qptr[c] + n_g] over the
    group's classes, in the same order. `tuple_class[r]` is the class of input row r.
    """

    ptr: np.ndarray
    code: np.ndarray
    weight: np.ndarray
    qptr: np.ndarray
    q: np.ndarray
    tuple_class: np.ndarray
    cost: np.ndarray  # optimal LP objective per group (sum over the group's tuples)

    def group_of_class(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.ptr) - 1), np.diff(self.ptr))

    def row(self, c: int) -> np.ndarray:
        g = int(np.searchsorted(self.ptr, c, side="right") - 1)
        n = self.ptr[g + 1] - self.ptr[g]
        return self.q[self.qptr[c] : self.qptr[c] + n]

    def table(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, weights, Q) of group g: Q[i, k] = P(class i outputs class k's value)."""
        lo, hi = self.ptr[g], self.ptr[g + 1]
        n = hi - lo
        Q = self.q[self.qptr[lo] : self.qptr[lo] + n * n].reshape(n, n)
        return self.code[lo:hi], self.weight[lo:hi], Q


def group_classes(
    group: np.ndarray, codes: np.ndarray, n_groups: int
) -> tuple[np.ndarray, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Distinct (group, code) pairs in (group, code) order, their counts, and each row's class."""
    base = int(codes.max()) + 1 if len(codes) else 1
    key = group.astype(np.int64) * base + codes
    uniq, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    g_of = uniq // base
    ptr = np.searchsorted(g_of, np.arange(n_groups + 1))
    return ptr, (uniq % base).astype(np.int64), counts.astype(np.int64), inverse.astype(np.int64)


def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + n) for every (s, n), without a Python loop."""
    offsets = np.cumsum(lengths) - lengths
    positions: np.ndarray = np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))
    return positions


def _block_pairs(ptr: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the listed groups: every (row class, column class) pair of each n x n block,
    the block each pair belongs to and its position inside the block."""
    n = np.diff(ptr)[groups]
    sq = n * n
    block = np.repeat(np.arange(len(groups)), sq)
    local = np.arange(int(sq.sum())) - np.repeat(np.cumsum(sq) - sq, sq)
    start = ptr[groups][block]
    nb = n[block]
    return start + local // nb, start + local % nb, block, local


def block_matrix(
    rows: np.ndarray, cols: np.ndarray, weight: np.ndarray, delta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The constraint matrix of `_solve_block` (cap rows, then row sums, then column masses) in
    compressed columns, as scipy builds it (vstack of the two, to CSC): indices sorted in each
    column. `rows` is non-decreasing (pairs listed row class by row class)."""
    P, C = len(rows), len(weight)
    # pair column p: its cap row p (1), its row-sum row (1), its column-mass row (-w)
    pair_idx = np.column_stack([np.arange(P), P + rows, P + C + cols]).ravel()
    pair_val = np.column_stack([np.ones(P), np.ones(P), -weight[rows].astype(float)]).ravel()
    # mass column k: the cap rows of its pairs (-delta), in row order, then its mass row (1)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=C) + 1)])
    last = ptr[1:] - 1
    caps = np.ones(P + C, dtype=bool)
    caps[last] = False
    mass_idx = np.empty(P + C, dtype=np.int64)
    mass_val = np.full(P + C, -delta)
    mass_idx[caps] = np.argsort(cols, kind="stable")
    mass_idx[last] = P + C + np.arange(C)
    mass_val[last] = 1.0
    indptr = np.concatenate([np.arange(0, 3 * P, 3), 3 * P + ptr]).astype(np.int32)
    return indptr, np.concatenate([pair_idx, mass_idx]).astype(np.int32), np.concatenate([pair_val, mass_val])


def _solve_block(rows: np.ndarray, cols: np.ndarray, cost: np.ndarray, weight: np.ndarray, delta: float) -> np.ndarray:
    """One block-diagonal LP over many class-reduced tables; returns q per pair.

    Variables: q for every pair, then c (column mass) for every class; rows/cols are class
    positions 0..C-1 and weight[k] the tuples of class k. Constraints: q_jk - delta c_k <= 0
    (delta-probability), sum_k q_jk = 1, c_k - sum_j w_j q_jk = 0.
    """
    P, C = len(rows), len(weight)
    indptr, index, value = block_matrix(rows, cols, weight, delta)
    lp = highspy.HighsLp()
    lp.num_col_ = lp.a_matrix_.num_col_ = P + C
    lp.num_row_ = lp.a_matrix_.num_row_ = P + 2 * C
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = indptr, index, value
    lp.col_cost_ = np.concatenate([cost, np.zeros(C)])
    lp.col_lower_, lp.col_upper_ = np.zeros(P + C), np.full(P + C, np.inf)
    lp.row_lower_ = np.concatenate([np.full(P, -np.inf), np.ones(C), np.zeros(C)])
    lp.row_upper_ = np.concatenate([np.zeros(P), np.ones(C), np.zeros(C)])
    solver = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy's Highs.__init__ is unannotated
    for key, val in HIGHS_OPTIONS.items():
        solver.setOptionValue(key, val)
    solver.passModel(lp)
    solver.run()
    status = solver.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise MuCoError(f"the output-table LP failed: {solver.modelStatusToString(status)}")
    q: np.ndarray = np.asarray(solver.getSolution().col_value)[:P]
    return q


def _clean(q: np.ndarray, row_of_pair: np.ndarray, n_rows: int) -> np.ndarray:
    q = np.where(q < ZERO, 0.0, q)
    sums = np.bincount(row_of_pair, weights=q, minlength=n_rows)
    normalized: np.ndarray = q / sums[row_of_pair]
    return normalized


def output_tables(
    group: np.ndarray, n_groups: int, codes: np.ndarray, dist: Distance, delta: Fraction, chunk_vars: int = CHUNK_VARS
) -> ClassTables:
    """Optimal random output tables of one QI for every group (class-reduced, see module doc)."""
    ptr, code, weight, tuple_class = group_classes(group, codes, n_groups)
    n_g = np.diff(ptr)
    m_g = np.bincount(group, minlength=n_groups)
    need = min_group_size(delta)
    if (m_g < need).any():
        g = int(np.argmin(m_g))
        raise MuCoError(
            f"QI-group {g} has {m_g[g]} tuples; delta = {delta} needs at least "
            f"ceil(1/delta) = {need} per group (Property 1)"
        )
    sq = n_g * n_g
    qptr_group = np.concatenate([[0], np.cumsum(sq)])
    cls_group = np.repeat(np.arange(n_groups), n_g)
    qptr = qptr_group[cls_group] + (np.arange(len(code)) - ptr[cls_group]) * n_g[cls_group]
    q = np.zeros(int(sq.sum()))
    cost = np.zeros(n_groups)

    light = np.bincount(cls_group, weights=weight < need, minlength=n_groups) > 0
    trivial = np.flatnonzero(~light | (n_g == 1))
    r, c, _, _ = _block_pairs(ptr, trivial)  # identity tables: every tuple keeps its value
    q[concat_ranges(qptr_group[trivial], sq[trivial])] = (r == c).astype(float)

    hard = np.flatnonzero(light & (n_g > 1))
    cum = np.cumsum(sq[hard])
    cuts = np.searchsorted(cum, np.arange(chunk_vars, int(cum[-1]) if len(cum) else 0, chunk_vars))
    edges = np.unique(np.concatenate([[0], cuts, [len(hard)]]))
    for lo, hi in zip(edges[:-1], edges[1:]):
        gs = hard[lo:hi]
        rows, cols, block, local = _block_pairs(ptr, gs)
        cls = concat_ranges(ptr[gs], n_g[gs])
        off = ptr[gs] - (np.cumsum(n_g[gs]) - n_g[gs])  # global class id -> position in cls
        rows_l, cols_l = rows - off[block], cols - off[block]
        d = dist(code[rows], code[cols])
        qs = _solve_block(rows_l, cols_l, d * weight[rows], weight[cls], float(delta))
        qs = _clean(qs, rows_l, len(cls))
        q[qptr_group[gs][block] + local] = qs
        cost[gs] = np.bincount(block, weights=qs * d * weight[rows], minlength=len(gs))
    return ClassTables(ptr, code, weight, qptr, q, tuple_class, cost)

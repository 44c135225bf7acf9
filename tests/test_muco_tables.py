"""The batched, class-reduced output tables against the paper's LP solved one group at a time."""

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from privpub.tasks.core.microdata import QIDomain
from privpub.tasks.techniques.muco.tables import (
    LP_OPTIONS,
    Distance,
    MuCoError,
    _block_pairs,
    _solve_block,
    block_matrix,
    hierarchy_distances,
    min_group_size,
    output_tables,
)

NUMERIC = QIDomain("age", "numeric", np.array([17.0, 18, 20, 23, 27, 32, 38, 45, 53, 62, 72, 83]))
ORDINAL = QIDomain("edu", "ordinal", np.array(list("abcdefg"), dtype=object))
FLAT = QIDomain("race", "categorical", np.array(list("pqrst"), dtype=object))
TREE = QIDomain(
    "job",
    "categorical",
    np.array(["nurse", "doctor", "teacher", "lawyer", "clerk"], dtype=object),
    {
        "any": ["health", "other"],
        "health": ["nurse", "doctor"],
        "other": ["edu", "clerk"],
        "edu": ["teacher", "lawyer"],
    },
)
DOMAINS = [NUMERIC, ORDINAL, FLAT, TREE]


# the paper's LP, one group at a time (the reference; the technique solves the class-reduced blocks)
def solve_tuple_lp(D: np.ndarray, delta: float) -> tuple[np.ndarray, float]:
    """The LP of Section 4 verbatim: D[i, j] = dis(x_i, v_j) for m tuples x n output values.

    Cap rows are p_ij - delta * sum_k p_kj <= 0 with all m + 1 terms, exactly as written.
    """
    m, n = D.shape
    nv = m * n
    idx = np.arange(nv).reshape(m, n)
    A_eq = np.zeros((m, nv))
    for i in range(m):
        A_eq[i, idx[i]] = 1
    A_ub = np.zeros((nv, nv))
    for i in range(m):
        for j in range(n):
            A_ub[idx[i, j], idx[:, j]] -= delta
            A_ub[idx[i, j], idx[i, j]] += 1
    res = linprog(
        D.ravel(),
        A_ub=A_ub,
        b_ub=np.zeros(nv),
        A_eq=A_eq,
        b_eq=np.ones(m),
        bounds=(0, None),
        method="highs",
        options=LP_OPTIONS,
    )
    if res.status != 0:
        raise MuCoError(f"LP failed: {res.message}")
    return res.x.reshape(m, n), float(res.fun)


def tuple_cost_matrix(dist: Distance, codes: np.ndarray) -> np.ndarray:
    cols = np.unique(codes)
    return dist(codes[:, None], cols[None, :])


def check_tables(tables, group, codes, dist, delta):
    """Every group's table: a distribution per tuple, delta-probability, LP-optimal cost."""
    for g in range(len(tables.ptr) - 1):
        c, w, Q = tables.table(g)
        assert np.allclose(Q.sum(axis=1), 1) and (Q >= 0).all()
        mass = (w[:, None] * Q).sum(axis=0)
        assert (Q <= float(delta) * mass[None, :] + 1e-9).all()
        P, best = solve_tuple_lp(tuple_cost_matrix(dist, codes[group == g]), float(delta))
        assert tables.cost[g] == pytest.approx(best, rel=1e-7, abs=1e-7)
        # the tuple-level table built from the class rows has the LP's optimal cost
        rows = Q[np.searchsorted(c, codes[group == g])]
        assert (rows * tuple_cost_matrix(dist, codes[group == g])).sum() == pytest.approx(best, abs=1e-7)


@settings(deadline=None, max_examples=40)
@given(data=st.data())
def test_batched_tables_equal_the_paper_lp(data):
    dom = data.draw(st.sampled_from(DOMAINS))
    k = data.draw(st.integers(2, 6))
    delta = Fraction(1, k)
    sizes = data.draw(st.lists(st.integers(k, k + 7), min_size=1, max_size=4))
    group = np.repeat(np.arange(len(sizes)), sizes)
    spread = data.draw(st.integers(1, dom.size))
    codes = np.array(data.draw(st.lists(st.integers(0, spread - 1), min_size=len(group), max_size=len(group))))
    chunk = data.draw(st.integers(1, 400))  # many block shapes, down to one group per LP
    dist = Distance(dom)
    tables = output_tables(group, len(sizes), codes, dist, delta, chunk_vars=chunk)
    check_tables(tables, group, codes, dist, delta)


def test_non_unit_fraction_delta_matches_lp():
    rng = np.random.default_rng(5)
    dist = Distance(NUMERIC)
    delta = Fraction(2, 7)  # 1/delta = 3.5: groups need ceil(3.5) = 4 tuples
    group = np.repeat(np.arange(3), [4, 6, 9])
    codes = rng.integers(0, NUMERIC.size, len(group))
    tables = output_tables(group, 3, codes, dist, delta)
    check_tables(tables, group, codes, dist, delta)


def test_trivial_groups_keep_their_values():
    dist = Distance(NUMERIC)
    group = np.repeat([0, 1], [6, 12])
    codes = np.array([3] * 6 + [1] * 6 + [4] * 6)
    tables = output_tables(group, 2, codes, dist, Fraction(1, 6))
    for g in range(2):
        _, _, Q = tables.table(g)
        assert np.array_equal(Q, np.eye(len(Q)))
    assert tables.cost.sum() == 0


def test_a_light_value_must_be_covered():
    # one tuple of 20 among five of 18: it cannot keep 20 alone (1 > delta * mass)
    dist = Distance(NUMERIC)
    codes = np.array([1] * 5 + [2])
    tables = output_tables(np.zeros(6, int), 1, codes, dist, Fraction(1, 6))
    _, w, Q = tables.table(0)
    assert tables.cost[0] == pytest.approx(2.0)  # cheapest: 20 -> 18 (distance 2)
    assert Q[1, 1] == 0


def test_property_1_small_group_is_refused():
    assert min_group_size(Fraction(1, 6)) == 6
    assert min_group_size(Fraction(1667, 10000)) == 6
    assert min_group_size(Fraction(1, 5)) == 5
    with pytest.raises(MuCoError, match="Property 1"):
        output_tables(np.zeros(5, int), 1, np.arange(5), Distance(NUMERIC), Fraction(1, 6))


def test_property_1_lp_is_infeasible_below_one_over_m():
    # the paper's LP itself has no solution when delta < 1/m
    with pytest.raises(MuCoError):
        solve_tuple_lp(np.abs(np.subtract.outer(np.arange(5.0), np.arange(5.0))), 1 / 6)


def test_hierarchy_distance_counts_tree_edges():
    D = hierarchy_distances(TREE)
    names = list(TREE.values)
    i = names.index
    assert D[i("nurse"), i("doctor")] == 2
    assert D[i("teacher"), i("lawyer")] == 2
    assert D[i("teacher"), i("clerk")] == 3
    assert D[i("nurse"), i("teacher")] == 5
    assert (D == D.T).all() and (np.diag(D) == 0).all()


def test_distances_by_kind():
    assert Distance(NUMERIC)(np.array([0]), np.array([3]))[0] == 6.0  # 17 -> 23
    assert Distance(ORDINAL)(np.array([0]), np.array([3]))[0] == 3.0
    assert Distance(FLAT)(np.array([0, 1]), np.array([3, 1])).tolist() == [1.0, 0.0]
    assert Distance(NUMERIC).max_over(np.array([2, 5, 3])) == 12.0


def _linprog_block(rows, cols, cost, weight, delta):
    """The block LP as it was solved before issue 43: scipy's linprog (highs-ds, LP_OPTIONS)."""
    P, C = len(rows), len(weight)
    pairs = np.arange(P)
    eq_r = np.concatenate([rows, C + cols, C + np.arange(C)])
    eq_c = np.concatenate([pairs, pairs, P + np.arange(C)])
    eq_v = np.concatenate([np.ones(P), -weight[rows].astype(float), np.ones(C)])
    A_eq = sp.csr_matrix((eq_v, (eq_r, eq_c)), shape=(2 * C, P + C))
    ub_v = np.concatenate([np.ones(P), np.full(P, -delta)])
    A_ub = sp.csr_matrix((ub_v, (np.concatenate([pairs, pairs]), np.concatenate([pairs, P + cols]))), shape=(P, P + C))
    res = linprog(
        np.concatenate([cost, np.zeros(C)]),
        A_ub=A_ub,
        b_ub=np.zeros(P),
        A_eq=A_eq,
        b_eq=np.concatenate([np.ones(C), np.zeros(C)]),
        bounds=(0, None),
        method="highs-ds",
        options=LP_OPTIONS,
    )
    return res.x[:P], sp.csc_array(sp.vstack((A_ub, A_eq)))


@pytest.mark.parametrize("seed", range(4))
def test_blocks_go_to_highs_as_linprog_sent_them(seed):
    """The blocks are passed to HiGHS directly (issue 43): the matrix is the one linprog built, and
    the solution is linprog's, bit for bit, so the published tables do not change."""
    rng = np.random.default_rng(seed)
    n_g = rng.integers(2, 9, size=40)
    ptr = np.concatenate([[0], np.cumsum(n_g)])
    rows, cols, _, _ = _block_pairs(ptr, np.arange(len(n_g)))
    weight = rng.integers(1, 5, size=int(ptr[-1]))
    points = rng.choice(60, size=int(ptr[-1])).astype(float)
    cost = np.abs(points[rows] - points[cols]) * weight[rows]
    totals = np.add.reduceat(weight, ptr[:-1])  # Property 1: a group of m tuples needs delta >= 1/m
    delta = float(Fraction(1, int(min(5, totals.min()))))
    expected, matrix = _linprog_block(rows, cols, cost, weight, delta)
    indptr, index, value = block_matrix(rows, cols, weight, delta)
    assert np.array_equal(indptr, matrix.indptr) and np.array_equal(index, matrix.indices)
    assert np.array_equal(value, matrix.data)
    assert np.array_equal(_solve_block(rows, cols, cost, weight, delta), expected)

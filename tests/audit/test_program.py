"""The LP-first integer point (Work.integer_point) decides exactly what the integer program decides."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, milp

from privpub.tasks.audit.decide import can_fill
from privpub.tasks.audit.program import CellProgram, Constraint, Work, dual_bound


@st.composite
def programs(draw):
    """A closed-world cell program: random facts over a random table, plus a target pair."""
    n = draw(st.integers(2, 8))
    n_values = draw(st.integers(2, 4))
    secret = draw(st.lists(st.integers(0, n_values - 1), min_size=n, max_size=n))
    totals = tuple(secret.count(v) for v in range(n_values))
    facts = []
    for members in draw(st.lists(st.sets(st.integers(0, n - 1), min_size=1), max_size=4)):
        counts = [0] * n_values
        for p in members:
            counts[secret[p]] += 1
        if draw(st.booleans()):  # sometimes a false fact, so that some programs are infeasible
            counts[draw(st.integers(0, n_values - 1))] += 1
            counts[draw(st.integers(0, n_values - 1))] -= 1
        if min(counts) >= 0:
            facts.append(Constraint(frozenset(members), tuple(counts)))
    prog = CellProgram(n, totals, n_values, facts, [])
    cell = draw(st.integers(0, len(prog.cells) - 1))
    value = draw(st.integers(0, n_values - 1))
    sign = draw(st.sampled_from([1.0, -1.0]))
    return prog, cell, value, sign, facts


def milp_only(prog: CellProgram, objective: np.ndarray):
    upper = prog.ub[prog.var_cell, prog.var_value].astype(float)
    res = milp(
        objective,
        integrality=np.ones(prog.n_vars),
        bounds=Bounds(np.zeros(prog.n_vars), upper),
        constraints=[prog.base],
    )
    return None if res.status != 0 else round(res.fun)


@settings(max_examples=80, deadline=None)
@given(programs())
def test_lp_first_point_is_feasible_and_optimal_exactly_when_the_integer_program_is(case):
    prog, cell, value, sign, _ = case
    if prog.trivially_infeasible or prog.n_vars == 0 or prog.var_index[cell, value] < 0:
        return
    objective = np.zeros(prog.n_vars)
    objective[prog.var_index[cell, value]] = sign
    x = prog.solve(Work(), objective=objective)
    best = milp_only(prog, objective)
    if best is None:
        assert x is None
        return
    assert x is not None
    point = x[prog.var_cell, prog.var_value]
    rhs = prog.base.A @ point
    assert (rhs == prog.base.lb).all() and (point >= 0).all()
    assert objective @ point == best


def test_fractional_relaxation_falls_back_to_the_integer_program():
    # x + y = 1, x - y = 0 has the LP point (1/2, 1/2) and no integer point
    work = Work()
    con = LinearConstraint(np.array([[1.0, 1.0], [1.0, -1.0]]), [1, 0], [1, 0])
    assert work.integer_point(np.zeros(2), np.zeros(2), np.ones(2), [con]) is None
    assert work.solves == 2  # the relaxation, then the integer program
    # 2x + 2y = 2 with x - y = 0 relaxes to (1/2, 1/2) too; x + y = 2 has the integer point (1, 1)
    work = Work()
    con = LinearConstraint(np.array([[1.0, 1.0], [1.0, -1.0]]), [2, 0], [2, 0])
    assert list(work.integer_point(np.zeros(2), np.zeros(2), np.ones(2), [con])) == [1, 1]
    assert work.solves == 1  # the relaxation's point is integral: no integer program


@settings(max_examples=60, deadline=None)
@given(programs(), st.data())
def test_a_value_choice_that_cannot_fill_the_query_has_no_integer_point(case, data):
    prog, _, _, _, facts = case
    n = int(prog.sizes.sum())
    query = frozenset(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    with_query = CellProgram(n, prog.totals, prog.n_values, facts, [query])
    inside = np.flatnonzero(with_query.cell_inside_open[0])
    values = sorted(data.draw(st.sets(st.integers(0, prog.n_values - 1), min_size=1)))
    if not can_fill(with_query, inside, values):
        assert with_query.limited(inside, values).solve(Work()) is None


def test_can_fill_just_inside_and_just_outside():
    # 3 people, public counts a: 1, b: 2; the query is everyone
    prog = CellProgram(3, (1, 2), 2, [], [frozenset({0, 1, 2})])
    inside = np.flatnonzero(prog.cell_inside_open[0])
    assert not can_fill(prog, inside, [1])  # two b's for three people
    assert prog.limited(inside, [1]).solve(Work()) is None
    assert can_fill(prog, inside, [0, 1])
    assert prog.limited(inside, [0, 1]).solve(Work()) is not None


@settings(max_examples=60, deadline=None)
@given(programs(), st.data())
def test_a_point_of_the_facts_seeds_every_finer_program_with_a_feasible_point(case, data):
    # the knowledge keeps one point per branch; a query only splits cells, so the point, split,
    # is a point of the program with the query open (and is taken only when it checks out)
    prog, _, _, _, facts = case
    n = int(prog.sizes.sum())
    x = prog.solve(Work())
    query = frozenset(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    finer = CellProgram(n, prog.totals, prog.n_values, facts, [query])
    if x is None:
        assert finer.solve(Work()) is None
        return
    finer.seed(prog.cell_of, x)
    work = Work()
    seeded = finer.solve(work)
    assert work.solves == 0 and seeded is not None  # no solve needed
    point = seeded[finer.var_cell, finer.var_value]
    assert (finer.base.A @ point == finer.base.lb).all() and (point >= 0).all()
    assert (seeded.sum(axis=1) == finer.sizes).all() and (seeded <= finer.ub).all()
    # each coarse cell's values are shared out among its parts
    coarse_of = prog.cell_of[[int(cell[0]) for cell in finer.cells]]
    for c in range(len(prog.cells)):
        assert (seeded[coarse_of == c].sum(axis=0) == x[c]).all()


@settings(max_examples=60, deadline=None)
@given(programs(), st.integers(0, 2**32 - 1))
def test_certified_upper_bound_is_never_below_the_integer_maximum(case, seed):
    """Work.upper_bound (HiGHS's dual, checked by weak duality in integer arithmetic) is at least
    the integer maximum, and equals it when the relaxation is tight; dual_bound stays an upper
    bound whatever multipliers it is given (a wrong dual only loosens it)."""
    prog, _, _, _, _ = case
    if prog.trivially_infeasible or prog.n_vars == 0:
        return
    rng = np.random.default_rng(seed)
    f = rng.integers(0, 3, prog.n_vars)
    best = milp_only(prog, -f.astype(float))
    if best is None:
        return
    upper = prog.ub[prog.var_cell, prog.var_value]
    work = Work()
    bound = work.upper_bound(f, prog.base.A, prog.base.lb, upper)
    assert bound >= -best
    relaxed = milp(-f.astype(float), bounds=Bounds(np.zeros(prog.n_vars), upper.astype(float)), constraints=[prog.base])
    assert bound == int(np.floor(-relaxed.fun + 1e-9))  # the LP's value, floored
    assert work.upper_bound(f, prog.base.A, prog.base.lb, upper) == bound  # the kept model, warm
    for _ in range(3):
        wrong = rng.normal(0, 3, prog.base.A.shape[0])
        assert dual_bound(f, prog.base.A, prog.base.lb, upper, wrong) >= -best

"""Budgets are counts of work (solves + branch-and-bound nodes), never durations: the same history
and query give the same decision on any machine under any load."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint

from privpub.tasks.audit import DEFAULT_BUDGET, Auditor, nested, program
from privpub.tasks.audit.program import BudgetExceeded, Work
from tests.audit.test_golden import T12, Spy, population
from tests.benchmarks.bench_audit import make_population, make_queries

FIVE = ["Alice", "Bob", "Clark", "Diana", "Ellen"]


def bench_history(budget: int) -> list[dict]:
    """A small bench history (300 people, 10 values, 30 queries) decided under `budget`."""
    rng = np.random.default_rng(7)
    people, secret = make_population(rng, 300, 10)
    auditor = Auditor(
        people, list(secret.values()), 2, lambda ids: [secret[i] for i in ids], id_column="pid", budget=budget
    )
    return [auditor.ask_where(q).to_dict() for q in make_queries(rng, 30, 0.3)]


def test_a_slowed_solver_gives_identical_decisions(monkeypatch):
    quick = bench_history(60)
    kinds = {("budget" if d["budget_hit"] else d["response"]) for d in quick}
    # the history exercises every outcome, the budget denials included
    assert kinds == {"answer", "negative-denial", "positive-denial", "budget"}, kinds

    pause = np.random.default_rng(0)
    real_milp = program.milp

    def slow_milp(*args, **kwargs):  # a loaded machine: every solve takes 0-3 ms longer
        time.sleep(float(pause.uniform(0, 0.003)))
        return real_milp(*args, **kwargs)

    monkeypatch.setattr(program, "milp", slow_milp)
    assert bench_history(60) == quick


def test_the_budget_threshold_is_the_decisions_own_work(monkeypatch):
    """A decision that spends W units is made with budget W and budget-denied with W - 1."""
    monkeypatch.setattr(nested, "ENABLED", False)  # the solver routes' budget: the nested path has none
    unbounded = Auditor(population(T12), list(T12.values()), 2, Spy(T12)).ask(FIVE)
    need = unbounded.work
    assert need >= 2 and not unbounded.budget_hit
    inside = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=need).ask(FIVE)
    assert (inside.response, inside.budget_hit, inside.work) == (unbounded.response, False, need)
    spy = Spy(T12)
    outside = Auditor(population(T12), list(T12.values()), 2, spy, budget=need - 1).ask(FIVE)
    assert outside.budget_hit and outside.response == "negative-denial" and spy.reads == []
    assert f"work budget of {need - 1} units" in outside.reason and "privpub audit set" in outside.reason


def market_split() -> dict:
    """A small market-split feasibility program (binary x, 3 rows of random weights, each row
    about half its total): HiGHS explores a few hundred branch-and-bound nodes."""
    rng = np.random.default_rng(2)
    a = rng.integers(0, 100, (3, 24)).astype(float)
    b = np.floor(a.sum(axis=1) / 2)
    return dict(integrality=np.ones(24), bounds=Bounds(0, 1), constraints=[LinearConstraint(a, b - 3, b)])


def test_branch_and_bound_nodes_are_charged_and_limited():
    work = Work()
    res = work.run(np.zeros(24), **market_split())
    assert res.status == 0 and work.solves == 1 and work.nodes > 10
    assert work.used == 1 + work.nodes == 1 + int(res.mip_node_count)
    exact = Work(work.used)  # just enough: the same point, the same count
    again = exact.run(np.zeros(24), **market_split())
    assert np.array_equal(again.x, res.x) and exact.used == work.used
    # one unit short stops the solver: a budget denial, never read as "infeasible"
    with pytest.raises(BudgetExceeded):
        Work(work.used - 1).run(np.zeros(24), **market_split())


def test_expect_denies_early_only_beyond_the_units_left():
    work = Work(5)
    work.charge()
    work.expect(4)  # 1 + 4 = 5: fits
    with pytest.raises(BudgetExceeded):
        work.expect(5)
    Work().expect(10**9)  # no budget: never


def test_a_state_saved_with_a_time_budget_still_loads():
    """Before budgets were counts, states carried a wall-clock `time_budget`. It is ignored; when
    it was the only limit, the default count budget takes its place (never unbounded)."""
    auditor = Auditor(population(T12), list(T12.values()), 2, Spy(T12))
    state = json.loads(json.dumps(auditor.to_state()))
    old = {**state, "budget": None, "time_budget": 0.8}
    restored = Auditor.from_state(old, population(T12), list(T12.values()))
    assert restored.budget == DEFAULT_BUDGET and "time_budget" not in restored.to_state()
    both = {**state, "budget": 40, "time_budget": 0.8}
    assert Auditor.from_state(both, population(T12), list(T12.values())).budget == 40
    assert Auditor.from_state({**state, "budget": None}, population(T12), list(T12.values())).budget is None

"""Route 4 (instances of Delta prove floor(Delta) >= l) and the implicit Delta it leaves after a
positive denial, against brute force over every instance."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from privpub.tasks.audit import Auditor
from privpub.tasks.audit.decide import compute_delta
from privpub.tasks.audit.program import Work
from privpub.tasks.audit.witness import heavy_regions
from tests.audit import brute


def auditor_for(secret: list[str], l: int):
    people = [f"p{i}" for i in range(len(secret))]
    reads = []

    def read(ids):
        reads.append(tuple(ids))
        return [secret[people.index(i)] for i in ids]

    return Auditor(pd.DataFrame({"id": people}), sorted(secret), l, read), people, reads


def replay(secret: list[str], l: int, queries: list[frozenset[int]], routes: dict) -> None:
    """Decide every query with the auditor and with brute force; they must agree decision by
    decision, and the knowledge (implicit or listed, also after a JSON round trip) must be the
    same set of instances."""
    auditor, people, reads = auditor_for(secret, l)
    n = len(secret)
    world = brute.all_instances(n, sorted(secret), closed=True)
    g = world
    for q in queries:
        if auditor.knowledge.denial is not None:
            routes["after_implicit"] += 1
            state = json.loads(json.dumps(auditor.to_state()))
            auditor = Auditor.from_state(state, auditor.population, sorted(secret), auditor._secret)
            assert brute.instances_of(auditor.knowledge, world) == g
        else:
            sets = [auditor.universe.members([people[p] for p in q])]
            routes["witness"] += compute_delta(auditor.knowledge, sets, l, Work(), need=l).implicit
        before = len(reads)
        decision = auditor.ask([people[p] for p in q])
        expected, g = brute.step(g, [q], n, l, tuple(secret))
        assert decision.response == expected, (secret, l, queries, q)
        if expected == "negative-denial":
            assert len(reads) == before
        assert brute.instances_of(auditor.knowledge, world) == g, (secret, l, queries, q)
        routes["implicit"] += auditor.knowledge.denial is not None


def random_case(rng: np.random.Generator) -> tuple[list[str], int, list[frozenset[int]]]:
    """A small random history: 3-7 people with values among a-d, l in {2, 3} (2 twice as often),
    1-5 random queries (also used by test_after_denial.py)."""
    n, k = int(rng.integers(3, 8)), int(rng.integers(2, 5))
    secret = ["abcd"[i] for i in rng.integers(0, k, n)]
    l = int(rng.choice([2, 2, 3]))
    queries = [
        frozenset(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        for _ in range(int(rng.integers(1, 6)))
    ]
    return secret, l, queries


def test_sweep_of_random_small_cases_agrees_with_brute_force_decision_by_decision():
    rng = np.random.default_rng(1)
    routes = {"witness": 0, "implicit": 0, "after_implicit": 0}
    for _ in range(200):
        replay(*random_case(rng), routes)
    # the new routes were exercised: proofs by instances, implicit Deltas, decisions after them
    assert routes["witness"] >= 3 and routes["implicit"] >= 3 and routes["after_implicit"] >= 2, routes


def test_positive_denial_by_route_4_leaves_an_implicit_delta_that_later_decisions_list():
    # (p1, p2) is answered {c, d}; (p1, p3, p5) is l-safe by instances of Delta only, and its
    # real answer {a, c, c} is unsafe, so G := Delta without listing it; (p0, p4) is then
    # answered from the listed Delta (8 instances), exactly as brute force decides
    secret = ["a", "c", "d", "a", "c", "c"]
    q1, q2, q3 = frozenset({1, 2}), frozenset({1, 3, 5}), frozenset({0, 4})
    auditor, people, _ = auditor_for(secret, 2)
    assert auditor.ask(["p1", "p2"]).response == "answer"
    report = compute_delta(auditor.knowledge, [auditor.universe.members(["p1", "p3", "p5"])], 2, Work(), need=2)
    assert report.implicit and report.answers is None and report.is_safe_query(2)
    assert auditor.ask(["p1", "p3", "p5"]).response == "positive-denial"
    assert auditor.knowledge.denial is not None
    state = json.loads(json.dumps(auditor.to_state()))
    assert "denied" in state["knowledge"]
    world = brute.all_instances(6, sorted(secret), closed=True)
    g = world
    for q in (q1, q2, q3):
        _, g = brute.step(g, [q], 6, 2, tuple(secret))
    restored = Auditor.from_state(state, auditor.population, sorted(secret), auditor._secret)
    decision = restored.ask(["p0", "p4"])
    assert decision.response == "answer" and list(decision.values) == ["a", "c"]
    assert restored.knowledge.denial is None
    assert brute.instances_of(restored.knowledge, world) == g and len(g) == 8
    replay(secret, 2, [q1, q2, q3], {"witness": 0, "implicit": 0, "after_implicit": 0})


def test_a_budget_too_small_to_list_an_implicit_delta_denies_without_reading():
    secret = ["a", "c", "d", "a", "c", "c"]
    auditor, people, reads = auditor_for(secret, 2)
    auditor.ask(["p1", "p2"])
    auditor.ask(["p1", "p3", "p5"])
    assert auditor.knowledge.denial is not None
    auditor.budget = 1
    before = len(reads)
    decision = auditor.ask(["p0", "p4"])
    assert decision.budget_hit and decision.response == "negative-denial" and len(reads) == before
    assert "listing what an earlier positive denial revealed" in decision.reason  # why, for the log
    assert auditor.knowledge.denial is not None  # still the same, still implicit


def region_members(prog, g, row) -> tuple[frozenset, frozenset]:
    """Brute force's instances of G inside a region (b) given as (variables, lo, hi), and those
    just outside its threshold (the bound moved by one)."""
    ids, lo, hi = row
    inside, next_to = set(), set()
    for inst in g:
        x = np.zeros(prog.ub.shape, dtype=int)
        np.add.at(x, (prog.cell_of, list(inst)), 1)
        t = int(x[prog.var_cell[ids], prog.var_value[ids]].sum())
        if lo <= t <= hi:
            inside.add(inst)
        elif lo - 1 <= t <= hi + 1:
            next_to.add(inst)
    return frozenset(inside), frozenset(next_to)


def test_regions_b_hold_only_instances_of_delta_and_their_bound_is_tight():
    """Every instance of every region (b) (a group's side of q holding so many values of W that
    the group holds only W) has an unsafe answer by brute force, after random released facts,
    for groups inside and outside q; moving a bound by one admits safe answers in some case."""
    rng = np.random.default_rng(5)
    seen = {"inside": 0, "outside": 0, "loose_bound_caught": 0}
    for _ in range(150):
        n, k = int(rng.integers(3, 8)), int(rng.integers(2, 5))
        secret = [int(v) for v in rng.integers(0, k, n)]
        values = sorted(set(secret))
        inst_secret = tuple(values.index(v) for v in secret)
        l = int(rng.choice([2, 2, 3]))
        auditor, people, _ = auditor_for([str(v) for v in secret], l)
        world = frozenset(
            tuple(values.index(int(v)) for v in i)
            for i in brute.all_instances(n, sorted(map(str, secret)), closed=True)
        )
        g = world
        for _ in range(int(rng.integers(0, 3))):
            fact = frozenset(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
            auditor.add_public_fact([people[p] for p in fact], [str(secret[p]) for p in fact])
            g = frozenset(i for i in g if brute.answer(i, [fact]) == brute.answer(inst_secret, [fact]))
        q = frozenset(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        prog = auditor.knowledge.program(
            auditor.knowledge.branches[0], [auditor.universe.members([people[p] for p in q])]
        )
        unsafe = brute.delta(g, [q], n, l)
        for row in heavy_regions(prog, l, Work()):
            members, next_to = region_members(prog, g, row)
            assert members <= unsafe, (secret, l, q)
            seen["inside" if row[1] > -np.inf else "outside"] += bool(members)
            seen["loose_bound_caught"] += bool(next_to - unsafe)
    assert min(seen.values()) >= 5, seen

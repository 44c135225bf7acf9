"""Hypothesis: on tiny populations the auditor agrees with brute force over all instances."""
from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tasks.audit import Auditor
from tests.audit import brute

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def scenarios(draw, max_people=7, open_world=False):
    n = draw(st.integers(2, max_people if not open_world else 4))
    alphabet = "abcd"[: draw(st.integers(2, 4))]
    if open_world:
        domain = list(alphabet)
        secret = draw(st.lists(st.sampled_from(domain), min_size=n, max_size=n))
        public = domain
    else:
        secret = draw(st.lists(st.sampled_from(alphabet), min_size=n, max_size=n))
        public = sorted(secret)
    people = [f"p{i}" for i in range(n)]
    subsets = st.lists(st.integers(0, n - 1), min_size=1, max_size=n).map(frozenset)
    queries = draw(st.lists(subsets, min_size=1, max_size=4))
    l = draw(st.integers(2, 3))
    return people, public, secret, queries, l


def make_auditor(people, public, secret, l, open_world=False, **kw):
    calls = []

    def read(ids):
        calls.append(tuple(ids))
        return [secret[people.index(i)] for i in ids]

    pop = pd.DataFrame({"id": people, "age": range(len(people))})
    return Auditor(pop, public, l, read, open_world=open_world, **kw), calls


def check_against_brute(people, public, secret, queries, l, open_world):
    n = len(people)
    auditor, calls = make_auditor(people, public, secret, l, open_world)
    world = brute.all_instances(n, public, closed=not open_world)
    g, truth = world, tuple(secret)
    for q in queries:
        ids = [people[p] for p in q]
        before = len(calls)
        decision = auditor.ask(ids)
        expected, g = brute.step(g, [q], n, l, truth)
        assert decision.response == expected
        if expected == "negative-denial":
            assert len(calls) == before, "a negative denial read the secret table"
        if expected == "answer":
            assert list(decision.values) == sorted(secret[p] for p in q)
        # the knowledge dictionary describes exactly the instances brute force keeps
        assert brute.instances_of(auditor.knowledge, world) == g
        poss = auditor.possible_values()
        assert [set(poss[p]) for p in people] == brute.possible_values(g, n)


@SETTINGS
@given(scenarios())
def test_closed_world_decisions_and_knowledge_match_brute_force(sc):
    check_against_brute(*sc, open_world=False)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(open_world=True))
def test_open_world_decisions_and_knowledge_match_brute_force(sc):
    check_against_brute(*sc, open_world=True)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_people=6))
def test_adversary_simulating_the_strategy_never_narrows_anyone_below_l(sc):
    people, public, secret, queries, l = sc
    n = len(people)
    world = brute.all_instances(n, public, closed=True)
    assume(brute.is_l_uncertain(world, n, l))  # else nothing can be released at all
    groups = brute.transcripts(world, queries, n, l)
    for group in groups.values():
        assert brute.is_l_uncertain(group, n, l)
    # and the auditor's knowledge is exactly the adversary's knowledge for the real table
    auditor, _ = make_auditor(people, public, secret, l)
    for q in queries:
        auditor.ask([people[p] for p in q])
    mine = brute.instances_of(auditor.knowledge, world)
    assert any(mine == group for group in groups.values() if tuple(secret) in group)

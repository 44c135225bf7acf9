"""Hypothesis: on tiny populations the auditor agrees with brute force over all instances."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from privpub.tasks.audit import Auditor
from privpub.tasks.audit.decide import compute_delta, narrowable_groups, possible_answers, restricted
from privpub.tasks.audit.program import Work
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
    """An adversary who simulates the auditor learns nothing that narrows anyone below l.

    Promise: negative-denials-are-simulatable."""
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


@st.composite
def knowledge_and_query(draw, open_world=False):
    """Random released facts (true multisets of a random secret) and one query set."""
    people, public, secret, sets, l = draw(scenarios(max_people=6, open_world=open_world))
    return people, public, secret, sets[:-1], sets[-1], l


def check_routes(people, public, secret, facts, query, l, open_world):
    n = len(people)
    auditor, _ = make_auditor(people, public, secret, l, open_world)
    world = brute.all_instances(n, public, closed=not open_world)
    g = world
    for f in facts:  # released facts, whatever their safety: the routes must hold for any G
        auditor.add_public_fact([people[p] for p in f], [secret[p] for p in f])
        g = frozenset(i for i in g if brute.answer(i, [f]) == brute.answer(tuple(secret), [f]))
    sets = [auditor.universe.members([people[p] for p in query])]
    fast = compute_delta(auditor.knowledge, sets, l, Work())
    listed = compute_delta(auditor.knowledge, sets, l, Work(), list_answers=True)
    truth = brute.delta(g, [query], n, l)
    # Delta of the fast routes, as an instance set, is brute force's Delta
    if fast.everything:
        assert truth == g
    else:
        mine = frozenset().union(
            *[brute.instances_of(restricted(auditor.knowledge, sets, a, b), world) for a, b in fast.unsafe.items()]
        )
        assert mine == truth
        assert set(fast.unsafe) == set(listed.unsafe)
    assert fast.floor() == brute.floor(truth, n)
    # with need = l (what Algorithm 2 asks), route 4 may prove l-safety from instances of Delta:
    # then Delta is not empty and every value it shows a person holding is one brute force shows
    bounded = compute_delta(auditor.knowledge, sets, l, Work(), need=l)
    assert bounded.is_safe_query(l) == (not truth or brute.floor(truth, n) >= l)
    if bounded.implicit:
        assert truth and all(
            len(mine) >= l and mine <= real for mine, real in zip(bounded.coverage, brute.possible_values(truth, n))
        )
    return fast.shortcut


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knowledge_and_query())
def test_every_route_of_delta_equals_brute_force_after_arbitrary_facts(sc):
    check_routes(*sc, open_world=False)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knowledge_and_query(open_world=True))
def test_every_route_of_delta_equals_brute_force_in_the_open_world(sc):
    check_routes(*sc, open_world=True)


def test_derived_group_route_decides_without_listing_answers():
    # F = people 0-4 released; q = 0-2 makes {3, 4} = F - q a derived group that can be all a or
    # all b: exactly those two answers are unsafe, found without listing q's answers
    people = [f"p{i}" for i in range(7)]
    secret = ["a", "b", "c", "a", "b", "c", "d"]
    route = check_routes(
        people, sorted(secret), secret, [frozenset(range(5))], frozenset(range(3)), 2, open_world=False
    )
    assert "derived" in route
    auditor, calls = make_auditor(people, sorted(secret), secret, 2)
    auditor.add_public_fact(people[:5], secret[:5])
    decision = auditor.ask(people[:3])
    assert decision.response == "answer" and decision.unsafe_answers == 2 and decision.possible_answers is None


def test_a_group_outside_the_span_can_be_pinned_so_route_3_does_not_apply():
    # F = people 0-4 released, q = 3-6: the cell q - F = {5, 6} is no combination of the sets
    # (values can cycle A -> B -> D -> C), yet the answer (b, b, d, d) pins it: A = q ∩ F can only
    # hold supp(F) ∩ supp(answer) = {b}, so B holds the d's. The derived-group route must refuse.
    people = [f"p{i}" for i in range(8)]
    secret = ["a", "a", "b", "b", "c", "c", "d", "d"]
    f, q = frozenset(range(5)), frozenset({3, 4, 5, 6})
    world = brute.all_instances(8, sorted(secret), closed=True)
    g = frozenset(i for i in world if brute.answer(i, [f]) == brute.answer(tuple(secret), [f]))
    pinned_by = {
        a: [p for p, vals in enumerate(brute.possible_values(s, 8)) if len(vals) < 2]
        for a, s in brute.unsafe_answers(g, [q], 8, 2).items()
    }
    assert {5, 6} <= set(pinned_by[(("b", "b", "d", "d"),)])
    auditor, _ = make_auditor(people, sorted(secret), secret, 2)
    auditor.add_public_fact(people[:5], secret[:5])
    sets = [auditor.universe.members([people[p] for p in q])]
    assert narrowable_groups(auditor.knowledge, sets, 2, Work()) is None
    assert check_routes(people, sorted(secret), secret, [f], q, 2, open_world=False) == ""


# Differencing on crossing facts (no tree, so the nested path stands aside): the query is the
# union of two released facts that overlap, so (closed world) every cell of the query and the
# people outside it have their multisets fixed by the answer: each is q - F2, F1 + F2 - q,
# q - F1 or population - q. Cells of l - 1 people: (secret, released facts, query, l)
DIFFERENCING = [
    ("abacab", [{0, 1}, {1, 2}], {0, 1, 2}, 2),
    ("aabcabbc", [{0, 1, 2, 3}, {2, 3, 4, 5}], {0, 1, 2, 3, 4, 5}, 3),
]


@pytest.mark.parametrize("secret, released, q, l", DIFFERENCING)
def test_a_query_that_differences_crossing_facts_is_denied_unread(secret, released, q, l):
    """Brute force: after the facts G is l-uncertain, and every answer of q is unsafe (Delta = G),
    because each cell of l - 1 people is pinned to fewer than l values whatever the answer. The
    auditor denies positively without reading the secret (the response does not depend on it)
    and its knowledge stays brute force's G; the solver routes listing every answer agree.

    Promise: negative-denials-are-simulatable."""
    secret, q = list(secret), frozenset(q)
    n, people = len(secret), [f"p{i}" for i in range(len(secret))]
    world = brute.all_instances(n, sorted(secret), closed=True)
    auditor, calls = make_auditor(people, sorted(secret), secret, l)
    g = world
    for f in map(frozenset, released):
        auditor.add_public_fact([people[p] for p in f], [secret[p] for p in f])
        g = frozenset(i for i in g if brute.answer(i, [f]) == brute.answer(tuple(secret), [f]))
    assert brute.is_l_uncertain(g, n, l)
    assert brute.delta(g, [q], n, l) == g  # every answer is unsafe; floor(Delta) >= l: l-safe
    sets = [auditor.universe.members([people[p] for p in q])]
    assert set(compute_delta(auditor.knowledge, sets, l, Work(), list_answers=True).unsafe) == set(
        possible_answers(auditor.knowledge, sets, Work())
    )

    decision = auditor.ask([people[p] for p in q])
    assert brute.step(g, [q], n, l, tuple(secret))[0] == decision.response == "positive-denial"
    assert calls == [], "a denial that every instance gets read the secret"
    assert decision.unsafe_answers is None and decision.reason.startswith(
        "the real data would narrow someone to fewer than"
    )
    assert brute.instances_of(auditor.knowledge, world) == g

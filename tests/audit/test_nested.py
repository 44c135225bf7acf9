"""The nested path (tasks/audit/nested.py, issue 31) against brute-force possible worlds and
against the solver routes, on histories of queries drawn from one tree of nested sets."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from privpub.tasks.audit import Auditor, nested
from privpub.tasks.audit.decide import answer_is_unsafe, compute_delta
from privpub.tasks.audit.program import Work
from tests.audit import brute
from tests.audit.test_properties import make_auditor

HISTORIES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tree(draw, members: frozenset[int], depth: int) -> list[frozenset[int]]:
    """A node and its descendants: members go to up to three children or stay in the node's region."""
    nodes = [members]
    if depth == 0 or len(members) < 2:
        return nodes
    groups = draw(st.lists(st.integers(0, 3), min_size=len(members), max_size=len(members)))
    for child_id in (1, 2, 3):
        child = frozenset(m for m, gid in zip(sorted(members), groups) if gid == child_id)
        if child and child != members:
            nodes += draw(tree(child, depth - 1))
    return nodes


@st.composite
def laminar_histories(draw, max_people: int = 7, open_world: bool = False):
    n = draw(st.integers(2, max_people))
    alphabet = "abcd"[: draw(st.integers(2, 4))]
    secret = draw(st.lists(st.sampled_from(alphabet), min_size=n, max_size=n))
    public = list(alphabet) if open_world else sorted(secret)
    nodes = draw(tree(frozenset(range(n)), 3))
    queries = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=6))
    l = draw(st.integers(2, 3))
    save_at = draw(st.integers(0, len(queries)))  # the JSON round trip happens before this query
    known = draw(st.lists(st.sampled_from(nodes), max_size=1))  # a fact the adversary has already
    return [f"p{i}" for i in range(n)], public, secret, queries, l, save_at, known


def replay(people, public, secret, queries, l, save_at, known, open_world, tally):
    """Decide the history with the auditor (nested path) and with brute force, decision by decision."""
    n = len(people)
    auditor, reads = make_auditor(people, public, secret, l, open_world)
    world = brute.all_instances(n, public, closed=not open_world)
    g = world
    for f in known:  # released before the auditor, whatever its safety
        auditor.add_public_fact([people[p] for p in f], [secret[p] for p in f])
        g = frozenset(i for i in g if brute.answer(i, [f]) == brute.answer(tuple(secret), [f]))
    for t, q in enumerate(queries):
        if t == save_at:
            state = json.loads(json.dumps(auditor.to_state()))
            auditor = Auditor.from_state(state, auditor.population, public, auditor._secret)
            tally["round trips"] += 1
        before = len(reads)
        decision = auditor.ask([people[p] for p in q])
        expected, g = brute.step(g, [q], n, l, tuple(secret))
        assert decision.response == expected, (secret, l, queries, t)
        assert decision.route == "nested" and decision.solves == 0 and decision.work == 0
        if expected == "negative-denial":
            assert len(reads) == before, "a negative denial read the secret table"
        if expected == "answer":
            assert list(decision.values) == sorted(secret[p] for p in q)
        assert brute.instances_of(auditor.knowledge, world) == g, (secret, l, queries, t)
        tally[expected] += 1
        tally["people >= 6"] += n >= 6
        tally["several branches"] += len(auditor.knowledge.branches) > 1


@pytest.fixture(scope="module")
def tally():
    counts = {
        k: 0 for k in ("answer", "negative-denial", "positive-denial", "round trips", "several branches", "people >= 6")
    }
    yield counts
    # hundreds of decisions, every kind of response, and histories that go on after positive denials
    assert sum(counts[k] for k in ("answer", "negative-denial", "positive-denial")) >= 300, counts
    assert min(counts.values()) >= 10, counts


@HISTORIES
@given(laminar_histories(max_people=8))
def test_closed_world_histories_agree_with_brute_force(tally, sc):
    replay(*sc, open_world=False, tally=tally)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(laminar_histories(max_people=6, open_world=True))
def test_open_world_histories_agree_with_brute_force(tally, sc):
    replay(*sc, open_world=True, tally=tally)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(laminar_histories(max_people=6), st.booleans())
def test_the_solver_routes_reach_the_same_decisions(sc, open_world):
    """On the same knowledge, the solver routes (compute_delta) and the nested path agree on
    floor(Delta), on l-safety and on whether the real answer is unsafe, at every step."""
    people, public, secret, queries, l, _, _ = sc
    if open_world:
        assume(len(people) <= 5)
        public = sorted(set(public))
    auditor, _ = make_auditor(people, public, secret, l, open_world)
    for q in queries:
        sets = [auditor.universe.members([people[p] for p in q])]
        mine = nested.nested_delta(auditor.knowledge, sets, l)
        assert mine is not None
        theirs = compute_delta(auditor.knowledge, sets, l, Work(150))  # within the bench's budget
        assert mine.floor() == theirs.floor() and mine.is_safe_query(l) == theirs.is_safe_query(l)
        if mine.is_safe_query(l) and not mine.everything:
            real = auditor._read_secret(sets)
            assert (real in mine.unsafe) == answer_is_unsafe(auditor.knowledge, sets, real, l)[0]
        auditor.ask([people[p] for p in q])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(laminar_histories(max_people=6))
def test_the_adversary_replaying_the_strategy_never_narrows_anyone_below_l(sc):
    people, public, secret, queries, l, _, _ = sc
    n = len(people)
    world = brute.all_instances(n, public, closed=True)
    assume(brute.is_l_uncertain(world, n, l))
    for group in brute.transcripts(world, queries, n, l).values():
        assert brute.is_l_uncertain(group, n, l)
    # what the adversary knows at the end is one of those groups: the auditor's knowledge
    auditor, _ = make_auditor(people, public, secret, l)
    for q in queries:
        assert auditor.ask([people[p] for p in q]).route == "nested"
    mine = brute.instances_of(auditor.knowledge, world)
    assert brute.is_l_uncertain(mine, n, l) and tuple(secret) in mine


# F (people 0..k-1) released with its multiset; q = p0, p1 splits F's region into A = q and B = F - q
THRESHOLD_CASES = [
    # F = (a, a, b, b): A = (a, a) or (b, b) is unsafe; across Delta everyone keeps {a, b}, so
    # floor(Delta) = 2 = l (just inside): the query is l-safe; A = (a, a) is denied, (a, b) answered
    ("aabbcd", 4, 2, "positive-denial"),
    ("ababcd", 4, 2, "answer"),
    # F = (a, a, b, c, d): only A = (a, a) is unsafe (B's three people never share one value), so
    # A's people hold only a across Delta: floor(Delta) = 1 = l - 1 (just outside), a negative denial
    ("abacdef", 5, 1, "negative-denial"),
]


@pytest.mark.parametrize("letters,k,floor,response", THRESHOLD_CASES)
def test_just_inside_and_outside_the_l_threshold(letters, k, floor, response):
    n, l = len(letters), 2
    people = [f"p{i}" for i in range(n)]
    secret = list(letters)
    f, q = frozenset(range(k)), frozenset({0, 1})
    auditor, _ = make_auditor(people, sorted(secret), secret, l)
    auditor.add_public_fact(people[:k], secret[:k])
    world = brute.all_instances(n, sorted(secret), closed=True)
    g = frozenset(i for i in world if brute.answer(i, [f]) == brute.answer(tuple(secret), [f]))
    report = nested.nested_delta(auditor.knowledge, [auditor.universe.members(["p0", "p1"])], l)
    assert report is not None and not report.everything
    assert report.floor() == floor == brute.floor(brute.delta(g, [q], n, l), n)
    assert report.is_safe_query(l) == (floor >= l)
    decision = auditor.ask(["p0", "p1"])
    assert decision.response == response == brute.step(g, [q], n, l, tuple(secret))[0]


@pytest.mark.parametrize("letters,outside", [("aabbc", 1), ("aabbcd", 2)])
def test_the_people_left_out_of_the_query_just_inside_and_outside_l(letters, outside):
    # q = everyone but `outside` people (closed world, l = 2): one person left out is pinned by
    # any answer (Delta = G, a positive denial whatever the values); two may keep two values
    n, l = len(letters), 2
    people = [f"p{i}" for i in range(n)]
    secret = list(letters)
    q = frozenset(range(n - outside))
    auditor, reads = make_auditor(people, sorted(secret), secret, l)
    report = nested.nested_delta(auditor.knowledge, [auditor.universe.members([people[p] for p in q])], l)
    world = brute.all_instances(n, sorted(secret), closed=True)
    assert report is not None and report.everything == (outside < l) == (brute.delta(world, [q], n, l) == world)
    decision = auditor.ask([people[p] for p in q])
    assert decision.response == brute.step(world, [q], n, l, tuple(secret))[0]
    assert decision.response == ("positive-denial" if outside < l else "answer")
    assert (reads == []) == (outside < l)  # Delta = G: denied without reading the secret


@pytest.mark.parametrize("known,response", [("aa", "negative-denial"), ("ab", "answer")])
def test_a_group_already_holding_l_minus_1_values_makes_delta_everything(known, response):
    # p0, p1 released as (a, a): both already pinned (l - 1 = 1 value), so every answer of any
    # query is unsafe and floor(Delta) = 1: a negative denial; released as (a, b), q is answered
    people = [f"p{i}" for i in range(6)]
    secret = list(known) + list("bcda")
    auditor, _ = make_auditor(people, sorted(secret), secret, 2)
    auditor.add_public_fact(people[:2], secret[:2])
    world = brute.all_instances(6, sorted(secret), closed=True)
    g = frozenset(
        i for i in world if brute.answer(i, [frozenset({0, 1})]) == brute.answer(tuple(secret), [frozenset({0, 1})])
    )
    q = frozenset({2, 3})
    report = nested.nested_delta(auditor.knowledge, [auditor.universe.members(["p2", "p3"])], 2)
    assert report is not None and report.everything == (known == "aa") == (brute.delta(g, [q], 6, 2) == g)
    assert auditor.ask(["p2", "p3"]).response == response == brute.step(g, [q], 6, 2, tuple(secret))[0]


def test_an_empty_query_is_denied_unread_and_changes_nothing():
    # its answer has no value at all (< l): Delta = G, whatever the table (route 1's outcome)
    people = [f"p{i}" for i in range(5)]
    secret = list("abcab")
    auditor, reads = make_auditor(people, sorted(secret), secret, 2)
    assert auditor.ask(people[:2]).response == "answer"
    before = auditor.knowledge.branches
    world = brute.all_instances(5, sorted(secret), closed=True)
    g = brute.step(world, [frozenset({0, 1})], 5, 2, tuple(secret))[1]
    decision = auditor.ask([])
    assert decision.response == "positive-denial" == brute.step(g, [frozenset()], 5, 2, tuple(secret))[0]
    assert decision.route == "nested" and len(reads) == 1 and auditor.knowledge.branches == before


def test_a_query_overlapping_a_fact_is_left_to_the_other_routes():
    people = [f"p{i}" for i in range(6)]
    secret = list("aabbcc")
    auditor, _ = make_auditor(people, sorted(secret), secret, 2)
    auditor.add_public_fact(people[:4], secret[:4])
    sets = [auditor.universe.members(["p3", "p4"])]
    assert nested.nested_delta(auditor.knowledge, sets, 2) is None
    assert auditor.ask(["p3", "p4"]).route == ""


def test_several_branches_split_alike_or_listed_up_to_the_limit(monkeypatch):
    people = [f"p{i}" for i in range(6)]
    secret = list("aabbcd")
    auditor, _ = make_auditor(people, sorted(secret), secret, 2)
    auditor.add_public_fact(people[:4], secret[:4])
    assert auditor.ask(["p0", "p1"]).response == "positive-denial"  # G: A = (a, a) or A = (b, b)
    assert len(auditor.knowledge.branches) == 2
    alike = [auditor.universe.members(["p4", "p5"])]  # splits both branches the same way: no listing
    differ = [auditor.universe.members(["p0", "p1", "p2"])]  # its base is (a, a) or (b, b): listed
    monkeypatch.setattr(nested, "MAX_LISTED", 3)
    assert nested.nested_delta(auditor.knowledge, differ, 2) is not None
    monkeypatch.setattr(nested, "MAX_LISTED", 1)
    assert nested.nested_delta(auditor.knowledge, differ, 2) is None
    assert nested.nested_delta(auditor.knowledge, alike, 2) is not None

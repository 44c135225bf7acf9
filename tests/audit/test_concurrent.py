"""Algorithm 5, the delay strategy (Definition 5) and the joint strategy (Definition 6)."""

from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from privpub.tasks.audit import Auditor, ask_batch
from tests.audit import brute
from tests.audit.test_golden import Q1, Q2, table12_auditor


def test_delay_strategy_answers_the_delayed_q1_once_q2_empties_its_delta():
    auditor, spy = table12_auditor("delay")
    d1 = auditor.ask(Q1, "q1")
    assert d1.response == "delayed" and spy.reads == []
    d2 = auditor.ask(Q2, "q2")
    assert d2.response == "answer"
    (late,) = auditor.take_resolved()
    assert (late.query_id, late.response, list(late.values)) == ("q1", "answer", ["gastritis", "headache"])
    assert auditor.pool == []


def test_delay_strategy_keeps_waiting_while_delta_is_not_empty():
    auditor, spy = table12_auditor("delay")
    auditor.ask(Q1, "q1")
    auditor.ask(["Alice", "Fen"], "q3")  # does not separate Diana and Ellen from the cancers
    assert [p.query_id for p in auditor.pool][:1] == ["q1"]
    assert all(d.query_id != "q1" for d in auditor.take_resolved())


def people_frame(n):
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "age": range(n)})


def transcript(auditor_factory, secret, queries, batch=False):
    """Run a strategy on one candidate table; return what the adversary observes."""
    auditor = auditor_factory(secret)
    if batch:
        decisions = ask_batch(auditor, [(f"q{k}", q) for k, q in enumerate(queries)])
    else:
        decisions = [auditor.ask(q, f"q{k}") for k, q in enumerate(queries)]
        decisions += auditor.take_resolved()
    return tuple(sorted((d.query_id, d.response, d.values, d.joint) for d in decisions))


@st.composite
def tiny(draw):
    n = draw(st.integers(3, 4))
    values = draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    subsets = st.lists(st.integers(0, n - 1), min_size=1, max_size=n).map(lambda xs: [f"p{i}" for i in sorted(set(xs))])
    return n, values, draw(st.lists(subsets, min_size=2, max_size=3))


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny(), st.sampled_from(["delay", "joint", "batch"]))
def test_an_adversary_replaying_delay_joint_or_batch_never_narrows_anyone_below_l(case, strategy):
    n, values, queries = case
    l = 2
    world = sorted(brute.all_instances(n, sorted(values), closed=True))
    assume(brute.is_l_uncertain(frozenset(world), n, l))
    people = [f"p{i}" for i in range(n)]

    def factory(secret):
        mapping = dict(zip(people, secret))
        return Auditor(
            people_frame(n),
            sorted(values),
            l,
            lambda ids: [mapping[i] for i in ids],
            strategy="simulatable" if strategy == "batch" else strategy,
        )

    groups: dict[tuple, set] = {}
    for secret in world:
        groups.setdefault(transcript(factory, secret, queries, strategy == "batch"), set()).add(secret)
    for group in groups.values():
        assert brute.is_l_uncertain(frozenset(group), n, l)


def test_thesis_optimal_order_is_not_simulatable_and_leaks():
    """Algorithm 5 step 2 picks the order that answers most queries *by reading the table*.
    Replaying it over all instances, some transcripts pin a person to one value (below l = 2),
    e.g. p4 = 'b' when the table is (a, c, c, a, b) or (c, a, a, c, b), while the
    simulatable round order keeps everyone at >= 2 values for the same queries."""
    n, values, queries = 5, ["a", "a", "b", "c", "c"], [["p1", "p2"], ["p0", "p3"]]
    people = [f"p{i}" for i in range(n)]
    world = sorted(brute.all_instances(n, values, closed=True))

    def groups(order):
        out: dict[tuple, set] = {}
        for secret in world:
            mapping = dict(zip(people, secret))
            auditor = Auditor(people_frame(n), values, 2, lambda ids, mapping=mapping: [mapping[i] for i in ids])
            ds = ask_batch(auditor, [(f"q{k}", q) for k, q in enumerate(queries)], order=order)
            out.setdefault(tuple((d.response, d.values) for d in ds), set()).add(secret)
        return out.values()

    leaky = [g for g in groups("optimal") if not brute.is_l_uncertain(frozenset(g), n, 2)]
    assert {("a", "c", "c", "a", "b"), ("c", "a", "a", "c", "b")} in leaky
    assert all(brute.is_l_uncertain(frozenset(g), n, 2) for g in groups("simulatable"))

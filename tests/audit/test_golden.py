"""Every number of the thesis's Tables 4-13, through the auditor's public API.

Worlds: the thesis states (Section 3.3) that the multiset of sensitive values is public (closed
world), but its Table 4-6 and 9-11 examples are computed as if only the domain were public (open
world: someone outside every fact may hold anything). Each example is checked in the world where
its numbers hold, and where the two disagree both are tested.
"""

from __future__ import annotations

import pandas as pd
import pytest

from privpub.tasks.audit import Auditor, ask_batch, nested, secret_from_mapping
from privpub.tasks.audit.decide import compute_delta, possible_answers, restricted
from privpub.tasks.audit.knowledge import Knowledge
from privpub.tasks.audit.program import Work
from tests.audit import brute


@pytest.fixture(autouse=True, params=[True, False], ids=["nested-path", "solver-routes"])
def route(request, monkeypatch):
    """Every worked example twice: as the auditor decides it (the nested path takes the
    laminar ones, issue 31) and by the solver routes alone, so both stay pinned to the thesis."""
    monkeypatch.setattr(nested, "ENABLED", request.param)
    return request.param


# Table 4: the secret table (first relation) and the ages that identify people.
AGES = {"Alice": 60, "Bob": 50, "Clark": 40, "Diana": 35, "Ellen": 34, "Fen": 33, "George": 30}
TABLE4 = {
    "Alice": "flu",
    "Bob": "cancer",
    "Clark": "cancer",
    "Diana": "headache",
    "Ellen": "gastritis",
    "Fen": "pneumonia",
    "George": "HIV",
}
F1_VALUES = ["cancer", "cancer", "flu", "gastritis", "headache", "pneumonia"]
DOMAIN = ["HIV", "cancer", "flu", "gastritis", "headache", "pneumonia"]


def population(names):
    return pd.DataFrame({"name": list(names), "age": [AGES.get(n, 0) for n in names]})


class Spy:
    """A secret reader that records every read."""

    def __init__(self, mapping):
        self.mapping, self.reads = mapping, []

    def __call__(self, ids):
        self.reads.append(list(ids))
        return [self.mapping[i] for i in ids]


def delta_of(auditor, ids, need=None):
    sets = [auditor.universe.members(ids)]
    listed = compute_delta(auditor.knowledge, sets, auditor.l, Work(), need=need, list_answers=True)
    fast = compute_delta(auditor.knowledge, sets, auditor.l, Work(), need=need)
    # the fast routes find the same Delta as listing every answer
    assert fast.everything or set(fast.unsafe) == set(listed.unsafe)
    assert fast.is_safe_query(auditor.l) == listed.is_safe_query(auditor.l)
    return sets, listed


# --- Tables 4 and 5 ------------------------------------------------------------------------------
def table4_open_auditor():
    spy = Spy(TABLE4)
    auditor = Auditor(population(AGES), DOMAIN, 2, spy, open_world=True)
    first = auditor.ask_where("age BETWEEN 32 AND 60")  # F1
    assert first.response == "answer"
    assert list(first.values) == F1_VALUES
    return auditor, spy


def test_table5_ages_40_to_50_after_f1_has_11_answers_one_unsafe_and_is_denied_unread():
    for auditor, spy in [
        table4_open_auditor(),
        (lambda s: (Auditor(population(list(AGES)[:6]), F1_VALUES, 2, s), s))(Spy(TABLE4)),
    ]:
        _, report = delta_of(auditor, ["Bob", "Clark"], need=None)
        assert len(report.answers) == 11
        assert len(report.unsafe) == 1
        assert auditor.universe.multiset(next(iter(report.unsafe))[0]) == ["cancer", "cancer"]
        assert report.floor() == 1  # across Delta Bob and Clark both have cancer
        reads = len(spy.reads)
        decision = auditor.ask_where("age BETWEEN 40 AND 50")
        assert decision.response == "negative-denial"
        assert (decision.unsafe_answers, decision.floor_delta) == (1, 1)
        assert len(spy.reads) == reads  # decided without reading the secret table


def test_table4_answering_ages_30_to_50_after_f1_would_reveal_alice_and_george():
    auditor, spy = table4_open_auditor()
    f2_ids = ["Bob", "Clark", "Diana", "Ellen", "Fen", "George"]
    f2 = sorted(TABLE4[i] for i in f2_ids)
    assert f2 == ["HIV", "cancer", "cancer", "gastritis", "headache", "pneumonia"]
    revealed = (
        Knowledge(auditor.universe, auditor.knowledge.branches)
        .restrict([brute_fact(auditor, f2_ids, f2)])
        .possible_values()
    )
    by_name = dict(zip(auditor.universe.people, revealed))
    assert by_name["Alice"] == {"flu"} and by_name["George"] == {"HIV"}
    # so the auditor must not answer; denying is safe (Alice and George keep >= 2 values)
    decision = auditor.ask_where("age BETWEEN 30 AND 50")
    assert decision.response == "positive-denial"
    after = auditor.possible_values()
    assert len(after["Alice"]) == 5 and len(after["George"]) == 6


def brute_fact(auditor, ids, values):
    from privpub.tasks.audit.program import Constraint

    return Constraint(auditor.universe.members(ids), auditor.universe.counts_of(values))


def test_closed_world_f1_itself_would_pin_george():
    """With the whole multiset public (Section 3.3), releasing F1 pins George to HIV, so the
    auditor refuses F1: the thesis's Table 4 narrative only holds in the open world."""
    auditor = Auditor(population(AGES), list(TABLE4.values()), 2, Spy(TABLE4))
    decision = auditor.ask_where("age BETWEEN 32 AND 60")
    assert decision.response == "positive-denial"  # every answer pins George: Delta = G
    assert decision.reason.startswith("the real data would narrow someone to fewer than")


def test_section_5_1_ages_50_and_over_is_a_negative_denial():
    spy = Spy(TABLE4)
    auditor = Auditor(population(list(AGES)[:6]), F1_VALUES, 2, spy)
    decision = auditor.ask_where("age >= 50")
    assert decision.response == "negative-denial" and decision.unsafe_answers == 1
    assert spy.reads == []


# --- Table 6 -------------------------------------------------------------------------------------
T6_F1 = (
    ["Alice", "Bob", "Clark", "Diana", "Ellen", "Fen"],
    ["cancer", "cancer", "flu", "headache", "headache", "pneumonia"],
)
T6_F2 = (["Diana", "Ellen", "Fen", "George", "Helen", "Ian"], ["cancer", "flu", "flu", "HIV", "headache", "headache"])
NINE = ["Alice", "Bob", "Clark", "Diana", "Ellen", "Fen", "George", "Helen", "Ian"]


def table6_auditor():
    auditor = Auditor(population(NINE), ["HIV", "cancer", "flu", "headache", "pneumonia"], 2, open_world=True)
    auditor.add_public_fact(*T6_F1)
    auditor.add_public_fact(*T6_F2)
    return auditor


def test_table6_possible_value_list():
    poss = table6_auditor().possible_values()
    for name in ["Alice", "Bob", "Clark"]:
        assert set(poss[name]) == {"flu", "cancer", "headache", "pneumonia"}
    for name in ["Diana", "Ellen", "Fen"]:
        assert set(poss[name]) == {"flu", "cancer", "headache"}
    for name in ["George", "Helen", "Ian"]:
        assert set(poss[name]) == {"flu", "cancer", "headache", "HIV"}


def test_table6_alice_bob_diana_never_share_a_value():
    auditor = table6_auditor()
    sets = [auditor.universe.members(["Alice", "Bob", "Diana"])]
    answers = possible_answers(auditor.knowledge, sets, Work())
    assert answers and all(sum(1 for t in a[0] if t) >= 2 for a in answers)


def test_table6_needs_the_open_world():
    """Closed world: the public multiset fixes the common part of F1 and F2 (total = F1 + F2 -
    common), so Diana, Ellen and Fen lose the possibilities Table 6 lists."""
    secret = {
        "Alice": "cancer",
        "Bob": "pneumonia",
        "Clark": "cancer",
        "Diana": "headache",
        "Ellen": "flu",
        "Fen": "headache",
        "George": "flu",
        "Helen": "HIV",
        "Ian": "cancer",
    }
    auditor = Auditor(population(NINE), list(secret.values()), 2)
    auditor.add_public_fact(*T6_F1)
    auditor.add_public_fact(*T6_F2)
    poss = auditor.possible_values()
    assert set(poss["Diana"]) == {"flu", "headache"}


# --- Table 8 -------------------------------------------------------------------------------------
T8_PEOPLE = ["Alice", "Bob", "Clark", "Diana", "Ellen", "Fen"]
T8_VALUES = ["cancer", "cancer", "flu", "headache", "headache", "pneumonia"]


def test_table8_answer_splits_f1_into_two_views():
    secret = dict(zip(T8_PEOPLE, ["cancer", "flu", "cancer", "headache", "headache", "pneumonia"]))
    auditor = Auditor(population(T8_PEOPLE), T8_VALUES, 2, secret_from_mapping(secret))
    decision = auditor.ask(["Alice", "Bob"])
    assert decision.response == "answer" and list(decision.values) == ["cancer", "flu"]
    (views,) = auditor.knowledge.views()
    assert [(v["ids"], v["determined"]) for v in views] == [
        (["Alice", "Bob"], ["cancer", "flu"]),
        (["Clark", "Diana", "Ellen", "Fen"], ["cancer", "headache", "headache", "pneumonia"]),
    ]


def test_table8_positive_denial_leaves_both_cancer_or_both_headache():
    secret = dict(zip(T8_PEOPLE, ["cancer", "cancer", "flu", "headache", "headache", "pneumonia"]))
    spy = Spy(secret)
    auditor = Auditor(population(T8_PEOPLE), T8_VALUES, 2, spy)
    decision = auditor.ask(["Alice", "Bob"])
    assert decision.response == "positive-denial" and spy.reads
    assert decision.unsafe_answers == 2 and decision.floor_delta == 2
    world = brute.all_instances(6, T8_VALUES, closed=True)
    kept = brute.instances_of(auditor.knowledge, world)
    assert {(i[0], i[1]) for i in kept} == {("cancer", "cancer"), ("headache", "headache")}
    assert len(kept) == 2 * 12  # the other four people: 4!/2! arrangements each


# --- Tables 9, 10, 11 ----------------------------------------------------------------------------
def test_table10_views_determined_and_possible_values():
    (views,) = table6_auditor().knowledge.views()
    got = {tuple(v["ids"]): (v["determined"], set(v["possible"]), v["undetermined_slots"]) for v in views}
    assert got == {
        ("Alice", "Bob", "Clark"): (["cancer", "pneumonia"], {"cancer", "flu", "headache"}, 1),
        ("Diana", "Ellen", "Fen"): (["headache"], {"cancer", "flu", "headache"}, 2),
        ("George", "Helen", "Ian"): (["HIV", "flu"], {"cancer", "flu", "headache"}, 1),
    }


def test_table9_common_people_have_four_possible_values_of_which_headache_is_determined():
    (views,) = table6_auditor().knowledge.views()
    common = next(v for v in views if v["ids"] == ["Diana", "Ellen", "Fen"])
    # possible values {flu, cancer, headache, headache}: headache once for sure, two more of the rest
    assert sorted(common["determined"] + ["cancer", "flu", "headache"]) == ["cancer", "flu", "headache", "headache"]


def test_table11_three_sets_of_views():
    sets = table6_auditor().knowledge.view_sets()
    as_tables = {tuple((ids, vals) for ids, vals in s) for s in sets}
    abc, deff, ghi = ("Alice", "Bob", "Clark"), ("Diana", "Ellen", "Fen"), ("George", "Helen", "Ian")
    assert as_tables == {
        (
            (abc, ("cancer", "flu", "pneumonia")),
            (deff, ("cancer", "headache", "headache")),
            (ghi, ("HIV", "flu", "flu")),
        ),
        (
            (abc, ("cancer", "cancer", "pneumonia")),
            (deff, ("flu", "headache", "headache")),
            (ghi, ("HIV", "cancer", "flu")),
        ),
        (
            (abc, ("cancer", "headache", "pneumonia")),
            (deff, ("cancer", "flu", "headache")),
            (ghi, ("HIV", "flu", "headache")),
        ),
    }


# --- Tables 12 and 13 ----------------------------------------------------------------------------
T12 = {
    "Alice": "cancer",
    "Bob": "cancer",
    "Clark": "flu",
    "Diana": "gastritis",
    "Ellen": "headache",
    "Fen": "pneumonia",
    "George": "HIV",
}
Q1, Q2 = ["Diana", "Ellen"], ["Alice", "Bob", "Clark"]


def table12_auditor(strategy="simulatable"):
    spy = Spy(T12)
    return Auditor(population(T12), list(T12.values()), 2, spy, strategy=strategy), spy


def test_table12_order_matters_q1_first_denies_q1():
    auditor, _ = table12_auditor()
    assert [auditor.ask(q).response for q in (Q1, Q2)] == ["negative-denial", "answer"]


def test_table12_checking_q2_before_q1_answers_both():
    auditor, _ = table12_auditor()
    assert [auditor.ask(q).response for q in (Q2, Q1)] == ["answer", "answer"]
    batch_auditor, _ = table12_auditor()
    decisions = ask_batch(batch_auditor, [("q1", Q1), ("q2", Q2)])
    assert [d.response for d in decisions] == ["answer", "answer"]
    assert list(decisions[0].values) == ["gastritis", "headache"]
    assert list(decisions[1].values) == ["cancer", "cancer", "flu"]


def test_table13_sixteen_answers_delta_120_then_25_then_6_and_an_answer():
    auditor, spy = table12_auditor()
    world = brute.all_instances(7, list(T12.values()), closed=True)

    sets, report = delta_of(auditor, Q1, need=None)
    assert len(report.answers) == 16 and len(report.unsafe) == 1
    assert auditor.universe.multiset(next(iter(report.unsafe))[0]) == ["cancer", "cancer"]
    delta = Knowledge.union(
        auditor.universe, [restricted(auditor.knowledge, sets, a, b) for a, b in report.unsafe.items()]
    )
    assert len(brute.instances_of(delta, world)) == 120
    assert report.floor() == 1
    d1 = auditor.ask(Q1)
    assert (d1.response, d1.unsafe_answers, d1.floor_delta) == ("negative-denial", 1, 1)
    assert spy.reads == []

    _, report = delta_of(auditor, Q2)
    assert len(report.answers) == 25 and report.empty
    d2 = auditor.ask(Q2)
    assert (d2.response, d2.unsafe_answers) == ("answer", 0)

    _, report = delta_of(auditor, Q1)
    assert len(report.answers) == 6 and report.empty
    d3 = auditor.ask(Q1)
    assert (d3.response, list(d3.values)) == ("answer", ["gastritis", "headache"])
    # Table 12's G3: three views
    (views,) = auditor.knowledge.views()
    assert [(v["ids"], v["determined"]) for v in views] == [
        (["Alice", "Bob", "Clark"], ["cancer", "cancer", "flu"]),
        (["Diana", "Ellen"], ["gastritis", "headache"]),
        (["Fen", "George"], ["HIV", "pneumonia"]),
    ]

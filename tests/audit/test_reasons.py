"""Every response carries one plain sentence: what kind of decision it is and whether it depended
on the real data; answers show counts per value; a bad column names the allowed ones."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from privpub.tasks.audit import Auditor, nested, reasons, select_ids
from tests.audit.test_golden import AGES, DOMAIN, Q1, Q2, T12, Spy, population, table4_open_auditor

NEGATIVE = (
    "answering could, for some data consistent with what you have already seen, narrow someone to fewer "
    "than {l} values; this decision does not depend on the real data"
)


def one_sentence(text: str) -> bool:
    return bool(text) and "\n" not in text and ". " not in text


def test_a_negative_denial_says_it_does_not_depend_on_the_real_data():
    spy = Spy(T12)
    auditor = Auditor(population(T12), list(T12.values()), 2, spy)
    decision = auditor.ask(Q1)
    assert decision.response == "negative-denial" and spy.reads == []
    assert decision.reason == NEGATIVE.format(l=2)


def test_the_sentences_fill_in_l():
    for l in (2, 3, 7):
        assert reasons.negative(l) == NEGATIVE.format(l=l)
        assert f"fewer than {l} values" in reasons.positive(l) and one_sentence(reasons.positive(l))
        assert reasons.delayed(l).startswith(NEGATIVE.format(l=l))


def test_a_positive_denial_says_the_real_data_decided_without_naming_who_or_what():
    auditor, spy = table4_open_auditor()
    decision = auditor.ask_where("age BETWEEN 30 AND 50")
    assert decision.response == "positive-denial" and spy.reads  # the secret was read
    assert "the real data would narrow someone to fewer than 2 values" in decision.reason
    assert one_sentence(decision.reason)
    named = [*AGES, *DOMAIN]
    assert not any(word in decision.reason for word in named), decision.reason


def test_a_budget_denial_names_the_budget_and_how_to_raise_it(monkeypatch):
    monkeypatch.setattr(nested, "ENABLED", False)  # the solver routes' budget: the nested path has none
    decision = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=3).ask(
        ["Alice", "Bob", "Clark", "Diana", "Ellen"]
    )
    assert decision.budget_hit and decision.response == "negative-denial"
    assert decision.reason.startswith("the work budget of 3 units (solves and solver nodes) was used up")
    assert decision.reason.endswith("`privpub audit set TABLE --budget N` raises it")


def test_an_answer_shows_counts_per_value_beside_the_ids():
    auditor = Auditor(population(T12), list(T12.values()), 2, Spy(T12))
    decision = auditor.ask(Q2)
    assert decision.response == "answer"
    assert decision.reason == "answered: with this answer everyone still has at least 2 possible values"
    assert set(decision.ids) == set(Q2)
    want = Counter(T12[i] for i in Q2)
    assert dict(decision.counts) == want and sum(t for _, t in decision.counts) == len(decision.ids)
    d = json.loads(json.dumps(decision.to_dict()))
    assert d["counts"] == {"cancer": 2, "flu": 1} and d["values"] == ["cancer", "cancer", "flu"]
    assert Auditor(population(T12), list(T12.values()), 2).ask(Q1).counts == ()  # denials: none


@pytest.mark.parametrize("predicate", ["agee > 30", "Age > 30", "regoin = 2 AND age > 3", '"ag" = 1'])
def test_a_misspelled_column_names_the_allowed_ones(predicate):
    people = pd.DataFrame({"name": ["a", "b"], "age": [30, 40], "region": [1, 2]})
    with pytest.raises(ValueError) as err:
        select_ids(people, predicate, "name")
    message = str(err.value)
    assert "the public columns (age, region)" in message and "is not a public column" in message
    assert "Binder" not in message and "Error" not in message and "\n" not in message


@pytest.mark.parametrize("predicate", ["age = 'x'", "age + 'x' > 1", "region + 1 > 2", "age = region"])
def test_a_type_error_names_the_columns_and_their_kinds_never_the_engine(predicate):
    people = pd.DataFrame({"name": ["a", "b"], "age": [30, 40], "region": ["north", "south"]})
    with pytest.raises(ValueError) as err:
        select_ids(people, predicate, "name")
    message = str(err.value)
    assert "(age: number, region: text)" in message and message.endswith("public columns (age, region)")
    assert "Exception" not in message and "Binder" not in message and "Conversion" not in message


# -- each denial kind's reason against its definition (issue 42 item 6) ------------------------
# The definitions (docs/auditing.md "Responses and their reasons", README "The online auditor"):
# a negative denial is decided without the real data (for some data consistent with what was seen,
# answering would narrow someone; every table consistent with it gets the same denial); a positive
# denial is decided because of it (the real answer would narrow someone; the denial reveals only
# that the real answer is one of the unsafe ones).
POSITIVE_OPENING = "the real data would narrow someone to fewer than {l} values if this were answered"
NEGATIVE_WORDS = ("does not depend on the real data", "answering could, for some data")


def decide_on_every_table(secret, facts, q, l):
    """The auditor's decision on q after the facts, for the real table `secret` and for every
    other table consistent with what was seen (brute force's G); with brute force's Algorithm 2
    step for each, and whether each auditor read its table."""
    from tests.audit import brute
    from tests.audit.test_properties import make_auditor

    n, people = len(secret), [f"p{i}" for i in range(len(secret))]
    world = brute.all_instances(n, sorted(secret), closed=True)
    g = world
    for f in facts:
        g = frozenset(i for i in g if brute.answer(i, [f]) == brute.answer(tuple(secret), [f]))
    out = []
    for table in sorted(g):
        auditor, calls = make_auditor(people, sorted(secret), list(table), l)
        for f in facts:
            auditor.add_public_fact([people[p] for p in f], [table[p] for p in f])
        decision = auditor.ask([people[p] for p in q])
        out.append((table, decision, brute.step(g, [q], n, l, table)[0], bool(calls)))
    return g, out


def test_a_negative_denial_is_the_same_on_every_table_and_its_reason_says_so():
    """Brute force: Delta holds an instance leaving someone < l values (floor < l), so Algorithm 2
    denies negatively on every table consistent with G, none read; the reason is the negative one."""
    from tests.audit import brute

    secret, q, l = tuple("aabcd"), frozenset({3, 4}), 2  # q = two people holding c, d among a a b c d
    g, decided = decide_on_every_table(secret, [], q, l)
    assert brute.floor(brute.delta(g, [q], len(secret), l), len(secret)) < l
    for _, decision, expected, read in decided:
        assert decision.response == expected == "negative-denial" and not read
        assert decision.reason == reasons.negative(l) and all(w in decision.reason for w in NEGATIVE_WORDS)
        assert POSITIVE_OPENING.format(l=l) not in decision.reason


def test_a_positive_denial_depends_on_the_real_answer_and_its_reason_says_so():
    """a a b b, l = 2, q = {p0, p1}: Delta = the instances answering (a, a) or (b, b), floor 2, so q is
    l-safe; brute force denies positively exactly the tables whose real answer is unsafe, answers the
    others; every auditor reads its table, and a denial's reason is the positive one, never the
    negative definition's words."""
    from tests.audit import brute

    secret, q, l = tuple("aabb"), frozenset({0, 1}), 2
    g, decided = decide_on_every_table(secret, [], q, l)
    unsafe = brute.unsafe_answers(g, [q], len(secret), l)
    kinds = set()
    for table, decision, expected, read in decided:
        assert decision.response == expected and read
        kinds.add(expected)
        if expected == "positive-denial":
            assert brute.answer(table, [q]) in unsafe  # the real answer would narrow someone
            assert decision.reason == reasons.positive(l)
            assert decision.reason.startswith(POSITIVE_OPENING.format(l=l))
            assert "one of the unsafe ones" in decision.reason
            assert not any(w in decision.reason for w in NEGATIVE_WORDS), decision.reason
        else:
            assert brute.answer(table, [q]) not in unsafe
    assert kinds == {"positive-denial", "answer"}  # the real data decides


def test_a_positive_denial_every_answer_of_which_is_unsafe_reads_as_a_positive_denial():
    """Route 1 (Delta = G, the differencing case of test_properties): brute force's Algorithm 2 gives
    a positive denial on every table (l-safe, the real answer unsafe); its reason opens as every
    positive denial's, says that every answer would narrow someone, and does not use the negative
    denial's definition (the issue: it read "this decision does not depend on the real data")."""
    from tests.audit import brute

    secret, facts, q, l = tuple("abacab"), [frozenset({0, 1}), frozenset({1, 2})], frozenset({0, 1, 2}), 2
    g, decided = decide_on_every_table(secret, facts, q, l)
    assert brute.delta(g, [q], len(secret), l) == g and brute.floor(g, len(secret)) >= l
    for _, decision, expected, _ in decided:
        assert decision.response == expected == "positive-denial"
        assert decision.reason == reasons.structural(l) and one_sentence(decision.reason)
        assert decision.reason.startswith(POSITIVE_OPENING.format(l=l))
        assert "so would every possible answer" in decision.reason
        assert not any(w in decision.reason for w in NEGATIVE_WORDS), decision.reason


@pytest.mark.parametrize("l", [2, 3, 5])
def test_only_the_negative_reasons_use_the_negative_definition(l):
    positive = [reasons.positive(l), reasons.structural(l), reasons.joint_denied(l, ("q1", "q2"))]
    assert all(not any(w in r for w in NEGATIVE_WORDS) for r in positive)
    assert all("would narrow someone" in r for r in positive)
    for negative in (reasons.negative(l), reasons.delayed(l), reasons.batch_negative(l)):
        assert all(w in negative for w in NEGATIVE_WORDS) and "would narrow someone" not in negative

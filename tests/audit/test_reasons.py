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

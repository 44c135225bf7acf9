"""Budget, persistence, the SQL selection helper and the secret-reading discipline."""

from __future__ import annotations

import json

import pytest

from privpub.tasks.audit import Auditor, nested, select_ids
from tests.audit.test_golden import Q1, Q2, T12, Spy, population, table12_auditor

FIVE = ["Alice", "Bob", "Clark", "Diana", "Ellen"]


def test_budget_denies_without_reading_the_secret_and_says_so(monkeypatch):
    """A budget denial reads no secret value and changes no knowledge.

    Promise: budget-denials-read-no-secret."""
    monkeypatch.setattr(nested, "ENABLED", False)  # the solver routes' budget: the nested path has none
    spy = Spy(T12)
    auditor = Auditor(population(T12), list(T12.values()), 2, spy, budget=5)
    decision = auditor.ask(FIVE)  # needs 9 solves
    assert decision.response == "negative-denial" and decision.budget_hit
    assert "budget" in decision.reason and spy.reads == []
    assert auditor.knowledge.branches == [()]  # nothing learnt, nothing changed


def test_generous_budget_changes_nothing():
    auditor, _ = table12_auditor()
    budgeted = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=10_000)
    for q in (Q1, Q2, FIVE, Q1):
        assert auditor.ask(q).response == budgeted.ask(q).response


def test_state_round_trip_through_json_keeps_the_knowledge():
    auditor, _ = table12_auditor()
    auditor.ask(Q2)
    state = json.loads(json.dumps(auditor.to_state()))
    restored = Auditor.from_state(state, population(T12), list(T12.values()), Spy(T12))
    assert restored.possible_values() == auditor.possible_values()
    assert restored.to_state() == auditor.to_state()
    assert restored.ask(Q1).response == "answer"  # the restored knowledge makes q1 safe
    fresh, _ = table12_auditor()
    assert fresh.ask(Q1).response == "negative-denial"


def test_state_refuses_a_different_population():
    auditor, _ = table12_auditor()
    state = auditor.to_state()
    other = population(T12)
    other.loc[0, "name"] = "Zoe"
    with pytest.raises(ValueError, match="differ"):
        Auditor.from_state(state, other, list(T12.values()))


def test_select_ids_runs_a_predicate_over_the_public_table():
    pop = population(T12)
    assert select_ids(pop, "age BETWEEN 32 AND 60", "name") == ["Alice", "Bob", "Clark", "Diana", "Ellen", "Fen"]
    assert select_ids(pop, "age < 30", "name") == []


@pytest.mark.parametrize(
    "predicate",
    ["age > 1; DROP TABLE population", "age IN (SELECT 1 FROM read_csv('/etc/hostname'))", "no_such_column = 1"],
)
def test_select_ids_rejects_what_is_not_a_predicate_over_the_public_table(predicate):
    with pytest.raises(ValueError):
        select_ids(population(T12), predicate, "name")


def test_secret_is_read_only_for_the_selected_people_after_the_check():
    auditor, spy = table12_auditor()
    auditor.ask(Q1)
    assert spy.reads == []
    auditor.ask(Q2)
    assert spy.reads == [sorted(Q2)]


def test_decision_is_json_serialisable():
    auditor, _ = table12_auditor()
    d = auditor.ask(Q2).to_dict()
    assert json.loads(json.dumps(d))["values"] == ["cancer", "cancer", "flu"]


def test_count_budget_denies_without_reading_the_secret_and_is_kept_in_the_state(monkeypatch):
    """(Was the wall-clock time_budget test: budgets are counts of work now.)

    Promise: budget-denials-read-no-secret."""
    monkeypatch.setattr(nested, "ENABLED", False)  # the solver routes' budget: the nested path has none
    spy = Spy(T12)
    auditor = Auditor(population(T12), list(T12.values()), 2, spy, budget=1)
    decision = auditor.ask(FIVE)  # needs 9 solves
    assert decision.response == "negative-denial" and decision.budget_hit
    assert "budget" in decision.reason and spy.reads == []
    assert auditor.knowledge.branches == [()]
    state = json.loads(json.dumps(auditor.to_state()))
    assert state["budget"] == 1 and "time_budget" not in state
    assert Auditor.from_state(state, population(T12), list(T12.values())).budget == 1
    for bad in (0, -1, True, 1.5, "3"):
        with pytest.raises(ValueError, match="budget"):
            Auditor(population(T12), list(T12.values()), 2, budget=bad)


@pytest.mark.parametrize(
    ("predicate", "named"),
    [  # issue 25, items 3 and 4: what the raw SQL let through
        ("age > 200) UNION ALL SELECT 'FAKE-ID-1' UNION ALL (SELECT name FROM population WHERE age > 200", "not one"),
        ("error(name) IS NULL", "is not allowed"),
        ("age > (SELECT count(*) FROM range(12000000000) t(x) WHERE x % 7 = 3) - 1000000000", "SUBQUERY"),
        ("name = 'Alice'", "name is not a public column"),  # the person id is not a QI
        ("population.age > 3", "population.age is not a public column"),
        ("age > 1; DROP TABLE population", "not one"),
        ("lower(age) = 'x'", "is not allowed"),
        ("age LIKE '3%'", "LIKE is not allowed"),
    ],
)
def test_a_predicate_outside_the_grammar_is_refused_naming_what_and_the_allowed_columns(predicate, named):
    with pytest.raises(ValueError) as err:
        select_ids(population(T12), predicate, "name")
    message = str(err.value)
    assert named in message and "the public columns (age)" in message and "\n" not in message
    assert "Alice" not in message and "FAKE" not in message


def test_predicates_inside_the_grammar_select_as_written():
    pop = population(T12)
    ages = dict(zip(pop["name"], pop["age"]))
    for predicate, keep in [
        ("NOT (age + 1 >= 2 * 30) OR age IN (61, 62)", lambda a: not (a + 1 >= 60) or a in (61, 62)),
        ("-age < -40 AND age / 2 <= 30", lambda a: -a < -40 and a / 2 <= 30),
        ("(age BETWEEN 30 AND 40) OR (age <> 50 AND age - 1 = 59)", lambda a: 30 <= a <= 40 or (a != 50 and a == 60)),
    ]:
        assert select_ids(pop, predicate, "name") == [n for n, a in ages.items() if keep(a)], predicate


def test_an_evaluation_error_quotes_no_cell():
    with pytest.raises(ValueError, match=r"cannot be evaluated over the public columns \(\w+\)$") as err:
        select_ids(population(T12), "age = 'Alice'", "name")
    assert "Alice" not in str(err.value).replace("'Alice'", "")  # the literal is the analyst's own

"""Exact auditing is NP-hard in general: a positive 1-in-3 SAT formula becomes released facts.

Gadget (closed world, values T and F): a switch person s, one person per variable, people in no fact. Each clause C is released as the fact C + {s} holding one T and three F. When s holds T
every variable holds F (the real table); when s holds F each clause has exactly one true
variable. The free people (twice as many as variables, half of them T) absorb the change in
the population's count of T. So s can hold F, i.e. s has a second possible value, exactly when the formula is
satisfiable: every exact route of the auditor (possible values, Delta, the floor of Delta) has to
decide SAT on such knowledge. Positive 1-in-3 SAT is NP-complete (Schaefer 1978), so no exact
auditor decides every query in polynomial time unless P = NP; the thesis leaves complexity open
(its conclusion). docs/auditing.md, "Issue 16, fifth pass", says what this means for issue 16.

Checked against brute force over every instance, and through Algorithm 2: the query "two of the
people in no fact" is negatively denied when the formula is unsatisfiable (s is T across Delta)
and answered when it is satisfiable with every variable true in some solution.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.audit import brute
from tests.audit.test_exchange import instances
from tests.audit.test_witness import auditor_for

T, F = 1, 0  # brute force's value indices ("F" < "T" sorted)


def solutions(n_vars: int, clauses: list[tuple[int, int, int]]) -> list[tuple[int, ...]]:
    """Every assignment with exactly one true variable per clause."""
    return [
        bits for bits in itertools.product((0, 1), repeat=n_vars) if all(sum(bits[v] for v in c) == 1 for c in clauses)
    ]


def gadget(n_vars: int, clauses: list[tuple[int, int, int]]):
    """The auditor (real table: s = T, variables F, half the free people T) with every clause
    released; person 0 is s, 1..n_vars the variables, the rest free."""
    secret = ["T"] + ["F"] * n_vars + ["T", "F"] * n_vars
    auditor, people, reads = auditor_for(secret, 2)
    facts = [[0] + [1 + v for v in c] for c in clauses]
    for f in facts:
        auditor.add_public_fact([people[p] for p in f], [secret[p] for p in f])
    return auditor, people, reads, secret, facts


def coded(secret: list[str]) -> tuple[int, ...]:
    return tuple(T if v == "T" else F for v in secret)


def brute_g(secret: list[str], facts: list[list[int]]) -> frozenset:
    """G by brute force: the arrangements of the multiset with one T in every clause fact."""
    return frozenset(i for i in instances(coded(secret)) if all(sum(i[p] == T for p in f) == 1 for f in facts))


UNSAT = (4, [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)])  # 3 * trues = 4 clauses: impossible
SAT = (4, [(0, 1, 2), (1, 2, 3)])  # solutions {1}, {2}, {0, 3}: every variable true in one


def test_gadget_formulas_are_what_the_tests_say():
    assert solutions(*UNSAT) == []
    sols = solutions(*SAT)
    assert sols and all(any(s[v] for s in sols) for v in range(SAT[0]))


def test_switch_has_a_second_value_exactly_when_the_formula_is_satisfiable():
    for formula, satisfiable in ((UNSAT, False), (SAT, True)):
        auditor, people, _, secret, facts = gadget(*formula)
        got = auditor.possible_values()
        assert (got["p0"] == ["F", "T"]) is satisfiable
        world = brute.possible_values(brute_g(secret, facts), len(secret))
        assert [sorted("T" if v == T else "F" for v in s) for s in world] == [got[p] for p in people]


def test_algorithm_2_decides_sat_on_the_gadget():
    """Query two free people (real answer one T, one F). Unsatisfiable: every instance has s = T,
    so Delta (at least the two low-diversity answers) shows s one value: negative denial, secret
    unread. Satisfiable with every variable true somewhere: everyone keeps both values across
    Delta and the real answer is safe: answered. Brute force's Algorithm 2 agrees."""
    for formula, expected in ((UNSAT, "negative-denial"), (SAT, "answer")):
        auditor, people, reads, secret, facts = gadget(*formula)
        n = len(secret)
        q = [1 + formula[0], 2 + formula[0]]  # the first two free people: T and F
        decision = auditor.ask([people[p] for p in q])
        assert decision.response == expected
        assert (reads != []) is (expected == "answer")
        response, _ = brute.step(brute_g(secret, facts), [frozenset(q)], n, 2, coded(secret))
        assert response == expected


clause = st.tuples(*[st.integers(0, 4)] * 3).filter(lambda c: len(set(c)) == 3)


@settings(max_examples=60, deadline=None)
@given(st.lists(clause, min_size=1, max_size=6))
def test_possible_values_of_the_switch_decide_random_formulas(clauses):
    clauses = [tuple(sorted(c)) for c in clauses]
    auditor, people, _, secret, facts = gadget(5, clauses)
    assert ("F" in auditor.possible_values()["p0"]) is bool(solutions(5, clauses))

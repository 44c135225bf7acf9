"""Technique `priview`: block construction, split choice, verification, tampering, estimation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from privpub.tasks.core.types import Partition
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.evaluate.workload import CountQuery, SetCond, exact_answers, make_workload
from privpub.tasks.techniques.ambiguity.priview import priview_estimates
from tests.helpers import release_of, technique_and_data
from tests.test_presence_association import fig9_tables

QI3 = [
    {"name": "a", "kind": "numeric"},
    {"name": "b", "kind": "categorical"},
    {"name": "c", "kind": "ordinal", "order": ["lo", "mid", "hi"]},
]


def make(frame, qi, sensitive, name="priview", **technique):
    return technique_and_data(frame, qi, sensitive, name, **technique)


@st.composite
def tiny_tables(draw):
    n = draw(st.integers(12, 60))
    rows = st.tuples(st.integers(0, 3), st.sampled_from("xyz"), st.sampled_from(["lo", "mid", "hi"]), st.integers(0, 5))
    frame = pd.DataFrame(draw(st.lists(rows, min_size=n, max_size=n)), columns=["a", "b", "c", "s"])
    frame["pid"] = np.arange(n)
    return frame


@settings(max_examples=15, deadline=None)
@given(tiny_tables(), st.integers(0, 2**16))
def test_every_release_passes_the_verifier(frame, seed):
    tech, data = make(frame, QI3, "s", alpha="1/2", beta="1/3", probe_queries=3)
    assume(len(data.sensitive_values) >= 3)
    part, rel = release_of(tech, data, seed)
    presence, association = tech.verify(rel, {})
    assert presence.passed and association.passed
    assert Fraction(presence.value) <= Fraction(1, 2) and Fraction(association.value) <= Fraction(1, 3)
    counts = rel.tables["ST"].column("count").to_numpy()
    assert counts.sum() + rel.info["suppressed"] == len(frame) == rel.tables["AT"].num_rows + rel.info["suppressed"]
    st_qi = part.info["st_qi"]
    assert st_qi in rel.tables["ST"].column_names and st_qi not in rel.tables["AT"].column_names
    for name, schema in tech.table_schemas(tech.spec).items():
        schema.validate(rel.tables[name].to_pandas())


@settings(max_examples=15, deadline=None)
@given(tiny_tables(), st.integers(0, 2**16))
def test_a_row_moved_to_a_group_without_its_qi_value_fails(frame, seed):
    tech, data = make(frame, QI3, "s", alpha="1/2", beta="1/3", probe_queries=3)
    part, rel = release_of(tech, data, seed)
    j = data.qi_names.index(part.info["st_qi"])
    q = data.codes[:, j]
    candidates = [
        (r, g)
        for g in range(part.n_groups)
        for r in np.flatnonzero(part.group >= 0)
        if part.group[r] != g and q[r] not in set(q[part.group == g].tolist())
    ]
    assume(candidates)
    r, g = candidates[0]
    group = part.group.copy()
    group[r] = g  # its QI' value is alone in g: whoever has it and is in T has its S value
    tampered = tech.anonymize(data, Partition(group, part.n_groups, info=part.info), np.random.default_rng(0))
    _, association = tech.verify(tampered, {})
    assert not association.passed and association.value == "1" and association.worst["gid"] == g


def test_census_split_choice_and_utility_against_ambiguity():
    frame = census(4000, seed=2)
    tech, data = make(frame, CENSUS_QI, "occupation", alpha=0.25, beta=0.1, probe_queries=20)
    part, rel = release_of(tech, data)
    assert [r.passed for r in tech.verify(rel, {})] == [True, True]
    errors = part.info["split_errors"]
    assert set(errors) == set(data.qi_names)
    assert part.info["st_qi"] == min(errors, key=lambda k: errors[k]["error"])
    assert errors["sex"]["suppressed"] == 4000  # 2 values cannot make ceil(1/alpha) = 4 blocks
    sizes = tech.group_sizes(rel)
    assert sizes.min() >= 40  # 4 blocks of 10
    workload = make_workload(data, np.random.default_rng(7), per_band=20)
    actual = exact_answers(frame, workload, "occupation")
    amb, adata = make(frame, CENSUS_QI, "occupation", name="ambiguity", alpha=0.25, beta=0.1)
    _, arel = release_of(amb, adata)
    err = {
        name: np.mean(np.abs(actual - t.estimate_counts(r, workload)) / actual)
        for name, t, r in (("priview", tech, rel), ("ambiguity", amb, arel))
    }
    assert err["priview"] < err["ambiguity"]  # Theorem 7's direction on this data


def test_estimates_follow_fig5_over_two_tables():
    # Fig. 9 tables, Q2 (age >= 50, zip 23000, diabetes): group 1 has no (23000, diabetes) unit;
    # group 2 has c = 1 and 3 of its 4 AT rows have age >= 50, so 3/4
    at, st_t = fig9_tables()
    from privpub.tasks.evaluate.workload import RangeCond

    q2 = CountQuery((("age", RangeCond(50, 200)), ("zipcode", RangeCond(23000, 23000))), "diabetes")
    q_and = CountQuery((("age", RangeCond(60, 60)), ("gender", SetCond(frozenset({"F"})))), "leukemia")
    est = priview_estimates({"AT": at, "ST": st_t}, "disease", [q2, q_and, CountQuery((), "leukemia")])
    # q_and: both AT conditions judged together on AT rows: 2 of 4 rows in group 2, c = 2
    assert [Fraction(e) for e in est] == [Fraction(3, 4), Fraction(2 * 2, 4), Fraction(2)]

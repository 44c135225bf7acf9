"""Technique `ambiguity`: construction, published tables, verification, tampering, estimation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from privpub.schemas.errors import SpecError
from privpub.tasks.core.types import Partition
from privpub.tasks.demo_data import CENSUS_QI, ambiguity_fig1, census
from privpub.tasks.evaluate.workload import CountQuery, RangeCond, exact_answers, make_workload
from privpub.tasks.techniques.ambiguity.technique import greedy_groups
from tests.helpers import release_of, technique_and_data

QI3 = [
    {"name": "a", "kind": "numeric"},
    {"name": "b", "kind": "categorical"},
    {"name": "c", "kind": "ordinal", "order": ["lo", "mid", "hi"]},
]


def make(frame: pd.DataFrame, qi: list[dict], sensitive: str, **technique):
    return technique_and_data(frame, qi, sensitive, "ambiguity", **technique)


@st.composite
def tiny_tables(draw):
    n = draw(st.integers(8, 60))
    rows = st.tuples(
        st.integers(0, 4),
        st.sampled_from("xyz"),
        st.sampled_from(["lo", "mid", "hi"]),
        st.integers(0, draw(st.integers(3, 7))),
    )
    data = draw(st.lists(rows, min_size=n, max_size=n))
    frame = pd.DataFrame(data, columns=["a", "b", "c", "s"])
    frame["pid"] = np.arange(n)
    return frame


@settings(max_examples=30, deadline=None)
@given(
    tiny_tables(),
    st.sampled_from(
        [(Fraction(1, 2), Fraction(1, 2)), (Fraction(1, 4), Fraction(1, 3)), (Fraction(1, 10), Fraction(1, 3))]
    ),
    st.integers(0, 2**16),
)
def test_every_release_passes_the_verifier(frame, params, seed):
    alpha, beta = params
    tech, data = make(frame, QI3, "s", alpha=str(alpha), beta=str(beta))
    assume(len(data.sensitive_values) >= 2)
    part, rel = release_of(tech, data, seed)
    presence, association = tech.verify(rel, {})
    assert presence.passed and association.passed
    assert Fraction(presence.value) <= alpha and Fraction(association.value) <= beta
    # every row is either published or suppressed and counted
    assert rel.tables["ST"].column("count").to_numpy().sum() + rel.info["suppressed"] == len(frame)
    # each group holds a sensitive value at most once (Theorem 5: ceil(1/beta)-diversity)
    assert rel.tables["ST"].column("count").to_numpy().max(initial=1) == 1
    for name, schema in tech.table_schemas(tech.spec).items():
        schema.validate(rel.tables[name].to_pandas())


@settings(max_examples=30, deadline=None)
@given(tiny_tables(), st.integers(0, 2**16))
def test_a_row_moved_between_groups_fails(frame, seed):
    tech, data = make(frame, QI3, "s", alpha="1/2", beta="1/3")
    part, rel = release_of(tech, data, seed)
    assume(part.n_groups >= 2)
    sizes = np.bincount(part.group[part.group >= 0], minlength=part.n_groups)
    dest = int(np.argmin(sizes))
    held = set(data.sensitive_codes[part.group == dest].tolist())
    movable = np.flatnonzero((part.group >= 0) & (part.group != dest) & np.isin(data.sensitive_codes, list(held)))
    assume(len(movable) > 0 and Fraction(2, int(sizes[dest]) + 1) > tech.params.beta)
    group = part.group.copy()
    group[movable[0]] = dest  # the destination now holds that sensitive value twice
    tampered = tech.anonymize(data, Partition(group, part.n_groups, info=part.info), np.random.default_rng(0))
    _, association = tech.verify(tampered, {})
    assert not association.passed
    assert association.worst["gid"] == dest and association.worst["count"] == 2


def test_fig1_constructed_release_and_estimates():
    frame = ambiguity_fig1()
    qi = [
        {"name": "age", "kind": "numeric"},
        {"name": "gender", "kind": "categorical"},
        {"name": "zipcode", "kind": "numeric"},
    ]
    tech, data = make(frame, qi, "disease", alpha=0.5, beta="1/3")
    part, rel = release_of(tech, data)
    assert [r.passed for r in tech.verify(rel, {})] == [True, True]
    # the paper's fixed grouping (Fig. 2) through the plug-in: Q1 = 3/4, Q2 = 7/18
    fig2 = tech.anonymize(data, Partition(np.array([0, 0, 0, 0, 1, 1, 1, 1]), 2), np.random.default_rng(0))
    assert fig2.tables["AT_age"].num_rows == 7 and fig2.tables["AT_zipcode"].num_rows == 6
    q1 = CountQuery((("age", RangeCond(45, 200)),), "stroke")
    q2 = CountQuery((("age", RangeCond(50, 200)), ("zipcode", RangeCond(23000, 23000))), "diabetes")
    q1_est, q2_est = tech.estimate_counts(fig2, [q1, q2])
    assert Fraction(q1_est) == Fraction(3, 4)
    assert q2_est == pytest.approx(7 / 18, rel=1e-15, abs=0)  # 7/18 has no exact double
    presence, association = tech.verify(fig2, {})
    assert presence.value == "4/9" and association.value == "1/2" and not association.passed


def test_census_release_tables_and_utility():
    frame = census(3000, seed=3)
    tech, data = make(frame, CENSUS_QI, "occupation", alpha=0.25, beta=0.1)
    part, rel = release_of(tech, data)
    assert set(rel.tables) == {f"AT_{q['name']}" for q in CENSUS_QI} | {"ST"}
    assert [r.passed for r in tech.verify(rel, {})] == [True, True]
    for q in CENSUS_QI:  # duplicate-free AT, typed like the input
        at = rel.tables[f"AT_{q['name']}"].to_pandas()
        assert not at.duplicated().any() and at["gid"].max() == part.n_groups - 1
    assert rel.tables["AT_age"].schema.field("age").type == "int64"
    sizes = tech.group_sizes(rel)
    assert sizes.min() >= 10 and sizes.sum() == 3000 - rel.info["suppressed"]
    # a query without QI conditions is answered exactly (c summed over groups)
    v = frame["occupation"].iloc[0]
    published = part.group >= 0  # suppressed rows are not in ST, so not in the answer
    assert tech.estimate_counts(rel, [CountQuery((), v)])[0] == (frame["occupation"][published] == v).sum()
    workload = make_workload(data, np.random.default_rng(1), per_band=10)
    est = tech.estimate_counts(rel, workload)
    assert est.shape == (len(workload),) and np.all(est >= 0) and np.isfinite(est).all()
    assert np.all(exact_answers(frame, workload, "occupation") > 0)


def test_greedy_covers_more_values_than_needed_only_when_alpha_demands():
    """With a loose alpha a group stops at ceil(1/beta) tuples; a strict alpha makes it grow."""
    frame = census(2000, seed=5)
    _, data = make(frame, CENSUS_QI, "occupation", alpha=1, beta=0.1)
    loose, n_loose, _ = greedy_groups(
        data.codes, data.sensitive_codes, Fraction(1), Fraction(1, 10), np.random.default_rng(0)
    )
    strict, n_strict, _ = greedy_groups(
        data.codes[:, :3], data.sensitive_codes, Fraction(1, 20), Fraction(1, 10), np.random.default_rng(0)
    )
    assert np.bincount(loose[loose >= 0]).max() == 10
    assert np.bincount(strict[strict >= 0]).min() > 10 and n_strict < n_loose


def test_residues_are_placed_or_suppressed_and_counted():
    # one dominant sensitive value: most of its rows cannot join a group that already has it
    frame = pd.DataFrame(
        {
            "a": np.arange(40) % 7,
            "b": ["x", "y"] * 20,
            "c": ["lo", "mid", "hi", "lo"] * 10,
            "s": [0] * 25 + list(range(1, 16)),
            "pid": np.arange(40),
        }
    )
    tech, data = make(frame, QI3, "s", alpha=0.5, beta=0.25)
    part, rel = release_of(tech, data)
    assert rel.info["suppressed"] > 0
    assert rel.info["suppressed"] == int(np.count_nonzero(part.group < 0))
    assert rel.tables["ST"].column("count").to_numpy().sum() == 40 - rel.info["suppressed"]
    # the dominant value's suppressed rows are missing from the exact no-condition answer
    kept = int((frame["s"][part.group >= 0] == 0).sum())
    assert kept < 25 and tech.estimate_counts(rel, [CountQuery((), 0)])[0] == kept
    assert all(r.passed for r in tech.verify(rel, {}))


@pytest.mark.parametrize("params", [{"alpha": 0.25}, {"alpha": 0, "beta": 0.1}, {"alpha": 0.2, "beta": "x"}])
def test_bad_parameters_are_rejected(params):
    with pytest.raises(SpecError):
        make(ambiguity_fig1(), [{"name": "age", "kind": "numeric"}], "disease", **params)

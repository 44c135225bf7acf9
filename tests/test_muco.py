"""MuCo as a technique: release contract, Property 1, delta-probability, mutual cover, randomness."""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.types import Partition, Release
from privpub.tasks.evaluate.workload import CountQuery, RangeCond, SetCond
from privpub.tasks.techniques.muco.tables import MuCoError
from privpub.tasks.techniques.muco.technique import MuCo, exact_sums, iloss, random_sum_queries, sum_relative_errors
from privpub.tasks.techniques.registry import get_technique

JOBS = {"any": ["health", "other"], "health": ["nurse", "doctor"], "other": ["teacher", "clerk"]}
QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "edu", "kind": "ordinal", "order": ["low", "mid", "high", "top"]},
    {"name": "job", "kind": "categorical", "hierarchy": JOBS},
]


def make_data(n=240, seed=0, delta="1/4", l=3, sensitive_values=8) -> Microdata:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "pid": np.arange(n),
            "age": rng.integers(20, 60, n),
            "sex": rng.choice(["F", "M"], n),
            "edu": rng.choice(["low", "mid", "high", "top"], n),
            "job": rng.choice(["nurse", "doctor", "teacher", "clerk"], n),
            "salary": rng.integers(0, sensitive_values, n) * 1000 + 500,
        }
    )
    spec = spec_from_dict(
        {
            "dataset": {"name": "t", "input": "t.csv", "person_id": "pid", "sensitive": "salary", "qi": QI},
            "technique": {"name": "muco", "delta": delta, "l": l},
        }
    )
    return Microdata.from_frame(spec, frame)


def run(data: Microdata, seed=1):
    tech = MuCo(data.spec)  # direct: the registry imports every plugin (tested once below)
    rng = np.random.default_rng(seed)
    part = tech.partition(data, rng)
    return tech, part, tech.anonymize(data, part, rng)


@pytest.fixture(scope="module")
def released():
    data = make_data()
    tech, part, rel = run(data)
    return data, tech, part, rel


def original_of_published(data, rel):
    src = rel.private["source_row"].column("source_row").to_numpy()
    return src, data.frame.iloc[src].reset_index(drop=True)


def test_registered_and_params():
    data = make_data()
    assert isinstance(get_technique(data.spec), MuCo)
    for form in (0.1667, "1/6"):
        spec = data.spec.model_copy(deep=True)
        spec.technique = spec.technique.model_validate({"name": "muco", "delta": form, "l": 3})
        assert MuCo(spec).params.delta in (Fraction(1, 6), Fraction(1667, 10000))
    spec.technique = spec.technique.model_validate({"name": "muco", "l": 3})
    with pytest.raises(SpecError, match="delta"):
        MuCo(spec)


def test_published_table_contract(released):
    data, _, _, rel = released
    table = rel.tables["table"]
    assert set(rel.tables) == {"table"}
    assert table.column_names == ["age", "sex", "edu", "job", "salary"]  # no person id
    assert table.num_rows == data.n
    # sensitive column unchanged as a multiset, and aligned with the source rows
    src, orig = original_of_published(data, rel)
    assert sorted(src) == list(range(data.n))
    assert np.array_equal(table.column("salary").to_numpy(), orig["salary"].to_numpy())
    assert not np.array_equal(src, np.arange(data.n))  # shuffled
    assert table.schema.field("age").type == pa.int64()
    # every published value is one of the values of its group on that QI
    pub = table.to_pandas()
    gid = rel.private["output_tables"].to_pandas().groupby("row")["gid"].first().sort_index().to_numpy()
    for name in ["age", "sex", "edu", "job"]:
        allowed = orig.groupby(gid)[name].agg(lambda s: set(s.astype(str)))
        assert all(str(v) in allowed[g] for v, g in zip(pub[name], gid))


def test_groups_meet_property_1_and_l_diversity(released):
    data, tech, part, _ = released
    assert part.sizes.min() >= math.ceil(1 / tech.params.delta)
    distinct = pd.Series(data.sensitive_codes).groupby(part.group).nunique()
    assert distinct.min() >= 3


def test_verifier_passes_on_release(released):
    data, tech, _, rel = released
    results = {r.model: r for r in tech.verify(rel, {})}
    assert results["delta-probability"].passed
    assert results["delta-probability"].value <= 0.25 + 1e-9
    assert results["mutual cover (Corollary 3.2)"].passed
    assert results["mutual cover (Corollary 3.2)"].value >= 4
    assert results["random output tables are distributions"].passed


def test_delta_probability_recomputed_from_stored_rows(released):
    # an independent reading of Definition 3 over the stored long table
    _, tech, _, rel = released
    df = rel.private["output_tables"].to_pandas()
    for (_, _, _), col in df.groupby(["attribute", "gid", "code"]):
        assert col["prob"].max() <= 0.25 * col["prob"].sum() + 1e-9
        assert (col["prob"] > 0).sum() >= 4  # Corollary 3.2


def test_tampered_tables_fail_verification(released):
    data, tech, _, rel = released
    df = rel.private["output_tables"].to_pandas()
    # move one tuple's whole age distribution onto a single value of its own: the column it
    # lands in is carried by one tuple only
    row = int(df["row"].iloc[0])
    bad = df[~((df["attribute"] == "age") & (df["row"] == row))]
    extra = pd.DataFrame(
        {
            "attribute": ["age"],
            "gid": [df["gid"].iloc[0]],
            "row": [row],
            "code": [data.domain("age").size - 1],
            "prob": [1.0],
        }
    )
    bad = pd.concat([bad, extra], ignore_index=True)
    bad["gid"] = bad["gid"].astype(np.int32)
    bad["code"] = bad["code"].astype(np.int32)
    tampered = Release(rel.tables, {**rel.private, "output_tables": pa.Table.from_pandas(bad, preserve_index=False)})
    res = {r.model: r for r in tech.verify(tampered, {})}
    assert not res["delta-probability"].passed


def test_published_value_outside_cover_fails(released):
    data, tech, _, rel = released
    table = rel.tables["table"].to_pandas()
    table.loc[0, "age"] = 99  # no stored table carries 99
    res = {r.model: r for r in tech.verify(Release({"table": pa.Table.from_pandas(table)}, rel.private), {})}
    assert not res["mutual cover (Corollary 3.2)"].passed
    assert res["mutual cover (Corollary 3.2)"].worst["row"] == 0


def test_unchanged_tuples_are_randomized_or_reported(released):
    data, _, part, rel = released
    src, orig = original_of_published(data, rel)
    pub = rel.tables["table"].to_pandas()
    same = np.ones(data.n, dtype=bool)
    for name in ["age", "sex", "edu", "job"]:
        same &= pub[name].astype(str).to_numpy() == orig[name].astype(str).to_numpy()
    stuck = set(rel.private["unchangeable_rows"])
    assert set(np.flatnonzero(same)) == stuck
    assert rel.info["randomized_unchanged"] > 0


def test_identical_groups_cannot_change_and_are_reported():
    data = make_data(n=40)
    frame = data.frame.copy()
    frame[["age", "sex", "edu", "job"]] = [30, "F", "mid", "nurse"]
    data = Microdata.from_frame(data.spec, frame)
    _, _, rel = run(data)
    assert len(rel.private["unchangeable_rows"]) == 40
    assert rel.info["unchangeable"] == 40


def test_same_seed_same_release_other_seed_differs():
    data = make_data()
    _, _, a = run(data, seed=3)
    _, _, b = run(data, seed=3)
    _, _, c = run(data, seed=4)
    assert a.tables["table"].equals(b.tables["table"])
    assert a.private["output_tables"].equals(b.private["output_tables"])
    assert not a.tables["table"].equals(c.tables["table"])


def test_too_small_for_delta_is_a_clear_error():
    data = make_data(n=3, delta="1/4", l=None)
    with pytest.raises(MuCoError, match="Property 1"):
        run(data)


def test_partition_with_small_group_is_refused():
    data = make_data(n=20)
    tech = MuCo(data.spec)
    part = Partition(group=np.repeat([0, 1], [17, 3]), n_groups=2)
    with pytest.raises(MuCoError, match="Property 1"):
        tech.anonymize(data, part, np.random.default_rng(0))


def test_estimate_counts_read_the_published_table(released):
    data, tech, _, rel = released
    pub = rel.tables["table"].to_pandas()
    q = CountQuery((("age", RangeCond(25, 45)), ("job", SetCond(frozenset({"nurse", "doctor"})))), 1500)
    expect = (
        (pub["age"] >= 25) & (pub["age"] <= 45) & pub["job"].isin(["nurse", "doctor"]) & (pub["salary"] == 1500)
    ).sum()
    assert tech.estimate_counts(rel, [q])[0] == expect


def test_sum_queries(released):
    data, tech, _, rel = released
    queries = random_sum_queries(data, np.random.default_rng(0), n=50)
    assert len(queries) == 50 and all(len(q.conditions) == 4 for q in queries)
    exact = exact_sums(data, queries)
    assert (exact > 0).all()
    est = tech.estimate_sums(rel, queries)
    pub = rel.tables["table"].to_pandas()
    for q, e in zip(queries[:10], est):
        m = pd.Series(True, index=pub.index)
        for col, cond in q.conditions:  # evaluated independently of the estimator's code
            m &= (
                pub[col].between(cond.lo, cond.hi)
                if isinstance(cond, RangeCond)
                else pub[col].astype(str).isin(cond.values)
            )
        assert e == pub.loc[m, "salary"].sum()
    assert np.isfinite(sum_relative_errors(est, exact)).all()


def test_iloss_is_normalised_distance(released):
    data, _, _, rel = released
    value = iloss(rel, data)
    src, orig = original_of_published(data, rel)
    pub = rel.tables["table"].to_pandas()
    age = np.abs(pub["age"] - orig["age"]) / (data.domain("age").values.max() - data.domain("age").values.min())
    sex = (pub["sex"] != orig["sex"]).astype(float)
    order = ["low", "mid", "high", "top"]
    edu = np.abs(pub["edu"].map(order.index) - orig["edu"].map(order.index)) / 3
    tree = {("nurse", "doctor"): 2, ("teacher", "clerk"): 2}
    job = [0 if a == b else tree.get((a, b), tree.get((b, a), 4)) / 4 for a, b in zip(pub["job"], orig["job"])]
    assert value == pytest.approx(np.mean([age.mean(), sex.mean(), edu.mean(), np.mean(job)]))
    assert 0 < value < 1


def test_draws_follow_the_output_tables():
    from privpub.tasks.core.microdata import QIDomain
    from privpub.tasks.techniques.muco.tables import Distance, output_tables
    from privpub.tasks.techniques.muco.technique import draw_outputs

    dom = QIDomain("age", "numeric", np.arange(20.0, 32.0))
    codes = np.array([0, 0, 1, 2, 2, 2, 5, 7, 8, 11])  # one group, light values must mix
    group = np.zeros(len(codes), dtype=np.int64)
    t = output_tables(group, 1, codes, Distance(dom), Fraction(1, 4))
    rng = np.random.default_rng(0)
    draws = np.stack([draw_outputs(t, rng) for _ in range(4000)])  # (trials, tuples) class ids
    _, _, Q = t.table(0)
    for r in range(len(codes)):
        freq = np.bincount(draws[:, r], minlength=len(Q)) / len(draws)
        expect = Q[t.tuple_class[r]]
        assert np.abs(freq - expect).max() < 0.035
        assert (freq[expect == 0] == 0).all()  # a zero-probability value is never drawn


def test_a_tuple_missing_from_one_table_fails_definition_1(released):
    # its entries on "age" removed, the tuple has no distribution there (a sum of 0, not 1)
    _, tech, _, rel = released
    df = rel.private["output_tables"].to_pandas()
    bad = df[~((df["attribute"] == "age") & (df["row"] == 7))]
    tampered = Release(
        rel.tables,
        {
            **rel.private,
            "output_tables": pa.Table.from_pandas(
                bad, schema=rel.private["output_tables"].schema, preserve_index=False
            ),
        },
    )
    res = {r.model: r for r in tech.verify(tampered, {})}["random output tables are distributions"]
    assert not res.passed and res.value == 1.0
    assert res.worst == {"attribute": "age", "row": "7"}

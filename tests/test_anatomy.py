"""Anatomy: l-diverse buckets, QIT/ST contract, verifier, estimator."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.types import Release
from privpub.tasks.evaluate.workload import CountQuery, RangeCond, SetCond
from privpub.tasks.techniques.anatomy.technique import Anatomy, AnatomyError, anatomy_groups
from privpub.tasks.techniques.registry import get_technique

QI = [{"name": "age", "kind": "numeric"}, {"name": "sex", "kind": "categorical"}]


def make(n=300, l=4, values=12, seed=0, sensitive=None):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "pid": np.arange(n),
            "age": rng.integers(20, 70, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": sensitive if sensitive is not None else rng.integers(0, values, n),
        }
    )
    spec = spec_from_dict(
        {
            "dataset": {"name": "t", "input": "t.csv", "person_id": "pid", "sensitive": "disease", "qi": QI},
            "technique": {"name": "anatomy", "l": l},
        }
    )
    return Microdata.from_frame(spec, frame)


def release(data, seed=1):
    tech = Anatomy(data.spec)
    rng = np.random.default_rng(seed)
    part = tech.partition(data, rng)
    return tech, part, tech.anonymize(data, part, rng)


@settings(deadline=None, max_examples=40)
@given(st.integers(2, 6), st.lists(st.integers(1, 9), min_size=2, max_size=12), st.integers(0, 10**6))
def test_groups_are_l_diverse_whenever_eligible(l, counts, seed):
    s = np.repeat(np.arange(len(counts)), counts)
    if max(counts) * l > len(s):
        with pytest.raises(AnatomyError):
            anatomy_groups(s, l, np.random.default_rng(seed))
        return
    g = anatomy_groups(s, l, np.random.default_rng(seed))
    df = pd.DataFrame({"g": g, "s": s})
    assert (g >= 0).all()
    assert df.groupby("g")["s"].nunique().min() >= l
    # each value at most once per group: disclosure exactly 1/|group| <= 1/l
    assert df.groupby(["g", "s"]).size().max() == 1


def test_qit_st_contract():
    data = make()
    _, part, rel = release(data)
    qit, st_ = rel.tables["QIT"], rel.tables["ST"]
    assert qit.column_names == ["age", "sex", "gid"]
    assert st_.column_names == ["gid", "disease", "count"]
    assert qit.num_rows == data.n
    assert st_.column("count").to_numpy().sum() == data.n
    # QI values published exactly (as a multiset), sensitive values only through ST
    assert sorted(qit.column("age").to_pylist()) == sorted(data.frame["age"].tolist())
    assert "disease" not in qit.column_names and "pid" not in qit.column_names


def test_verifier_reads_qit_and_st():
    data = make(l=4)
    tech, _, rel = release(data)
    res = {r.model: r for r in tech.verify(rel, {})}
    assert all(r.passed for r in res.values())
    assert res["l-diversity (distinct)"].value >= 4
    # a bucket whose ST lists one value twice breaks l-diversity and the 1/l bound
    st_ = rel.tables["ST"].to_pandas()
    g0 = st_["gid"] == st_["gid"].iloc[0]
    st_.loc[g0, "disease"] = st_.loc[g0, "disease"].iloc[0]
    st_ = st_.groupby(["gid", "disease"], as_index=False)["count"].sum()
    bad = Release({"QIT": rel.tables["QIT"], "ST": pa.Table.from_pandas(st_, preserve_index=False)})
    res = {r.model: r for r in tech.verify(bad, {})}
    assert not res["l-diversity (distinct)"].passed
    assert not res["attribute disclosure"].passed


def test_not_eligible_is_a_clear_error():
    data = make(n=40, l=4, sensitive=np.array([0] * 20 + list(range(1, 21))))
    with pytest.raises(AnatomyError, match="n/l"):
        release(data)


def test_registered():
    assert isinstance(get_technique(make().spec), Anatomy)


def test_missing_l_is_a_spec_error():
    data = make()
    spec = data.spec.model_copy(deep=True)
    spec.technique = spec.technique.model_validate({"name": "anatomy"})
    with pytest.raises(SpecError):
        Anatomy(spec)


def test_estimator_is_expected_count_over_buckets():
    data = make()
    tech, part, rel = release(data)
    q = CountQuery((("age", RangeCond(30, 50)), ("sex", SetCond(frozenset({"F"})))), 3)
    # by hand: each matching row contributes (#3 in its bucket) / |bucket|
    f = data.frame
    match = f["age"].between(30, 50) & (f["sex"] == "F")
    share = pd.Series(f["disease"] == 3).groupby(part.group).mean()
    expect = share.reindex(part.group[match.to_numpy()]).sum()
    assert tech.estimate_counts(rel, [q])[0] == pytest.approx(expect)


def test_deterministic_from_seed():
    data = make()
    a = release(data, seed=5)[2]
    b = release(data, seed=5)[2]
    assert a.tables["QIT"].equals(b.tables["QIT"]) and a.tables["ST"].equals(b.tables["ST"])

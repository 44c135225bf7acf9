"""Anatomy: l-diverse buckets, QIT/ST contract, verifier (against a direct count from QIT and ST
and against pycanon), estimator."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pycanon import anonymity as canon

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


# --- the verifier on published tables drawn at random, against the definitions and pycanon ------

# a published release drawn at random: each group's sensitive values (any mix, l-diverse or not)
GROUPS = st.lists(st.lists(st.sampled_from("abcd"), min_size=1, max_size=6), min_size=1, max_size=6)


def published(groups: list[list[str]], seed: int, tamper: tuple[int, int, int] | None = None) -> Release:
    """QIT (a row per member, shuffled, group ids not 0..G-1) and ST (a row per (group, value),
    shuffled) as Anatomy publishes them; `tamper` = (group, its ST row, +1 or -1) makes one count
    disagree with QIT (a count of 1 is never lowered: ST rows count at least one)."""
    rng = np.random.default_rng(seed)
    gids = [3 * g + 1 for g in range(len(groups))]
    rows = [(gid, v, vs.count(v)) for gid, vs in zip(gids, groups) for v in sorted(set(vs))]
    if tamper is not None:
        g, r, delta = tamper
        mine = [i for i, row in enumerate(rows) if row[0] == gids[g % len(groups)]]
        i = mine[r % len(mine)]
        rows[i] = (rows[i][0], rows[i][1], rows[i][2] + (delta if rows[i][2] > 1 else 1))
    rows = [rows[i] for i in rng.permutation(len(rows))]
    member = np.repeat(gids, [len(vs) for vs in groups])[rng.permutation(sum(map(len, groups)))]
    n = len(member)
    qit = pa.table({"age": rng.integers(20, 70, n), "sex": rng.choice(["F", "M"], n), "gid": member})
    st_ = pa.table({"gid": [r[0] for r in rows], "disease": [r[1] for r in rows], "count": [r[2] for r in rows]})
    return Release({"QIT": qit, "ST": st_}, {})


def anatomy_verify(release: Release, l: int, chunk_rows: int):
    """The technique's verify, in chunks of chunk_rows QIT rows, by model name."""
    spec = make(n=8, l=l).spec
    spec.run.chunk_rows = chunk_rows
    return {r.model: r for r in Anatomy(spec).verify(release, {})}


@given(
    GROUPS,
    st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([-1, 1])) | st.none(),
    st.integers(2, 4),
    st.integers(1, 36),
    st.integers(0, 10**6),
)
@example([["a", "b"], ["a", "b"], ["c", "d"]], (1, 0, 1), 2, 1, 0)  # one group of three off by one
@example([["a", "a", "b", "c"]], None, 3, 4, 0)  # a share of 1/2: above 1/3, not above 1/(3 - 1)
def test_verdicts_equal_a_direct_count_from_qit_and_st(groups, tamper, l, chunk_rows, seed):
    """Per group, from the published tables alone: QIT's row count against the sum of ST's
    counts, ST's distinct values, ST's largest count over QIT's size; every group must pass
    (sizes agree, >= l values, share <= 1/l), whatever the chunks the verifier reads them in."""
    release = published(groups, seed, tamper)
    qit_gid = release.tables["QIT"].column("gid").to_pylist()
    st_rows = release.tables["ST"].to_pylist()
    agree, distinct, share = {}, {}, {}
    for gid in sorted(set(qit_gid)):
        counts = [r["count"] for r in st_rows if r["gid"] == gid]
        agree[gid] = sum(counts) == qit_gid.count(gid)
        distinct[gid] = len(counts)
        share[gid] = Fraction(max(counts), qit_gid.count(gid))
    worst = max(share.values())
    res = anatomy_verify(release, l, chunk_rows)
    assert res["QIT and ST agree on group sizes"].passed is all(agree.values()) is (tamper is None)
    lres = res["l-diversity (distinct)"]
    assert (lres.value, lres.passed) == (min(distinct.values()), min(distinct.values()) >= l)
    disclosure = res["attribute disclosure"]
    assert (disclosure.value, disclosure.threshold) == (str(worst), str(Fraction(1, l)))
    assert disclosure.passed is (worst * l <= 1)
    assert disclosure.worst["gid"] == min(g for g in share if share[g] == worst)


@given(GROUPS, st.integers(2, 4), st.integers(0, 10**6))
@example([["a", "b", "c", "a"], ["a", "b", "c"]], 3, 0)  # a share of 1/2: above 1/3, not above 1/(3 - 1)
def test_disclosure_and_l_agree_with_pycanons_alpha_and_l(groups, l, seed):
    """pycanon's (alpha, k)-anonymity alpha (the largest share of one value in an equivalence
    class) and its l-diversity, on what the adversary learns of each group: ST's rows repeated by
    their counts (the sensitive values of the group's QIT rows, in some order), gid the
    quasi-identifier. The release passes 1/l exactly when alpha * l <= 1 (alpha, a float, is a
    ratio of counts of groups of at most 6 rows: exact again as a fraction of denominator <= 6)."""
    release = published(groups, seed)
    st_ = release.tables["ST"].to_pandas()
    joined = st_.loc[st_.index.repeat(st_["count"]), ["gid", "disease"]].reset_index(drop=True)
    alpha, _ = canon.alpha_k_anonymity(joined, ["gid"], ["disease"])
    alpha = Fraction(alpha).limit_denominator(6)
    res = anatomy_verify(release, l, 1 + seed % 8)
    disclosure = res["attribute disclosure"]
    assert (Fraction(disclosure.value), disclosure.passed) == (alpha, alpha * l <= 1)
    lres = res["l-diversity (distinct)"]
    assert (lres.value, lres.passed) == (canon.l_diversity(joined, ["gid"], ["disease"]), lres.value >= l)


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

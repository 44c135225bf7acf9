"""Property tests of the butterfly technique on random tables: every release passes the
multi-QID verifier (cross-checked by a plain pandas count and by pycanon), Theorem 2 (a table k-anonymous for
S1 and S2 splits into k-butterflies: its classes on S1 ∩ S2), and Theorem 4 (the lower bound
L(G) never exceeds the loss of the butterfly actually built)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.schemas.errors import PartitionError
from privpub.tasks.evaluate.metrics import uncertainty_penalty
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.techniques.butterfly.core import Points
from privpub.tasks.techniques.butterfly.wings import segmented_mondrian
from tests.helpers import release_of, technique_and_data

ATTRS = ["a", "b", "c", "d", "e"]
QI = [
    {"name": "a", "kind": "numeric"},
    {"name": "b", "kind": "categorical"},
    {"name": "c", "kind": "ordinal", "order": [f"o{i}" for i in range(6)]},
    {"name": "d", "kind": "numeric"},
    {"name": "e", "kind": "categorical"},
]


@st.composite
def cases(draw, two_level=st.booleans()):
    n = draw(st.integers(12, 90))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    card = draw(st.lists(st.integers(1, 8), min_size=5, max_size=5))
    frame = pd.DataFrame(
        {
            "pid": np.arange(n),
            "a": rng.integers(0, card[0] * 5, n),
            "b": [f"b{v}" for v in rng.integers(0, card[1], n)],
            "c": [f"o{v}" for v in rng.integers(0, min(card[2], 6), n)],
            "d": rng.integers(0, card[3], n) * 1.5,
            "e": [f"e{v}" for v in rng.integers(0, card[4], n)],
            "s": [f"s{v}" for v in rng.integers(0, 4, n)],
        }
    )
    # QIDs: random non-empty subsets, at least two, not all equal to the union
    m = draw(st.integers(2, 3))
    qids = [draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=4, unique=True)) for _ in range(m)]
    k = draw(st.integers(2, max(2, min(8, n // 3))))
    params = {"k": k, "qids": qids}
    if draw(two_level) and k >= 3:
        params["k_prime"] = draw(st.integers(2, k - 1))
    return frame, params


def pandas_min_class(table, qid):
    """The smallest class over a QID's published columns, counted by pandas and by pycanon."""
    from pycanon import anonymity

    cols = [c for q in qid for c in ((f"{q}_lo", f"{q}_hi") if f"{q}_lo" in table.column_names else (q,))]
    df = table.select(cols).to_pandas()
    for c in cols:
        if df[c].dtype == object:
            df[c] = df[c].map(lambda v: "|".join(map(str, v)))
    by_pandas = int(df.groupby(cols, dropna=False).size().min())
    assert anonymity.k_anonymity(df, cols) == by_pandas
    return by_pandas


@settings(max_examples=15, deadline=None)
@given(cases())
def test_every_release_passes_the_verifier(case):
    frame, params = case
    for name in ("butterfly", "union-qid"):
        tech, data = technique_and_data(frame, QI, "s", name, **params)
        try:
            part, release = release_of(tech, data)
        except PartitionError as exc:
            # two-level butterfly refuses when the union QID has fewer k'-classes than ceil(k/k')
            # points (e.g. a union of one attribute holding one value): nothing to verify
            cols = [tech.spec.dataset.qi_names.index(c) for c in tech.union]
            classes = mondrian_partition(data, params.get("k_prime", 0) or 1, columns=cols).n_groups
            assert name == "butterfly" and "k_prime" in params
            assert classes < -(-params["k"] // params["k_prime"]), exc
            continue
        table = release.tables["table"]
        assert table.num_rows == len(frame)
        results = tech.verify(release, {})
        assert all(r.passed for r in results), [(r.model, r.value, r.threshold) for r in results]
        for qid, res in zip(params["qids"], results):
            assert res.value == pandas_min_class(table, qid) >= params["k"]
        if "k_prime" in params:
            assert results[-1].value == pandas_min_class(table, tech.union) >= params["k_prime"]
        if name == "butterfly":
            # the walk only replaces union classes by cheaper butterflies (Section 4.2.5)
            assert part.info["loss"] <= part.info["union_loss"] + 1e-9
            if "k_prime" not in params:  # one level, no hierarchies: the published penalty is it
                penalty = uncertainty_penalty(table, data)["uncertainty-penalty"]  # all QIs
                assert penalty == pytest.approx(part.info["loss"], abs=1e-6)


def butterfly_split(df: pd.DataFrame, s1: list[str], s2: list[str], k: int) -> bool:
    """Theorem 2's construction: the classes on S1 ∩ S2, each checked against Definition 2."""
    common = [c for c in s1 if c in s2]
    only1 = [c for c in s1 if c not in s2]
    only2 = [c for c in s2 if c not in s1]
    parts = df.groupby(common, dropna=False) if common else [((), df)]
    for _, part in parts:
        for wing in (only1, only2):
            if wing and part.groupby(wing, dropna=False).size().min() < k:
                return False
            if len(part) < k:
                return False
    return True


def k_anonymous(df: pd.DataFrame, qid: list[str], k: int) -> bool:
    return int(df.groupby(qid, dropna=False).size().min()) >= k


def cells(table) -> pd.DataFrame:
    df = table.to_pandas()
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].map(lambda v: tuple(v) if not isinstance(v, str) else v)
    return df


@settings(max_examples=15, deadline=None)
@given(cases(two_level=st.just(False)), st.integers(0, 3))
def test_theorem2_k_anonymous_for_s1_and_s2_iff_split_into_k_butterflies(case, copies):
    frame, params = case
    s1, s2 = params["qids"][:2]
    k = params["k"]
    # a table that is k-anonymous for S1 and S2 (a release), and a raw one that may not be
    tech, data = technique_and_data(frame, QI, "s", "butterfly", k=k, qids=[s1, s2])
    published = cells(release_of(tech, data)[1].tables["table"])
    raw = pd.concat([frame] * (copies + 1), ignore_index=True)
    for df in (published, raw):
        anon = k_anonymous(df, columns_of(df, s1), k) and k_anonymous(df, columns_of(df, s2), k)
        assert anon == butterfly_split(df, columns_of(df, s1), columns_of(df, s2), k)
    assert butterfly_split(published, columns_of(published, s1), columns_of(published, s2), k)


def columns_of(df: pd.DataFrame, qid: list[str]) -> list[str]:
    """A QID's columns in a raw table (its names) or a published one (<qi>_lo/_hi or <qi>)."""
    return [c for a in qid for c in ((f"{a}_lo", f"{a}_hi") if f"{a}_lo" in df else (a,))]


@settings(max_examples=15, deadline=None)
@given(cases(two_level=st.just(False)))
def test_theorem4_bound_never_exceeds_the_built_butterfly(case):
    frame, params = case
    tech, data = technique_and_data(frame, QI, "s", "butterfly", **params)
    part, _ = release_of(tech, data)
    for bound, real in part.info["assignment"].checks:
        assert bound <= real + 1e-9


def census_case(n=3000, k=10, **extra):
    from privpub.tasks.demo_data import CENSUS_QI, census

    qi = [q for q in CENSUS_QI if q["name"] != "salary"] + [{"name": "occupation", "kind": "categorical"}]
    qids = [
        ["age", "occupation", "country", "sex", "marital", "education"],
        ["sex", "marital", "education", "workclass", "race"],
    ]
    return technique_and_data(census(n, seed=5), qi, "salary", "butterfly", k=k, qids=qids, **extra)


def test_theorem4_on_census_data_where_the_bound_drives_the_builds():
    tech, data = census_case()
    part, release = release_of(tech, data)
    checks = part.info["assignment"].checks
    assert part.info["bound_hits"] > 0 and len(checks) >= part.info["bound_hits"]
    assert all(bound <= real + 1e-9 for bound, real in checks)
    assert part.info["loss"] < part.info["union_loss"]
    assert all(r.passed for r in tech.verify(release, {}))


def test_two_level_framework_on_census_data():
    tech, data = census_case(k=10, k_prime=2)
    part, release = release_of(tech, data)
    results = {r.model: r for r in tech.verify(release, {})}
    assert results["k'-anonymity union QID"].passed and results["k'-anonymity union QID"].value >= 2
    assert results["k-anonymity QID1"].value >= 10 and results["k-anonymity QID2"].value >= 10
    assert part.info["k_points"] == 5  # ceil(k / k') representatives per class


@settings(max_examples=15, deadline=None)
@given(
    cases(two_level=st.just(False)), st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True), st.integers(1, 4)
)
def test_segmented_wings_equal_mondrian_on_each_segment(case, columns, cuts):
    """The batched wing partitioner follows the spine's Mondrian exactly, segment by segment."""
    frame, params = case
    k = params["k"]
    _, data = technique_and_data(frame, QI, "s", "union-qid", **params)
    n = data.n
    n_seg = max(1, min(cuts, n // k))
    sizes = np.full(n_seg, n // n_seg)
    sizes[-1] += n - sizes.sum()
    perm = np.random.default_rng(n).permutation(n)
    ids = np.unique(data.codes[perm][:, columns], axis=0, return_inverse=True)[1].reshape(-1)
    wg = segmented_mondrian(data.codes[perm], data.domains, columns, sizes, k)
    counted = segmented_mondrian(data.codes[perm], data.domains, columns, sizes, k, (ids, int(ids.max()) + 1))
    assert np.array_equal(wg.group, counted.group)  # points found by counting or by sorting
    group, n_groups, order = wg.group, wg.n_groups, wg.rows_by_group()
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    for j in range(n_seg):
        rows = perm[offsets[j] : offsets[j + 1]]
        ref = mondrian_partition(Points.of_rows(data.codes[rows], data.domains), k, columns=columns)
        mine = group[offsets[j] : offsets[j + 1]]
        assert n_groups[j] == ref.n_groups == len(set(zip(ref.group.tolist(), mine.tolist())))
        assert mine.min() == 0 and mine.max() == n_groups[j] - 1
    # `order` lists every row once, group after group, segments in order
    seg_first = np.concatenate(([0], np.cumsum(n_groups)[:-1]))
    numbered = group + np.repeat(seg_first, sizes)
    assert sorted(order.tolist()) == list(range(n))
    assert np.all(np.diff(numbered[order]) >= 0)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 5)), min_size=1, max_size=8), min_size=1, max_size=5)
)
def test_weighted_median_paths_agree_with_the_expanded_rows(segments):
    """Both median paths (histogram, sort) give each segment's lower median row and the rows <= and
    < it, as a sort of the rows themselves (each point repeated by its weight) does."""
    from privpub.tasks.partition.mondrian import median_by_histogram, median_by_sort

    key = np.array([v for pts in segments for v, _ in pts])
    w = np.array([c for pts in segments for _, c in pts])
    local = np.repeat(np.arange(len(segments)), [len(pts) for pts in segments])
    lo = np.array([min(v for v, _ in pts) for pts in segments])
    hi = np.array([max(v for v, _ in pts) for pts in segments])
    total = np.bincount(local, weights=w).astype(np.int64)
    expect = []
    for j in range(len(segments)):
        rows = np.sort(np.repeat(key[local == j], w[local == j]))
        med = rows[(len(rows) - 1) // 2]
        expect.append((med, int((rows <= med).sum()), int((rows < med).sum())))
    for path in (median_by_histogram(key, w, local, lo, hi, total), median_by_sort(key, w, local, total)):
        assert [tuple(int(v[j]) for v in path) for j in range(len(segments))] == expect
    # unweighted (the spine's Mondrian): the rows themselves, one item each
    key_r, local_r = np.repeat(key, w), np.repeat(local, w)
    for path in (median_by_histogram(key_r, None, local_r, lo, hi, total), median_by_sort(key_r, None, local_r, total)):
        assert [tuple(int(v[j]) for v in path) for j in range(len(segments))] == expect


def test_leaf_inn_matches_brute_force_on_small_and_huge_leaves():
    from privpub.tasks.techniques.butterfly.core import leaf_inn

    rng = np.random.default_rng(3)
    sizes = np.array([5, 7, 5, 1400])  # 1400^2 x 3 exceeds the batch budget: the blocked path
    x = rng.integers(0, 20, (sizes.sum(), 3)) / 19
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    got = leaf_inn(x, starts, sizes, 5)
    for g, (a, s) in enumerate(zip(starts, sizes)):
        pts = x[a : a + s]
        dist = np.sort(np.abs(pts[:, None, :] - pts[None, :, :]).sum(axis=2), axis=1)
        exact = dist[:, :5].min(axis=0)
        assert np.all(got[g] <= exact) and np.all(exact - got[g] <= 1e-5)
        assert np.array_equal(got[g] == 0, exact == 0)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 60), st.integers(1, 8), st.integers(0, 1000))
def test_global_knn_counts_duplicates(n, k, seed):
    """Leaves of one tuple each: every tuple's own (k-1)-NN distance in the table, repeated
    tuples counted once each."""
    from privpub.tasks.techniques.butterfly.core import leaf_global_knn

    k = min(k, n)
    x = np.random.default_rng(seed).integers(0, 4, (n, 2)) / 3  # many repeated points
    dist = np.sort(np.abs(x[:, None, :] - x[None, :, :]).sum(axis=2), axis=1)
    assert np.allclose(leaf_global_knn(x, np.arange(n), k), dist[:, k - 1])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 120), st.integers(1, 12), st.integers(1, 8), st.sampled_from([2, 30]), st.integers(0, 1000))
def test_leaf_global_knn_is_the_smallest_per_leaf(n, k, leaves, top, seed):
    """The per-leaf minimum (k-d tree skipped for leaves that hold a k-times repeated point,
    other points searched within their leaf's first distance) equals the brute-force minimum of
    every tuple's (k-1)-NN distance in the table."""
    from privpub.tasks.techniques.butterfly.core import leaf_global_knn

    k = min(k, n)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, top + 1, (n, 2)) / top
    cuts = np.unique(np.concatenate(([0], rng.integers(1, n, leaves - 1)))) if leaves > 1 else np.array([0])
    dist = np.sort(np.abs(x[:, None, :] - x[None, :, :]).sum(axis=2), axis=1)[:, k - 1]
    assert np.allclose(leaf_global_knn(x, cuts, k), np.minimum.reduceat(dist, cuts))
    # one-level points: the distinct points found from the integer codes instead
    codes = np.rint(x * top).astype(np.int64)
    assert np.allclose(leaf_global_knn(x, cuts, k, codes=codes), np.minimum.reduceat(dist, cuts))


@pytest.mark.parametrize("extra", [{}, {"k_prime": 2}])
def test_every_unit_wing_is_mondrian_on_its_points(extra):
    """Wings reused from the children (a node split on one of the wing's own attributes) are still
    exactly the wing's Mondrian on the unit's points, as Section 4.2.5 builds them."""
    tech, data = census_case(k=10, **extra)
    part, _ = release_of(tech, data)
    assert part.info["wings_inherited"] > 0
    points, _, k = tech._points(data)
    assign = part.info["assignment"]
    for u in range(assign.n_units):
        mine = np.flatnonzero(assign.unit == u)
        for attrs, wing in zip(tech.layout.wings, assign.wing):
            ref = mondrian_partition(points.take(mine), k, columns=attrs)
            pairs = set(zip(ref.group.tolist(), wing[mine].tolist()))
            assert len(pairs) == ref.n_groups == len(set(wing[mine].tolist()))

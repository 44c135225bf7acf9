"""butterfly / union-qid, anatomy and serial verify in chunks (the technique's split_verify
plan, mapped on the run's executor): every PrivacyResult, worst case
included, is the one-pass computation's whatever the number of chunks, the order they ran in, or
the runner (Prefect's threads, a Dask LocalCluster of 2 worker processes).

The one-pass references below read the whole published tables at once, as the verifiers did
before they were split: `k_anonymity` per QID (the generalization verifier), pandas group-bys
over QIT and ST. Serial's reference is its verify with one chunk, which the serial tests check
against possible-world enumeration."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import VERIFY
from privpub.tasks.core.types import PrivacyResult, Release
from privpub.tasks.demo_data import census
from privpub.tasks.techniques.butterfly.multi_qid import multi_qid_anonymity
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.verify.k_anonymity import k_anonymity
from privpub.tasks.verify.published import qi_columns
from tests.helpers import census_spec_toml
from tests.test_butterfly_pipeline import spec_toml as multi_qid_toml

ROWS = 700
CHUNKS = [ROWS, 250, 37, 1]  # rows per chunk: one chunk ... one row per chunk


def _spec(toml: str, chunk_rows: int):
    import tomllib

    raw = tomllib.loads(toml + f"\n[run]\nchunk_rows = {chunk_rows}\n")
    return spec_from_dict(raw)


def _release(toml: str, frame: pd.DataFrame, seed: int = 5, extra: dict | None = None):
    tech = get_technique(_spec(toml, ROWS))
    data = Microdata.from_frame(tech.spec, frame)
    data.extra = extra or {}
    rng = np.random.default_rng(seed)
    return tech, tech.anonymize(data, tech.partition(data, rng), rng)


def _chunked(tech, release: Release, context: dict, chunk_rows: int, reverse: bool) -> list[PrivacyResult]:
    """The flow's three steps by hand, the chunks run last to first when `reverse`."""
    tech.spec.run.chunk_rows = chunk_rows
    plan = VERIFY.plan(tech, release, context)
    if plan is None:
        assert chunk_rows >= ROWS
        return tech.verify(release, context)
    assert len(plan.chunks) > 1
    chunks = plan.chunks[::-1] if reverse else plan.chunks
    results = [plan.run(c) for c in chunks]
    return plan.combine(results[::-1] if reverse else results)


# --- butterfly and union-qid ----------------------------------------------------------------------


def one_pass_multi_qid(table: pa.Table, qids, k, k_prime, union) -> list[PrivacyResult]:
    out = []
    for i, qid in enumerate(qids, start=1):
        res = k_anonymity(table, qi_columns(table, qid), k)
        out.append(replace(res, model=f"k-anonymity QID{i}", worst={"qid": list(qid), **res.worst}))
    if k_prime is not None:
        res = k_anonymity(table, qi_columns(table, union), k_prime)
        out.append(replace(res, model="k'-anonymity union QID", worst={"qid": list(union), **res.worst}))
    return out


@pytest.fixture(scope="module")
def multi_qid_releases():
    frame = census(ROWS, seed=21)
    return {
        name: _release(multi_qid_toml(name, 4, extra), frame)
        for name, extra in (("butterfly", "k_prime = 2"), ("union-qid", ""))
    }


# One row per chunk (700 chunks, 25-40 s a case) runs only in `make test-slow` (marker `slow`), in
# either order. `make test` keeps 700, 250 and 37 rows per chunk in both orders (classes split
# across chunks, combined last to first), one-row chunks over classes split row by row in
# test_a_class_split_across_chunks_is_counted_whole, and one-row chunks of Anatomy's release below.
MULTI_QID_CHUNKS = [(c, r) for c in CHUNKS if c != 1 for r in (False, True)]
ONE_ROW_CHUNKS = [pytest.param(1, r, marks=pytest.mark.slow) for r in (False, True)]


@pytest.mark.parametrize("name", ["butterfly", "union-qid"])
@pytest.mark.parametrize("chunk_rows, reverse", [*MULTI_QID_CHUNKS, *ONE_ROW_CHUNKS])
def test_multi_qid_chunks_give_the_one_pass_results(multi_qid_releases, name, chunk_rows, reverse):
    tech, release = multi_qid_releases[name]
    table = release.tables["table"]
    expected = one_pass_multi_qid(table, tech.params.qids, tech.params.k, tech.params.k_prime, tech.union)
    assert _chunked(tech, release, {}, chunk_rows, reverse) == expected
    assert tech.verify(release, {}) == expected  # verify itself, in chunks of chunk_rows
    # a stricter k makes the smallest classes fail: the worst class named is still the first one
    strict = one_pass_multi_qid(table, tech.params.qids, 2 * tech.params.k, None, None)
    assert multi_qid_anonymity(table, tech.params.qids, 2 * tech.params.k, chunk_rows=chunk_rows) == strict


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("chunk_rows", [1, 2, 5])
def test_a_class_split_across_chunks_is_counted_whole(k, chunk_rows):
    """Classes of 3 and 4 rows interleaved, so every class spans several chunks: k = 4 fails on
    the class of 3 (just outside), k = 3 passes (just inside)."""
    a = ["x", "y", "x", "y", "x", "y", "y"]
    table = pa.table({"a": [[v] for v in a]})
    res = multi_qid_anonymity(table, [["a"]], k, chunk_rows=chunk_rows)
    assert [(r.value, r.passed, r.worst["class"]) for r in res] == [(3, k <= 3, {"a": ["x"], "size": 3})]
    assert res[0].worst["classes"] == 2


# --- anatomy --------------------------------------------------------------------------------------


def one_pass_anatomy(release: Release, sensitive: str, l: int) -> list[PrivacyResult]:
    qit = release.tables["QIT"].to_pandas()
    st = release.tables["ST"].to_pandas()
    size = qit.groupby("gid").size()
    st_size = st.groupby("gid")["count"].sum()
    consistent = size.sort_index().equals(st_size.sort_index().astype(size.dtype))
    distinct = st.groupby("gid")[sensitive].nunique()
    top = st.groupby("gid")["count"].max()
    frac = top / size.reindex(top.index)
    g = int(frac.idxmax())
    worst = Fraction(int(top[g]), int(size[g]))
    return [
        PrivacyResult("QIT and ST agree on group sizes", bool(consistent), True, bool(consistent)),
        PrivacyResult(
            "l-diversity (distinct)", int(distinct.min()), l, bool(distinct.min() >= l), {"gid": int(distinct.idxmin())}
        ),
        PrivacyResult(
            "attribute disclosure", str(worst), str(Fraction(1, l)), bool(worst <= Fraction(1, l)), {"gid": g}
        ),
    ]


def _tampered(release: Release, sensitive: str) -> Release:
    """ST with two late groups made worse (one value counted twice, one value renamed to its
    neighbour's) and an early group's count off by one: every figure moves, and ties remain."""
    st = release.tables["ST"].to_pandas()
    last = st["gid"].max()
    late = st.index[st["gid"] == last - 3]
    st.loc[late[0], "count"] += 1
    other = st.index[st["gid"] == last - 1]
    st.loc[other[1], sensitive] = st.loc[other[0], sensitive]
    st.loc[st.index[st["gid"] == 2][0], "count"] += 1
    return Release({"QIT": release.tables["QIT"], "ST": pa.Table.from_pandas(st, preserve_index=False)})


@pytest.fixture(scope="module")
def anatomy_release():
    return _release(census_spec_toml(technique="anatomy", k=None, l=3), census(ROWS, seed=22))


@pytest.mark.parametrize("tamper", [False, True])
@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("reverse", [False, True])
def test_anatomy_chunks_give_the_one_pass_results(anatomy_release, tamper, chunk_rows, reverse):
    tech, release = anatomy_release
    if tamper:
        release = _tampered(release, "occupation")
    expected = one_pass_anatomy(release, "occupation", 3)
    assert [r.passed for r in expected] == [not tamper] * 3
    assert _chunked(tech, release, {}, chunk_rows, reverse) == expected
    assert tech.verify(release, {}) == expected


# --- serial ---------------------------------------------------------------------------------------

SERIAL = 'strategy = "constant-ratio"\nreleases = 5\ntransient = 0.3'


def _serial_releases():
    """Two releases of a series, the second verified against the first's history rows."""
    toml = census_spec_toml(technique="serial", k=None, l=2, extra=SERIAL)
    first_frame = census(ROWS, seed=23)
    tech, first = _release(toml, first_frame)
    history = first.private["serial_stats"].to_pandas()
    second_frame = first_frame.assign(occupation=np.roll(first_frame["occupation"].to_numpy(), 7))
    extra = {"serial_stats": history, "serial_release": 2}
    _, second = _release(toml, second_frame, seed=6, extra=extra)
    full = {"serial_stats": history}
    incremental = {
        "serial_aggregate": first.private["serial_aggregate"],
        "serial_summary": first.private["serial_summary"],
    }
    return tech, [(first, {}), (second, full), (second, incremental)]


@pytest.fixture(scope="module")
def serial_releases():
    return _serial_releases()


@pytest.mark.parametrize("case", [0, 1, 2])
@pytest.mark.parametrize("chunk_rows", CHUNKS[1:])
@pytest.mark.parametrize("reverse", [False, True])
def test_serial_chunks_give_the_one_chunk_results(serial_releases, case, chunk_rows, reverse):
    tech, cases = serial_releases
    release, context = cases[case]
    tech.spec.run.chunk_rows = ROWS
    expected = tech.verify(release, context)
    assert VERIFY.plan(tech, release, context) is None
    names = [r.model for r in expected]
    assert names[:2] == ["serial-global", "serial-localized"] and all(r.passed for r in expected)
    assert _chunked(tech, release, context, chunk_rows, reverse) == expected
    assert tech.verify(release, context) == expected


def test_serial_localized_worst_group_is_the_first_whatever_the_chunks(serial_releases):
    """Three groups of the release (an early one, the last two) made to show one protected value
    in every row: each breaches the localized bound with share 1, and the first of them is named
    in one chunk as in one chunk per row."""
    tech, cases = serial_releases
    release, _ = cases[0]
    table = release.tables["table"]
    gid = table.column("gid").to_numpy()
    hit = np.isin(gid, [3, gid.max() - 1, gid.max()])
    value = release.private["transient"][0]
    shown = np.where(hit, value, table.column("occupation").to_numpy(zero_copy_only=False))
    changed = Release(
        {
            "table": table.set_column(table.schema.get_field_index("occupation"), "occupation", pa.array(shown)),
            "groups": release.tables["groups"],
        },
        release.private,
    )
    tech.spec.run.chunk_rows = ROWS
    one = tech.verify(changed, {})
    assert _chunked(tech, changed, {}, 1, True) == one
    localized = one[1]
    assert localized.model == "serial-localized" and not localized.passed and localized.value == "1"
    assert localized.worst["gid"] == 3 and localized.worst["violating_groups"] >= 3

"""Risk figures of every technique (issue 28): attribute-risk-max of each release against a
direct count from its published files (a pandas group-by written from the definition, sharing
no code with tasks/risk/__init__.py), the report saying which risk a technique that publishes QIs
unchanged or perturbed reduces instead of showing its identity figures, and the riskiest rows
and classes of a table, in memory and as a folder of parts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.flows import pipeline
from privpub.state.store import Store
from privpub.tasks.core.parted_table import PartedTable
from privpub.tasks.risk import grouped_attribute_risk, table_riskiest
from privpub.tasks.risk.parted import parted_riskiest
from tests.helpers import write_spec

IDENTITY = ("prosecutor-risk-max", "prosecutor-risk-avg", "records-at-risk", "sample-uniques")
PARAMS = {
    "ambiguity": dict(k=None, l=None, extra="alpha = 0.25\nbeta = 0.1"),
    "priview": dict(k=None, l=None, extra="alpha = 0.25\nbeta = 0.1"),
    "muco": dict(k=None, l=3, extra='delta = "1/6"'),
    "serial": dict(k=None, l=2, extra='strategy = "constant-ratio"\nreleases = 5\ntransient = 0.2'),
}


def publish(folder: Path, name: str) -> tuple[str, dict[str, float], Path]:
    spec = write_spec(folder, technique=name, seed=8, **PARAMS[name])
    release_id = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    m = Store(folder / "privpub.duckdb").release(release_id)["metrics"]
    return release_id, {r.name: r.value for r in m[m.kind == "risk"].itertuples()}, folder / "releases" / release_id


def st_share(st_frame: pd.DataFrame, group: list[str]) -> float:
    """Largest share of one sensitive value among the units of a group (ST counts)."""
    per_value = st_frame.groupby([*group, "occupation"])["count"].sum()
    per_group = st_frame.groupby(group)["count"].sum()
    return float((per_value / per_group.reindex(per_value.index.droplevel("occupation")).to_numpy()).max())


def class_share(frame: pd.DataFrame, qi: list[str]) -> float:
    """Largest share of one shown sensitive value in a class of equal published QI cells."""
    key = frame[qi].map(lambda v: "|".join(map(str, v)) if not np.isscalar(v) else str(v)).agg("\x1e".join, axis=1)
    shown = frame.assign(_k=key)
    counts = shown.dropna(subset=["occupation"]).groupby(["_k", "occupation"]).size()
    return float((counts / shown.groupby("_k").size().reindex(counts.index.get_level_values("_k")).to_numpy()).max())


@pytest.mark.parametrize("name", ["ambiguity", "priview"])
def test_st_techniques_show_attribute_risk_only_with_the_reason(census_dir, name):
    _, risk, folder = publish(census_dir, name)
    st_frame = pd.read_parquet(folder / "ST.parquet")
    group = (
        ["gid"]
        if name == "ambiguity"
        else ["gid", next(c for c in st_frame if c not in ("gid", "occupation", "count"))]
    )
    assert risk["attribute-risk-max"] == pytest.approx(st_share(st_frame, group))
    assert risk["attribute-risk-max"] <= 0.1 + 1e-12  # beta
    assert not set(IDENTITY) & set(risk)  # no identity figure of the release: it would mislead
    assert {f"input-{n}" for n in IDENTITY} <= set(risk)
    report = (folder / "report.html").read_text()
    assert f"What {name} reduces:" in report and "alpha-presence" in report
    assert "does not apply (see below)" in report


def test_muco_attribute_risk_reads_classes_of_equal_published_values(census_dir):
    _, risk, folder = publish(census_dir, "muco")
    frame = pd.read_parquet(folder / "table.parquet")
    qi = [c for c in frame.columns if c != "occupation"]
    assert risk["attribute-risk-max"] == pytest.approx(class_share(frame, qi))
    assert not set(IDENTITY) & set(risk)
    assert "delta-probability" in (folder / "report.html").read_text()


def test_serial_release_figures_come_from_its_generalized_table(census_dir):
    _, risk, folder = publish(census_dir, "serial")
    frame = pd.read_parquet(folder / "table.parquet")
    qi = [c for c in frame.columns if c not in ("gid", "occupation")]
    key = frame[qi].map(lambda v: "|".join(map(str, v)) if not np.isscalar(v) else str(v)).agg("\x1e".join, axis=1)
    size = key.map(key.value_counts())
    assert risk["prosecutor-risk-max"] == pytest.approx(1 / size.min())
    assert risk["sample-uniques"] == pytest.approx((size == 1).mean())
    assert risk["attribute-risk-max"] == pytest.approx(class_share(frame, qi))
    report = (folder / "report.html").read_text()
    assert "The riskiest classes" in report and "serial guarantee" in report


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from("ab"), st.integers(-1, 3), st.integers(1, 4)),
        min_size=1,
        max_size=25,
    )
)
def test_grouped_attribute_risk_is_the_largest_share_of_a_shown_value(rows):
    """Count rows (group, side key, value, count); value -1 is withheld: it adds to the group's
    size but is nobody's value."""
    gid, key, value, count = (np.array(c) for c in zip(*rows))
    best = 0.0
    for g, k in set(zip(gid.tolist(), key.tolist())):
        here = (gid == g) & (key == k)
        size = count[here].sum()
        for v in set(value[here].tolist()) - {-1}:
            best = max(best, count[here & (value == v)].sum() / size)
    assert grouped_attribute_risk([gid, key], value, count) == pytest.approx(best)


def generalized(seed: int, n: int = 300) -> pa.Table:
    rng = np.random.default_rng(seed)
    lo = rng.integers(0, 3, n)
    return pa.table(
        {
            "age_lo": lo,
            "age_hi": lo + rng.integers(0, 2, n),
            "sex": rng.choice(["F", "M"], n),
            "job": pa.array([["a", "b"], ["c", "d"], ["a", "b", "c"]]).take(pa.array(rng.integers(0, 3, n))),
            "occupation": rng.choice(["x", "y", "z"], n, p=[0.6, 0.3, 0.1]),
        }
    )


def test_riskiest_rows_and_classes_equal_a_direct_count():
    table = generalized(1)
    got = table_riskiest(table, ["age_lo", "age_hi", "sex", "job"], "occupation", limit=7)
    frame = table.to_pandas()
    key = frame[["age_lo", "age_hi", "sex"]].astype(str).agg("|".join, axis=1) + "|" + frame["job"].map("/".join)
    size = key.map(key.value_counts())
    share = frame.groupby(key)["occupation"].agg(lambda s: s.value_counts().iloc[0] / len(s))
    assert got["class_size"] == size.min() and got["records"] == int((size == size.min()).sum())
    assert got["rows"] == np.flatnonzero(size == size.min())[:7].tolist()
    ranked = sorted(zip(key.value_counts().to_numpy(), -share[key.value_counts().index].to_numpy()))[:5]
    assert [c["size"] for c in got["classes"]] == [int(r[0]) for r in ranked]
    assert [-c["attribute_risk"] for c in got["classes"]] == pytest.approx([r[1] for r in ranked])
    for c in got["classes"]:  # the cells shown are a class's published cells
        cells = c["cells"]
        match = (
            (frame.age_lo == cells["age_lo"])
            & (frame.age_hi == cells["age_hi"])
            & (frame.sex == cells["sex"])
            & (frame.job.map(list) == pd.Series([cells["job"]] * len(frame)))
        )
        assert match.sum() == c["size"]


def test_a_folder_of_parts_names_the_same_rows_and_classes(tmp_path):
    table = generalized(2, n=500)
    folder = tmp_path / "table"
    folder.mkdir()
    for i, start in enumerate(range(0, 500, 130)):
        pq.write_table(table.slice(start, 130), folder / f"part-{i:05d}.parquet")
    columns = ["age_lo", "age_hi", "sex", "job"]
    whole = table_riskiest(table, columns, "occupation", limit=12)
    parted = parted_riskiest(PartedTable(folder), columns, "occupation", limit=12)
    assert parted is not None and whole is not None
    assert {k: parted[k] for k in ("class_size", "records", "rows")} == {
        k: whole[k] for k in ("class_size", "records", "rows")
    }
    assert [c["size"] for c in parted["classes"]] == [c["size"] for c in whole["classes"]]
    assert [c["attribute_risk"] for c in parted["classes"]] == pytest.approx(
        [c["attribute_risk"] for c in whole["classes"]]
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=30))
def test_weighted_pair_counts_are_the_same_by_bincount_and_by_sort(rows):
    """pair_counts with weights (a count table's counts): both of its branches, against a sum."""
    from privpub.tasks.core import sensitive_models as sm

    g, v, w = (np.array(c, dtype=np.int64) for c in zip(*rows))
    expected: dict[tuple[int, int], int] = {}
    for a, b, c in rows:
        expected[(a, b)] = expected.get((a, b), 0) + c
    dense = sm.pair_counts(g, v, 6, 4, w)
    real = sm._DENSE_CELLS
    sm._DENSE_CELLS = 0  # the sort branch (tables too large for a bincount)
    try:
        by_sort = sm.pair_counts(g, v, 6, 4 * len(rows) + 1, w)
    finally:
        sm._DENSE_CELLS = real
    for got in (dense, by_sort):
        assert dict(zip(zip(got[0].tolist(), got[1].tolist()), got[2].tolist())) == expected

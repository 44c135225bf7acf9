"""Re-identification risk (tasks/risk/__init__.py, issue 28 first part): every figure against a direct
count from its definition (a Python loop over records, on small hypothesis-drawn tables), the
prosecutor maximum against pycanon's k, the threshold just inside and just outside, the [risk]
limits refusing a release with one line and an audit row, and the figures stored before -> after."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet  # noqa: F401  (pa.parquet)
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from privpub.flows import pipeline
from privpub.schemas.errors import PrivacyRefused, SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.risk import _classes_of_codes, risk_figures, risk_settings, table_risk
from tests.helpers import write_spec


def by_definition(rows: list[tuple], sensitive: list, threshold: float) -> dict[str, float]:
    """Each figure counted record by record, straight from its definition."""
    n = len(rows)
    size = Counter(rows)
    risk = [1 / size[r] for r in rows]
    share = []
    for r in set(rows):
        values = Counter(s for row, s in zip(rows, sensitive) if row == r)
        share.append(max(values.values()) / size[r])
    return {
        "prosecutor-risk-max": max(risk),
        "prosecutor-risk-avg": sum(risk) / n,
        "records-at-risk": sum(x > threshold for x in risk) / n,
        "sample-uniques": sum(size[r] == 1 for r in rows) / n,
        "attribute-risk-max": max(share),
    }


tables = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=n, max_size=n),
        st.lists(st.integers(0, 4), min_size=n, max_size=n),
        st.sampled_from([0.2, 0.25, 0.5, 1 / 3, 0.99]),
    )
)


@settings(max_examples=150, deadline=None)
@given(tables)
def test_figures_of_codes_equal_a_count_by_definition(case):
    rows, sensitive, threshold = case
    ids, n = _classes_of_codes(np.array(rows, dtype=np.int32))
    got = risk_figures(ids, n, np.array(sensitive, dtype=np.int64), threshold)
    assert got == pytest.approx(by_definition(rows, sensitive, threshold), abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(tables)
def test_figures_of_a_published_table_read_cells_whole(case):
    """Published cells: a list and a range; equal cells are one class, wherever the rows are."""
    rows, sensitive, threshold = case
    lists = [["a", "b"][: 1 + a % 2] + [str(a)] for a, _ in rows]
    table = pa.table(
        {
            "x": pa.array(lists, pa.list_(pa.string())),
            "y_lo": pa.array([b for _, b in rows]),
            "y_hi": pa.array([b + 1 for _, b in rows]),
            "s": pa.array([f"v{s}" for s in sensitive]),
        }
    )
    got = table_risk(table, ["x", "y_lo", "y_hi"], "s", threshold)
    cells = [(tuple(x), b) for x, (_, b) in zip(lists, rows)]
    assert got == pytest.approx(by_definition(cells, sensitive, threshold), abs=1e-12)


@settings(max_examples=80, deadline=None)
@example(([(0, 0)] * 3, [4, 4, 0], 0.2))  # two withheld values and one shown: 1/3, not 2/3
@given(tables)
def test_a_withheld_sensitive_value_counts_in_its_class_but_is_nobodys_value(case):
    """A null sensitive cell (a value withheld, as serial publishes it): it adds to its class's
    size and is never the value the adversary names; counted record by record."""
    rows, codes, threshold = case
    sensitive = [None if c == 4 else f"v{c}" for c in codes]
    table = pa.table(
        {
            "x": pa.array([a for a, _ in rows]),
            "y": pa.array([b for _, b in rows]),
            "s": pa.array(sensitive, pa.string()),
        }
    )
    size = Counter(rows)
    best = 0.0
    for r in size:
        values = Counter(s for row, s in zip(rows, sensitive) if row == r and s is not None)
        best = max(best, max(values.values(), default=0) / size[r])
    assert table_risk(table, ["x", "y"], "s", threshold)["attribute-risk-max"] == pytest.approx(best, abs=1e-12)


def test_the_highest_prosecutor_risk_is_one_over_pycanons_k():
    from pycanon import anonymity

    frame = census(400, seed=3)[["age", "sex", "race", "occupation"]]
    codes = np.column_stack([pd.factorize(frame[c])[0] for c in ("age", "sex", "race")])
    ids, n = _classes_of_codes(codes)
    figures = risk_figures(ids, n, pd.factorize(frame.occupation)[0], 0.2)
    assert figures["prosecutor-risk-max"] == pytest.approx(1 / anonymity.k_anonymity(frame, ["age", "sex", "race"]))


def test_records_at_risk_counts_only_what_is_above_the_threshold():
    ids = np.repeat(np.arange(3), [5, 5, 10])  # risks 0.2, 0.2, 0.1
    s = np.zeros(20, dtype=np.int64)
    assert risk_figures(ids, 3, s, 0.2)["records-at-risk"] == 0  # exactly at the threshold: not above
    assert risk_figures(ids, 3, s, 0.2 - 1e-9)["records-at-risk"] == 0.5  # just below it: counted


@pytest.mark.parametrize(
    "section, message",
    [
        ({"threshold": "0.2"}, r"\[risk\] threshold = '0.2': must be a number"),
        ({"threshold": 0}, r"\[risk\] threshold = 0: must be a number above 0"),
        ({"max_attribute": 1.5}, r"\[risk\] max_attribute = 1.5"),
        ({"max_attribute": True}, r"\[risk\] max_attribute = True"),
    ],
)
def test_risk_settings_are_strict(section, message):
    spec = spec_from_dict({**census_spec("x.csv", k=5, l=None), "risk": section})
    with pytest.raises(SpecError, match=message):
        risk_settings(spec)


def test_an_unknown_risk_key_is_refused_with_did_you_mean():
    with pytest.raises(SpecError, match=r"\[risk\] max_prosecuter: unknown key; did you mean max_prosecutor\?"):
        spec_from_dict({**census_spec("x.csv", k=5, l=None), "risk": {"max_prosecuter": 0.1}})


def _publish(folder, **risk):
    extra = "\n[risk]\n" + "".join(f"{k} = {v}\n" for k, v in risk.items()) if risk else ""
    spec = write_spec(folder, k=5, l=None, seed=3, extra=extra)
    return pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))


def test_a_release_stores_its_risk_before_and_after(census_dir):
    release_id = _publish(census_dir)
    m = Store(census_dir / "privpub.duckdb").release(release_id)["metrics"]
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    k = int(m[(m.kind == "privacy") & (m.name == "k-anonymity")].value.iloc[0])
    assert risk["prosecutor-risk-max"] == pytest.approx(1 / k) and risk["sample-uniques"] == 0
    assert risk["input-prosecutor-risk-max"] == 1.0  # the census input has unique records
    assert risk["input-records-at-risk"] > risk["records-at-risk"]
    report = (census_dir / "releases" / release_id / "report.html").read_text()
    assert "Re-identification risk" in report and "attribute-risk-max" in report


def test_a_risk_limit_refuses_just_outside_and_publishes_just_inside(census_dir):
    release_id = _publish(census_dir)
    m = Store(census_dir / "privpub.duckdb").release(release_id)["metrics"]
    reached = float(m[(m.kind == "risk") & (m.name == "prosecutor-risk-max")].value.iloc[0])
    store = Store(census_dir / "privpub.duckdb")
    # another seed, same input: the same k here, so the same highest risk
    with pytest.raises(
        PrivacyRefused, match=r"^release refused, re-identification risk above its limit: prosecutor-risk-max"
    ):
        spec = write_spec(census_dir, k=5, l=None, seed=4, extra=f"\n[risk]\nmax_prosecutor = {reached * 0.999}\n")
        pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None), allow_repeat=True)
    refused = store.audit_log().iloc[-1]
    assert refused.outcome == "refused" and "prosecutor-risk-max" in json.loads(refused.detail)["risk"][0]
    spec = write_spec(census_dir, k=5, l=None, seed=4, extra=f"\n[risk]\nmax_prosecutor = {reached}\n")
    assert pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None), allow_repeat=True) != release_id


def test_an_attribute_limit_refuses_anatomy_just_below_1_over_l_and_publishes_it_at_1_over_l(census_dir):
    """Another figure, technique and key: Anatomy with l = 3 publishes groups of three different
    sensitive values, one record each, so attribute-risk-max is 1/3 (counted from ST here).
    max_attribute = 0.333 (0.1% below it) refuses the release; 0.33334 publishes it."""
    store = Store(census_dir / "privpub.duckdb")

    def attempt(limit: float) -> str:
        extra = f"\n[risk]\nmax_attribute = {limit}\n"
        spec = write_spec(census_dir, technique="anatomy", k=None, l=3, seed=2, extra=extra)
        return pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None), allow_repeat=True)

    with pytest.raises(
        PrivacyRefused,
        match=r"^release refused, re-identification risk above its limit: attribute-risk-max is 0.3333, "
        r"above the limit 0.333$",
    ):
        attempt(0.333)
    assert store.history(None).empty and store.audit_log().iloc[-1].outcome == "refused"
    release_id = attempt(0.33334)
    st = pd.read_parquet(census_dir / "releases" / release_id / "ST.parquet")
    share = max(g["count"].max() / g["count"].sum() for _, g in st.groupby("gid"))
    m = store.release(release_id)["metrics"]
    stored = float(m[(m.kind == "risk") & (m.name == "attribute-risk-max")].value.iloc[0])
    assert share == pytest.approx(1 / 3) and stored == pytest.approx(share)


def test_verify_recomputes_the_release_risk_and_notices_a_changed_record(census_dir):
    import duckdb

    from privpub.flows.reverify import reverify

    release_id = _publish(census_dir)
    ok, lines = reverify(census_dir / "privpub.duckdb", release_id)
    assert ok and any(line.startswith("PASS prosecutor-risk-max: 0.2, input 1 at publish") for line in lines), lines
    with duckdb.connect(str(census_dir / "privpub.duckdb")) as con:
        con.execute(
            "UPDATE release_metrics SET text_value = '0.01' WHERE kind = 'risk' AND name = 'prosecutor-risk-max'"
        )
    ok, lines = reverify(census_dir / "privpub.duckdb", release_id)
    assert not ok and any("FAIL prosecutor-risk-max" in line and "the publish stored 0.01" in line for line in lines)


def test_anatomy_keeps_identity_risk_and_bounds_attribute_risk_by_1_over_l(census_dir):
    """Anatomy publishes the QIs as they are (QIT): its identity figures are the input's; its
    attribute risk, read from ST, is counted group by group here and is 1 / l."""
    spec = write_spec(census_dir, technique="anatomy", k=None, l=3, seed=2)
    release_id = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    store = Store(census_dir / "privpub.duckdb")
    m = store.release(release_id)["metrics"]
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    for name in ("prosecutor-risk-max", "prosecutor-risk-avg", "records-at-risk", "sample-uniques"):
        assert risk[name] == risk[f"input-{name}"], name
    st = pd.read_parquet(census_dir / "releases" / release_id / "ST.parquet")
    by_group = [g["count"].max() / g["count"].sum() for _, g in st.groupby("gid")]
    assert risk["attribute-risk-max"] == pytest.approx(max(by_group)) == pytest.approx(1 / 3)
    assert risk["input-attribute-risk-max"] == 1.0


def test_the_riskiest_records_are_named_by_row_position_in_the_smallest_classes(census_dir):
    from privpub.schemas.spec import load_spec
    from privpub.tasks.core.types import Release
    from privpub.tasks.risk import riskiest_rows
    from privpub.tasks.techniques.registry import get_technique

    release_id = _publish(census_dir)
    table = pa.parquet.read_table(census_dir / "releases" / release_id / "table.parquet")
    tech = get_technique(load_spec(census_dir / "spec.toml"))
    where = riskiest_rows(tech, Release({"table": table}), limit=4)
    frame = table.to_pandas()
    cells = frame.drop(columns=["occupation"]).map(lambda v: "|".join(map(str, v)) if not np.isscalar(v) else v)
    size = cells.groupby(list(cells.columns))[cells.columns[0]].transform("size")
    assert where["class_size"] == size.min() and where["records"] == int((size == size.min()).sum())
    assert where["rows"] == list(np.flatnonzero(size.to_numpy() == size.min())[:4])
    report = (census_dir / "releases" / release_id / "report.html").read_text()
    assert f"classes of {where['class_size']}" in report


@pytest.mark.parametrize("name", ["butterfly", "union-qid"])
def test_multi_qid_risk_counts_classes_over_every_published_qi(census_dir, name):
    from tests.test_butterfly_pipeline import spec_toml

    spec = census_dir / "spec.toml"
    spec.write_text(spec_toml(name, 6, "k_prime = 2" if name == "butterfly" else ""))
    release_id = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    m = Store(census_dir / "privpub.duckdb").release(release_id)["metrics"]
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    from privpub.schemas.spec import load_spec

    sensitive = load_spec(spec).dataset.sensitive
    frame = pd.read_parquet(census_dir / "releases" / release_id / "table.parquet")
    qi = frame.drop(columns=[sensitive]).map(lambda v: "|".join(map(str, v)) if not np.isscalar(v) else v)
    size = qi.groupby(list(qi.columns))[qi.columns[0]].transform("size")
    assert risk["prosecutor-risk-max"] == pytest.approx(1 / size.min())
    assert risk["prosecutor-risk-avg"] == pytest.approx((1 / size).mean())
    share = frame.assign(_k=qi.astype(str).agg("|".join, axis=1)).groupby("_k")[sensitive]
    assert risk["attribute-risk-max"] == pytest.approx(share.agg(lambda s: s.value_counts().iloc[0] / len(s)).max())

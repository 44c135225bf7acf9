"""`privpub explore` (issue 29, item 1): a dry run over a grid of settings. Each setting's
figures equal a publish of that setting with the same seed; nothing is written but the audit
row and the trade-off page; a bad setting refuses the grid before any work; a failing setting
is a row, not an abort."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import privpub
from privpub.flows import pipeline
from privpub.flows.explore import parse_sets, parse_value, settings_of
from privpub.schemas.errors import PrivacyRefused, SpecError
from privpub.state.store import Store
from privpub.tasks.compose.check import ROW_WORDS
from tests.helpers import table_query, write_spec
from tests.test_drivers import _without_a_server

SERIES_NAMES = {"series-composition-k", "series-composition-l"}


def explore_cli(folder: Path, tmp_path: Path, spec: Path, *flags: str):
    return _without_a_server(folder, tmp_path, "-m", "privpub.flows.cli", "explore", str(spec), *flags)


def publish(spec: Path, overrides: dict | None = None) -> str:
    return pipeline.attempt(str(spec), overrides, None, driver=pipeline.Driver(None))


def state_tables(path: Path) -> dict[str, tuple[int, str]]:
    """Every table of the state file but the audit log: (rows, hash of its sorted content)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        out = {}
        for name in names:
            if name == "audit_log":
                continue
            rows = sorted(repr(r) for r in con.execute(table_query(name)).fetchall())
            out[name] = (len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest())
        return out
    finally:
        con.close()


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def stored_figures(state: Path, release_id: str) -> pd.DataFrame:
    return Store(state).release(release_id)["metrics"]


def same_figure(explored, stored_value, stored_text) -> bool:
    """An explore figure against release_metrics' value (a float, NaN for text) and text."""
    if str(explored) == stored_text:
        return True
    if stored_value is None or (isinstance(stored_value, float) and math.isnan(stored_value)):
        return explored is None and stored_text in ("nan", "inf", "-inf", "None")
    return explored is not None and float(explored) == stored_value


# --- the grid -------------------------------------------------------------------------------------


def test_values_are_read_strictly_as_toml_would():
    assert parse_value("5") == 5 and isinstance(parse_value("5"), int)
    assert parse_value("5.0") == 5.0 and isinstance(parse_value("5.0"), float)
    assert parse_value("1e-2") == 0.01 and parse_value("-3") == -3
    assert parse_value("1/5") == "1/5" and parse_value("abc") == "abc" and parse_value("1_000") == "1_000"
    assert parse_value("true") is True and parse_value("nan") == "nan"
    grid = parse_sets(["k=5,10", "l=2,3", "risk.threshold=0.1"])
    assert grid == {"k": [5, 10], "l": [2, 3], "risk.threshold": [0.1]}
    assert settings_of(grid) == [
        {"k": 5, "l": 2, "risk.threshold": 0.1},
        {"k": 5, "l": 3, "risk.threshold": 0.1},
        {"k": 10, "l": 2, "risk.threshold": 0.1},
        {"k": 10, "l": 3, "risk.threshold": 0.1},
    ]
    for bad in (["k"], ["k="], ["=5"], ["k=5", "k=6"]):
        with pytest.raises(SpecError, match="--set"):
            parse_sets(bad)
    with pytest.raises(SpecError, match="dataset.input"):
        settings_of({"dataset.input": ["x.csv"]})


# --- the CLI: figures equal a publish, nothing written ------------------------------------------


def test_explore_writes_nothing_and_its_figures_equal_a_publish(census_dir, tmp_path):
    # composition = "warn": k = 10 after k = 5 pins some people (below 10 records), and is
    # published all the same, with the failed figure recorded
    spec = write_spec(census_dir, k=5, l=None, seed=None, extra='\n[series]\ncomposition = "warn"\n')
    state, releases = census_dir / "privpub.duckdb", census_dir / "releases"
    first = publish(spec, {"output": {"seed": 3}})  # an earlier release: the series check has history
    before, files, log_before = state_tables(state), listing(releases), Store(state).audit_log()

    res = explore_cli(census_dir, tmp_path, spec, "--set", "k=5,10,700", "--seed", "21", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["setting"] for r in rows] == [{"k": 5}, {"k": 10}, {"k": 700}]
    assert [r["passed"] for r in rows] == [True, True, False]
    assert "larger than the table" in rows[2]["reason"] and rows[2]["figures"] == {}
    assert all(set(r) >= {"setting", "passed", "figures", "seconds", "series_composition"} for r in rows)
    assert rows[1]["figures"]["k-anonymity"] >= 10 and rows[0]["figures"]["groups"] > rows[1]["figures"]["groups"]
    assert rows[0]["series_composition"] is True and rows[1]["series_composition"] is False
    assert rows[1]["figures"]["series-composition-k"] < 10 <= rows[1]["figures"]["k-anonymity"]

    # nothing of a release: every table the same, no file or staging folder; one audit row
    assert state_tables(state) == before and listing(releases) == files
    log = Store(state).audit_log()
    assert len(log) == len(log_before) + 1
    new = log.iloc[-1]
    assert (new.action, new.outcome, new.target) == ("explore", "explored", "census")
    detail = json.loads(new.detail)
    assert detail["grid"] == {"k": [5, 10, 700]} and detail["seed"] == 21 and detail["passed"] == 2
    page = Path(detail["page"])
    assert page == census_dir / "explore-census.html" and "<svg" in page.read_text()

    # k = 10 with the same seed, published: every stored figure is the explore row's
    released = publish(spec, {"technique": {"k": 10}, "output": {"seed": 21}})
    assert released != first
    stored = stored_figures(state, released)
    explored = rows[1]["figures"]
    assert set(stored.name) == set(explored)  # privacy, utility and risk: the same names
    assert {"k-anonymity", "query-error-1pct", "prosecutor-risk-max", "series-composition-k"} <= set(explored)
    for r in stored.itertuples():
        assert same_figure(explored[r.name], r.value, r.text_value), (r.name, explored[r.name], r.text_value)
    composed = stored[stored.name.isin(SERIES_NAMES)]
    assert bool(composed.passed.iloc[0]) is rows[1]["series_composition"]


def test_a_bad_setting_refuses_the_grid_before_any_work(census_dir, tmp_path):
    spec = write_spec(census_dir, k=5, l=None, seed=4)
    state = census_dir / "privpub.duckdb"
    publish(spec)
    before = state_tables(state)
    for flag, named in (
        ("k=5,0", "k=0"),  # outside the domain
        ("k=5,5.0", "k=5.0"),  # a float where an integer is wanted: no coercion
        ("k=5,abc", "k=abc"),
        ("kk=5", "kk=5"),  # an unknown key
        ("risk.threshold=2", "risk.threshold=2"),
    ):
        res = explore_cli(census_dir, tmp_path, spec, "--set", flag)
        assert res.returncode == 1 and res.stdout == ""
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and named in lines[0], res.stderr  # one line naming key and value
        last = Store(state).audit_log().iloc[-1]
        assert (last.action, last.outcome) == ("explore", "refused")
    assert state_tables(state) == before
    assert not (census_dir / "explore-census.html").exists()  # nothing ran


def test_table_output_and_progress(census_dir, tmp_path):
    spec = write_spec(census_dir, k=5, l=None, seed=None)
    res = explore_cli(census_dir, tmp_path, spec, "--set", "k=5,10", "--set", "l=2,30")
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0].split()[:2] == ["setting", "result"] and "prosecutor-risk-max" in out[0]
    assert [line.split()[2] for line in out[1:5]] == ["PASS"] * 4
    assert [" ".join(line.split()[:2]) for line in out[1:5]] == ["k=5 l=2", "k=5 l=30", "k=10 l=2", "k=10 l=30"]
    seed = int(out[-1].split()[1].rstrip(";"))
    err = res.stderr.strip().splitlines()
    assert err[0] == f"[privpub] seed {seed} drawn (publish with --seed {seed} to reproduce a setting's release)"
    assert sum("setting " in line for line in err) == 4 and len(err) == 6  # one line per setting


# --- the Python API -------------------------------------------------------------------------------


def test_python_api_returns_a_frame_and_settings_do_not_leak_into_each_other(census_dir):
    spec = write_spec(census_dir, k=5, l=None, seed=8)
    frame = privpub.explore(spec, {"k": [5, 12]})
    assert isinstance(frame, pd.DataFrame) and list(frame.k) == [5, 12]
    assert {"passed", "seconds", "k-anonymity", "groups", "records-at-risk"} <= set(frame.columns)
    assert frame.passed.tolist() == [True, True] and frame.attrs["seed"] == 8
    assert frame.series_composition.isna().all()  # no earlier release to combine with
    alone = privpub.explore(spec, {"k": [12]})
    figures = [c for c in frame.columns if c not in ("seconds", "reason", "series_composition")]
    assert alone[figures].iloc[0].to_dict() == frame[figures].iloc[1].to_dict()  # the rows are not changed
    assert Store(census_dir / "privpub.duckdb").history(None).empty
    assert not (census_dir / "releases").exists()
    with pytest.raises(SpecError, match="setting k=1.5"):
        privpub.explore(spec, {"k": [5, 1.5]})


def test_a_risk_limit_fails_its_settings_just_outside_and_passes_them_just_inside(census_dir):
    # [risk] max_prosecutor = 0.1: k = 10 reaches 1/10 at most (inside), k = 9 may reach 1/9
    spec = write_spec(census_dir, k=5, l=None, seed=8, extra="\n[risk]\nmax_prosecutor = 0.1\n")
    frame = privpub.explore(spec, {"k": [9, 10, 11]})
    risk = frame["prosecutor-risk-max"]
    assert risk.iloc[0] > 0.1 and risk.iloc[1] == pytest.approx(0.1) and risk.iloc[2] < 0.1
    assert frame.passed.tolist() == [False, True, True]
    assert "re-identification risk above its limit" in frame.reason.iloc[0] and frame.reason.iloc[1:].isna().all()


def test_a_failing_privacy_check_is_a_row(census_dir):
    # after a k = 5 release, k = 2 leaves people with fewer than 2 records once both releases
    # are combined: the series check refuses it; l = 99 cannot be met by the data at all
    spec = write_spec(census_dir, k=5, l=None, seed=None)
    publish(spec, {"output": {"seed": 3}})
    frame = privpub.explore(spec, {"k": [2, 5]}, seed=21)
    assert frame.passed.tolist() == [False, True] and frame.series_composition.tolist() == [False, True]
    assert frame["series-composition-k"].iloc[0] < 2 <= 5 <= frame["series-composition-k"].iloc[1]
    assert frame.reason.iloc[0].startswith("release refused, privacy check failed: series-composition-k reached")
    unmet = privpub.explore(spec, {"l": [2, 99]}, seed=21)
    assert unmet.passed.tolist()[1] is False
    assert "larger than the number of distinct sensitive values" in unmet.reason.iloc[1]


def test_the_page_holds_no_person_id_or_cell(census_dir):
    spec = write_spec(census_dir, k=5, l=None, seed=8)
    frame = privpub.explore(spec, {"k": [5, 10]}, html=census_dir / "out" / "page.html")
    page = Path(frame.attrs["page"])
    assert page == census_dir / "out" / "page.html"
    text = page.read_text()
    assert text.count("<svg") >= 1 and "k=5" in text and "k=10" in text
    rows = pd.read_csv(census_dir / "census.csv")
    for value in rows.occupation.astype(str).unique():
        assert value not in text  # no sensitive cell
    assert "pid" not in text


# --- issue 39 item 4: where the series composition check does not apply ------------------------------


def row_spec(folder: Path, **kw) -> Path:
    """The census spec with no person id: the row number stands for it (`person_id = "@row"`)."""
    spec = write_spec(folder, **kw)
    spec.write_text(spec.read_text().replace('person_id = "pid"', 'person_id = "@row"'))
    return spec


def compose_rows(state: Path) -> int:
    """Rows of the series composition summaries in the state (person keys, sets, groups)."""
    tables = state_tables(state)
    return sum(rows for name, (rows, _) in tables.items() if name.startswith("compose_"))


def test_an_row_table_in_a_series_is_refused_as_publish_refuses_it_never_failed_on_composition(census_dir):
    # before: row i of release #1 was taken for the person of row i, and every setting but the
    # published one failed series-composition-l; now the check does not apply to an "@row" table,
    # and every setting carries the refusal publish itself gives (a second "@row" release)
    spec = row_spec(census_dir, k=5, l=3, seed=4)
    state = census_dir / "privpub.duckdb"
    publish(spec)
    assert compose_rows(state) == 0  # an "@row" release stores no groups: its rows are nobody's
    with pytest.raises(PrivacyRefused) as refused:
        publish(spec, {"technique": {"k": 4}, "output": {"seed": 21}})
    before = state_tables(state)
    frame = privpub.explore(spec, {"k": [4, 5, 6, 8], "l": [2, 3]}, seed=21)
    assert state_tables(state) == before
    assert frame.passed.tolist() == [False] * 8 and frame.series_composition.isna().all()
    assert not SERIES_NAMES & set(frame.columns)  # no composition figure at all
    assert (frame.reason == str(refused.value)).all()  # publish's own words
    assert str(refused.value).startswith("person_id = \"@row\" numbers rows, not people: series 'census' already has 1")
    assert (frame.series_composition_note == f"does not apply: {ROW_WORDS}").all()
    # the figures are those of the setting published where it may be: as a new series
    alone = publish(spec, {"dataset": {"name": "census-once"}, "technique": {"k": 6, "l": 2}, "output": {"seed": 21}})
    row = frame[(frame.k == 6) & (frame.l == 2)].iloc[0]
    stored = stored_figures(state, alone)
    assert not SERIES_NAMES & set(stored.name)
    for r in stored.itertuples():
        assert same_figure(row[r.name], r.value, r.text_value), (r.name, row[r.name], r.text_value)
    page = Path(frame.attrs["page"]).read_text()
    assert page.count("does not apply</td>") == 8 and page.count("numbers rows, not people: row i") == 1


def test_the_first_release_of_an_row_table_explores_without_a_composition_figure(census_dir, tmp_path):
    spec = row_spec(census_dir, k=5, l=None, seed=8)
    res = explore_cli(census_dir, tmp_path, spec, "--set", "k=5,10", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["passed"] for r in rows] == [True, True] and all(r["reason"] is None for r in rows)
    assert all(r["series_composition"] is None for r in rows)
    assert all(r["series_composition_note"] == f"does not apply: {ROW_WORDS}" for r in rows)
    res = explore_cli(census_dir, tmp_path, spec, "--set", "k=5,10")
    lines = res.stdout.splitlines()
    assert [line.split()[1] for line in lines[1:3]] == ["PASS", "PASS"]
    assert lines[3] == f"every setting: series composition does not apply: {ROW_WORDS}"
    # a spec with a person id: the first release has nothing to combine with, and says so
    plain = privpub.explore(write_spec(census_dir, k=5, l=None, seed=8), {"k": [5]})
    assert plain.series_composition_note.tolist() == [
        "does not apply: no earlier release of series 'census' to combine with"
    ]


def test_a_series_whose_earlier_release_took_row_numbers_starts_its_check_with_the_next_release(census_dir):
    # release #1 numbered its rows; the table with its person id, in another row order (so row i
    # is not person i), cannot be combined with it: composition does not apply to #2, not a failure;
    # #3 is combined with #2
    spec_row = row_spec(census_dir, k=5, l=None, seed=4)
    publish(spec_row)
    rows = pd.read_csv(census_dir / "census.csv")
    rows.sample(frac=1, random_state=1).to_csv(census_dir / "census.csv", index=False)
    spec = write_spec(census_dir, k=5, l=None, seed=4)
    frame = privpub.explore(spec, {"k": [2, 5, 10]}, seed=21)
    assert frame.passed.tolist() == [True] * 3 and frame.series_composition.isna().all()
    why = (
        "does not apply: the 1 earlier releases of series 'census' have no stored groups (1 took person_id = "
        '"@row": their rows cannot be linked to people); the check starts with this release'
    )
    assert (frame.series_composition_note == why).all() and not SERIES_NAMES & set(frame.columns)
    second = publish(spec, {"output": {"seed": 21}})
    assert not SERIES_NAMES & set(stored_figures(census_dir / "privpub.duckdb", second).name)
    after = privpub.explore(spec, {"k": [2, 5]}, seed=22)  # now there is a release to combine with
    assert after.series_composition.tolist() == [False, True] and after.series_composition_note.isna().all()
    assert after["series-composition-k"].iloc[0] < 2 <= 5 <= after["series-composition-k"].iloc[1]

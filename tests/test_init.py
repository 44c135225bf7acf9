"""`privpub init` / `privpub.init` (issue 29 item 3): a spec proposed from the table itself, which
`privpub publish` accepts without edits, on the benchmark tables (CSV, Parquet, DuckDB) and on
messy data (dates, codes, free text, empty cells, no person id)."""

from __future__ import annotations

import tomllib

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import privpub
from privpub.schemas.errors import InputError, SpecError
from privpub.tasks.demo_data import census
from tests.benchmarks.bench_e2e import census_shaped
from tests.benchmarks.bench_muco import census_income
from tests.benchmarks.bench_suppress import cps
from tests.test_drivers import _without_a_server

TABLES = {
    "census": (lambda: census(2000, seed=4), "occupation"),
    "census-shaped": (lambda: census_shaped(2000), "occupation"),
    "census-income": (lambda: census_income(2000), "income"),
    "cps-like": (lambda: cps(2000, seed=2), "hourly_wage"),
}


def qi_by_name(spec_path) -> dict[str, dict]:
    return {q["name"]: q for q in tomllib.loads(spec_path.read_text())["dataset"]["qi"]}


def k_reached(release, spec_path) -> int:
    """The smallest equivalence class of the published table, counted from the definition."""
    table = release.tables["table"]
    columns = [c for q in qi_by_name(spec_path) for c in (f"{q}_lo", f"{q}_hi", q) if c in table.columns]
    keys = table[columns].map(lambda v: tuple(v) if isinstance(v, (list, np.ndarray)) else v)
    return int(keys.value_counts().min())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("name", list(TABLES))
def test_init_then_publish_with_no_edits_on_the_benchmark_tables(tmp_path, monkeypatch, name, fmt):
    monkeypatch.chdir(tmp_path)
    make, sensitive = TABLES[name]
    frame = make()
    path = tmp_path / f"{name}.{fmt}"
    frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path)
    spec = privpub.init(path, person_id="pid", sensitive=sensitive, output=tmp_path / "spec.toml")
    release = privpub.publish(spec)
    assert release.figures.set_index("name").loc["k-anonymity", "value"] >= 10
    assert k_reached(release, spec) >= 10 and len(release.tables["table"]) == len(frame)
    assert "pid" not in qi_by_name(spec) and sensitive not in qi_by_name(spec)


def test_what_init_proposes_for_the_census_columns(tmp_path):
    census(2000, seed=4).to_csv(tmp_path / "census.csv", index=False)
    spec = privpub.init(tmp_path / "census.csv", person_id="pid", sensitive="occupation", output=tmp_path / "s.toml")
    qi = qi_by_name(spec)
    assert qi["age"] == {"name": "age", "kind": "numeric"}
    assert qi["sex"] == {"name": "sex", "kind": "categorical"}
    text = spec.read_text()
    assert "# quasi-identifier: numbers with 7" in text and 'person_id = "pid"' in text and "k = 10" in text
    assert "missing" not in text  # no empty cell: refuse, the default


def messy(n: int = 2000, seed: int = 3) -> pd.DataFrame:
    """No person id; a birth date over decades, postcodes with a leading zero, a known scale, a
    small integer score, free text, a constant column, and 5% of the rows with an empty cell."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "born": (pd.Timestamp("1940-01-01") + pd.to_timedelta(rng.integers(0, 25_000, n), unit="D")).strftime(
                "%Y-%m-%d"
            ),
            "postcode": np.array([f"0{i:04d}" for i in range(1000, 1060)], dtype=object)[rng.integers(0, 60, n)],
            "pain": np.array(["low", "medium", "high"], dtype=object)[rng.integers(0, 3, n)],
            "score": rng.integers(1, 6, n),
            "notes": [f"seen on visit {i} with some words about it" for i in rng.integers(0, 10**6, n)],
            "country": "nl",
            "diagnosis": np.array([f"d{i}" for i in range(12)], dtype=object)[rng.integers(0, 12, n)],
        }
    )
    rows = rng.choice(n, n // 20, replace=False)
    frame = frame.astype({"score": "Int64"})
    for i, column in enumerate(["born", "postcode", "pain", "score", "diagnosis"]):
        frame.loc[rows[i::5], column] = None
    return frame


@pytest.mark.parametrize("fmt", ["csv", "parquet", "duckdb"])
def test_init_proposes_dates_masks_scales_and_drop_for_messy_data_without_a_person_id(tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    frame = messy()
    if fmt == "duckdb":
        with duckdb.connect(str(tmp_path / "data.duckdb")) as con:
            con.register("frame", frame)
            con.execute("CREATE TABLE visits AS SELECT * FROM frame")
        data = "data.duckdb:visits"
    else:
        data = f"visits.{fmt}"
        frame.to_csv(data, index=False) if fmt == "csv" else frame.to_parquet(data)
    spec = privpub.init(data, sensitive="diagnosis")
    assert spec.name == "spec.toml"
    qi = qi_by_name(spec)
    assert qi["born"] == {"name": "born", "kind": "date", "hierarchy": "month"}
    assert qi["postcode"] == {"name": "postcode", "kind": "categorical", "hierarchy": "mask"}
    assert qi["pain"] == {"name": "pain", "kind": "ordinal", "order": ["low", "medium", "high"]}
    assert qi["score"] == {"name": "score", "kind": "ordinal", "order": [1, 2, 3, 4, 5]}
    assert set(qi) == {"born", "postcode", "pain", "score"}  # not the free text, not the constant
    text = spec.read_text()
    assert "# 'notes': not a QI: free text" in text and "# 'country': not a QI: one value in every row" in text
    dataset = tomllib.loads(text)["dataset"]
    assert dataset["person_id"] == "@row" and dataset["missing"] == "drop"
    release = privpub.publish(spec)
    assert release.figures.set_index("name").value["dropped_rows"] == 100
    assert len(release.tables["table"]) == 1900 and k_reached(release, spec) >= 10
    assert "@row" not in release.tables["table"].columns
    assert "Person id: row number (@row)" in release.report.read_text()


def test_a_table_without_person_ids_is_published_once_not_as_a_series(tmp_path, monkeypatch):
    """Row i of two releases is not one person: a second release of an "@row" series is refused
    (with one line and an audit row) instead of a series check that could not see the people."""
    from privpub.schemas.errors import PrivacyRefused

    monkeypatch.chdir(tmp_path)
    messy().to_csv("visits.csv", index=False)
    spec = privpub.init("visits.csv", sensitive="diagnosis")
    privpub.publish(spec)
    with pytest.raises(PrivacyRefused, match=r'^person_id = "@row" numbers rows, not people: series .* already has 1'):
        privpub.publish(spec, allow_repeat=True)
    state = tmp_path / tomllib.loads(spec.read_text())["output"]["state"]
    log = privpub.Store(state).audit_log()
    assert log.outcome.tolist()[-1] == "refused" and len(privpub.history(state)) == 1


def test_the_cli_writes_the_spec_publish_accepts_and_prints_counts_never_values(tmp_path):
    frame = cps(2000, seed=2)
    frame.to_csv(tmp_path / "cps.csv", index=False)
    res = _without_a_server(
        tmp_path, tmp_path, "-m", "privpub.flows.cli", "init", "cps.csv", "--sensitive", "hourly_wage"
    )
    assert res.returncode == 0, res.stderr
    assert "person id: row number (@row)" in res.stdout and "wrote spec.toml" in res.stdout
    assert "  pid: not a QI: numbers unique per row (identifier-like)" in res.stdout
    printed = res.stdout.lower()
    for column in ("sex", "race", "education", "marital", "occupation"):
        assert not any(str(v).lower() in printed for v in frame[column].unique() if len(str(v)) > 3), column
    assert not any(f"{v:.2f}" in printed for v in frame.hourly_wage.head(200))
    res = _without_a_server(tmp_path, tmp_path, "-m", "privpub.flows.cli", "publish", "spec.toml")
    assert res.returncode == 0, res.stderr
    assert "person id: row number (@row): every row is taken as a different person" in res.stdout
    release = next((tmp_path / "releases").glob("cps-0001-*"))
    assert pq.read_table(release / "table.parquet").num_rows == 2000
    again = _without_a_server(tmp_path, tmp_path, "-m", "privpub.flows.cli", "init", "cps.csv", "--sensitive", "race")
    assert again.returncode == 1
    assert again.stderr.strip() == "privpub: error: spec.toml exists; choose another -o or pass --force to overwrite it"
    forced = _without_a_server(
        tmp_path, tmp_path, "-m", "privpub.flows.cli", "init", "cps.csv", "--sensitive", "race", "--force"
    )
    assert forced.returncode == 0 and 'sensitive = "race"' in (tmp_path / "spec.toml").read_text()


def test_init_refuses_what_cannot_become_a_spec_with_one_line(tmp_path):
    frame = census(200, seed=1)
    frame.to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(InputError, match=r"^--sensitive 'occupaton': no such column; the table has pid, age"):
        privpub.init(tmp_path / "c.csv", sensitive="occupaton", output=tmp_path / "s.toml")
    # issue 39: a --person-id that repeats is never refused (nor "@row" advised): several rows per person
    many = privpub.init(tmp_path / "c.csv", person_id="sex", sensitive="occupation", output=tmp_path / "m.toml")
    assert tomllib.loads(many.read_text())["dataset"]["rows_per_person"] == "many" and "@row" not in many.read_text()
    with pytest.raises(InputError, match=r"^--person-id and --sensitive must be different columns$"):
        privpub.init(tmp_path / "c.csv", person_id="pid", sensitive="pid", output=tmp_path / "s.toml")
    with pytest.raises(InputError, match=r"^input file not found"):
        privpub.init(tmp_path / "none.csv", sensitive="occupation", output=tmp_path / "s.toml")
    (tmp_path / "s.toml").write_text("keep me")
    with pytest.raises(SpecError, match=r"s.toml exists; choose another -o or pass --force"):
        privpub.init(tmp_path / "c.csv", sensitive="occupation", output=tmp_path / "s.toml")
    assert (tmp_path / "s.toml").read_text() == "keep me"
    assert not list(tmp_path.glob(".*.tmp"))

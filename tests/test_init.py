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
    assert release.figures.set_index("name").value["dropped-rows"] == 100
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
    with pytest.raises(InputError, match=r"^sensitive='occupaton': no such column; the table has pid, age"):
        privpub.init(tmp_path / "c.csv", sensitive="occupaton", output=tmp_path / "s.toml")
    # issue 39: a --person-id that repeats is never refused (nor "@row" advised): several rows per person
    many = privpub.init(tmp_path / "c.csv", person_id="sex", sensitive="occupation", output=tmp_path / "m.toml")
    assert tomllib.loads(many.read_text())["dataset"]["rows_per_person"] == "many" and "@row" not in many.read_text()
    with pytest.raises(InputError, match=r"^person_id and sensitive must be different columns$"):
        privpub.init(tmp_path / "c.csv", person_id="pid", sensitive="pid", output=tmp_path / "s.toml")
    with pytest.raises(InputError, match=r"^input file not found"):
        privpub.init(tmp_path / "none.csv", sensitive="occupation", output=tmp_path / "s.toml")
    (tmp_path / "s.toml").write_text("keep me")
    with pytest.raises(SpecError, match=r"s.toml exists; choose another output= or pass force=True"):
        privpub.init(tmp_path / "c.csv", sensitive="occupation", output=tmp_path / "s.toml")
    assert (tmp_path / "s.toml").read_text() == "keep me"
    assert not list(tmp_path.glob(".*.tmp"))


# --- issue 39 item 2: direct identifiers are never proposed ------------------------------------

SYLLABLES = np.array(["ka", "ro", "mi", "ve", "lu", "ta", "zo", "ne", "ri", "sa", "po", "de", "fi", "gu", "ha", "jo"])
IDENTIFIERS = ["patient_id", "first_name", "last_name", "email", "phone", "notes"]


def invented_names(rng: np.random.Generator, count: int, syllables: int) -> np.ndarray:
    """`count` distinct capitalised names made of syllables (words no report or table holds)."""
    drawn = np.unique(["".join(p) for p in rng.choice(SYLLABLES, (count * 4, syllables))])
    return np.array([w.capitalize() + "x" for w in rng.permutation(drawn)[:count]], dtype=object)


def hospital(people: int = 1500, seed: int = 0, several: bool = True) -> pd.DataFrame:
    """Covid tests as issue 39 describes them: a patient id repeating for patients with several
    tests, first and last names, an email address, a phone number and free-text notes per patient
    (direct identifiers), age and gender (3% of the rows without one), the test's date and clinic,
    and the result (the sensitive column, 8% positive)."""
    rng = np.random.default_rng(seed)
    tests = rng.choice([1, 2, 3, 4], people, p=[0.5, 0.25, 0.15, 0.1]) if several else np.ones(people, dtype=int)
    who = np.repeat(np.arange(people), tests)
    n = len(who)
    first = invented_names(rng, 300, 3)[rng.integers(0, 300, people)]
    last = invented_names(rng, 600, 4)[rng.integers(0, 600, people)]
    email = (
        pd.Series(first).str.lower() + "." + pd.Series(last).str.lower() + np.arange(people).astype(str) + "@mail.test"
    )
    frame = pd.DataFrame(
        {
            "patient_id": np.char.add("P", np.char.zfill(np.arange(people).astype(str), 6))[who],
            "first_name": first[who],
            "last_name": last[who],
            "email": email.to_numpy()[who],
            "phone": np.char.add("+31 6 ", rng.integers(10**7, 10**8, people).astype(str))[who],
            "notes": np.char.add("called back about the swab, ticket ", rng.integers(0, 10**6, n).astype(str)),
            "age": rng.integers(18, 95, people)[who],
            "gender": np.array(["female", "male"], dtype=object)[rng.integers(0, 2, people)][who],
            "test_date": (pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 366, n), unit="D")).strftime(
                "%Y-%m-%d"
            ),
            "clinic": np.array(["north", "south", "east", "west", "central"], dtype=object)[rng.integers(0, 5, n)],
            "result": np.where(rng.random(n) < 0.08, "positive", "negative").astype(object),
        }
    )
    frame.loc[rng.random(n) < 0.03, "gender"] = None
    return frame


def identifier_values(frame: pd.DataFrame) -> set[str]:
    return {str(v) for c in IDENTIFIERS for v in frame[c].dropna().unique()}


def leaked(text: str, values: set[str]) -> set[str]:
    """The identifier values found in `text` as whole words (a brute-force scan)."""
    import re

    words = set(re.findall(r"[\w.+@-]+", text))
    return {v for v in values if v in words or (" " in v and v in text)}


@pytest.mark.parametrize("given", [True, False], ids=["--person-id", "found"])
def test_init_on_a_hospital_table_proposes_no_identifier_and_many_rows_per_person(tmp_path, given):
    """Names, ids, emails, phones, addresses and notes are left out of the proposed QIs.

    Promise: identifiers-never-proposed."""
    frame = hospital()
    frame.to_parquet(tmp_path / "covid.parquet")
    report: list[str] = []
    spec = privpub.init(
        tmp_path / "covid.parquet",
        sensitive="result",
        person_id="patient_id" if given else None,
        output=tmp_path / "spec.toml",
        report=report,
    )
    text = spec.read_text()
    dataset = tomllib.loads(text)["dataset"]
    assert set(qi_by_name(spec)) == {"age", "gender", "test_date", "clinic"}
    assert dataset["person_id"] == "patient_id" and dataset["rows_per_person"] == "many"
    assert dataset["missing"] == "category"  # only gender, a categorical QI, has empty cells
    empty = int(frame.gender.isna().sum())
    assert f'{empty:,} rows ({empty / len(frame):.1%}) have one; "drop" would leave them out' in text
    for column in IDENTIFIERS[1:]:
        assert f"# '{column}': not a QI: " in text and f"  {column}: not a QI: " in "\n".join(report)
    people = frame.patient_id.nunique()
    assert f'rows_per_person = "many": {people:,} people in {len(frame):,} rows' in report
    assert "@row" not in text and not leaked(text + "\n".join(report), identifier_values(frame))


def test_init_finds_the_identifiers_by_their_values_when_the_names_say_nothing(tmp_path):
    """Identifiers are found by their values when their names say nothing.

    Promise: identifiers-never-proposed."""
    frame = hospital(seed=1)
    frame.columns = [f"c{i}" for i in range(frame.shape[1])]  # c0 patient id ... c10 result
    frame.to_csv(tmp_path / "anon.csv", index=False)
    report: list[str] = []
    spec = privpub.init(tmp_path / "anon.csv", sensitive="c10", output=tmp_path / "spec.toml", report=report)
    assert set(qi_by_name(spec)) == {"c6", "c7", "c8", "c9"}  # age, gender, test date, clinic
    why = {line.split(":")[0].strip(): line for line in report if line.startswith("  c")}
    assert "near-unique per person" in why["c0"]  # the id: 1,500 values in 2,8xx rows
    assert "look like people's names" in why["c1"] and "look like people's names" in why["c2"]
    assert "look like an email address" in why["c3"] and "look like a phone number" in why["c4"]
    assert "free text" in why["c5"]


@pytest.mark.parametrize("several", [False, True], ids=["one-row-per-person", "many-rows-per-person"])
def test_init_then_publish_with_no_edits_on_a_hospital_table_publishes_no_identifier(tmp_path, monkeypatch, several):
    monkeypatch.chdir(tmp_path)
    frame = hospital(people=1200, seed=2, several=several)
    frame.to_csv("covid.csv", index=False)
    person_id = "patient_id" if several else None  # one test each: the row number stands for the patient
    spec = privpub.init("covid.csv", sensitive="result", person_id=person_id)
    qi = qi_by_name(spec)
    assert 0 < len(qi) <= 6 and not set(qi) & set(IDENTIFIERS)
    if several:
        assert 'rows_per_person = "many"' in spec.read_text()
    release = privpub.publish(spec)
    published = release.tables["table"]
    dropped = release.figures.set_index("name").value.get("dropped-rows", 0)
    assert dropped <= 0.05 * len(frame) and len(published) == len(frame) - dropped
    assert k_reached(release, spec) >= 10
    values = identifier_values(frame)
    files = [p for p in release.folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and any(p.suffix == ".html" for p in files)
    for path in files:
        if path.suffix == ".parquet":
            table = pq.read_table(path).to_pandas()
            cells = {str(v) for c in table.columns for v in table[c].explode().dropna().unique()}
            assert not set(table.columns) & set(IDENTIFIERS) and not cells & values, path.name
        else:
            assert not leaked(path.read_text(encoding="utf-8", errors="replace"), values), path.name


def test_at_most_six_qis_are_proposed_known_kinds_first_and_max_qi_changes_it(tmp_path):
    rng = np.random.default_rng(5)
    n = 600
    frame = pd.DataFrame(
        {
            "pid": np.arange(n),
            "weight": rng.integers(50, 60, n),  # a name that says nothing: proposed after the known kinds
            **{c: rng.integers(0, 3, n) for c in ["age", "sex", "region", "visit_year", "clinic", "education"]},
            "country": np.array(["a", "b", "c"], dtype=object)[rng.integers(0, 3, n)],
            "diagnosis": np.array(["x", "y"], dtype=object)[rng.integers(0, 2, n)],
            "income": rng.integers(0, 5, n),  # a sensitive candidate, never a QI
        }
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    spec = privpub.init(tmp_path / "t.csv", sensitive="diagnosis", person_id="pid", output=tmp_path / "six.toml")
    assert list(qi_by_name(spec)) == ["age", "sex", "region", "visit_year", "clinic", "education"]
    text = spec.read_text()
    assert "# 'country': not proposed: quasi-identifier: categories with 3 values (geographic" in text
    assert "beyond the 6 proposed" in text and "# 'income': not a QI: a sensitive candidate" in text
    three = privpub.init(
        tmp_path / "t.csv", sensitive="diagnosis", person_id="pid", output=tmp_path / "3.toml", max_qi=3
    )
    assert list(qi_by_name(three)) == ["age", "sex", "region"]
    with pytest.raises(SpecError, match=r"^max_qi=0: must be a whole number of at least 1$"):
        privpub.init(tmp_path / "t.csv", sensitive="diagnosis", output=tmp_path / "0.toml", max_qi=0)


def test_missing_drops_at_most_5_percent_just_inside_and_outside(tmp_path):
    """A numeric QI empty in 5% of the rows: "drop" (30 of 600); in 31 rows: left out, not dropped."""
    rng = np.random.default_rng(6)
    n = 600
    base = pd.DataFrame(
        {
            "pid": np.arange(n),
            "age": pd.array(rng.integers(20, 80, n), dtype="Int64"),
            "sex": np.array(["f", "m"], dtype=object)[rng.integers(0, 2, n)],
            "diagnosis": np.array(["x", "y", "z"], dtype=object)[rng.integers(0, 3, n)],
        }
    )
    for empty, expect in [(30, "drop"), (31, None)]:
        frame = base.copy()
        frame.loc[: empty - 1, "age"] = pd.NA
        frame.to_csv(tmp_path / "t.csv", index=False)
        out = tmp_path / f"{empty}.toml"
        privpub.init(tmp_path / "t.csv", sensitive="diagnosis", person_id="pid", output=out)
        dataset = tomllib.loads(out.read_text())["dataset"]
        assert dataset.get("missing") == expect
        if expect:
            assert "age" in qi_by_name(out) and "# 30 rows (5.0%) with an empty cell are left out" in out.read_text()
        else:
            assert "age" not in qi_by_name(out)
            assert (
                "# 'age': not proposed: empty in 31 rows (5.2%); with it, more than 5% of the rows" in out.read_text()
            )
    frame = base.copy()
    frame.loc[:40, "diagnosis"] = None  # the sensitive column: it cannot be left out
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(InputError, match=r"^41 rows \(6.8%\) have an empty person id or sensitive cell: more than 5%"):
        privpub.init(tmp_path / "t.csv", sensitive="diagnosis", person_id="pid", output=tmp_path / "s.toml")


@pytest.mark.parametrize("distinct, proposed", [(200, True), (201, False)])
def test_init_leaves_out_a_near_unique_column_as_publish_would_refuse_it(tmp_path, distinct, proposed):
    """400 people: a code with 200 values is a QI, with 201 a direct identifier (publish's threshold)."""
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "pid": np.arange(400),
            "region": np.array([f"r{i % distinct:04d}" for i in rng.permutation(400)], dtype=object),
            "sex": np.array(["f", "m"], dtype=object)[rng.integers(0, 2, 400)],
            "diagnosis": np.array(["x", "y", "z"], dtype=object)[rng.integers(0, 3, 400)],
        }
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    spec = privpub.init(tmp_path / "t.csv", sensitive="diagnosis", person_id="pid", output=tmp_path / "s.toml")
    assert ("region" in qi_by_name(spec)) is proposed
    if not proposed:
        assert "# 'region': not a QI: 201 distinct values for 400 people: near-unique per person" in spec.read_text()
    release = privpub.publish(spec)  # accepted either way: init never proposes what publish refuses
    assert len(release.tables["table"]) == 400


def test_the_cli_finds_the_person_id_and_takes_max_qi(tmp_path):
    hospital(people=300, seed=3).to_csv(tmp_path / "covid.csv", index=False)
    res = _without_a_server(
        tmp_path, tmp_path, "-m", "privpub.flows.cli", "init", "covid.csv", "--sensitive", "result", "--max-qi", "2"
    )
    assert res.returncode == 0, res.stderr
    assert "person id: 'patient_id' (found: an id that repeats)" in res.stdout
    spec = tomllib.loads((tmp_path / "spec.toml").read_text())["dataset"]
    assert spec["rows_per_person"] == "many" and [q["name"] for q in spec["qi"]] == ["age", "gender"]


def test_a_sensitive_column_that_looks_like_a_direct_identifier_is_refused(tmp_path):
    """The sensitive column is published as it is: an email address (by its values, under a name
    that says nothing) or people's names there are refused before any spec is written."""
    frame = hospital(people=200, seed=4).rename(columns={"email": "contact"})
    frame.to_csv(tmp_path / "covid.csv", index=False)
    for given, why in [("contact", r"the values look like an email address"), ("first_name", r"its name says")]:
        with pytest.raises(InputError, match=rf"^sensitive='{given}' looks like a direct identifier \({why}"):
            privpub.init(tmp_path / "covid.csv", sensitive=given, output=tmp_path / "s.toml")
    frame.rename(columns={"first_name": "who"}).to_csv(tmp_path / "covid.csv", index=False)
    with pytest.raises(InputError, match=r"^sensitive='who' looks like a direct identifier \(\d+ values that look"):
        privpub.init(tmp_path / "covid.csv", sensitive="who", output=tmp_path / "s.toml")
    assert not (tmp_path / "s.toml").exists()


@pytest.mark.parametrize("people, found", [(30, True), (29, False)])
def test_a_repeating_id_is_the_person_id_with_at_most_20_rows_per_person(tmp_path, people, found):
    """600 rows: 30 ids are 20 rows each (a person id), 29 are more (a clinic's id repeats so)."""
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(
        {
            "subject_id": np.array([f"s{i:03d}" for i in range(people)], dtype=object)[np.arange(600) % people],
            "age": rng.integers(20, 80, 600),
            "diagnosis": np.array(["x", "y", "z"], dtype=object)[rng.integers(0, 3, 600)],
        }
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    report: list[str] = []
    spec = privpub.init(tmp_path / "t.csv", sensitive="diagnosis", output=tmp_path / "s.toml", report=report)
    dataset = tomllib.loads(spec.read_text())["dataset"]
    if found:
        assert dataset["person_id"] == "subject_id" and dataset["rows_per_person"] == "many"
        assert "person id: 'subject_id' (found: an id that repeats)" in report
        assert "# found: an id that repeats (30 people in 600 rows)" in spec.read_text()
    else:
        assert dataset["person_id"] == "@row" and "rows_per_person" not in dataset
        assert "# 'subject_id': not a QI: a direct identifier (its name says it is an id)" in spec.read_text()


@pytest.mark.parametrize("distinct, names", [(29, False), (30, True)])
def test_capitalised_words_are_people_s_names_from_30_values(tmp_path, distinct, names):
    rng = np.random.default_rng(9)
    words = invented_names(rng, distinct, 3)
    frame = pd.DataFrame(
        {
            "who": words[np.arange(900) % distinct],
            "age": rng.integers(20, 80, 900),
            "diagnosis": np.array(["x", "y", "z"], dtype=object)[rng.integers(0, 3, 900)],
        }
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    spec = privpub.init(tmp_path / "t.csv", sensitive="diagnosis", output=tmp_path / "s.toml")
    assert ("who" in qi_by_name(spec)) is not names
    if names:
        assert "# 'who': not a QI: 30 values that look like people's names" in spec.read_text()


def test_init_guards_the_sensitive_column_with_distinct_l_when_it_can(tmp_path, monkeypatch):
    """Without a model on the sensitive column the report says nothing guards it: init proposes
    l = 2 when the column holds two values or more, and the release published with no edits
    passes every check with l-diversity named as the guard; a column of one value gets no l."""
    monkeypatch.chdir(tmp_path)
    hospital(people=1200, seed=3, several=True).to_csv("covid.csv", index=False)
    spec = privpub.init("covid.csv", sensitive="result")
    assert tomllib.loads(spec.read_text())["technique"] == {"name": "generalization", "k": 10, "l": 2}
    release = privpub.publish(spec)
    figures = release.figures.set_index("name").value
    assert figures["l-diversity"] >= 2 and figures["k-anonymity"] >= 10
    page = release.report.read_text()
    assert "is bounded by l-diversity" in page and "Every privacy check passed" in page
    single = hospital(people=300, seed=4, several=False).assign(result="negative")
    single.to_csv("one_value.csv", index=False)
    spec = privpub.init("one_value.csv", sensitive="result", output="one.toml")
    assert "l" not in tomllib.loads(spec.read_text())["technique"]

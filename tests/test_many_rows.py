"""Several rows per person (`[dataset] rows_per_person = "many"`, issue 39 item 1) under
generalization: every person's rows in one group, k counts distinct people, the sensitive-value
models and the risk figures count people (docs/models.md, "Several rows per person").

The figures are recounted here from their definitions with plain Python (dicts and sets over the
input rows, or over the published rows joined with the release's private people table), sharing
no code with the verifier, on a covid-like table of tests (patients with 1-6 tests each) and a
person-years panel."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import privpub
from privpub.schemas.errors import InputError, PartitionError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.sensitive_models import ModelChoice
from privpub.tasks.core.types import Release
from privpub.tasks.partition.generalized_table import generalized_table
from privpub.tasks.risk import input_risk, table_risk
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.verify.k_anonymity import k_and_l
from privpub.tasks.verify.published import people_table, qi_columns
from privpub.tasks.verify.sensitive import sensitive_results
from tests.helpers import child_pythonpath

ROOT = Path(__file__).resolve().parents[1]
CLINICS = [f"clinic-{c}" for c in "ABCDEF"]


def covid(patients: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Tests of patients: 1-6 tests each, a patient's age, gender and usual clinic fixed (a test
    now and then at another clinic), test days over 2021, about 6% of the tests positive; rows
    shuffled. Planted ids and names, which no published file may hold."""
    rng = np.random.default_rng(seed)
    tests = rng.integers(1, 7, patients)
    who = np.repeat(np.arange(patients), tests)
    clinic = np.asarray(CLINICS)[rng.integers(0, 6, patients)][who]
    elsewhere = rng.random(len(who)) < 0.15
    clinic[elsewhere] = np.asarray(CLINICS)[rng.integers(0, 6, int(elsewhere.sum()))]
    frame = pd.DataFrame(
        {
            "subject_id": np.asarray([f"SUBJ-{seed}-{p:06d}" for p in range(patients)])[who],
            "last_name": np.asarray([f"PLANTEDNAME{p:06d}" for p in range(patients)])[who],
            "age": np.clip(rng.gamma(5.0, 9.0, patients) + 1, 0, 99).astype(np.int64)[who],
            "gender": rng.choice(["F", "M"], patients)[who],
            "test_day": pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 365, len(who)), "D"),
            "clinic": clinic,
            "result": np.where(rng.random(len(who)) < 0.06, "positive", "negative"),
        }
    )
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


COVID_QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "gender", "kind": "categorical"},
    # a test day per row: over half as many days as patients in the small tables below, which the
    # near-unique check refuses; Mondrian publishes it as ranges, on purpose
    {"name": "test_day", "kind": "date", "near_unique": "allow"},
    {"name": "clinic", "kind": "categorical"},
]


def covid_spec(k: int = 10, l: int | None = 2, **technique) -> dict:
    return {
        "dataset": {
            "name": "covid",
            "person_id": "subject_id",
            "rows_per_person": "many",
            "sensitive": "result",
            "qi": COVID_QI,
        },
        "technique": {"name": "generalization", "k": k, **({"l": l} if l else {}), **technique},
        "output": {"seed": 3},
    }


def panel(people: int = 300, years: int = 5, seed: int = 0) -> pd.DataFrame:
    """Person-years of a panel: every person once a year, their age increasing with the year,
    sex and region fixed, an income band that moves between years."""
    rng = np.random.default_rng(seed)
    who = np.repeat(np.arange(people), years)
    year = np.tile(np.arange(2015, 2015 + years), people)
    born = rng.integers(1940, 2000, people)
    band = np.clip(rng.integers(0, 5, people)[who] + rng.integers(-1, 2, len(who)), 0, 4)
    return pd.DataFrame(
        {
            "pid": np.asarray([f"PANEL-{p:05d}" for p in range(people)])[who],
            "year": year,
            "age": year - born[who],
            "sex": rng.choice(["F", "M"], people)[who],
            "region": rng.choice(["north", "south", "east", "west"], people)[who],
            "income": np.asarray(["b0", "b1", "b2", "b3", "b4"])[band],
        }
    )


PANEL_QI = [
    {"name": "year", "kind": "numeric"},
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "region", "kind": "categorical"},
]


def panel_spec(k: int = 5, **technique) -> dict:
    return {
        "dataset": {
            "name": "panel",
            "person_id": "pid",
            "rows_per_person": "many",
            "sensitive": "income",
            "qi": PANEL_QI,
        },
        "technique": {"name": "generalization", "k": k, **technique},
        "output": {"seed": 5},
    }


# --- independent recounts ---------------------------------------------------------------------


def published_classes(table: pd.DataFrame, sensitive: str) -> dict[tuple, list[int]]:
    """Published row positions per class: rows whose published QI cells are all equal."""
    classes: dict[tuple, list[int]] = defaultdict(list)
    cells = table.drop(columns=[sensitive])
    for i, row in enumerate(cells.itertuples(index=False)):
        classes[tuple(tuple(v) if isinstance(v, (list, np.ndarray)) else v for v in row)].append(i)
    return classes


def people_inside(frame: pd.DataFrame, person: str, qi: list[dict], cells: dict) -> int:
    """Distinct input people with at least one row inside a class's published cells."""
    inside = np.ones(len(frame), dtype=bool)
    for q in qi:
        name = q["name"]
        if q["kind"] in ("numeric", "date"):
            lo, hi = cells[f"{name}_lo"], cells[f"{name}_hi"]
            values = frame[name] if q["kind"] == "numeric" else frame[name].dt.date
            inside &= ((values >= lo) & (values <= hi)).to_numpy()
        else:
            inside &= frame[name].astype(str).isin(list(cells[name])).to_numpy()
    return frame.loc[inside, person].nunique()


def recount_from_input(frame: pd.DataFrame, table: pd.DataFrame, person: str, qi: list[dict], sensitive: str):
    """Per published class: (rows, distinct input people with a row inside its cells)."""
    out = []
    columns = [c for c in table.columns if c != sensitive]
    for rows in published_classes(table, sensitive).values():
        cells = dict(zip(columns, table.iloc[rows[0]][columns]))
        out.append((len(rows), people_inside(frame, person, qi, cells)))
    return out


def brute_figures(table: pd.DataFrame, people: list[int], sensitive: str) -> dict:
    """From the published rows joined with their people: fewest people per class, fewest
    distinct values, lowest exp(entropy) and largest equal-distance EMD over the classes'
    distinct (person, value) pairs, and whether a person has rows in two classes."""
    classes = published_classes(table, sensitive)
    values = table[sensitive].tolist()
    votes = {key: {(people[i], values[i]) for i in rows} for key, rows in classes.items()}
    overall = Counter(v for pairs in votes.values() for _, v in pairs)
    total = sum(overall.values())
    exp_h, emd = [], []
    for pairs in votes.values():
        count = Counter(v for _, v in pairs)
        n = sum(count.values())
        exp_h.append(math.exp(-sum(c / n * math.log(c / n) for c in count.values())))
        emd.append(0.5 * sum(abs(count.get(v, 0) / n - overall[v] / total) for v in overall))
    class_of: dict[int, set] = defaultdict(set)
    for key, rows in classes.items():
        for i in rows:
            class_of[people[i]].add(key)
    return {
        "classes": len(classes),
        "k": min(len({p for p, _ in pairs}) for pairs in votes.values()),
        "l": min(len({v for _, v in pairs}) for pairs in votes.values()),
        "entropy": min(exp_h),
        "t": max(emd),
        "spread": sum(len(c) > 1 for c in class_of.values()),
        "people": len(class_of),
    }


def brute_risk(keys: list[tuple], people: list, values: list, threshold: float = 0.2) -> dict:
    """The risk figures over people, from their definitions: a class (equal keys) of f distinct
    people has prosecutor risk 1 / f; a person's risk is their riskiest class's."""
    members: dict[tuple, set] = defaultdict(set)
    holders: dict[tuple, dict] = defaultdict(lambda: defaultdict(set))
    for key, p, v in zip(keys, people, values):
        members[key].add(p)
        holders[key][v].add(p)
    risk: dict = {}
    for group in members.values():
        for p in group:
            risk[p] = max(risk.get(p, 0.0), 1 / len(group))
    r = list(risk.values())
    return {
        "prosecutor-risk-max": max(r),
        "prosecutor-risk-avg": sum(r) / len(r),
        "records-at-risk": sum(x > threshold for x in r) / len(r),
        "sample-uniques": sum(x == 1 for x in r) / len(r),
        "attribute-risk-max": max(max(len(h) for h in holders[key].values()) / len(g) for key, g in members.items()),
    }


def private_people(state: Path, release_id: str) -> list[int]:
    return Store(state).private(release_id)["people"].column("person").to_pylist()


def figure(release, name: str):
    fig = release.figures
    return fig.loc[fig.name == name, "value"].iloc[0]


# --- the covid-like table through the Python API and the CLI ---------------------------------


@pytest.fixture(scope="module")
def covid_release(tmp_path_factory):
    folder = tmp_path_factory.mktemp("covid")
    frame = covid()
    spec = covid_spec()
    spec["output"].update(dir=str(folder / "releases"))
    release = privpub.publish(frame, spec, state=folder / "state.duckdb")
    return frame, release, folder


def test_covid_every_class_holds_k_people_recounted_from_the_input(covid_release):
    frame, release, _ = covid_release
    table = release.tables["table"]
    assert len(table) == len(frame)  # every test published, as a row of its own
    counts = recount_from_input(frame, table, "subject_id", COVID_QI, "result")
    assert min(people for _, people in counts) >= 10
    assert figure(release, "k-anonymity") >= 10 and figure(release, "l-diversity") >= 2
    # rows are not people: with 1-6 tests each, some class holds more rows than people
    assert any(rows > people for rows, people in counts)


def test_covid_verifier_k_is_the_fewest_people_per_class_joined_through_the_private_table(covid_release):
    frame, release, folder = covid_release
    table = release.tables["table"]
    people = private_people(folder / "state.duckdb", release.id)
    brute = brute_figures(table, people, "result")
    assert figure(release, "k-anonymity") == brute["k"] and figure(release, "l-diversity") == brute["l"]
    assert brute["spread"] == 0  # every person's rows in one class
    assert brute["people"] == frame.subject_id.nunique() == 2000
    assert figure(release, "groups") >= brute["classes"]  # groups with equal cells read as one class
    # the private table numbers people, it holds no id: numbers 0..people-1
    assert sorted(set(people)) == list(range(2000))


def test_covid_risk_figures_count_people(covid_release):
    frame, release, folder = covid_release
    table = release.tables["table"]
    people = private_people(folder / "state.duckdb", release.id)
    classes = published_classes(table, "result")
    key_of = {i: key for key, rows in classes.items() for i in rows}
    after = brute_risk([key_of[i] for i in range(len(table))], people, table.result.tolist())
    for name, value in after.items():
        assert figure(release, name) == pytest.approx(value, rel=1e-12), name
    days = frame.test_day.dt.date
    before = brute_risk(
        list(zip(frame.age, frame.gender, days, frame.clinic)), frame.subject_id.tolist(), frame.result.tolist()
    )
    for name, value in before.items():
        assert figure(release, f"input-{name}") == pytest.approx(value, rel=1e-12), name


def test_covid_report_speaks_of_people_and_holds_no_id(covid_release):
    frame, release, folder = covid_release
    report = release.report.read_text()
    k = int(figure(release, "k-anonymity"))
    assert f"shared by at least {k} people" in report and "cannot tell which of its people" in report
    assert f"published records in classes of {k} people" in report and "<th>people</th>" in report
    assert "rows_per_person = &quot;many&quot;" in report or 'rows_per_person = "many"' in report
    texts = [p.read_bytes().decode("latin-1") for p in release.folder.rglob("*") if p.is_file()]
    assert any("PAR1" in t for t in texts)  # the Parquet files are among them
    needles = set(frame.subject_id) | set(frame.last_name)
    assert not [n for n in needles if any(n in t for t in texts)]
    assert set(release.tables["table"].columns) == {
        "age_lo",
        "age_hi",
        "gender",
        "test_day_lo",
        "test_day_hi",
        "clinic",
        "result",
    }


def test_covid_under_one_row_per_person_is_refused_naming_many(tmp_path):
    spec = covid_spec()
    spec["dataset"].pop("rows_per_person")
    with pytest.raises(InputError, match=r'rows_per_person = "many"') as err:
        privpub.publish(covid(200), spec, state=tmp_path / "state.duckdb")
    assert "@row" not in str(err.value) and "SUBJ-" not in str(err.value)


def _cli(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """privpub in a fresh interpreter with no Prefect API (the in-process driver)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT), PRIVPUB_HOME=str(folder / "no-service"), PREFECT_HOME=str(folder / "pf")
    )
    return subprocess.run(
        [sys.executable, "-m", "privpub.flows.cli", *argv], capture_output=True, text=True, env=env, cwd=folder
    )


def test_covid_through_the_cli_publishes_verifies_and_names_people(tmp_path):
    frame = covid(600, seed=1)
    frame.to_parquet(tmp_path / "tests.parquet")
    qi = ", ".join("{ " + ", ".join(f'{key} = "{value}"' for key, value in q.items()) + " }" for q in COVID_QI)
    (tmp_path / "spec.toml").write_text(
        '[dataset]\nname = "covid"\ninput = "tests.parquet"\nperson_id = "subject_id"\nrows_per_person = "many"\n'
        f'sensitive = "result"\nqi = [{qi}]\n\n[technique]\nname = "generalization"\nk = 8\n\n'
        '[output]\ndir = "releases"\nstate = "privpub.duckdb"\nseed = 9\n'
    )
    done = _cli(tmp_path, "publish", "spec.toml")
    assert done.returncode == 0, done.stderr
    release_id = done.stdout.split()[0]
    assert "several rows per person" in done.stdout and "people" in done.stdout
    k_line = next(line for line in done.stdout.splitlines() if line.strip().startswith("k-anonymity:"))
    assert k_line.strip().endswith("people (required 8) PASS")
    table = pd.read_parquet(tmp_path / "releases" / release_id / "table.parquet")
    people = private_people(tmp_path / "privpub.duckdb", release_id)
    brute = brute_figures(table, people, "result")
    assert int(k_line.split()[1]) == brute["k"] >= 8
    assert min(p for _, p in recount_from_input(frame, table, "subject_id", COVID_QI, "result")) >= 8
    verified = _cli(tmp_path, "verify", release_id)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"PASS k-anonymity: {brute['k']} (required 8)" in verified.stdout
    assert "PASS prosecutor-risk-max" in verified.stdout
    output = done.stdout + done.stderr + verified.stdout + verified.stderr
    files = [p.read_bytes().decode("latin-1") for p in (tmp_path / "releases").rglob("*") if p.is_file()]
    needles = set(frame.subject_id) | set(frame.last_name)
    assert not [n for n in needles if n in output or any(n in f for f in files)]


# --- a person-years panel ----------------------------------------------------------------------


def test_panel_person_years_keep_each_person_in_one_class_of_k_people(tmp_path):
    frame = panel()
    spec = panel_spec(k=6, l=3)
    spec["output"].update(dir=str(tmp_path / "releases"))
    release = privpub.publish(frame, spec, state=tmp_path / "state.duckdb")
    table = release.tables["table"]
    counts = recount_from_input(frame, table, "pid", PANEL_QI, "income")
    assert min(p for _, p in counts) >= 6
    people = private_people(tmp_path / "state.duckdb", release.id)
    brute = brute_figures(table, people, "income")
    assert brute["spread"] == 0 and brute["people"] == 300
    assert (figure(release, "k-anonymity"), figure(release, "l-diversity")) == (brute["k"], brute["l"])
    # each class spans the years of its people: a person's five person-years are never split
    assert all(rows % 5 == 0 for rows, _ in counts)


# --- small inputs: every figure against brute force -------------------------------------------


def small_table(seed: int, people: int = 40) -> pd.DataFrame:
    """A few people with 1-4 rows each, over three QIs and four sensitive values."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 5, people)
    who = np.repeat(np.arange(people), rows)
    return pd.DataFrame(
        {
            "pid": [f"p{p}" for p in who],
            "age": rng.integers(20, 60, people)[who] + rng.integers(0, 3, len(who)),
            "sex": rng.choice(["F", "M"], people)[who],
            "zone": rng.choice(["a", "b", "c"], len(who)),
            "s": rng.choice(["v0", "v1", "v2", "v3"], len(who), p=[0.4, 0.3, 0.2, 0.1]),
        }
    )


SMALL_QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "zone", "kind": "categorical"},
]


def small_release(frame: pd.DataFrame, seed: int = 0, **technique):
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "rows_per_person": "many",
                "sensitive": "s",
                "qi": SMALL_QI,
            },
            "technique": {"name": "generalization", **technique},
        }
    )
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, validate_input(frame, spec))
    generator = np.random.default_rng(seed)
    part = tech.partition(data, generator)
    release = tech.anonymize(data, part, generator)
    return tech, data, part, release


MODELS = [
    {"k": 3},
    {"k": 3, "l": 2},
    {"k": 2, "l": 2, "diversity": "entropy"},
    {"k": 2, "l": 2, "diversity": "recursive", "c": 3.0},
    {"k": 2, "t": 0.35, "closeness": "equal"},
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("params", MODELS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_small_inputs_every_figure_equals_brute_force_over_people(seed, params):
    """Every privacy and risk figure over people equals a brute-force count over people.

    Promise: people-not-rows."""
    frame = small_table(seed)
    tech, data, part, release = small_release(frame, seed, **params)
    # the partition: every person's rows in one group of at least k people
    groups = pd.DataFrame({"pid": frame.pid, "g": part.group})
    assert (groups.groupby("pid").g.nunique() == 1).all()
    assert groups.groupby("g").pid.nunique().min() >= params["k"]
    table = release.tables["table"]
    people = release.private["people"].column("person").to_pylist()
    brute = brute_figures(table.to_pandas(), people, "s")
    results = {r.model: r for r in tech.verify(release, {})}
    assert results["k-anonymity"].value == brute["k"] and results["k-anonymity"].passed
    assert results["k-anonymity"].worst["measures"] == "people"
    if "l" in params and params.get("diversity", "distinct") == "distinct":
        assert results["l-diversity"].value == brute["l"] >= params["l"]
    if params.get("diversity") == "entropy":
        assert results["entropy-l-diversity"].value == pytest.approx(brute["entropy"], rel=1e-12)
        assert brute["entropy"] >= params["l"] * (1 - 1e-12) and results["entropy-l-diversity"].passed
    if "t" in params:
        assert results["t-closeness"].value == pytest.approx(brute["t"], abs=1e-12)
        assert brute["t"] <= params["t"] + 1e-12 and results["t-closeness"].passed
    assert all(r.passed for r in results.values())
    # the risk figures, input and release
    cols = qi_columns(table, ["age", "sex", "zone"])
    got = table_risk(table, cols, "s", 0.2, None, release.private["people"].column("person").to_numpy())
    classes = published_classes(table.to_pandas(), "s")
    key_of = {i: key for key, rows in classes.items() for i in rows}
    want = brute_risk([key_of[i] for i in range(table.num_rows)], people, table.column("s").to_pylist())
    assert got == pytest.approx(want, rel=1e-12)
    got_in = input_risk(data, 0.2)
    want_in = brute_risk(list(zip(frame.age, frame.sex, frame.zone)), frame.pid.tolist(), frame.s.tolist())
    assert got_in == pytest.approx({f"input-{k}": v for k, v in want_in.items()}, rel=1e-12)


def test_a_person_counts_once_however_many_rows_hold_their_value():
    # one person with ten rows of v0 and four people with one row of v1 each: five people
    frame = pd.DataFrame(
        {
            "pid": ["big"] * 10 + ["a", "b", "c", "d"],
            "age": [30] * 14,
            "sex": ["F"] * 14,
            "zone": ["a"] * 14,
            "s": ["v0"] * 10 + ["v1"] * 4,
        }
    )
    tech, data, part, release = small_release(frame, k=5)
    assert part.n_groups == 1 and data.people == 5
    (kres,) = tech.verify(release, {})
    assert kres.value == 5
    # over people: v0 1 of 5, v1 4 of 5 (over rows it would be 10 of 14 and 4 of 14)
    h = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8))
    cols = ["age_lo", "age_hi", "sex", "zone"]
    (res,) = sensitive_results(release.tables["table"], cols, "s", ModelChoice("entropy", 2), release_people(release))
    assert res.value == pytest.approx(math.exp(h), rel=1e-12) and not res.passed
    with pytest.raises(PartitionError, match=f"which reaches {math.exp(h):.4g}"):  # Mondrian refuses it alike
        small_release(frame, k=5, l=2, diversity="entropy")
    figures = table_risk(
        release.tables["table"], ["age_lo", "age_hi", "sex", "zone"], "s", 0.2, None, release_people(release)
    )
    assert figures["attribute-risk-max"] == pytest.approx(0.8) and figures["prosecutor-risk-max"] == 0.2


def release_people(release) -> np.ndarray:
    return release.private["people"].column("person").to_numpy()


def test_mondrian_over_people_refuses_k_above_the_people_with_enough_rows(tmp_path):
    frame = small_table(0, people=6)  # 6 people, more rows
    assert len(frame) > 7
    with pytest.raises(ValueError, match=r"k = 7 is larger than the table \(6 people\)"):
        small_release(frame, k=7)


def test_suppress_under_many_leaves_out_whole_people():
    frame = small_table(3, people=120)
    frame.loc[frame.pid == "p0", "age"] = 99  # an outlier person widens their group
    tech, data, part, release = small_release(frame, k=4, suppress=0.1)
    out = pd.DataFrame({"pid": frame.pid, "kept": part.group >= 0})
    per_person = out.groupby("pid").kept.agg(["min", "max"])
    assert (per_person["min"] == per_person["max"]).all()  # a person is kept whole or left out whole
    assert release.info["suppressed"] == int((part.group < 0).sum()) > 0
    people = release_people(release)
    assert len(people) == release.tables["table"].num_rows
    brute = brute_figures(release.tables["table"].to_pandas(), people.tolist(), "s")
    assert brute["k"] >= 4 and brute["spread"] == 0


# --- hand-built releases: the adversary's view --------------------------------------------------


def hand_table(classes: list[list[tuple[int, int]]]) -> tuple[pa.Table, np.ndarray]:
    """Class i shows age [10i, 10i + 9]; its entries are (person, rows of that person)."""
    lo, person, s = [], [], []
    for i, members in enumerate(classes):
        for p, rows in members:
            lo += [10 * i] * rows
            person += [p] * rows
            s += [f"v{p % 2}"] * rows
    table = pa.table({"age_lo": lo, "age_hi": [x + 9 for x in lo], "s": s})
    return table, np.asarray(person, dtype=np.int64)


def hand_release(classes, k: int):
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "rows_per_person": "many",
                "sensitive": "s",
                "qi": [{"name": "age", "kind": "numeric"}],
            },
            "technique": {"name": "generalization", "k": k},
        }
    )
    table, person = hand_table(classes)
    return get_technique(spec), Release({"table": table}, {"people": people_table(person)})


@pytest.mark.parametrize("k", [2, 3, 5])
def test_a_hand_built_release_of_k_people_passes_and_of_k_minus_1_people_with_k_rows_fails(k):
    """k counts people: k - 1 people holding k rows fail.

    Promise: people-not-rows."""
    wide = [(100 + j, 1) for j in range(k + 1)]
    inside = [(j, 2) for j in range(k)]  # k people, 2k rows
    outside = [(j, 1) for j in range(k - 2)] + [(k - 2, 3)]  # k - 1 people, k + 1 rows
    tech, release = hand_release([wide, inside], k)
    (res,) = tech.verify(release, {})
    assert (res.value, res.passed, res.worst["class"]["distinct_people"]) == (k, True, k)
    tech, release = hand_release([wide, outside], k)
    (res,) = tech.verify(release, {})
    assert (res.value, res.passed) == (k - 1, False)
    assert res.worst["class"]["size"] == k + 1 >= k  # enough rows: counted in rows it would pass
    assert res.worst["class"]["age_lo"] == 10 and res.worst["measures"] == "people"


def test_a_person_with_rows_in_two_classes_fails_whatever_the_class_sizes():
    tech, release = hand_release([[(j, 1) for j in range(4)], [(3, 1)] + [(10 + j, 1) for j in range(4)]], 3)
    (res,) = tech.verify(release, {})
    assert res.value == 4 and not res.passed and res.worst["people_in_several_classes"] == 1


def test_two_groups_with_identical_cells_are_read_as_one_class():
    # two groups whose boxes are equal ([20, 30] and {F, M}): the adversary sees one class
    frame = pd.DataFrame(
        {
            "pid": ["a", "a", "b", "c", "c", "d"],
            "age": [20, 30, 25, 20, 30, 22],
            "sex": ["F", "M", "F", "F", "M", "M"],
            "zone": ["a"] * 6,
            "s": ["v0", "v1", "v0", "v1", "v0", "v1"],
        }
    )
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "rows_per_person": "many",
                "sensitive": "s",
                "qi": SMALL_QI,
            },
            "technique": {"name": "generalization", "k": 3},
        }
    )
    data = Microdata.from_frame(spec, validate_input(frame, spec))
    group = np.asarray([0, 0, 0, 1, 1, 1])  # people {a, b} and {c, d}: two people each
    table = generalized_table(data, group, 2, np.arange(6))
    people = people_table(data.person)
    assert table.column("age_lo").to_pylist() == [20] * 6 and table.column("age_hi").to_pylist() == [30] * 6
    res, _ = k_and_l(table, ["age_lo", "age_hi", "sex", "zone"], "s", 3, 2, people.column("person").to_numpy())
    assert (res.value, res.passed, res.worst["classes"]) == (4, True, 1)


def test_without_the_people_table_a_row_is_a_person():
    table, person = hand_table([[(0, 2), (1, 1)], [(2, 1), (3, 1), (4, 1)]])
    rows, _ = k_and_l(table, ["age_lo", "age_hi"], "s", 3, None)
    people, _ = k_and_l(table, ["age_lo", "age_hi"], "s", 3, None, person)
    assert (rows.value, rows.passed, "measures" in rows.worst) == (3, True, False)
    assert (people.value, people.passed) == (2, False)


def test_a_release_under_many_without_its_people_table_fails_rather_than_count_rows():
    tech, release = hand_release([[(j, 1) for j in range(6)]], 3)
    (res,) = tech.verify(Release(release.tables), {})
    assert (res.value, res.passed) == (0, False) and "no people table" in res.worst["reason"]


def test_against_a_population_of_people_the_release_and_privpub_verify_agree(tmp_path):
    frame = covid(400, seed=4)
    spec = covid_spec(k=5)
    spec["output"].update(dir=str(tmp_path / "releases"))
    spec["risk"] = {"sample_fraction": 0.25}  # N = 4 x the input's people, not its rows
    release = privpub.publish(frame, spec, state=tmp_path / "state.duckdb")
    assert figure(release, "sample-fraction") == pytest.approx(400 / 1600)  # every person published
    # a class of f people stands for about f / pi people of the population: E[1 / F] below 1 / f
    assert 0 < figure(release, "journalist-risk-max") < figure(release, "prosecutor-risk-max") <= 1 / 5
    checks = privpub.verify(release.id, state=tmp_path / "state.duckdb")
    assert checks.attrs["ok"], checks.attrs["lines"]
    assert {"journalist-risk-max", "marketer-risk", "k-anonymity"} <= set(checks.check)


@pytest.mark.parametrize("seed", range(6))
def test_small_inputs_beta_likeness_over_people_equals_a_direct_count_of_person_value_votes(seed):
    """beta-likeness under "many" is a distribution model like entropy and t: each class's
    distinct (person, value) pairs are its votes, and the table's pairs its base (docs/models.md)."""
    frame = small_table(seed)
    beta = 2.0
    tech, data, part, release = small_release(frame, seed, k=2, beta=beta)
    table = release.tables["table"].to_pandas()
    people = release.private["people"].column("person").to_pylist()
    votes = {
        key: Counter(v for _, v in {(people[i], table["s"].iloc[i]) for i in rows})
        for key, rows in published_classes(table, "s").items()
    }
    base = Counter()
    for count in votes.values():
        base.update(count)
    total = sum(base.values())
    gain = max(
        (count[v] / sum(count.values()) - base[v] / total) / (base[v] / total)
        for count in votes.values()
        for v in count
    )
    (result,) = [r for r in tech.verify(release, {}) if r.model == "beta-likeness"]
    assert result.value == pytest.approx(gain, rel=1e-12) and gain <= beta + 1e-12 and result.passed

"""The Python API (issue 29, item 2): `privpub.publish` from a DataFrame, an input path or a spec
file, the release it returns (.id, .tables, .figures, .report, HTML), `privpub.history` and
`privpub.verify` as DataFrames; no Prefect server, no Prefect import."""

from __future__ import annotations

import copy
import json
import pickle

import duckdb
import pandas as pd
import pytest

import privpub
from privpub.flows import pipeline
from privpub.schemas.errors import InputError, PrivacyRefused, SpecError
from privpub.state.store import Store
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.validate import frame_fingerprint
from tests.helpers import write_spec
from tests.test_drivers import _without_a_server


def people(n: int = 600) -> pd.DataFrame:
    """The census sample with person ids that could not be mistaken for anything else."""
    frame = census(n, seed=3)
    return frame.assign(pid=[f"person-{i:05d}" for i in range(n)])


def frame_spec(seed: int | None = 7, **kw) -> dict:
    """A spec dict with no [dataset] input: the DataFrame is the input."""
    spec = census_spec("unused", k=5, l=None, seed=seed, **kw)
    del spec["dataset"]["input"]
    return spec


def stored_metrics(state, release_id) -> pd.DataFrame:
    with duckdb.connect(str(state), read_only=True) as con:
        return con.execute(
            "SELECT kind, name, value, text_value, threshold, passed FROM release_metrics "
            "WHERE release_id = ? ORDER BY kind, name",
            [release_id],
        ).df()


def test_publish_a_dataframe_with_a_dict_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame, spec = people(), frame_spec()
    before, spec_before = frame.copy(), copy.deepcopy(spec)
    release = privpub.publish(frame, spec, state="state.duckdb")

    assert isinstance(release, privpub.PublishedRelease) and release.id == release == str(release)
    assert release.id.startswith("census-0001-") and release.state == tmp_path / "state.duckdb"
    pd.testing.assert_frame_equal(frame, before)  # the caller's frame and spec are left as they were
    assert spec == spec_before
    # the published table as its Parquet file holds it
    table = tmp_path / "releases" / release.id / "table.parquet"
    pd.testing.assert_frame_equal(release.tables["table"], pd.read_parquet(table))
    assert list(release.tables) == ["table"] and len(release.tables["table"]) == 600
    assert release.report == tmp_path / "releases" / release.id / "report.html" and release.report.is_file()
    # every stored figure, its number where it has one, else its text
    stored = stored_metrics(tmp_path / "state.duckdb", release.id)
    figures = release.figures
    assert list(figures.columns) == ["kind", "name", "value", "threshold", "passed"]
    assert figures[["kind", "name"]].values.tolist() == stored[["kind", "name"]].values.tolist()
    for got, row in zip(figures.itertuples(), stored.itertuples()):
        assert got.value == (row.value if pd.notna(row.value) else row.text_value)
        assert str(got.threshold) == str(row.threshold) and str(got.passed) == str(row.passed)
    assert figures.set_index("name").loc["k-anonymity", "passed"]
    # the stored spec says where the rows came from; the fingerprint is the frame's
    rel = Store(tmp_path / "state.duckdb").release(release.id)
    assert rel["spec"]["dataset"]["input"] == "<DataFrame>"
    assert rel["input_fingerprint"] == frame_fingerprint(frame)


def test_the_html_summary_names_the_release_and_no_person_or_secret_value(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = people()
    release = privpub.publish(frame, frame_spec())
    shown = release._repr_html_()
    assert release.id in shown and "k-anonymity" in shown and "PASS" in shown
    assert release.report.as_uri() in shown and "generalization" in shown
    assert "person-" not in shown  # no person id
    assert not [v for v in frame.occupation.unique() if v in shown]  # no sensitive value
    assert release.id in repr(release) and "census #1" in repr(release)


def test_the_same_frame_and_seed_return_the_release_and_a_changed_frame_publishes_anew(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def spec(seed):  # the composition of the two releases is not what this test is about
        return {**frame_spec(seed=seed), "series": {"composition": "warn"}}

    first = privpub.publish(people(), spec(7))
    again = privpub.publish(people(), spec(7))  # an equal frame, built anew
    assert again == first and len(privpub.history()) == 1
    assert frame_fingerprint(people()) == frame_fingerprint(people())
    # another seed on the same rows is a repeat: refused (the fingerprint is the same)
    with pytest.raises(PrivacyRefused, match="the input is unchanged since release #1"):
        privpub.publish(people(), spec(None))
    changed = people()
    changed.loc[17, "age"] += 1
    assert frame_fingerprint(changed) != frame_fingerprint(people())
    second = privpub.publish(changed, spec(None))
    assert second != first and second.sequence == 2
    assert privpub.history().release_id.tolist() == [first, second]
    # a column's dtype is part of the fingerprint, as a file's bytes would be
    assert frame_fingerprint(people().astype({"age": "float64"})) != frame_fingerprint(people())


def test_publish_an_input_path_with_a_dict_spec_and_a_spec_file(census_dir, monkeypatch):
    monkeypatch.chdir(census_dir)
    spec = census_spec("unused", k=5, l=None, seed=3)
    del spec["dataset"]["input"]
    from_path = privpub.publish("census.csv", spec, state="other.duckdb")
    assert (census_dir / "other.duckdb").is_file() and from_path.state == census_dir / "other.duckdb"
    assert Store(census_dir / "other.duckdb").release(from_path)["spec"]["dataset"]["input"] == str(
        census_dir / "census.csv"
    )
    # the same input and spec from a TOML file: the same release key, so the same release
    toml = write_spec(census_dir, k=5, l=None, seed=3)
    from_file = privpub.publish(str(toml), state="other.duckdb")
    assert from_file == from_path and isinstance(from_file, privpub.PublishedRelease)
    # the spec's own input (spec=...), and the first call form (one path: the spec file)
    with_input = census_spec("census.csv", k=5, l=None, seed=3, state="other.duckdb")
    assert privpub.publish(spec=with_input) == from_path
    own = privpub.publish(str(toml))  # the spec file's own state
    assert own.state == census_dir / "privpub.duckdb" and own.tables["table"].shape == (600, 10)
    # a DataFrame with a spec file that names no input
    toml.write_text(toml.read_text().replace('input = "census.csv"\n', ""))
    frame = pd.read_csv(census_dir / "census.csv")
    assert privpub.publish(frame, toml).id.startswith("census-0002-")  # another input: the next release


def test_a_spec_without_input_needs_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=r"\[dataset\] needs 'input'"):
        privpub.publish(spec=frame_spec())
    with pytest.raises(SpecError, match="needs a spec"):
        privpub.publish(people())
    with pytest.raises(SpecError, match="data must be a pandas DataFrame"):
        privpub.publish([1, 2], frame_spec())
    with pytest.raises(SpecError, match=r"\[technique\] kk: unknown key"):
        privpub.publish(people(), {**frame_spec(), "technique": {"name": "generalization", "kk": 5}})


def _set(frame: pd.DataFrame, column: str, row: int, value) -> pd.DataFrame:
    out = frame.astype({column: object})
    out.loc[row, column] = value
    return out


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda f: _set(f, "age", 7, "x"), "input rejected: row 8, column 'age': not a number"),
        (lambda f: f.drop(columns=["pid"]), "input is missing column(s) 'pid'; it has age, sex,"),
        (lambda f: _set(f, "sex", 4, None), "input rejected: row 5, column 'sex': is empty (null)"),
    ],
)
def test_a_bad_frame_is_refused_as_the_same_csv_file(tmp_path, monkeypatch, mutate, message):
    """The message a CSV file of the same rows gets from `privpub publish` (the same attempt),
    naming rows and columns, never a value; the attempt is in the audit log."""
    monkeypatch.chdir(tmp_path)
    bad = mutate(census(600, seed=3))
    with pytest.raises(InputError) as from_frame:
        privpub.publish(bad, frame_spec())
    bad.to_csv(tmp_path / "bad.csv", index=False)
    spec = write_spec(tmp_path, input_name="bad.csv", k=5, l=None, seed=7)
    with pytest.raises(InputError) as from_file:
        pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    assert str(from_frame.value) == str(from_file.value) and str(from_frame.value).startswith(message)
    log = Store(tmp_path / "privpub.duckdb").audit_log()
    assert log.outcome.tolist() == ["failed", "failed"]
    assert json.loads(log.detail.iloc[0])["message"] == str(from_frame.value)
    assert not (tmp_path / "releases").exists() or not list((tmp_path / "releases").glob("census-*"))


@pytest.mark.parametrize(
    "column, held",
    [
        (census(600, seed=3).age.astype(str), "str"),  # text that would convert: a CSV has no types, a frame has
        (census(600, seed=3).age > 40, "booleans"),
    ],
)
def test_a_numeric_quasi_identifier_of_text_or_booleans_is_refused_not_converted(tmp_path, monkeypatch, column, held):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="column 'age': not a number") as refused:
        privpub.publish(census(600, seed=3).assign(age=column), frame_spec())
    assert held in str(refused.value) and "40" not in str(refused.value)
    # numbers in an object column are numbers
    numbers = census(600, seed=3).astype({"age": object})
    assert privpub.publish(numbers, frame_spec()).id.startswith("census-0001-")


def test_history_and_verify_are_dataframes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    release = privpub.publish(people(), frame_spec(), state="s.duckdb")
    hist = privpub.history("s.duckdb")
    assert hist.release_id.tolist() == [release] and hist.series.tolist() == ["census"]
    assert privpub.history("s.duckdb", series="other").empty
    checks = privpub.verify(release, "s.duckdb")  # a DataFrame release: verified from its files
    assert list(checks.columns) == ["status", "check", "passed", "detail"]
    assert checks.attrs["ok"] and checks.passed.all()
    k = checks.set_index("check").loc["k-anonymity"]
    assert k.status == "PASS" and k.detail == "5 (required 5)"
    assert checks.attrs["lines"][0].startswith(f"release {release} (series census, #1")
    # a tampered published file
    table = tmp_path / "releases" / release.id / "table.parquet"
    table.write_bytes(table.read_bytes() + b"x")
    checks = privpub.verify(release.id, tmp_path / "s.duckdb")
    assert not checks.attrs["ok"] and checks.passed.tolist() == [False]
    assert checks.check.tolist() == ["published files"] and "sha256 mismatch" in checks.detail.iloc[0]
    assert checks.attrs["lines"][1] == "FAIL " + checks.detail.iloc[0]  # the line `privpub verify` prints


def test_a_release_pickles_as_itself(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    release = privpub.publish(people(), frame_spec())
    back = pickle.loads(pickle.dumps(release))
    assert back == release and back.state == release.state and back.figures.equals(release.figures)
    assert {release: 1}[release.id] == 1  # hashed as its id


def test_a_dataframe_publishes_in_a_fresh_interpreter_without_prefect(census_dir, tmp_path):
    """No server, no Prefect import; and the fingerprint is the frame's, not the process's: the
    same frame and seed published here afterwards is recognised as that release."""
    code = (
        "import sys, privpub\n"
        "from privpub.tasks.demo_data import census, census_spec\n"
        "spec = census_spec('unused', k=5, l=None, seed=9); del spec['dataset']['input']\n"
        "release = privpub.publish(census(600, seed=3), spec)\n"
        "print(release.id, release.tables['table'].shape[0], 'prefect' in sys.modules)"
    )
    res = _without_a_server(census_dir, tmp_path, "-c", code)
    assert res.returncode == 0, res.stderr
    rid, rows, prefect_loaded = res.stdout.split()
    assert rows == "600" and prefect_loaded == "False" and res.stderr == ""
    spec = census_spec("unused", k=5, l=None, seed=9, state=str(census_dir / "privpub.duckdb"))
    spec["output"]["dir"] = str(census_dir / "releases")
    del spec["dataset"]["input"]
    assert privpub.publish(census(600, seed=3), spec) == rid


def test_a_dataframe_never_goes_to_a_prefect_server(tmp_path, monkeypatch):
    """With a server configured, a DataFrame's release still runs in this process: a flow run's
    parameters and task inputs are the server's to keep, and the rows must never get there.

    Promise: dataframe-stays-in-process."""
    from privpub.flows import run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run, "prefect_configured", lambda: "http://127.0.0.1:9/api")  # nothing listens
    release = privpub.publish(people(), frame_spec())
    assert Store(release.state).release(release)["flow_run_id"] is None


def test_with_a_server_a_dict_spec_is_a_flow_run_and_a_dataframe_is_not(prefect_server, census_dir, monkeypatch):
    """With a server, a spec is a flow run; a DataFrame never is.

    Promise: dataframe-stays-in-process."""
    monkeypatch.chdir(census_dir)
    warn = {"series": {"composition": "warn"}}  # two releases of other seeds: not what this is about
    asked = {"run": {"server": True}}  # a server records the run only when asked (issue 42)
    via_flow = privpub.publish(spec={**census_spec("census.csv", k=5, l=None, seed=3), **warn, **asked})
    rel = Store(via_flow.state).release(via_flow)
    assert rel["flow_run_id"] is not None and rel["spec"]["dataset"]["input"] == str(census_dir / "census.csv")
    in_process = privpub.publish(pd.read_csv("census.csv"), {**frame_spec(seed=4), **warn})
    assert Store(in_process.state).release(in_process)["flow_run_id"] is None
    assert privpub.history().release_id.tolist() == [via_flow, in_process]

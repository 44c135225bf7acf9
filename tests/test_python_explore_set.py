"""Issue 42, item 3: `privpub.explore(data, spec, grid)` from a DataFrame and a spec without input;
`privpub publish SPEC --set k=20` and `privpub.publish(..., set={...})` publish a setting explore
showed; Python refusals name Python parameters; `help(privpub)` is written for users."""

from __future__ import annotations

import json
import pydoc
from pathlib import Path

import pandas as pd
import pytest

import privpub
from privpub.schemas.errors import PrivacyRefused, SpecError
from privpub.state.store import Store
from privpub.tasks.demo_data import census, census_spec
from tests.helpers import census_spec_toml, write_spec
from tests.test_drivers import _without_a_server
from tests.test_promise_explore import PAGE, assert_nothing_written, audit_only_state, files, tables

GRID = {"k": [5, 12], "l": [2, 3]}


def frame_spec(seed: int | None = 7) -> dict:
    """The census spec as a dict with no [dataset] input: the DataFrame is the input."""
    spec = census_spec("unused", k=5, l=None, seed=seed)
    del spec["dataset"]["input"]
    return spec


def figures(rows: pd.DataFrame) -> list[dict]:
    """Each row but its timing, NaN as None (NaN != NaN)."""
    kept = rows.drop(columns=["seconds"])
    return [
        {k: (None if v is None or (isinstance(v, float) and v != v) else v) for k, v in r.items()}
        for r in kept.to_dict("records")
    ]


def cli(folder: Path, tmp_path: Path, *argv: str):
    return _without_a_server(folder, tmp_path, "-m", "privpub.flows.cli", *argv)


def table_hashes(state: Path, release_id: str) -> dict[str, str]:
    tabs = Store(state).release(release_id)["tables"]
    return dict(zip(tabs.table_name, tabs.sha256))


# --- explore from a DataFrame ---------------------------------------------------------------------


def test_explore_a_dataframe_with_a_spec_without_input_equals_the_file_explore(census_dir, monkeypatch):
    monkeypatch.chdir(census_dir)
    frame = pd.read_csv(census_dir / "census.csv")
    before = frame.copy()
    rows = privpub.explore(frame, frame_spec(), GRID)
    assert isinstance(rows, pd.DataFrame) and len(rows) == 4  # one row per setting
    assert rows[["k", "l"]].values.tolist() == [[5, 2], [5, 3], [12, 2], [12, 3]]
    assert rows.passed.all() and rows.attrs["seed"] == 7
    assert (rows["k-anonymity"] >= rows.k).all()
    pd.testing.assert_frame_equal(frame, before)  # the caller's frame is left as it was
    # the same rows and spec as files: the same figures, setting by setting
    spec_file = write_spec(census_dir, k=5, l=None, seed=7)
    from_file = privpub.explore(str(spec_file), GRID)
    assert list(from_file.columns) == list(rows.columns)
    assert figures(from_file) == figures(rows)
    # an input file's path as `data` (the new form too) and the state named by `state`
    from_path = privpub.explore("census.csv", frame_spec(), {"k": [12]}, state="other.duckdb")
    assert figures(from_path) == figures(privpub.explore(frame, frame_spec(), {"k": [12]}))
    assert Path(from_path.attrs["page"]) == census_dir / "explore-census.html"
    assert Store(census_dir / "other.duckdb").audit_log().action.tolist() == ["explore"]


def test_explore_from_a_dataframe_writes_nothing_but_its_audit_row_and_page(tmp_path, monkeypatch):
    fresh = audit_only_state(tmp_path / "reference")
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    frame = census(300, seed=5)
    spec = {**frame_spec(seed=None), "series": {"composition": "warn"}}
    privpub.publish(frame, spec)  # a release: the series has history to compare against
    before_files, before_tables = files(folder), tables(folder / "privpub.duckdb")
    lines: list[str] = []
    rows = privpub.explore(frame, spec, {"k": [3, 4]}, progress=lines.append)
    assert len(rows) == 2 and rows.passed.all()
    seed = rows.attrs["seed"]  # drawn: the line says how to reproduce it in Python's words
    assert (
        lines[0]
        == f'seed {seed} drawn (publish with overrides={{"output": {{"seed": {seed}}}}} to reproduce a setting\'s release)'
    )
    assert_nothing_written(folder, before_files, before_tables, fresh)
    assert (folder / PAGE).is_file()


def test_explore_needs_a_grid_and_names_python_parameters(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = census(300, seed=5)
    with pytest.raises(SpecError, match="privpub.explore needs a grid"):
        privpub.explore(frame, frame_spec())
    with pytest.raises(SpecError, match=r"\[dataset\] needs 'input'"):
        privpub.explore(spec=frame_spec(), grid={"k": [5]})
    with pytest.raises(SpecError) as refused:
        privpub.explore(frame, frame_spec(), {"dataset.input": ["x.csv"]})
    assert str(refused.value).startswith("grid key 'dataset.input':") and "--set" not in str(refused.value)
    with pytest.raises(SpecError, match="setting k=1.5"):
        privpub.explore(frame, frame_spec(), {"k": [5, 1.5]})
    assert not (tmp_path / "releases").exists()


# --- publish --set -------------------------------------------------------------------------------


def test_publish_set_k_20_equals_publishing_the_spec_edited_to_k_20(census_dir, tmp_path):
    spec = write_spec(census_dir, k=5, l=None, seed=None)
    res = cli(census_dir, tmp_path, "publish", str(spec), "--set", "k=20", "--set", "l=2", "--seed", "5", "--quiet")
    assert res.returncode == 0, res.stderr
    release_id = res.stdout.strip()
    state = census_dir / "privpub.duckdb"
    stored = Store(state).release(release_id)
    assert stored["spec"]["technique"] == {"name": "generalization", "k": 20, "l": 2}  # stored as any spec value
    assert type(stored["spec"]["technique"]["k"]) is int
    metrics = stored["metrics"].set_index("name")
    assert metrics.loc["k-anonymity", "value"] >= 20 and str(metrics.loc["k-anonymity", "threshold"]) == "20"
    assert privpub.verify(release_id, state).attrs["ok"]

    # the spec file edited to k = 20, l = 2, in another folder, with the same seed
    other = tmp_path / "edited"
    other.mkdir()
    (other / "census.csv").write_bytes((census_dir / "census.csv").read_bytes())
    (other / "spec.toml").write_text(census_spec_toml(k=20, l=2, seed=5))
    edited = cli(other, tmp_path, "publish", "spec.toml", "--quiet")
    assert edited.returncode == 0, edited.stderr
    edited_id = edited.stdout.strip()
    assert table_hashes(other / "privpub.duckdb", edited_id) == table_hashes(state, release_id)
    edited_stored = Store(other / "privpub.duckdb").release(edited_id)
    assert edited_stored["spec"]["technique"] == stored["spec"]["technique"]

    # the same setting again: a repeat, refused with the CLI's flag
    again = cli(census_dir, tmp_path, "publish", str(spec), "--set", "k=20", "--set", "l=2", "--seed", "6")
    assert again.returncode == 1 and "--allow-repeat publishes it anyway" in again.stderr


@pytest.mark.parametrize(
    "flag, named",
    [
        ("k", "--set k: expected NAME=VALUE"),
        ("nosuch=3", "--set nosuch=3: [technique] nosuch: unknown key"),
        ("k=abc", "--set k=abc: [technique] k must be an integer"),
        ("k=1.5", "--set k=1.5: [technique] k must be an integer"),  # no coercion of a float
        ("k=5,10", "--set k=5,10: publish takes one value"),
        ("dataset.input=x.csv", "--set dataset.input:"),
        ("risk.threshold=2", "--set risk.threshold=2: [risk] threshold"),
    ],
)
def test_a_bad_set_is_refused_in_one_line_before_any_work(census_dir, tmp_path, flag, named):
    spec = write_spec(census_dir, k=5, l=None, seed=4)
    res = cli(census_dir, tmp_path, "publish", str(spec), "--set", flag)
    assert res.returncode == 1 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert lines == [f"privpub: error: {lines[0].removeprefix('privpub: error: ')}"] and len(lines) == 1, res.stderr
    assert lines[0].startswith(f"privpub: error: {named}"), lines[0]
    assert "read and validated" not in res.stderr  # refused before the input was read
    assert not (census_dir / "releases").exists()
    last = Store(census_dir / "privpub.duckdb").audit_log().iloc[-1]
    detail = json.loads(last.detail)  # the attempt's row, as any refused spec's (its outcome: the trail's rule)
    assert last.action == "publish" and detail["error"] == "SpecError"
    assert detail["message"] == lines[0].removeprefix("privpub: error: ")


# --- Python's set= and its words ------------------------------------------------------------------


def test_python_set_publishes_the_setting_and_refuses_as_the_cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = census(600, seed=3)
    for bad, named in (
        ({"k": "20"}, "set={'k': '20'}: [technique] k must be an integer"),  # text is not a number
        ({"k": 1.5}, "set={'k': 1.5}: [technique] k must be an integer"),
        ({"nosuch": 3}, "set={'nosuch': 3}: [technique] nosuch: unknown key"),
        ({"dataset.input": "x.csv"}, "set key 'dataset.input':"),
        ("k=20", "set must be a dict"),
    ):
        with pytest.raises(SpecError) as refused:
            privpub.publish(frame, frame_spec(), set=bad)
        message = str(refused.value)
        assert message.startswith(named) and "\n" not in message and "--set" not in message, message
    assert not (tmp_path / "releases").exists() and privpub.history().empty
    log = Store(tmp_path / "privpub.duckdb").audit_log()
    assert [json.loads(d)["error"] for d in log.detail] == ["SpecError"] * 5 and set(log.action) == {"publish"}

    release = privpub.publish(frame, frame_spec(), set={"k": 20, "l": 2})
    spec = Store(tmp_path / "privpub.duckdb").release(release)["spec"]
    assert spec["technique"] == {"name": "generalization", "k": 20, "l": 2}
    assert privpub.verify(release).attrs["ok"]
    # set= is overrides={"technique": ...} by another name: the same release (the same seed)
    same = privpub.publish(frame, frame_spec(), overrides={"technique": {"k": 20, "l": 2}})
    assert same == release and len(privpub.history()) == 1


def test_a_repeat_refused_from_python_names_allow_repeat(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = census(600, seed=3)
    privpub.publish(frame, frame_spec(seed=7), set={"k": 20})
    with pytest.raises(PrivacyRefused) as refused:
        privpub.publish(frame, frame_spec(seed=8), set={"k": 20})
    message = str(refused.value)
    assert "the input is unchanged since release #1" in message
    assert "allow_repeat=True publishes it anyway" in message and "--allow-repeat" not in message
    again = privpub.publish(frame, frame_spec(seed=8), set={"k": 20}, allow_repeat=True)
    assert again.sequence == 2


# --- help(privpub) --------------------------------------------------------------------------------

FUNCTIONS = (
    "publish",
    "explore",
    "history",
    "verify",
    "snapshot",
    "init",
    "change_series",
    "load_spec",
    "spec_from_dict",
    "technique_names",
)


def test_help_is_written_for_users():
    for name in privpub.__all__:  # every public name loaded, so help shows each one's text
        getattr(privpub, name)
    text = pydoc.render_doc(privpub, renderer=pydoc.plaintext)
    for internal in ("package-dir", "design card", "pyproject", "issue 4"):
        assert internal not in text, internal
    assert "privpub.explore(frame, spec" in text and 'set={"k": 20}' in text
    for name in FUNCTIONS:
        doc = getattr(privpub, name).__doc__ or ""
        assert "Example" in doc and len(doc.split()) > 15, name  # what it does, how to call it
    for name in ("publish", "explore"):
        doc = getattr(privpub, name).__doc__
        assert all(word in doc for word in ("Parameters", "Returns", "Raises")), name

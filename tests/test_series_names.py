"""Series and table names are names, never paths (issue 41, item 1): refused at the spec in one
line naming the key, before any work; and every path a release writes lies under its folder
(schemas/names.py `inside`), so a future bug cannot escape either."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from privpub.schemas.errors import SpecError, StateError
from privpub.schemas.names import NAME_LENGTH, inside, name_problem
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store, stage_tables
from tests.helpers import census_spec_toml, child_pythonpath
from tests.test_hardening import good_frame
from tests.test_store import _commit

ROOT = Path(__file__).resolve().parents[1]
PRIVPUB = [sys.executable, "-m", "privpub.flows.cli"]

# (case, name): refused; the rule is an oracle written from the README, not from the regex
BAD_NAMES = [
    ("a path out of the output folder", "../../../../tmp/x/PWNED"),
    ("a sub-folder", "a/b"),
    ("a parent", ".."),
    ("hidden", ".census"),
    ("an option", "-census"),
    ("absolute", "/tmp/census"),
    ("a NUL", "cen\0sus"),
    ("a backslash", "a\\b"),
    ("a space", "census 2024"),
    ("a newline", "census\n2024"),
    ("a letter outside ASCII", "zürich"),
    ("1,000 characters", "c" * 1000),
    ("one character over the length", "c" * (NAME_LENGTH + 1)),
]
GOOD_NAMES = ["c", "7", "census", "census-2024.v1_b", "C" * NAME_LENGTH, "a..b", "x-"]


def _spec(name: object) -> dict:
    return {
        "dataset": {
            "name": name,
            "input": "census.csv",
            "person_id": "pid",
            "sensitive": "occupation",
            "qi": [{"name": "age", "kind": "numeric"}],
        },
        "technique": {"name": "generalization", "k": 5},
    }


@pytest.mark.parametrize("case,name", BAD_NAMES, ids=[c for c, _ in BAD_NAMES])
def test_a_series_name_that_is_not_a_name_is_refused_in_one_line(case, name):
    with pytest.raises(SpecError) as refused:
        spec_from_dict(_spec(name))
    text = str(refused.value)
    assert "[dataset] name" in text and "\n" not in text and "\0" not in text, text
    assert len(text) < 300, text  # a 1,000-character name is not echoed whole
    assert "letters (A-Z, a-z), digits, '-', '_' or '.'" in text, text


def test_names_just_inside_the_rule_are_accepted():
    for name in GOOD_NAMES:
        assert spec_from_dict(_spec(name)).dataset.name == name
        assert name_problem(name) is None
    assert name_problem("C" * (NAME_LENGTH + 1)) and name_problem(".x") and name_problem(7) and name_problem("")
    with pytest.raises(SpecError, match=r"\[dataset\] name"):
        spec_from_dict(_spec(""))


def _child_env(folder: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    return {**env, "PYTHONPATH": child_pythonpath(ROOT), "PRIVPUB_HOME": str(folder / "home")}


def test_a_traversing_series_name_publishes_nothing_anywhere(tmp_path):
    """The tester's reproducer: the name leads from [output] dir into a folder that exists. Before,
    table.parquet and report.html were published there, exit 0."""
    work, target = tmp_path / "work", tmp_path / "x"
    work.mkdir()
    target.mkdir()
    good_frame().to_csv(work / "census.csv", index=False)
    escape = "../" * (len(work.parts) + 2) + str(target.relative_to("/")) + "/PWNED"
    spec = census_spec_toml(seed=11).replace('name = "census"', f'name = "{escape}"')
    (work / "spec.toml").write_text(spec)
    done = subprocess.run(
        [*PRIVPUB, "publish", "spec.toml"], cwd=work, env=_child_env(work), capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privpub: error: invalid spec: [dataset] name"), done.stderr
    assert not done.stdout and list(target.iterdir()) == []
    assert not (work / "releases").exists()  # refused before any work: nothing staged either
    with duckdb.connect(str(work / "privpub.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM release_rows").fetchone()[0] == 0
        assert con.execute("SELECT outcome FROM audit_log").fetchall() == [("failed",)]  # the attempt's row


def test_the_python_api_refuses_the_name_before_any_work(tmp_path):
    import privpub

    spec = _spec("a/b")
    spec["output"] = {"dir": str(tmp_path / "out"), "state": str(tmp_path / "state.duckdb")}
    with pytest.raises(SpecError, match=r"\[dataset\] name: the series name must be"):
        privpub.publish(good_frame(), spec)
    assert not (tmp_path / "out").exists()


def test_the_store_refuses_a_bad_series_before_its_commit(tmp_path):
    """A caller of Store itself (not through a spec) cannot commit a row whose folder would
    escape or cannot be made: nothing committed, and the next writer removes the staged files."""
    store, out = Store(tmp_path / "state.duckdb"), tmp_path / "out"
    _commit(store, out, key="good", series="census")
    for key, series in (("up", "../escaped"), ("sub", "a/b"), ("nul", "a\0b"), ("long", "s" * 1000)):
        with pytest.raises(StateError, match="series name: must be"):
            _commit(store, out, key=key, series=series)
    assert store.history().series.tolist() == ["census"]
    with store.write():  # the next writer rolls the refused releases' staging back
        pass
    assert sorted(p.name for p in out.iterdir()) == [store.history().release_id[0]]
    assert not (tmp_path / "escaped-0001").exists() and not list(tmp_path.glob("escaped*"))


def test_a_table_name_that_is_not_a_name_is_refused_and_nothing_escapes(tmp_path):
    out = tmp_path / "out"
    for name in ("../../../x", "a/b", ".hidden", "t\0"):
        with pytest.raises(StateError, match="published table name: must be"):
            stage_tables(out, {"table": pa.table({"x": [1]}), name: pa.table({"x": [2]})})
    assert not list(tmp_path.rglob("*.parquet"))  # the good table was discarded with its staging
    assert not (out / ".staging").exists()


def test_inside_refuses_every_way_out(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (folder / "link").symlink_to(tmp_path / "elsewhere")
    assert inside(folder, "census-0001-abcdef") == folder.resolve() / "census-0001-abcdef"
    assert inside(folder, "census-0001-abcdef", "report.html").parent.name == "census-0001-abcdef"
    for names in (("..",), ("../x",), ("a", "..", "..", "x"), ("/tmp/x",), ("link",), ("link", "f"), ("a\0",), (".",)):
        with pytest.raises(StateError, match="cannot write"):
            inside(folder, *names)

"""The trail complete (issue 41 item 8): a spec refused through the Python API leaves the audit
row the CLI leaves for the same typo; a state path that cannot be a state (/dev/null, the input
table) is refused in one line and journaled; a publish killed at any point, just after its
COMMIT included, leaves exactly one row for its attempt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import privpub
from privpub.schemas.errors import SpecError
from privpub.state.store import Store
from tests.helpers import census_spec_toml, child_pythonpath, write_spec

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path, **more: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT),
        PRIVPUB_HOME=str(tmp_path / "no-service"),
        PREFECT_HOME=str(tmp_path / "prefect"),
        **more,
    )
    return env


def _cli(folder: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "privpub.flows.cli", *args],
        cwd=folder,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )


def _rows(state: Path) -> list[tuple]:
    if not state.exists():
        return []
    with duckdb.connect(str(state), read_only=True) as con:
        return con.execute("SELECT action, target, outcome, detail FROM audit_log ORDER BY id").fetchall()


# (case, a change to the census spec's sections): each is refused before any work
SPEC_ERRORS = [
    ("k as a string", lambda s: s["technique"].update(k="5")),
    ("k as a float", lambda s: s["technique"].update(k=5.0)),
    ("k = 0", lambda s: s["technique"].update(k=0)),
    ("l = inf", lambda s: s["technique"].update(l=float("inf"))),
    ("an unknown technique key", lambda s: s["technique"].update(kk=2)),
    ("an unknown technique", lambda s: s["technique"].update(name="generalisation")),
    ("an unknown dataset key", lambda s: s["dataset"].update(nmae="x")),
    ("an unknown output key", lambda s: s["output"].update(dri="x")),
    ("an unknown section", lambda s: s.update(datasett={"x": 1})),
    ("a negative seed", lambda s: s["output"].update(seed=-1)),
    ("a QI of an unknown kind", lambda s: s["dataset"]["qi"][0].update(kind="number")),
    ("an unknown task runner", lambda s: s.update(run={"task_runner": "ray"})),
    ("a [risk] limit above 1", lambda s: s.update(risk={"max_prosecutor": 2.0})),
]


def _sections(folder: Path) -> dict:
    """The census spec's sections, its paths from `folder`."""
    return tomllib.loads(census_spec_toml(input_name=str(folder / "census.csv"), seed=11))


@pytest.mark.parametrize("case, edit", SPEC_ERRORS, ids=[c for c, _ in SPEC_ERRORS])
def test_a_spec_refused_through_the_api_leaves_the_row_the_cli_leaves(census_dir, tmp_path, monkeypatch, case, edit):
    sections = _sections(Path("."))
    edit(sections)
    api_dir, cli_dir = census_dir / "api", census_dir / "cli"
    for folder in (api_dir, cli_dir):
        folder.mkdir()
        (folder / "census.csv").write_bytes((census_dir / "census.csv").read_bytes())
    monkeypatch.chdir(api_dir)
    with pytest.raises(SpecError) as refused:
        privpub.publish(pd.read_csv("census.csv"), sections)
    api_rows = _rows(api_dir / "privpub.duckdb")
    assert [(a, t, o) for a, t, o, _ in api_rows] == [("publish", "census", "failed")], api_rows
    detail = json.loads(api_rows[0][3])
    assert detail["message"] == str(refused.value) and detail["trigger"] == "direct" and detail["spec"] == "<dict>"

    # the same typo in a spec file through the CLI: the same row but for the trigger and spec
    (cli_dir / "spec.toml").write_text(_toml(sections))
    done = _cli(cli_dir, tmp_path, "publish", "spec.toml", "--quiet")
    assert done.returncode == 1
    cli_rows = _rows(cli_dir / "privpub.duckdb")
    assert [(a, t, o) for a, t, o, _ in cli_rows] == [("publish", "census", "failed")]
    assert json.loads(cli_rows[0][3])["message"] == detail["message"]


def _toml(sections: dict) -> str:
    """The sections as TOML (the few value types these specs hold)."""

    def value(v) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, float) and v == float("inf"):
            return "inf"
        return json.dumps(v)

    out = []
    for name, body in sections.items():
        out.append(f"[{name}]")
        out += [f"{k} = {value(v)}" for k, v in body.items()]
    return "\n".join(out) + "\n"


def test_an_api_refusal_goes_to_the_state_the_dict_names(census_dir, monkeypatch):
    monkeypatch.chdir(census_dir)
    sections = _sections(census_dir)
    sections["technique"]["k"] = "5"
    with pytest.raises(SpecError):
        privpub.publish("census.csv", sections, state="elsewhere/s.duckdb")
    (census_dir / "elsewhere").mkdir()
    with pytest.raises(SpecError):
        privpub.publish("census.csv", sections, state="elsewhere/s.duckdb")
    assert [r[2] for r in _rows(census_dir / "elsewhere" / "s.duckdb")] == ["failed"]
    assert not (census_dir / "privpub.duckdb").exists()  # not the default one
    spec = write_spec(census_dir, k=0)
    with pytest.raises(SpecError):
        privpub.publish(str(spec))  # a spec file: where the file says, as the CLI
    assert [r[2] for r in _rows(census_dir / "privpub.duckdb")] == ["failed"]


@pytest.mark.parametrize("where", ["/dev/null", "census.csv"])
def test_a_state_path_that_cannot_be_a_state_is_refused_and_journaled(census_dir, tmp_path, where):
    spec = census_dir / "spec.toml"
    spec.write_text(census_spec_toml(seed=11).replace('state = "privpub.duckdb"', f'state = "{where}"'))
    data = census_dir / "census.csv"
    before, mode = data.read_bytes(), data.stat().st_mode
    done = _cli(census_dir, tmp_path, "publish", "spec.toml", "--quiet")
    errors = [line for line in done.stderr.splitlines() if "warning" not in line]
    assert done.returncode == 1 and len(errors) == 1 and errors[0].startswith("privpub: error: the state file")
    assert "cannot be a state file" in errors[0] or "not a DuckDB database" in errors[0]
    assert data.read_bytes() == before and data.stat().st_mode == mode  # the input untouched
    assert not (census_dir / "census.csv.lock").exists() and not (census_dir / "census.csv.journal").exists()
    journal = census_dir / "privpub.duckdb.journal"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["action"], e["target"], e["outcome"]) for e in entries] == [("publish", "census", "failed")]
    assert entries[0]["detail"]["message"] == errors[0].removeprefix("privpub: error: ")
    # the next writer of the default state beside the spec folds it in
    Store(census_dir / "privpub.duckdb").log("steward", "note", None, "ok")
    assert [r[2] for r in _rows(census_dir / "privpub.duckdb")] == ["failed", "ok"]


def _killed_at(census_dir: Path, tmp_path: Path, stage: str) -> None:
    """`privpub publish` paused at a failpoint (state/failpoints.py), then SIGKILLed."""
    flag = tmp_path / f"paused-{stage}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "privpub.flows.cli", "publish", "spec.toml", "--quiet", "--allow-repeat"],
        cwd=census_dir,
        env=_env(tmp_path, PRIVPUB_PAUSE_AT=stage, PRIVPUB_PAUSE_FLAG=str(flag)),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while not flag.exists():
        assert proc.poll() is None and time.monotonic() < deadline, f"publish ended before {stage}"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.parametrize(
    "stage, outcome",
    [
        ("after-commit", "committed"),
        ("published", "committed"),
        ("commit", "interrupted"),
        ("anonymize", "interrupted"),
    ],
)
def test_a_publish_killed_anywhere_leaves_one_row(census_dir, tmp_path, stage, outcome):
    """Just after the COMMIT (`after-commit`: before the folder is renamed; `published`: after)
    the attempt's `committed` row exists and its marker is still there: the next writer must not
    add an `interrupted` row for it. Before the COMMIT the marker is the only trace: one row.

    Promise: every-attempt-in-audit-log."""
    write_spec(census_dir, seed=5)
    state = census_dir / "privpub.duckdb"
    Store(state).log("setup", "note", None, "ok")
    _killed_at(census_dir, tmp_path, stage)
    Store(state).log("other", "note", None, "ok")  # the next writer: recovery and folding
    rows = _rows(state)
    assert [(a, o) for a, _, o, _ in rows] == [("note", "ok"), ("publish", outcome), ("note", "ok")], rows
    assert not list(Store(state).attempts_dir.glob("*.json"))
    if outcome == "committed":  # the release is whole and verifies, history included
        release_id = rows[1][1]
        assert privpub.verify(release_id, state).attrs["ok"]
        assert privpub.verify(state=state, history=True).attrs["ok"]

"""A publish killed mid-way (SIGKILL: no handler runs) still leaves its row in the audit log
(issue 25 item 8): the attempt holds a flocked marker beside the state file while it runs, and the
next writer turns a marker whose process is gone into an "interrupted" row. A live attempt's
marker is left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from privpub.state.store import Store
from tests.helpers import child_pythonpath, write_spec

ROOT = Path(__file__).resolve().parents[1]


def _paused_publish(folder: Path, tmp_path: Path, spec: Path, flag: Path) -> subprocess.Popen:
    """`privpub publish` with no Prefect server, paused in its anonymize step."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT),
        PRIVPUB_HOME=str(tmp_path / "no-service"),
        PREFECT_HOME=str(tmp_path / "prefect"),
        PRIVPUB_PAUSE_AT="anonymize",
        PRIVPUB_PAUSE_FLAG=str(flag),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "privpub.flows.cli", "publish", str(spec), "--as", "steward"],
        cwd=folder,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _audit(state: Path) -> list[tuple]:
    with duckdb.connect(str(state), read_only=True) as con:
        return con.execute("SELECT actor, action, target, outcome, detail FROM audit_log ORDER BY id").fetchall()


def test_a_killed_publish_leaves_an_interrupted_row(census_dir, tmp_path):
    spec = write_spec(census_dir, seed=5)
    state = census_dir / "privpub.duckdb"
    store = Store(state)
    store.log("setup", "note", None, "ok")  # the state exists before the attempt
    flag = tmp_path / "paused"
    proc = _paused_publish(census_dir, tmp_path, spec, flag)
    deadline = time.monotonic() + 120
    while not flag.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "publish ended before its pause"
        time.sleep(0.1)

    # alive: a writer meanwhile leaves its marker alone
    markers = list(store.attempts_dir.glob("*.json"))
    assert len(markers) == 1
    store.log("other", "note", None, "ok")
    assert [r[3] for r in _audit(state)] == ["ok", "ok"] and markers[0].exists()

    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    store.log("other", "note", None, "ok")  # the next writer folds it
    rows = _audit(state)
    assert [r[3] for r in rows] == ["ok", "ok", "interrupted", "ok"]
    actor, action, target, _, detail = rows[2]
    assert (actor, action, target) == ("steward", "publish", "census")
    assert json.loads(detail)["spec"] == str(spec) and "killed" in json.loads(detail)["message"]
    assert not list(store.attempts_dir.glob("*.json"))


def test_an_attempt_that_ends_leaves_no_marker(census_dir, tmp_path):
    import privpub

    release = privpub.publish(str(write_spec(census_dir, seed=5)))
    store = Store(release.state)
    assert not list(store.attempts_dir.glob("*.json"))
    assert [r[3] for r in _audit(release.state)] == ["committed"]

"""Reading the state without holding any publish (issue 25 item 2): a DuckDB session on the state
file, read-only ones included, holds DuckDB's file lock and makes every writer wait, so analysts
read a consistent copy, `privpub snapshot OUT` / `privpub.snapshot(out)`; the wait names the
holding program and its pid."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

import privpub
from privpub.schemas.errors import StateBusy, StateError
from privpub.state.store import Store
from tests.test_python_api import frame_spec, people

HOLD = (
    "import duckdb, sys, time\n"
    "con = duckdb.connect(sys.argv[1], read_only=True)\n"
    "print('open', flush=True)\n"
    "time.sleep(120)\n"
)


def _hold_read_only(path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    return proc


def _rows(path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_snapshot_is_the_state_and_a_session_on_it_blocks_nobody(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = privpub.publish(people(), frame_spec(), state="state.duckdb")
    copy = privpub.snapshot(tmp_path / "for-analysts.duckdb", state="state.duckdb")
    assert copy == tmp_path / "for-analysts.duckdb" and copy.stat().st_mode & 0o777 == 0o600
    for sql in (
        "SELECT release_id, sequence FROM releases ORDER BY 1",
        "SELECT action, outcome FROM audit_log ORDER BY id",
        "SELECT release_id, name, value FROM release_metrics ORDER BY ALL",
    ):
        assert _rows(copy, sql) == _rows(tmp_path / "state.duckdb", sql)
    assert not list(tmp_path.glob(".*partial"))

    analyst = _hold_read_only(copy)
    try:  # the analyst's session on the copy: the next release commits at once
        second = privpub.publish(people(), frame_spec(seed=8), state="state.duckdb", allow_repeat=True)
    finally:
        analyst.kill()
        analyst.wait()
    assert _rows("state.duckdb", "SELECT release_id FROM releases ORDER BY sequence") == [(first,), (second,)]
    assert _rows(copy, "SELECT count(*) FROM releases") == [(1,)]  # the copy is of its moment

    with pytest.raises(StateError, match="already exists; name a new file"):
        privpub.snapshot(copy, state="state.duckdb")


def test_a_read_only_session_on_the_state_is_named_with_its_pid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    privpub.publish(people(), frame_spec(), state="state.duckdb")
    session = _hold_read_only(tmp_path / "state.duckdb")
    try:
        with pytest.raises(StateBusy) as busy:
            with Store(tmp_path / "state.duckdb", lock_timeout=0.5).write():
                pass
    finally:
        session.kill()
        session.wait()
    message = str(busy.value)
    assert f"pid {session.pid}" in message and "read-only ones included" in message
    assert "privpub snapshot" in message and "/root/" not in message


def test_the_cli_writes_the_snapshot_and_prints_its_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    privpub.publish(people(), frame_spec(), state="state.duckdb")
    done = subprocess.run(
        [sys.executable, "-m", "privpub.flows.cli", "snapshot", "copy.duckdb", "--state", "state.duckdb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path / "copy.duckdb"), done.stderr
    again = subprocess.run(
        [sys.executable, "-m", "privpub.flows.cli", "snapshot", "copy.duckdb", "--state", "state.duckdb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert again.returncode == 1 and again.stderr.strip().startswith("privpub: error:")
    assert "already exists" in again.stderr and len(again.stderr.strip().splitlines()) == 1

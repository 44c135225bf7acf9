"""The store opens the state file by attaching it to one in-process DuckDB per file
(state/attached.py, issue 43): what a caller and other processes see is what a connection of its
own gave (the file lock held exactly while open, a written file checkpointed at the end, the
same refusals)."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from privpub.schemas.errors import StateError
from privpub.state import attached
from privpub.state.store import Store

WRITE_ELSEWHERE = (
    "import duckdb, sys; c = duckdb.connect(sys.argv[1]); c.execute('CREATE TABLE t_other (x INT)'); c.close()"
)


def _written(tmp_path) -> Store:
    store = Store(tmp_path / "privpub.duckdb", lock_timeout=0)
    store.log("tester", "publish", "x", "refused")  # the first write makes and migrates the file
    return store


def test_after_a_read_and_a_write_another_process_can_write_and_no_wal_is_left(tmp_path):
    store = _written(tmp_path)
    assert not (tmp_path / "privpub.duckdb.wal").exists()  # DETACH checkpointed, as close() did
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM audit_log").fetchone() == (1,)
    res = subprocess.run([sys.executable, "-c", WRITE_ELSEWHERE, str(store.path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr  # nothing of this process holds the file any more


def test_while_open_another_process_cannot_write(tmp_path):
    store = _written(tmp_path)
    with store.read():
        res = subprocess.run([sys.executable, "-c", WRITE_ELSEWHERE, str(store.path)], capture_output=True, text=True)
    assert res.returncode != 0 and "lock" in res.stderr.lower(), res.stderr


def test_nested_reads_share_the_file_and_see_the_state(tmp_path):
    store = _written(tmp_path)
    with store.read() as outer, store.read() as inner:
        assert outer.execute("SELECT current_database()").fetchone() == (attached.ALIAS,)
        assert inner.execute("SELECT count(*) FROM audit_log").fetchone() == (1,)
    assert store.query(lambda con: con.execute("SELECT count(*) FROM audit_log").fetchone()) == (1,)


def test_another_mode_while_open_is_refused_as_before(tmp_path):
    store = _written(tmp_path)
    con = attached.attach(store.path, read_only=True)
    try:
        with pytest.raises(duckdb.ConnectionException, match="different configuration"):
            attached.attach(store.path, read_only=False)
        with pytest.raises(StateError, match="cannot open the state file"):
            store._connect(read_only=False)
    finally:
        attached.detach(store.path, con)
    with store.write() as con:  # released: writable again
        assert con.execute("SELECT count(*) FROM audit_log").fetchone() == (1,)


def test_a_file_that_is_not_a_database_is_named_and_the_next_open_works(tmp_path):
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"\0" * 8 + b"NOPE" + b"x" * 100)
    with pytest.raises(StateError, match="not a privpub state file"):
        Store(bad, lock_timeout=0)._connect(read_only=True)
    store = _written(tmp_path)
    assert store.schema_version() >= 10


def test_idle_databases_are_bounded(tmp_path):
    for i in range(attached.KEEP + 3):
        _written(tmp_path / str(i))
    assert len(attached._HOSTS) <= attached.KEEP

"""The DuckDB store: migrations, one-transaction commits, recovery, recognition of re-runs."""

from __future__ import annotations

import json
import os
from datetime import datetime

import duckdb
import pyarrow as pa
import pytest

from privpub.schemas.errors import StateError
from privpub.state.store import Store, stage_tables
from privpub.tasks.core.types import PrivacyResult


def _commit(store, out, key="k1", series="s", token_table=None):
    staged = stage_tables(out, {"table": token_table or pa.table({"x": [1, 2, 3]})})
    try:
        return store.commit_release(
            staged=staged,
            series=series,
            technique="generalization",
            parameters={"k": 2},
            spec={"dataset": {}},
            seed=5,
            input_fingerprint="fp",
            release_key=key,
            rows_in=3,
            privacy=[PrivacyResult("k-anonymity", 3, 2, True, {})],
            utility={"groups": 1},
            private={"note": {"a": 1}, "tbl": pa.table({"p": [0.5]})},
            info={},
            actor="test",
            flow_run_id=None,
            started_at=datetime(2026, 1, 1),
        )
    finally:
        staged.release_owner()


def test_commit_makes_files_visible_and_history_lists_it(tmp_path):
    store = Store(tmp_path / "state.duckdb")
    rid, created = _commit(store, tmp_path / "out")
    assert created and (tmp_path / "out" / rid / "table.parquet").is_file()
    assert not (tmp_path / "out" / ".staging").exists()
    hist = store.history()
    assert list(hist.columns) == [
        "release_id",
        "series",
        "sequence",
        "technique",
        "status",
        "seed",
        "created_at",
        "trigger",
        "actor",
        "flow_run_id",
    ]
    assert hist.sequence.tolist() == [1] and hist.status.tolist() == ["committed"]
    assert store.private(rid)["note"] == {"a": 1}
    assert store.private(rid)["tbl"].column("p").to_pylist() == [0.5]
    rid2, _ = _commit(store, tmp_path / "out", key="k2")
    assert store.history().sequence.tolist() == [1, 2] and rid2 != rid


def test_same_key_is_recognised_not_duplicated(tmp_path):
    store = Store(tmp_path / "state.duckdb")
    rid, _ = _commit(store, tmp_path / "out")
    again, created = _commit(store, tmp_path / "out")
    assert again == rid and not created
    assert len(store.history()) == 1
    assert sorted(os.listdir(tmp_path / "out")) == [rid]
    log = store.audit_log()
    assert log.outcome.tolist() == ["committed", "recognised"]


def test_migrations_are_versioned_and_idempotent(tmp_path):
    store = Store(tmp_path / "state.duckdb")
    _commit(store, tmp_path / "out")
    with store.write():
        pass
    from privpub.state.migrations import MIGRATIONS

    assert store.schema_version() == max(v for v, _, _ in MIGRATIONS)
    con = duckdb.connect(str(tmp_path / "state.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
    con.close()


def test_abandoned_staging_is_rolled_back_on_next_open(tmp_path):
    out = tmp_path / "out"
    staged = stage_tables(out, {"table": pa.table({"x": [1]})})
    staged.release_owner()  # the writer died before committing
    store = Store(tmp_path / "state.duckdb")
    store.watch_output_dir(out)
    with store.write():
        pass
    assert not (out / ".staging").exists()


def test_live_staging_is_left_alone(tmp_path):
    out = tmp_path / "out"
    staged = stage_tables(out, {"table": pa.table({"x": [1]})})  # owner still holds its lock
    store = Store(tmp_path / "state.duckdb")
    store.watch_output_dir(out)
    with store.write():
        pass
    assert staged.path.is_dir()
    staged.discard()


def test_reading_a_missing_state_file_is_a_clear_error(tmp_path):
    with pytest.raises(StateError, match="no state file"):
        Store(tmp_path / "none.duckdb").history()
    with pytest.raises(StateError, match="no committed release 'x'"):
        store = Store(tmp_path / "state.duckdb")
        _commit(store, tmp_path / "out")
        store.release("x")


def test_on_commit_runs_inside_the_commit_transaction(tmp_path):
    store = Store(tmp_path / "state.duckdb")
    calls = []

    def hook(con, release_id, seq):
        calls.append((release_id, seq))
        con.execute("INSERT INTO audit_log (logged_at, action, outcome) VALUES (now(), 'hook', ?)", [release_id])

    def failing(con, release_id, seq):
        hook(con, release_id, seq)
        raise RuntimeError("hook failed")

    staged = stage_tables(tmp_path / "out", {"table": pa.table({"x": [1]})})
    kwargs = dict(
        series="s",
        technique="serial",
        parameters={},
        spec={},
        seed=1,
        input_fingerprint="f",
        rows_in=1,
        privacy=[],
        utility={},
        private={},
        info={},
        actor="t",
        flow_run_id=None,
        started_at=datetime(2026, 1, 1),
    )
    with pytest.raises(RuntimeError, match="hook failed"):
        store.commit_release(staged=staged, release_key="a", on_commit=failing, **kwargs)
    staged.discard()
    log = store.audit_log()
    assert store.history().empty and "hook" not in set(log.action)  # rolled back together
    staged = stage_tables(tmp_path / "out", {"table": pa.table({"x": [1]})})
    rid, _ = store.commit_release(staged=staged, release_key="a", on_commit=hook, based_on_sequence=0, **kwargs)
    assert calls[-1] == (rid, 1)
    assert store.query(lambda con: con.execute("SELECT outcome FROM audit_log WHERE action = 'hook'").fetchall()) == [
        (rid,)
    ]
    # a stale commit is refused before the hook runs
    staged = stage_tables(tmp_path / "out", {"table": pa.table({"x": [2]})})
    from privpub.schemas.errors import StaleHistory

    with pytest.raises(StaleHistory):
        store.commit_release(staged=staged, release_key="b", on_commit=hook, based_on_sequence=0, **kwargs)
    assert len(calls) == 2 and len(store.history()) == 1


def test_migration_8_removes_the_person_from_serial_global_details_of_earlier_releases(tmp_path):
    """Releases committed before issue 25 named the serial-global worst pair by its person id."""
    store = Store(tmp_path / "state.duckdb")
    with store.write():
        pass
    con = duckdb.connect(str(tmp_path / "state.duckdb"))
    con.execute("DELETE FROM schema_migrations WHERE version = 8")
    con.execute(
        "INSERT INTO release_metrics VALUES ('r', 'privacy', 'serial-global', 0.3, '3/10', '1/2', true, "
        '\'{"person": "person-9f2c", "value": "flu", "links": 2, "p": "3/10"}\'), '
        "('r', 'privacy', 'k-anonymity', 2, '2', '2', true, '{\"person\": \"kept\"}')"
    )
    con.close()
    with store.write():
        pass
    con = duckdb.connect(str(tmp_path / "state.duckdb"), read_only=True)
    rows = dict(con.execute("SELECT name, detail FROM release_metrics").fetchall())
    con.close()
    assert json.loads(rows["serial-global"]) == {"value": "flu", "links": 2, "p": "3/10"}
    assert json.loads(rows["k-anonymity"]) == {"person": "kept"}  # other models' details untouched

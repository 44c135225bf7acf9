"""A new state file takes every migration in one transaction (state/store.py `_migrate`, issue 43
item 4: one WAL sync instead of one per migration): the same schema as migrations applied one by
one to a file that already holds a table, and nothing at all left when one of them fails."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from privpub.state import store as store_mod
from privpub.state.migrations import MIGRATIONS
from privpub.state.store import Store

SCHEMA_QUERIES = [
    "SELECT table_name, sql FROM duckdb_tables() WHERE table_name <> 'pre_existing' ORDER BY 1",
    "SELECT table_name, column_index, column_name, data_type, column_default, is_nullable FROM duckdb_columns() "
    "WHERE table_name <> 'pre_existing' ORDER BY 1, 2",
    "SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints() "
    "WHERE table_name <> 'pre_existing' ORDER BY 1, 2, 3",
    "SELECT index_name, table_name, sql FROM duckdb_indexes() ORDER BY 1",
    "SELECT sequence_name, start_value, increment_by FROM duckdb_sequences() ORDER BY 1",
    "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1",
    "SELECT version, description FROM schema_migrations ORDER BY 1",
]


def _schema(path: Path) -> list[list[tuple]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return [con.execute(q).fetchall() for q in SCHEMA_QUERIES]


def _tables(path: Path) -> list[str]:
    with duckdb.connect(str(path), read_only=True) as con:
        return [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]


def test_a_new_file_gets_the_schema_of_migrations_applied_one_by_one(tmp_path):
    new = tmp_path / "new.duckdb"
    with Store(new).write():
        pass
    stepwise = tmp_path / "stepwise.duckdb"
    with duckdb.connect(str(stepwise)) as con:  # a table already there: not a new file, one by one
        con.execute("CREATE TABLE pre_existing (x INTEGER)")
    with Store(stepwise).write():
        pass
    assert "pre_existing" in _tables(stepwise)
    schema = _schema(new)
    assert len(schema[0]) > 10 and [v for v, _ in schema[-1]] == [v for v, _, _ in MIGRATIONS]
    assert schema == _schema(stepwise)


@pytest.mark.parametrize("fails_at", [0, len(MIGRATIONS) // 2, len(MIGRATIONS) - 1])
def test_a_failed_migration_leaves_a_new_file_without_any(tmp_path, monkeypatch, fails_at):
    """All or nothing: no table, no migration recorded; the next write applies them all."""
    path = tmp_path / "state.duckdb"
    broken = list(MIGRATIONS)
    version, description, _ = broken[fails_at]
    broken[fails_at] = (version, description, "SELECT * FROM no_such_table")
    monkeypatch.setattr(store_mod, "MIGRATIONS", broken)
    with pytest.raises(duckdb.CatalogException):
        with Store(path).write():
            pass
    assert _tables(path) == []
    monkeypatch.setattr(store_mod, "MIGRATIONS", MIGRATIONS)
    with Store(path).write():
        pass
    assert Store(path).schema_version() == MIGRATIONS[-1][0]
    fresh = tmp_path / "fresh.duckdb"
    with Store(fresh).write():
        pass
    assert _schema(path) == _schema(fresh)


def test_a_failed_migration_of_an_existing_file_keeps_those_before_it(tmp_path, monkeypatch):
    """A file that holds tables still takes each migration in its own transaction."""
    path = tmp_path / "state.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE pre_existing (x INTEGER)")
    broken = list(MIGRATIONS)
    version, description, _ = broken[3]
    broken[3] = (version, description, "SELECT * FROM no_such_table")
    monkeypatch.setattr(store_mod, "MIGRATIONS", broken)
    with pytest.raises(duckdb.CatalogException):
        with Store(path).write():
            pass
    with duckdb.connect(str(path), read_only=True) as con:
        done = [r[0] for r in con.execute("SELECT version FROM schema_migrations ORDER BY 1").fetchall()]
    assert done == [v for v, _, _ in MIGRATIONS[:3]]

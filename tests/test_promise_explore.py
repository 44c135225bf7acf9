"""`privpub explore` writes nothing but its audit row and its page (issue 46, item 1), on a fresh
state (no state file yet), a state with a release and a state with a series of two: every file
under the state's folder and the output folder (names, bytes, mtimes) and every table of the
state are compared before and after. Serial asks the state for its pseudonym key; before issue 46
an explore of a serial spec on a fresh state made the key file and recorded it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb
import pytest

import privpub
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import table_query
from tests.test_contract import spec_dict, toml
from tests.test_drivers import _without_a_server

ROWS = 120
PAGE = "explore-census.html"
GRIDS = {"generalization": {"k": [3, 4]}, "serial": {"l": [2, 3]}}


def write_spec(folder: Path, name: str) -> Path:
    spec = spec_dict(name, series={"composition": "warn"})
    spec["output"].pop("seed")  # each release draws its own
    text = "\n".join(f"[{s}]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in body.items()) for s, body in spec.items())
    path = folder / "spec.toml"
    path.write_text(text)
    return path


def files(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder`: (sha256 of its bytes, mtime in ns), by relative name."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def tables(state: Path) -> dict[str, list[str]]:
    """Every table of the state, each as its sorted rows' text (the audit log apart)."""
    if not state.exists():
        return {}
    with duckdb.connect(str(state), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        out = {n: sorted(map(repr, con.execute(table_query(n)).fetchall())) for n in names}
    if "schema_migrations" in out:  # when each migration ran is no content: which ran is
        out["schema_migrations"] = [r.split(", datetime")[0] for r in out["schema_migrations"]]
    return out


def audit_only_state(folder: Path) -> dict[str, list[str]]:
    """The tables of a fresh state that only one audit row was written to: what explore may leave."""
    folder.mkdir()
    Store(folder / "privpub.duckdb").log("someone", "explore", "census", "explored", None, {})
    out = tables(folder / "privpub.duckdb")
    del out["audit_log"]
    return out


def prepared(folder: Path, name: str, releases: int) -> Path:
    census(ROWS, seed=5).to_csv(folder / "census.csv", index=False)
    spec = write_spec(folder, name)
    for _ in range(releases):
        privpub.publish(str(spec), allow_repeat=True)
    return spec


def assert_nothing_written(folder: Path, before_files, before_tables, fresh_tables) -> None:
    state = folder / "privpub.duckdb"
    after_files, after_tables = files(folder), tables(state)
    # the state file changes by its audit row; its lock file and the page are explore's own
    allowed = {"privpub.duckdb", "privpub.duckdb.lock", PAGE}
    assert {n: v for n, v in after_files.items() if n not in allowed} == {
        n: v for n, v in before_files.items() if n not in allowed
    }
    assert set(after_files) - set(before_files) <= allowed
    assert not (folder / "privpub.duckdb.key").exists() or "privpub.duckdb.key" in before_files
    log_before, log_after = before_tables.pop("audit_log", []), after_tables.pop("audit_log")
    assert len(log_after) == len(log_before) + 1 and set(log_before) <= set(log_after)
    # every other table as it was; a fresh state as one audit row alone leaves it (no key recorded)
    assert after_tables == (before_tables or fresh_tables)


@pytest.mark.parametrize(
    ("name", "releases"),
    [("generalization", 0), ("serial", 0), ("generalization", 1), ("serial", 2)],
    ids=["fresh state-generalization", "fresh state-serial", "one release-generalization", "a series of two-serial"],
)
def test_explore_writes_nothing_but_its_audit_row_and_page(tmp_path, name, releases):
    """Promise: explore-writes-nothing. No release folder, file, key, table row or summary."""
    fresh = audit_only_state(tmp_path / "reference")
    folder = tmp_path / "work"
    folder.mkdir()
    spec = prepared(folder, name, releases)
    before_files, before_tables = files(folder), tables(folder / "privpub.duckdb")
    assert ("privpub.duckdb.key" in before_files) is (releases > 0)
    explored = privpub.explore(str(spec), GRIDS[name])
    assert len(explored) == 2 and explored.passed.any()  # the settings did run
    assert_nothing_written(folder, before_files, before_tables, fresh)
    assert (folder / PAGE).is_file()


def test_explore_through_the_cli_on_a_fresh_serial_state_makes_no_key(tmp_path):
    """Promise: explore-writes-nothing. Serial reads the series' people by pseudonym: on a fresh
    state explore uses a throwaway key, and the first publish after it makes the real one."""
    fresh = audit_only_state(tmp_path / "reference")
    folder = tmp_path / "work"
    folder.mkdir()
    spec = prepared(folder, "serial", 0)
    before = files(folder)
    res = _without_a_server(folder, tmp_path, "-m", "privpub.flows.cli", "explore", str(spec), "--set", "l=2,3")
    assert res.returncode == 0, res.stderr
    assert_nothing_written(folder, before, {}, fresh)
    key = folder / "privpub.duckdb.key"
    assert not key.exists() and tables(folder / "privpub.duckdb")["pseudonym_key"] == []
    privpub.publish(str(spec))
    assert key.is_file() and oct(os.stat(key).st_mode & 0o777) == "0o600"
    assert len(tables(folder / "privpub.duckdb")["pseudonym_key"]) == 1

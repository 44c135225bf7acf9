"""The serial statistics in the state database (serial_pairs, serial_people, serial_values,
serial_summary; migrations 3 and 4): written in the commit transaction, read per release, checked
by `privpub verify`, moved there from the per-release blob of a state written before migration 3,
and keyed by integers in a state written before migration 4."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time

import duckdb
import pyarrow.parquet as pq

from privpub.flows.reverify import reverify
from privpub.flows.serial import serial_flow
from privpub.state.migrations import MIGRATIONS
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from privpub.tasks.techniques.serial import statistics as st
from privpub.tasks.techniques.serial import stored as ss
from tests.helpers import write_spec
from tests.test_cli import PRIVPUB, ROOT, _env, run
from tests.test_serial_pipeline import SERIAL, evolve, snapshot


def _spec(folder):
    spec = write_spec(folder, technique="serial", k=None, l=2, seed=1, extra=SERIAL)
    spec.write_text(spec.read_text().replace("k = 2\n", ""))
    return spec


_PAIRS = (
    "SELECT k.person, v.value, p.links, p.q, p.d, p.release_id FROM serial_pairs p "
    "JOIN serial_people k USING (series, pkey) JOIN serial_values v USING (series, vkey)"
)


def _stored_pairs(state):
    with duckdb.connect(str(state), read_only=True) as con:
        return con.execute(_PAIRS + " ORDER BY person, value").df()


def _own(store, release_id):
    """A committed release's history rows, membership and virtual members (tables or blobs)."""
    series = store.release(release_id)["series"]
    return ss.release_private(store, series, release_id) or store.private(release_id)


def _rebuilt(store, release_ids):
    """The aggregate rebuilt from the history rows of these releases, in the stored text form."""
    rows = st.concat_history([_own(store, r)["serial_stats"] for r in release_ids])
    agg = st.aggregate_to_arrow(st.aggregate(rows)).to_pandas()
    agg["person"] = agg["person"].astype(str)
    agg["value"] = agg["value"].astype(str)
    return agg.sort_values(["person", "value"]).reset_index(drop=True)[["person", "value", "links", "q", "d"]]


def _back_to_blobs(store, release_ids):
    """Put these releases' rows back where versions before migration 5 kept them: Parquet blobs
    in release_private."""
    own = {rid: _own(store, rid) for rid in release_ids}
    with duckdb.connect(str(store.path)) as con:
        for rid, tables in own.items():
            for name, table in tables.items():
                buf = io.BytesIO()
                pq.write_table(table, buf)
                con.execute("INSERT INTO release_private VALUES (?, ?, 'parquet', ?)", [rid, name, buf.getvalue()])
        con.execute(
            "DROP TABLE serial_history; DROP TABLE serial_membership; DROP TABLE serial_types; "
            "DELETE FROM schema_migrations WHERE version >= 5"
        )


def _summary(state):
    with duckdb.connect(str(state), read_only=True) as con:
        return con.execute("SELECT series, release_id, release FROM serial_summary").fetchall()


def _series(tmp_path, seed, releases, evolve_seed):
    """Publish `releases` releases of a census series; returns (spec, ids, next snapshot)."""
    frame = census(400, seed=seed)
    spec = _spec(tmp_path)
    ids = []
    for r in range(releases):
        snapshot(tmp_path, frame)
        ids.append(serial_flow(spec_path=str(spec)))
        frame = evolve(frame, evolve_seed + r)
    return spec, ids, frame


def test_statistics_tables_follow_the_series_and_verify_checks_them(prefect_server, tmp_path):
    spec, ids, _ = _series(tmp_path, 4, 3, 10)
    state = tmp_path / "privpub.duckdb"
    store = Store(state)
    stored = _stored_pairs(state)
    assert stored[["person", "value", "links", "q", "d"]].equals(_rebuilt(store, ids))
    assert set(stored.release_id) <= set(ids) and ids[-1] in set(stored.release_id)
    assert [row[1:] for row in _summary(state)] == [(ids[-1], 3)]
    for rid in ids:  # the cumulative aggregate is no longer a per-release blob
        assert not {"serial_aggregate", "serial_pairs", "serial_stats", "membership"} & set(store.private(rid))
        ok, lines = reverify(state, rid)
        assert ok, lines
        assert any(line.startswith("PASS serial-statistics") for line in lines), lines

    # a pair changed by the latest release, altered: verifying that release finds it, verifying
    # the first one (whose state of that pair is no longer stored) does not compare it
    changed = stored[stored.release_id == ids[-1]].iloc[0]
    with duckdb.connect(str(state)) as con:
        con.execute(
            "UPDATE serial_pairs p SET q = CAST(CAST(q AS HUGEINT) + 1 AS VARCHAR) FROM serial_people k, "
            "serial_values v WHERE k.pkey = p.pkey AND v.vkey = p.vkey AND k.person = ? AND v.value = ?",
            [changed.person, changed.value],
        )
    ok, lines = reverify(state, ids[-1])
    assert not ok and any(line.startswith("FAIL serial-statistics") for line in lines), lines
    if changed.person not in set(stored[stored.release_id == ids[0]].person):
        ok, lines = reverify(state, ids[0])
        assert ok, lines


def test_a_state_from_before_migration_3_publishes_the_next_release(prefect_server, tmp_path):
    frame = census(400, seed=8)
    spec = _spec(tmp_path)
    snapshot(tmp_path, frame)
    first = serial_flow(spec_path=str(spec))
    state = tmp_path / "privpub.duckdb"
    store = Store(state)
    # turn the state into what the previous version wrote: no statistics tables, the aggregate
    # as a blob in the release's private metadata
    agg = st.aggregate_to_arrow(st.aggregate(_own(store, first)["serial_stats"]))
    buf = io.BytesIO()
    pq.write_table(agg, buf)
    _back_to_blobs(store, [first])
    with duckdb.connect(str(state)) as con:
        con.execute(
            "DROP TABLE serial_pairs; DROP TABLE serial_summary; DROP TABLE serial_people; "
            "DROP TABLE serial_values; DELETE FROM schema_migrations WHERE version >= 3"
        )
        con.execute("INSERT INTO release_private VALUES (?, 'serial_aggregate', 'parquet', ?)", [first, buf.getvalue()])
    snapshot(tmp_path, evolve(frame, 9))
    second = serial_flow(spec_path=str(spec))
    assert store.schema_version() == MIGRATIONS[-1][0]  # upgraded to the latest migration
    stored = _stored_pairs(state)
    assert stored[["person", "value", "links", "q", "d"]].equals(_rebuilt(store, [first, second]))
    assert [row[1:] for row in _summary(state)] == [(second, 2)]
    assert "serial_aggregate" not in store.private(second)
    for rid in (first, second):
        ok, lines = reverify(state, rid)
        assert ok, lines


def test_a_state_from_before_migration_4_is_keyed_and_publishes_on(prefect_server, tmp_path):
    spec, ids, frame = _series(tmp_path, 6, 2, 20)
    state = tmp_path / "privpub.duckdb"
    before = _stored_pairs(state)
    # what migration 3 left: serial_pairs with person and value as text, no key tables, the
    # history rows and membership as blobs
    store = Store(state)
    _back_to_blobs(store, ids)
    with duckdb.connect(str(state)) as con:
        con.execute(
            "CREATE TABLE old_pairs AS SELECT p.series, k.person, v.value, p.links, p.q, p.d, p.p_hi, "
            "p.release_id FROM serial_pairs p JOIN serial_people k USING (series, pkey) "
            "JOIN serial_values v USING (series, vkey)"
        )
        con.execute(
            "DROP TABLE serial_pairs; DROP TABLE serial_people; DROP TABLE serial_values; "
            "ALTER TABLE old_pairs RENAME TO serial_pairs; DELETE FROM schema_migrations WHERE version = 4"
        )
    assert store.schema_version() == 3
    snapshot(tmp_path, frame)
    ids.append(serial_flow(spec_path=str(spec)))  # reads after upgrading the state to migrations 4, 5
    assert store.schema_version() == MIGRATIONS[-1][0]  # upgraded to the latest migration
    after = _stored_pairs(state)
    assert after[["person", "value", "links", "q", "d"]].equals(_rebuilt(store, ids))
    unchanged = after[after.release_id != ids[-1]].reset_index(drop=True)
    kept = before.merge(unchanged[["person", "value"]], on=["person", "value"]).reset_index(drop=True)
    assert unchanged.equals(kept)  # pairs the third release did not name came through the migration as they were
    for rid in ids:
        ok, lines = reverify(state, rid)
        assert ok, lines


def test_sigkill_inside_the_serial_commit_leaves_the_statistics_unchanged(prefect_server, tmp_path):
    frame = census(300, seed=2)
    spec = _spec(tmp_path)
    snapshot(tmp_path, frame)
    assert run(["serial", str(spec)], prefect_server).returncode == 0
    state = tmp_path / "privpub.duckdb"
    pairs, summary = _stored_pairs(state), _summary(state)
    snapshot(tmp_path, evolve(frame, 3))
    flag = tmp_path / "paused"
    proc = subprocess.Popen(
        PRIVPUB + ["serial", str(spec), "--server"],  # on the server, asked (issue 42)
        cwd=ROOT,
        start_new_session=True,
        env=_env(prefect_server, PRIVPUB_PAUSE_AT="commit", PRIVPUB_PAUSE_FLAG=str(flag)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 240
    while not flag.exists():  # paused after the statistics were written, before COMMIT
        assert proc.poll() is None, "serial ended before reaching the pause point"
        assert time.time() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert _stored_pairs(state).equals(pairs) and _summary(state) == summary
    res = run(["serial", str(spec)], prefect_server)
    assert res.returncode == 0, res.stderr
    store = Store(state)
    ids = store.history().release_id.tolist()
    assert len(ids) == 2 and _summary(state)[0][1:] == (ids[-1], 2)
    assert _stored_pairs(state)[["person", "value", "links", "q", "d"]].equals(_rebuilt(store, ids))

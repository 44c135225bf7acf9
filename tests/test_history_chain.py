"""A tamper-evident history (issue 41 item 9): release rows, their figures and audit rows chained
by hash (state/chain.py), a manifest.json per release folder, `privpub verify` and
`privpub verify --history` naming an edited or deleted row. Each tamper here passed verify before."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import privpub
from privpub.state import chain
from privpub.state.store import Store
from tests.helpers import write_spec


def _publish_two(folder: Path) -> tuple[Path, list[str]]:
    spec = write_spec(folder, seed=5)
    first = privpub.publish(str(spec))
    second = privpub.publish(str(spec), overrides={"output": {"seed": 6}}, allow_repeat=True)
    return folder / "privpub.duckdb", [str(first), str(second)]


@pytest.fixture
def two(census_dir) -> tuple[Path, list[str]]:
    return _publish_two(census_dir)


def _sql(state: Path, sql: str, args: list | None = None) -> None:
    with duckdb.connect(str(state)) as con:
        con.execute(sql, args or [])


def _fails(frame: pd.DataFrame) -> list[str]:
    return [line for line in frame.attrs["lines"] if line.startswith("FAIL")]


def test_an_untouched_history_passes_and_says_what_is_chained(two):
    state, (first, second) = two
    checks = privpub.verify(first, state)
    assert checks.attrs["ok"], checks.attrs["lines"]
    history = checks[checks.check == "history"]
    assert history.status.tolist() == ["PASS"] and "its manifest.json match" in history.detail.iloc[0]
    whole = privpub.verify(state=state, history=True)
    assert whole.attrs["ok"] and whole.attrs["lines"][0] == f"history of {state}"
    assert "every manifest (2 releases) and its files match" in whole.attrs["lines"][-1]
    with duckdb.connect(str(state), read_only=True) as con:
        counts = dict(con.execute("SELECT chain, count(*) FROM history_chain GROUP BY chain").fetchall())
        rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in chain.CHAINS}
    # every row of the three tables has its entry (the verify rows included, chained as written)
    assert counts["release_rows"] == rows["release_rows"] == 2
    assert counts["release_metrics"] == rows["release_metrics"] > 10
    assert counts["audit_log"] == rows["audit_log"] >= 4  # two commits, two verify rows


# each tamper: SQL on the state, then the words the FAIL line must hold (table and row named)
TAMPERS = {
    "seed": ("UPDATE release_rows SET seed = 987654321 WHERE release_id = $first", ["release_rows", "release $first"]),
    "parameters": (
        'UPDATE release_rows SET parameters = \'{"k": 2, "l": 3}\' WHERE release_id = $first',
        ["release_rows", "release $first"],
    ),
    "a figure": (
        "UPDATE release_metrics SET text_value = '50', value = 50 WHERE release_id = $first AND name = 'k-anonymity'",
        ["release_metrics", "figure privacy k-anonymity of release $first"],
    ),
    "an audit row deleted": ("DELETE FROM audit_log WHERE id = 1", ["audit_log", "row id 1", "deleted"]),
    "an audit row edited": (
        "UPDATE audit_log SET outcome = 'refused' WHERE id = 1",
        ["audit_log", "row id 1", "edited"],
    ),
    "a release row deleted": ("DELETE FROM release_rows WHERE release_id = $first", ["release $first", "deleted"]),
    "an audit row added by hand": (
        "INSERT INTO audit_log (logged_at, action, outcome) VALUES (now(), 'publish', 'committed')",
        ["audit_log", "not in the chain"],
    ),
}


@pytest.mark.parametrize("name", list(TAMPERS))
def test_each_edit_of_the_state_is_detected_and_named(two, name):
    """Each kind of edit of the state fails verify --history, naming the table and row.

    Promise: history-tamper-detected."""
    state, (first, second) = two
    sql, words = TAMPERS[name]
    _sql(state, sql.replace("$first", f"'{first}'"))
    whole = privpub.verify(state=state, history=True)
    fails = _fails(whole)
    assert not whole.attrs["ok"] and fails, whole.attrs["lines"]
    wanted = [w.replace("$first", first) for w in words]
    assert any(all(w in line for w in wanted) for line in fails), (wanted, fails)
    # the untouched release's own verify fails too: the chains are checked whole
    own = privpub.verify(second, state)
    assert not own.attrs["ok"] and any(all(w in line for w in wanted) for line in _fails(own))
    if name == "seed":  # names the row, never the values
        assert not [line for line in whole.attrs["lines"] + own.attrs["lines"] if "987654321" in line]


def test_a_deleted_chain_entry_or_a_truncated_tail_is_named(two):
    """A deleted row, in the middle or at the end of a chain, is named.

    Promise: history-tamper-detected."""
    state, _ = two
    _sql(state, "DELETE FROM history_chain WHERE chain = 'audit_log' AND pos = 1; DELETE FROM audit_log WHERE id = 1")
    fails = _fails(privpub.verify(state=state, history=True))
    assert any("audit_log before row id 2: chain entries 1 to 1 deleted" in line for line in fails), fails
    (state.parent / "again").mkdir()
    (state.parent / "again" / "census.csv").write_bytes((state.parent / "census.csv").read_bytes())
    state2, _ = _publish_two(state.parent / "again")
    last = duckdb.connect(str(state2), read_only=True).execute("SELECT max(id) FROM audit_log").fetchone()[0]
    _sql(
        state2,
        f"DELETE FROM audit_log WHERE id = {last}; "
        f"DELETE FROM history_chain WHERE chain = 'audit_log' AND row_key = '{last}'",
    )
    fails = _fails(privpub.verify(state=state2, history=True))
    assert any("audit_log after position" in line and "deleted at the end" in line for line in fails), fails


def test_an_edited_or_missing_manifest_is_named(two):
    """An edited or missing manifest.json is named.

    Promise: history-tamper-detected."""
    state, (first, second) = two
    folder = state.parent / "releases" / first
    manifest = folder / "manifest.json"
    body = json.loads(manifest.read_text())
    body["seed"] += 1
    manifest.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    fails = _fails(privpub.verify(first, state))
    assert any(f"manifest.json of release {first}: edited" in line for line in fails), fails
    assert any(f"release {first}: its seed in the state and in its manifest.json differ" in line for line in fails)
    manifest.unlink()
    fails = _fails(privpub.verify(state=state, history=True))
    assert fails == [f"FAIL history: manifest.json of release {first}: missing from its folder"]


def test_a_chain_recomputed_by_an_attacker_is_caught_by_the_manifests(two):
    """Write access to the state lets one recompute every hash after an edit; the manifests in
    the release folders (and their sha256 printed at publish) still hold what was published.

    Promise: recomputed-chain-caught-by-manifests."""
    state, (first, _) = two
    with duckdb.connect(str(state)) as con:
        con.execute("UPDATE release_rows SET seed = 1 WHERE release_id = ?", [first])
        chain.chain_existing(con)  # the attacker's re-chaining
    fails = _fails(privpub.verify(state=state, history=True))
    assert fails == [
        f"FAIL history: release_rows release {first}: its seed in the state and in its manifest.json differ"
    ]


def test_a_published_table_changed_on_disk_is_named_by_verify_history(two):
    """A byte added to a published table is named by verify --history.

    Promise: verify-detects-a-changed-published-file."""
    state, (first, _) = two
    table = state.parent / "releases" / first / "table.parquet"
    table.write_bytes(table.read_bytes() + b"x")
    fails = _fails(privpub.verify(state=state, history=True))
    assert fails == [
        f"FAIL history: published file table.parquet of release {first}: missing or not the one in its manifest.json"
    ]


def test_the_manifest_lists_files_parameters_seed_figures_and_the_previous_manifest(two):
    state, (first, second) = two
    folders = [state.parent / "releases" / rid for rid in (first, second)]
    texts = [(f / "manifest.json").read_bytes() for f in folders]
    shas = [hashlib.sha256(t).hexdigest() for t in texts]
    m1, m2 = (json.loads(t) for t in texts)
    assert sorted(p.name for p in folders[0].iterdir()) == ["manifest.json", "report.html", "table.parquet"]
    for m, folder in ((m1, folders[0]), (m2, folders[1])):
        assert m["files"] == {
            name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in ("report.html", "table.parquet")
        }
    assert (m1["seed"], m2["seed"]) == (5, 6) and m1["parameters"] == {"k": 5, "l": 3} | m1["parameters"]
    assert m1["previous_manifest"] is None and m2["previous_manifest"] == shas[0] and m2["previous_release"] == first
    rel = Store(state).release(first)
    k = rel["metrics"].set_index("name").loc["k-anonymity"]
    assert m1["figures"]["privacy"]["k-anonymity"] == {"value": k.text_value, "threshold": k.threshold, "passed": True}
    # the trail's committed rows carry each manifest's sha256: a copy of the trail is an anchor
    trail = Store(state).audit_log()
    committed = [json.loads(d)["manifest"] for d in trail[trail.outcome == "committed"].detail]
    assert committed == shas


def test_the_manifest_names_nobody(census_dir):
    people = pd.read_csv(census_dir / "census.csv")
    people["pid"] = [f"PERSON-{i:05d}" for i in range(len(people))]  # ids a scan cannot miss
    people.to_csv(census_dir / "census.csv", index=False)
    state, ids = _publish_two(census_dir)
    for rid in ids:
        text = (census_dir / "releases" / rid / "manifest.json").read_text()
        assert "PERSON-" not in text
        assert "worst" not in text  # no figure's worst-case detail


def test_the_chain_survives_a_snapshot(two, tmp_path):
    state, (first, _) = two
    copy = privpub.snapshot(tmp_path / "copy.duckdb", state)
    assert privpub.verify(state=copy, history=True).attrs["ok"]
    _sql(Path(copy), "UPDATE release_rows SET seed = 7 WHERE release_id = ?", [first])
    assert not privpub.verify(state=copy, history=True).attrs["ok"]


def test_the_migration_chains_an_existing_state_and_says_so(census_dir):
    """A state as the previous version left it (no chain): the migration chains what it finds;
    edits after it are caught, and verify says edits before it could not be."""
    state, (first, _) = _publish_two(census_dir)
    with duckdb.connect(str(state)) as con:
        con.execute("DROP TABLE history_chain; DROP TABLE history_anchor; DROP TABLE release_manifests")
        con.execute("DELETE FROM schema_migrations WHERE version = 10")
        con.execute("UPDATE release_rows SET seed = 9 WHERE release_id = ?", [first])  # before the chain
    Store(state).upgrade()
    whole = privpub.verify(state=state, history=True)
    assert whole.attrs["ok"], whole.attrs["lines"]
    assert "were chained as they were (edits before it are not detected)" in whole.attrs["lines"][-1]
    assert any("has no manifest (committed before the history was chained)" in line for line in whole.attrs["lines"])
    _sql(state, "UPDATE release_rows SET seed = 10 WHERE release_id = ?", [first])
    assert any(f"release {first}: edited" in line for line in _fails(privpub.verify(state=state, history=True)))


def test_the_canonical_form_does_not_depend_on_how_duckdb_prints_values():
    """Floats exact (NaN and infinities too), NULL as null, timestamps with microseconds, JSON
    re-dumped with sorted keys: the same row in another column order or JSON spacing hashes the same."""
    cols = ("id", "value", "at", "detail", "none")
    row = (3, 0.1, datetime(2026, 1, 2, 3, 4, 5, 6), '{"b": 1, "a": [1.5, null]}', None)
    text = chain.canonical_row("t", cols, row)
    assert json.loads(text) == [
        1,
        "t",
        [
            ["id", 3],
            ["value", ["f", (0.1).hex()]],
            ["at", ["t", "2026-01-02T03:04:05.000006"]],
            ["detail", ["j", '{"a":[1.5,null],"b":1}']],
            ["none", None],
        ],
    ]
    assert chain.canonical_row("t", cols, (3, 0.1, row[2], '{ "a": [1.5, null], "b": 1 }', None)) == text
    assert chain.canonical_row("t", cols, (3, float("0.1000000000000000055511151231257827"), *row[2:])) == text
    assert chain.canonical_row("t", cols, (3, math.nextafter(0.1, 1), *row[2:])) != text
    nan = chain.canonical_row("t", ("value",), (math.nan,))
    assert json.loads(nan)[2] == [["value", ["f", "nan"]]]
    with pytest.raises(TypeError):
        chain.canonical_row("t", ("x",), (object(),))


@pytest.mark.parametrize("killed", ["verify", "verify-history"])
def test_a_kill_between_an_audit_row_and_its_chain_entry_leaves_neither(two, killed):
    """An audit row written outside a transaction of its caller (verify's row) and its chain entry
    commit together: SIGKILL between the two leaves no row outside the chain (CI once found
    "audit_log row id 8: not in the chain" after a kill at a random moment).

    Promise: no-half-release-after-kill."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import child_pythonpath

    state, (first, _) = two
    with duckdb.connect(str(state), read_only=True) as con:
        before = con.execute("SELECT count(*) FROM audit_log").fetchone()[0]
    flag = state.parent / "paused.flag"
    root = Path(__file__).resolve().parents[1]
    args = (
        ["verify", first, "--state", str(state)]
        if killed == "verify"
        else ["verify", "--history", "--state", str(state)]
    )
    env = {**os.environ, "PYTHONPATH": child_pythonpath(root), "PRIVPUB_PAUSE_AT": "audit-row"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "privpub.flows.cli", *args],
        env={**env, "PRIVPUB_PAUSE_FLAG": str(flag)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert flag.exists(), "the run ended before writing its audit row"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with duckdb.connect(str(state), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM audit_log").fetchone()[0] == before  # the row went with the kill
    whole = privpub.verify(state=state, history=True)
    assert whole.attrs["ok"], _fails(whole)

"""Person ids in the state are keyed pseudonyms (state/pseudonyms.py; issue 25, item 11): a
copied state file names nobody, returning people are still recognised (the same figures and
published tables as with the ids in clear), the key is owner-only and apart from the state, a
state whose key is missing is refused, and migration 9 turns an older state's ids into
pseudonyms."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tomllib
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from privpub.schemas.errors import StateError
from privpub.state import pseudonyms as ps
from privpub.state.migrations import MIGRATIONS
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import census_spec_toml
from tests.test_release_hashes import content_sha256
from tests.test_serial_pipeline import SERIAL, evolve

PLANTED = re.compile(r"PLANTED-ID-\d{5}")
KEEP = "[series]\nkeep_groups = true"


def planted(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with distinctive person ids, easy to find wherever they are written."""
    return frame.assign(pid=[f"PLANTED-ID-{i:05d}" for i in frame["pid"]])


def clear_ids_in_state(state: Path) -> list[str]:
    """Where a planted id occurs in the state database: every column of every table as text
    (a Parquet blob read as a table, any other blob as bytes), then the raw bytes of the file
    and its WAL."""
    found = []
    with duckdb.connect(str(state), read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'main'"
        ).fetchall()
        for table, column, kind in columns:
            if kind == "BLOB":
                texts = [_blob_text(bytes(b)) for (b,) in con.execute(f'SELECT "{column}" FROM "{table}"').fetchall()]
                text = "\n".join(texts)
            else:
                text = con.execute(
                    f'SELECT string_agg(CAST("{column}" AS VARCHAR), chr(10)) FROM "{table}"'
                ).fetchone()[0]
            if text and PLANTED.search(text):
                found.append(f"{table}.{column}")
    for path in (state, Path(str(state) + ".wal")):
        if path.exists() and PLANTED.search(path.read_bytes().decode("latin-1")):
            found.append(path.name)
    return found


def _blob_text(payload: bytes) -> str:
    try:
        return json.dumps(pq.read_table(pa.BufferReader(payload)).to_pylist(), default=str)
    except (pa.ArrowInvalid, OSError):
        return payload.decode("latin-1")


def clear_hook(monkeypatch) -> None:
    """What versions before migration 9 stored: the ids' own text (DuckDB's cast)."""

    def clear(self, ids):
        array = ps._as_arrow(ids)
        return array if pa.types.is_string(array.type) else pc.cast(array, pa.string())

    monkeypatch.setattr(ps.Pseudonyms, "of", clear)


def back_to_version_8(state: Path) -> None:
    """The state as the previous version left it: no key, no record of one, migration 9 pending."""
    with duckdb.connect(str(state)) as con:
        con.execute("DROP TABLE pseudonym_key; DELETE FROM schema_migrations WHERE version = 9")
    Path(str(state) + ".key").unlink()


# --- the two series each test publishes ----------------------------------------------------------


def publish_generalization(folder: Path, frame: pd.DataFrame) -> dict:
    """One month of a keep_groups generalization series (run_release: figures in hand)."""
    from privpub.flows.publish import run_release
    from privpub.schemas.spec import resolve_spec

    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(census_spec_toml(k=10, l=3, seed=7, extra=KEEP))
    return run_release(resolve_spec(str(folder / "spec.toml"), None, None))


def publish_serial(folder: Path, frame: pd.DataFrame, registration: pd.DataFrame) -> str:
    from privpub.flows.serial import serial_flow

    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / "census.csv", index=False)
    registration.to_csv(folder / "registered.csv", index=False)
    toml = census_spec_toml(k=None, l=2, seed=1, technique="serial", extra=SERIAL)
    toml = toml.replace('person_id = "pid"', 'person_id = "pid"\nregistration = "registered.csv"')
    (folder / "spec.toml").write_text(toml)
    return serial_flow(spec_path=str(folder / "spec.toml"))


def months(n: int) -> tuple[list[pd.DataFrame], list[pd.DataFrame], pd.DataFrame]:
    """n months of each series (planted ids) and the serial series' registration list."""
    pool = census(900, seed=2)
    general = [planted(pool.sample(frac=0.8, random_state=m).reset_index(drop=True)) for m in range(n)]
    frame, serial = census(300, seed=4), []
    for m in range(n):
        serial.append(frame)
        frame = evolve(frame, 10 + m)
    registered = pd.concat(serial).drop_duplicates("pid")
    present = set(serial[-1]["pid"])
    registered = pd.concat([registered, census(40, seed=99).assign(pid=lambda f: f["pid"] + 10_000)])
    assert not present >= set(registered["pid"])  # some registered people are absent: virtual members
    return general, [planted(f) for f in serial], planted(registered)


def figures(results) -> list[tuple]:
    return [(r.model, str(r.value), r.passed, json.dumps(r.worst, sort_keys=True, default=str)) for r in results]


def serial_figures(state: Path, release_id: str) -> list[tuple]:
    metrics = Store(state).release(release_id)["metrics"]
    return sorted(
        metrics[metrics.kind == "privacy"][["name", "text_value", "passed", "detail"]].itertuples(index=False)
    )


def table_hashes(folder: Path, release_id: str) -> dict[str, str]:
    files = Store(folder / "privpub.duckdb").release(release_id)["tables"].file
    return {f: content_sha256(folder / "releases" / release_id / f) for f in files}


# --- tests --------------------------------------------------------------------------------------


def test_pseudonyms_are_the_keyed_hash_of_the_ids_text():
    """The stored person is the keyed hash of the id, derived independently here.

    Promise: state-holds-no-person-id."""
    key = ps.Pseudonyms(bytes(range(32)))
    ids = pa.array([17, 18, 17])
    got = key.of(ids).to_pylist()
    assert got == [ps.expected(key.key, "17"), ps.expected(key.key, "18"), ps.expected(key.key, "17")]
    assert got[0] == got[2] != got[1] and all(re.fullmatch(r"[0-9a-f]{32}", p) for p in got)
    assert key.of(pa.array(["17"])).to_pylist()[0] == got[0]  # an id and its text: one person
    other = ps.Pseudonyms(bytes(range(1, 33)))
    assert other.of(ids).to_pylist()[0] != got[0]  # another key, other pseudonyms
    assert list(key.of_numpy(np.array(["PLANTED-ID-00017"], dtype=object))) == [
        ps.expected(key.key, "PLANTED-ID-00017")
    ]
    assert key.key.hex() not in key.check and key.check == ps.expected(key.key, ps.CHECK_TEXT)


def test_a_copied_state_names_nobody_and_a_migrated_one_recognises_everybody(prefect_server, tmp_path, monkeypatch):
    """Two series (generalization with keep_groups; serial with a registration list) published
    with the ids in clear as before migration 9, then a third release after it; and the same
    releases published with pseudonyms all along: the same figures and tables.

    Promise: state-holds-no-person-id."""
    general, serial, registered = months(3)
    old, new = tmp_path / "old", tmp_path / "new"
    with monkeypatch.context() as m:
        clear_hook(m)
        for frame in general[:2]:
            publish_generalization(old / "g", frame)
        for frame in serial[:2]:
            publish_serial(old / "s", frame, registered)
    for folder in (old / "g", old / "s"):
        back_to_version_8(folder / "privpub.duckdb")
    # the scanner finds the clear ids where the previous version left them
    assert "compose_people.person" in clear_ids_in_state(old / "g" / "privpub.duckdb")
    assert {"serial_people.person", "serial_summary.summary", "release_private.payload"} <= set(
        clear_ids_in_state(old / "s" / "privpub.duckdb")
    )

    migrated = publish_generalization(old / "g", general[2])  # migration 9 runs first
    migrated_serial = publish_serial(old / "s", serial[2], registered)
    for frame in general:
        fresh = publish_generalization(new / "g", frame)
    fresh_serial = [publish_serial(new / "s", frame, registered) for frame in serial][-1]

    for folder in (old / "g", old / "s", new / "g", new / "s"):
        state = folder / "privpub.duckdb"
        assert clear_ids_in_state(state) == [], folder
        assert Store(state).schema_version() == MIGRATIONS[-1][0]  # every migration applied, 9 (pseudonyms) among them
        assert (Path(str(state) + ".key")).stat().st_size == ps.KEY_BYTES
    # returning people recognised after the migration exactly as with pseudonyms all along
    comp = {r.model: r for r in migrated["privacy"]}["series-composition-l"]
    assert comp.worst["returning"] > 0
    assert figures(migrated["privacy"]) == figures(fresh["privacy"])
    assert table_hashes(old / "g", migrated["release_id"]) == table_hashes(new / "g", fresh["release_id"])
    assert serial_figures(old / "s" / "privpub.duckdb", migrated_serial) == serial_figures(
        new / "s" / "privpub.duckdb", fresh_serial
    )
    assert table_hashes(old / "s", migrated_serial) == table_hashes(new / "s", fresh_serial)
    # virtual members (registered people absent from the release) were matched and verified
    from privpub.flows.reverify import reverify

    ok, lines = reverify(old / "s" / "privpub.duckdb", migrated_serial)
    assert ok and any(line.startswith("PASS serial-virtual-members") for line in lines), lines


def test_the_key_is_owner_only_apart_and_a_state_without_it_is_refused(prefect_server, tmp_path, monkeypatch):
    """The key file is 0600; a state whose key is missing is refused for a new release.

    Promise: missing-pseudonym-key-refused."""
    general, _, _ = months(2)
    folder = tmp_path / "g"
    publish_generalization(folder, general[0])
    state = folder / "privpub.duckdb"
    key = Path(str(state) + ".key")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == ps.KEY_BYTES
    secret = key.read_bytes()
    assert secret not in state.read_bytes() and secret.hex().encode() not in state.read_bytes()

    # a copy of the state without its key: history and trail work, a new release is refused
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    (copy / "privpub.duckdb.key").unlink()
    copied = Store(copy / "privpub.duckdb")
    assert len(copied.history()) == 1 and len(copied.trail()) >= 1
    with pytest.raises(StateError) as refused:
        publish_generalization(copy, general[1])
    message = str(refused.value)
    assert "\n" not in message and str(copy / "privpub.duckdb.key") in message and ps.KEY_ENV in message
    assert len(copied.history()) == 1 and not (copy / "privpub.duckdb.key").exists()  # no new key made

    # another key is refused too; the right one named by the environment variable is used
    (copy / "privpub.duckdb.key").write_bytes(os.urandom(ps.KEY_BYTES))
    with pytest.raises(StateError, match="is not the key of the state file"):
        copied.pseudonyms()
    (copy / "privpub.duckdb.key").unlink()
    elsewhere = tmp_path / "keys" / "census.key"
    elsewhere.parent.mkdir()
    shutil.copy(key, elsewhere)
    monkeypatch.setenv(ps.KEY_ENV, str(elsewhere))
    out = publish_generalization(copy, general[1])
    comp = {r.model: r for r in out["privacy"]}["series-composition-l"]
    assert comp.worst["returning"] > 0  # the copy's people recognised with the key from elsewhere
    assert not (copy / "privpub.duckdb.key").exists()


def test_the_cli_refuses_a_series_state_without_its_key_in_one_line(prefect_server, tmp_path):
    """The CLI says so in one line naming the key file.

    Promise: missing-pseudonym-key-refused."""
    from tests.test_cli import run

    general, _, _ = months(2)
    publish_generalization(tmp_path, general[0])
    (tmp_path / "privpub.duckdb.key").unlink()
    general[1].to_csv(tmp_path / "census.csv", index=False)
    out = run(["publish", str(tmp_path / "spec.toml")], prefect_server)
    assert out.returncode != 0
    lines = [line for line in out.stderr.splitlines() if "privpub.duckdb.key" in line]
    assert len(lines) == 1 and "is missing" in lines[0], out.stderr
    assert "Traceback" not in out.stderr and not PLANTED.search(out.stdout + out.stderr)
    assert run(["history", "--state", str(tmp_path / "privpub.duckdb")], prefect_server).returncode == 0


# --- second tests: migration 9's rewrite read against the definition, and a key from elsewhere ----


def census_spec_dict() -> dict:
    """The census spec of publish_generalization as a dict, for privpub.publish(frame, spec)."""
    spec = tomllib.loads(census_spec_toml(k=10, l=3, seed=7, extra=KEEP))
    del spec["dataset"]["input"]
    return spec


def keyed_hash(key: bytes, text: str) -> str:
    """The definition (state/pseudonyms.py): the first 128 bits, in hex, of SHA-256(hex(key) || text)."""
    return hashlib.sha256(key.hex().encode() + text.encode()).hexdigest()[:32]


def test_migration_9_turns_each_stored_person_into_the_keyed_hash_of_its_id(tmp_path, monkeypatch):
    """A version-8 state holding a series' people in clear: after the migration each person row
    (the same series and number) holds the keyed hash of the id it held, by the definition
    computed here, under the key file the migration made; the file names nobody."""
    import privpub

    monkeypatch.chdir(tmp_path)
    frame = planted(census(300, seed=2))
    with monkeypatch.context() as m:
        clear_hook(m)
        privpub.publish(frame, census_spec_dict())
    state = tmp_path / "privpub.duckdb"
    back_to_version_8(state)

    def people() -> dict[tuple[int, int], str]:
        with duckdb.connect(str(state), read_only=True) as con:
            return {
                (s, p): person
                for s, p, person in con.execute("SELECT sid, pkey, person FROM compose_people").fetchall()
            }

    before = people()
    assert sorted(before.values()) == sorted(frame["pid"])  # every person, in clear

    Store(state).upgrade()  # migration 9
    key = Path(str(state) + ".key").read_bytes()
    assert len(key) == ps.KEY_BYTES
    assert people() == {at: keyed_hash(key, person) for at, person in before.items()}
    assert clear_ids_in_state(state) == []


def test_the_cli_refuses_the_key_of_another_state_named_in_the_environment(tmp_path, monkeypatch):
    """Two series states, each with its own key; PRIVPUB_PSEUDONYM_KEY_FILE naming the other
    state's key (a valid key, just not this state's): a fresh `privpub publish` refuses in one
    line, commits nothing and leaves both keys as they were; with the variable unset the same
    month is published and its returning people recognised."""
    import privpub
    from tests.test_drivers import _without_a_server

    general, _, _ = months(2)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for folder in (ours, theirs):
        folder.mkdir()
        monkeypatch.chdir(folder)
        privpub.publish(general[0], census_spec_dict())
    keys = {folder: Path(folder / "privpub.duckdb.key").read_bytes() for folder in (ours, theirs)}
    assert keys[ours] != keys[theirs]

    general[1].to_csv(ours / "census.csv", index=False)
    (ours / "spec.toml").write_text(census_spec_toml(k=10, l=3, seed=7, extra=KEEP))
    monkeypatch.setenv(ps.KEY_ENV, str(theirs / "privpub.duckdb.key"))
    res = _without_a_server(ours, tmp_path, "-m", "privpub.flows.cli", "publish", "spec.toml", "--quiet")
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not the key of the state file" in lines[0], res.stderr
    assert str(theirs / "privpub.duckdb.key") in lines[0] and ps.KEY_ENV in lines[0]
    assert "Traceback" not in res.stderr and not PLANTED.search(res.stdout + res.stderr)
    assert len(Store(ours / "privpub.duckdb").history()) == 1
    assert {folder: Path(folder / "privpub.duckdb.key").read_bytes() for folder in (ours, theirs)} == keys

    monkeypatch.delenv(ps.KEY_ENV)
    monkeypatch.chdir(ours)
    out = privpub.publish(general[1], census_spec_dict())
    metrics = Store(ours / "privpub.duckdb").release(out.id)["metrics"].set_index("name")
    assert json.loads(metrics.loc["series-composition-l", "detail"])["returning"] > 0
    assert len(Store(ours / "privpub.duckdb").history()) == 2


def test_a_first_release_hashes_its_ids_beside_its_work_into_the_same_pseudonyms(tmp_path, monkeypatch):
    """A series without summaries hashes its ids on a thread of its own (issue 43): the thread
    gives what `of` gives, and the first release stores each person as the keyed hash of the
    id, derived independently here; the second release recognises them (it hashes first).

    Promise: state-holds-no-person-id."""
    key = ps.Pseudonyms(bytes(range(32)))
    ids = pa.array(["PLANTED-ID-00001", "7", "PLANTED-ID-00001"])
    assert key.of_beside(ids).result().to_pylist() == key.of(ids).to_pylist()
    with monkeypatch.context() as m:  # an error in the thread reaches the caller

        def broken(self, ids):
            raise StateError("hash failed")

        m.setattr(ps.Pseudonyms, "of", broken)
        with pytest.raises(StateError, match="hash failed"):
            key.of_beside(ids).result()

    general, _, _ = months(2)
    publish_generalization(tmp_path, general[0])
    state = tmp_path / "privpub.duckdb"
    stored_key = ps.read_key(Path(str(state) + ".key"))
    assert stored_key is not None
    with duckdb.connect(str(state), read_only=True) as con:
        stored = {row[0] for row in con.execute("SELECT person FROM compose_people").fetchall()}
    assert stored == {ps.expected(stored_key, pid) for pid in general[0]["pid"]}
    second = publish_generalization(tmp_path, general[1])
    comp = {r.model: r for r in second["privacy"]}["series-composition-l"]
    returning = len(set(general[0]["pid"]) & set(general[1]["pid"]))
    assert comp.worst["returning"] == returning > 0


def test_a_new_key_is_16_bytes_and_a_32_byte_key_of_an_older_state_keeps_its_pseudonyms(prefect_server, tmp_path):
    """Issue 43: a new key is 16 bytes, so hex(key) and a short id share one SHA-256 block; a
    state made with the 32-byte key keeps it: its returning people are still recognised under
    the same pseudonyms (the definition computed here), and a key file of any other size is
    refused in one line naming it."""
    general, _, _ = months(2)
    folder = tmp_path / "g"
    publish_generalization(folder, general[0])
    state = folder / "privpub.duckdb"
    key_file = Path(str(state) + ".key")
    assert key_file.stat().st_size == ps.KEY_BYTES == 16
    new = ps.Pseudonyms(key_file.read_bytes())
    assert new.of(pa.array(["P000000017"])).to_pylist() == [keyed_hash(new.key, "P000000017")]
    throwaway = Store(tmp_path / "explored" / "privpub.duckdb").pseudonyms(create=False)  # nothing recorded
    assert len(throwaway.key) == ps.KEY_BYTES and not (tmp_path / "explored").exists()

    # the same first release under a 32-byte key, as a state made before session 24 holds it
    older = tmp_path / "older"
    older.mkdir()
    old_key = os.urandom(ps.OLD_KEY_BYTES)
    Path(str(older / "privpub.duckdb") + ".key").write_bytes(old_key)
    publish_generalization(older, general[0])
    with duckdb.connect(str(older / "privpub.duckdb"), read_only=True) as con:
        stored = {row[0] for row in con.execute("SELECT person FROM compose_people").fetchall()}
    assert stored == {keyed_hash(old_key, str(pid)) for pid in general[0]["pid"]}
    out = publish_generalization(older, general[1])
    comp = {r.model: r for r in out["privacy"]}["series-composition-l"]
    assert comp.worst["returning"] > 0  # its people recognised under the old key
    assert Path(str(older / "privpub.duckdb") + ".key").read_bytes() == old_key

    for size in (ps.KEY_BYTES - 1, 24, ps.OLD_KEY_BYTES + 1):
        key_file.write_bytes(os.urandom(size))
        with pytest.raises(StateError) as refused:
            ps.read_key(key_file)
        message = str(refused.value)
        assert "\n" not in message and str(key_file) in message and f"{size} found" in message

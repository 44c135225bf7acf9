"""A publish's CSV input parsed while the CLI imports (schemas/read_ahead.py, issue 43): the table
handed over is the one the reader would parse, for the same file and options only; anything
else is parsed again, and a read-ahead that cannot help stays silent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from privpub.schemas import read_ahead
from privpub.schemas.spec import load_spec
from privpub.state.store import Store
from tests.helpers import write_spec


@pytest.fixture
def parses(monkeypatch):
    """Every parse, by the thread that ran it."""
    seen: list[str] = []
    real = read_ahead._parse

    def counting(*args):
        seen.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(read_ahead, "_parse", counting)
    return seen


def _wait_for_read_ahead() -> None:
    for thread in threading.enumerate():
        if thread.name == "privpub-read-ahead":
            thread.join()


def test_the_table_parsed_ahead_is_handed_over_once(census_dir, parses):
    spec_path = write_spec(census_dir, seed=3)
    ds = load_spec(spec_path).dataset
    direct = read_ahead._parse(census_dir / "census.csv", *read_ahead._options(ds))
    parses.clear()
    read_ahead.ahead(str(spec_path))
    _wait_for_read_ahead()
    table = read_ahead.csv_table(census_dir / "census.csv", ds)
    assert parses == ["privpub-read-ahead"]  # the reader did not parse it again
    assert table.equals(direct)
    read_ahead.csv_table(census_dir / "census.csv", ds)  # a second read: parsed now, not kept
    assert parses == ["privpub-read-ahead", "MainThread"]


def test_a_file_changed_after_the_read_ahead_is_parsed_again(census_dir, parses):
    spec_path = write_spec(census_dir, seed=3)
    ds = load_spec(spec_path).dataset
    read_ahead.ahead(str(spec_path))
    _wait_for_read_ahead()
    csv = census_dir / "census.csv"
    lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join(lines[:-1]))  # one row fewer
    os.utime(csv, ns=(1, 1))  # a different modification time, whatever the clock's resolution
    table = read_ahead.csv_table(csv, ds)
    assert parses == ["privpub-read-ahead", "MainThread"]
    assert table.num_rows == len(lines) - 2  # header and the dropped row


def test_other_columns_are_parsed_again(census_dir, parses):
    spec_path = write_spec(census_dir, seed=3)
    ds = load_spec(spec_path).dataset
    read_ahead.ahead(str(spec_path))
    _wait_for_read_ahead()
    fewer = ds.model_copy(update={"qi": ds.qi[:-1]})
    table = read_ahead.csv_table(census_dir / "census.csv", fewer)
    assert parses == ["privpub-read-ahead", "MainThread"]
    assert ds.qi[-1].name not in table.column_names


@pytest.mark.parametrize("spec_text", ["[dataset]\nname = 1\n", "not toml at all [", None])
def test_a_spec_that_cannot_be_read_ahead_is_left_to_the_run(tmp_path, parses, spec_text):
    """A broken spec, or a missing one: nothing parsed, nothing raised on the thread."""
    errors: list = []
    hook = threading.excepthook
    threading.excepthook = errors.append
    try:
        path = tmp_path / "spec.toml"
        if spec_text is not None:
            path.write_text(spec_text)
        read_ahead.ahead(str(path))
        _wait_for_read_ahead()
    finally:
        threading.excepthook = hook
    assert parses == [] and errors == []


def test_a_file_the_read_ahead_cannot_parse_is_parsed_again_by_the_reader(census_dir, parses):
    """The reader meets the error itself, as it would have without the read-ahead."""
    (census_dir / "census.csv").write_bytes(b"pid,age\n1,2,3,4\n")
    spec_path = write_spec(census_dir, seed=3)
    ds = load_spec(spec_path).dataset
    read_ahead.ahead(str(spec_path))
    with pytest.raises(pa.ArrowException):
        read_ahead.csv_table(census_dir / "census.csv", ds)
    assert parses == ["privpub-read-ahead", "MainThread"]


def test_the_cli_publishes_the_same_release_with_the_read_ahead(census_dir, tmp_path_factory):
    """`privpub publish` as a process (the read-ahead on) and in process (off), each on its own
    copy of the input: the same tables."""
    from privpub.flows.cli import main
    from tests.test_drivers import _tables

    other = tmp_path_factory.mktemp("in-process")
    shutil.copy(census_dir / "census.csv", other / "census.csv")
    ids = []
    for folder in (census_dir, other):
        spec = write_spec(folder, seed=3)
        if folder == census_dir:
            out = subprocess.run(
                [sys.executable, "-m", "privpub.flows.cli", "publish", str(spec), "--quiet"],
                capture_output=True,
                text=True,
                cwd=folder,
            )
            assert out.returncode == 0, out.stderr
        else:
            assert main(["publish", str(spec), "--quiet"]) == 0
        ids.append(Store(folder / "privpub.duckdb").latest_release("census"))
    assert _tables(census_dir, ids[0]) == _tables(other, ids[1])


# --- the person ids hashed ahead (state/pseudonyms.py `hash_ahead`, flows/cli.py) ----------------


@pytest.fixture
def hashes(monkeypatch):
    """Every hash of a column of ids, by the thread that ran it."""
    from privpub.state import pseudonyms as ps

    seen: list[str] = []
    real = ps.Pseudonyms._hashed

    def counting(self, array, *rest):
        seen.append(threading.current_thread().name)
        return real(self, array, *rest)

    monkeypatch.setattr(ps.Pseudonyms, "_hashed", counting)
    monkeypatch.setattr(ps, "_AHEAD", {})
    monkeypatch.setattr(ps, "_PROPOSED", {})
    return seen


def _ids(n: int = 50, start: int = 1000) -> pa.Array:
    return pa.array(range(start, start + n), pa.int64())


def test_ids_hashed_ahead_for_a_new_state_are_taken_under_the_key_it_then_creates(tmp_path, hashes):
    from privpub.state import pseudonyms as ps
    from privpub.tasks.core.microdata import person_text

    state = tmp_path / "privpub.duckdb"
    ps.hash_ahead(state, _ids())
    assert not ps.key_path(state).exists()  # nothing written ahead
    key = Store(state).pseudonyms()
    assert ps.read_key(ps.key_path(state)) == key.key  # the key drawn ahead, written by the store
    ids = person_text(pd.Series(range(1000, 1050)))
    assert key.of(ids).to_pylist() == [ps.expected(key.key, str(i)) for i in range(1000, 1050)]
    assert hashes == ["MainThread"]  # hashed once, ahead (here on the caller's thread)
    assert key.of(ids).to_pylist() == [ps.expected(key.key, str(i)) for i in range(1000, 1050)]
    assert hashes == ["MainThread"] * 2  # taken once: the next ids are hashed


def test_ids_hashed_ahead_are_taken_only_for_the_same_ids_and_key(tmp_path, hashes):
    from privpub.state import pseudonyms as ps
    from privpub.tasks.core.microdata import person_text

    state = tmp_path / "privpub.duckdb"
    key = Store(state).pseudonyms()  # a key file exists already: read, not drawn
    other = person_text(pd.Series(range(1000, 1049)))  # one id fewer
    ps.hash_ahead(state, _ids())
    assert key.of(other).to_pylist() == [ps.expected(key.key, str(i)) for i in range(1000, 1049)]
    assert len(hashes) == 2
    ps.hash_ahead(state, _ids())
    stranger = ps.Pseudonyms(os.urandom(32))  # another key: hashes itself and leaves the entry
    assert stranger.of(other).to_pylist() == [ps.expected(stranger.key, str(i)) for i in range(1000, 1049)]
    assert len(hashes) == 4
    ids = person_text(pd.Series(range(1000, 1050)))
    assert key.of(ids).to_pylist() == [ps.expected(key.key, str(i)) for i in range(1000, 1050)]
    assert len(hashes) == 4 and ps._AHEAD == {}


def test_a_state_whose_key_file_is_broken_is_not_hashed_ahead(tmp_path, hashes):
    from privpub.schemas.errors import StateError
    from privpub.state import pseudonyms as ps

    state = tmp_path / "privpub.duckdb"
    ps.key_path(state).write_bytes(b"short")
    with pytest.raises(StateError):
        ps.hash_ahead(state, _ids())
    assert hashes == [] and ps._AHEAD == {} and ps._PROPOSED == {}


def test_the_cli_hashes_the_ids_ahead_and_stores_their_pseudonyms(census_dir):
    """`privpub publish` as a process on a new state: the ids are hashed once, on the read-ahead
    thread, and the state holds their pseudonyms under the key file it created."""
    from privpub.state import pseudonyms as ps

    spec = write_spec(census_dir, seed=3)
    script = (
        "import sys, threading\n"
        "from privpub.state import pseudonyms as ps\n"
        "seen, real = [], ps.Pseudonyms._hashed\n"
        "def counting(self, array, *rest):\n"
        "    seen.append(threading.current_thread().name)\n"
        "    return real(self, array, *rest)\n"
        "ps.Pseudonyms._hashed = counting\n"
        "from privpub.flows import cli\n"
        "cli.HASH_AHEAD_ROWS = 1  # (the test's input is small)\n"
        "from privpub.flows.cli import main\n"
        f"sys.argv = ['privpub', 'publish', {str(spec)!r}, '--quiet']\n"
        "code = main()\n"
        "print('hashed by', *seen, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=census_dir)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "hashed by privpub-read-ahead"
    state = census_dir / "privpub.duckdb"
    key = ps.read_key(ps.key_path(state))
    assert key is not None
    with duckdb.connect(str(state), read_only=True) as con:
        stored = {row[0] for row in con.execute("SELECT person FROM compose_people").fetchall()}
    pids = pd.read_csv(census_dir / "census.csv")["pid"]
    assert stored == {ps.expected(key, str(pid)) for pid in pids}


def test_the_cli_hashes_ids_ahead_from_the_threshold_on(census_dir, hashes, monkeypatch):
    """HASH_AHEAD_ROWS ids: hashed ahead, on the caller's thread (the read-ahead's)."""
    from privpub.flows import cli
    from privpub.state import pseudonyms as ps

    monkeypatch.setattr(cli, "HASH_AHEAD_ROWS", len(_ids()))  # just reached
    spec = load_spec(write_spec(census_dir, seed=3))
    thread = threading.Thread(
        target=cli.hash_ids_ahead, args=(spec, pa.table({"pid": _ids()})), name="privpub-read-ahead"
    )
    thread.start()
    thread.join()
    assert hashes == ["privpub-read-ahead"] and list(ps._AHEAD) != []


def test_a_small_input_is_not_hashed_ahead(census_dir, hashes, monkeypatch):
    """Fewer ids than HASH_AHEAD_ROWS: nothing hashed on the read-ahead thread (the run hashes them)."""
    from privpub.flows import cli
    from privpub.state import pseudonyms as ps

    monkeypatch.setattr(cli, "HASH_AHEAD_ROWS", len(_ids()) + 1)  # just missed
    cli.hash_ids_ahead(load_spec(write_spec(census_dir, seed=3)), pa.table({"pid": _ids()}))
    assert hashes == [] and ps._AHEAD == {} and ps._PROPOSED == {}


def test_ids_hashed_in_chunks_are_those_hashed_at_once(monkeypatch):
    from privpub.state import pseudonyms as ps

    monkeypatch.setattr(ps, "HASH_CHUNK", 7)
    key = ps.Pseudonyms(os.urandom(32))
    ids = pa.array([str(i) for i in range(50)])
    assert key._hashed(ids, lambda: True).equals(key._hashed(ids))
    assert key._hashed(ids.slice(0, 0), lambda: True).equals(key._hashed(ids.slice(0, 0)))
    asked = []

    def twice() -> bool:  # two chunks hashed, then the command is gone
        asked.append(1)
        return len(asked) <= 2

    with pytest.raises(ps.HashingStopped):
        key._hashed(ids, twice)
    assert len(asked) == 3


def test_hashing_ahead_stops_when_the_command_has_ended(tmp_path, hashes, monkeypatch):
    """The main thread gone (a run refused or interrupted): the hash stops before its next chunk,
    and an `of` (none will come) would hash the ids itself."""
    from privpub.state import pseudonyms as ps
    from privpub.tasks.core.microdata import person_text

    state = tmp_path / "privpub.duckdb"
    with monkeypatch.context() as m:
        m.setattr(ps, "HASH_CHUNK", 7)
        m.setattr(ps, "_command_running", lambda: False)
        with pytest.raises(ps.HashingStopped):
            ps.hash_ahead(state, _ids())
    assert hashes == ["MainThread"]  # called, and stopped before hashing a chunk
    key = Store(state).pseudonyms()
    ids = person_text(pd.Series(range(1000, 1050)))
    assert key.of(ids).to_pylist() == [ps.expected(key.key, str(i)) for i in range(1000, 1050)]


@pytest.mark.parametrize(("cores", "threads"), [(1, False), (2, False), (3, True), (None, False)])
def test_the_parse_ahead_leaves_the_imports_a_core(census_dir, monkeypatch, cores, threads):
    """Arrow's threads parse ahead only with a core to spare beside the imports (two cores: one
    thread, the input read 80-120 ms sooner at 1M rows); the table is the reader's either way."""
    asked = []
    real = read_ahead.pcsv.read_csv

    def reading(path, read_options=None, **kwargs):
        asked.append(read_options.use_threads)
        return real(path, read_options=read_options, **kwargs)

    monkeypatch.setattr(read_ahead.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(read_ahead.pcsv, "read_csv", reading)
    spec_path = write_spec(census_dir, seed=3)
    ds = load_spec(spec_path).dataset
    read_ahead.ahead(str(spec_path))
    _wait_for_read_ahead()
    table = read_ahead.csv_table(census_dir / "census.csv", ds)
    assert asked == [threads]  # parsed once, ahead
    assert table.equals(read_ahead._parse(census_dir / "census.csv", *read_ahead._options(ds)))

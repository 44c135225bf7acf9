"""A publish's CSV input parsed while the CLI imports (schemas/read_ahead.py, issue 43): the table
handed over is the one the reader would parse, for the same file and options only; anything
else is parsed again, and a read-ahead that cannot help stays silent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

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

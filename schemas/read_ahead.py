"""A publish's CSV input parsed by Arrow while the command imports the rest of privpub (issue 43).

`privpub publish` spends half a second importing pandas, pandera and DuckDB before it can read
its input; Arrow's CSV reader needs none of them and parses without the GIL (on its own threads
when a core is spare beside the imports: `ahead_threads`).
So the CLI entry starts `ahead(spec_path)` on a thread first: it loads the spec (pydantic only)
and, for an input that is one CSV file, parses it with the options the reader will ask for.
`csv_table` then hands that table over when the reader asks for the same file (same inode, size
and modification time) with the same options; anything else (another spec, --set changing the
columns, a file changed in between, a Parquet input) is read as before. The reader's checks
run on the table as they always did: only where the parse happened moves. `ahead` may be given
more work for that thread after the parse (`then`: the person ids' pseudonyms). Nothing is printed
here; a table is handed over once, and one nobody asks for (a run refused before it reads)
is kept until the process ends.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pyarrow as arrow
import pyarrow.csv as pcsv

from privpub.schemas.spec import ROW_ID, DatasetSpec, ReleaseSpec, load_spec

CSV_NULL_VALUES = [""]  # the NA rule (schemas/input.py): only a truly empty field is an empty cell

_LOCK = threading.Lock()
_AHEAD: dict[tuple[Any, ...], Future[tuple[tuple[int, int, int], arrow.Table]]] = {}  # at most one: the CLI's own input
_DECIDED = threading.Event()  # clear while a read-ahead has not yet said whether it parses
_DECIDED.set()


def file_columns(ds: DatasetSpec) -> list[str]:
    """The input's columns the release reads (the row number `@row` is not one of them)."""
    return [c for c in dict.fromkeys([ds.person_id, *ds.qi_names, ds.sensitive]) if c != ROW_ID]


def _options(ds: DatasetSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The columns read, and those read as text (every QI that is not numeric)."""
    return tuple(file_columns(ds)), tuple(sorted(q.name for q in ds.qi if q.kind != "numeric"))


def _identity(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def ahead_threads() -> bool:
    """Whether the parse ahead runs on Arrow's threads: only with a core to spare beside the
    imports, which hold one. On two cores Arrow's second thread took the imports' core: with one
    thread the input was read and validated 80-120 ms sooner at 1M rows (session 25,
    docs/benchmarks.md), the parse still done before the imports."""
    return (os.cpu_count() or 1) > 2


def _parse(path: Path, columns: tuple[str, ...], text: tuple[str, ...], threads: bool = True) -> arrow.Table:
    return pcsv.read_csv(
        path,
        read_options=pcsv.ReadOptions(use_threads=threads),
        convert_options=pcsv.ConvertOptions(
            include_columns=list(columns),
            # large_string: what pandas' str dtype holds, so to_pandas does not copy the text
            column_types={c: arrow.large_string() for c in text},
            null_values=CSV_NULL_VALUES,
            strings_can_be_null=True,
        ),
    )


def csv_table(path: Path, ds: DatasetSpec) -> arrow.Table:
    """The dataset's columns of the CSV file at `path`, as Arrow parses them: the table parsed
    ahead for this file and these options if there is one, else parsed now (a parse ahead that
    failed too: the error is then the reader's own). Raises what `pyarrow.csv.read_csv` raises."""
    columns, text = _options(ds)
    _DECIDED.wait()  # a spec takes milliseconds to load: never two parses of one file
    with _LOCK:
        future = _AHEAD.pop((str(path), columns, text), None)
        _AHEAD.clear()  # one use: a table not asked for is let go
    if future is not None:
        try:
            parsed_from, table = future.result()
        except BaseException:
            parsed_from, table = None, None
        if parsed_from is not None and parsed_from == _identity(path):
            return table
    return _parse(path, columns, text)


def ahead(spec_path: str, then: Callable[[ReleaseSpec, arrow.Table], Any] | None = None) -> None:
    """Start parsing the spec's input on a thread, if it is one CSV file; never raises (the run
    itself reads the spec and reports what is wrong with it). `then(spec, table)` runs on that
    thread after the parse, its errors ignored: more work for the core the imports leave idle
    (flows/cli.py hashes the person ids, state/pseudonyms.py `hash_ahead`)."""
    _DECIDED.clear()
    try:
        threading.Thread(target=_read_ahead, args=(spec_path, then), name="privpub-read-ahead").start()
    except BaseException:  # no thread (none left to start): the reader parses as before
        _DECIDED.set()


def _read_ahead(spec_path: str, then: Callable[[ReleaseSpec, arrow.Table], Any] | None) -> None:
    future: Future[tuple[tuple[int, int, int], arrow.Table]] = Future()
    try:
        try:
            spec = load_spec(spec_path)
            ds = spec.dataset
            if not ds.input or spec.run.task_runner == "dask" or any(ch in ds.input for ch in "*?["):
                return
            path = spec.path(ds.input)
            if path.suffix.lower() != ".csv" or not path.is_file():
                return
            identity = _identity(path)  # taken before the parse: a file changed during it is read again
            columns, text = _options(ds)
            with _LOCK:
                _AHEAD.clear()
                _AHEAD[(str(path), columns, text)] = future
        finally:
            _DECIDED.set()
        table = _parse(path, columns, text, ahead_threads())
        future.set_result((identity, table))
        if then is not None:
            then(spec, table)
    except BaseException as exc:  # the reader parses again and reports it (`then`'s: ignored)
        if not future.done():
            future.set_exception(exc)

"""The input microdata: reading it, and the pandera schema built from the spec.

Errors name the row and the column. Rows are counted from 1 in data order, the header not
counted (row 1 is line 2 of a CSV file).
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import csv
import mmap
import os
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pandera.pandas as pa
import pyarrow as arrow
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pandera.errors import SchemaErrors

from privpub.schemas.dates import date_in_range, parse_dates, to_days
from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.read_ahead import CSV_NULL_VALUES, csv_table, file_columns
from privpub.schemas.spec import (
    FRAME_INPUT,
    MASK,
    MASK_CHAR,
    MISSING_CATEGORY,
    ROW_ID,
    DatasetSpec,
    ReleaseSpec,
    sensitive_leaves,
)

# The longest text cell accepted (characters). Text columns become fixed-width arrays in places
# (numpy's str dtype is as wide as the longest item), so one huge cell would cost its width in
# every row; the limit keeps that bounded. Documented in docs/spec.md.
MAX_CELL_CHARS = 256


def _existing_file(path: Path, what: str) -> None:
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory, not a file")
    if path.exists() and not path.is_file():  # a FIFO or a device: reading it could block forever
        raise InputError(f"{what} {path} is not a regular file")
    if not path.is_file():
        raise InputError(f"{what} not found: {path}")


PARQUET_SUFFIXES = (".parquet", ".pq")


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


# `[dataset] input` of a release whose rows were handed over as a DataFrame (privpub.publish(frame,
# spec)): the stored spec says so; the frame itself lives only in the publishing process.
_FRAME: contextvars.ContextVar[pd.DataFrame | None] = contextvars.ContextVar("privpub_frame", default=None)


@contextlib.contextmanager
def frame_input(frame: pd.DataFrame) -> Iterator[None]:
    """`frame` is the input of the releases this thread publishes inside the block (in-process
    driver: every step that reads the input runs in the calling thread)."""
    token = _FRAME.set(frame)
    try:
        yield
    finally:
        _FRAME.reset(token)


def is_frame_input(spec: ReleaseSpec) -> bool:
    return spec.dataset.input == FRAME_INPUT


def typed_source(spec: ReleaseSpec) -> str | None:
    """What a typed input is called (a DataFrame, Parquet, a DuckDB table), None for CSV text."""
    if is_frame_input(spec):
        return "DataFrame"
    if spec.dataset.table:
        return "DuckDB table's"
    text = spec.dataset.input or ""
    if _is_glob(text) or spec.path(text).is_dir() or spec.path(text).suffix.lower() in PARQUET_SUFFIXES:
        return "Parquet"
    return None


def handed_frame() -> pd.DataFrame:
    frame = _FRAME.get()
    if frame is None:
        raise InputError(
            f'[dataset] input = "{FRAME_INPUT}" stands for a DataFrame handed to privpub.publish(frame, spec); '
            "none was given"
        )
    check_frame_columns(frame)
    return frame


def check_frame_columns(frame: pd.DataFrame) -> None:
    """A DataFrame's column names are one level of distinct names (pandas would otherwise raise
    its own errors, or select two columns for one name)."""
    if isinstance(frame.columns, pd.MultiIndex):
        raise InputError(
            f"input rejected: the DataFrame's columns have {frame.columns.nlevels} levels of names (a MultiIndex); "
            "flatten them to one name per column"
        )
    repeated = frame.columns[frame.columns.duplicated()]
    if len(repeated):
        raise InputError(f"input rejected: the DataFrame names column '{repeated[0]}' twice (column names must differ)")


def input_text(spec: ReleaseSpec) -> str:
    """`[dataset] input` as written (a file, folder or glob); only for a spec that has one."""
    if spec.dataset.input is None:
        raise InputError("[dataset] names a DuckDB table, not an input file")
    if is_frame_input(spec):
        raise InputError("[dataset] input is a DataFrame held in memory, not a file")
    return spec.dataset.input


def input_files(spec: ReleaseSpec) -> list[Path]:
    """The files of `[dataset] input`: the file itself; for a folder, the Parquet files directly
    inside it; for a glob, the files it matches (all Parquet). Sorted by path, which is also the
    order of the rows. A folder without Parquet files (or one of CSV files) is refused as before:
    only a partitioned Parquet dataset may be a folder."""
    text = input_text(spec)
    if _is_glob(text):
        pattern = spec.path(text)
        files = sorted(p for p in Path(pattern.anchor).glob(str(pattern.relative_to(pattern.anchor))) if p.is_file())
        if not files:
            raise InputError(f"input glob {pattern} matches no file")
        odd = [p for p in files if p.suffix.lower() not in PARQUET_SUFFIXES]
        if odd:
            raise InputError(
                f"input glob {pattern} matches {odd[0].name}, not a Parquet file (a glob may only name Parquet files)"
            )
        return files
    path = spec.path(text)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in PARQUET_SUFFIXES)
        if files:
            return files
    _existing_file(path, "input file")
    return [path]


def files_root(files: list[Path]) -> Path:
    """The folder the files' names are taken relative to (fingerprint, messages)."""
    return Path(os.path.commonpath([str(p.parent) for p in files]))


def _refuse_nested_columns(files: list[Path], spec: ReleaseSpec) -> None:
    """A column the release reads holds one value per cell: a Parquet list, map or struct column
    would otherwise be published as the text of a Python list ("['South']")."""
    schema = pq.read_schema(files[0])
    for name in file_columns(spec.dataset):
        if name in schema.names and arrow.types.is_nested(schema.field(name).type):
            raise InputError(
                f"input rejected: column '{name}' holds {schema.field(name).type} cells; "
                "the columns a release reads hold one value per cell"
            )


def refuse_mixed_schemas(files: list[Path], spec: ReleaseSpec) -> None:
    """The files of a folder or glob share one schema (the same columns, each of one type):
    pandas would fill a column one file lacks with empty cells and turn a column of numbers in
    one file and text in another into text. Metadata only: no rows are read."""
    first = pq.read_schema(files[0])
    types = {f.name: f.type for f in first}
    for path in files[1:]:
        schema = pq.read_schema(path)
        other = {f.name: f.type for f in schema}
        for name in list(types) + [n for n in other if n not in types]:
            if name not in types or name not in other:
                holder, lacking = (files[0], path) if name in types else (path, files[0])
                raise InputError(
                    f"input rejected: column '{name}' is in {holder.name} but not in {lacking.name} "
                    "(the files of a folder must hold the same columns)"
                )
            if other[name] != types[name]:
                raise InputError(
                    f"input rejected: column '{name}' is {other[name]} in {path.name} but {types[name]} in "
                    f"{files[0].name} (the files of a folder must agree on each column's type)"
                )


def _read_parquet_files(files: list[Path]) -> pd.DataFrame:
    if len(files) == 1:
        return pd.read_parquet(files[0])
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def _starts_as_parquet(path: Path) -> bool:
    """Parquet files begin with the magic bytes PAR1."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:
        return False  # the reader then names the problem


def _csv_header(path: Path) -> list[str]:
    """The header's names (the first record), read with Python's csv module."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        return next(csv.reader(f), [])


# A header-less file's first row is data: its "names" must never be quoted. Read as data when a
# name is a number or an ISO date, or when HEADER_LIKE_DATA names each equal a cell of their own
# column in the first SAMPLE_ROWS rows (a real header rarely repeats its own values).
NO_HEADER = "the file seems to have no header row (its first line looks like data); add a header naming the columns"
HEADER_LIKE_DATA = 2
SAMPLE_ROWS = 100
_NUMBER_OR_DATE = re.compile(r"\s*([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|\d{4}-\d{2}-\d{2}.*)\s*")


def header_looks_like_data(names: list[str], rows: list[list[str]]) -> bool:
    """Does this "header" look like a row of data? (names: the first line's fields; rows: the
    next few records, as text)"""
    if any(isinstance(n, str) and _NUMBER_OR_DATE.fullmatch(n) for n in names):
        return True
    same = sum(
        1
        for i, name in enumerate(names)
        if isinstance(name, str) and name.strip() and any(i < len(r) and r[i] == name for r in rows)
    )
    return same >= min(HEADER_LIKE_DATA, len(names))


def _csv_records(path: Path, limit: int) -> list[list[str]]:
    """The first `limit` records after the header, as text (error paths and the header check)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        records = csv.reader(f)
        next(records, None)
        try:
            return [r for _, r in zip(range(limit), records)]
        except csv.Error:
            return []


def csv_header_is_data(path: Path) -> bool:
    return header_looks_like_data(_csv_header(path), _csv_records(path, SAMPLE_ROWS))


def frame_header_is_data(frame: pd.DataFrame) -> bool:
    """header_looks_like_data for a table already read (its first rows as text)."""
    sample = frame.head(SAMPLE_ROWS).astype("string").fillna("")
    return header_looks_like_data(list(frame.columns), sample.to_numpy(dtype=object).tolist())


def _whole_file(data: mmap.mmap) -> arrow.LargeBinaryArray:
    """The mapped file as one Arrow binary value (no copy), for Arrow's vectorised kernels."""
    offsets = arrow.array([0, len(data)], arrow.int64()).buffers()[1]
    return arrow.LargeBinaryArray.from_buffers(arrow.large_binary(), 1, [None, offsets, arrow.py_buffer(data)])


def _is_utf8(data: mmap.mmap) -> bool:
    """Is the whole mapped file UTF-8 text? Arrow's validator (SIMD): an order of magnitude
    faster than Python's decoder on a clean file."""
    try:
        _whole_file(data).view(arrow.large_string()).validate(full=True)
    except arrow.ArrowInvalid:
        return False
    return True


def _first_non_utf8(data: mmap.mmap) -> int | None:
    """The offset of the first byte that is not UTF-8 text, or None (a clean file checked by
    _is_utf8; else decoded in 16 MB chunks to find the offset: bounded memory)."""
    if _is_utf8(data):
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    step = 1 << 24
    for start in range(0, len(data), step):
        try:
            decoder.decode(data[start : start + step], final=start + step >= len(data))
        except UnicodeDecodeError as exc:
            return start + exc.start
    return None


def refuse_malformed_csv(path: Path) -> None:
    """What no reader should paper over, refused before reading: a header that is a row of data,
    a column named twice in the header (pandas would rename the second), a byte that is not
    UTF-8 anywhere (the columns a release does not read and the header too: docs/spec.md promises
    the file as a whole) and a NUL byte anywhere (one pass each over the mapped file; the row is
    named on the error path only)."""
    header = _csv_header(path)
    seen: set[str] = set()
    for name in header:
        if name in seen:
            if csv_header_is_data(path):
                raise InputError(f"input rejected: {NO_HEADER}")
            raise InputError(f"input rejected: the header names column '{name}' twice (column names must differ)")
        seen.add(name)
    if path.stat().st_size == 0:
        return
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if _first_non_utf8(data) is not None:
            bad = True
        else:
            bad = False
            at = data.find(b"\0")
            if at < 0:
                return
            line = data[:at].count(b"\n")
    if bad:
        named = None if csv_header_is_data(path) else header
        raise InputError(f"input rejected: {_first_bad_utf8(path, named)}: not UTF-8 text")
    raise InputError(f"input rejected: {'row ' + str(line) if line else 'the header'}: holds a NUL byte")


def _field_count_problem(path: Path) -> str:
    """The first record whose number of fields differs from the header's (error path only)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        records = csv.reader(f)
        width = len(next(records, []))
        for row, fields in enumerate(records, start=1):
            if len(fields) != width and fields:
                return f"row {row} has {len(fields)} fields, the header {width}"
    return "a row's fields do not match the header"


def _first_bad_utf8(path: Path, header: list[str] | None) -> str:
    """Where a CSV stops being UTF-8: 'row R, column 'c'' (found line by line, error path only)."""
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                try:
                    fields = next(csv.reader([raw.decode("utf-8", errors="replace")]), [])
                except csv.Error:  # not CSV text at all (e.g. binary): the row is all we can say
                    fields = []
                col = next((i for i, v in enumerate(fields) if "\ufffd" in v), None)
                where = f"row {line_no}" if line_no else "the header"
                if header and col is not None and col < len(header) and line_no:
                    return f"{where}, column '{header[col]}'"
                return where
    return "somewhere"


# The NA rule (docs/spec.md, "The input"): in a CSV file only a truly empty field is an empty cell;
# text such as NA, None, NULL or NaN is a value like any other (a category, a label), read as
# written. A numeric column's cells are numbers as written in decimal (`0x1F` and `1_000` are
# not numbers); its `nan`, the float's own spelling of no number, is an empty cell as pandas and
# Arrow read it. pandas' own list of missing spellings (its `na_values` default) is kept to say
# what privpub does not read as missing (tests/test_input_reader.py checks it against pandas').
# CSV_NULL_VALUES (schemas/read_ahead.py): the empty field alone.
PANDAS_NA_VALUES = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip


def _read_csv_with_arrow(path: Path, spec: ReleaseSpec) -> pd.DataFrame | None:
    """The release's columns of a CSV file read by Arrow's multithreaded reader (a few times
    faster than pandas' at a million rows), or None when the file needs pandas' reader for the
    same result or for its error message: a missing column, a parse error, bad UTF-8, a cell
    with a leading space (pandas skips it), a numeric QI that is not all numbers, a guessed date
    or boolean. Text QIs are read as text, as written; missing values as pandas spells them."""
    ds = spec.dataset
    text = {q.name for q in ds.qi if q.kind != "numeric"}
    try:
        table = csv_table(path, ds)  # parsed while the CLI imported the rest, if it could be
    except arrow.ArrowInvalid as exc:
        # a short row, which pandas would fill with empty cells (a long one: pandas' own message);
        # Arrow's text quotes the row, so only its counts are read
        counts = re.search(r"Expected (\d+) columns, got (\d+)", str(exc))
        if counts and int(counts[2]) < int(counts[1]):
            raise InputError(f"input rejected: {_field_count_problem(path)}") from None
        return None
    except (arrow.ArrowException, OSError, UnicodeDecodeError):
        return None
    hex_found: bool | None = None  # the file scanned once, for the first integer column (issue 43)
    for name, column in zip(table.column_names, table.columns):
        kind = column.type
        if arrow.types.is_string(kind) or arrow.types.is_large_string(kind):
            if name in ds.qi_names and name not in text:
                return None  # a numeric QI with text: pandas' reader, whose message names the cell
            if pc.any(pc.starts_with(column, " ")).as_py():
                return None
        elif not (arrow.types.is_integer(kind) or arrow.types.is_floating(kind) or arrow.types.is_null(kind)):
            return None  # a guessed date, time or boolean: read as pandas would
        elif arrow.types.is_integer(kind):
            hex_found = _holds_hex(path) if hex_found is None else hex_found
            if hex_found:
                return None  # Arrow reads `0x1F` as 31: the strict reader names such a cell
    frame: pd.DataFrame = table.to_pandas()
    return frame


# a cell that is a number as written in decimal (or the float's inf / nan spellings, which the
# schema then names); pandas and Python also read `0x1F`, `1_000` or full-width digits
_DECIMAL = r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf|infinity|nan))\s*"
_NON_FINITE = r"\s*[+-]?(?i:inf|infinity|nan)\s*"
NOT_A_NUMBER = "(not a number)"  # stands for a cell of a numeric QI that is not one: the schema names it


def _numbers_as_written(frame: pd.DataFrame, text: set[str], spec: ReleaseSpec) -> pd.DataFrame:
    """Columns read as text made numbers as the Arrow reader infers them: a column whose every
    filled cell is a decimal number becomes numbers; a numeric QI's other cells become
    NOT_A_NUMBER, which the schema refuses by row (never converted by a looser reader)."""
    numeric = {q.name for q in spec.dataset.qi if q.kind == "numeric"}
    out = {}
    for name in frame.columns:
        if name in text:
            continue
        column = frame[name]
        decimal = column.str.fullmatch(_DECIMAL).fillna(True).astype(bool)
        if bool(decimal.all()):
            out[name] = pd.to_numeric(column)
        elif name in numeric:
            # inf / nan beside text are refused the same way: pandera stops at the first cell it
            # cannot coerce, so a non-finite cell above it would go unnamed (the first row first)
            finite = decimal & ~column.str.fullmatch(_NON_FINITE).fillna(False).astype(bool)
            out[name] = column.where(finite, NOT_A_NUMBER)
    return frame.assign(**out) if out else frame


def _holds_hex(path: Path) -> bool:
    """Does the file hold `0x` or `0X` anywhere (one pass over the mapped file)?"""
    if path.stat().st_size == 0:
        return False
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _holds_hex_bytes(data)


def _holds_hex_bytes(data: mmap.mmap) -> bool:
    """_holds_hex on the mapped bytes: Arrow's case-blind substring search, several times faster
    than mmap.find of "0x" and "0X" (which stop at every digit 0). Its arrays are gone when it
    returns, so the mapping can be closed."""
    return bool(pc.find_substring(_whole_file(data), "0x", ignore_case=True)[0].as_py() >= 0)


def read_duckdb_table(path: Path, table: str) -> pd.DataFrame:
    """A table of a DuckDB file, read-only; an error names the table and the file, not a cell."""
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            return con.sql(f'SELECT * FROM "{table.replace(chr(34), chr(34) * 2)}"').df()
    except duckdb.Error as exc:
        raise InputError(f"cannot read table '{table}' from {path}: {type(exc).__name__}") from None


def read_input(spec: ReleaseSpec) -> pd.DataFrame:
    ds = spec.dataset
    if is_frame_input(spec):
        return handed_frame()
    if ds.table:
        db, _, table = ds.table.rpartition(":")
        if not db:
            raise InputError("[dataset] table must look like 'file.duckdb:table_name'")
        path = spec.path(db)
        _existing_file(path, "DuckDB file")
        return read_duckdb_table(path, table)
    files = input_files(spec)
    path = files[0] if len(files) == 1 else files_root(files)
    suffix = files[0].suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv", ".txt", ".gz"):
        raise InputError(f"{path}: unknown input format '{suffix}' (use .csv or .parquet)")
    if suffix not in PARQUET_SUFFIXES and _starts_as_parquet(files[0]):
        raise InputError(f"{path} is a Parquet file with a {suffix} name: rename it to .parquet")
    try:
        if suffix in PARQUET_SUFFIXES:
            _refuse_nested_columns(files, spec)
            if len(files) > 1:
                refuse_mixed_schemas(files, spec)
            return _read_parquet_files(files)
        if suffix == ".csv" and path.is_file():
            refuse_malformed_csv(path)
        fast = _read_csv_with_arrow(path, spec) if suffix == ".csv" else None
        if fast is not None:
            return fast
        # every column as text, then numbers only where every cell is one in decimal (pandas'
        # own guess reads `0x1F` as 31): what the Arrow reader does; text QIs stay text as written
        raw = pd.read_csv(
            path, skipinitialspace=True, encoding="utf-8", dtype=str, keep_default_na=False, na_values=CSV_NULL_VALUES
        )
        return _numbers_as_written(raw, {q.name for q in spec.dataset.qi if q.kind != "numeric"}, spec)
    except InputError:
        raise
    except UnicodeDecodeError:
        try:
            header = pd.read_csv(path, nrows=0, encoding="latin-1").columns.tolist()
        except Exception:
            header = None
        raise InputError(f"input rejected: {_first_bad_utf8(path, header)}: not UTF-8 text") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        # the parser's messages name lines and field counts, never cell values
        raise InputError(f"cannot read {path}: {str(exc).strip().splitlines()[-1]}") from None
    except Exception as exc:  # any other reader failure: its class only (a message may quote data)
        raise InputError(
            f"cannot read {path}: {type(exc).__name__} (is it a valid "
            f"{'Parquet' if suffix in ('.parquet', '.pq') else 'CSV'} file?)"
        ) from None


def _in_set(values: list[str], what: str) -> pa.Check:
    allowed = set(values)
    return pa.Check(lambda s: s.astype(str).isin(allowed), error=f"value not in the {what}")


def _finite(s: pd.Series) -> pd.Series | bool:
    """Numbers must be finite; text and other cells pass (their own checks apply)."""
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        return pd.Series(np.isfinite(s.to_numpy(dtype=float, na_value=0.0)), index=s.index)
    return True


def _arrow_text(s: pd.Series) -> arrow.Array | arrow.ChunkedArray | None:
    """The Arrow array behind a column of Arrow-backed text (pandas' str dtype), else None."""
    if isinstance(s.dtype, pd.StringDtype) and s.dtype.storage == "pyarrow":
        return arrow.array(s.array)
    return None


def _short_text(s: pd.Series) -> pd.Series | bool:
    if pd.api.types.is_numeric_dtype(s.dtype):
        return True
    text_array = _arrow_text(s)
    # every cell short: no per-row result. Its bytes (read from the offsets) bound its characters,
    # so the characters are counted only when some cell has more bytes than the limit
    if text_array is not None and any(
        (pc.max(length(text_array)).as_py() or 0) <= MAX_CELL_CHARS for length in (pc.binary_length, pc.utf8_length)
    ):
        return True
    text = s if isinstance(s.dtype, pd.StringDtype) else s.astype("string")
    return text.str.len().fillna(0).le(MAX_CELL_CHARS)


FINITE = pa.Check(_finite, error="finite")
SHORT = pa.Check(_short_text, error="cell_length")
DATE = pa.Check(lambda s: parse_dates(s).notna(), error="date")
# years 1 to 9999: what Python's datetime, and so pandas' and pyarrow's readers of the published
# date32 column, can read back (a year 0 publishes, then no reader opens the table)
DATE_RANGE = pa.Check(lambda s: date_in_range(parse_dates(s)) | parse_dates(s).isna(), error="date_range")

NO_MASK_CHAR = pa.Check(
    lambda s: (
        pd.api.types.is_numeric_dtype(s.dtype) or ~s.astype("string").str.contains(MASK_CHAR, regex=False).fillna(False)
    ),
    error="mask_char",
)


def _as_numbers(s: pd.Series) -> pd.Series:
    """Cells read as numbers (NaN where a cell is not one): an ordinal with an order of numbers."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return pd.Series(np.nan, index=s.index)
    if pd.api.types.is_numeric_dtype(s.dtype):
        return s.astype(float)
    return pd.to_numeric(s.astype("string").str.strip(), errors="coerce").astype(float)


def _in_numbers(order: list[str | int | float]) -> pa.Check:
    allowed = np.array(order, dtype=float)
    return pa.Check(
        lambda s: pd.Series(np.isin(_as_numbers(s).to_numpy(), allowed), index=s.index),
        error="value not in the declared order",
    )


def input_schema(spec: ReleaseSpec) -> pa.DataFrameSchema:
    ds = spec.dataset
    cols: dict[str, pa.Column] = {
        ds.person_id: pa.Column(nullable=False, checks=[FINITE, SHORT], title="person id"),
        ds.sensitive: pa.Column(nullable=False, checks=[FINITE, SHORT], title="sensitive attribute"),
    }
    allowed = sensitive_leaves(ds)
    if allowed is not None:
        what = "sensitive hierarchy's leaves" if ds.sensitive_hierarchy else "declared sensitive order"
        cols[ds.sensitive] = pa.Column(
            nullable=False, checks=[FINITE, SHORT, _in_set(allowed, what)], title="sensitive attribute"
        )
    for q in ds.qi:
        if q.kind == "numeric":
            cols[q.name] = pa.Column(float, coerce=True, nullable=False, checks=FINITE)
        elif q.kind == "date":
            cols[q.name] = pa.Column(nullable=False, checks=[DATE, DATE_RANGE])
        elif q.tree:
            leaves = {c for kids in q.tree.values() for c in kids if c not in q.tree}
            cols[q.name] = pa.Column(nullable=False, checks=[SHORT, _in_set(sorted(leaves), "hierarchy's leaves")])
        elif q.hierarchy == MASK:
            cols[q.name] = pa.Column(nullable=False, checks=[FINITE, SHORT, NO_MASK_CHAR])
        elif q.numeric_order:
            cols[q.name] = pa.Column(nullable=False, checks=[_in_numbers(q.order or [])])
        elif q.order:
            cols[q.name] = pa.Column(nullable=False, checks=[SHORT, _in_set(q.order_labels or [], "declared order")])
        else:
            cols[q.name] = pa.Column(nullable=False, checks=[FINITE, SHORT])
    return pa.DataFrameSchema(cols, strict=False)


def _problem(check: str) -> str:
    if check == "not_nullable":
        return "is empty (null)"
    if check.startswith("coerce_dtype") or "dtype" in check:
        return "not a number"
    if check == "finite":
        return "not a finite number (inf or nan)"
    if check == "cell_length":
        return f"text longer than {MAX_CELL_CHARS} characters"
    if check.startswith("value not in the"):
        return check
    if check == "date":
        return "not a date (YYYY-MM-DD)"
    if check == "date_range":
        return "a date outside the years 0001 to 9999 (no reader of the published table could read it)"
    if check == "mask_char":
        return f"holds '{MASK_CHAR}', which hierarchy = \"mask\" writes for a masked character"
    return f"fails '{check}'"


def _describe(cases: pd.DataFrame, frame: pd.DataFrame, limit: int = 3) -> str:
    """One line: per (column, problem) its first row and how many more rows share it. No cell
    value is quoted: values are secret, rows are named by position."""
    position = pd.Series(frame.index + 1, index=frame.index)  # the index is the row's place in the input
    cases = cases.assign(
        check=cases["check"].astype(str).map(_problem), row=cases["index"].map(position) if "index" in cases else np.nan
    )
    cases = cases.drop_duplicates(subset=["column", "check", "row"])
    groups = []
    for (col, check), g in cases.groupby(["column", "check"], sort=False, dropna=False):
        rows = g["row"].dropna()
        first = int(rows.min()) if len(rows) else None
        groups.append((first if first is not None else 0, col, check, len(g)))
    groups.sort(key=lambda t: t[0])
    parts = []
    for first, col, check, count in groups[:limit]:
        where = f"row {first}, " if first else ""
        more = f" (and {count - 1:,} more row(s) with this problem)" if count > 1 else ""
        parts.append(f"{where}column '{col}': {check}{more}")
    rest = len(groups) - limit
    return "; ".join(parts) + (f"; and {rest} more kind(s) of problem" if rest > 0 else "")


def _duplicate_ids(frame: pd.DataFrame, pid: str) -> str | None:
    repeated = frame[pid].duplicated(keep="first").to_numpy()
    if not repeated.any():
        return None
    second = int(np.argmax(repeated))
    first = int(np.argmax((frame[pid] == frame[pid].iloc[second]).to_numpy()))
    more = int(repeated.sum()) - 1
    first, second = int(frame.index[first]), int(frame.index[second])  # places in the input
    return (
        f"row {second + 1}, column '{pid}': repeats the person id of row {first + 1}"
        + (f"; and {more:,} more repeated id(s)" if more else "")
        + ' (a person with several rows: set [dataset] rows_per_person = "many")'
    )


# A quasi-identifier is refused as a near-unique identifier (a name, an id, an email, a full date
# of birth put in `qi` by accident) when it holds more distinct values than NEAR_UNIQUE_SHARE of
# the people, and more than NEAR_UNIQUE_MIN_VALUES: D values over N people leave at least 2D - N
# people alone with their value, so above one half the column by itself singles people out,
# before any other QI is combined. The floor keeps the ratio for columns that can take many values:
# a column of few possible values (ages, a region) is "unique" only in a small table, and k
# protects it there; a name or an id takes as many values as there are people. Counted in people
# (the person id's distinct values under rows_per_person = "many"); a date in its unit.
NEAR_UNIQUE_SHARE = 0.5
NEAR_UNIQUE_MIN_VALUES = 100


def is_near_unique(distinct: int, people: int) -> bool:
    """True when a column with `distinct` values over `people` people identifies them nearly alone."""
    return distinct > NEAR_UNIQUE_MIN_VALUES and distinct > NEAR_UNIQUE_SHARE * people


def near_unique_error(ds: DatasetSpec, distinct: dict[str, int], people: int) -> SpecError | None:
    """The refusal of the first QI that is near-unique (`distinct`: its distinct values, counted
    as the release reads them) and not marked `near_unique = "allow"`; None when there is none.
    Counts only: never a value."""
    for q in ds.qi:
        if q.near_unique != "allow" and q.name in distinct and is_near_unique(distinct[q.name], people):
            return SpecError(
                f"[dataset] qi '{q.name}': {distinct[q.name]:,} distinct values for {people:,} people (over "
                f"{NEAR_UNIQUE_SHARE:.0%} as many values as people): a near-unique identifier, not a quasi-identifier; leave it out of "
                'qi or publish a coarser column, or mark it near_unique = "allow" to publish it generalized on purpose'
            )
    return None


def _masked_infinities(frame: pd.DataFrame, spec: ReleaseSpec, cases: pd.DataFrame) -> pd.DataFrame:
    """A numeric column that cannot be coerced skips its other checks, so an `inf` above the
    first non-number would go unnamed: its rows, as failure cases of the finite check."""
    failed = set(cases.loc[cases["check"].astype(str).str.contains("dtype"), "column"].dropna())
    found = []
    for q in spec.dataset.qi:
        if q.kind == "numeric" and q.name in failed:
            values = pd.to_numeric(frame[q.name], errors="coerce").to_numpy(dtype=float, na_value=0.0)
            rows = frame.index[np.isinf(values)]
            found.append(pd.DataFrame({"column": q.name, "check": "finite", "index": rows}))
    return pd.concat(found, ignore_index=True) if found else cases.iloc[:0]


def validate_input(frame: pd.DataFrame, spec: ReleaseSpec) -> pd.DataFrame:
    """Check the input against the spec; return only the columns the release uses, typed."""
    return checked_rows(frame, spec)[0]


def checked_rows(frame: pd.DataFrame, spec: ReleaseSpec) -> tuple[pd.DataFrame, int]:
    """validate_input, and how many rows `[dataset] missing = "drop"` left out. Rows are named
    by their place in the input, dropped rows counted."""
    ds = spec.dataset
    needed = [ds.person_id, *ds.qi_names, ds.sensitive]
    missing = [c for c in file_columns(ds) if c not in frame.columns]
    if missing:
        # a header-less file's "names" are its first row's cells: never quoted
        has = NO_HEADER if frame_header_is_data(frame) else f"it has {', '.join(map(str, frame.columns))}"
        raise InputError(f"input is missing column(s) {', '.join(repr(m) for m in missing)}; {has}")
    if frame.empty:
        raise InputError("input has no rows")
    if ds.person_id == ROW_ID:  # the row number stands for the person id
        frame = frame.assign(**{ROW_ID: np.arange(1, len(frame) + 1, dtype=np.int64)})
    frame = frame[needed].reset_index(drop=True)
    frame, dropped = _missing_cells(frame, spec)
    _refuse_wide_integers(frame, spec)
    try:
        out = input_schema(spec).validate(frame, lazy=True)
    except SchemaErrors as err:
        cases = pd.concat([err.failure_cases, _masked_infinities(frame, spec, err.failure_cases)], ignore_index=True)
        raise InputError("input rejected: " + _describe(cases, frame)) from None
    dup = _duplicate_ids(frame, ds.person_id) if ds.rows_per_person == "one" else None
    if dup:
        raise InputError("input rejected: " + dup)
    for q in ds.qi:
        if q.kind == "date":
            out[q.name] = to_days(parse_dates(out[q.name]), q.date_unit)  # day numbers (schemas/dates.py)
        elif q.numeric_order:  # each number as the order spells it
            at = pd.Index(np.array(q.order, dtype=float)).get_indexer(_as_numbers(out[q.name]))
            out[q.name] = np.array(q.order_labels, dtype=object)[at]
        elif q.kind != "numeric":
            out[q.name] = out[q.name].astype(str)  # text, as pandas keeps it (Arrow-backed: fast to code)
        elif pd.api.types.is_integer_dtype(frame[q.name].dtype):
            out[q.name] = frame[q.name]  # keep integers integral in the published ranges
    return (out.reset_index(drop=True) if dropped else out), dropped


def _refuse_wide_integers(frame: pd.DataFrame, spec: ReleaseSpec) -> None:
    """A numeric QI of unsigned integers (Parquet, a DataFrame, a CSV column Arrow reads as
    uint64) holds values up to 2^63 - 1: above, the int64 a published range is written in wraps
    to a negative number. Named by row and column, before the schema (which coerces to float)."""
    limit = np.iinfo(np.int64).max
    for q in spec.dataset.qi:
        column = frame[q.name]
        if q.kind != "numeric" or not pd.api.types.is_unsigned_integer_dtype(column.dtype):
            continue
        wide = column.to_numpy() > limit
        if wide.any():
            more = int(wide.sum()) - 1
            raise InputError(
                f"input rejected: row {int(frame.index[int(np.argmax(wide))]) + 1}, column '{q.name}': an integer "
                "above 2^63 - 1 (the largest a published range holds)"
                + (f" (and {more:,} more row(s) with this problem)" if more else "")
            )


def _missing_cells(frame: pd.DataFrame, spec: ReleaseSpec) -> tuple[pd.DataFrame, int]:
    """`[dataset] missing`: "drop" leaves out the rows with an empty cell (their index, their
    place in the input, is kept for messages); "category" fills a categorical QI's empty cells
    with MISSING_CATEGORY; "refuse" changes nothing (the schema refuses the empty cells)."""
    ds = spec.dataset
    if ds.missing == "drop":
        empty = frame.isna().any(axis=1).to_numpy()
        if empty.all():
            raise InputError('input has no rows without an empty cell ([dataset] missing = "drop")')
        return (frame[~empty], int(empty.sum())) if empty.any() else (frame, 0)
    if ds.missing == "category":
        filled = {
            q.name: frame[q.name].astype(object).where(frame[q.name].notna(), MISSING_CATEGORY)
            for q in ds.qi
            if q.kind == "categorical" and frame[q.name].isna().any()
        }
        return (frame.assign(**filled) if filled else frame), 0
    return frame, 0


# what a typed input's column (a DataFrame's, Parquet's, a DuckDB table's) may hold, by pandas'
# inference of an object column: one plain value per cell
_PLAIN_KINDS = (
    "string", "empty", "integer", "floating", "mixed-integer-float", "decimal", "boolean",
    "date", "datetime", "datetime64",
)  # fmt: skip
_CELL_TYPES = {"bytes": "bytes", "complex": "complex numbers"}


def _odd_cells(column: pd.Series) -> tuple[np.ndarray, str] | None:
    """Where a typed column holds what a release cannot publish as it is (bytes, complex
    numbers, integers beyond 64 bits, containers) and what: a mask of its rows and the words."""
    dtype = column.dtype
    if pd.api.types.is_complex_dtype(dtype):
        return np.ones(len(column), dtype=bool), "complex numbers"
    if not pd.api.types.is_object_dtype(dtype):
        return None
    kind = pd.api.types.infer_dtype(column, skipna=True)
    if kind in ("integer", "mixed-integer-float"):  # beyond int64 / uint64 pandas keeps Python ints
        try:
            wider = pd.api.types.is_object_dtype(pd.to_numeric(column).dtype)  # no 64-bit type holds them
        except (ValueError, TypeError, OverflowError):
            wider = True
        if wider:
            lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
            wide = column.map(lambda v: isinstance(v, int) and not lo <= v <= hi)  # error path only
            return wide.to_numpy(dtype=bool), "integers outside the 64-bit range"
        return None
    if kind in _PLAIN_KINDS:
        return None
    # a mix of types: one type test per cell (a C loop in pandas), only for such a column
    types = column.map(type)
    plain = types.isin([str, int, float, bool, type(None)]) | column.isna().to_numpy()
    plain &= ~types.isin([bytes, bytearray, complex]).to_numpy()
    what = _CELL_TYPES.get(kind) or next(
        (
            words
            for t, words in ((bytes, "bytes"), (bytearray, "bytes"), (complex, "complex numbers"))
            if (types == t).any()
        ),
        "values that are not text, numbers or dates",
    )
    return ~plain.to_numpy(dtype=bool), what


def check_typed_cells(frame: pd.DataFrame, spec: ReleaseSpec) -> None:
    """A typed input's columns the release reads hold plain values: bytes would be published as
    "b'...'", a complex number or a 2**80 silently made a float. Named by row and column."""
    for name in file_columns(spec.dataset):
        if name not in frame.columns:
            continue
        odd = _odd_cells(frame[name])
        if odd is not None and odd[0].any():
            rows, what = odd
            more = int(rows.sum()) - 1
            raise InputError(
                f"input rejected: row {int(np.argmax(rows)) + 1}, column '{name}': holds {what}, which privpub does "
                "not convert" + (f" (and {more:,} more row(s) with this problem)" if more else "")
            )


# what pandas infers for an object column that holds only numbers (no text, no booleans)
_NUMBER_KINDS = ("integer", "floating", "mixed-integer-float", "decimal", "empty")


def check_frame_types(frame: pd.DataFrame, spec: ReleaseSpec, source: str = "DataFrame") -> None:
    """A DataFrame, a Parquet file or a DuckDB table is typed, a CSV file is not: a numeric
    quasi-identifier of a typed input must hold numbers. Text that would convert ("30") or
    booleans are refused, not converted (a cell that would not convert was already named by its
    row in validate_input). `source`: what the message calls the input."""
    for q in spec.dataset.qi:
        if q.kind != "numeric":
            continue
        column = frame[q.name]
        dtype = column.dtype
        if pd.api.types.is_bool_dtype(dtype):
            held = "booleans"
        elif pd.api.types.is_numeric_dtype(dtype):
            continue
        elif pd.api.types.is_object_dtype(dtype) and pd.api.types.infer_dtype(column, skipna=True) in _NUMBER_KINDS:
            continue
        else:
            held = f"{dtype} values"
        raise InputError(
            f"input rejected: column '{q.name}': not a number (a numeric quasi-identifier; the {source} "
            f"column holds {held}, which privpub does not convert)"
        )

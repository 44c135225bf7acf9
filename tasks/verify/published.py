"""How an adversary reads a published generalized table: which columns carry each QI, and the
equivalence classes (rows with identical published QI values); and the check that every
published table passes its schema (schemas/published.py) and holds no person id."""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import Future
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandera.errors import SchemaErrors
from pandera.pandas import DataFrameSchema

from privpub.schemas.errors import PublishedTableError
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.parted_table import map_parts
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.threads import map_on_threads
from privpub.tasks.core.types import Release


def qi_columns(table: pa.Table, qi_names: list[str]) -> list[str]:
    """The published columns of the given QIs: <qi>_lo/<qi>_hi for ranges, <qi> otherwise."""
    cols: list[str] = []
    for q in qi_names:
        if f"{q}_lo" in table.column_names:
            cols += [f"{q}_lo", f"{q}_hi"]
        elif q in table.column_names:
            cols.append(q)
        else:
            raise KeyError(f"published table has no column for quasi-identifier '{q}'")
    return cols


def _quote(col: str) -> str:
    return '"' + col.replace('"', '""') + '"'


def equivalence_classes(table: pa.Table, columns: list[str], sensitive: str | None = None) -> pa.Table:
    """One row per distinct combination of `columns`: its size and distinct sensitive values,
    largest problems first (smallest size, then fewest distinct values)."""
    con = duckdb.connect()
    con.register("published", table)
    keys = ", ".join(_quote(c) for c in columns)
    distinct = f"count(DISTINCT {_quote(sensitive)})" if sensitive else "NULL"
    sql = (
        f"SELECT {keys}, count(*) AS size, {distinct} AS distinct_sensitive "
        f"FROM published GROUP BY {keys} ORDER BY size, distinct_sensitive"
    )
    return con.sql(sql).to_arrow_table()


# No published value may hold this control character (a list's items were once joined by it).
_SEP = "\x1f"


def _codes(array: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Dictionary codes of a flat column (nulls get a code of their own) and the dictionary."""
    enc = pc.dictionary_encode(array, null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary


def _cell_codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes of a published column: equal cells get equal codes (lists compared whole,
    in their published order)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        return _codes(col)[0]
    if pa.types.is_dictionary(col.type.value_type):  # items held as codes: their values coded once
        items = col.flatten()
        if items.null_count:
            raise ValueError("a published list holds a null item")
        # the dictionary's values coded (a value listed twice gets one code), then each item
        canonical, dictionary = _codes(pc.cast(items.dictionary, pa.string()))
        item_codes = canonical[items.indices.to_numpy(zero_copy_only=False)]
        if items.dictionary.null_count and dictionary.null_count:  # a null value a cell points at
            null_code = int(np.flatnonzero(pc.is_null(dictionary).to_numpy(zero_copy_only=False))[0])
            if (item_codes == null_code).any():
                raise ValueError("a published list holds a null item")
    else:
        col = pc.cast(col, pa.list_(pa.string()))
        items = col.flatten()
        if items.null_count:
            raise ValueError("a published list holds a null item")
        item_codes, dictionary = _codes(items)
    if len(dictionary) and pc.any(pc.greater_equal(pc.find_substring(dictionary, _SEP), 0)).as_py():
        raise ValueError("a published list value contains the control character U+001F")
    # each list as the bytes of its items' codes, all of one width: two lists are equal exactly
    # when their bytes are, and short byte strings hash faster than the items' text joined
    width = 1 if len(dictionary) <= 1 << 8 else 2 if len(dictionary) <= 1 << 16 else 4
    packed = item_codes.astype(f"<u{width}")
    # offsets from the lengths (a null list: none), as `flatten` lays the items out; a null list's
    # offsets may span items, which `flatten` leaves out
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False) * width, out=offsets[1:])
    valid = None if col.null_count == 0 else pc.is_valid(col).buffers()[1]
    lists = pa.Array.from_buffers(
        pa.large_binary(), len(col), [valid, pa.py_buffer(offsets), pa.py_buffer(packed)], null_count=col.null_count
    )
    return _codes(lists)[0]


# The verifier, the group sizes and the utility estimates of one release code the same columns of
# the same table: each column is coded once per table (read-only codes), and forgotten with it.
_CODES: dict[tuple[int, str], np.ndarray] = {}
_CODES_LOCK = threading.Lock()
# codes being computed: verify and the evaluation beside it (flows/beside.py) ask for the same
# columns at the same moment; the second waits for the first's codes instead of coding them again
_CODING: dict[tuple[int, str], Future[np.ndarray]] = {}


def column_codes(table: pa.Table, name: str) -> np.ndarray:
    """_cell_codes of a table's column, computed once per table."""
    key = (id(table), name)
    with _CODES_LOCK:
        codes = _CODES.get(key)
        if codes is not None:
            return codes
        coding = _CODING.get(key)
        mine = coding is None
        if coding is None:
            coding = _CODING[key] = Future()
    if not mine:
        result: np.ndarray = coding.result()
        return result
    try:
        codes = _cell_codes(table.column(name))
        if len(codes) and codes.max() < 2**31:
            codes = codes.astype(np.int32)
        _remember(table, key, codes)
        coding.set_result(codes)
    except BaseException as exc:
        coding.set_exception(exc)
        raise
    finally:
        with _CODES_LOCK:
            del _CODING[key]
    return codes


def _remember(table: pa.Table, key: tuple[int, str], value: np.ndarray) -> None:
    """Keep `value` (read-only) for `table`, until the table is gone."""
    value.setflags(write=False)
    with _CODES_LOCK:
        if not any(k[0] == key[0] for k in _CODES):
            weakref.finalize(table, _forget_codes, key[0])
        _CODES[key] = value


def _forget_codes(table_id: int) -> None:
    with _CODES_LOCK:
        for key in [k for k in _CODES if k[0] == table_id]:
            del _CODES[key]


def class_ids(table: pa.Table, columns: list[str]) -> tuple[np.ndarray, int]:
    """The equivalence class of every row over `columns`: (class id per row, number of classes).

    Each column is coded to integers, the codes are combined into one key, and the key is
    re-compacted with a hash factorisation before it could overflow: O(n) per column, where a
    SQL GROUP BY over list columns is an order of magnitude slower."""
    if table.num_rows == 0:
        return np.zeros(0, dtype=np.int64), 0
    cache_key = (id(table), "\x1e".join(["classes", *columns]))  # the verifier and the group sizes ask alike
    known = _CODES.get(cache_key)
    if known is not None:
        return known, int(known.max()) + 1
    key = np.zeros(table.num_rows, dtype=np.int64)
    bound = 1
    # Arrow's kernels release the GIL: the columns are coded on all cores.
    workers = min(len(columns), os.cpu_count() or 1)
    all_codes = map_on_threads(lambda c: column_codes(table, c), columns, workers, table.num_rows, "privpub-codes")
    for codes in all_codes:
        width = int(codes.max()) + 1
        if bound * width >= 2**62:
            key, uniq = pd.factorize(key)
            bound = len(uniq)
        key = key * width + codes
        bound *= width
    key, uniq = pd.factorize(key)
    ids = key.astype(np.int64)
    _remember(table, cache_key, ids)
    return ids, len(uniq)


# release.private["people"] (rows_per_person = "many"): one int64 column "person", aligned with
# the rows of the technique's risk table, holding person NUMBERS (never ids), stored in the state
# and never published; verification reads it beside the published table (docs/models.md)
PEOPLE = "people"
# release.private["people_in"]: the input's people (the population of [risk] sample_fraction)
PEOPLE_IN = "people_in"


def people_table(person: np.ndarray) -> pa.Table:
    """release.private["people"] for published rows whose people are `person` (in published row
    order): renumbered by first appearance in that order, so it keeps neither an id nor the
    input's order."""
    return pa.table({"person": pa.array(pd.factorize(person)[0].astype(np.int64))})


def release_people(release: Release) -> np.ndarray | None:
    """Each published row's person number, or None (one row per person: a row is a person)."""
    people = release.private.get(PEOPLE)
    if people is None:
        return None
    result: np.ndarray | None = people.column("person").to_numpy(zero_copy_only=False).astype(np.int64)
    return result


def class_people(ids: np.ndarray, n_classes: int, person: np.ndarray) -> tuple[np.ndarray, int]:
    """Distinct people per class, and how many people have rows in more than one class."""
    if len(person) != len(ids):
        raise ValueError(
            f"the release's private people table has {len(person):,} rows, the published table {len(ids):,}"
        )
    if not len(ids):
        return np.zeros(n_classes, dtype=np.int64), 0
    width = int(person.max()) + 1
    pairs = pd.unique(ids * width + person)  # distinct (class, person)
    spread = int((np.bincount(pairs % width, minlength=width) > 1).sum())
    return np.bincount(pairs // width, minlength=n_classes), spread


def class_profile(
    table: pa.Table, columns: list[str], sensitive: str | None = None, person: np.ndarray | None = None
) -> dict[str, Any]:
    """Per class: size and (with `sensitive`) distinct non-null sensitive values; plus one row
    index per class for describing it. With `person` (each row's person number, rows_per_person
    = "many"): "people", the distinct people per class, and "spread", the people whose rows lie
    in more than one class."""
    ids, n = class_ids(table, columns)
    sizes = np.bincount(ids, minlength=n)
    first_row = np.full(n, -1, dtype=np.int64)
    first_row[ids[::-1]] = np.arange(len(ids))[::-1]
    out = {"class": ids, "size": sizes, "first_row": first_row, "distinct": None, "people": None, "spread": 0}
    if person is not None:
        out["people"], out["spread"] = class_people(ids, n, person)
    if sensitive is not None:
        col = table.column(sensitive)
        s_codes, s_dict = _codes(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        ok = ~np.asarray(pc.is_null(s_dict).to_numpy(zero_copy_only=False))[s_codes]
        out["distinct"] = distinct_per_class(ids[ok], s_codes[ok], n, max(len(s_dict), 1))
    return out


# classes x values cells counted by one bincount (linear) rather than hashed
_DENSE_CLASS_CELLS = 1 << 22


def distinct_per_class(ids: np.ndarray, codes: np.ndarray, n: int, width: int) -> np.ndarray:
    """Distinct codes (0..width-1) per class (0..n-1): a bincount over every (class, code) cell
    while there are few cells, else a hash of the pairs that occur; the same counts either way."""
    if n * width <= max(_DENSE_CLASS_CELLS, 4 * len(ids)):
        seen = np.bincount(ids * width + codes, minlength=n * width)
        result: np.ndarray = np.count_nonzero(seen.reshape(n, width), axis=1)
        return result
    return np.bincount(pd.unique(ids * width + codes) // width, minlength=n)


def describe_row_class(
    table: pa.Table, row: int, columns: list[str], size: int, distinct: int | None = None, people: int | None = None
) -> dict[str, Any]:
    """The published QI values of one class (read from one of its rows), for the report; size:
    its rows; people: its distinct people (rows_per_person = "many")."""
    cells = table.select(columns).slice(row, 1).to_pylist()[0]
    out = {c: list(v) if isinstance(v, (list, tuple)) else v for c, v in cells.items()}
    out["size"] = int(size)
    if people is not None:
        out["distinct_people"] = int(people)
    if distinct is not None:
        out["distinct_sensitive"] = int(distinct)
    return out


def check_published(release: Release, spec: ReleaseSpec, technique: Technique) -> None:
    """Every published table passes its schema and holds no person id.

    Tables are viewed as Arrow-backed pandas frames, so list columns are checked with vectorised
    Arrow kernels instead of a Python call per cell. A table written as a folder of parts is
    checked part by part (on its cluster's workers when it has one), never whole in memory.
    """
    schemas = technique.table_schemas(spec)
    pid = spec.dataset.person_id
    for name, table in release.tables.items():
        schema = schemas.get(name)
        if schema is None:
            raise PublishedTableError(f"technique '{technique.name}' has no schema for table '{name}'")
        if hasattr(table, "parts"):
            problems = [p for p in map_parts(table, table_problem, schema, pid, name) if p]
        else:
            problems = [table_problem(table, schema, pid, name)]
        if problems and problems[0]:
            raise PublishedTableError(problems[0])


def table_problem(table: pa.Table, schema: DataFrameSchema, pid: str, name: str) -> str | None:
    """What is wrong with one published table (or part), or None."""
    if pid in table.column_names:
        return f"published table '{name}' contains the person id column '{pid}'"
    try:
        schema.validate(table.to_pandas(types_mapper=pd.ArrowDtype), lazy=True)
    except SchemaErrors as err:
        return f"published table '{name}' fails its schema: {err.failure_cases.head(5).to_dict('records')}"
    return None

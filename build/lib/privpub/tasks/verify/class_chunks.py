"""Equivalence classes of a published table counted in runs of rows (verify chunks on the task
runner: threads of the flow process, or Dask workers), with the figures of the one-step
`class_profile` / `k_anonymity` on the whole table.

Each chunk reduces its rows to one partial row per class it sees: the class's published cells,
its rows in the chunk and its first row (as a row number of the whole table). The combine codes
the partial rows' cells the same way (`class_ids`: equal cells, lists compared whole) and adds
the partials up per class; a class's first row is the least of its chunks' first rows, so the
worst class (smallest, then first in the table) is the one-step's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from privpub.tasks.core.compact_table import CompactTable
from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.verify.published import class_ids, class_profile, describe_row_class

_ROWS, _FIRST = "__rows", "__first_row"


def row_runs(n_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    """(first row, rows) of consecutive runs of at most chunk_rows rows; one run for no rows."""
    return [(lo, min(chunk_rows, n_rows - lo)) for lo in range(0, n_rows, chunk_rows)] or [(0, 0)]


@dataclass
class ClassChunk:
    """One run of published rows and the column sets whose classes it counts."""

    rows: CompactTable  # the run, only the columns the sets name
    offset: int  # the run's first row in the whole table
    column_sets: list[list[str]]


def class_chunks(table: pa.Table, column_sets: list[list[str]], chunk_rows: int) -> list[ClassChunk]:
    runs = row_runs(table.num_rows, chunk_rows)
    if len(runs) == 1:  # the table itself: its column codes are kept for the group sizes and estimates
        return [ClassChunk(CompactTable(table), 0, column_sets)]
    narrow = table.select(list(dict.fromkeys(c for cols in column_sets for c in cols)))
    return [ClassChunk(CompactTable(narrow.slice(lo, rows)), lo, column_sets) for lo, rows in runs]


def class_partials(chunk: ClassChunk) -> list[pa.Table]:
    """Per column set: one row per class of the run (its cells, rows, first row in the table)."""
    table = chunk.rows.table
    out = []
    for columns in chunk.column_sets:
        if table.num_rows == 0:
            out.append(
                table.select(columns)
                .append_column(_ROWS, pa.array([], pa.int64()))
                .append_column(_FIRST, pa.array([], pa.int64()))
            )
            continue
        prof = class_profile(table, columns)
        cells = table.select(columns).take(pa.array(prof["first_row"]))
        out.append(
            cells.append_column(_ROWS, pa.array(prof["size"].astype(np.int64))).append_column(
                _FIRST, pa.array(prof["first_row"] + chunk.offset)
            )
        )
    return out


@dataclass
class MergedClasses:
    """The classes of the whole table over one column set, from the chunks' partials."""

    cells: pa.Table  # the partial rows (one or more per class)
    ids: np.ndarray  # class of each partial row
    size: np.ndarray  # rows per class
    first_row: np.ndarray  # first row of each class in the whole table


def merge_partials(partials: list[pa.Table], columns: list[str]) -> MergedClasses:
    cells = pa.concat_tables(partials)
    ids, n = class_ids(cells, columns)
    size = np.zeros(n, dtype=np.int64)
    np.add.at(size, ids, cells.column(_ROWS).to_numpy())
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, ids, cells.column(_FIRST).to_numpy())
    return MergedClasses(cells, ids, size, first)


def k_anonymity_of(merged: MergedClasses, columns: list[str], k: int | None) -> PrivacyResult:
    """`k_anonymity` of the whole table: the smallest class, the first in the table among ties."""
    if len(merged.size) == 0:
        return PrivacyResult("k-anonymity", 0, k, False, {"reason": "empty table"})
    worst = int(np.lexsort((merged.first_row, merged.size))[0])
    reached = int(merged.size[worst])
    row = int(np.flatnonzero(merged.ids == worst)[0])
    return PrivacyResult(
        "k-anonymity",
        reached,
        k,
        k is None or reached >= k,
        {"class": describe_row_class(merged.cells, row, columns, reached), "classes": len(merged.size)},
    )

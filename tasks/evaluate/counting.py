"""The workload answered in one setup pass: rows grouped by sensitive value once, every column
coded once, so a query only reads the rows that hold its sensitive value.

A query is `QI conditions AND S = v`. Its answer is a sum over the rows with S = v of a weight
(1, or a row copy's probability) times one factor per condition. The factor is 0/1 for a plain
value, the uniform share of a published range or set for a generalized cell. Per column, the
factor is computed once per distinct value (or distinct published set) and gathered per row,
so the cost of the whole workload is one sort of the rows by S plus, per query, a few gathers
over that query's rows: no pass over the table per query.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privpub.tasks.evaluate.workload import CodedTable, CountQuery, RangeCond, SetCond
from privpub.tasks.verify.published import column_codes


def range_fraction(lo: np.ndarray, hi: np.ndarray, cond: RangeCond) -> np.ndarray:
    """Share of each published range [lo, hi] inside the condition, the range taken as continuous
    (a point range counts fully when inside)."""
    lo, hi = lo.astype(float), hi.astype(float)
    width = hi - lo
    overlap = np.clip(np.minimum(hi, cond.hi) - np.maximum(lo, cond.lo), 0, None)
    point_inside = ((lo >= cond.lo) & (lo <= cond.hi)).astype(float)
    safe = np.where(width > 0, width, 1.0)
    return np.where(width > 0, overlap / safe, point_inside)


def _values_hit(values: np.ndarray, cond: RangeCond | SetCond) -> np.ndarray:
    """Which plain values satisfy the condition: a range compares numbers, a set their text."""
    if isinstance(cond, RangeCond):
        v = values.astype(float)
        return (v >= cond.lo) & (v <= cond.hi)
    return np.isin(values.astype(str), [str(x) for x in cond.values])


@dataclass
class Coded:
    """A column as one code per row and a per-code factor: plain values (0/1) or distinct lists
    (|list ∩ condition| / |list|)."""

    codes: np.ndarray
    per_code: Callable[[Any], np.ndarray]  # cond -> factor per code
    _cache: dict[Any, np.ndarray] = field(default_factory=dict)

    def take(self, order: np.ndarray) -> Coded:
        return Coded(self.codes[order], self.per_code)

    def factor(self, cond: Any, rows: slice) -> np.ndarray:
        if cond not in self._cache:
            self._cache[cond] = self.per_code(cond)
        result: np.ndarray = self._cache[cond][self.codes[rows]]
        return result


@dataclass
class Ranges:
    """A generalized numeric column: each row's published [lo, hi]."""

    lo: np.ndarray
    hi: np.ndarray

    def take(self, order: np.ndarray) -> Ranges:
        return Ranges(self.lo[order], self.hi[order])

    def factor(self, cond: Any, rows: slice) -> np.ndarray:
        return range_fraction(self.lo[rows], self.hi[rows], cond)


def _small(codes: np.ndarray) -> np.ndarray:
    """Codes in the smallest signed type that holds them: cheaper to sort, move and gather."""
    top = int(codes.max()) if len(codes) else 0
    return codes.astype(np.int8 if top < 2**7 else np.int16 if top < 2**15 else np.int32, copy=False)


def plain_column(codes: np.ndarray, values: np.ndarray) -> Coded:
    """Rows coded into `values` (a domain, or a column's distinct values)."""
    values = np.asarray(values)
    return Coded(_small(np.asarray(codes)), lambda cond: _values_hit(values, cond))


def arrow_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Dictionary codes of a flat Arrow column (null -> -1) and its distinct values."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    enc = pc.dictionary_encode(col)
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, enc.dictionary.to_numpy(zero_copy_only=False)


def arrow_plain_column(column: pa.ChunkedArray | pa.Array) -> Coded:
    return plain_column(*arrow_codes(column))


@dataclass
class DistinctLists:
    """A published list column by its distinct lists: the list of each row, and each distinct
    list's items (text) with the list they belong to."""

    codes: np.ndarray  # per row: which distinct list
    item_codes: np.ndarray  # the distinct lists' items, coded into item_values
    item_values: np.ndarray  # distinct items, as text
    parent: np.ndarray  # per item: its distinct list
    lengths: np.ndarray  # per distinct list: number of items

    @classmethod
    def of(cls, table: pa.Table, name: str) -> DistinctLists:
        """The distinct lists of a table's column, computed once per table and column (the
        estimates, the penalty and the quality models read the same columns): read-only."""
        key = (id(table), name)
        with _LISTS_LOCK:
            known = _LISTS.get(key)
        if known is not None:
            return known
        lists = cls._of(table, name)
        for array in (lists.codes, lists.item_codes, lists.item_values, lists.parent, lists.lengths):
            array.setflags(write=False)
        with _LISTS_LOCK:
            _LISTS[key] = lists
        weakref.finalize(table, _forget_lists, key)
        return lists

    @classmethod
    def _of(cls, table: pa.Table, name: str) -> DistinctLists:
        column = table.column(name)
        col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        codes = column_codes(table, name)
        n = int(codes.max()) + 1 if len(codes) else 0
        first = np.full(n, -1, dtype=np.int64)
        first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
        lists = col.take(pa.array(first))
        item_codes, item_values = arrow_codes(pc.cast(lists.flatten(), pa.string()))
        parent = pc.list_parent_indices(lists).to_numpy()
        lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
        return cls(_small(codes), item_codes, item_values.astype(str), parent, lengths.astype(np.int64))

    @property
    def items(self) -> np.ndarray:
        result: np.ndarray = self.item_values[self.item_codes]
        return result

    def share(self, cond: SetCond) -> np.ndarray:
        """Per distinct list: |list ∩ condition| / |list| (0 for an empty list)."""
        hit = np.isin(self.item_values, list(cond.values))[self.item_codes]
        hits = np.bincount(self.parent, weights=hit.astype(float), minlength=len(self.lengths))
        return hits / np.where(self.lengths > 0, self.lengths, 1.0)

    def column(self) -> Coded:
        return Coded(self.codes, self.share)


_LISTS: dict[tuple[int, str], DistinctLists] = {}
_LISTS_LOCK = threading.Lock()


def _forget_lists(key: tuple[int, str]) -> None:
    with _LISTS_LOCK:
        _LISTS.pop(key, None)


class QueryAnswers:
    """Row copies grouped by sensitive value: `rows` (default: every row once) index the columns,
    `keys` give each copy's sensitive code (-1: matches no query) and `weights` its weight."""

    def __init__(
        self,
        columns: Mapping[str, Coded | Ranges],
        keys: np.ndarray,
        key_values: list[Any],
        rows: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ):
        order = np.argsort(_small(keys), kind="stable")  # a radix sort for 8- and 16-bit keys
        sorted_keys = keys[order]
        self._bounds = np.searchsorted(sorted_keys, np.arange(len(key_values) + 1))
        self._slot = {v: i for i, v in enumerate(key_values)}
        rows_sorted = order if rows is None else rows[order]
        self.columns = {name: col.take(rows_sorted) for name, col in columns.items()}
        self.weights = None if weights is None else weights[order].astype(float)

    def answer(self, query: CountQuery) -> float:
        slot = self._slot.get(query.sensitive_value)
        if slot is None:
            return 0.0
        rows = slice(int(self._bounds[slot]), int(self._bounds[slot + 1]))
        weight = np.ones(rows.stop - rows.start) if self.weights is None else self.weights[rows]
        for name, cond in query.conditions:
            weight = weight * self.columns[name].factor(cond, rows)
        return float(weight.sum())

    def answers(self, workload: list[CountQuery]) -> np.ndarray:
        return np.array([self.answer(q) for q in workload], dtype=float)


def count_in_table(table: pa.Table, columns: list[str], sensitive: str, workload: list[CountQuery]) -> np.ndarray:
    """Exact answers on a table of plain values (no generalized cells)."""
    if not workload:
        return np.zeros(0)
    s_codes, s_values = arrow_codes(table.column(sensitive))
    cols = {c: arrow_plain_column(table.column(c)) for c in columns}
    return QueryAnswers(cols, s_codes, s_values.tolist()).answers(workload)


def count_in_microdata(data: CodedTable, workload: list[CountQuery]) -> np.ndarray:
    """Exact answers on the input, from its codes (the same figures as exact_answers' SQL)."""
    if not workload:
        return np.zeros(0)
    cols = {d.name: plain_column(data.codes[:, j], d.values) for j, d in enumerate(data.domains)}
    values = [v.item() if hasattr(v, "item") else v for v in data.sensitive_values]
    return QueryAnswers(cols, data.sensitive_codes.astype(np.int64), values).answers(workload)

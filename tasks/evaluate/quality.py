"""The standard quality models of a release (issue 44, docs/utility.md): gen-iloss,
non-uniform-entropy, aecs, precision and kl-divergence, computed from the published tables
against the input.

A technique says how its tables read as one row per record with a cell per QI (Technique.
quality_view -> QualityView), or why they do not (a reason: the figures then read
"does not apply: <reason>", stored with a NULL value and the note as text). Every cell is put in
the QI's domain codes (the input's distinct values, or the hierarchy's leaves): a range [lo, hi]
as a code interval, a set as its codes, a plain value as a one-code interval. Nothing links a
published row to an input row: the non-uniform entropy's sum splits into an input-only and a
published-only part (each input row is published once or suppressed), and the KL divergence
compares the two distributions tuple by tuple.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privpub.schemas.dates import as_day_numbers
from privpub.tasks.core.microdata import QIDomain
from privpub.tasks.evaluate.counting import DistinctLists
from privpub.tasks.verify.published import class_ids, column_codes, qi_columns

QUALITY_FIGURES = ("gen-iloss", "non-uniform-entropy", "aecs", "precision", "kl-divergence")
NOT_APPLICABLE = "does not apply: "
DENSE_SETS = 1 << 24  # (distinct set, code) membership bits kept as a table; more: searched
PAIRS_PER_BLOCK = 1 << 20  # candidate (box, input tuple) pairs the KL divergence tests at once


def not_applicable(reason: str) -> str:
    """The value a figure that does not apply to a release records (release_metrics: value NULL,
    text_value this note)."""
    return NOT_APPLICABLE + reason


@dataclass(frozen=True)
class QualityView:
    """The release as the quality models read it. `table`: one row per published record, each
    QI as `<qi>_lo`/`<qi>_hi`, a list, or a plain value. `joint`: the rows read for the KL
    divergence with the sensitive column (a null cell: any value), `weights` the records each
    stands for (None: one each; Anatomy: a QIT row times its group's ST shares). `classes`: the
    published equivalence-class sizes and `k` the size each is bound to hold (None: aecs does not
    apply, `aecs_reason` says why). `suppressed`: input rows left out. `records`: the rows are
    the input's records (generalized, masked or suppressed); False for synthetic rows, which
    stand for no input row even when there happen to be as many (no non-uniform entropy then)."""

    table: pa.Table
    sensitive: str
    joint: pa.Table | None = None
    weights: np.ndarray | None = None
    classes: np.ndarray | None = None
    k: int | None = None
    classes_are_boxes: bool = False  # a class is a distinct published QI box (counted here, not passed)
    aecs_reason: str = "the technique guarantees no class size k"
    suppressed: int = 0
    records: bool = True


@dataclass(frozen=True)
class Cells:
    """A QI's published cells in domain codes: per row a code interval [lo, hi], `size` domain
    values in the cell, and for set cells each row's distinct set (`key`) with the sets' members
    as sorted keys set * n + code (read per distinct set, not per row: a million rows share a
    few thousand sets, issue 43)."""

    lo: np.ndarray
    hi: np.ndarray
    size: np.ndarray
    members: np.ndarray | None = None  # None: every cell is its whole interval
    key: np.ndarray | None = None  # per row: which distinct set (set cells only)
    dense: np.ndarray | None = None  # per distinct set and code: a member (when small enough)

    def contains(self, rows: np.ndarray, codes: np.ndarray, n_codes: int) -> np.ndarray:
        inside = (self.lo[rows] <= codes) & (codes <= self.hi[rows])
        if self.members is None or self.key is None:
            return np.asarray(inside)
        if self.dense is not None:  # one bit per (distinct set, code)
            dense: np.ndarray = inside & self.dense[self.key[rows], np.where(inside, codes, 0)]
            return dense
        keys = self.key[rows].astype(np.int64) * n_codes + codes
        at = np.minimum(np.searchsorted(self.members, keys), len(self.members) - 1)
        result: np.ndarray = inside & (self.members[at] == keys)
        return result


@dataclass(frozen=True)
class _BoxSets:
    """Set cells as one membership bit per (distinct box, code): a test is one lookup."""

    bits: np.ndarray

    def contains(self, rows: np.ndarray, codes: np.ndarray, n_codes: int) -> np.ndarray:
        found: np.ndarray = self.bits[rows * n_codes + codes]
        return found


@dataclass(frozen=True)
class _RowsOf:
    """Set cells read through a row map (distinct box -> a published row holding it)."""

    cells: Cells
    rows: np.ndarray

    def contains(self, rows: np.ndarray, codes: np.ndarray, n_codes: int) -> np.ndarray:
        return self.cells.contains(self.rows[rows], codes, n_codes)


def _domain_index(dom: QIDomain) -> pd.Index:
    index: pd.Index = pd.Index(np.asarray(dom.values, dtype=object).astype(str))
    return index


def _codes_of(values: np.ndarray, dom: QIDomain, name: str) -> np.ndarray:
    codes = _domain_index(dom).get_indexer(pd.Index(np.asarray(values, dtype=object).astype(str)))
    if (codes < 0).any():
        raise KeyError(f"published '{name}' holds values outside its domain")
    result: np.ndarray = codes.astype(np.int64)
    return result


def _searched(values: np.ndarray, column: np.ndarray, side: Any) -> np.ndarray:
    """np.searchsorted(values, column) looked up once per distinct value of the column (a
    million rows hold a few dozen bounds)."""
    codes, distinct = pd.factorize(np.asarray(column, dtype=float), use_na_sentinel=False)
    found: np.ndarray = np.searchsorted(values, distinct, side)[codes]
    return found


def cells(table: pa.Table, dom: QIDomain) -> Cells:
    """The QI's cells of every row of `table` in domain codes."""
    name = dom.name
    if f"{name}_lo" in table.column_names:  # a range: the domain's values inside it
        values = dom.values.astype(float)
        lo = _searched(values, as_day_numbers(table.column(f"{name}_lo")), "left")
        hi = _searched(values, as_day_numbers(table.column(f"{name}_hi")), "right") - 1
        return Cells(lo, hi, np.maximum(hi - lo + 1, 1))
    column = table.column(name)
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        lists = DistinctLists.of(table, name)
        item = _codes_of(lists.item_values, dom, name)[lists.item_codes]  # per item: its domain code
        n_lists = len(lists.lengths)
        lo_l = np.full(n_lists, np.iinfo(np.int64).max, dtype=np.int64)
        hi_l = np.full(n_lists, -1, dtype=np.int64)
        np.minimum.at(lo_l, lists.parent, item)
        np.maximum.at(hi_l, lists.parent, item)
        row_of_list = lists.codes.astype(np.int32)  # per row: 4 bytes (a million rows, several QIs)
        # the members of each distinct list (rows sharing a list share its items)
        members = np.sort(lists.parent.astype(np.int64) * max(dom.size, 1) + item)
        dense = None
        if n_lists * max(dom.size, 1) <= DENSE_SETS:
            dense = np.zeros((n_lists, max(dom.size, 1)), dtype=bool)
            dense[lists.parent, item] = True
        sizes = np.asarray(lists.lengths, dtype=np.int32)[row_of_list]
        return Cells(lo_l[row_of_list], hi_l[row_of_list], sizes, members, row_of_list, dense)
    if dom.kind == "numeric":
        plain = np.searchsorted(dom.values.astype(float), as_day_numbers(column).astype(float))
    else:
        plain = _codes_of(column.to_numpy(zero_copy_only=False), dom, name)
    return Cells(plain, plain, np.ones(len(plain), dtype=np.int64))


def cell_loss(c: Cells, dom: QIDomain) -> np.ndarray:
    """gen-iloss of each cell: (hi - lo) / (max - min) of the input for a numeric or date QI,
    order positions for an ordinal one, (values - 1) / (domain - 1) for a categorical one."""
    if dom.kind == "numeric":
        span = dom.span
        width = dom.width(c.lo, c.hi) if len(c.lo) else np.zeros(0)
        return np.asarray(width / span if span > 0 else np.zeros(len(c.lo)), dtype=float)
    if dom.size <= 1:
        return np.zeros(len(c.lo))
    if dom.kind == "ordinal":
        return np.asarray((c.hi - c.lo) / (dom.size - 1), dtype=float)
    return np.asarray((c.size - 1) / (dom.size - 1), dtype=float)


def node_heights(dom: QIDomain) -> tuple[dict[tuple[int, int], int], int]:
    """Each hierarchy node's leaf-code range (leaves in depth-first order, the domain's order)
    with its height (edges down to its deepest leaf; the lowest node of a range), and the
    hierarchy's height."""
    hierarchy = dom.hierarchy or {}
    leaf_code = {str(v): i for i, v in enumerate(dom.values)}
    memo: dict[str, tuple[int, int, int]] = {}

    def visit(node: str) -> tuple[int, int, int]:
        if node in leaf_code:
            return leaf_code[node], leaf_code[node], 0
        if node not in memo:
            spans = [visit(c) for c in hierarchy[node]]
            memo[node] = (min(s[0] for s in spans), max(s[1] for s in spans), 1 + max(s[2] for s in spans))
        return memo[node]

    heights: dict[tuple[int, int], int] = {(i, i): 0 for i in range(dom.size)}
    for node in hierarchy:
        a, b, h = visit(node)
        heights[(a, b)] = min(h, heights.get((a, b), h))
    return heights, max((h for h in heights.values()), default=0)


def precision_loss(c: Cells, dom: QIDomain) -> np.ndarray:
    """1 - precision of each cell: with a hierarchy, the height of the smallest node covering the
    cell over the hierarchy's height (Sweeney); without one, the cell's gen-iloss width."""
    if not dom.hierarchy:
        return cell_loss(c, dom)
    heights, top = node_heights(dom)
    if top == 0:
        return np.zeros(len(c.lo))
    ranges = np.array(sorted(heights), dtype=np.int64).reshape(-1, 2)
    h = np.array([heights[(int(a), int(b))] for a, b in ranges], dtype=float)
    # the smallest node whose leaf range holds [lo, hi]: the covering range of fewest leaves
    # on the distinct cells only (a cells x nodes table per row would grow with the rows)
    pairs, inverse = np.unique(c.lo * max(dom.size, 1) + c.hi, return_inverse=True)
    lo, hi = pairs // max(dom.size, 1), pairs % max(dom.size, 1)
    covers = (ranges[None, :, 0] <= lo[:, None]) & (hi[:, None] <= ranges[None, :, 1])
    widths = np.where(covers, ranges[:, 1] - ranges[:, 0], np.iinfo(np.int64).max)
    return np.asarray(h[widths.argmin(axis=1)][inverse.ravel()] / top, dtype=float)


def _input_counts(codes: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(codes, minlength=size).astype(float)


@dataclass(frozen=True)
class TableCells:
    """A table's QI cells read once per class (rows equal on every published QI column: the
    verifier's classes, coded once per table) and `of`, each row's class: a million rows hold a
    few ten thousand classes (issue 43). A per-row figure gathers its class's value, so sums run
    over the same per-row values in the same order as a row-by-row read."""

    cells: list[Cells]
    of: np.ndarray

    @classmethod
    def of_table(cls, table: pa.Table, domains: list[QIDomain]) -> TableCells:
        columns = qi_columns(table, [dom.name for dom in domains])
        ids, n = class_ids(table, columns)
        first = np.zeros(n, dtype=np.int64)
        first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1)
        classes = table.select(columns).take(pa.array(first))
        return cls([cells(classes, dom) for dom in domains], ids)

    def per_row(self, per_class: np.ndarray) -> np.ndarray:
        result: np.ndarray = per_class[self.of]
        return result


def _table_cells(view: QualityView, data: Any, table_cells: TableCells | None) -> TableCells:
    return table_cells if table_cells is not None else TableCells.of_table(view.table, data.domains)


def gen_iloss(view: QualityView, data: Any, table_cells: TableCells | None = None) -> float:
    """Mean over published QI cells (a suppressed row's cells count 1) of the normalized width."""
    total = float(view.suppressed * len(data.domains))
    read = _table_cells(view, data, table_cells)
    for c, dom in zip(read.cells, data.domains):
        total += float(read.per_row(cell_loss(c, dom)).sum())
    n_cells = (view.table.num_rows + view.suppressed) * len(data.domains)
    return total / n_cells if n_cells else 0.0


def precision(view: QualityView, data: Any, table_cells: TableCells | None = None) -> float:
    """Sweeney's Prec: 1 - mean over QI cells (a suppressed one: 1) of height / hierarchy height."""
    total = float(view.suppressed * len(data.domains))
    read = _table_cells(view, data, table_cells)
    for c, dom in zip(read.cells, data.domains):
        total += float(read.per_row(precision_loss(c, dom)).sum())
    n_cells = (view.table.num_rows + view.suppressed) * len(data.domains)
    return 1.0 - total / n_cells if n_cells else 1.0


def non_uniform_entropy(view: QualityView, data: Any, table_cells: TableCells | None = None) -> float:
    """Sum over QI cells of -log2 P(original | published), P = f(original) / F(cell): f the
    input's frequency of the value, F the input rows whose value lies in the cell (a suppressed
    cell: all N). Each input row is published once or suppressed, so the sum is
    sum_cells log2 F(cell) + suppressed log2 N - sum_input_rows log2 f(value)."""
    n = data.n
    total = 0.0
    read = _table_cells(view, data, table_cells)
    rows = np.bincount(read.of, minlength=len(read.cells[0].lo)).astype(float) if read.cells else np.zeros(0)
    for j, (c, dom) in enumerate(zip(read.cells, data.domains)):
        freq = _input_counts(data.codes[:, j], dom.size)
        cum = np.concatenate(([0.0], np.cumsum(freq)))
        in_cell = cum[c.hi + 1] - cum[c.lo]  # per class
        if c.members is not None and c.key is not None:  # a set: only its members, per distinct set
            width = max(dom.size, 1)
            per_set = np.bincount(
                c.members // width, weights=freq[c.members % width], minlength=int(c.key.max(initial=-1)) + 1
            )
            in_cell = per_set[c.key]
        # a one-value cell's term log2 f(value) is netted against the input's term for that value
        # per value (published one-value cells - f) log2 f: exact cells give exactly 0, no float noise
        point = c.lo == c.hi
        log_f = np.log2(np.where(freq > 0, freq, 1.0))
        points = np.bincount(c.lo[point], weights=rows[point], minlength=len(freq))
        # the wide cells' logs per class times its rows (a row-by-row sum's terms in another order)
        wide = float((rows[~point] * np.log2(in_cell[~point])).sum())
        total += float(((points - freq) * log_f).sum()) + wide
        total += view.suppressed * float(np.log2(n))
    return total


def _box_keys(table_cells: list[Cells]) -> list[np.ndarray]:
    """The columns that tell boxes apart: a range's [lo, hi], a set cell's distinct set (its
    interval and size follow from the set)."""
    keys = []
    for c in table_cells:
        keys += [c.lo, c.hi] if c.key is None else [c.key]
    return keys


def distinct_boxes(table_cells: list[Cells]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct QI boxes of cells read per row or per class: the first row (class) holding
    each, and each row's (class's) box, numbered in order of first appearance (read once for aecs
    and the KL divergence)."""
    first, _, box = _tuples(_box_keys(table_cells))
    return first, box


def aecs(
    view: QualityView, data: Any, table_cells: TableCells | None = None, boxes: np.ndarray | None = None
) -> float | str:
    """published rows / (classes x k) (LeFevre et al.'s normalized average class size)."""
    if (view.classes is None and not view.classes_are_boxes) or view.k is None:
        return not_applicable(view.aecs_reason)
    if view.classes is not None:
        classes = len(view.classes)
    elif not view.table.num_rows:
        classes = 0
    else:  # the distinct published QI boxes (`boxes`: their first classes, when read already)
        classes = len(distinct_boxes(_table_cells(view, data, table_cells).cells)[0] if boxes is None else boxes)
    return view.table.num_rows / (classes * view.k) if classes else 0.0


def _tuples(code_columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of the non-negative integer code columns: the first index of each, their
    counts and each row's distinct row (mixed-radix keys, re-ranked before they could overflow)."""
    key = np.zeros(len(code_columns[0]), dtype=np.int64)
    for col in code_columns:
        radix = int(col.max()) + 1 if len(col) else 1
        if int(key.max(initial=0)) >= (1 << 62) // max(radix, 1):
            key = pd.factorize(key)[0].astype(np.int64)
        key = key * radix + col
    inverse, uniques = pd.factorize(key)  # hashed, in order of first appearance
    first = np.full(len(uniques), -1, dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(key) - 1, -1, -1)
    return first, np.bincount(inverse, minlength=len(uniques)), inverse.astype(np.int64)


def sensitive_codes(table: pa.Table, sensitive: str, values: pd.Index) -> np.ndarray:
    """Each row's sensitive code among the input's values; -1 for a null (withheld) cell. The
    column's cell codes are the table's, coded once (risk reads the same): each distinct cell's
    text is looked up once."""
    codes = column_codes(table, sensitive)
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    first = np.zeros(int(codes.max()) + 1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    words = pc.cast(table.column(sensitive).take(pa.array(first)), pa.string())
    if isinstance(words, pa.ChunkedArray):
        words = words.combine_chunks()
    null = np.asarray(pc.is_null(words).to_numpy(zero_copy_only=False))
    text = np.asarray(words.to_numpy(zero_copy_only=False), dtype=object).astype(str)
    of_word = np.where(null, -1, values.get_indexer(pd.Index(text)) if len(values) else -1).astype(np.int64)
    result: np.ndarray = of_word[codes]
    return result


STOP_AT = 4  # a prefix's run of at most this many input points is tested whole
PREFIXES_PER_BOX = 256  # a box's prefixes are not split further past this many
DENSE_MASS = 1 << 22  # (box, sensitive value) masses kept as a table up to this many; more: searched
DENSE_LEVEL = 1 << 25  # (prefix, code) counts of a trie level kept as a table up to this many bytes; more: searched


@dataclass(frozen=True)
class _Points:
    """The input's distinct tuples sorted by the QI columns (in the search's order), then the
    sensitive code: per tuple its count and sensitive code, `point` each tuple's distinct QI point
    and `starts` each point's first tuple (and the number of tuples last). `cols`: each QI column's
    code per point; `levels`, per column i, the distinct prefixes (codes on columns 0..i) of the
    points as (rank of the prefix on columns 0..i-1 x the column's codes + the code, the first
    point of each prefix and the number of points last): sorted, so a prefix's extensions by a
    range of codes are a contiguous run of the next level."""

    counts: np.ndarray
    s: np.ndarray
    starts: np.ndarray
    cols: list[np.ndarray]
    levels: list[tuple[np.ndarray, np.ndarray]]


def _sorted_tuples(columns: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct rows of the code columns sorted by column 0, then 1, ..., each column's code
    per distinct row, and their counts, by a lexsort (codes too wide for one int64 key)."""
    n = len(columns[0])
    order = np.lexsort(columns[::-1])
    changed = np.zeros(n, dtype=bool)
    changed[:1] = True
    for col in columns:
        changed[1:] |= col[order][1:] != col[order][:-1]
    new = np.flatnonzero(changed)
    cols = [col[order[new]].astype(np.int32) for col in columns]
    return cols, np.diff(np.append(new, n))


ROWS_PER_BLOCK = 1 << 16  # input rows keyed at once (their codes stay in cache across columns)
ONE_KEY = 2.0**62  # the input's (QI, sensitive) codes sorted as one int64 key below this many combinations


def _first_of_runs(key: np.ndarray) -> np.ndarray:
    """The index of the first element of each run of equal values."""
    if not len(key):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))


def _sorted_points(
    data: Any, columns: list[int], sizes: list[int], n_s: int
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The input's distinct (QI point, sensitive code) tuples sorted: each point's codes, each
    tuple's sensitive code and count, and each point's first tuple. One sort of a mixed-radix
    key of the row (built block by block of rows); only the points are decoded."""
    n = data.n
    key = np.empty(n, dtype=np.int64)
    for at in range(0, n, ROWS_PER_BLOCK):  # blocks of rows, not rows: each block vectorised
        block, k = data.codes[at : at + ROWS_PER_BLOCK], key[at : at + ROWS_PER_BLOCK]
        k[:] = block[:, columns[0]]
        for j, size in zip(columns[1:], sizes[1:]):
            k *= size
            k += block[:, j]
        k *= n_s
        k += data.sensitive_codes[at : at + ROWS_PER_BLOCK]
    key.sort()
    new = _first_of_runs(key)
    counts = np.diff(np.append(new, n))
    key, s = np.divmod(key[new], n_s)
    point = _first_of_runs(key)
    key = key[point]
    cols = []
    for size in sizes[:0:-1]:  # the last column is the key's lowest digit
        key, code = np.divmod(key, size)
        cols.append(code.astype(np.int32))
    cols.append(key.astype(np.int32))
    cols.reverse()
    return cols, s.astype(np.int32), counts, point


def _input_points(data: Any, columns: list[int], n_s: int) -> _Points:
    sizes = [max(data.domains[j].size, 1) for j in columns]
    if float(np.prod([float(x) for x in sizes])) * n_s < ONE_KEY:
        cols, s, counts, point = _sorted_points(data, columns, sizes, n_s)
    else:
        cols, counts = _sorted_tuples([*(data.codes[:, j] for j in columns), data.sensitive_codes])
        s = cols.pop()
        changed = np.zeros(len(s), dtype=bool)
        changed[:1] = True
        for col in cols:
            changed[1:] |= col[1:] != col[:-1]
        point = np.flatnonzero(changed)  # the first tuple of each distinct QI point
        cols = [col[point] for col in cols]
    changed = np.zeros(len(point), dtype=bool)
    changed[:1] = True
    parent = np.zeros(len(point), dtype=np.int64)  # per point: the rank of its prefix so far
    levels = []
    for col, size in zip(cols, sizes):
        changed[1:] |= col[1:] != col[:-1]
        first = np.flatnonzero(changed)
        levels.append((parent[first] * size + col[first], np.append(first, len(point))))
        parent = np.cumsum(changed) - 1
    return _Points(counts, s, np.append(point, len(s)), cols, levels)


def _extensions(
    key: np.ndarray, size: int, n_prefixes: int, prefix: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The run [a, b) of a trie level's sorted keys (prefix x size + code) extending each prefix
    by a code in [lo, hi] (lo in [0, size], hi in [-1, size - 1]): np.searchsorted's bounds, read from a (prefix, code) table of how many
    of the prefix's extensions have a smaller code when it is small enough (a few lookups per
    candidate instead of a binary search over the level)."""
    small = np.uint8 if size < 255 else np.uint16 if size < 4096 else None
    if small is None or n_prefixes * (size + 1) * np.dtype(small).itemsize > DENSE_LEVEL:
        return np.searchsorted(key, prefix * size + lo, "left"), np.searchsorted(key, prefix * size + hi, "right")
    parent, code = np.divmod(key, size)
    start = np.zeros(n_prefixes + 1, dtype=np.int64)  # each prefix's first extension
    np.cumsum(np.bincount(parent, minlength=n_prefixes), out=start[1:])
    # per (code, prefix): the prefix's extensions of a smaller code (code-major: the running
    # count adds whole rows of prefixes, one per code)
    below = np.zeros((size + 1, n_prefixes), dtype=small)
    below[code + 1, parent] = 1
    for code_row in range(1, size + 1):  # per code, not per row (np.cumsum along axis 0 is ~40x slower)
        np.add(below[code_row], below[code_row - 1], out=below[code_row])
    flat = below.ravel()
    at = start[prefix]
    return at + flat[lo * n_prefixes + prefix], at + flat[(hi + 1) * n_prefixes + prefix]


def _found_runs(
    points: _Points, dims: list[tuple[np.ndarray, np.ndarray, Any, int]]
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per column i, the (box, first point, number of points) runs where a box's search stopped:
    every point of the run matches the box on columns before i (set cells included) and lies in
    its interval on column i, and every point in a box lies in one of its runs. A box starts with
    the empty prefix and extends it one column at a time by each prefix the input has within its
    interval there (and, for a set cell, within the set) until the run is short, the box would
    hold too many prefixes, or the columns run out (output-sensitive: few candidates past those
    inside)."""
    n_boxes = len(dims[0][0])
    box = np.arange(n_boxes)
    prefix = np.zeros(n_boxes, dtype=np.int64)  # the rank of the box's prefix on the columns before
    found = []
    for i, ((key, first), (lo, hi, c, size)) in enumerate(zip(points.levels, dims)):
        a, b = _extensions(key, size, len(points.levels[i - 1][0]) if i else 1, prefix, lo[box], hi[box])
        start = first[a]
        count = first[b] - start
        prefixes = np.bincount(box, minlength=n_boxes)[box]
        stop = (count <= STOP_AT) | ((b - a) * prefixes > PREFIXES_PER_BOX) | (i == len(dims) - 1)
        keep = stop & (count > 0)
        found.append((box[keep], start[keep], count[keep]))
        go = ~stop & (count > 0)
        box, a, width = box[go], a[go], (b - a)[go]
        box = np.repeat(box, width)  # each extension present in the input
        prefix = np.repeat(a, width) + np.arange(len(box)) - np.repeat(np.cumsum(width) - width, width)
        if c is not None:
            inside = c.contains(box, key[prefix] % size, size)
            box, prefix = box[inside], prefix[inside]
        if not len(box):
            break
    return found


@dataclass(frozen=True)
class _BoxMass:
    """Per distinct box, the weight per support point it puts on each sensitive value: its rows'
    with that value plus its rows' with a null one (spread over every value); as a (box, value)
    table when small enough, else as sorted (box, value) keys."""

    null: np.ndarray
    n_s: int
    table: np.ndarray | None = None
    keys: np.ndarray | None = None
    values: np.ndarray | None = None

    @classmethod
    def of(
        cls, box: np.ndarray, s_codes: np.ndarray, weights: np.ndarray | None, area: np.ndarray, n_s: int
    ) -> _BoxMass:
        """`weights` None: one per row (counted, not summed: the same figures, no million-row
        array of ones)."""
        n_boxes, null = len(area), s_codes < 0
        null_mass = np.zeros(n_boxes)
        if null.any():
            w = None if weights is None else weights[null]
            null_mass = np.bincount(box[null], weights=w, minlength=n_boxes) / (area * n_s)
            box, s_codes, weights = box[~null], s_codes[~null], None if weights is None else weights[~null]
        keys = box * n_s + s_codes
        if n_boxes * n_s <= DENSE_MASS:
            table = np.bincount(keys, weights=weights, minlength=n_boxes * n_s).reshape(n_boxes, n_s) / area[:, None]
            table += null_mass[:, None]  # in place: a million-cell table is not copied again
            return cls(null_mass, n_s, table=table)
        box_value, at = np.unique(keys, return_inverse=True)
        value_mass = np.bincount(at.ravel(), weights=weights, minlength=len(box_value)) / area[box_value // n_s]
        return cls(null_mass, n_s, keys=box_value, values=value_mass)

    def __call__(self, box: np.ndarray, s: np.ndarray) -> np.ndarray:
        if self.table is not None:
            dense: np.ndarray = self.table.ravel()[box * self.n_s + s]
            return dense
        mass: np.ndarray = self.null[box]
        if self.keys is not None and self.values is not None and len(self.keys):
            want = box * self.n_s + s
            at = np.minimum(np.searchsorted(self.keys, want), len(self.keys) - 1)
            mass = mass + np.where(self.keys[at] == want, self.values[at], 0.0)
        return mass


def _release_mass(points: _Points, dims: list[tuple[np.ndarray, np.ndarray, Any, int]], mass: _BoxMass) -> np.ndarray:
    """Per input tuple, the release's weight on it: the sum over the boxes holding its point of
    the box's mass on its sensitive value. The runs the search found are tested on the columns
    it has not matched yet, in blocks of about PAIRS_PER_BLOCK (box, point) pairs."""
    p_rel = np.zeros(len(points.s))
    for i, (boxes, starts, counts) in enumerate(_found_runs(points, dims)):
        block = np.cumsum(counts) // PAIRS_PER_BLOCK
        for part in np.split(np.arange(len(boxes)), np.flatnonzero(np.diff(block)) + 1):
            n = counts[part]
            r = np.repeat(boxes[part], n)
            p = np.repeat(starts[part], n) + np.arange(len(r)) - np.repeat(np.cumsum(n) - n, n)
            hit = np.ones(len(r), dtype=bool)
            for j in range(i, len(dims)):  # the search matched the columns before i, and i's interval
                lo, hi, c, size = dims[j]
                code = points.cols[j][p]
                if j > i:
                    hit &= (lo[r] <= code) & (code <= hi[r])
                if c is not None:
                    hit &= c.contains(r, code, size)
            r, p = r[hit], p[hit]
            n = points.starts[p + 1] - points.starts[p]  # each hit point's tuples (one per sensitive value)
            t = np.repeat(points.starts[p], n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
            p_rel += np.bincount(t, weights=mass(np.repeat(r, n), points.s[t]), minlength=len(p_rel))
    return p_rel


def _box_dims(
    all_cells: list[Cells], first: np.ndarray, domains: list[QIDomain]
) -> list[tuple[np.ndarray, np.ndarray, Any, int]]:
    """Per QI, each distinct box's code interval (clipped to the codes: an empty cell reads
    lo = size, hi = -1), its set cells (None: whole intervals) and the domain's size."""
    dims: list[tuple[np.ndarray, np.ndarray, Any, int]] = []
    for c, dom in zip(all_cells, domains):
        size = max(dom.size, 1)
        set_cells: Any = None
        if c.members is not None and c.key is not None:
            set_cells = _RowsOf(c, first) if c.dense is None else _BoxSets(c.dense[c.key[first]].ravel())
        dims.append((np.clip(c.lo[first], 0, size), np.clip(c.hi[first], -1, size - 1), set_cells, size))
    return dims


def kl_divergence(
    view: QualityView,
    data: Any,
    table_cells: TableCells | None = None,
    boxes: tuple[np.ndarray, np.ndarray] | None = None,
) -> float | str:
    """KL(input || release) in bits over the joint of QIs and the sensitive column, the support
    being the product of the input's distinct values of each (a range covers the distinct values
    inside it). The release reads as each published row's weight spread uniformly over its box
    (the product of its cells, a null sensitive cell over every value), a suppressed row over the
    whole support: every input tuple then has a positive release probability. `boxes`: the
    distinct boxes of view.table's classes (distinct_boxes of table_cells.cells), when read already."""
    joint = view.table if view.joint is None else view.joint
    weights = None if view.weights is None else np.asarray(view.weights, dtype=float)
    s_values = pd.Index(np.asarray(data.sensitive_values, dtype=object).astype(str))
    s_codes = sensitive_codes(joint, view.sensitive, s_values)
    # the distinct QI boxes (the classes, for most techniques) and their masses
    if view.joint is None:
        read = _table_cells(view, data, table_cells)
    else:
        read, boxes = TableCells.of_table(joint, data.domains), None
    all_cells = read.cells
    first, box_of_class = distinct_boxes(all_cells) if boxes is None else boxes  # first: a class per box
    box = read.per_row(box_of_class)
    area = np.prod([c.size[first].astype(float) for c in all_cells], axis=0)
    n_s = max(len(s_values), 1)
    mass = _BoxMass.of(box, s_codes, weights, area, n_s)
    del box, s_codes
    dims = _box_dims(all_cells, first, data.domains)
    # narrow columns first: a prefix grows by a factor of the cell's width, and the widest column
    # comes last, searched as a range rather than split
    # (a box empty on a column, hi = lo - 1 there, has width 0: log 0 = -inf sorts that column
    # first, silently: a synthetic release's empty cell is no error to print)
    with np.errstate(divide="ignore"):
        spread = [float(np.log(hi - lo + 1).mean()) if len(first) else 0.0 for lo, hi, _, _ in dims]
    columns = sorted(range(len(dims)), key=lambda i: spread[i])
    points = _input_points(data, columns, n_s)
    total = float(joint.num_rows if weights is None else weights.sum()) + view.suppressed
    whole = float(np.prod([float(dom.size) for dom in data.domains])) * len(s_values)
    p_rel = view.suppressed / whole + _release_mass(points, [dims[i] for i in columns], mass)
    p_in = points.counts / points.counts.sum()
    empty = int((p_rel <= 0).sum())
    if empty:  # a synthetic table need not cover every input combination: the divergence is infinite
        return not_applicable(
            f"the release gives no weight to {empty} of the input's {len(p_rel)} combinations of values "
            "(KL(input || release) is infinite); the workload error measures how close it is"
        )
    return float((p_in * np.log2(p_in / (p_rel / total))).sum())


def quality_figures(view: QualityView | str, data: Any) -> dict[str, Any]:
    """The five models' figures (discernibility is evaluate's), or the reason for each."""
    if isinstance(view, str):
        return {name: not_applicable(view) for name in QUALITY_FIGURES}
    published_once = view.records and view.table.num_rows + view.suppressed == data.n
    table_cells = TableCells.of_table(view.table, data.domains)  # read once for every model
    boxes = distinct_boxes(table_cells.cells) if view.table.num_rows else None  # for aecs and the KL divergence
    return {
        "gen-iloss": gen_iloss(view, data, table_cells),
        "non-uniform-entropy": non_uniform_entropy(view, data, table_cells)
        if published_once
        else not_applicable("the published rows are not one per input row"),
        "aecs": aecs(view, data, table_cells, None if boxes is None else boxes[0]),
        "precision": precision(view, data, table_cells),
        "kl-divergence": kl_divergence(view, data, table_cells, boxes),
    }


__all__ = ["QUALITY_FIGURES", "QualityView", "not_applicable", "quality_figures"]

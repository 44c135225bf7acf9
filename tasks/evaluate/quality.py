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
    apply, `aecs_reason` says why). `suppressed`: input rows left out."""

    table: pa.Table
    sensitive: str
    joint: pa.Table | None = None
    weights: np.ndarray | None = None
    classes: np.ndarray | None = None
    k: int | None = None
    classes_are_boxes: bool = False  # a class is a distinct published QI box (counted here, not passed)
    aecs_reason: str = "the technique guarantees no class size k"
    suppressed: int = 0


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


def cells(table: pa.Table, dom: QIDomain) -> Cells:
    """The QI's cells of every row of `table` in domain codes."""
    name = dom.name
    if f"{name}_lo" in table.column_names:  # a range: the domain's values inside it
        values = dom.values.astype(float)
        lo = np.searchsorted(values, as_day_numbers(table.column(f"{name}_lo")).astype(float), "left")
        hi = np.searchsorted(values, as_day_numbers(table.column(f"{name}_hi")).astype(float), "right") - 1
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
        row_of_list = lists.codes.astype(np.int64)
        # the members of each distinct list (rows sharing a list share its items)
        members = np.sort(lists.parent.astype(np.int64) * max(dom.size, 1) + item)
        dense = None
        if n_lists * max(dom.size, 1) <= DENSE_SETS:
            dense = np.zeros((n_lists, max(dom.size, 1)), dtype=bool)
            dense[lists.parent, item] = True
        return Cells(lo_l[row_of_list], hi_l[row_of_list], lists.lengths[row_of_list], members, row_of_list, dense)
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


def _table_cells(view: QualityView, data: Any, table_cells: list[Cells] | None) -> list[Cells]:
    return table_cells if table_cells is not None else [cells(view.table, dom) for dom in data.domains]


def gen_iloss(view: QualityView, data: Any, table_cells: list[Cells] | None = None) -> float:
    """Mean over published QI cells (a suppressed row's cells count 1) of the normalized width."""
    total = float(view.suppressed * len(data.domains))
    for c, dom in zip(_table_cells(view, data, table_cells), data.domains):
        total += float(cell_loss(c, dom).sum())
    n_cells = (view.table.num_rows + view.suppressed) * len(data.domains)
    return total / n_cells if n_cells else 0.0


def precision(view: QualityView, data: Any, table_cells: list[Cells] | None = None) -> float:
    """Sweeney's Prec: 1 - mean over QI cells (a suppressed one: 1) of height / hierarchy height."""
    total = float(view.suppressed * len(data.domains))
    for c, dom in zip(_table_cells(view, data, table_cells), data.domains):
        total += float(precision_loss(c, dom).sum())
    n_cells = (view.table.num_rows + view.suppressed) * len(data.domains)
    return 1.0 - total / n_cells if n_cells else 1.0


def non_uniform_entropy(view: QualityView, data: Any, table_cells: list[Cells] | None = None) -> float:
    """Sum over QI cells of -log2 P(original | published), P = f(original) / F(cell): f the
    input's frequency of the value, F the input rows whose value lies in the cell (a suppressed
    cell: all N). Each input row is published once or suppressed, so the sum is
    sum_cells log2 F(cell) + suppressed log2 N - sum_input_rows log2 f(value)."""
    n = data.n
    total = 0.0
    for j, (c, dom) in enumerate(zip(_table_cells(view, data, table_cells), data.domains)):
        freq = _input_counts(data.codes[:, j].astype(np.int64), dom.size)
        cum = np.concatenate(([0.0], np.cumsum(freq)))
        in_cell = cum[c.hi + 1] - cum[c.lo]
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
        points = np.bincount(c.lo[point], minlength=len(freq)).astype(float)
        total += float(((points - freq) * log_f).sum()) + float(np.log2(in_cell[~point]).sum())
        total += view.suppressed * float(np.log2(n))
    return total


def _box_keys(table_cells: list[Cells]) -> list[np.ndarray]:
    keys = []
    for c in table_cells:
        keys += [c.lo, c.hi] + ([] if c.key is None else [c.key])
    return keys


def aecs(view: QualityView, data: Any, table_cells: list[Cells] | None = None) -> float | str:
    """published rows / (classes x k) (LeFevre et al.'s normalized average class size)."""
    if (view.classes is None and not view.classes_are_boxes) or view.k is None:
        return not_applicable(view.aecs_reason)
    if view.classes is not None:
        classes = len(view.classes)
    elif not view.table.num_rows:
        classes = 0
    else:  # the distinct published QI boxes
        classes = len(_tuples(_box_keys(_table_cells(view, data, table_cells)))[0])
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
    """Each row's sensitive code among the input's values; -1 for a null (withheld) cell."""
    column = pc.cast(table.column(sensitive), pa.string())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)  # the distinct texts looked up once each
    words = encoded.dictionary.to_numpy(zero_copy_only=False)
    of_word = values.get_indexer(pd.Index(np.asarray(words, dtype=object).astype(str)))
    index = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(index < 0, -1, of_word[np.maximum(index, 0)] if len(of_word) else -1).astype(np.int64)


STOP_AT = 4  # a prefix's run of at most this many input tuples is tested whole
PREFIXES_PER_BOX = 256  # a box's prefixes are not split further past this many


def _candidate_pairs(tuples: np.ndarray, dims: list[tuple[np.ndarray, np.ndarray, Any, int]]) -> Any:
    """(box, input tuple) index pairs holding every pair where the tuple lies in the box, in blocks
    of about PAIRS_PER_BLOCK, few more than those (output-sensitive). `dims`: per column of
    `tuples`, the boxes' code intervals [lo, hi], their set cells (None: intervals) and the
    column's number of codes.

    The tuples are sorted by all columns in turn (narrowest cells first); a box's tuples with given codes on the first i
    columns (a prefix) form a run, and those with a code in [lo, hi] on column i a contiguous part
    of it. Each box starts with the empty prefix and extends it one column at a time by each
    value of its cell there (dropping prefixes no tuple has), until a prefix's run on the next
    column is short, the box would hold too many prefixes, or the columns run out; that run's
    tuples are its candidates."""
    n_boxes, n_cols = len(dims[0][0]), tuples.shape[1]
    # narrow columns first: a prefix grows by a factor of the cell's width, and the widest column
    # comes last, searched as a range rather than split
    spread = [float(np.log(hi - lo + 1).mean()) if n_boxes else 0.0 for lo, hi, _, _ in dims]
    columns = sorted(range(n_cols), key=lambda i: spread[i])
    tuples, dims = tuples[:, columns], [dims[i] for i in columns]
    sizes = [d[3] for d in dims]
    if float(np.prod([float(x) for x in sizes])) < 2.0**62:  # one mixed-radix key: one sort
        whole = np.zeros(len(tuples), dtype=np.int64)
        for i, size in enumerate(sizes):
            whole = whole * size + tuples[:, i]
        order = np.argsort(whole, kind="stable")
    else:
        order = np.lexsort(tuples.T[::-1])
    ordered = tuples[order]
    rank = np.zeros(len(tuples), dtype=np.int64)  # each sorted tuple's prefix among the distinct ones
    levels = []
    for i, size in enumerate(sizes):
        key = rank * size + ordered[:, i]  # non-decreasing: sorted by prefix, then column i
        new = np.concatenate(([True], key[1:] != key[:-1])) if len(key) else np.zeros(0, dtype=bool)
        levels.append((size, key, key[new]))
        rank = np.cumsum(new) - 1  # the prefix's index among the distinct ones (sorted)
    box = np.arange(n_boxes)
    prefix = np.zeros(n_boxes, dtype=np.int64)
    found_box: list[np.ndarray] = []
    found_start: list[np.ndarray] = []
    found_count: list[np.ndarray] = []
    for i, (size, key, distinct) in enumerate(levels):
        lo, hi, c, _ = dims[i]
        start = np.searchsorted(key, prefix * size + lo[box], "left")
        count = np.searchsorted(key, prefix * size + hi[box], "right") - start
        width = hi[box] - lo[box] + 1
        prefixes = np.bincount(box, minlength=n_boxes)[box]
        stop = (count <= STOP_AT) | (width * prefixes > PREFIXES_PER_BOX) | (i == n_cols - 1)
        keep = stop & (count > 0)
        found_box.append(box[keep])
        found_start.append(start[keep])
        found_count.append(count[keep])
        go = ~stop & (count > 0)
        box, prefix, width = box[go], prefix[go], width[go]
        # each value of the cell on column i: the prefixes some tuple extends
        box = np.repeat(box, width)
        offsets = np.arange(len(box)) - np.repeat(np.cumsum(width) - width, width)
        value = lo[box] + offsets
        wanted = prefix.repeat(width) * size + value
        at = np.minimum(np.searchsorted(distinct, wanted), max(len(distinct) - 1, 0))
        present = (distinct[at] == wanted) if len(distinct) else np.zeros(len(wanted), dtype=bool)
        if c is not None:
            present &= c.contains(box, value, size)
        box, prefix = box[present], at[present]
        if not len(box):
            break
    boxes, starts, counts = (np.concatenate(x) for x in (found_box, found_start, found_count))
    block = np.cumsum(counts) // PAIRS_PER_BLOCK
    for part in np.split(np.arange(len(boxes)), np.flatnonzero(np.diff(block)) + 1):
        n = counts[part]
        r = np.repeat(boxes[part], n)
        offsets = np.arange(len(r)) - np.repeat(np.cumsum(n) - n, n)
        yield r, order[np.repeat(starts[part], n) + offsets]


def kl_divergence(view: QualityView, data: Any, table_cells: list[Cells] | None = None) -> float | str:
    """KL(input || release) in bits over the joint of QIs and the sensitive column, the support
    being the product of the input's distinct values of each (a range covers the distinct values
    inside it). The release reads as each published row's weight spread uniformly over its box
    (the product of its cells, a null sensitive cell over every value), a suppressed row over the
    whole support: every input tuple then has a positive release probability."""
    joint = view.table if view.joint is None else view.joint
    weights = np.ones(joint.num_rows) if view.weights is None else np.asarray(view.weights, dtype=float)
    s_values = pd.Index(np.asarray(data.sensitive_values, dtype=object).astype(str))
    s_codes = sensitive_codes(joint, view.sensitive, s_values)
    # the distinct QI boxes (the classes, for most techniques); per box, the weight per support
    # point of each published sensitive value, and of the rows with a null one (spread over all)
    all_cells = (
        _table_cells(view, data, table_cells) if view.joint is None else [cells(joint, dom) for dom in data.domains]
    )
    first, _, box = _tuples(_box_keys(all_cells))
    area = np.prod([c.size[first].astype(float) for c in all_cells], axis=0)
    n_s, null = max(len(s_values), 1), s_codes < 0
    null_mass = np.bincount(box[null], weights=weights[null], minlength=len(first)) / (area * n_s)
    box_value, at = np.unique(box[~null] * n_s + s_codes[~null], return_inverse=True)
    value_mass = np.bincount(at.ravel(), weights=weights[~null], minlength=len(box_value)) / area[box_value // n_s]
    # the input's distinct tuples (sensitive code first) and their shares
    in_cols = [data.sensitive_codes.astype(np.int64)]
    in_cols += [data.codes[:, j].astype(np.int64) for j in range(len(data.domains))]
    in_first, counts, _ = _tuples(in_cols)
    tuples = np.stack([col[in_first] for col in in_cols], axis=1)
    total = float(weights.sum()) + view.suppressed
    whole = float(np.prod([float(dom.size) for dom in data.domains])) * len(s_values)
    p_rel = np.full(len(tuples), view.suppressed / whole)
    dims: list[tuple[np.ndarray, np.ndarray, Any, int]] = []
    for c, dom in zip(all_cells, data.domains):
        set_cells = None if c.members is None else _RowsOf(c, first)
        dims.append((c.lo[first], c.hi[first], set_cells, max(dom.size, 1)))
    for r, t in _candidate_pairs(tuples[:, 1:], dims):
        hit = np.ones(len(r), dtype=bool)
        for j, (c, dom) in enumerate(zip(all_cells, data.domains)):
            hit &= c.contains(first[r], tuples[t, j + 1], max(dom.size, 1))
        r, t = r[hit], t[hit]
        mass = null_mass[r]
        if len(box_value):  # the box's weight on the tuple's own sensitive value
            want = r * n_s + tuples[t, 0]
            at = np.minimum(np.searchsorted(box_value, want), len(box_value) - 1)
            mass = mass + np.where(box_value[at] == want, value_mass[at], 0.0)
        p_rel += np.bincount(t, weights=mass, minlength=len(tuples))
    p_in = counts / counts.sum()
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
    published_once = view.table.num_rows + view.suppressed == data.n
    table_cells = [cells(view.table, dom) for dom in data.domains]  # read once for every model
    return {
        "gen-iloss": gen_iloss(view, data, table_cells),
        "non-uniform-entropy": non_uniform_entropy(view, data, table_cells)
        if published_once
        else not_applicable("the published rows are not one per input row"),
        "aecs": aecs(view, data, table_cells),
        "precision": precision(view, data, table_cells),
        "kl-divergence": kl_divergence(view, data, table_cells),
    }


__all__ = ["QUALITY_FIGURES", "QualityView", "not_applicable", "quality_figures"]

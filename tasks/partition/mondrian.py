"""Mondrian strict multidimensional partitioning (LeFevre, DeWitt, Ramakrishnan, ICDE 2006).

A partition is split on the dimension with the widest normalised range, at the median; the split
is allowed when both halves keep at least k rows (and, when asked, at least l distinct sensitive
values). When the widest dimension cannot be split, the next widest is tried; a partition that no
dimension can split is a final QI-group.

Instead of recursing node by node (one Python call per partition: ~10^5 calls for a million rows),
all partitions of one depth are split together with a handful of numpy passes over their rows
(medians from per-segment histograms, no sort), so the cost is O(depth x n) array work with no
per-row Python. The binary split tree is kept:
the Butterfly technique walks it bottom-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from privpub.schemas.errors import PartitionError
from privpub.tasks.core.microdata import QIDomain
from privpub.tasks.core.sensitive_models import SensitiveModel
from privpub.tasks.core.types import Partition


@dataclass
class SplitTree:
    """Binary hierarchy of partitions. Node 0 is the whole table.

    left/right: child node ids (-1 for a leaf); dim: QI index split on (-1 for a leaf);
    value: split code (left child = rows with code <= value); group: the QI-group id of a leaf
    (-1 for internal nodes).
    """

    parent: np.ndarray
    left: np.ndarray
    right: np.ndarray
    dim: np.ndarray
    value: np.ndarray
    size: np.ndarray
    group: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.parent)

    def is_leaf(self, node: int) -> bool:
        return bool(self.left[node] < 0)

    def bottom_up(self) -> np.ndarray:
        """Internal node ids, children before parents (ids grow with depth)."""
        internal = np.flatnonzero(self.left >= 0)
        return internal[::-1]

    def leaf_of_group(self) -> np.ndarray:
        """Node id of each QI-group."""
        leaves = np.flatnonzero(self.group >= 0)
        out = np.empty(len(leaves), dtype=np.int64)
        out[self.group[leaves]] = leaves
        return out


class TreeBuilder:
    """Collects the splits of each level as arrays; node ids are handed out in split order."""

    def __init__(self, n: int) -> None:
        self.n_nodes, self.root_size = 1, n
        self.splits: list[tuple[np.ndarray, ...]] = []  # (node, dim, value, left size, right size)

    def split(
        self, nodes: np.ndarray, dims: np.ndarray, values: np.ndarray, left_sizes: np.ndarray, right_sizes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        lefts = np.arange(self.n_nodes, self.n_nodes + 2 * len(nodes), 2)
        self.n_nodes += 2 * len(nodes)
        self.splits.append((nodes, dims, values, left_sizes, right_sizes))
        return lefts, lefts + 1

    def build(self, leaf_nodes: np.ndarray) -> SplitTree:
        n = self.n_nodes
        parent, left, right, dim, value, group = (np.full(n, -1, dtype=np.int64) for _ in range(6))
        size = np.empty(n, dtype=np.int64)
        size[0] = self.root_size
        if self.splits:
            node, d, v, ls, rs = (np.concatenate(x).astype(np.int64) for x in zip(*self.splits))
            lefts = np.arange(1, n, 2)
            left[node], right[node], dim[node], value[node] = lefts, lefts + 1, d, v
            parent[lefts], parent[lefts + 1] = node, node
            size[lefts], size[lefts + 1] = ls, rs
        group[leaf_nodes] = np.arange(len(leaf_nodes))
        return SplitTree(parent, left, right, dim, value, size, group)


def _segment_ids(sizes: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(sizes)), sizes)


def _median_counts(
    key: np.ndarray, w: np.ndarray | None, local: np.ndarray, lo: np.ndarray, hi: np.ndarray, total: np.ndarray
) -> Medians:
    """Per segment: the lower median row's key and how many rows have keys <= / < it.

    w: rows per item (None: one each); total: rows per segment. A histogram per segment over its
    own [lo, hi] code range replaces a sort (one bincount, one cumulative sum) unless the ranges
    would need far more bins than there are items (sparse numeric codes)."""
    if int((hi - lo + 1).sum()) > 4 * len(key) + (1 << 16):
        return median_by_sort(key, w, local, total)
    return median_by_histogram(key, w, local, lo, hi, total)


# per segment: the lower median code, and the rows (through the weights) <= and < it
Medians = tuple[np.ndarray, np.ndarray, np.ndarray]


def _median_targets(total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the earlier segments, and the running row count that reaches each lower median."""
    before = np.concatenate(([0], np.cumsum(total)[:-1]))
    return before, before + (total - 1) // 2 + 1


def histogram_offsets(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Where each segment's histogram over its [lo, hi] codes starts in one concatenated vector."""
    return np.concatenate(([0], np.cumsum(hi - lo + 1)[:-1])).astype(np.int64)


def median_by_histogram(
    key: np.ndarray, w: np.ndarray | None, local: np.ndarray, lo: np.ndarray, hi: np.ndarray, total: np.ndarray
) -> Medians:
    base = histogram_offsets(lo, hi) - lo  # a row's bin: its segment's base + its code
    hist = np.bincount(base[local] + key, weights=w, minlength=int((hi - lo + 1).sum())).astype(np.int64, copy=False)
    return median_from_histograms(hist, lo, hi, total)


def median_from_histograms(hist: np.ndarray, lo: np.ndarray, hi: np.ndarray, total: np.ndarray) -> Medians:
    """Per segment, from its histogram over [lo, hi] (concatenated, `histogram_offsets`): the
    lower median code and the rows <= / < it. Shared with the distributed top of the tree
    (tasks/partition/parted.py), whose histograms are sums over partitions."""
    before, target = _median_targets(total)
    offset = histogram_offsets(lo, hi)
    cum = np.cumsum(hist)
    at = np.searchsorted(cum, target, side="left")  # first bin reaching the target: never empty
    n_le = cum[at] - before
    return lo + (at - offset), n_le, n_le - hist[at]


def allowed_splits(
    n_le: np.ndarray,
    n_lt: np.ndarray,
    total: np.ndarray,
    k: int,
    diverse_le: np.ndarray | bool = True,
    diverse_lt: np.ndarray | bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Which of "<= median" / "< median" keep >= k rows (and enough diversity) on both sides, and
    whether "<" is the one used (the more balanced allowed one)."""
    ok_le = (n_le >= k) & (total - n_le >= k) & diverse_le
    ok_lt = (n_lt >= k) & (total - n_lt >= k) & diverse_lt
    use_lt = ok_lt & (~ok_le | (np.abs(total - 2 * n_lt) < np.abs(total - 2 * n_le)))
    return ok_le | ok_lt, use_lt


def normalised_widths(doms: list[QIDomain], lo_all: np.ndarray, hi_all: np.ndarray) -> np.ndarray:
    """(P, D) width of each segment's range per dimension over the dimension's whole span."""
    widths = np.zeros((lo_all.shape[1], len(doms)))
    for d, dom in enumerate(doms):
        if dom.span > 0:
            widths[:, d] = dom.width(lo_all[d], hi_all[d]) / dom.span
    return widths


PRESENCE_CELLS = 1 << 24  # (segment, value) presence kept as a table up to this size; more: sorted


def value_widths(widths: np.ndarray, doms: list[QIDomain], xs: np.ndarray, seg: np.ndarray, n_seg: int) -> None:
    """Each categorical QI without a hierarchy measured by the values its segment holds,
    (values - 1) / (domain - 1), the gen-iloss its published set cell would have, in place of
    its code range: a group holding two values far apart in the sorted order is narrow."""
    for d, dom in enumerate(doms):
        if dom.kind != "categorical" or dom.hierarchy or dom.size <= 1:
            continue
        if n_seg * dom.size <= PRESENCE_CELLS:
            present = np.zeros((n_seg, dom.size), dtype=bool)
            present[seg, xs[d]] = True
            values = present.sum(axis=1)
        else:
            values = np.bincount(np.unique(seg * dom.size + xs[d]) // dom.size, minlength=n_seg)
        widths[:, d] = (values - 1) / (dom.size - 1)


def median_by_sort(key: np.ndarray, w: np.ndarray | None, local: np.ndarray, total: np.ndarray) -> Medians:
    _, target = _median_targets(total)
    w = np.ones(len(key), dtype=np.int64) if w is None else w
    order = np.lexsort((key, local))
    med = key[order][np.searchsorted(np.cumsum(w[order]), target, side="left")]
    n_le = np.bincount(local, weights=w * (key <= med[local]), minlength=len(total)).astype(np.int64)
    n_lt = np.bincount(local, weights=w * (key < med[local]), minlength=len(total)).astype(np.int64)
    return med, n_le, n_lt


def _left_slots(sizes: np.ndarray, n_left: np.ndarray) -> np.ndarray:
    """Per position of segments laid end to end: whether it is one of its segment's first
    n_left positions (the left child's slots when each segment is reordered left rows first)."""
    starts = np.cumsum(sizes) - sizes
    in_segment = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
    slots: np.ndarray = in_segment < np.repeat(n_left, sizes)
    return slots


def _left_first(left: np.ndarray, sizes: np.ndarray, n_left: np.ndarray) -> np.ndarray:
    """Positions (into `left`) of the rows when every segment is stably reordered left rows
    first: the left rows, in order, fill the left slots and the right rows the others (a segment's
    left rows come before the next segment's, so no per-row rank is needed)."""
    slots = _left_slots(sizes, n_left)
    order = np.empty(len(left), dtype=np.int64)
    order[slots] = np.flatnonzero(left)
    order[~slots] = np.flatnonzero(~left)
    return order


def _narrow(top: int) -> np.dtype:
    """The narrowest unsigned integer holding 0..top (codes travel with the rows: fewer bytes
    moved at every split)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _row_major(xt: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(n, D) codes of `rows`, one row's codes side by side in the narrowest dtype that holds them."""
    low, top = (int(xt.min()), int(xt.max())) if xt.size else (0, 0)
    dtype = _narrow(top) if low >= 0 else np.dtype(np.int64)
    out = np.empty((len(rows), xt.shape[0]), dtype=dtype)
    for d in range(xt.shape[0]):  # a loop over the dimensions
        out[:, d] = xt[d, rows]
    return out


def take_rows(xr: np.ndarray, order: np.ndarray) -> np.ndarray:
    """xr[order] for (n, D) codes, each row moved as one item (numpy gathers a row of a 2-D
    array element by element; one item of the row's width is several times faster)."""
    width = xr.shape[1] * xr.itemsize
    if width == 0 or not xr.flags.c_contiguous:
        plain: np.ndarray = xr[order]
        return plain
    item = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(width, np.dtype(f"V{width}"))
    taken: np.ndarray = xr.view(item).reshape(-1)[order].view(xr.dtype).reshape(len(order), xr.shape[1])
    return taken


def _at(values: np.ndarray, pos: np.ndarray | None) -> np.ndarray:
    """values at the positions (None: all of them, no copy)."""
    return values if pos is None else values[pos]


def _sensitive_rows(
    rows: np.ndarray,
    l: int | None,
    s: np.ndarray | None,
    model: SensitiveModel | None,
    weights: np.ndarray | None,
    pair_items: bool,
) -> tuple[SensitiveModel | None, np.ndarray | None]:
    """The model the splits must keep, and the sensitive codes in `rows` order (None: no model)."""
    if model is None and l is not None and l > 1 and s is not None:
        model = SensitiveModel.distinct(l, max(int(s.max()) + 1, 1) if len(s) else 1)
    use_model = model is not None and model.active or (l is not None and l > 1)
    if use_model and weights is not None and not pair_items:
        raise ValueError("l-diversity needs one item per row: no weights")
    if use_model and s is None:
        raise ValueError("l-diversity needs the sensitive codes s")
    if not use_model or s is None:
        return model, None
    ss = s[rows]
    if model is not None and not model.needs_counts and len(ss) and ss.min() >= 0:  # presence only: narrow
        ss = ss.astype(_narrow(int(ss.max())))
    return model, ss


@dataclass
class _Moving:
    """The arrays that travel with the rows, reordered with them at every split: row ids, codes
    (n, D) row-major in a narrow dtype, sensitive codes (None: no model), weights (None: one row each)."""

    rows: np.ndarray
    xr: np.ndarray
    ss: np.ndarray | None
    ws: np.ndarray | None

    def take(self, order: np.ndarray) -> _Moving:
        return _Moving(
            self.rows[order],
            take_rows(self.xr, order),
            None if self.ss is None else self.ss[order],
            None if self.ws is None else self.ws[order],
        )


@dataclass
class _Level:
    """The segments of one depth: their sizes (items), labels, and per-dimension code ranges."""

    sizes: np.ndarray
    labels: np.ndarray
    starts: np.ndarray
    seg: np.ndarray
    lo_all: np.ndarray
    hi_all: np.ndarray
    seg_rows: np.ndarray  # rows per segment (through the weights)
    widths: np.ndarray

    @classmethod
    def of(
        cls, moving: _Moving, sizes: np.ndarray, labels: np.ndarray, doms: list[QIDomain], by_values: bool = False
    ) -> _Level:
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        lo_all = np.minimum.reduceat(moving.xr, starts, axis=0).T
        hi_all = np.maximum.reduceat(moving.xr, starts, axis=0).T
        seg_rows = sizes if moving.ws is None else np.add.reduceat(moving.ws, starts)
        widths = normalised_widths(doms, lo_all, hi_all)
        seg = _segment_ids(sizes)
        if by_values:
            value_widths(widths, doms, moving.xr.T, seg, len(sizes))
        return cls(sizes, labels, starts, seg, lo_all, hi_all, seg_rows, widths)


@dataclass
class _Candidates:
    """The segments that try one dimension each, and their rows' keys on it."""

    pos: np.ndarray | None  # positions of their rows in the level's arrays, segment by segment (None: all)
    c_idx: np.ndarray  # segment index
    c_dims: np.ndarray  # dimension tried
    c_sizes: np.ndarray
    local: np.ndarray  # candidate index of each row
    key: np.ndarray  # each row's code on its segment's dimension
    total: np.ndarray  # rows per candidate (through the weights)

    @classmethod
    def of(cls, level: _Level, moving: _Moving, cand: np.ndarray, dims: np.ndarray) -> _Candidates:
        n, D = moving.xr.shape
        c_idx = np.flatnonzero(cand)
        c_dims = dims[c_idx]
        c_sizes = level.sizes[c_idx]
        if len(c_idx) == len(cand):  # every segment: no selection
            pos, local, flat = None, level.seg, np.arange(0, n * D, D)
        else:
            pos = np.flatnonzero(cand[level.seg])
            local = np.repeat(np.arange(len(c_idx)), c_sizes)
            flat = pos * D
        key = moving.xr.reshape(-1)[flat + c_dims[local]]  # row-major: the row's code on the dimension
        return cls(pos, c_idx, c_dims, c_sizes, local, key, level.seg_rows[c_idx])


def _distinct_sides(
    c: _Candidates, med: np.ndarray, s_sub: np.ndarray, model: SensitiveModel
) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct l-diversity of both sides of "<= median" and "< median" from one presence table
    of (candidate, side of the median: below / at / above, value); None when that table would be
    far larger than the rows (the general path then counts)."""
    C, m = len(c.c_idx), model.m
    if 3 * C * m > max(PRESENCE_CELLS // 4, 8 * len(c.key)):
        return None
    med_row = med[c.local]
    side = (c.key >= med_row).astype(np.int64) + (c.key > med_row)  # 0 below, 1 at, 2 above
    seen = np.zeros(3 * C * m, dtype=bool)
    seen[(3 * c.local + side) * m + s_sub] = True
    cells = seen.reshape(C, 3, m)
    below, at, above = cells[:, 0], cells[:, 1], cells[:, 2]
    l = model.l or 0
    count = np.count_nonzero
    diverse_le = (count(below | at, axis=1) >= l) & (count(above, axis=1) >= l)
    diverse_lt = (count(below, axis=1) >= l) & (count(at | above, axis=1) >= l)
    return diverse_le, diverse_lt


def _diversity(
    c: _Candidates, med: np.ndarray, ss: np.ndarray | None, model: SensitiveModel | None
) -> tuple[np.ndarray | bool, np.ndarray | bool]:
    """Whether both sides of "<= median" / "< median" meet the sensitive-value model."""
    if ss is None:
        return True, True
    assert model is not None  # ss is kept only for a model
    s_sub = _at(ss, c.pos)
    if not model.needs_counts:
        if not (model.diversity == "distinct" and model.l and model.l > 1):
            return True, True
        sides = _distinct_sides(c, med, s_sub, model)
        if sides is not None:
            return sides
    med_row = med[c.local]
    n_sides = 2 * len(c.c_idx)
    ok = model.groups_ok(2 * c.local + (c.key > med_row), s_sub, n_sides)  # side 0: <= median
    diverse_le = ok[0::2] & ok[1::2]
    ok = model.groups_ok(2 * c.local + (c.key >= med_row), s_sub, n_sides)  # side 0: < median
    return diverse_le, ok[0::2] & ok[1::2]


@dataclass
class _Splitting:
    """Where the levels' splits are recorded: the tree (with the dimensions' names) or nothing."""

    tree: TreeBuilder | None
    dim_names: np.ndarray | None
    k: int
    model: SensitiveModel | None


def _split_dimension(
    level: _Level, moving: _Moving, c: _Candidates, how: _Splitting
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """Split the candidates that can be split at their median on their dimension: the split
    segments' indices and the next level's (row order, sizes, labels) from them; None if none can."""
    lo = level.lo_all[c.c_dims, c.c_idx].astype(np.int64)
    hi = level.hi_all[c.c_dims, c.c_idx].astype(np.int64)
    ws = moving.ws
    med, n_le, n_lt = _median_counts(c.key, None if ws is None else _at(ws, c.pos), c.local, lo, hi, c.total)
    diverse_le, diverse_lt = _diversity(c, med, moving.ss, how.model)
    split, use_lt = allowed_splits(n_le, n_lt, c.total, how.k, diverse_le, diverse_lt)
    if not split.any():
        return None
    threshold = np.where(use_lt, med - 1, med)
    n_left = np.where(use_lt, n_lt, n_le)
    sp = np.flatnonzero(split)
    # the rows of the splitting segments, each segment reordered left rows first
    if len(sp) == len(split):  # every candidate splits: no selection
        s_pos, s_local, s_key = c.pos, c.local, c.key
    else:
        take = split[c.local]
        remap = np.cumsum(split) - 1  # candidate index -> index among splitting segments
        s_pos = np.flatnonzero(take) if c.pos is None else c.pos[take]
        s_local, s_key = remap[c.local[take]], c.key[take]
    goes_left = s_key <= threshold[sp][s_local]
    # items (not rows) on the left of each splitting segment
    items_left = (
        n_left[sp] if ws is None else np.bincount(s_local, weights=goes_left, minlength=len(sp)).astype(np.int64)
    )
    within = _left_first(goes_left, c.c_sizes[sp], items_left)
    order = within if s_pos is None else s_pos[within]
    pair = np.empty(2 * len(sp), dtype=np.int64)
    pair[0::2], pair[1::2] = items_left, c.c_sizes[sp] - items_left
    parents = level.labels[c.c_idx[sp]]
    if how.tree is not None:
        assert how.dim_names is not None  # given with a tree
        lefts, rights = how.tree.split(
            parents, how.dim_names[c.c_dims[sp]], threshold[sp], n_left[sp], c.total[sp] - n_left[sp]
        )
        kids = np.ravel(np.column_stack([lefts, rights]))
    else:
        kids = np.repeat(parents, 2)
    return c.c_idx[sp], (order, pair, kids)


def _split_level(
    level: _Level, moving: _Moving, how: _Splitting
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Split each segment of a level on its widest dimension that allows it: the segments no
    dimension can split (a mask), and the children's (row order, sizes, labels) per dimension tried."""
    P = len(level.sizes)
    dim_order = np.argsort(-level.widths, axis=1, kind="stable")
    open_ = np.ones(P, dtype=bool)
    child: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for attempt in range(level.widths.shape[1]):
        dims = dim_order[:, attempt]
        cand = open_ & (level.widths[np.arange(P), dims] > 0)
        if not cand.any():
            break
        done = _split_dimension(level, moving, _Candidates.of(level, moving, cand, dims), how)
        if done is None:
            continue
        split_segments, children = done
        child.append(children)
        open_[split_segments] = False
    return open_, child


def split_levels(
    xt: np.ndarray,
    doms: list[QIDomain],
    k: int,
    rows: np.ndarray,
    sizes: np.ndarray,
    labels: np.ndarray,
    *,
    l: int | None = None,
    s: np.ndarray | None = None,
    tree: TreeBuilder | None = None,
    dim_names: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    model: SensitiveModel | None = None,
    pair_items: bool = False,
    split_width: str = "range",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split contiguous row segments level by level until no segment can be split.

    xt: (D, n) codes per dimension; rows/sizes: the starting segments (each contiguous in
    `rows`); labels: one label per starting segment. With a tree, each split creates two child
    nodes and the labels are node ids; without, children keep their segment's label (so a final
    group says which starting segment it came from). Returns (rows, sizes, labels) of the final
    groups, each group contiguous in rows.

    The codes (and sensitive codes) travel with the rows, reordered with them at every split,
    so every read is sequential instead of a random gather into the whole table.

    weights: optionally, how many table rows each item stands for (Butterfly's wings run on
    distinct points: rows equal on every split column are never separated). Medians and the
    >= k tests then count rows through the weights; returned sizes count items.

    l / model: a split is allowed only when both sides meet the sensitive-value models: `l`
    alone is distinct l-diversity; `model` any of tasks/core/sensitive_models (s then holds
    its ground codes).

    pair_items: the items are a person's distinct (person, sensitive value) pairs, all at the
    person's one point (tasks/partition/people.py): each item is one vote of the models, and
    `weights` count people (1 on one pair of each person, 0 on the others), so k counts people.

    split_width: how a categorical QI's width is measured when choosing the dimension to split:
    "range" (its code range in the sorted order) or "values" (the values the segment holds,
    `value_widths`; generalization's [technique] split_width).
    """
    model, ss = _sensitive_rows(rows, l, s, model, weights, pair_items)
    ws = None if weights is None else np.asarray(weights, dtype=np.int64)[rows]
    moving = _Moving(rows, _row_major(xt, rows), ss, ws)
    how = _Splitting(tree, dim_names, k, model)
    leaf_rows: list[np.ndarray] = []
    leaf_sizes: list[np.ndarray] = []
    leaf_labels: list[np.ndarray] = []
    while len(sizes):
        level = _Level.of(moving, sizes, labels, doms, by_values=split_width == "values")
        open_, child = _split_level(level, moving, how)
        if open_.any():  # no dimension can split these: final groups
            leaf_rows.append(moving.rows[open_[level.seg]])
            leaf_sizes.append(sizes[open_])
            leaf_labels.append(labels[open_])
        if child:
            # positions (into the current arrays) of the next level's rows, segment by segment
            moving = moving.take(np.concatenate([c[0] for c in child]))
            sizes = np.concatenate([c[1] for c in child])
            labels = np.concatenate([c[2] for c in child])
        else:
            sizes = sizes[:0]
    return (
        np.concatenate(leaf_rows).astype(np.int64, copy=False),
        np.concatenate(leaf_sizes),
        np.concatenate(leaf_labels),
    )


class CodedRows(Protocol):
    """What Mondrian reads of its input: Microdata, or Butterfly's points."""

    @property
    def n(self) -> int: ...

    @property
    def codes(self) -> np.ndarray: ...

    @property
    def domains(self) -> list[QIDomain]: ...

    @property
    def sensitive_codes(self) -> np.ndarray: ...


def model_codes(s: np.ndarray, l: int | None, model: SensitiveModel | None) -> np.ndarray:
    """The sensitive codes the split tests read (the model's own codes when there is one), after
    refusing a table that no partition can satisfy (too few values for l, a model's own problem)."""
    if model is not None:
        s = model.codes(s)
        problem = model.table_problem(s)
        if problem:
            raise PartitionError(problem)
    elif l is not None and l > 1 and len(np.unique(s)) < l:
        raise PartitionError(f"l = {l} but the table has only {len(np.unique(s))} distinct sensitive values")
    return s


def mondrian_partition(
    data: CodedRows,
    k: int,
    l: int | None = None,
    columns: list[int] | None = None,
    model: SensitiveModel | None = None,
    split_width: str = "range",
) -> Partition:
    """QI-groups of at least k rows (and l distinct sensitive values when l is given; every
    sensitive-value model of `model` when that is given instead).

    columns: which QIs (indices into data.domains) to partition on; default all.
    """
    cols = list(range(len(data.domains))) if columns is None else list(columns)
    n = data.n
    if k < 1:
        raise PartitionError("k must be at least 1")
    if n < k:
        raise PartitionError(f"k = {k} is larger than the table ({n} rows): no k-anonymous release exists")
    s = model_codes(data.sensitive_codes.astype(np.int64), l, model)

    xt = data.codes[:, cols].T  # (D, n), a view: split_levels gathers it row-major once
    tree = TreeBuilder(n)
    leaf_rows, leaf_sizes, leaf_nodes = split_levels(
        xt,
        [data.domains[c] for c in cols],
        k,
        np.arange(n, dtype=np.int64),
        np.array([n], dtype=np.int64),
        np.array([0], dtype=np.int64),
        l=l,
        s=s,
        tree=tree,
        dim_names=np.asarray(cols),
        model=model,
        split_width=split_width,
    )
    group = np.empty(n, dtype=np.int64)
    group[leaf_rows] = np.repeat(np.arange(len(leaf_sizes)), leaf_sizes)
    return Partition(
        group=group,
        n_groups=len(leaf_sizes),
        tree=tree.build(leaf_nodes),
        info={"partitioner": "mondrian", "k": k, "l": l},
    )

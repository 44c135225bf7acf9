"""Mondrian strict multidimensional partitioning (LeFevre, DeWitt, Ramakrishnan, ICDE 2006).

A partition is split on the dimension with the widest normalised range, at the median; the split
is allowed when both halves keep at least k rows (and, when asked, at least l distinct sensitive
values). When the widest dimension cannot be split, the next widest is tried; a partition that no
dimension can split is a final QI-group.

Instead of recursing node by node (one Python call per partition: ~10^5 calls for a million rows),
all partitions of one depth are split together with a handful of numpy passes over their rows, so
the cost is O(depth x n log n) array work with no per-row Python. The binary split tree is kept:
the Butterfly technique walks it bottom-up.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.anonymize.base import Partition
from tasks.microdata import Microdata


class PartitionError(ValueError):
    """The data cannot meet the requested k / l at all."""


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
        return self.left[node] < 0

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


class _TreeBuilder:
    def __init__(self, n: int):
        self.parent, self.left, self.right = [-1], [-1], [-1]
        self.dim, self.value, self.size, self.group = [-1], [-1], [n], [-1]

    def split(self, nodes, dims, values, left_sizes, right_sizes) -> tuple[np.ndarray, np.ndarray]:
        start = len(self.parent)
        m = len(nodes)
        lefts = np.arange(start, start + 2 * m, 2)
        rights = lefts + 1
        for node, d, v, lc, rc in zip(nodes.tolist(), dims.tolist(), values.tolist(), lefts.tolist(),
                                      rights.tolist()):
            self.left[node], self.right[node] = lc, rc
            self.dim[node], self.value[node] = d, v
        inter_sizes = np.empty(2 * m, dtype=np.int64)
        inter_sizes[0::2], inter_sizes[1::2] = left_sizes, right_sizes
        self.parent.extend(np.repeat(nodes, 2).tolist())
        self.left.extend([-1] * 2 * m)
        self.right.extend([-1] * 2 * m)
        self.dim.extend([-1] * 2 * m)
        self.value.extend([-1] * 2 * m)
        self.size.extend(inter_sizes.tolist())
        self.group.extend([-1] * 2 * m)
        return lefts, rights

    def build(self, leaf_nodes: np.ndarray) -> SplitTree:
        group = np.asarray(self.group, dtype=np.int64)
        group[leaf_nodes] = np.arange(len(leaf_nodes))
        arr = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
        return SplitTree(arr(self.parent), arr(self.left), arr(self.right), arr(self.dim),
                         arr(self.value), arr(self.size), group)


def _segment_ids(sizes: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(sizes)), sizes)


def _distinct_per_side(seg: np.ndarray, side: np.ndarray, s: np.ndarray, n_seg: int,
                       n_s: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sensitive values on the left (side 0) and right (side 1) of each segment."""
    key = (seg.astype(np.int64) * 2 + side) * n_s + s
    if 2 * n_seg * n_s <= 50_000_000:  # a presence bitmap is linear; np.unique would sort
        seen = np.zeros(2 * n_seg * n_s, dtype=bool)
        seen[key] = True
        counts = seen.reshape(2 * n_seg, n_s).sum(axis=1)
    else:
        counts = np.bincount(np.unique(key) // n_s, minlength=2 * n_seg)
    return counts[0::2], counts[1::2]


def split_levels(xt: np.ndarray, doms: list, k: int, rows: np.ndarray, sizes: np.ndarray,
                 labels: np.ndarray, *, l: int | None = None, s: np.ndarray | None = None,
                 tree: _TreeBuilder | None = None, dim_names: np.ndarray | None = None):
    """Split contiguous row segments level by level until no segment can be split.

    xt: (D, n) codes per dimension; rows/sizes: the starting segments (each contiguous in
    `rows`); labels: one label per starting segment. With a tree, each split creates two child
    nodes and the labels are node ids; without, children keep their segment's label (so a final
    group says which starting segment it came from). Returns (rows, sizes, labels) of the final
    groups, each group contiguous in rows.
    """
    spans = np.array([d.span for d in doms], dtype=float)
    D = len(doms)
    key_base = int(max(d.size for d in doms)) + 1
    use_l = l is not None and l > 1
    n_s = max(int(s.max()) + 1, 1) if use_l and len(s) else 1
    leaf_rows: list[np.ndarray] = []
    leaf_sizes: list[np.ndarray] = []
    leaf_labels: list[np.ndarray] = []
    while len(sizes):
        P = len(sizes)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        seg = _segment_ids(sizes)
        widths = np.zeros((P, D))
        for d in range(D):
            vals = xt[d, rows]
            lo = np.minimum.reduceat(vals, starts)
            hi = np.maximum.reduceat(vals, starts)
            if spans[d] > 0:
                widths[:, d] = doms[d].width(lo, hi) / spans[d]
        dim_order = np.argsort(-widths, axis=1, kind="stable")
        open_ = np.ones(P, dtype=bool)
        child_rows: list[np.ndarray] = []
        child_sizes: list[np.ndarray] = []

        for attempt in range(D):
            dims = dim_order[:, attempt]
            cand = open_ & (widths[np.arange(P), dims] > 0)
            if not cand.any():
                break
            pos = cand[seg]
            sub_rows, sub_seg = rows[pos], seg[pos]
            key = xt[dims[sub_seg], sub_rows].astype(np.int64)
            perm = np.argsort(sub_seg * key_base + key, kind="stable")
            sub_rows, sub_seg, key = sub_rows[perm], sub_seg[perm], key[perm]
            c_idx = np.flatnonzero(cand)
            c_sizes = sizes[c_idx]
            c_starts = np.concatenate(([0], np.cumsum(c_sizes)[:-1]))
            local = np.repeat(np.arange(len(c_idx)), c_sizes)
            med = key[c_starts + (c_sizes - 1) // 2]
            med_row = med[local]
            n_le = np.add.reduceat((key <= med_row).astype(np.int64), c_starts)
            n_lt = np.add.reduceat((key < med_row).astype(np.int64), c_starts)
            ok_le = (n_le >= k) & (c_sizes - n_le >= k)
            ok_lt = (n_lt >= k) & (c_sizes - n_lt >= k)
            if use_l:
                s_sub = s[sub_rows]
                a, b = _distinct_per_side(local, (key > med_row).astype(np.int64), s_sub, len(c_idx), n_s)
                ok_le &= (a >= l) & (b >= l)
                a, b = _distinct_per_side(local, (key >= med_row).astype(np.int64), s_sub, len(c_idx), n_s)
                ok_lt &= (a >= l) & (b >= l)
            # prefer the more balanced of "<= median" and "< median"
            use_lt = ok_lt & (~ok_le | (np.abs(c_sizes - 2 * n_lt) < np.abs(c_sizes - 2 * n_le)))
            split = ok_le | ok_lt
            if not split.any():
                continue
            threshold = np.where(use_lt, med - 1, med)
            n_left = np.where(use_lt, n_lt, n_le)
            child_rows.append(sub_rows[split[local]])  # sorted by key: left rows first in each segment
            sp = np.flatnonzero(split)
            pair = np.empty(2 * len(sp), dtype=np.int64)
            pair[0::2], pair[1::2] = n_left[sp], c_sizes[sp] - n_left[sp]
            parents = labels[c_idx[sp]]
            if tree is not None:
                lefts, rights = tree.split(parents, dim_names[dims[c_idx[sp]]], threshold[sp],
                                           n_left[sp], c_sizes[sp] - n_left[sp])
                kids = np.ravel(np.column_stack([lefts, rights]))
            else:
                kids = np.repeat(parents, 2)
            child_sizes.append(np.stack([pair, kids]))
            open_[c_idx[sp]] = False

        if open_.any():  # no dimension can split these: final groups
            leaf_rows.append(rows[open_[seg]])
            leaf_sizes.append(sizes[open_])
            leaf_labels.append(labels[open_])
        if child_rows:
            rows = np.concatenate(child_rows)
            cs = np.concatenate(child_sizes, axis=1)
            sizes, labels = cs[0], cs[1]
        else:
            sizes = sizes[:0]
    return np.concatenate(leaf_rows), np.concatenate(leaf_sizes), np.concatenate(leaf_labels)


def mondrian_partition(data: Microdata, k: int, l: int | None = None,
                       columns: list[int] | None = None) -> Partition:
    """QI-groups of at least k rows (and l distinct sensitive values when l is given).

    columns: which QIs (indices into data.domains) to partition on; default all.
    """
    cols = list(range(len(data.domains))) if columns is None else list(columns)
    n = data.n
    if k < 1:
        raise PartitionError("k must be at least 1")
    if n < k:
        raise PartitionError(f"k = {k} is larger than the table ({n} rows): no k-anonymous release exists")
    s = data.sensitive_codes.astype(np.int64)
    if l is not None and l > 1 and len(np.unique(s)) < l:
        raise PartitionError(f"l = {l} but the table has only {len(np.unique(s))} distinct sensitive values")

    xt = np.ascontiguousarray(data.codes[:, cols].T)  # (D, n): per-dimension rows are contiguous
    tree = _TreeBuilder(n)
    leaf_rows, leaf_sizes, leaf_nodes = split_levels(
        xt, [data.domains[c] for c in cols], k, np.arange(n, dtype=np.int64),
        np.array([n], dtype=np.int64), np.array([0], dtype=np.int64), l=l, s=s, tree=tree,
        dim_names=np.asarray(cols))
    group = np.empty(n, dtype=np.int64)
    group[leaf_rows] = np.repeat(np.arange(len(leaf_sizes)), leaf_sizes)
    return Partition(group=group, n_groups=len(leaf_sizes), tree=tree.build(leaf_nodes),
                     info={"partitioner": "mondrian", "k": k, "l": l})

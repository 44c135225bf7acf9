"""Mondrian on many disjoint segments at once: the wings of every butterfly built at one level of
the hierarchy.

The rules are the spine's Mondrian (tasks/partition/mondrian.py): widest normalised dimension
first (normalised by the whole attribute's range), lower-median split, both halves >= k, the more
balanced of "<= median" and "< median", next dimension when one cannot split. Running all
segments of a level together costs a few numpy passes per depth instead of one Python call per
butterfly (tests/test_butterfly_properties.py checks the groups equal mondrian_partition's on each
segment).
"""
from __future__ import annotations

import numpy as np

from tasks.microdata import QIDomain


def segmented_mondrian(codes: np.ndarray, domains: list[QIDomain], columns: list[int],
                       seg_sizes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """codes: rows of the segments, each segment contiguous, in order; seg_sizes >= k each.

    Returns (group, n_groups): a group per row numbered 0.. within its segment, and the group count
    of each segment."""
    n, n_seg = len(codes), len(seg_sizes)
    origin_of_row = np.repeat(np.arange(n_seg), seg_sizes)
    if not columns:
        return np.zeros(n, dtype=np.int64), np.ones(n_seg, dtype=np.int64)
    xt = np.ascontiguousarray(codes[:, columns].T)
    doms = [domains[c] for c in columns]
    spans = np.array([d.span for d in doms], dtype=float)
    D = len(columns)
    key_base = int(max(d.size for d in doms)) + 1

    rows = np.arange(n, dtype=np.int64)
    sizes = np.asarray(seg_sizes, dtype=np.int64)
    final_rows, final_sizes = [], []
    while len(sizes):
        P = len(sizes)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        seg = np.repeat(np.arange(P), sizes)
        widths = np.zeros((P, D))
        for d in range(D):
            vals = xt[d, rows]
            if spans[d] > 0:
                widths[:, d] = doms[d].width(np.minimum.reduceat(vals, starts),
                                             np.maximum.reduceat(vals, starts)) / spans[d]
        dim_order = np.argsort(-widths, axis=1, kind="stable")
        open_ = np.ones(P, dtype=bool)
        child_rows, child_sizes = [], []
        for attempt in range(D):
            dims = dim_order[:, attempt]
            cand = open_ & (widths[np.arange(P), dims] > 0)
            if not cand.any():
                break
            pos = cand[seg]
            sub_rows, sub_seg = rows[pos], seg[pos]
            key = xt[dims[sub_seg], sub_rows].astype(np.int64)
            perm = np.argsort(sub_seg * key_base + key, kind="stable")
            sub_rows, key = sub_rows[perm], key[perm]
            c_idx = np.flatnonzero(cand)
            c_sizes = sizes[c_idx]
            c_starts = np.concatenate(([0], np.cumsum(c_sizes)[:-1]))
            local = np.repeat(np.arange(len(c_idx)), c_sizes)
            med = key[c_starts + (c_sizes - 1) // 2]
            n_le = np.add.reduceat((key <= med[local]).astype(np.int64), c_starts)
            n_lt = np.add.reduceat((key < med[local]).astype(np.int64), c_starts)
            ok_le = (n_le >= k) & (c_sizes - n_le >= k)
            ok_lt = (n_lt >= k) & (c_sizes - n_lt >= k)
            use_lt = ok_lt & (~ok_le | (np.abs(c_sizes - 2 * n_lt) < np.abs(c_sizes - 2 * n_le)))
            split = ok_le | ok_lt
            if not split.any():
                continue
            n_left = np.where(use_lt, n_lt, n_le)
            child_rows.append(sub_rows[split[local]])  # sorted by key: left rows first
            sp = np.flatnonzero(split)
            pair = np.empty(2 * len(sp), dtype=np.int64)
            pair[0::2], pair[1::2] = n_left[sp], c_sizes[sp] - n_left[sp]
            child_sizes.append(pair)
            open_[c_idx[sp]] = False
        if open_.any():  # no dimension splits these: final groups
            final_rows.append(rows[open_[seg]])
            final_sizes.append(sizes[open_])
        if child_rows:
            rows, sizes = np.concatenate(child_rows), np.concatenate(child_sizes)
        else:
            sizes = sizes[:0]

    all_rows = np.concatenate(final_rows)
    all_sizes = np.concatenate(final_sizes)
    raw = np.empty(n, dtype=np.int64)
    raw[all_rows] = np.repeat(np.arange(len(all_sizes)), all_sizes)
    # number groups 0.. within each segment (segments are row ranges, groups never cross them)
    first_row = all_rows[np.concatenate(([0], np.cumsum(all_sizes)[:-1]))]
    group_seg = origin_of_row[first_row]
    order = np.lexsort((np.arange(len(all_sizes)), group_seg))
    rank = np.empty(len(all_sizes), dtype=np.int64)
    rank[order] = np.arange(len(all_sizes))
    n_groups = np.bincount(group_seg, minlength=n_seg)
    seg_first = np.concatenate(([0], np.cumsum(n_groups)[:-1]))
    group = rank[raw] - seg_first[origin_of_row]
    return group, n_groups

"""Mondrian on many disjoint segments at once: the wings of every butterfly built at one level of
the hierarchy.

The spine's level-by-level Mondrian (tasks/partition/mondrian.py `split_levels`) started from
many segments at once: a few numpy passes per depth instead of one Python call per butterfly
(tests/test_butterfly_properties.py checks the groups equal mondrian_partition's on each segment).
"""
from __future__ import annotations

import numpy as np

from tasks.microdata import QIDomain
from tasks.partition.mondrian import split_levels


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

    all_rows, all_sizes, group_seg = split_levels(xt, doms, k, np.arange(n, dtype=np.int64),
                                          np.asarray(seg_sizes, dtype=np.int64),
                                          np.arange(n_seg, dtype=np.int64))
    raw = np.empty(n, dtype=np.int64)
    raw[all_rows] = np.repeat(np.arange(len(all_sizes)), all_sizes)
    # number groups 0.. within each segment (the label of a group is its starting segment)
    order = np.lexsort((np.arange(len(all_sizes)), group_seg))
    rank = np.empty(len(all_sizes), dtype=np.int64)
    rank[order] = np.arange(len(all_sizes))
    n_groups = np.bincount(group_seg, minlength=n_seg)
    seg_first = np.concatenate(([0], np.cumsum(n_groups)[:-1]))
    group = rank[raw] - seg_first[origin_of_row]
    return group, n_groups

"""Mondrian on many disjoint segments at once: the wings of every butterfly built at one level of
the hierarchy.

Mondrian splits by a threshold on one attribute, so rows equal on the partitioned columns never
end up in different groups. The wings therefore run on the *distinct* (segment, wing value)
points, each weighted by its row count: medians and the >= k checks count rows through the
weights, so the groups are exactly the spine's Mondrian groups (the same rules as
tasks/partition/mondrian.py; tests/test_butterfly_properties.py checks the groups equal
mondrian_partition's on each segment). On census data a wing has 3,640 to 29,822 distinct values
over 300,000 rows, so every level handles 2x to 10x fewer items than a row-level Mondrian, and all
segments of one depth are split together (a few numpy passes per level, no Python per segment).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from privpub.tasks.core.microdata import QIDomain
from privpub.tasks.partition.mondrian import split_levels


@dataclass
class WingGroups:
    """Mondrian groups of several segments, per row and per distinct (segment, value) point."""

    group: np.ndarray  # per row: its group, numbered 0.. within its segment
    n_groups: np.ndarray  # per segment
    point_of_row: np.ndarray
    first_row: np.ndarray  # per point: one of its rows
    point_group: np.ndarray  # per point: its group, numbered across all segments
    points_by_group: np.ndarray  # the points, group after group (segments in order)

    def rows_by_group(self) -> np.ndarray:
        """The rows, group after group."""
        return np.argsort(self.point_group[self.point_of_row], kind="stable")


def segmented_mondrian(
    codes: np.ndarray,
    domains: list[QIDomain],
    columns: list[int],
    seg_sizes: np.ndarray,
    k: int,
    ids: tuple[np.ndarray, int] | None = None,
) -> WingGroups:
    """codes: rows of the segments, each segment contiguous, in order; seg_sizes >= k each.
    ids: optionally (id per row, number of ids), equal iff the rows' codes on `columns` are:
    the distinct points are then found by counting instead of sorting when that is small."""
    n, n_seg = len(codes), len(seg_sizes)
    seg_of_row = np.repeat(np.arange(n_seg), seg_sizes)
    if not columns:
        ones = np.ones(n_seg, dtype=np.int64)
        return WingGroups(np.zeros(n, dtype=np.int64), ones, np.arange(n), np.arange(n), seg_of_row, np.arange(n))
    doms = [domains[c] for c in columns]
    x = codes[:, columns]
    point_of_row, first, weight, point_seg = distinct_points(x, seg_of_row, doms, ids)
    per_seg = np.bincount(point_seg, minlength=n_seg)
    xt = np.ascontiguousarray(x[first].T.astype(np.int64))
    pts, sizes, group_seg = weighted_levels(xt, weight, doms, k, per_seg, np.arange(n_seg))
    # number groups 0.. within each segment, in the order the levels emitted them
    emitted = np.lexsort((np.arange(len(sizes)), group_seg))
    rank = np.empty(len(sizes), dtype=np.int64)
    rank[emitted] = np.arange(len(sizes))
    n_groups = np.bincount(group_seg, minlength=n_seg)
    seg_first = np.concatenate(([0], np.cumsum(n_groups)[:-1]))
    point_group = np.empty(len(weight), dtype=np.int64)
    point_group[pts] = np.repeat(rank, sizes)
    group_start = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    by_group = pts[ragged(group_start[emitted], sizes[emitted])]
    return WingGroups(
        point_group[point_of_row] - seg_first[seg_of_row], n_groups, point_of_row, first, point_group, by_group
    )


def ragged(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """concatenate(arange(s, s + l) for s, l in zip(starts, lengths)), without a Python loop."""
    total = int(lengths.sum())
    shift = starts - np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.repeat(shift, lengths) + np.arange(total)


def distinct_points(
    x: np.ndarray, seg_of_row: np.ndarray, doms: list[QIDomain], ids: tuple[np.ndarray, int] | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.intp], np.ndarray]:
    """Distinct (segment, codes) pairs, numbered in (segment, codes) order.

    Returns the point of each row, one row of each point, the points' row counts and segments."""
    n_seg = int(seg_of_row[-1]) + 1
    if ids is not None and n_seg * ids[1] <= 2 * len(x) + (1 << 16):
        # counting: a presence table over (segment, id), linear in rows plus table size
        key = seg_of_row.astype(np.int64) * ids[1] + ids[0]
        present = np.zeros(n_seg * ids[1], dtype=bool)
        present[key] = True
        point_of_row = (np.cumsum(present) - 1)[key]
        first = np.empty(int(present.sum()), dtype=np.int64)
        first[point_of_row] = np.arange(len(x))
        return point_of_row, first, np.bincount(point_of_row), seg_of_row[first]
    radix = [max(d.size, 1) for d in doms]
    if float(np.prod(radix, dtype=float)) * n_seg < 2.0**62:
        key = seg_of_row.astype(np.int64)
        for j, r in enumerate(radix):
            key = key * r + x[:, j]
        by_point = np.argsort(key, kind="stable")
        sorted_key = key[by_point]
        new = np.ones(len(key), dtype=bool)
        new[1:] = sorted_key[1:] != sorted_key[:-1]
    else:  # too many combinations for one integer key
        cols = np.column_stack([seg_of_row, x])
        by_point = np.lexsort(cols.T[::-1])
        ordered = cols[by_point]
        new = np.ones(len(cols), dtype=bool)
        new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    point_start = np.flatnonzero(new)
    point_of_row = np.empty(len(x), dtype=np.int64)
    point_of_row[by_point] = np.cumsum(new) - 1
    first = by_point[point_start]
    return point_of_row, first, np.diff(np.append(point_start, len(by_point))), seg_of_row[first]


def weighted_levels(
    xt: np.ndarray, weight: np.ndarray, doms: list[QIDomain], k: int, sizes: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The spine's Mondrian level loop over weighted points (rows per point): returns (points,
    points per group, segment label per group), each group contiguous in points."""
    levels: tuple[np.ndarray, np.ndarray, np.ndarray] = split_levels(
        xt,
        doms,
        k,
        np.arange(xt.shape[1], dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        np.asarray(labels, dtype=np.int64),
        weights=weight,
    )
    return levels

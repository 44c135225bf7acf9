"""Mondrian: the vectorised level-by-level partitioner equals a plain recursive reference of the
same rules, and every partition it returns is k-anonymous / l-diverse with a consistent tree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from privpub.schemas.errors import PartitionError
from privpub.tasks.partition.mondrian import mondrian_partition
from tests.helpers import microdata

QI = [
    {"name": "a", "kind": "numeric"},
    {"name": "b", "kind": "numeric"},
    {"name": "c", "kind": "ordinal", "order": ["x", "y", "z", "w"]},
]


def range_width(codes, rows, j, d):
    """A QI's normalized width in a partition: its code range (split_width "range")."""
    lo, hi = codes[rows, j].min(), codes[rows, j].max()
    return d.width(np.array([lo]), np.array([hi]))[0] / d.span if d.span > 0 else 0.0


def reference_mondrian(data, k, l=None, width=range_width):
    """Recursive Mondrian with the same rules, one partition at a time (slow, obvious); `width`
    measures a QI in a partition (tests/test_split_width.py passes the "values" measure)."""
    codes, s = data.codes, data.sensitive_codes
    doms = data.domains
    groups = []

    def diverse(rows):
        return l is None or l <= 1 or len(np.unique(s[rows])) >= l

    def rec(rows):
        widths = [width(codes, rows, j, d) for j, d in enumerate(doms)]
        for j in sorted(range(len(doms)), key=lambda j: -widths[j]):
            if widths[j] <= 0:
                break
            vals = np.sort(codes[rows, j])
            med = vals[(len(rows) - 1) // 2]
            best = None
            for strict in (False, True):
                left = rows[codes[rows, j] < med] if strict else rows[codes[rows, j] <= med]
                right = np.setdiff1d(rows, left)
                if len(left) >= k and len(right) >= k and diverse(left) and diverse(right):
                    bal = abs(len(rows) - 2 * len(left))
                    if best is None or bal < best[0]:
                        best = (bal, left, right)
            if best:
                rec(best[1])
                rec(best[2])
                return
        groups.append(frozenset(rows.tolist()))

    rec(np.arange(data.n))
    return set(groups)


def frames(min_rows=1, max_rows=40):
    row = st.tuples(st.integers(0, 9), st.integers(0, 3), st.sampled_from(["x", "y", "z", "w"]), st.integers(0, 4))
    return st.lists(row, min_size=min_rows, max_size=max_rows).map(
        lambda rows: pd.DataFrame(
            {
                "pid": range(len(rows)),
                "a": [r[0] for r in rows],
                "b": [r[1] for r in rows],
                "c": [r[2] for r in rows],
                "s": [f"s{r[3]}" for r in rows],
            }
        )
    )


@given(frames(min_rows=4), st.integers(1, 4), st.sampled_from([None, 2, 3]))
def test_equals_recursive_reference(frame, k, l):
    data = microdata(frame, QI, "s")
    n_distinct = frame.s.nunique()
    if len(frame) < k or (l and n_distinct < l):
        with pytest.raises(PartitionError):
            mondrian_partition(data, k, l)
        return
    part = mondrian_partition(data, k, l)
    ours = {frozenset(np.flatnonzero(part.group == g).tolist()) for g in range(part.n_groups)}
    assert ours == reference_mondrian(data, k, l)


@given(frames(min_rows=6), st.integers(2, 3))
def test_groups_meet_k_and_l_and_tree_is_consistent(frame, k):
    assume(frame.s.nunique() >= 2)
    data = microdata(frame, QI, "s")
    part = mondrian_partition(data, k, 2)
    sizes = part.sizes
    assert sizes.min() >= k and sizes.sum() == len(frame)
    distinct = pd.Series(data.sensitive_codes).groupby(part.group).nunique()
    assert distinct.min() >= 2
    tree = part.tree
    # every internal node's size is the sum of its children; leaves map 1:1 to groups
    internal = np.flatnonzero(tree.left >= 0)
    assert np.array_equal(tree.size[internal], tree.size[tree.left[internal]] + tree.size[tree.right[internal]])
    leaves = tree.leaf_of_group()
    assert np.array_equal(tree.size[leaves], sizes)
    assert tree.size[0] == len(frame)
    # bottom_up lists children before their parents
    seen = set()
    for node in tree.bottom_up():
        for child in (tree.left[node], tree.right[node]):
            assert tree.is_leaf(child) or child in seen
        seen.add(node)


@given(frames(min_rows=4))
def test_strict_partitioning_gives_disjoint_boxes(frame):
    data = microdata(frame, QI, "s")
    part = mondrian_partition(data, 2)
    boxes = []
    for g in range(part.n_groups):
        rows = part.group == g
        boxes.append((data.codes[rows].min(axis=0), data.codes[rows].max(axis=0)))
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            (lo1, hi1), (lo2, hi2) = boxes[i], boxes[j]
            overlap = np.all((lo1 <= hi2) & (lo2 <= hi1))
            assert not overlap, "strict Mondrian groups must not overlap"


def test_k_larger_than_table_is_refused():
    frame = pd.DataFrame({"pid": [1, 2], "a": [1, 2], "b": [1, 1], "c": ["x", "y"], "s": ["p", "q"]})
    with pytest.raises(PartitionError, match="larger than the table"):
        mondrian_partition(microdata(frame, QI, "s"), 3)

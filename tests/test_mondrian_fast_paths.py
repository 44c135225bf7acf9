"""The fast paths of Mondrian and the generalized table (issue 43) pinned against the plain
operations they replace: a row moved as one item equals numpy's row gather, the radix group
order equals a stable argsort, distinct l from one presence table of both median sides equals
the general count, and codes narrowed to 16 bits split as the recursive reference does."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privpub.tasks.partition import mondrian
from privpub.tasks.partition.generalized_table import GroupIndex, group_order
from privpub.tasks.partition.mondrian import mondrian_partition, take_rows
from tests.helpers import microdata
from tests.test_mondrian import reference_mondrian


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.int64])
@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_take_rows_equals_a_row_gather(dtype, d):
    rng = np.random.default_rng(d)
    xr = rng.integers(0, 200, (500, d)).astype(dtype)
    order = rng.integers(0, 500, 700)  # repeats and any order
    assert np.array_equal(take_rows(xr, order), xr[order])
    assert take_rows(xr, order).dtype == xr.dtype
    strided = xr[::2]  # not contiguous: the plain gather
    assert np.array_equal(take_rows(strided, order % 250), strided[order % 250])


@pytest.mark.parametrize("n_groups", [1, 7, 65_536, 65_537, 200_000])
def test_group_order_equals_a_stable_argsort(n_groups):
    rng = np.random.default_rng(n_groups)
    group = rng.integers(0, n_groups, 300_000)
    assert np.array_equal(group_order(group, n_groups), np.argsort(group, kind="stable"))
    with_left_out = np.where(rng.random(len(group)) < 0.1, -1, group)  # suppression's -1
    assert np.array_equal(group_order(with_left_out, n_groups), np.argsort(with_left_out, kind="stable"))


def test_all_bounds_equal_per_column_bounds():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 1000, (5000, 3)).astype(np.int32)
    group = rng.integers(0, 70_000, 5000)
    group = np.unique(group, return_inverse=True)[1]
    index = GroupIndex(group, int(group.max()) + 1)
    lo, hi = index.all_bounds(codes)
    for j in range(3):
        assert np.array_equal((lo[:, j], hi[:, j]), index.bounds(codes[:, j]))


def _table(rng, n, values):
    return pd.DataFrame(
        {
            "pid": range(n),
            "a": rng.integers(0, values, n),
            "b": rng.integers(0, 5, n),
            "c": rng.choice(["x", "y", "z", "w"], n),
            "s": [f"s{v}" for v in rng.integers(0, 6, n)],
        }
    )


QI = [
    {"name": "a", "kind": "numeric"},
    {"name": "b", "kind": "numeric"},
    {"name": "c", "kind": "categorical"},
]


@pytest.mark.parametrize("l", [2, 3, 4])
def test_distinct_sides_equal_the_general_count(monkeypatch, l):
    """One presence table of (candidate, below / at / above the median, value) decides every
    split as the two group counts of the general path do: same groups, same tree."""
    rng = np.random.default_rng(l)
    data = microdata(_table(rng, 3000, 40), QI, "s")
    fast = mondrian_partition(data, 3, l)
    monkeypatch.setattr(mondrian, "_distinct_sides", lambda *args: None)
    plain = mondrian_partition(data, 3, l)
    assert fast.n_groups == plain.n_groups > 50
    assert np.array_equal(fast.group, plain.group)
    for field in ("parent", "left", "right", "dim", "value", "size", "group"):
        assert np.array_equal(getattr(fast.tree, field), getattr(plain.tree, field))


@pytest.mark.parametrize("l", [None, 2])
def test_codes_past_one_byte_split_as_the_reference(l):
    """Codes above 255 travel as 16-bit integers; the groups equal the recursive reference's."""
    rng = np.random.default_rng(11)
    frame = _table(rng, 400, 100_000)
    data = microdata(frame, QI, "s")
    assert data.codes.max() > 255
    part = mondrian_partition(data, 3, l)
    ours = {frozenset(np.flatnonzero(part.group == g).tolist()) for g in range(part.n_groups)}
    assert ours == reference_mondrian(data, 3, l)

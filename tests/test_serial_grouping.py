"""Bottom-up grouping: every group meets every member's required ratio for every value it holds."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.tasks.techniques.serial.grouping import Requirements, grow_groups, zorder

SETTINGS = settings(deadline=None, max_examples=80)


@st.composite
def requirements(draw):
    n = draw(st.integers(1, 60))
    value = np.array(draw(st.lists(st.sampled_from([-1, -1, -1, 0, 1, 2]), min_size=n, max_size=n)))
    real = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    real[draw(st.integers(0, n - 1))] = True
    value[~real] = -1  # virtual members hold no value
    first = draw(st.sampled_from([2.0, 3.42, 4.0, 7.5]))
    k = draw(st.integers(0, 2 * n))
    pos = np.sort(np.array(draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k)), dtype=np.int64))
    code = np.array(draw(st.lists(st.integers(0, 2), min_size=k, max_size=k)), dtype=np.int64)
    ratio = np.array(
        draw(st.lists(st.sampled_from([5.0, 9.0, 14.5, 40.0, math.inf]), min_size=k, max_size=k)), dtype=float
    )
    min_size = draw(st.integers(1, 4))
    cap = draw(st.integers(max(min_size, 8), 80))
    return Requirements(
        value=value, real=real, first=first, pos=pos, code=code, ratio=ratio, min_size=min_size, cap=cap
    )


def ratio_of(req: Requirements, point: int, code: int) -> float:
    hit = (req.pos == point) & (req.code == code)
    return max([req.first] + list(req.ratio[hit]))


@SETTINGS
@given(requirements())
def test_groups_meet_every_required_ratio(req):
    out = grow_groups(req)
    n = len(req.value)
    g = out.group
    assert out.n_groups == len(set(g[g >= 0]))
    assert not (out.suppressed & (req.value < 0)).any()  # only held values are suppressed
    shown = np.where(out.suppressed, -1, req.value)
    # contiguous groups in curve order, numbered in order, each with a real member
    used = np.flatnonzero(g >= 0)
    assert (np.diff(g[used]) >= 0).all()
    for gid in range(out.n_groups):
        members = np.flatnonzero(g == gid)
        assert (np.diff(members) == 1).all()
        assert req.real[members].any()
        size = len(members)
        assert size <= req.cap
        if size < req.min_size:  # only a remainder at the end that the cap keeps from merging
            assert members[-1] == np.flatnonzero(req.real)[-1] or members[-1] == n - 1
        for c in set(shown[members]) - {-1}:
            count = int((shown[members] == c).sum())
            worst = max(ratio_of(req, m, c) for m in members)
            assert size >= count * worst, (gid, c, size, count, worst)
    # unused points are virtual only
    assert not req.real[g < 0].any()


@SETTINGS
@given(requirements())
def test_no_suppression_when_first_ratio_fits(req):
    """Without history and with room to spare, nothing is withheld."""
    req.pos = req.pos[:0]
    req.code = req.code[:0]
    req.ratio = req.ratio[:0]
    req.cap = 10_000
    counts = np.bincount(req.value[req.value >= 0], minlength=3)
    out = grow_groups(req)
    if counts.sum() * req.first <= len(req.value):
        assert not out.suppressed.any()


def test_groups_are_as_small_as_the_ratios_allow():
    # one protected value every 10 points, ratio 4 -> groups of 4 around each, fillers min_size 2
    value = np.full(40, -1)
    value[::10] = 0
    req = Requirements(
        value=value,
        real=np.ones(40, bool),
        first=4.0,
        pos=np.zeros(0, np.int64),
        code=np.zeros(0, np.int64),
        ratio=np.zeros(0),
        min_size=2,
        cap=100,
    )
    out = grow_groups(req)
    sizes = np.bincount(out.group)
    assert sizes[0] == 4 and set(sizes) <= {2, 4} and not out.suppressed.any()


def test_zorder_is_a_local_permutation():
    xs, ys = np.meshgrid(np.arange(8), np.arange(8))
    coords = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    order = zorder(coords)
    assert sorted(order) == list(range(64))
    # each aligned 2x2 block is consecutive on a Z curve
    first4 = coords[order[:4]]
    assert set(map(tuple, first4)) == {(0, 0), (0, 1), (1, 0), (1, 1)}

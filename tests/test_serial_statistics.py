"""The Section 7 statistics: history rows, per-pair aggregate, incremental update, storage form."""
from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.serial import statistics as stats
from tasks.verify import serial_guarantee as sg

SETTINGS = settings(deadline=None, max_examples=40)


@st.composite
def release(draw):
    """One release: persons 0..9 (some absent), groups, protected value codes (-1 = none)."""
    n = draw(st.integers(1, 10))
    persons = np.array(sorted(draw(st.sets(st.integers(0, 9), min_size=n, max_size=n))))
    n_groups = draw(st.integers(1, n))
    gid = np.array(draw(st.lists(st.integers(0, n_groups - 1), min_size=n, max_size=n)))
    gid[:n_groups] = np.arange(n_groups)  # every group has a member
    code = np.array(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)))
    virtual = np.array(draw(st.lists(st.integers(0, 3), min_size=n_groups, max_size=n_groups)))
    sizes = np.bincount(gid, minlength=n_groups) + virtual
    return persons, gid, sizes, code


VALUES = np.array(["a", "b", "c"], dtype=object)


def naive_rows(persons, gid, sizes, code):
    out = []
    for i, p in enumerate(persons):
        members = np.flatnonzero(gid == gid[i])
        held = [code[m] for m in members if code[m] >= 0]
        for c in sorted(set(held)):
            out.append((int(p), VALUES[c], int(sizes[gid[i]]), held.count(c)))
    return sorted(out)


@SETTINGS
@given(st.lists(release(), min_size=1, max_size=3))
def test_rows_aggregate_and_update(series):
    frames = []
    for r, (persons, gid, sizes, code) in enumerate(series, start=1):
        rows = stats.release_rows(persons, gid, sizes, code, VALUES, r)
        got = sorted(zip(rows["person"].astype(int), rows["value"], rows["size"], rows["count"]))
        assert got == naive_rows(persons, gid, sizes, code)
        assert (rows["release"] == r).all()
        frames.append(rows)
    history = pd.concat(frames, ignore_index=True)

    terms = defaultdict(list)
    for p, v, size, count in zip(history["person"], history["value"], history["size"], history["count"]):
        terms[(int(p), v)].append((int(size), int(count)))
    agg = stats.aggregate(history)
    assert len(agg) == len(terms)
    for p, v, links, q, d in agg[stats.AGGREGATE_COLUMNS].itertuples(index=False):
        assert links == len(terms[(int(p), v)])
        assert 1 - Fraction(q, d) == sg.breach_probability(terms[(int(p), v)])

    # carried forward release by release (only the named pairs recomputed) == rebuilt
    carried = None
    for rows in frames:
        carried, _, _ = stats.advance(carried, rows)
    carried = stats.aggregate_from_arrow(carried)
    key = ["person", "value"]
    a = agg.sort_values(key).reset_index(drop=True)
    b = carried.sort_values(key).reset_index(drop=True)
    assert a[key + ["links"]].astype(str).equals(b[key + ["links"]].astype(str))
    assert list(a["q"]) == list(b["q"]) and list(a["d"]) == list(b["d"])

    # stored form: q and d survive beyond 64 bits
    back = stats.aggregate_from_arrow(stats.aggregate_to_arrow(b))
    assert list(back["q"]) == list(b["q"]) and list(back["d"]) == list(b["d"])


def test_big_products_stay_exact():
    history = pd.DataFrame({"person": [1] * 30, "value": ["x"] * 30, "release": range(30),
                            "size": [1_000_003] * 30, "count": [1] * 30})
    agg = stats.aggregate(history)
    assert agg["d"].iat[0] == 1_000_003**30 and agg["q"].iat[0] == 1_000_002**30
    back = stats.aggregate_from_arrow(stats.aggregate_to_arrow(agg))
    assert back["d"].iat[0] == 1_000_003**30


def test_requirement_view_keeps_present_persons_and_protected_values():
    history = pd.DataFrame({"person": [1, 1, 2, 3], "value": ["a", "z", "a", "b"], "release": 1,
                            "size": [4, 4, 5, 6], "count": [1, 2, 1, 3]})
    stored = stats.aggregate_to_arrow(stats.aggregate(history))
    view = stats.requirement_view(stored, pd.Index([3, 1]), pd.Index(["a", "b", "z"]), np.array(["a", "b"]))
    q, d = stats.exact(view, np.arange(len(view["row"])))
    got = sorted(zip(view["row"], view["code"], q, d))
    assert got == [(0, 1, 3, 6), (1, 0, 3, 4)]
    assert all(p >= 1 - Fraction(a, b) for p, a, b in zip(view["p_hi"], q, d))


def test_pairs_matching_reads_only_the_named_pairs():
    history = pd.DataFrame({"person": [1, 1, 2, 3], "value": ["a", "z", "a", "b"], "release": 1,
                            "size": [4, 4, 5, 6], "count": [1, 2, 1, 3]})
    stored = stats.aggregate_to_arrow(stats.aggregate(history))
    rows = pd.DataFrame({"person": [1, 3, 4], "value": ["z", "a", "a"], "release": 2, "size": 9, "count": 1})
    got = stats.pairs_matching(stored, rows)
    assert list(zip(got["person"], got["value"], got["q"], got["d"])) == [(1, "z", 2, 4)]

"""The Section 7 statistics: history rows, per-pair aggregate, incremental update, storage form."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.state.store import Store
from privpub.tasks.techniques.serial import guarantee as sg
from privpub.tasks.techniques.serial import pairs
from privpub.tasks.techniques.serial import statistics as stats
from privpub.tasks.techniques.serial import stored as ss

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
    history = pd.DataFrame(
        {"person": [1] * 30, "value": ["x"] * 30, "release": range(30), "size": [1_000_003] * 30, "count": [1] * 30}
    )
    agg = stats.aggregate(history)
    assert agg["d"].iat[0] == 1_000_003**30 and agg["q"].iat[0] == 1_000_002**30
    back = stats.aggregate_from_arrow(stats.aggregate_to_arrow(agg))
    assert back["d"].iat[0] == 1_000_003**30


def _sources(tmp_path, history):
    """The same committed pairs as both PairSources: in memory, and in a state database (written
    by the commit hook's writer, read back by SQL)."""
    stored = stats.aggregate_to_arrow(stats.aggregate(history))
    store = Store(tmp_path / "state.duckdb")
    with store.write() as con:
        _write(con, "r1", stored, history)
    return {"memory": pairs.MemoryPairs(stored), "state": ss.StoredPairs(store, "s")}


def _write(con, release_id, stored, history):
    """The commit hook's writer, for a release whose members are the people in its history rows."""
    people = pd.unique(history["person"])
    members = pa.table(
        {"person": people, "gid": np.zeros(len(people), dtype=np.int64), "virtual": np.zeros(len(people), dtype=bool)}
    )
    ss.statistics_writer(
        "s",
        pairs=stored,
        history=stats.history_to_arrow(history),
        members=members,
        summary={},
        release=int(history["release"].max()),
        replace=False,
    )(con, release_id, 1)


HISTORY = pd.DataFrame(
    {"person": [1, 1, 2, 3], "value": ["a", "z", "a", "b"], "release": 1, "size": [4, 4, 5, 6], "count": [1, 2, 1, 3]}
)


@pytest.mark.parametrize("where", ["memory", "state"])
def test_special_pairs_are_the_present_persons_protected_values_above_the_floor(tmp_path, where):
    source = _sources(tmp_path, HISTORY)[where]
    values = np.array(["a", "b", "z"], dtype=object)
    view = pairs.requirement_view(source, np.array([3, 1, 9]), values, np.array([0, 1]), -1.0)
    _, _, q, d = source.state(np.array([3, 1, 9])[view["row"]], values[view["code"]])
    got = sorted(zip(view["row"], view["code"], q, d))
    assert got == [(0, 1, 3, 6), (1, 0, 3, 4)]  # person 1's "z" is not protected, 9 has no pairs
    assert all(p >= 1 - Fraction(a, b) for p, a, b in zip(view["p_hi"], q, d))
    # p(3, b) = 1/2 and p(1, a) = 1/4: a floor between them keeps only the first
    view = pairs.requirement_view(source, np.array([3, 1, 9]), values, np.array([0, 1]), 0.3)
    assert list(zip(view["row"], view["code"])) == [(0, 1)]


@pytest.mark.parametrize("where", ["memory", "state"])
def test_matching_reads_only_the_named_pairs(tmp_path, where):
    source = _sources(tmp_path, HISTORY)[where]
    rows = pd.DataFrame({"person": [1, 3, 4], "value": ["z", "a", "a"], "release": 2, "size": 9, "count": 1})
    got = pairs.matching(source, rows)
    assert list(zip(got["person"], got["value"], got["links"], got["q"], got["d"])) == [(1, "z", 1, 2, 4)]


def test_the_writer_keys_new_persons_and_values_and_replaces_named_pairs(tmp_path):
    store = Store(tmp_path / "state.duckdb")
    first = stats.aggregate(HISTORY)
    with store.write() as con:
        _write(con, "r1", stats.aggregate_to_arrow(first), HISTORY)
    rows = pd.DataFrame({"person": [1, 7], "value": ["a", "y"], "release": 2, "size": 5, "count": 1})
    source = ss.StoredPairs(store, "s")
    after = stats.combine([pairs.matching(source, rows), stats.history_terms(rows)])
    with store.write() as con:
        _write(con, "r2", stats.aggregate_to_arrow(after), rows)
        people = con.execute("SELECT person, pkey FROM serial_people ORDER BY pkey").fetchall()
        values = con.execute("SELECT value, vkey FROM serial_values ORDER BY vkey").fetchall()
        n = con.execute("SELECT count(*) FROM serial_pairs").fetchone()[0]
    assert people == [("1", 0), ("2", 1), ("3", 2), ("7", 3)]  # dense, new people appended
    assert values == [("a", 0), ("b", 1), ("z", 2), ("y", 3)]
    assert n == 5  # (1, a) replaced, (7, y) added
    whole = stats.combine([first, stats.history_terms(rows)])
    fresh = ss.StoredPairs(store, "s")
    found, links, q, d = fresh.state(whole["person"].to_numpy(), whole["value"].to_numpy(dtype=object))
    assert found.all()
    assert list(links) == list(whole["links"]) and list(q) == list(whole["q"]) and list(d) == list(whole["d"])
    # the release's own rows come back in the snapshot's types (person ids were integers)
    own = ss.release_private(store, "s", "r2")
    got = own["serial_stats"].to_pandas().sort_values("person").reset_index(drop=True)
    assert got.to_dict("list") == {
        "person": [1, 7],
        "value": ["a", "y"],
        "release": [2, 2],
        "size": [5, 5],
        "count": [1, 1],
    }
    assert sorted(own["membership"].column("person").to_pylist()) == [1, 7]
    assert own["virtual_members"].num_rows == 0

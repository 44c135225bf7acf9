"""The "serial" technique end to end on tiny series, checked against possible-world enumeration."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.schemas.errors import PrivacyRefused, SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.techniques.registry import _REGISTRY
from privpub.tasks.techniques.serial import guarantee as sg
from privpub.tasks.techniques.serial.technique import SerialTechnique

BLANK = object()  # the value slot of a virtual member


def make_spec(**technique):
    return spec_from_dict(
        {
            "dataset": {
                "name": "tiny",
                "input": "tiny.csv",
                "person_id": "pid",
                "sensitive": "dis",
                "qi": [{"name": "age", "kind": "numeric"}, {"name": "sex", "kind": "categorical"}],
            },
            "technique": {"name": "serial", "l": 2, **technique},
        }
    )


def publish_series(spec, snapshots, registration=None, seed=0):
    """Run the technique over the snapshots as the flow would; returns per release (release, check)."""
    tech = SerialTechnique(spec)
    rng = np.random.default_rng(seed)
    history, out = None, []
    for frame in snapshots:
        data = Microdata.from_frame(spec, frame.reset_index(drop=True))
        data.extra = {"serial_stats": history, "registration": registration}
        part = tech.partition(data, rng)
        release = tech.anonymize(data, part, rng)
        results = tech.verify(release, {"serial_stats": history, "registration": registration})
        out.append((release, {r.model: r for r in results}))
        rows = release.private["serial_stats"].to_pandas()
        history = rows if history is None else pd.concat([history, rows], ignore_index=True)
    return out, history


def enumerated_breach(releases, protected) -> dict:
    """p(o, s) for every pair by enumerating each release's possible worlds group by group.

    A group's worlds are the distinct arrangements of its published multiset (suppressed = None,
    plus one BLANK per virtual member) over its members (real ones, then virtual placeholders).
    Worlds of the series are the product over groups and releases (Definition 1), so the count of
    worlds never linking o to s is the product of the per-release counts.
    """
    never: dict = {}
    for release, _ in releases:
        table = release.tables["table"].to_pandas()
        sizes = release.tables["groups"].to_pandas().set_index("gid")["size"]
        members = release.private["membership"].to_pandas()
        for gid, group in table.groupby("gid"):
            people = list(members.loc[members["gid"] == gid, "person"])
            slots = [None if pd.isna(v) else v for v in group["dis"]]
            slots += [BLANK] * (int(sizes[gid]) - len(people))
            people += [("virtual", i) for i in range(int(sizes[gid]) - len(people))]
            worlds = set(itertools.permutations(slots))
            hits = Counter()
            for world in worlds:
                for person, value in zip(people, world):
                    hits[(person, value)] += 1
            for (person, value), a in hits.items():
                if isinstance(person, tuple) or value is None or value is BLANK or value not in protected:
                    continue
                ok, total = never.get((person, value), (1, 1))
                never[(person, value)] = (ok * (len(worlds) - a), total * len(worlds))
    return {k: 1 - Fraction(a, b) for k, (a, b) in never.items()}


@st.composite
def tiny_series(draw):
    pool = 10
    ages = draw(st.lists(st.integers(20, 40), min_size=pool, max_size=pool))
    sexes = draw(st.lists(st.sampled_from("MF"), min_size=pool, max_size=pool))
    snapshots = []
    stay = draw(st.booleans())  # the same people in every release, or people coming and going
    present = sorted(draw(st.sets(st.integers(0, pool - 1), min_size=4, max_size=8)))
    for _ in range(draw(st.integers(2, 3))):
        if not stay:
            present = sorted(draw(st.sets(st.integers(0, pool - 1), min_size=4, max_size=8)))
        values = draw(st.lists(st.sampled_from("aabcdef"), min_size=len(present), max_size=len(present)))
        snapshots.append(
            pd.DataFrame(
                {"pid": present, "age": [ages[i] for i in present], "sex": [sexes[i] for i in present], "dis": values}
            )
        )
    registration = None
    if draw(st.booleans()):
        registration = pd.DataFrame({"pid": range(pool), "age": ages, "sex": sexes})
    technique = draw(
        st.sampled_from(
            [
                {"strategy": "constant-ratio", "releases": 2},
                {"strategy": "constant-ratio", "releases": 3, "transient": ["a", "b"]},
                {"strategy": "geometric", "factor": 1.5},
                {"strategy": "geometric", "factor": 2, "transient": ["a"]},
            ]
        )
    )
    return snapshots, registration, technique


@settings(deadline=None, max_examples=20)
@given(tiny_series())
def test_tiny_series_agree_with_possible_worlds(case):
    check_against_enumeration(*case)


def test_three_links_agree_with_possible_worlds():
    frame = pd.DataFrame(
        {"pid": range(7), "age": range(30, 37), "sex": ["M"] * 7, "dis": ["a", "b", "b", "b", "b", "b", "b"]}
    )
    registration = pd.DataFrame({"pid": range(9), "age": range(30, 39), "sex": ["M"] * 9})
    links = check_against_enumeration(
        [frame] * 3, registration, {"strategy": "constant-ratio", "releases": 3, "transient": ["a"]}
    )
    assert links == 3


def check_against_enumeration(snapshots, registration, technique) -> int:
    """Publish the series; every pair's p must equal the enumerated one. Returns the most links."""
    spec = make_spec(min_group_size=2, max_group_size=6, **technique)
    releases, _ = publish_series(spec, snapshots, registration)
    for (release, results), frame in zip(releases, snapshots):
        assert results["serial-global"].passed and results["serial-localized"].passed
        assert results["serial-virtual-members"].passed
        table = release.tables["table"].to_pandas()
        groups = release.tables["groups"].to_pandas()
        assert len(table) == len(frame) and (groups["size"] <= 6).all()
        real = table.groupby("gid").size()
        assert (groups.set_index("gid")["size"] >= real).all()
        if registration is None:
            assert (groups.set_index("gid")["size"] == real).all()
        assert table["dis"].isna().sum() == release.info["suppressed"]
    protected = set(releases[-1][0].private["transient"]) | set(v for r, _ in releases for v in r.private["transient"])
    exact = enumerated_breach(releases, protected)
    last = releases[-1][0]
    check = sg.check_release(
        last.tables["table"],
        last.tables["groups"],
        last.private["membership"],
        _prior(releases[:-1]),
        l=2,
        sensitive="dis",
        transient=last.private["transient"],
    )
    agg = check.aggregate
    computed = {(p, v): 1 - Fraction(q, d) for p, v, q, d in zip(agg["person"], agg["value"], agg["q"], agg["d"])}
    assert computed == {k: v for k, v in exact.items() if v > 0}
    assert max(exact.values(), default=0) <= Fraction(1, 2)
    assert Fraction(releases[-1][1]["serial-global"].value) == max(computed.values(), default=0)
    return int(agg["links"].max()) if len(agg) else 0


def _prior(releases):
    from privpub.tasks.techniques.serial import statistics as stats

    rows = [r.private["serial_stats"].to_pandas() for r, _ in releases]
    return stats.aggregate(pd.concat(rows, ignore_index=True)) if rows else None


def test_private_rows_match_what_the_verifier_recomputes():
    rng = np.random.default_rng(3)
    n = 60
    frame = pd.DataFrame(
        {
            "pid": np.arange(n),
            "age": rng.integers(20, 60, n),
            "sex": rng.choice(["M", "F"], n),
            "dis": rng.choice(list("abcdefgh"), n),
        }
    )
    spec = make_spec(strategy="geometric", transient=["g", "h"])
    releases, history = publish_series(spec, [frame, frame.sample(frac=0.8, random_state=1)])
    for _release, results in releases:
        assert all(r.passed for r in results.values())
    release = releases[-1][0]
    prior = _prior(releases[:-1])
    check = sg.check_release(
        release.tables["table"],
        release.tables["groups"],
        release.private["membership"],
        prior,
        l=2,
        sensitive="dis",
        transient=release.private["transient"],
        release=release.private["release"],
    )
    key = ["person", "value"]
    mine = release.private["serial_stats"].to_pandas().sort_values(key).reset_index(drop=True)
    theirs = check.rows.sort_values(key).reset_index(drop=True)
    assert (
        mine[key + ["size", "count", "release"]]
        .astype(str)
        .equals(theirs[key + ["size", "count", "release"]].astype(str))
    )
    assert set(history["value"]) <= {"g", "h"} and (history["release"].isin([1, 2])).all()


def sticky_series(releases=3):
    """Person 0 keeps the rare value a; everyone else has b."""
    frame = pd.DataFrame({"pid": range(12), "age": range(30, 42), "sex": ["M"] * 12, "dis": ["a"] + ["b"] * 11})
    return [frame] * releases


def test_localized_baseline_breaches_the_global_guarantee():
    releases, _ = publish_series(make_spec(strategy="localized", transient=["a"]), sticky_series())
    assert all(res["serial-localized"].passed for _, res in releases)
    assert releases[0][1]["serial-global"].passed
    assert not releases[-1][1]["serial-global"].passed
    assert Fraction(releases[-1][1]["serial-global"].value) > Fraction(1, 2)


def test_one_person_linked_by_two_groups_of_strangers_is_refused_alone():
    """Person 0 keeps the value a and meets two new companions each release: every group holds
    one a in three (localized 1/3), person 0's pair reaches 1 - (2/3)^2 = 5/9 > 1/2 and the
    companions' stay at 1/3. One breaching pair among five (as the possible worlds count them)
    is enough for the global guarantee to refuse the release."""

    def snapshot(pids):
        return pd.DataFrame({"pid": pids, "age": [30 + p for p in pids], "sex": ["M"] * 3, "dis": ["a", "b", "b"]})

    releases, _ = publish_series(
        make_spec(strategy="localized", transient=["a"]), [snapshot([0, 1, 2]), snapshot([0, 3, 4])]
    )
    exact = enumerated_breach(releases, {"a"})
    assert exact == {(0, "a"): Fraction(5, 9)} | {(p, "a"): Fraction(1, 3) for p in (1, 2, 3, 4)}
    assert all(res["serial-localized"].passed for _, res in releases) and releases[0][1]["serial-global"].passed
    refused = releases[1][1]["serial-global"]
    assert (refused.value, refused.passed) == ("5/9", False)
    breaching = sum(p > Fraction(1, 2) for p in exact.values())
    assert (refused.worst["breaching_pairs"], refused.worst["pairs"]) == (breaching, len(exact)) == (1, 5)


@pytest.mark.parametrize("technique", [{"strategy": "constant-ratio", "releases": 3}, {"strategy": "geometric"}])
def test_strategies_keep_the_sticky_value_safe(technique):
    releases, _ = publish_series(make_spec(transient=["a"], **technique), sticky_series(4))
    worst = [Fraction(res["serial-global"].value) for _, res in releases]
    assert all(res["serial-global"].passed for _, res in releases)
    assert worst == sorted(worst) and worst[-1] < Fraction(1, 2)


def test_a_pair_at_the_bound_is_suppressed():
    frame = sticky_series(1)[0]
    history = pd.DataFrame({"person": [0], "value": ["a"], "release": [1], "size": [2], "count": [1]})
    spec = make_spec(strategy="geometric", transient=["a"])
    tech = SerialTechnique(spec)
    data = Microdata.from_frame(spec, frame)
    data.extra = {"serial_stats": history}
    rng = np.random.default_rng(0)
    release = tech.anonymize(data, tech.partition(data, rng), rng)
    results = {r.model: r for r in tech.verify(release, {"serial_stats": history})}
    assert release.info["suppressed"] == 1
    assert release.tables["table"].column("dis").null_count == 1
    assert results["serial-global"].passed and results["serial-global"].value == "1/2"
    assert release.private["release"] == 2


def test_virtual_members_count_toward_group_size():
    frame = pd.DataFrame({"pid": range(4), "age": [30, 31, 32, 33], "sex": ["M"] * 4, "dis": ["a", "b", "b", "b"]})
    registration = pd.DataFrame({"pid": range(12), "age": range(30, 42), "sex": ["M"] * 12})
    spec = make_spec(strategy="geometric", factor=2, transient=["a"])  # first ratio 4
    ((release, results),) = publish_series(spec, [frame], registration)[0]
    groups = release.tables["groups"].to_pandas()
    assert groups["size"].sum() > 4 and release.info["virtual_members"] == groups["size"].sum() - 4
    assert all(r.passed for r in results.values())
    # claiming virtual members without a registration list does not verify
    tech = SerialTechnique(spec)
    claims = {r.model: r for r in tech.verify(release, {})}
    assert not claims["serial-virtual-members"].passed
    assert results["serial-virtual-members"].worst["checked"] == "per group region"


def test_virtual_members_are_checked_region_by_region():
    """Enough absent registered people in total is not enough: each group's virtual members must
    be absent registered people inside that group's published region."""
    frame = pd.DataFrame(
        {
            "pid": range(8),
            "age": [30, 31, 32, 33, 60, 61, 62, 63],
            "sex": ["M"] * 8,
            "dis": ["a", "b", "b", "b", "a", "b", "b", "b"],
        }
    )
    registration = pd.DataFrame(
        {
            "pid": range(20),
            "age": list(range(30, 34)) + list(range(60, 64)) + [34, 35, 36, 37, 64, 65, 66, 67, 90, 91, 92, 93],
            "sex": ["M"] * 20,
        }
    )
    spec = make_spec(strategy="geometric", factor=2, transient=["a"], max_group_size=8)  # ratio 4
    ((release, results),) = publish_series(spec, [frame], registration)[0]
    assert results["serial-virtual-members"].passed
    tech = SerialTechnique(spec)
    witness = release.private["virtual_members"].to_pandas()
    assert len(witness) == release.info["virtual_members"] > 0

    def check(forged: pd.DataFrame):
        private = {**release.private, "virtual_members": pa.Table.from_pandas(forged, preserve_index=False)}
        forged_release = type(release)(release.tables, private, release.info)
        return {r.model: r for r in tech.verify(forged_release, {"registration": registration})}[
            "serial-virtual-members"
        ]

    assert check(witness).passed
    # the same number of virtual members, but people far outside the group's region (ages 90-93)
    far = witness.assign(person=np.arange(16, 16 + len(witness)) % 20)
    far = far[far.person >= 16]
    assert not check(pd.concat([far, witness.iloc[len(far) :]], ignore_index=True)).passed
    # a person present in the release cannot be a virtual member
    assert not check(witness.assign(person=[0] + list(witness.person[1:]))).passed
    # one person counted twice
    if len(witness) > 1:
        assert not check(witness.assign(person=[witness.person.iat[0]] * len(witness))).passed


def test_published_columns():
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "t.csv",
                "person_id": "pid",
                "sensitive": "dis",
                "qi": [
                    {"name": "age", "kind": "numeric"},
                    {"name": "edu", "kind": "ordinal", "order": ["lo", "mid", "hi"]},
                    {
                        "name": "job",
                        "kind": "categorical",
                        "hierarchy": {
                            "any": ["office", "field"],
                            "office": ["clerk", "boss"],
                            "field": ["farmer", "miner"],
                        },
                    },
                ],
            },
            "technique": {"name": "serial", "l": 2, "strategy": "geometric", "transient": ["a", "c"]},
        }
    )
    frame = pd.DataFrame(
        {
            "pid": range(8),
            "age": [30, 35, 40, 45, 50, 55, 60, 65],
            "edu": ["lo", "hi", "lo", "mid", "hi", "lo", "mid", "hi"],
            "job": ["clerk", "boss", "clerk", "boss", "farmer", "miner", "farmer", "clerk"],
            "dis": list("abbbcbbb"),
        }
    )
    ((release, results),) = publish_series(spec, [frame])[0]
    table = release.tables["table"]
    assert table.column_names == ["gid", "age_lo", "age_hi", "edu", "job", "dis"]
    for row in table.to_pylist():
        assert row["age_lo"] <= row["age_hi"]
        order = ["lo", "mid", "hi"]
        idx = [order.index(v) for v in row["edu"]]
        assert idx == list(range(idx[0], idx[-1] + 1))  # a contiguous ordinal range
        assert set(row["job"]) in (
            {"clerk"},
            {"boss"},
            {"farmer"},
            {"miner"},
            {"clerk", "boss"},
            {"farmer", "miner"},
            {"clerk", "boss", "farmer", "miner"},
        )
    # every tuple lies inside its group's published region, and the multisets add up
    region = table.to_pandas().drop_duplicates("gid").set_index("gid")
    gid_of = release.private["membership"].to_pandas().set_index("person")["gid"]
    for row in frame.itertuples():
        box = region.loc[gid_of[row.pid]]
        assert box["age_lo"] <= row.age <= box["age_hi"]
        assert row.edu in box["edu"] and row.job in box["job"]
    assert sorted(table.column("dis").to_pylist()) == sorted(frame["dis"])
    assert release.tables["groups"].column_names == ["gid", "size"]


@pytest.mark.parametrize(
    "technique",
    [
        {"l": 1},
        {"l": 2, "strategy": "geometric", "factor": 1},
        {"l": 2, "strategy": "weekly"},
        {"l": 2, "transient": 3},
    ],
)
def test_bad_parameters_are_refused(technique):
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "t.csv",
                "person_id": "pid",
                "sensitive": "dis",
                "qi": [{"name": "age", "kind": "numeric"}],
            },
            "technique": {"name": "serial", **technique},
        }
    )
    with pytest.raises(SpecError):
        SerialTechnique(spec)


def test_registered_as_serial():
    # looked up by the flows through the registry (other techniques' modules are not imported here)
    assert _REGISTRY["serial"] is SerialTechnique and SerialTechnique.table_names == ("table", "groups")


def test_refuses_instead_of_suppressing_when_asked():
    frame = sticky_series(1)[0]
    history = pd.DataFrame({"person": [0], "value": ["a"], "release": [1], "size": [2], "count": [1]})
    spec = make_spec(strategy="geometric", transient=["a"], suppress=False)
    data = Microdata.from_frame(spec, frame)
    data.extra = {"serial_stats": history}
    with pytest.raises(PrivacyRefused, match="cannot be met for 1 tuples"):
        SerialTechnique(spec).partition(data, np.random.default_rng(0))


def test_count_estimates_from_the_published_regions():
    from privpub.tasks.evaluate.workload import CountQuery, RangeCond, SetCond

    frame = pd.DataFrame(
        {
            "pid": range(8),
            "age": [30, 32, 34, 36, 50, 52, 54, 56],
            "sex": ["M", "F", "M", "F", "M", "M", "F", "F"],
            "dis": list("abbbabbb"),
        }
    )
    spec = make_spec(strategy="geometric", transient=["a"])  # ratio 4: two groups of 4
    ((release, _),) = publish_series(spec, [frame])[0]
    tech = SerialTechnique(spec)
    table = release.tables["table"].to_pandas()
    everything = CountQuery((("age", RangeCond(0, 100)), ("sex", SetCond(frozenset("MF")))), "b")
    assert tech.estimate_counts(release, [everything])[0] == pytest.approx(6)
    # expected count under uniformity, computed row by row from the published regions
    query = CountQuery((("age", RangeCond(31, 51)), ("sex", SetCond(frozenset("M")))), "a")
    expected = 0.0
    for row in table[table["dis"] == "a"].itertuples():
        width = row.age_hi - row.age_lo
        overlap = max(0.0, min(row.age_hi, 51) - max(row.age_lo, 31)) / width
        expected += overlap * sum(v == "M" for v in row.sex) / len(row.sex)
    assert 0 < expected < 2
    assert tech.estimate_counts(release, [query])[0] == pytest.approx(expected)

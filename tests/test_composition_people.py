"""The series composition check under `[dataset] rows_per_person = "many"` (docs/series.md,
"Several rows per person"): each person composed once per release, the figures counting people.

- A series of Anatomy releases of a table with several rows per person, published through
  `privpub.publish`, against the brute-force linker of tests/composition_linker.py: it reads each
  release's QIT and ST back from the release folder and, per PERSON (their QIT rows, all in one
  group), enumerates the matchings across releases. The figure, the people below, the people,
  the returning people and the worst row's person agree; `privpub verify`'s replay and `privpub
  series change` agree with the publish.
- The k figure (people who can be the person: Sets.identity with the groups' excess) against a
  direct count over people on drawn series: never above it, exact in a person's first release.
- A returning person whose permanent values change is refused; transient values may change;
  `privpub series change` checks the value sets of the stored releases the same way.
- `[series] keep_groups` keeps each person whole; a person split over two groups is stopped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

import privpub
from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.compose.algebra import GroupCounts, Sets, compose
from privpub.tasks.compose.check import SeriesCheck
from privpub.tasks.compose.rebuild import replay
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.techniques.anatomy import technique as anatomy
from privpub.tasks.techniques.anatomy.technique import Anatomy
from tests import composition_linker as cl

PERMANENT = list("abcdefghij")
TRANSIENT = ["w", "x", "y", "z"]
QI = [{"name": "age", "kind": "numeric"}, {"name": "zip", "kind": "categorical"}]
NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]  # each example publishes a series


def draw_series(seed: int, releases: int) -> list[pd.DataFrame]:
    """A pool of 12-30 people with an age of their own; each release a share of them. A person
    keeps a set of 0-2 permanent values, each on 1-2 rows, and gets 0-2 rows of transient values
    drawn anew each release (at least one row in all; a person with permanent values gets a
    transient row in one release of two)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(12, 31))
    ages = 20 + rng.permutation(3 * n)[:n]
    zips = rng.choice(["A", "B", "C"], n)
    kept = [list(rng.choice(PERMANENT, int(rng.integers(0, 3)), replace=False)) for _ in range(n)]
    out = []
    for _ in range(releases):
        present = np.sort(rng.permutation(n)[: max(8, int(n * rng.uniform(0.6, 1.0)))])
        rows = []
        for p in present:
            values = [v for v in kept[p] for _ in range(int(rng.integers(1, 3)))]
            extra = int(rng.integers(0, 2)) if kept[p] else int(rng.integers(1, 3))
            values += list(rng.choice(TRANSIENT, extra))
            rows += [(f"person-{p:03d}", ages[p], zips[p], v) for v in values]
        frame = pd.DataFrame(rows, columns=["pid", "age", "zip", "v"])
        out.append(frame.iloc[rng.permutation(len(frame))].reset_index(drop=True))
    return out


def spec_of(folder: Path, l: int) -> dict:
    return {
        "dataset": {"name": "s", "person_id": "pid", "rows_per_person": "many", "sensitive": "v", "qi": QI},
        "technique": {"name": "anatomy", "l": l},
        "output": {"dir": str(folder / "releases"), "state": str(folder / "state.duckdb"), "seed": 3},
        "series": {"composition": "warn", "transient": TRANSIENT},
    }


def eligible(frame: pd.DataFrame, l: int) -> bool:
    holders = frame.drop_duplicates(["pid", "v"]).v.value_counts()
    return bool(holders.max() * l <= frame.pid.nunique())


def composition_metric(state: Path, release_id: str):
    m = Store(state).release(release_id)["metrics"]
    (row,) = m[m.name.str.startswith("series-composition")].itertuples()
    return int(row.value), int(row.threshold), bool(row.passed), json.loads(row.detail)


def publish_and_link(folder: Path, releases: list[pd.DataFrame], l: int) -> list:
    """Publish the series; per release after the first: (the stored figure, the linker's figure
    per person of that release, the people who returned)."""
    spec = spec_of(folder, l)
    seen: dict[str, dict[int, list]] = {}
    out = []
    for number, frame in enumerate(releases, start=1):
        release = privpub.publish(frame, spec)
        tables = {p.stem: pd.read_parquet(p) for p in (folder / "releases" / release.id).glob("*.parquet")}
        qit = tables["QIT"]
        assert len(qit) == len(frame) and "pid" not in qit.columns
        figures, returning = {}, set()
        for pid, rows in frame.groupby("pid"):
            qi = {"age": int(rows.age.iloc[0]), "zip": str(rows.zip.iloc[0])}
            here = qit[(qit.age == qi["age"]) & (qit.zip == qi["zip"])]
            assert len(here) == len(rows) and here.gid.nunique() == 1  # the person's rows, in one group
            if pid in seen:
                returning.add(pid)
            seen.setdefault(pid, {})[number] = cl.anatomy_records(tables, qi, "v")
            links = cl.link(seen[pid], set(TRANSIENT))
            figures[pid] = min(len(values) for values, _ in links.values())
        if number > 1:
            out.append((release.id, composition_metric(folder / "state.duckdb", release.id), figures, returning, frame))
    return out


# Each example publishes a series of 2-3 releases through privpub.publish (1-3 s): `make test`
# draws PEOPLE_EXAMPLES, `make test-slow` (marker `slow`) PEOPLE_FULL_SWEEP. What else checks the
# people counted in `make test`: the returning person refused on a changed permanent value, the k
# figure against people (200 hypothesis examples, in process) and its replay; both SERIES_PEOPLE
# mutants are killed without the full sweep (docs/testing.md).
PEOPLE_EXAMPLES, PEOPLE_FULL_SWEEP = 6, 12
PEOPLE_DRAW = dict(seed=st.integers(0, 2**32 - 1), n_releases=st.integers(2, 3), l=st.sampled_from([2, 3]))


@settings(max_examples=PEOPLE_EXAMPLES, phases=NO_SHRINK, deadline=None)
@given(**PEOPLE_DRAW)
def test_composed_figures_count_people_as_the_linker_does(tmp_path_factory, seed, n_releases, l):
    check_people_against_the_linker(tmp_path_factory, seed, n_releases, l)


@pytest.mark.slow
@settings(max_examples=PEOPLE_FULL_SWEEP, phases=NO_SHRINK, deadline=None)
@given(**PEOPLE_DRAW)
def test_composed_figures_count_people_as_the_linker_does_full_sweep(tmp_path_factory, seed, n_releases, l):
    check_people_against_the_linker(tmp_path_factory, seed, n_releases, l)


def check_people_against_the_linker(tmp_path_factory, seed: int, n_releases: int, l: int) -> None:
    releases = draw_series(seed, n_releases)
    assume(all(eligible(f, l) for f in releases))
    folder = tmp_path_factory.mktemp("many")
    results = publish_and_link(folder, releases, l)
    for number, (_, (value, required, passed, worst), figures, returning, frame) in enumerate(results, start=2):
        assert required == l and worst["releases"] == number
        assert worst["people"] == frame.pid.nunique() == len(figures)  # people, not rows
        assert worst["returning"] == len(returning)
        assert value == min(figures.values())
        assert worst["below"] == sum(f < l for f in figures.values())
        assert figures[frame.pid[worst["row"] - 1]] == value  # the worst row is a person the linker narrows as far
        assert passed == (worst["below"] == 0)
    # privpub verify replays the people from the stored groups: the same figure and count
    release_id, (value, _, _, worst), *_ = results[-1]
    (line,) = [x for x in privpub.verify(release_id, folder / "state.duckdb").attrs["lines"] if "composition" in x]
    assert f"series-composition-l: {value} (required {l}), {worst['below']} people below" in line, line
    # privpub series change rebuilds the same summaries and checks every person of the series once
    change = privpub.change_series(spec_of(folder, l), state=folder / "state.duckdb")
    after_first = {pid for *_, frame in results for pid in frame.pid} | set()
    assert change.people == len(after_first) and change.who == "people"
    everyone = {}
    for _, _, figures, _, _ in results:
        everyone.update(figures)  # a person's figure never grows: their latest counts
    assert change.value == min(everyone.values())
    assert change.below == sum(f < l for f in everyone.values())


def test_a_returning_person_whose_permanent_values_change_is_refused(tmp_path):
    """A person with rows a, a, x returns with a, b: their permanent values {a} became {a, b}:
    refused before any work, naming a row and counting people; with b named transient, or with
    only the transient value changing (x to y), it publishes."""
    base = [("p0", 30, "A", "a"), ("p0", 30, "A", "a"), ("p0", 30, "A", "x")]
    others = [(f"q{i}", 40 + i, "B", v) for i, v in enumerate("cdefgh")]
    one = pd.DataFrame(base + others, columns=["pid", "age", "zip", "v"])
    spec = spec_of(tmp_path, 2)
    privpub.publish(one, spec)
    changed = pd.DataFrame([("p0", 30, "A", "a"), ("p0", 30, "A", "b")] + others, columns=one.columns)
    with pytest.raises(InputError, match=r"this person's values differ .* \(1 person\)"):
        privpub.publish(changed, spec)
    transient_only = pd.DataFrame([("p0", 30, "A", "a"), ("p0", 30, "A", "y")] + others, columns=one.columns)
    release = privpub.publish(transient_only, spec)
    m = Store(tmp_path / "state.duckdb").release(release.id)["metrics"]
    detail = json.loads(m[m.name == "series-composition-l"].detail.iloc[0])
    assert (detail["people"], detail["returning"]) == (7, 7)


# --- the k figure in people: a lower bound, exact in a person's first release -----------------


@settings(max_examples=200, deadline=None)
@given(
    people=st.lists(  # per person: permanent values (a set) and per release (group or absent, transient values)
        st.tuples(
            st.sets(st.sampled_from("abc"), max_size=2),
            st.lists(st.tuples(st.integers(-1, 2), st.sets(st.sampled_from("xy"), max_size=2)), min_size=3, max_size=3),
        ),
        min_size=1,
        max_size=8,
    ),
    releases=st.integers(1, 3),
)
def test_k_figure_is_a_lower_bound_on_people(people, releases):
    """Releases of groups of people, each person holding a fixed set of permanent values and
    per release a set of transient ones (a person with none is left out of that release). By
    definition, in release r the people who can be the target are those of its group holding a
    value it cannot be told not to hold: a permanent value held in every one of its groups, or a
    transient value of the group if every one of its groups held one. The check's k figure
    (Sets.identity over (person, value) pairs with the groups' excess) is at most the fewest such
    people over the target's releases, and exactly its group's people in its first release."""
    values = ["a", "b", "c", "x", "y"]
    transient = np.array([False, False, False, True, True])
    sets, set_of = Sets.empty(True), np.full(len(people), -1, np.int64)
    history: dict[int, list[int]] = {}  # person -> the releases they are in
    holds = {}  # (release, person) -> their values there
    group_of = {}
    for r in range(releases):
        entries = []
        for p, (perm, per_release) in enumerate(people):
            g, trans = per_release[r]
            if g < 0 or not (perm | trans):
                continue
            holds[(r, p)], group_of[(r, p)] = perm | trans, g
            history.setdefault(p, []).append(r)
            entries += [(p, g, values.index(v)) for v in sorted(perm | trans)]
        if not entries:
            continue
        person, group, code = (np.array(x, np.int64) for x in zip(*entries))
        counts = GroupCounts.of(group, code, 3, transient, person)
        new, row_set = compose(sets, set_of[person], group, counts, ~transient)
        set_of[person] = row_set + sets.size
        sets = Sets(
            np.concatenate([sets.ptr, new.ptr[1:] + sets.ptr[-1]]),
            np.concatenate([sets.value, new.value]),
            np.concatenate([sets.minc, new.minc]),
            np.concatenate([sets.min_t, new.min_t]),
            np.concatenate([sets.min_tc, new.min_tc]),
            np.concatenate([sets.excess(), new.excess()]),
        )
        figure = sets.identity()
        for p in set(person.tolist()):
            mine = history[p]
            groups = [[q for (rr, q), g in group_of.items() if rr == s and g == group_of[(s, p)]] for s in mine]
            held = [set().union(*(holds[(s, q)] for q in qs)) for s, qs in zip(mine, groups)]
            perm = set.intersection(*[{v for v in h if v in "abc"} for h in held])
            all_transient = all(any(v in "xy" for v in h) for h in held)
            can_be = [
                sum(
                    bool(holds[(s, q)] & (perm | ({v for v in h if v in "xy"} if all_transient else set()))) for q in qs
                )
                for s, qs, h in zip(mine, groups, held)
            ]
            assert figure[set_of[p]] <= min(can_be), (p, mine, can_be)
            if len(mine) == 1:
                assert figure[set_of[p]] == len(groups[0])


def test_replayed_k_figure_counts_people(tmp_path):
    """`privpub verify`'s replay of the k figure reads one membership row per (person, value) and
    each group's excess: with nobody returning, every person's figure is exact, the people of their
    group (recounted from QIT: a person's rows share their QIs); counting (person, value) pairs, or
    rows, would give more."""
    first, second = draw_series(11, 1)[0], draw_series(12, 1)[0]
    second = second.assign(pid="new-" + second.pid, age=second.age + 200)  # other people
    results = publish_and_link(tmp_path, [first, second], 2)
    release_id = results[0][0]
    qit = pd.read_parquet(tmp_path / "releases" / release_id / "QIT.parquet")
    people = qit.drop_duplicates(["age", "zip"]).groupby("gid").size()
    pairs = second.drop_duplicates(["pid", "v"]).groupby("pid").size()
    assert (pairs > 1).any() and len(second) > second.pid.nunique()  # several values and rows per person
    fewest, below, replayed = replay(Store(tmp_path / "state.duckdb"), "s", 2, False, int(people.min()) + 1)
    assert (fewest, replayed) == (people.min(), 2)
    assert below == people[people == people.min()].sum()  # the people of the smallest groups


def test_series_change_checks_each_persons_value_set(tmp_path):
    """`privpub series change` re-checks the value model over the stored (person, value) rows: p0
    holds a and x, then a and y. With x and y transient the series is fine; a list without y makes
    y permanent, so p0's permanent values went from {a} to {a, y}: the change is refused, naming
    the release; with a transient too, p0 has no permanent value either time, and it passes."""
    others = [(f"q{i}", 40 + i, "B", v) for i, v in enumerate("cdefgh")]
    columns = ["pid", "age", "zip", "v"]
    one = pd.DataFrame([("p0", 30, "A", "a"), ("p0", 30, "A", "x"), ("p0", 30, "A", "a")] + others, columns=columns)
    two = pd.DataFrame([("p0", 30, "A", "a"), ("p0", 30, "A", "y")] + others, columns=columns)
    spec = spec_of(tmp_path, 2)
    spec["series"]["transient"] = ["x", "y"]
    for frame in (one, two):
        privpub.publish(frame, spec)
    narrower = {**spec, "series": {**spec["series"], "transient": ["x"]}}
    with pytest.raises(SpecError, match=r"1 times, in releases #2"):
        privpub.change_series(narrower, state=tmp_path / "state.duckdb")
    wider = {**spec, "series": {**spec["series"], "transient": ["a", "x", "y"]}}
    change = privpub.change_series(wider, state=tmp_path / "state.duckdb")
    assert (change.transient_before, change.transient_after, change.people) == (2, 3, 7)


def test_keep_groups_keeps_each_person_whole(tmp_path, monkeypatch):
    """[series] keep_groups under "many": a returning person's cohort is on all their rows, the
    cohorts are held to the series' l in people, and the kept grouping passes the check. (Anatomy
    is made to accept kept groups for this: its anonymize takes any grouping.)"""
    monkeypatch.setattr(Anatomy, "capabilities", replace(Anatomy.capabilities, accepts_kept_groups=True))
    releases = draw_series(5, 2)
    spec = spec_of(tmp_path, 2)
    spec["series"]["keep_groups"] = True
    privpub.publish(releases[0], spec)
    checked = spec_from_dict({**spec, "dataset": {**spec["dataset"], "input": "x.csv"}})
    data = Microdata.from_frame(checked, releases[1])
    technique = Anatomy(checked)
    check = SeriesCheck(checked, technique)
    check.prepare(Store(tmp_path / "state.duckdb"), data)
    own = technique.partition(data, np.random.default_rng(0))
    kept = check.keep_groups(data, own)
    frame = releases[1].assign(g=kept.group)
    assert (frame.groupby("pid").g.nunique() == 1).all()  # each person whole
    assert kept.info["returning"] == len(set(releases[0].pid) & set(releases[1].pid))  # people, not rows
    (result,) = check.check(data, kept.group, kept.n_groups)
    assert result.passed and result.worst["below"] == 0
    assert (frame.drop_duplicates(["pid", "v"]).groupby("g").v.nunique() >= 2).all()


def test_a_person_split_over_groups_is_not_composed(tmp_path, monkeypatch):
    """The model needs each person in one group of a release: a technique that splits a person's
    rows over two groups is stopped by the check instead of being composed as one of them."""
    frame = draw_series(2, 1)[0]
    monkeypatch.setattr(anatomy, "anatomy_people_groups", lambda person, *_: np.arange(len(person)) % 2)
    monkeypatch.setattr(anatomy.Anatomy, "verify", lambda self, release, context: [])
    with pytest.raises(ValueError, match="put a person's rows in several groups"):
        privpub.publish(frame, spec_of(tmp_path, 2))

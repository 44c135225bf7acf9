"""Anatomy under `[dataset] rows_per_person = "many"` (docs/models.md, "Several rows per person"):
groups of people, each value held by at most 1/l of a group's people, ST counting people.

Checked against the input and against direct counts from the definitions, sharing no code with
the technique: a table of 600 people with 1 to 5 rows each, published through `privpub.publish`,
recounted from the input (every person's rows in one QIT group, ST's counts the people holding
each value, the 1/l bound over people); the verifier's figures against a brute-force count on
small drawn releases; hand-built releases just inside and just outside l where rows would pass
and people fail; eligibility counted in people; no person id in any published file."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import privpub
from privpub.schemas.errors import InputError, PrivacyRefused
from privpub.state.store import Store
from privpub.tasks.core.types import Release
from privpub.tasks.techniques.anatomy import technique as anatomy
from privpub.tasks.techniques.anatomy.technique import verify_anatomy

QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "gender", "kind": "categorical"},
    {"name": "zip", "kind": "categorical"},
]
DIAGNOSES = [f"D{i:02d}" for i in range(12)]


def people_table(people: int = 600, seed: int = 0, values: list[str] = DIAGNOSES) -> pd.DataFrame:
    """`people` people with 1 to 5 rows each (tests, visits), rows shuffled. Each person's (age,
    gender, zip) is theirs alone (ages 20-79 x 2 genders x 5 zips = 600 combinations), so a QIT
    row names its person for the recount; a person's diagnoses are drawn per row."""
    rng = np.random.default_rng(seed)
    combos = rng.permutation(600)[:people]
    rows = rng.integers(1, 6, people)
    person = np.repeat(np.arange(people), rows)
    frame = pd.DataFrame(
        {
            "pid": [f"PATIENT-{p:05d}-X" for p in person],
            "age": 20 + (combos // 10)[person],
            "gender": np.array(["F", "M"])[(combos // 5) % 2][person],
            "zip": np.array(list("ABCDE"))[combos % 5][person],
            "diagnosis": rng.choice(values, len(person)),
        }
    )
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


def spec_of(folder: Path, l: int = 3, **series) -> dict:
    return {
        "dataset": {
            "name": "visits",
            "person_id": "pid",
            "rows_per_person": "many",
            "sensitive": "diagnosis",
            "qi": QI,
        },
        "technique": {"name": "anatomy", "l": l},
        "output": {"dir": str(folder / "releases"), "state": str(folder / "state.duckdb"), "seed": 7},
        **({"series": series} if series else {}),
    }


def published(folder: Path, release_id: str) -> dict[str, pd.DataFrame]:
    return {p.stem: pd.read_parquet(p) for p in sorted((folder / "releases" / release_id).glob("*.parquet"))}


# --- a publish recounted from the input --------------------------------------------------------


@pytest.mark.parametrize("l", [2, 3])
def test_every_group_is_l_diverse_in_people_recounted_from_the_input(tmp_path, l):
    """From the input and the published files only: every person's rows are in one QIT group,
    ST counts the group's people holding each value (not rows), and in every group each value is
    held by at most 1/l of its people; the release's own figures are those counts."""
    frame = people_table()
    release = privpub.publish(frame, spec_of(tmp_path, l))
    tables = published(tmp_path, release.id)
    qit, st_ = tables["QIT"], tables["ST"]
    assert len(qit) == len(frame) and set(qit.columns) == {"age", "gender", "zip", "gid"}

    who = frame.groupby(["age", "gender", "zip"])["pid"].agg(lambda s: set(s))
    assert (who.map(len) == 1).all()  # the QIs name a person, for this recount
    qit = qit.assign(pid=[next(iter(who[key])) for key in zip(qit.age, qit.gender, qit.zip)])
    group_of = qit.groupby("pid")["gid"].agg(set)
    assert (group_of.map(len) == 1).all()  # every person's rows in one group
    group_of = group_of.map(lambda s: next(iter(s)))
    assert (qit.groupby("pid").size() == frame.groupby("pid").size().reindex(group_of.index)).all()

    holding = frame.drop_duplicates(["pid", "diagnosis"]).assign(gid=lambda f: f.pid.map(group_of))
    people_in = group_of.value_counts()
    recount = holding.groupby(["gid", "diagnosis"]).size()
    shown = st_.set_index(["gid", "diagnosis"])["count"]
    assert shown.sort_index().to_dict() == recount.sort_index().to_dict()  # ST counts people
    assert st_.groupby("gid")["count"].sum().ne(qit.groupby("gid").size()).any()  # ... not rows
    share = recount / people_in.reindex(recount.index.get_level_values("gid")).to_numpy()
    assert (share * l <= 1).all()
    assert (people_in >= l).all()

    figures = release.figures.set_index("name")
    assert figures.loc["attribute disclosure", "value"] == pytest.approx(float(share.max()))
    assert figures.loc["people per group", "value"] == people_in.min()
    assert figures.loc["l-diversity (distinct)", "value"] == recount.groupby("gid").size().min()
    assert figures[figures.kind == "privacy"].passed.all()
    people = Store(tmp_path / "state.duckdb").private(release.id)["people"]
    assert people.num_rows == len(qit) and people.column_names == ["person"]


def test_no_person_id_in_any_published_file(tmp_path):
    """The ids (PATIENT-...-X) are in no published file, nor in the report; the private person
    numbers are not published either (QIT has no person column)."""
    frame = people_table(seed=3)
    release = privpub.publish(frame, spec_of(tmp_path))
    folder = tmp_path / "releases" / release.id
    texts = [p.read_bytes() for p in folder.iterdir() if p.is_file()]
    assert texts and not any(b"PATIENT-" in t for t in texts)
    for table in published(tmp_path, release.id).values():
        assert not {"pid", "person"} & set(table.columns)


def test_eligibility_is_counted_in_people(tmp_path):
    """A value on a third of the rows but held by more than half of the people cannot be
    anatomized with l = 2 (one line naming people); a value on most rows held by few people can."""
    common = pd.DataFrame(  # 6 of 10 people hold "flu", on one row each; 4 people have 5 rows of other values
        {
            "pid": [f"p{i}" for i in range(6)] + [f"q{i}" for i in range(4) for _ in range(5)],
            "age": list(range(6)) + [10 + i for i in range(4) for _ in range(5)],
            "gender": ["F"] * 26,
            "zip": ["A"] * 26,
            "diagnosis": ["flu"] * 6 + [f"v{i}{j}" for i in range(4) for j in range(5)],
        }
    )
    with pytest.raises(InputError, match=r"not 2-eligible: a sensitive value is held by 6 of 10 people"):
        privpub.publish(common, spec_of(tmp_path, 2))
    many_rows = common.assign(diagnosis=["x", "y", "z", "x", "y", "z"] + ["flu"] * 20)  # flu: 20 of 26 rows, 4 people
    release = privpub.publish(many_rows, spec_of(tmp_path, 2))
    assert release.figures.set_index("name").loc["attribute disclosure", "value"] <= 0.5


# --- the verifier against a direct count ---------------------------------------------------------


def release_of(groups: list[list[list[str]]], seed: int, tamper: tuple[int, int] | None = None) -> Release:
    """A published release: each group a list of people, each person a list of their rows'
    values. QIT (a row per record, shuffled) with the private person number of each row; ST (a
    row per (group, value): the people holding it), `tamper` = (ST row, +1) raising one count."""
    rng = np.random.default_rng(seed)
    records = [
        (3 * g + 2, 100 * g + p, v) for g, people in enumerate(groups) for p, vs in enumerate(people) for v in vs
    ]
    held = sorted({(gid, v, person) for gid, person, v in records})
    counts: dict[tuple[int, str], int] = {}
    for gid, v, _ in held:
        counts[(gid, v)] = counts.get((gid, v), 0) + 1
    rows = sorted(counts.items())
    if tamper is not None:
        i = tamper[0] % len(rows)
        rows[i] = (rows[i][0], rows[i][1] + tamper[1])
    order = rng.permutation(len(records))
    qit = pa.table({"age": [20 + i for i in range(len(records))], "gid": [records[i][0] for i in order]})
    st_ = pa.table({"gid": [k[0] for k, _ in rows], "s": [k[1] for k, _ in rows], "count": [c for _, c in rows]}).take(
        pa.array(rng.permutation(len(rows)))
    )
    people = pa.table({"person": pa.array([records[i][1] for i in order], pa.int64())})
    return Release({"QIT": qit, "ST": st_}, {"people": people})


PEOPLE_GROUPS = st.lists(  # groups of 1-5 people of 1-4 rows each
    st.lists(st.lists(st.sampled_from("abcde"), min_size=1, max_size=4), min_size=1, max_size=5),
    min_size=1,
    max_size=5,
)


@settings(max_examples=120, deadline=None)
@given(PEOPLE_GROUPS, st.integers(2, 4), st.integers(1, 30), st.integers(0, 10**6), st.none() | st.integers(0, 40))
@example([[["a", "a", "a"], ["b"]], [["a"], ["b"], ["c"]]], 2, 3, 0, None)  # rows 3/4 a, people 1/2: inside
@example([[["a"], ["a", "b"], ["c", "c", "c", "c"]]], 2, 2, 0, None)  # rows 2/7 a, people 2/3: outside
def test_verifier_figures_equal_a_direct_count_over_people(groups, l, chunk_rows, seed, tamper):
    """Per group, by the definitions: its people (distinct person numbers of its QIT rows); ST's
    distinct values; the largest ST count over its people; ST agreeing with it (the same groups,
    no count above its people, counts adding up to at least its people). Every group must pass
    (>= l values, share <= 1/l, >= l people), whatever the chunks; untampered, the share is the
    true share of people holding one value."""
    release = release_of(groups, seed, None if tamper is None else (tamper, 1))
    gid = release.tables["QIT"].column("gid").to_pylist()
    person = release.private["people"].column("person").to_pylist()
    st_rows = release.tables["ST"].to_pylist()
    people = {g: len({p for g2, p in zip(gid, person) if g2 == g}) for g in set(gid)}
    counts = {g: [r["count"] for r in st_rows if r["gid"] == g] for g in people}
    share = {g: Fraction(max(c), people[g]) for g, c in counts.items()}
    agree = all(max(c) <= people[g] <= sum(c) for g, c in counts.items())
    worst = max(share.values())

    res = {r.model: r for r in verify_anatomy(release, "s", l, chunk_rows)}
    assert res["QIT and ST agree on group sizes"].passed is agree
    distinct = min(len(c) for c in counts.values())
    assert (res["l-diversity (distinct)"].value, res["l-diversity (distinct)"].passed) == (distinct, distinct >= l)
    disclosure = res["attribute disclosure"]
    assert (Fraction(disclosure.value), disclosure.passed) == (worst, worst * l <= 1)
    assert disclosure.worst["gid"] == min(g for g in share if share[g] == worst)
    assert disclosure.worst["group_people"] == people[disclosure.worst["gid"]]
    fewest = res["people per group"]
    assert (fewest.value, fewest.passed) == (min(people.values()), min(people.values()) >= l)
    if tamper is None:  # the truth, from the people's own values
        truth = max(
            Fraction(sum(v in vs for vs in members), len(members))
            for members in groups
            for v in {v for vs in members for v in vs}
        )
        assert Fraction(disclosure.value) == truth and agree


def hand_built(extra_person: bool) -> Release:
    """One group, l = 2: A has three rows (b, c, d), B and C one row of a each. Counted in rows,
    a is 2 of 5 records (2/5 <= 1/2: passes); counted in people, 2 of 3 people hold a (above 1/2).
    `extra_person` adds D with one row of e: 2 of 4 people, exactly 1/2 (just inside)."""
    people = [["b", "c", "d"], ["a"], ["a"]] + ([["e"]] if extra_person else [])
    return release_of([people], 0)


@pytest.mark.parametrize("inside", [True, False], ids=["2-of-4-people", "2-of-3-people"])
def test_a_release_just_inside_or_outside_l_in_people(inside):
    res = {r.model: r for r in verify_anatomy(hand_built(inside), "s", 2)}
    assert res["attribute disclosure"].value == ("1/2" if inside else "2/3")
    assert res["attribute disclosure"].passed is inside
    assert res["QIT and ST agree on group sizes"].passed
    # the same ST read as rows (no private people table) would pass: 2 of 5 records
    rows_only = Release(hand_built(inside).tables, {})
    st_rows = pa.table({"gid": [2] * 4, "s": list("abcd"), "count": [2, 1, 1, 1]})
    if not inside:
        by_rows = {
            r.model: r for r in verify_anatomy(Release({"QIT": rows_only.tables["QIT"], "ST": st_rows}, {}), "s", 2)
        }
        assert by_rows["attribute disclosure"].value == "2/5" and by_rows["attribute disclosure"].passed


@pytest.mark.parametrize("inside", [True, False], ids=["2-of-4-people", "2-of-3-people"])
def test_a_publish_whose_groups_break_l_in_people_is_refused(tmp_path, monkeypatch, inside):
    """The privacy gate reads the people-counted figure: the hand-built grouping above, forced on
    a publish (its groups replaced), is published at 2 of 4 people and refused at 2 of 3."""
    rows = [("A", 30, "b"), ("A", 30, "c"), ("A", 30, "d"), ("B", 31, "a"), ("C", 32, "a")]
    rows += [("D", 33, "e")] if inside else []
    frame = pd.DataFrame(rows, columns=["pid", "age", "diagnosis"]).assign(gender="F", zip="A")
    monkeypatch.setattr(anatomy, "anatomy_people_groups", lambda person, *_: np.zeros(len(person), np.int64))
    monkeypatch.setattr(anatomy.Anatomy, "check_data", lambda self, data: None)
    spec = spec_of(tmp_path, 2)
    if inside:
        release = privpub.publish(frame, spec)
        assert release.figures.set_index("name").loc["attribute disclosure", "value"] == 0.5
    else:
        with pytest.raises(PrivacyRefused, match="attribute disclosure"):
            privpub.publish(frame, spec)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=5), min_size=1, max_size=40),
    st.integers(2, 4),
    st.integers(0, 10**6),
)
def test_groups_of_people_keep_the_bound_whenever_eligible(rows, l, seed):
    """Drawn people (each a list of their rows' values): eligible (no value held by more than
    people / l people) -> every person's rows in one group and, in every group, each value held by
    at most 1/l of its people; not eligible -> refused."""
    person = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    codes = np.array([v for r in rows for v in r], np.int32)
    holders = pd.Series([v for r in rows for v in set(r)]).value_counts()
    if holders.max() * l > len(rows):
        with pytest.raises(anatomy.AnatomyError, match="people"):
            anatomy.anatomy_people_groups(person, codes, l, np.random.default_rng(seed))
        return
    group = anatomy.anatomy_people_groups(person, codes, l, np.random.default_rng(seed))
    frame = pd.DataFrame({"p": person, "g": group, "v": codes})
    assert (frame.groupby("p").g.nunique() == 1).all()
    people = frame.groupby("g").p.nunique()
    held = frame.drop_duplicates(["p", "v"]).groupby(["g", "v"]).size()
    assert (held * l <= people.reindex(held.index.get_level_values("g")).to_numpy()).all()

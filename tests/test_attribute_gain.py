"""Attribute disclosure as the gain over what everyone already knows (issue 39, item 3):
attribute-gain-max = max (p_g(v) - p(v)) / p(v) and attribute-difference-max = max p_g(v) - p(v),
counted over rows or over distinct people, against a direct count from the definition (Python
sets and Fractions, sharing no code with tasks/risk/__init__.py) on small random tables; basic
beta-likeness in the verifier and in Mondrian; the [risk] limits; and a rare value concentrated
in one group, named by the report's verdict and refused by `[risk] max_gain`."""

from __future__ import annotations

import html
import re
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import privpub
from privpub.schemas.errors import PrivacyRefused, SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.parted_table import PartedTable
from privpub.tasks.core.sensitive_models import ModelChoice
from privpub.tasks.core.types import Release
from privpub.tasks.risk import input_shares, over_limits, risk_settings, table_shares, value_shares
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.verify.sensitive import sensitive_results
from tests.helpers import release_of

# --- the definition, person by person --------------------------------------------------------------


def by_definition(groups: list, values: list, persons: list | None = None) -> dict:
    """Both figures and each value's (share, highest share in a group), from sets of people:
    a person is in g when one of their rows is; holds v (in g) when one of their rows (in g) has
    v; a withheld value (None) is nobody's. Without persons, row i is person i."""
    who = list(range(len(groups))) if persons is None else list(persons)
    everyone = set(who)
    holders: dict = {}
    members: dict = {}
    in_group: dict = {}
    for g, v, p in zip(groups, values, who):
        members.setdefault(g, set()).add(p)
        if v is not None:
            holders.setdefault(v, set()).add(p)
            in_group.setdefault((g, v), set()).add(p)
    share = {v: Fraction(len(ps), len(everyone)) for v, ps in holders.items()}
    highest = {v: max(Fraction(len(in_group.get((g, v), ())), len(members[g])) for g in members) for v in holders}
    gains = [(highest[v] - share[v]) / share[v] for v in holders]
    return {
        "gain": max(gains, default=Fraction(0)),
        "difference": max((highest[v] - share[v] for v in holders), default=Fraction(0)),
        "share": share,
        "highest": highest,
    }


def expect(figures: dict, oracle: dict) -> None:
    assert figures["attribute-gain-max"] == pytest.approx(float(oracle["gain"]), abs=1e-12)
    assert figures["attribute-difference-max"] == pytest.approx(float(oracle["difference"]), abs=1e-12)


def codes(values: list) -> tuple[np.ndarray, list]:
    labels = sorted({v for v in values if v is not None})
    return np.array([-1 if v is None else labels.index(v) for v in values], dtype=np.int64), labels


rows = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 4), min_size=n, max_size=n),  # group
        st.lists(st.one_of(st.sampled_from(["a", "b", "c", "d"]), st.none()), min_size=n, max_size=n),
        st.one_of(st.none(), st.lists(st.integers(0, 9), min_size=n, max_size=n)),  # person per row
    )
)


@settings(max_examples=250, deadline=None)
@example(([0, 0, 1, 1], ["a", "a", "a", "b"], [0, 0, 1, 2]))  # one person, two rows of a
@example(([0, 0, 1], ["a", None, "b"], None))  # a withheld value counts in its group only
@given(rows)
def test_both_figures_and_each_values_shares_equal_a_count_by_definition(case):
    groups, values, persons = case
    value, labels = codes(values)
    person = None if persons is None else np.array(persons, dtype=np.int64)
    shares = value_shares(np.array(groups), value, 5, len(labels), person=person)
    oracle = by_definition(groups, values, persons)
    expect(shares.figures(), oracle)
    for code, label in enumerate(labels):
        assert shares.share[code] == pytest.approx(float(oracle["share"][label]), abs=1e-12)
        assert shares.highest[code] == pytest.approx(float(oracle["highest"][label]), abs=1e-12)
    assert shares.people is (persons is not None)


def test_people_are_counted_once_per_group_and_value_not_per_row():
    """Person 0 has two rows of a in group 0, person 1 one row of b there; persons 2 and 3 one
    row each (a, b) in group 1. Over people every group is half a, half b, like everyone:
    no gain. Over rows group 1 is 1/2 b against 2/5 of all rows: a gain of 1/4 (group 0's a,
    2/3 against 3/5, only 1/9)."""
    group = np.array([0, 0, 0, 1, 1])
    value = np.array([0, 0, 1, 0, 1])
    person = np.array([0, 0, 1, 2, 3])
    by_people = value_shares(group, value, 2, 2, person=person)
    assert by_people.figures() == {"attribute-gain-max": 0.0, "attribute-difference-max": 0.0}
    assert by_people.total == 4 and by_people.share.tolist() == [0.5, 0.5]
    by_rows = value_shares(group, value, 2, 2)
    assert by_rows.figures()["attribute-gain-max"] == pytest.approx(1 / 4)
    assert by_rows.figures()["attribute-difference-max"] == pytest.approx(1 / 2 - 2 / 5)
    # a person with rows in two groups (the input's QI combinations) is a member of both
    spread = value_shares(np.array([0, 1, 1]), np.array([0, 0, 1]), 2, 2, person=np.array([0, 0, 1]))
    assert spread.size[0] == 1 and spread.highest[0] == 1.0  # group 0 holds person 0 only
    assert spread.figures()["attribute-gain-max"] == pytest.approx((1 - 1 / 2) / (1 / 2))


@settings(max_examples=120, deadline=None)
@given(rows)
def test_a_published_table_reads_its_cells_whole_and_its_people_from_the_release(case):
    """Groups are published cells (a list and a range); the people array of a release, aligned
    with its rows, makes the shares count people (release_attribute, as the risk step calls it)."""
    from privpub.tasks.risk.parted import release_attribute

    groups, values, persons = case
    table = pa.table(
        {
            "x": pa.array([["u", "w"][: 1 + g % 2] for g in groups], pa.list_(pa.string())),
            "y_lo": pa.array([g // 2 for g in groups]),
            "y_hi": pa.array([g // 2 + 1 for g in groups]),
            "s": pa.array(values, pa.string()),
        }
    )
    person = None if persons is None else np.array(persons, dtype=np.int64)
    figures, summary = table_shares(table, ["x", "y_lo", "y_hi"], "s", person=person)
    oracle = by_definition(groups, values, persons)
    expect(figures, oracle)
    if summary is None:
        assert not oracle["share"]
        return
    worst = summary["worst"]
    assert worst["gain"] == pytest.approx(float(oracle["gain"]), abs=1e-12)
    assert worst["group_share"] == pytest.approx(float(oracle["highest"][worst["value"]]), abs=1e-12)
    assert summary["counts"] == ("rows" if persons is None else "people")
    assert {v["value"]: v["share"] for v in summary["values"]} == pytest.approx(
        {k: float(f) for k, f in oracle["share"].items()}
    )
    # the cells shown are the worst group's published cells: the value's share there is group_share
    shown = table.select(["x", "y_lo", "y_hi"]).to_pylist()
    (g,) = {groups[i] for i, cells in enumerate(shown) if cells == worst["group"]}
    alone = by_definition(
        [0 for a in groups if a == g],
        [b for a, b in zip(groups, values) if a == g],
        None if persons is None else [p for a, p in zip(groups, persons) if a == g],
    )
    assert worst["group_share"] == pytest.approx(float(alone["share"][worst["value"]]), abs=1e-12)
    # the same through the risk step's hook, the people kept private by the release
    spec = spec_from_dict(
        {
            "dataset": {"name": "t", "input": "x.csv", "person_id": "pid", "sensitive": "s", "qi": QI_XY},
            "technique": {"name": "generalization", "k": 1},
        }
    )
    private = {} if persons is None else {"people": pa.table({"person": pa.array(persons, pa.int64())})}
    got, _ = release_attribute(get_technique(spec), Release({"table": table}, private))
    expect(got, oracle)


QI_XY = [{"name": "x", "kind": "categorical"}, {"name": "y", "kind": "numeric"}]


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from("abc"), st.integers(1, 5)), min_size=1, max_size=12))
def test_a_count_table_counts_each_row_as_many_times(entries):
    """Anatomy's / Ambiguity's ST: a row (gid, value, count) stands for `count` rows."""
    st_table = pa.table(
        {"gid": [g for g, _, _ in entries], "s": [v for _, v, _ in entries], "count": [c for _, _, c in entries]}
    )
    figures, _ = table_shares(st_table, ["gid"], "s", "count")
    expanded = [(g, v) for g, v, c in entries for _ in range(c)]
    expect(figures, by_definition([g for g, _ in expanded], [v for _, v in expanded]))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sets(st.sampled_from("abc"), min_size=1)), min_size=1, max_size=12))
def test_a_count_table_of_people_counts_its_groups_people_in_the_row_table(people):
    """Several rows per person (Anatomy): each person in one group, holding one or more values;
    QIT has a row per record (its person number kept private), ST counts the people of a group
    holding each value. The people per group come from QIT, the holders from ST."""
    qit_gid, qit_person, record_values = [], [], []
    for p, (g, held) in enumerate(people):
        for v in sorted(held) * 2:  # two records per value: rows must not count
            qit_gid.append(g)
            qit_person.append(p)
            record_values.append(v)
    counts: dict = {}
    for g, held in people:
        for v in held:
            counts[(g, v)] = counts.get((g, v), 0) + 1
    st_table = pa.table({"gid": [g for g, _ in counts], "s": [v for _, v in counts], "count": list(counts.values())})
    qit = pa.table({"gid": qit_gid})
    figures, summary = table_shares(
        st_table, ["gid"], "s", "count", people_table=(qit, np.array(qit_person, dtype=np.int64))
    )
    expect(figures, by_definition(qit_gid, record_values, qit_person))
    assert summary is not None and summary["total"] == len(people)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_the_input_counts_its_qi_combinations_and_its_people(case):
    """The input's figures (`input-` names): groups are its distinct QI combinations; under
    rows_per_person = "many" a person with rows in several combinations is in each."""
    groups, values, persons = case
    frame = pd.DataFrame(
        {
            "pid": persons if persons is not None else range(len(groups)),
            "x": [f"q{g % 2}" for g in groups],
            "y": [g // 2 for g in groups],
            "s": [v if v is not None else "z" for v in values],  # the input has no withheld value
        }
    )
    many = persons is not None and len(set(persons)) < len(persons)
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "s",
                "qi": QI_XY,
                "rows_per_person": "many" if many else "one",
            },
            "technique": {"name": "generalization", "k": 1},
        }
    )
    figures, summary = input_shares(Microdata.from_frame(spec, frame))
    oracle = by_definition(groups, frame.s.tolist(), persons if many else None)
    assert figures["input-attribute-gain-max"] == pytest.approx(float(oracle["gain"]), abs=1e-12)
    assert figures["input-attribute-difference-max"] == pytest.approx(float(oracle["difference"]), abs=1e-12)
    assert summary is not None and "group" not in summary["worst"]  # the input's QI cells are never shown


def test_a_folder_of_parts_gives_the_same_figures_and_worst_case(tmp_path):
    rng = np.random.default_rng(4)
    n = 600
    age = rng.integers(0, 8, n) * 10
    table = pa.table(
        {
            "age_lo": age,
            "age_hi": age + 9,
            "sex": rng.choice(["f", "m"], n),
            "occupation": rng.choice(["a", "b", "c", "rare"], n, p=[0.5, 0.3, 0.18, 0.02]),
        }
    )
    folder = tmp_path / "table"
    folder.mkdir()
    for i, start in enumerate(range(0, n, 130)):
        pq.write_table(table.slice(start, 130), folder / f"part-{i:05d}.parquet")
    from privpub.tasks.risk.parted import parted_shares

    columns = ["age_lo", "age_hi", "sex"]
    whole = table_shares(table, columns, "occupation")
    parted = parted_shares(PartedTable(folder), columns, "occupation")
    assert parted[0] == whole[0]  # computed from the same whole counts
    assert parted[1] is not None and whole[1] is not None
    for key in ("value", "share", "group_share", "holding", "group_size", "gain"):
        assert parted[1]["worst"][key] == whole[1]["worst"][key], key
    assert parted[1]["values"] == whole[1]["values"]


# --- basic beta-likeness (Cao and Karras, VLDB 2012) --------------------------------------------------


def likeness_by_definition(classes: list[list]) -> Fraction:
    """The largest (p_g(v) - p(v)) / p(v) over classes and the values with p_g(v) > p(v), p the
    whole table's distribution (0 when no value is more frequent in a class than overall)."""
    everyone = [v for c in classes for v in c]
    best = Fraction(0)
    for c in classes:
        for v in set(c):
            p, q = Fraction(c.count(v), len(c)), Fraction(everyone.count(v), len(everyone))
            if p > q:
                best = max(best, (p - q) / q)
    return best


def class_table(classes: list[list]) -> pa.Table:
    lo = [10 * i for i, c in enumerate(classes) for _ in c]
    return pa.table({"age_lo": lo, "age_hi": [x + 9 for x in lo], "s": [v for c in classes for v in c]})


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcd"), min_size=1, max_size=8), min_size=1, max_size=6),
    st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0]),
)
def test_the_beta_likeness_figure_equals_a_count_by_definition(classes, beta):
    (res,) = sensitive_results(class_table(classes), ["age_lo", "age_hi"], "s", ModelChoice(beta=beta))
    exact = likeness_by_definition(classes)
    assert res.model == "beta-likeness" and res.threshold == beta
    assert res.value == pytest.approx(float(exact), abs=1e-12) and res.passed == (exact <= Fraction(beta))
    worst = classes[res.worst["class"]["age_lo"] // 10]
    everyone = [v for c in classes for v in c]
    assert any(  # the worst class and the shares the result names are those of a value with that gain
        res.worst["class_share"] == pytest.approx(worst.count(v) / len(worst))
        and res.worst["table_share"] == pytest.approx(everyone.count(v) / len(everyone))
        for v in set(worst)
    )


def beta_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "pid": np.arange(n),
            "age": rng.integers(18, 80, n),
            "zip": rng.integers(0, 300, n),
            "s": rng.choice(["common", "usual", "odd", "rare"], n, p=[0.55, 0.3, 0.12, 0.03]),
        }
    )


def beta_technique(params: dict):
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "s",
                "qi": [{"name": "age", "kind": "numeric"}, {"name": "zip", "kind": "numeric"}],
            },
            "technique": {"name": "generalization", **params},
        }
    )
    return spec, get_technique(spec)


@pytest.mark.parametrize("beta", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_mondrian_splits_only_where_every_child_meets_beta(beta, seed):
    """Every published class meets beta, counted class by class from the published table; the
    partition is still fine-grained (beta restricts splits, it does not stop them)."""
    frame = beta_frame(1500, seed)
    spec, tech = beta_technique({"k": 3, "beta": beta})
    part, release = release_of(tech, Microdata.from_frame(spec, frame))
    table = release.tables["table"].to_pandas()
    classes = [g.s.tolist() for _, g in table.groupby(["age_lo", "age_hi", "zip_lo", "zip_hi"])]
    assert likeness_by_definition(classes) <= Fraction(beta)
    assert part.n_groups >= 10
    (res,) = [r for r in tech.verify(release, {}) if r.model == "beta-likeness"]
    assert res.passed and res.value == pytest.approx(float(likeness_by_definition(classes)), abs=1e-12)
    # without beta the same data gives classes beta would refuse: the model is what holds them
    _, free = release_of(beta_technique({"k": 3})[1], Microdata.from_frame(spec, frame))
    loose = free.tables["table"].to_pandas()
    assert likeness_by_definition(
        [g.s.tolist() for _, g in loose.groupby(["age_lo", "age_hi", "zip_lo", "zip_hi"])]
    ) > Fraction(beta)


@pytest.mark.parametrize(
    "value, message",
    [
        (0, r"beta must be a number > 0"),
        (-1.0, r"beta must be a number > 0"),
        ("2", r"beta must be a number > 0"),
        (True, r"beta must be a number > 0"),
        (float("inf"), r"beta"),
        (float("nan"), r"beta"),
    ],
)
def test_beta_is_strict(value, message):
    with pytest.raises(SpecError, match=message) as err:
        beta_technique({"k": 2, "beta": value})
    assert "\n" not in str(err.value) and "[technique]" in str(err.value)


def test_beta_is_refused_on_dask_before_any_work():
    spec = {
        "dataset": {
            "name": "t",
            "input": "x.parquet",
            "person_id": "pid",
            "sensitive": "s",
            "qi": [{"name": "age", "kind": "numeric"}],
        },
        "technique": {"name": "generalization", "k": 2, "beta": 1.0},
        "run": {"task_runner": "dask"},
    }
    with pytest.raises(SpecError, match=r"beta run in memory only: \[run\] task_runner = \"dask\""):
        get_technique(spec_from_dict(spec))


# --- [risk] max_gain and max_difference ------------------------------------------------------------


def risk_spec(section: dict):
    return spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "s",
                "qi": [{"name": "age", "kind": "numeric"}],
            },
            "technique": {"name": "generalization", "k": 2},
            "risk": section,
        }
    )


@pytest.mark.parametrize(
    "section, message",
    [
        ({"max_gain": 0}, r"^\[risk\] max_gain = 0: must be a finite number above 0$"),
        ({"max_gain": -2.5}, r"^\[risk\] max_gain = -2.5: must be a finite number above 0$"),
        ({"max_gain": "3"}, r"^\[risk\] max_gain = '3': must be a finite number above 0$"),
        ({"max_gain": True}, r"^\[risk\] max_gain = True: must be a finite number above 0$"),
        ({"max_difference": 0}, r"^\[risk\] max_difference = 0: must be a number above 0 and at most 1$"),
        ({"max_difference": 1.5}, r"^\[risk\] max_difference = 1.5: must be a number above 0 and at most 1$"),
        ({"max_gian": 2}, r"^\[risk\] max_gian: unknown key; did you mean max_gain\?$"),
    ],
)
def test_the_gain_limits_are_strict(section, message):
    with pytest.raises(SpecError, match=message):
        risk_settings(risk_spec(section))


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_a_non_finite_gain_limit_is_refused_naming_the_key(value):
    with pytest.raises(SpecError, match=r"\[risk\] max_gain"):
        risk_settings(risk_spec({"max_gain": value}))


def test_a_gain_limit_above_1_is_accepted_and_limits_the_gain():
    settings_ = risk_settings(risk_spec({"max_gain": 4, "max_difference": 0.5}))
    assert dict(settings_.limits) == {"attribute-gain-max": 4.0, "attribute-difference-max": 0.5}
    assert over_limits({"attribute-gain-max": 4.0, "attribute-difference-max": 0.5}, settings_) == []
    assert over_limits({"attribute-gain-max": 4.5, "attribute-difference-max": 0.5}, settings_) == [
        "attribute-gain-max is 4.5, above the limit 4"
    ]


# --- a rare value concentrated in one group: the report and [risk] max_gain ----------------------------


def covid_frame() -> pd.DataFrame:
    """1,000 tests in 20 clinics of 50: 30 positive (3%), all in clinic 7 (60% of its tests)."""
    clinic = np.repeat(np.arange(20), 50)
    result = np.where((clinic == 7) & (np.arange(1000) % 50 < 30), "positive", "negative")
    return pd.DataFrame({"pid": np.arange(1000), "clinic": clinic, "result": result})


def covid_spec(tmp_path, technique: dict | None = None, **risk) -> dict:
    spec = {
        "dataset": {
            "name": "covid",
            "person_id": "pid",
            "sensitive": "result",
            "qi": [{"name": "clinic", "kind": "numeric"}],
        },
        "technique": technique or {"name": "generalization", "k": 10},
        "output": {"dir": str(tmp_path / "releases"), "state": str(tmp_path / "s.duckdb"), "seed": 1},
    }
    if risk:
        spec["risk"] = risk
    return spec


def verdict_of(page: str) -> str:
    m = re.search(r'<h1>Release [^<]+</h1>\s*<section id="verdict"><p>([^<]+)</p></section>', page)
    assert m, "the verdict paragraph right after the h1"
    return html.unescape(m.group(1))


SEED_2 = {"output": {"seed": 2}}  # another release of the same input (the same seed would be a re-run)
WORST_WORDS = "in the worst group, 60% have result = positive, against 3% of all rows"


def test_a_rare_value_in_one_group_is_named_in_red_and_refused_by_max_gain(tmp_path, monkeypatch):
    from privpub.tasks.report import page as report

    twins: list[str] = []
    write = report.write_html_report

    def both(path, meta, privacy, utility, sizes):  # the markdown twin from the same meta
        twins.append(report.markdown_summary(meta, privacy, utility))
        return write(path, meta, privacy, utility, sizes)

    monkeypatch.setattr(report, "write_html_report", both)
    release = privpub.publish(covid_frame(), covid_spec(tmp_path))
    page = release.report.read_text()
    words = verdict_of(page)
    assert WORST_WORDS in words and "30 of the group's 50 rows" in words
    assert "No privacy model of this release bounds what can be learned of result" in words
    assert "Every privacy check passed" not in words and "Not every check passed" in words
    alarm = re.search(r"</section>\s*<p class='warn alarm'>Warning: ([^<]+)</p>", page)
    assert alarm and WORST_WORDS in html.unescape(alarm.group(1)) and "relative gain 19, above 1" in alarm.group(1)
    assert ".alarm{color:#b00" in page  # red
    # the risk section lists the values, the largest gain first, and the worst group's cells
    assert re.search(r"<td>positive</td><td>3%</td><td>60%</td><td>19</td>", page)
    assert "The worst group, as published: clinic = 7 (50 rows)." in html.unescape(page)
    store = Store(tmp_path / "s.duckdb")
    m = store.release(str(release))["metrics"]
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    assert risk["attribute-gain-max"] == 19 and risk["attribute-difference-max"] == pytest.approx(0.57)
    assert risk["input-attribute-gain-max"] == 19 and risk["input-attribute-difference-max"] == pytest.approx(0.57)
    # the markdown twin says the same, the warning as a quote
    (md,) = twins
    verdict_md = md.split("\n\n")[1]
    assert WORST_WORDS in verdict_md and "Every privacy check passed" not in verdict_md
    assert re.search(r"\n> \*\*Warning:\*\* attribute disclosure: in the worst group, 60% have result = positive", md)
    # a limit just below the gain refuses the release, one line naming the figure; at it, published
    with pytest.raises(
        PrivacyRefused,
        match=r"^release refused, re-identification risk above its limit: "
        r"attribute-gain-max is 19, above the limit 18\.99$",
    ):
        privpub.publish(covid_frame(), covid_spec(tmp_path, max_gain=18.99), allow_repeat=True, overrides=SEED_2)
    assert store.audit_log().iloc[-1].outcome == "refused"
    with pytest.raises(PrivacyRefused, match=r"attribute-difference-max is 0\.57, above the limit 0\.5$"):
        privpub.publish(covid_frame(), covid_spec(tmp_path, max_difference=0.5), allow_repeat=True, overrides=SEED_2)
    again = privpub.publish(
        covid_frame(),
        covid_spec(tmp_path, max_gain=19, max_difference=0.57),
        allow_repeat=True,
        overrides=SEED_2,
    )
    # at the limit the release is published; the report does not call it a warning (not above it)
    assert "class='warn alarm'" not in again.report.read_text() and WORST_WORDS in verdict_of(again.report.read_text())


def test_beta_guards_the_rare_value_and_the_verdict_says_so(tmp_path):
    release = privpub.publish(
        covid_frame(), covid_spec(tmp_path, {"name": "generalization", "k": 10, "beta": 1.0}, max_gain=1.0)
    )
    page = release.report.read_text()
    words = verdict_of(page)
    assert "What can be learned of result is bounded by beta-likeness (1)." in words
    assert "Every privacy check passed" in words and "class='warn alarm'" not in page
    m = Store(tmp_path / "s.duckdb").release(str(release))["metrics"]
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    privacy = m[m.kind == "privacy"].set_index("name")
    assert risk["attribute-gain-max"] <= 1.0 and risk["input-attribute-gain-max"] == 19
    assert (
        privacy.loc["beta-likeness", "passed"] and privacy.loc["beta-likeness", "value"] == risk["attribute-gain-max"]
    )


def test_verify_recomputes_a_gain_above_1_and_passes(tmp_path):
    from privpub.flows.reverify import reverify

    release = privpub.publish(covid_frame(), covid_spec(tmp_path))
    ok, lines = reverify(tmp_path / "s.duckdb", str(release))
    assert ok and "PASS attribute-gain-max: 19, input 19 at publish" in lines, lines
    assert "PASS attribute-difference-max: 0.57, input 0.57 at publish" in lines

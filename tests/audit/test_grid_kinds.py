"""The public query grid over every QI kind (issue 31): date QIs in bands of days, ordinal QIs in
runs of consecutive values of their order, categorical QIs in groups of values (a hierarchy's
level, or small categories merged). Built from the public QI table alone, every non-empty cell
holds at least min_cell people ("auto"), and snapping widens a query outward to whole cells."""

from __future__ import annotations

import datetime
import json
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.tasks.audit import Auditor, select_ids
from privpub.tasks.audit.grid import Grid, GridQI, auto_grid, top_level, width_grid
from privpub.tasks.audit.snap import SnapError, snap

SETTINGS = settings(max_examples=80, deadline=None)
EPOCH = datetime.date(1970, 1, 1)
ORDER = ("low", "mid", "high", "top")
TREE = {"north": ["n1", "n2"], "south": ["s1", "s2", "s3"], "all": ["north", "south"]}
FOREST = {"north": ["n1", "n2"], "south": ["s1", "s2", "s3"]}  # two roots: merged at the top
LETTERS = list("abcdefgh")
QIS = {
    "number": GridQI(),
    "date": GridQI("date"),
    "ordinal": GridQI("ordinal", ORDER),
    "plain": GridQI("categorical"),
    "tree": GridQI("categorical", tree=TREE),
    "forest": GridQI("categorical", tree=FOREST),
}
LEAVES = ["n1", "n2", "s1", "s2", "s3"]


def dates(days) -> pd.Series:
    """Day numbers as the auditor's public table holds a date QI (flows/audit.py query_table)."""
    return pd.Series(pa.array(np.asarray(days, dtype=np.int32)).cast(pa.date32()), dtype=pd.ArrowDtype(pa.date32()))


def ordinals(ranks) -> pd.Categorical:
    return pd.Categorical([ORDER[r] for r in ranks], categories=list(ORDER), ordered=True)


def day(value) -> int:
    return (value - EPOCH).days


def band(grid: Grid, column: str, value) -> int:
    """A value's band straight from the definition: how many cuts are <= its key (number, day
    number, rank), or which group lists it."""
    kind = grid.kind(column)
    if kind in ("ordinal", "categorical"):
        return next(i for i, group in enumerate(grid.band_labels(column)) if str(value) in group)
    key = day(value) if kind == "date" else value
    return sum(c <= key for c in grid.cuts[column])


def brute_cells(population: pd.DataFrame, grid: Grid) -> Counter:
    return Counter(tuple(band(grid, c, row[c]) for c in grid.columns) for row in population.to_dict("records"))


@st.composite
def populations(draw, min_people=1):
    n = draw(st.integers(min_people, 120))
    kinds = draw(st.lists(st.sampled_from(list(QIS)), min_size=1, max_size=3, unique=True))
    span = draw(st.integers(0, 60))
    columns = {}
    for kind in kinds:
        if kind == "number":
            columns[kind] = draw(st.lists(st.integers(0, span), min_size=n, max_size=n))
        elif kind == "date":
            columns[kind] = dates([18_000 + x for x in draw(st.lists(st.integers(0, span), min_size=n, max_size=n))])
        elif kind == "ordinal":
            columns[kind] = ordinals(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
        else:
            pool = LETTERS if kind == "plain" else LEAVES
            columns[kind] = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    frame = pd.DataFrame({"pid": [f"p{i}" for i in range(n)], **columns})
    return frame, kinds


@SETTINGS
@given(populations(), st.integers(1, 40))
def test_every_non_empty_cell_of_every_kind_holds_min_cell_people(data, min_cell):
    people, columns = data
    qis = {c: QIS[c] for c in columns}
    if len(people) < min_cell:
        with pytest.raises(ValueError, match="fewer than min_cell"):
            auto_grid(people[columns], columns, min_cell, qis)
        return
    grid = auto_grid(people[columns], columns, min_cell, qis)
    cells = brute_cells(people, grid)
    assert min(cells.values()) >= min_cell and sum(cells.values()) == len(people)
    assert sorted(grid.cell_sizes(people).tolist()) == sorted(cells.values())
    for c in columns:
        assert list(grid.cuts[c]) == sorted(set(grid.cuts[c]))
        if c == "ordinal":
            assert grid.labels[c] == ORDER  # runs of consecutive values of the order
        elif c in ("tree", "forest"):
            assert sorted(grid.labels[c]) == LEAVES  # every leaf in one group
        elif c == "plain":
            assert sorted(grid.labels[c]) == sorted(set(people[c]))
    assert Grid.from_state(json.loads(json.dumps(grid.to_state()))) == grid


def test_categorical_merging_at_min_cell_just_inside_and_just_outside():
    """Categories a: 10, b: 10, c: 5 people. min_cell 5: every value alone (c just inside);
    min_cell 6: c (the smallest) merges with a (the smallest other: 10 = 10, a first); min_cell 11:
    b (10, just outside) merges too: one group."""
    people = pd.DataFrame({"region": ["a"] * 10 + ["b"] * 10 + ["c"] * 5})
    qis = {"region": GridQI("categorical")}

    def groups(min_cell):
        return auto_grid(people, ["region"], min_cell, qis).band_labels("region")

    assert groups(5) == [("a",), ("b",), ("c",)]
    assert groups(6) == [("a", "c"), ("b",)]
    assert groups(10) == [("a", "c"), ("b",)]
    assert groups(11) == [("a", "b", "c")]


def test_auto_takes_the_finest_hierarchy_level_whose_cells_reach_min_cell():
    people = pd.DataFrame({"area": ["n1"] * 6 + ["n2"] * 4 + ["s1"] * 5 + ["s2"] * 5 + ["s3"] * 1})
    qis = {"area": GridQI("categorical", tree=TREE)}
    assert top_level(TREE) == 2
    assert auto_grid(people, ["area"], 4, qis).band_labels("area") == [("n1", "n2"), ("s1", "s2", "s3")]  # s3 alone: 1
    assert auto_grid(people, ["area"], 10, qis).band_labels("area") == [("n1", "n2"), ("s1", "s2", "s3")]
    assert auto_grid(people, ["area"], 11, qis).band_labels("area") == [("n1", "n2", "s1", "s2", "s3")]
    assert auto_grid(people, ["area"], 1, qis).band_labels("area") == [(v,) for v in LEAVES]  # level 0
    forest = {"area": GridQI("categorical", tree=FOREST)}  # two roots: the top groups are merged
    assert auto_grid(people, ["area"], 11, forest).band_labels("area") == [("n1", "n2", "s1", "s2", "s3")]
    masked = pd.DataFrame({"zip": ["10115"] * 3 + ["10117"] * 3 + ["20095"] * 6})  # hierarchy = "mask"
    mask = {"zip": GridQI("categorical", tree="mask")}
    assert auto_grid(masked, ["zip"], 3, mask).band_labels("zip") == [("10115",), ("10117",), ("20095",)]
    assert auto_grid(masked, ["zip"], 6, mask).band_labels("zip") == [("10115", "10117"), ("20095",)]  # 1011*
    assert auto_grid(masked, ["zip"], 7, mask).band_labels("zip") == [("10115", "10117", "20095")]


def test_width_grids_of_dates_ordinals_and_hierarchy_levels():
    people = pd.DataFrame(
        {
            "day": dates([18_262, 18_268, 18_269, 18_290]),  # 2020-01-01 .. 2020-01-29
            "sev": ordinals([0, 1, 2, 3]),
            "area": ["n1", "n2", "s1", "s3"],
        }
    )
    qis = {"day": GridQI("date"), "sev": GridQI("ordinal", ORDER), "area": GridQI("categorical", tree=TREE)}
    grid = width_grid(people, list(qis), {"day": 7, "sev": 2, "area": 1}, qis)
    assert grid.cuts["day"] == (18_263.0, 18_270.0, 18_277.0, 18_284.0)  # multiples of 7 days since 1970-01-01
    assert grid.band_labels("sev") == [("low", "mid"), ("high", "top")]
    assert grid.band_labels("area") == [("n1", "n2"), ("s1", "s2", "s3")]
    assert [band(grid, "day", d) for d in people.day] == [0, 1, 1, 4]
    assert width_grid(people, ["area"], {"area": 0}, qis).band_labels("area") == [(v,) for v in LEAVES]
    with pytest.raises(
        ValueError, match="grid area: the level of a categorical QI's hierarchy must be a whole number from 0 to 2"
    ):
        width_grid(people, ["area"], {"area": 3}, qis)
    with pytest.raises(ValueError, match="QI day is a date QI and must hold dates"):
        auto_grid(pd.DataFrame({"day": [1, 2]}), ["day"], 1, {"day": GridQI("date")})
    with pytest.raises(ValueError, match="QI sev holds a value outside its declared values"):
        auto_grid(pd.DataFrame({"sev": ["low", "huge"]}), ["sev"], 1, {"sev": GridQI("ordinal", ORDER)})


def mixed(n=60, seed=5):
    rng = np.random.default_rng(seed)
    people = pd.DataFrame(
        {
            "pid": [f"p{i:03d}" for i in range(n)],
            "age": rng.integers(18, 90, n),
            "day": dates(18_262 + rng.integers(0, 120, n)),
            "sev": ordinals(rng.integers(0, 4, n)),
            "area": rng.choice(LEAVES, n),
        }
    )
    qis = {
        "age": GridQI(),
        "day": GridQI("date"),
        "sev": GridQI("ordinal", ORDER),
        "area": GridQI("categorical", tree=TREE),
    }
    return people, qis


def test_snapping_each_kind_writes_back_a_predicate_of_its_kind():
    people, qis = mixed()
    grid = width_grid(people, ["day", "sev", "area"], {"day": 7, "sev": 2, "area": 1}, qis)
    columns = ["age", "day", "sev", "area"]
    # dates: whole days, written back as 'YYYY-MM-DD' ranges; 2020-01-09 is day 18270, a cut
    assert snap(people, "day >= '2020-01-09'", grid, columns).predicate == "day >= '2020-01-09'"
    assert snap(people, "day > '2020-01-08'", grid, columns).predicate == "day >= '2020-01-09'"
    assert snap(people, "day >= '2020-01-08'", grid, columns).predicate == "day >= '2020-01-02'"
    assert snap(people, "day BETWEEN '2020-01-10' AND '2020-01-11'", grid, columns).predicate == (
        "day BETWEEN '2020-01-09' AND '2020-01-15'"
    )
    assert snap(people, "day < '2020-01-02'", grid, columns).predicate == "day <= '2020-01-01'"
    # ordinal: compared in the declared order, written back as IN lists of whole runs
    assert snap(people, "sev < 'high'", grid, columns).predicate == "sev IN ('low', 'mid')"
    assert snap(people, "sev <= 'high'", grid, columns).predicate == "TRUE"
    assert snap(people, "sev = 'top'", grid, columns).predicate == "sev IN ('high', 'top')"
    assert snap(people, "'mid' < sev", grid, columns).predicate == "sev IN ('high', 'top')"
    assert snap(people, "sev < 'low'", grid, columns).predicate == "FALSE"  # nothing below the first
    assert snap(people, "sev > 'top'", grid, columns).predicate == "FALSE"  # nor above the last
    # categorical: = and IN, whole groups
    assert snap(people, "area = 's2'", grid, columns).predicate == "area IN ('s1', 's2', 's3')"
    assert snap(people, "area IN ('zz', 'n1')", grid, columns).predicate == "area IN ('n1', 'n2')"
    assert snap(people, "area = 'zz'", grid, columns).predicate == "FALSE"  # a value nobody holds


@pytest.mark.parametrize(
    "predicate",
    [
        "area < 'n2'",  # a categorical QI has no order
        "area BETWEEN 'n1' AND 's1'",
        "day > 18270",  # a date is compared with a 'YYYY-MM-DD' text
        "day > '2020-1-9'",
        "sev < 'huge'",  # not a value of the order
        "sev > area",
    ],
)
def test_a_predicate_of_the_wrong_kind_is_refused_with_one_line(predicate):
    people, qis = mixed()
    grid = width_grid(people, ["day", "sev", "area"], {"day": 7, "sev": 2, "area": 1}, qis)
    with pytest.raises(SnapError) as err:
        snap(people, predicate, grid, ["day", "sev", "area"])
    assert str(err.value).startswith("this query cannot be widened to the grid: ") and "\n" not in str(err.value)


def test_an_auditor_refuses_an_order_on_a_categorical_qi_before_reading_the_secret():
    """A categorical QI's grid lists its values group after group: with a: 10, b: 10 and c: 5
    people and min_cell 6, c joins a, so the positions are a, c, b, not the text's order. An order
    read into them would decide "region > 'b'" (c in SQL) as nobody, "region <= 'a'" (a) as a
    and c; so every comparison and BETWEEN on it is refused with one line, before the secret is
    read and leaving the knowledge as it was, while = and IN are widened to whole groups."""
    people = pd.DataFrame({"pid": [f"p{i:02d}" for i in range(25)], "region": ["a"] * 10 + ["b"] * 10 + ["c"] * 5})
    grid = auto_grid(people[["region"]], ["region"], 6, {"region": GridQI("categorical")})
    assert grid.band_labels("region") == [("a", "c"), ("b",)]
    secret = dict(zip(people.pid, np.random.default_rng(4).choice(list("xyz"), len(people))))
    reads = []

    def reader(ids):
        reads.append(list(ids))
        return [secret[i] for i in ids]

    auditor = Auditor(people, list(secret.values()), 2, reader, id_column="pid", grid=grid)
    before = json.dumps(auditor.to_state(), sort_keys=True)
    for predicate in ("region > 'b'", "'b' < region", "region <= 'a'", "region >= 'c'", "region BETWEEN 'a' AND 'b'"):
        assert select_ids(people, predicate, "pid")  # SQL selects someone by the text's order
        with pytest.raises(ValueError) as err:
            auditor.ask_where(predicate)
        message = str(err.value)
        assert message.startswith("this query cannot be widened to the grid: ") and "\n" not in message, predicate
    assert reads == [] and json.dumps(auditor.to_state(), sort_keys=True) == before
    selection = auditor.select("region = 'c'")
    assert selection.predicate == "region IN ('a', 'c')" and selection.widened == 10
    assert auditor.select("region IN ('b', 'zz')").predicate == "region IN ('b')"


def test_an_ordinal_comparison_selects_exactly_the_ranks_it_names():
    """An ordinal QI is compared in its declared order, low < mid < high < top, not the text's
    (high < low < mid < top): each comparison with each value of the order, the value on either
    side, and each BETWEEN select the people a count straight from the ranks names."""
    ranks = np.repeat(np.arange(len(ORDER)), [3, 1, 4, 2])
    people = pd.DataFrame({"pid": [f"p{i}" for i in range(len(ranks))], "sev": ordinals(ranks)})
    holds = {
        "<": np.less,
        "<=": np.less_equal,
        ">": np.greater,
        ">=": np.greater_equal,
        "=": np.equal,
    }
    mirrored = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}
    for r, value in enumerate(ORDER):
        for op, holds_op in holds.items():
            named = set(people.pid[holds_op(ranks, r)])
            assert set(select_ids(people, f"sev {op} '{value}'", "pid")) == named, (op, value)
            assert set(select_ids(people, f"'{value}' {mirrored[op]} sev", "pid")) == named, (value, op)
        for s, high in enumerate(ORDER):
            named = set(people.pid[(ranks >= r) & (ranks <= s)])
            assert set(select_ids(people, f"sev BETWEEN '{value}' AND '{high}'", "pid")) == named
    assert len(select_ids(people, "sev < 'high'", "pid")) == 4  # low and mid: 3 + 1


def iso(x: int) -> str:
    return f"'{np.datetime64(18_262 + x, 'D')}'"


@st.composite
def kind_conjunctions(draw):
    parts = []
    for column in draw(st.lists(st.sampled_from(["age", "day", "sev", "area"]), min_size=1, max_size=4)):
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "="]))
        if column == "age":
            parts.append(f"age {op} {draw(st.integers(10, 95))}")
        elif column == "day":
            a, b = sorted(draw(st.lists(st.integers(-5, 125), min_size=2, max_size=2)))
            parts.append(
                draw(
                    st.sampled_from([f"day {op} {iso(a)}", f"day BETWEEN {iso(a)} AND {iso(b)}", f"{iso(b)} {op} day"])
                )
            )
        elif column == "sev":
            a, b = draw(st.sampled_from(ORDER)), draw(st.sampled_from(ORDER))
            values = ", ".join(f"'{v}'" for v in draw(st.lists(st.sampled_from(ORDER), min_size=1, max_size=3)))
            parts.append(
                draw(st.sampled_from([f"sev {op} '{a}'", f"sev BETWEEN '{a}' AND '{b}'", f"sev IN ({values})"]))
            )
        else:
            values = draw(st.lists(st.sampled_from([*LEAVES, "zz"]), min_size=1, max_size=3))
            parts.append(
                f"area IN ({', '.join(repr(v) for v in values)})" if len(values) > 1 else f"area = '{values[0]}'"
            )
    return " AND ".join(parts)


@SETTINGS
@given(st.data())
def test_snapping_every_kind_is_outward_aligned_and_stable(data):
    people, qis = mixed(n=data.draw(st.integers(5, 80)), seed=data.draw(st.integers(0, 1_000)))
    columns = ["age", "day", "sev", "area"]
    if data.draw(st.booleans()):
        grid = auto_grid(people[columns], columns, data.draw(st.integers(1, 5)), qis)
    else:
        widths = {"age": data.draw(st.sampled_from([1, 5, 10])), "day": data.draw(st.sampled_from([1, 7, 30]))}
        widths |= {"sev": data.draw(st.integers(1, 4)), "area": data.draw(st.integers(0, 2))}
        grid = width_grid(people[columns], columns, widths, qis)
    predicate = data.draw(kind_conjunctions())
    asked = set(select_ids(people, predicate, "pid"))
    snapped = snap(people, predicate, grid, columns)
    wide = set(people.pid[snapped.selected])
    assert asked <= wide  # outward
    assert set(select_ids(people, snapped.predicate, "pid")) == wide  # the stated predicate selects it
    cells = [tuple(band(grid, c, row[c]) for c in columns) for row in people.to_dict("records")]
    inside = {cell for cell, pid in zip(cells, people.pid) if pid in wide}
    assert wide == {pid for cell, pid in zip(cells, people.pid) if cell in inside}  # whole grid cells
    again = snap(people, snapped.predicate, grid, columns)
    assert np.array_equal(again.selected, snapped.selected) and again.predicate == snapped.predicate


def test_the_grid_of_every_kind_is_built_without_the_secret_and_survives_a_restart():
    people, qis = mixed()
    secret = dict(zip(people.pid, np.random.default_rng(2).choice(list("abcde"), len(people))))

    def forbidden(ids):
        raise AssertionError("the secret was read")

    columns = ["age", "day", "sev", "area"]
    grid = auto_grid(people[columns], columns, 10, qis)
    assert grid.kinds == {"day": "date", "sev": "ordinal", "area": "categorical"}
    auditor = Auditor(people, list(secret.values()), 2, forbidden, id_column="pid", grid=grid)
    assert auditor.select("area = 'n1' AND sev >= 'mid'").widened >= 0  # selecting reads no secret
    assert auto_grid(people[columns], columns, 10, qis) == grid
    state = json.loads(json.dumps(auditor.to_state()))
    assert set(state["grid"]) == {"cuts", "integer", "min_cell", "kinds", "labels"}
    restored = Auditor.from_state(state, people, list(secret.values()), id_column="pid")
    assert restored.grid == grid
    numeric = auto_grid(people[["age"]], ["age"], 10)
    assert set(numeric.to_state()) == {"cuts", "integer", "min_cell"}  # as before: old states load unchanged
    assert Grid.from_state({"cuts": {"age": [40]}, "integer": {"age": True}, "min_cell": None}).kinds == {}


@pytest.mark.parametrize(
    ("predicate", "aligned"),
    [
        ("day BETWEEN '2020-01-10' AND '2020-01-11'", "day BETWEEN '2020-01-09' AND '2020-01-15'"),
        ("sev = 'top'", "sev IN ('high', 'top')"),
        ("area = 's2'", "area IN ('s1', 's2', 's3')"),
    ],
)
def test_without_snapping_an_off_grid_query_of_each_kind_is_refused_naming_an_aligned_one(predicate, aligned):
    people, qis = mixed()
    secret = dict(zip(people.pid, np.random.default_rng(2).choice(list("abcde"), len(people))))
    columns = ["day", "sev", "area"]
    grid = width_grid(people, columns, {"day": 7, "sev": 2, "area": 1}, qis)
    auditor = Auditor(
        people, list(secret.values()), 2, lambda ids: [secret[i] for i in ids], id_column="pid", grid=grid, snap=False
    )
    with pytest.raises(ValueError) as err:
        auditor.ask_where(predicate)
    assert str(err.value) == (
        f"off-grid query: this table answers queries aligned to its public grid; the nearest grid-aligned query is {aligned}"
    )
    assert auditor.select(aligned).widened == 0  # the aligned query is accepted as it is

"""The public query grid: built from the public QI table alone, every non-empty cell holds at
least min_cell people, and snapping widens a query outward to whole grid cells."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.tasks.audit import Auditor, select_ids
from privpub.tasks.audit.grid import Grid, auto_grid, width_grid
from privpub.tasks.audit.query import PublicTable
from privpub.tasks.audit.snap import SnapError, snap

SETTINGS = settings(max_examples=80, deadline=None)


def band(cuts, x) -> int:
    """The band of x, straight from the definition: how many cuts are <= x."""
    return sum(c <= x for c in cuts)


def brute_cells(population: pd.DataFrame, grid: Grid) -> Counter:
    return Counter(tuple(band(grid.cuts[c], row[c]) for c in grid.columns) for row in population.to_dict("records"))


@st.composite
def populations(draw, min_people=1):
    n = draw(st.integers(min_people, 160))
    d = draw(st.integers(1, 3))
    columns = {}
    for j in range(d):
        span = draw(st.integers(0, 80))
        if draw(st.booleans()):
            columns[f"q{j}"] = draw(st.lists(st.integers(0, span), min_size=n, max_size=n))
        else:
            columns[f"q{j}"] = [float(x) / 4 for x in draw(st.lists(st.integers(0, span), min_size=n, max_size=n))]
    frame = pd.DataFrame({"pid": [f"p{i}" for i in range(n)], **columns})
    return frame, list(columns)


@SETTINGS
@given(populations(), st.integers(1, 40))
def test_every_non_empty_grid_cell_holds_min_cell_people(data, min_cell):
    people, columns = data
    if len(people) < min_cell:
        with pytest.raises(ValueError, match="fewer than min_cell"):
            auto_grid(people, columns, min_cell)
        return
    grid = auto_grid(people, columns, min_cell)
    cells = brute_cells(people, grid)
    assert min(cells.values()) >= min_cell and sum(cells.values()) == len(people)
    assert all(list(cuts) == sorted(set(cuts)) for cuts in grid.cuts.values())
    assert sorted(grid.cell_sizes(people).tolist()) == sorted(cells.values())


def test_min_cell_threshold_just_inside_and_just_outside():
    people = pd.DataFrame({"pid": [f"p{i}" for i in range(30)], "age": range(30)})
    assert brute_cells(people, auto_grid(people, ["age"], 30)) == Counter({(0,): 30})  # n = min_cell: one cell
    with pytest.raises(ValueError, match="30 people, fewer than min_cell = 31"):
        auto_grid(people, ["age"], 31)
    fine = auto_grid(people, ["age"], 10)
    assert sorted(brute_cells(people, fine).values()) == [10, 10, 10]  # 3 bands of exactly min_cell


def test_a_grid_needs_numeric_qis():
    people = pd.DataFrame({"pid": ["a", "b"], "sex": ["f", "m"]})
    with pytest.raises(ValueError, match="QI sex is not numeric"):
        auto_grid(people, ["sex"], 1)


def test_width_grid_anchors_bands_at_multiples_of_the_width():
    people = pd.DataFrame({"pid": list("abcd"), "age": [3, 17, 20, 44], "day": [0.5, 8.0, 13.9, 14.0]})
    grid = width_grid(people, ["age", "day"], {"age": 10, "day": 7})
    assert grid.cuts == {"age": (10.0, 20.0, 30.0, 40.0), "day": (7.0, 14.0)}
    assert [band(grid.cuts["age"], a) for a in people.age] == [0, 1, 2, 4]


@st.composite
def conjunctions(draw, columns):
    parts = []
    for column in draw(st.lists(st.sampled_from(columns), min_size=1, max_size=4)):
        kind = draw(st.sampled_from(["between", "cmp", "flipped", "in"]))
        a, b = draw(st.integers(-5, 85)), draw(st.integers(-5, 85))
        half = draw(st.sampled_from(["", ".5"]))
        if kind == "between":
            parts.append(f"{column} BETWEEN {min(a, b)}{half} AND {max(a, b)}")
        elif kind == "cmp":
            parts.append(f"{column} {draw(st.sampled_from(['<', '<=', '>', '>=', '=']))} {a}{half}")
        elif kind == "flipped":
            parts.append(f"({a}{half} {draw(st.sampled_from(['<', '<=', '>', '>=', '=']))} {column})")
        else:
            parts.append(f"{column} IN ({', '.join(str(x) for x in draw(st.lists(st.integers(0, 80), min_size=1)))})")
    return " AND ".join(parts)


@SETTINGS
@given(st.data())
def test_snapping_is_outward_and_grid_aligned(data):
    people, columns = data.draw(populations(min_people=5))
    if data.draw(st.booleans()):
        grid = auto_grid(people, columns, data.draw(st.integers(1, 5)))
    else:
        grid = width_grid(people, columns, {c: data.draw(st.sampled_from([1, 2.5, 5, 7])) for c in columns})
    predicate = data.draw(conjunctions(columns))
    asked = set(select_ids(people, predicate, "pid"))
    snapped = snap(people, predicate, grid, columns)
    wide = set(people.pid[snapped.selected])
    assert asked <= wide  # outward
    assert set(select_ids(people, snapped.predicate, "pid")) == wide  # the stated predicate selects it
    cells = [tuple(band(grid.cuts[c], row[c]) for c in columns) for row in people.to_dict("records")]
    inside = {cell for cell, pid in zip(cells, people.pid) if pid in wide}
    assert wide == {pid for cell, pid in zip(cells, people.pid) if cell in inside}  # whole grid cells
    again = snap(people, snapped.predicate, grid, columns)
    assert np.array_equal(again.selected, snapped.selected)  # an aligned query stays as it is


def test_snapping_reads_whole_number_qis_over_whole_numbers():
    people = pd.DataFrame({"pid": [f"p{i}" for i in range(8)], "age": [30, 32, 34, 35, 36, 39, 40, 44]})
    grid = width_grid(people, ["age"], {"age": 5})
    assert snap(people, "age > 34", grid, ["age"]).predicate == "age >= 35"  # not the band 30-34
    assert snap(people, "age < 35.5", grid, ["age"]).predicate == "age < 40"
    assert grid.cuts == {"age": (35.0, 40.0)}  # bands: below 35, 35-39, 40 and over
    assert snap(people, "age BETWEEN 31 AND 36", grid, ["age"]).predicate == "age < 40"
    assert snap(people, "age BETWEEN 36 AND 37", grid, ["age"]).predicate == "age BETWEEN 35 AND 39"
    assert snap(people, "age IN (31, 44)", grid, ["age"]).predicate == "((age < 35) OR (age >= 40))"
    assert snap(people, "age > 34 AND age < 35", grid, ["age"]).predicate == "FALSE"
    assert snap(people, "(age < 31 OR age = 44) AND age > 29", grid, ["age"]).predicate == (
        "((age < 35) OR (age >= 40))"  # an OR within one column: each side snapped, then joined
    )


@pytest.mark.parametrize(
    "predicate",
    ["age < 30 OR region > 2", "NOT age > 30", "age <> 40", "age + 1 > 30", "age > region", "2 * age < 50"],
)
def test_a_predicate_that_cannot_be_snapped_is_refused_with_one_line(predicate):
    people = pd.DataFrame({"pid": ["a", "b", "c"], "age": [20, 40, 60], "region": [1, 2, 3]})
    grid = width_grid(people, ["age", "region"], {"age": 10, "region": 1})
    with pytest.raises(SnapError) as err:
        snap(people, predicate, grid, ["age", "region"])
    message = str(err.value)
    assert message.startswith("this query cannot be widened to the grid: ") and "\n" not in message


def clinic(n=90):
    rng = np.random.default_rng(3)
    people = pd.DataFrame({"pid": [f"p{i:03d}" for i in range(n)], "age": rng.integers(18, 90, n)})
    secret = dict(zip(people.pid, rng.choice(["a", "b", "c", "d", "e"], n)))
    return people, secret


def test_the_grid_is_built_without_the_secret():
    """The grid is a function of the public QI table: building it (and an auditor with it) never
    calls the secret reader, and the same public table gives the same grid whatever the secret."""
    people, secret = clinic()

    def forbidden(ids):
        raise AssertionError("the secret was read")

    grid = auto_grid(people[["age"]], ["age"], 15)
    auditor = Auditor(people, list(secret.values()), 2, forbidden, id_column="pid", grid=grid)
    assert auditor.select("age BETWEEN 30 AND 40").widened >= 0  # selecting reads no secret either
    shuffled = dict(zip(people.pid, np.random.default_rng(9).permutation(list(secret.values()))))
    assert auto_grid(people[["age"]], ["age"], 15) == grid and shuffled != secret


def test_a_snapped_decision_states_the_predicate_and_the_widening():
    people, secret = clinic()
    grid = auto_grid(people, ["age"], 15)
    auditor = Auditor(
        people, list(secret.values()), 2, lambda ids: [secret[i] for i in ids], id_column="pid", grid=grid
    )
    decision = auditor.ask_where("age BETWEEN 30 AND 40")
    asked = set(select_ids(people, "age BETWEEN 30 AND 40", "pid"))
    wide = set(select_ids(people, decision.predicate, "pid"))
    assert decision.widened == len(wide) - len(asked) > 0 and asked < wide
    assert decision.reason.startswith(f"decided for the grid-aligned query {decision.predicate} ")
    assert f"({decision.widened} more people than yours)" in decision.reason
    if decision.response == "answer":
        assert set(decision.ids) == wide
    d = json.loads(json.dumps(decision.to_dict()))
    assert d["predicate"] == decision.predicate and d["widened"] == decision.widened
    state = json.loads(json.dumps(auditor.to_state()))
    restored = Auditor.from_state(state, people, list(secret.values()), id_column="pid")
    assert restored.grid == grid and restored.snap is True
    no_grid = {k: v for k, v in state.items() if k not in ("grid", "snap")}  # an older state
    assert Auditor.from_state(no_grid, people, list(secret.values()), id_column="pid").grid is None


def test_without_snapping_an_off_grid_query_is_refused_naming_an_aligned_one():
    people, secret = clinic()
    grid = auto_grid(people, ["age"], 15)
    auditor = Auditor(
        people, list(secret.values()), 2, lambda ids: [secret[i] for i in ids], id_column="pid", grid=grid, snap=False
    )
    with pytest.raises(ValueError) as err:
        auditor.ask_where("age BETWEEN 30 AND 40")
    message = str(err.value)
    assert message.startswith("off-grid query: ") and "\n" not in message
    aligned = message.split("the nearest grid-aligned query is ")[1]
    assert snap(people, "age BETWEEN 30 AND 40", grid, ["age"]).predicate == aligned
    assert set(select_ids(people, "age BETWEEN 30 AND 40", "pid")) <= set(select_ids(people, aligned, "pid"))
    decision = auditor.ask_where(aligned)  # the aligned query is accepted as it is
    assert decision.widened == 0 and decision.predicate == aligned and not decision.reason.startswith("decided for")


def test_a_closed_upper_end_on_a_band_edge_keeps_that_band():
    """A fractional QI: "day <= 14" holds day = 14.0, the first value of the band [14, 21), so the
    snapped query keeps that band (just inside); "day < 14" does not (just outside)."""
    people = pd.DataFrame({"pid": list("abcd"), "day": [0.5, 8.0, 14.0, 20.5]})
    grid = width_grid(people, ["day"], {"day": 7})
    assert grid.cuts == {"day": (7.0, 14.0)} and not grid.integer["day"]
    closed = snap(people, "day <= 14", grid, ["day"])
    assert closed.predicate == "TRUE" and closed.selected.tolist() == [True] * 4
    assert snap(people, "day BETWEEN 7.5 AND 14", grid, ["day"]).predicate == "day >= 7"
    assert snap(people, "day < 14", grid, ["day"]).predicate == "day < 14"


QUARTERS = st.integers(-20, 180).map(lambda j: j / 4)  # -5 .. 45 in steps of 1/4
PROBES = {"whole": np.arange(-8, 49), "fraction": np.arange(-64, 385) / 8}  # every value, -8 .. 48


@st.composite
def one_column_predicates(draw, cuts, whole):
    """A predicate on q whose values are quarters, two in three at a band's edge, where a closed
    end meets a band in one value only: a cut (the first value of a band) or, for whole numbers,
    the one before it (the last of the band below)."""
    edges = st.sampled_from(sorted({*cuts, *(c - 1 for c in cuts)} if whole else cuts))
    values = st.one_of(edges, edges, QUARTERS) if cuts else QUARTERS

    def value() -> str:
        return f"{draw(values):g}"

    def part() -> str:
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "="]))
        form = draw(st.sampled_from(["compare", "mirrored", "between", "in", "or"]))
        if form == "compare":
            return f"q {op} {value()}"
        if form == "mirrored":
            return f"{value()} {op} q"
        if form == "between":
            low, high = sorted(draw(st.lists(values, min_size=2, max_size=2)))
            return f"q BETWEEN {low:g} AND {high:g}"
        if form == "in":
            return f"q IN ({value()}, {value()})"
        return f"(q {op} {value()} OR q {draw(st.sampled_from(['<', '<=', '>', '>=']))} {value()})"

    return " AND ".join(part() for _ in range(draw(st.integers(1, 2))))


@SETTINGS
@given(st.data())
def test_snapping_keeps_exactly_the_bands_holding_a_value_the_query_selects(data):
    """Over a population with one person at every value of a fine lattice (whole numbers, or
    eighths for a fractional QI, whose cuts and query values are quarters; reaching past the
    outermost of them: every band meeting the query holds one of them), the snapped selection is
    exactly the people of the bands holding someone the query selects, bands counted from the
    definition: outward, and no band more."""
    kind = data.draw(st.sampled_from(list(PROBES)))
    people = pd.DataFrame({"pid": [f"p{i}" for i in range(len(PROBES[kind]))], "q": PROBES[kind]})
    quarters = people[((people.q * 4) % 1 == 0) & people.q.between(-6, 46)]  # cuts: quarters within -6 .. 46
    if data.draw(st.booleans()):
        grid = auto_grid(quarters, ["q"], data.draw(st.integers(1, 40)))
    else:
        widths = [1, 3, 5, 10] if kind == "whole" else [0.5, 1.25, 2.5, 7]
        grid = width_grid(quarters, ["q"], {"q": data.draw(st.sampled_from(widths))})
    assert grid.integer["q"] is (kind == "whole")
    predicate = data.draw(one_column_predicates(list(grid.cuts["q"]), kind == "whole"))
    table = PublicTable(people, "pid")  # one connection for both predicates
    try:
        asked = people.pid.isin(table.select_ids(predicate)).to_numpy()
        bands = (people.q.to_numpy()[:, None] >= np.array(grid.cuts["q"])[None, :]).sum(axis=1)  # cuts <= x
        expected = np.isin(bands, bands[asked])
        snapped = snap(people, predicate, grid, ["q"])
        assert snapped.selected.tolist() == expected.tolist(), (predicate, grid.cuts["q"])
        assert set(table.select_ids(snapped.predicate)) == set(people.pid[expected])
    finally:
        table.close()


# -- issue 42: auto bands as fine as min_cell allows ----------------------------------------------
def brute_cuttable(population, grid, column, keys, lo, hi, min_cell) -> bool:
    """Straight from the definition: can the band [lo, hi] of `column` be cut at some key inside it
    with every non-empty cell (each side x the other QIs' bands) still >= min_cell? A plain loop."""
    rows = [(k, tuple(band(grid.cuts[c], r[c]) for c in grid.columns if c != column)) for k, r in zip(keys, population)]
    inside = [(k, other) for k, other in rows if lo <= k <= hi]
    for cut in sorted({k for k, _ in inside if k > lo}):
        below = Counter(other for k, other in inside if k < cut)
        above = Counter(other for k, other in inside if k >= cut)
        if min(below.values()) >= min_cell and min(above.values()) >= min_cell:
            return True
    return False


def skewed_table(n: int = 1200) -> pd.DataFrame:
    """Long right tails: income lognormal, age gamma (as the demo's), a Zipf-like region."""
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "income": np.round(np.exp(rng.normal(10, 0.9, n))).astype(np.int64),
            "age": np.clip(np.round(rng.gamma(2.0, 12.0, n) + 17), 17, 99).astype(np.int64),
            "region": rng.choice(6, n, p=[0.5, 0.2, 0.12, 0.08, 0.06, 0.04]),
        }
    )


def demo_census(columns):
    from privpub.tasks.audit.grid import GridQI
    from privpub.tasks.demo_data import CENSUS_QI, census

    qis = {q["name"]: GridQI(q["kind"], tuple(q.get("order", ()))) for q in CENSUS_QI if q["name"] in columns}
    return census(1500, seed=4)[columns], qis


CENSUS_SETS = [
    ["age"],
    ["age", "sex"],
    ["age", "sex", "education"],
    ["age", "sex", "education", "marital", "race", "workclass", "country", "salary"],
]


@pytest.mark.parametrize("table", ["census-" + "+".join(c) for c in CENSUS_SETS] + ["skewed", "bench-narrow"])
def test_no_auto_band_spans_more_than_a_quarter_of_its_range_unless_min_cell_forces_it(table):
    """Every non-empty cell >= min_cell (counted from the definition); every band of a numeric,
    date or ordinal QI is minimal: no cut inside it keeps that (brute force), so a band wider than
    a quarter of its QI's range is one min_cell forces; with age the only QI (or with sex) no band
    of age spans more than a quarter of its range at all."""
    from privpub.tasks.audit.grid import GridQI
    from tests.benchmarks.bench_audit import make_population

    qis: dict[str, GridQI] = {}
    if table.startswith("census-"):
        people, qis = demo_census(table.removeprefix("census-").split("+"))
    elif table == "skewed":
        people = skewed_table()
    else:
        people = make_population(np.random.default_rng(7), 1000, 20)[0][["age", "region"]]
    columns = list(people.columns)
    grid = auto_grid(people, columns, 30, qis)
    keyed = pd.DataFrame({c: grid.keys(c, people[c]) for c in columns})  # an ordinal's rank, a category's position
    assert min(brute_cells(keyed, grid).values()) >= 30
    rows = keyed.to_dict("records")
    wide = 0
    for c in columns:
        if grid.kind(c) == "categorical":
            continue
        keys = [r[c] for r in rows]
        for i in range(len(grid.cuts[c]) + 1):
            hi = max(k for k in keys if band(grid.cuts[c], k) == i)
            lo = min(k for k in keys if band(grid.cuts[c], k) == i)
            assert not brute_cuttable(rows, grid, c, keys, lo, hi, 30), (c, lo, hi)  # minimal
            wide += grid.kind(c) == "numeric" and hi - lo > (max(keys) - min(keys)) / 4
    if table in ("census-age", "census-age+sex"):
        assert wide == 0 and len(grid.cuts["age"]) >= 10


def point_table(at_45: int) -> pd.DataFrame:
    ages = [40] * 30 + [45] * at_45 + [50] * 30
    return pd.DataFrame({"pid": [f"p{i}" for i in range(len(ages))], "age": ages})


@pytest.mark.parametrize("at_45, widened", [(30, 0), (29, 30)])
def test_a_point_query_snaps_to_the_narrowest_band_meeting_min_cell_just_inside_and_outside(at_45, widened):
    """30 people at 40 and at 50: `age = 45` with 30 people (min_cell, just inside) is a band of
    its own, nobody added; with 29 (just outside) it joins one neighbour, 30 people added, and the
    band is as narrow as the narrowest run of ages around 45 holding 30 people (brute force)."""
    people = point_table(at_45)
    grid = auto_grid(people[["age"]], ["age"], 30)
    selection = Auditor(people, ["x"] * len(people), 1, id_column="pid", grid=grid).select("age = 45")
    assert selection.widened == widened
    chosen = people.age[people.pid.isin(selection.ids)]
    assert len(chosen) == at_45 + widened >= 30
    ages = sorted(set(people.age))
    narrowest = min(
        b - a for a in ages for b in ages if a <= 45 <= b and ((people.age >= a) & (people.age <= b)).sum() >= 30
    )
    assert chosen.max() - chosen.min() == narrowest


def test_the_issue_point_query_no_longer_widens_to_most_of_the_table():
    """Issue 42: on a census table `age = 45` was widened to `age >= 21` (+1,235 people). With
    age and sex, its band spans at most a quarter of the age range (here 45-47, each sex's cell
    of it >= 30 people) and adds at most a tenth of the table."""
    people, qis = demo_census(["age", "sex"])
    people = people.assign(pid=[f"p{i}" for i in range(len(people))])
    grid = auto_grid(people[["age", "sex"]], ["age", "sex"], 30, qis)
    selection = Auditor(people, ["x"] * len(people), 1, id_column="pid", grid=grid).select("age = 45")
    chosen = people.age[people.pid.isin(selection.ids)]
    assert chosen.max() - chosen.min() <= (people.age.max() - people.age.min()) / 4
    assert selection.widened <= len(people) // 10 and selection.predicate.startswith("age")

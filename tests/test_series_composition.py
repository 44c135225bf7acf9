"""The series composition check (issue 17): the verifier plays the adversary who holds every
release of a series. Its figures are compared with a brute-force linker (tests/series_linker.py)
on small series, through the state database as a publish uses it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from privpub.schemas.errors import InputError, PrivacyRefused, SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.compose.check import SeriesCheck
from privpub.tasks.compose.rebuild import replay
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.partition.generalized_table import generalized_table
from privpub.tasks.techniques.registry import get_technique
from tests import series_linker as linker

PERMANENT = ["a", "b", "c", "d"]
TRANSIENT = ["x", "y"]


def spec_of(series: dict, technique: dict | None = None):
    return spec_from_dict(
        {
            "dataset": {
                "name": "s",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "v",
                "qi": [{"name": "age", "kind": "numeric"}],
            },
            "technique": technique or {"name": "generalization", "k": 1},
            "series": series,
        }
    )


def publish_groups(store: Store, spec, frame: pd.DataFrame, group: np.ndarray, number: int):
    """One release of the series as the flow does it: prepare, check, commit the summaries.
    Returns (the check's results, its per-row figures, the published records)."""
    technique = get_technique(spec)
    data = Microdata.from_frame(spec, frame)
    check = SeriesCheck(spec, technique)
    check.prepare(store, data)
    n_groups = int(group.max()) + 1
    results = check.check(data, group, n_groups)
    _, sets, row_set = check._composed
    figures = check.figures(sets, row_set)
    table = generalized_table(data, group, n_groups, np.arange(data.n))
    hook = check.commit_hook()
    with store.write() as con:
        con.execute("BEGIN TRANSACTION")
        hook(con, f"s-{number:04d}", number)
        con.execute("COMMIT")
    return results, figures, table.to_pylist()


@st.composite
def series_cases(draw):
    n = draw(st.integers(2, 8))
    kinds = draw(st.lists(st.sampled_from(["p", "t"]), min_size=n, max_size=n))
    fixed = draw(st.lists(st.sampled_from(PERMANENT), min_size=n, max_size=n))
    releases = []
    for _ in range(draw(st.integers(2, 4))):
        present = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
        ages = draw(st.permutations(range(20, 20 + 3 * n)))[: len(present)]  # distinct: boxes never touch
        values = [fixed[p] if kinds[p] == "p" else draw(st.sampled_from(TRANSIENT)) for p in present]
        cuts = draw(st.lists(st.booleans(), min_size=len(present) - 1, max_size=len(present) - 1))
        releases.append((present, ages, values, cuts))
    return releases


def frame_and_groups(present, ages, values, cuts):
    frame = pd.DataFrame({"pid": [f"p{p}" for p in present], "age": ages, "v": values})
    order = np.argsort(ages, kind="stable")
    seg = np.concatenate([[0], np.cumsum(cuts)]) if len(cuts) else np.zeros(1, int)
    group = np.empty(len(present), np.int64)
    group[order] = seg  # consecutive ages, cut where drawn
    return frame, group


# `make test` draws fewer series than the full sweeps (marker `slow`, `make test-slow`): each
# example stores 2-4 releases in a fresh state file. Beside the smaller sweeps, the worked series
# below and tests/test_composition_oracle.py (every technique's published tables against a linker)
# check the same figures; the mutation runner's SERIES mutants are killed without the full sweeps.
LINKER_EXAMPLES, LINKER_FULL_SWEEP = 25, 60
REPLAY_EXAMPLES, REPLAY_FULL_SWEEP = 5, 25


@pytest.mark.parametrize("model", ["l", "k"])
@settings(max_examples=LINKER_EXAMPLES)
@given(case=series_cases(), threshold=st.integers(1, 3))
def test_composed_figures_equal_the_brute_force_linker(tmp_path_factory, model, case, threshold):
    check_against_the_linker(tmp_path_factory, model, case, threshold)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["l", "k"])
@settings(max_examples=LINKER_FULL_SWEEP)
@given(case=series_cases(), threshold=st.integers(1, 3))
def test_composed_figures_equal_the_brute_force_linker_full_sweep(tmp_path_factory, model, case, threshold):
    check_against_the_linker(tmp_path_factory, model, case, threshold)


def check_against_the_linker(tmp_path_factory, model: str, case: list, threshold: int) -> None:
    store = Store(tmp_path_factory.mktemp("series") / "state.duckdb")
    series = {"transient": TRANSIENT, **({"l": threshold} if model == "l" else {})}
    technique = {"name": "generalization", "k": threshold}
    seen: dict[int, dict] = {}  # person -> release -> QI values
    published: dict[int, list[dict]] = {}
    for number, (present, ages, values, cuts) in enumerate(case, start=1):
        frame, group = frame_and_groups(present, ages, values, cuts)
        results, figures, records = publish_groups(store, spec_of(series, technique), frame, group, number)
        published[number] = records
        expected = []
        for row, p in enumerate(present):
            seen.setdefault(p, {})[number] = {"age": ages[row]}
            values_left, records_left = linker.worst(linker.link(seen[p], published, "v", set(TRANSIENT)))
            if model == "l":
                assert figures[row] == values_left, (row, case)
                expected.append(values_left)
            else:  # a lower bound over earlier releases, exact for a newcomer
                assert figures[row] <= records_left
                if len(seen[p]) == 1:
                    assert figures[row] == records_left
                expected.append(records_left)
        if number == 1:
            assert results == []  # nothing to combine yet
            continue
        (result,) = results
        assert result.value == int(min(figures))
        if model == "l":  # refused exactly when the adversary narrows somebody below l
            assert result.passed == (min(expected) >= threshold)
            assert result.worst["below"] == sum(e < threshold for e in expected)
        elif result.passed:
            assert min(expected) >= threshold


def test_a_series_built_to_breach_is_refused_with_its_count(tmp_path):
    """Release 1: {p0..p3} with a,b,c,a. Release 2 regroups p0, p1 with a newcomer holding b:
    p0 and p1 keep {a, b} (2 < l = 3); p2 and p3 do not return.

    Promise: series-composition-refused."""
    store = Store(tmp_path / "state.duckdb")
    spec = spec_of({"l": 3})
    one = pd.DataFrame({"pid": ["p0", "p1", "p2", "p3"], "age": [30, 31, 32, 33], "v": ["a", "b", "c", "a"]})
    assert publish_groups(store, spec, one, np.zeros(4, np.int64), 1)[0] == []
    two = pd.DataFrame({"pid": ["p0", "p1", "p4", "p5"], "age": [30, 31, 40, 41], "v": ["a", "b", "b", "d"]})
    (result,), figures, _ = publish_groups(store, spec, two, np.zeros(4, np.int64), 2)
    assert not result.passed and result.value == 2 and result.worst["below"] == 2
    assert figures.tolist() == [2, 2, 3, 3]
    assert result.worst["row"] == 1 and result.worst["returning"] == 2
    assert "p0" not in json.dumps(result.worst)


BATCHES = (1, 2, 3, 10**6)  # people replayed at once by `privpub verify`: one, a few, everybody


@pytest.mark.parametrize("model", ["l", "k"])
@settings(max_examples=REPLAY_EXAMPLES)
@given(case=series_cases(), threshold=st.integers(1, 3))
def test_the_replay_in_batches_of_people_equals_the_publish_figures(tmp_path_factory, model, case, threshold):
    """`privpub verify` rebuilds each release's figure from the stored groups, a few people at a
    time; whatever the batch, it is the figure the publish computed from its summaries. Also in
    make test: the worked replay below, verify's replay in test_composition_oracle.py's Butterfly
    case and test_verify_replays_the_composition_from_the_stored_groups."""
    check_the_replay(tmp_path_factory, model, case, threshold)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["l", "k"])
@settings(max_examples=REPLAY_FULL_SWEEP)
@given(case=series_cases(), threshold=st.integers(1, 3))
def test_the_replay_in_batches_of_people_equals_the_publish_figures_full_sweep(
    tmp_path_factory, model, case, threshold
):
    check_the_replay(tmp_path_factory, model, case, threshold)


def check_the_replay(tmp_path_factory, model: str, case: list, threshold: int) -> None:
    store = Store(tmp_path_factory.mktemp("series") / "state.duckdb")
    series = {"transient": TRANSIENT, **({"l": threshold} if model == "l" else {})}
    spec = spec_of(series, {"name": "generalization", "k": threshold})
    expected = {}
    for number, release in enumerate(case, start=1):
        _, figures, _ = publish_groups(store, spec, *frame_and_groups(*release), number)
        expected[number] = (int(figures.min()), int((figures < threshold).sum()), number)
    for number, want in expected.items():  # every release, also once later ones are stored
        for batch in BATCHES:
            assert replay(store, "s", number, model == "l", threshold, batch) == want, (number, batch)


@pytest.mark.parametrize("model, figures", [("l", [2, 2, 4, 4, 4]), ("k", [2, 2, 5, 5, 5])])
def test_the_replay_keeps_each_person_whole_and_counts_whole_groups(tmp_path, model, figures):
    """Release 1: p0..p3 hold a, b, c, a in one group; release 2 regroups p0, p1 with a newcomer
    holding b and two newcomers holding transient values: returning p0, p1 keep {a, b} (and no
    transient value: their first group held none). A batch that split a person's releases would
    see p0, p1 as newcomers (4 values, 5 records); one that counted only its own people's records
    would see groups of one."""
    store = Store(tmp_path / "state.duckdb")
    spec = spec_of({"transient": TRANSIENT, **({"l": 3} if model == "l" else {})}, {"name": "generalization", "k": 3})
    one = pd.DataFrame({"pid": ["p0", "p1", "p2", "p3"], "age": [30, 31, 32, 33], "v": ["a", "b", "c", "a"]})
    publish_groups(store, spec, one, np.zeros(4, np.int64), 1)
    two = pd.DataFrame(
        {"pid": ["p0", "p1", "p4", "p5", "p6"], "age": [30, 31, 40, 41, 42], "v": ["a", "b", "b", "x", "y"]}
    )
    _, got, _ = publish_groups(store, spec, two, np.zeros(5, np.int64), 2)
    assert got.tolist() == figures
    for batch in BATCHES:
        assert replay(store, "s", 2, model == "l", 3, batch) == (min(figures), int((got < 3).sum()), 2)
        assert replay(store, "s", 1, model == "l", 3, batch) == ((3, 0, 1) if model == "l" else (4, 0, 1))


def test_a_permanent_value_that_changes_is_refused_naming_row_and_column(tmp_path):
    store = Store(tmp_path / "state.duckdb")
    spec = spec_of({"transient": ["x", "y"]})
    frame = pd.DataFrame({"pid": ["p0", "p1"], "age": [1, 2], "v": ["a", "x"]})
    publish_groups(store, spec, frame, np.zeros(2, np.int64), 1)
    ok = pd.DataFrame({"pid": ["p0", "p1"], "age": [1, 2], "v": ["a", "y"]})  # transient may change
    publish_groups(store, spec, ok, np.zeros(2, np.int64), 2)
    changed = pd.DataFrame({"pid": ["p1", "p0"], "age": [1, 2], "v": ["y", "b"]})
    with pytest.raises(InputError, match=r"^row 2, column 'v': the value differs") as err:
        publish_groups(store, spec, changed, np.zeros(2, np.int64), 3)
    assert "p0" not in str(err.value) and "'b'" not in str(err.value)
    with pytest.raises(SpecError, match="transient differs"):
        publish_groups(store, spec_of({"transient": ["x"]}), ok, np.zeros(2, np.int64), 3)


@pytest.mark.parametrize(
    "before, after", [("a", "x"), ("x", "a")], ids=["permanent-to-transient", "transient-to-permanent"]
)
def test_a_value_flipping_between_permanent_and_transient_is_refused(tmp_path, before, after):
    """Issue 25, item 10: only a change between two transient values is allowed; a permanent value
    never changes, into a transient one or out of one (a loosened check that lets either side be
    transient would take this person's permanent value out of the adversary's candidates)."""
    store = Store(tmp_path / "state.duckdb")
    spec = spec_of({"transient": ["x", "y"]})
    first = pd.DataFrame({"pid": ["p0", "p1", "p2"], "age": [1, 2, 3], "v": ["a", "y", before]})
    publish_groups(store, spec, first, np.zeros(3, np.int64), 1)
    flipped = pd.DataFrame({"pid": ["p0", "p1", "p2"], "age": [1, 2, 3], "v": ["a", "x", after]})
    with pytest.raises(InputError, match=r"^row 3, column 'v': the value differs"):
        publish_groups(store, spec, flipped, np.zeros(3, np.int64), 2)
    stay = pd.DataFrame({"pid": ["p0", "p1", "p2"], "age": [1, 2, 3], "v": ["a", "x", before]})
    publish_groups(store, spec, stay, np.zeros(3, np.int64), 2)  # y -> x alone: both transient, accepted


@st.composite
def value_histories(draw):
    """2-4 releases of up to 5 people, each present one drawn value of two permanent and two
    transient ones: values change freely, between any two kinds."""
    n = draw(st.integers(1, 5))
    releases = []
    for _ in range(draw(st.integers(2, 4))):
        present = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
        values = draw(
            st.lists(st.sampled_from(PERMANENT[:2] + TRANSIENT), min_size=len(present), max_size=len(present))
        )
        releases.append((present, values))
    return releases


@example(case=[([0, 1, 2], ["a", "x", "y"]), ([0, 1, 2], ["x", "y", "y"]), ([2, 1, 0], ["x", "a", "a"])])
@settings(max_examples=12)  # each example publishes its releases into a fresh state file
@given(case=value_histories())
def test_the_input_check_refuses_exactly_the_rows_the_value_model_forbids(tmp_path_factory, case):
    """The input check against a direct count from the model (docs/series.md): a returning
    person's row is refused when its value differs from the person's value in its latest
    published release, unless both are transient; the message names the first such row and
    counts them. A refused release stores nothing, so the next one is compared with the values
    published before it."""
    store = Store(tmp_path_factory.mktemp("input") / "state.duckdb")
    spec = spec_of({"transient": TRANSIENT})
    published: dict[int, str] = {}  # person -> value in its latest published release
    number = 0  # releases stored
    for present, values in case:
        frame = pd.DataFrame({"pid": [f"p{p}" for p in present], "age": range(len(present)), "v": values})
        forbidden = [
            row
            for row, (p, v) in enumerate(zip(present, values))
            if p in published and published[p] != v and not (published[p] in TRANSIENT and v in TRANSIENT)
        ]
        if forbidden:
            message = rf"^row {forbidden[0] + 1}, column 'v': the value differs .* series \({len(forbidden)} rows\)"
            with pytest.raises(InputError, match=message):
                publish_groups(store, spec, frame, np.zeros(len(present), np.int64), number + 1)
            continue
        number += 1
        publish_groups(store, spec, frame, np.zeros(len(present), np.int64), number)
        published.update(zip(present, values))


@pytest.mark.parametrize(
    "series, message",
    [
        ({"compositon": "warn"}, "did you mean composition"),
        ({"composition": "maybe"}, 'must be "refuse" or "warn"'),
        ({"keep_groups": "yes"}, "true or false"),
        ({"l": 0}, "integer >= 1"),
        ({"transient": "x"}, "list of sensitive values"),
    ],
)
def test_series_section_is_strict(series, message):
    with pytest.raises(SpecError, match=message):
        SeriesCheck(spec_of(series), get_technique(spec_of(series)))


def test_keep_groups_is_refused_for_a_technique_that_builds_its_own_groups():
    technique = {"name": "muco", "delta": "1/3", "l": 2}
    with pytest.raises(SpecError, match="keep_groups: technique 'muco'"):
        spec = spec_of({"keep_groups": True}, technique)
        SeriesCheck(spec, get_technique(spec))


# --- through the publish flow -------------------------------------------------------------------


def monthly(pool: pd.DataFrame, month: int, stay: float = 0.9) -> pd.DataFrame:
    """The month's table: a share of the pool, drawn afresh each month (people leave and return)."""
    return pool.sample(frac=stay, random_state=month).reset_index(drop=True)


def publish_month(folder, frame: pd.DataFrame, extra: str = "") -> dict:
    from privpub.flows.publish import run_release
    from privpub.schemas.spec import resolve_spec
    from tests.helpers import census_spec_toml

    frame.to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(census_spec_toml(k=10, l=3, seed=7, extra=extra))
    return run_release(resolve_spec(str(folder / "spec.toml"), None, None))


def test_two_monthly_releases_that_narrow_people_are_refused_and_logged(prefect_server, tmp_path):
    """A second month that narrows people below l is refused, logged, and not published.

    Promise: series-composition-refused."""
    from privpub.tasks.demo_data import census

    pool = census(1500, seed=1)
    first = publish_month(tmp_path, monthly(pool, 0))
    assert [r.model for r in first["privacy"]] == ["k-anonymity", "l-diversity"]
    with pytest.raises(PrivacyRefused, match=r"series-composition-l reached [12], required 3"):
        publish_month(tmp_path, monthly(pool, 1))
    store = Store(tmp_path / "privpub.duckdb")
    row = store.audit_log().iloc[-1]
    detail = json.loads(row.detail)["series-composition-l"]["worst"]
    assert row.outcome == "refused" and detail["below"] > 0 and detail["releases"] == 2
    assert len(store.history()) == 1

    warned = publish_month(tmp_path, monthly(pool, 1), extra='[series]\ncomposition = "warn"')
    (comp,) = [r for r in warned["privacy"] if r.model == "series-composition-l"]
    assert not comp.passed and comp.worst["below"] == detail["below"]  # the same breach, recorded
    metrics = store.query(
        lambda con: con.execute(
            "SELECT passed, value FROM release_metrics WHERE release_id = ? AND name = 'series-composition-l'",
            [warned["release_id"]],
        ).fetchall()
    )
    assert metrics == [(False, float(comp.value))] and comp.value < 3
    report = (tmp_path / "releases" / warned["release_id"] / "report.html").read_text()
    assert "people fall below it when every release of the series is combined" in report


def test_keep_groups_passes_twelve_releases_with_people_arriving_and_leaving(prefect_server, tmp_path):
    from privpub.tasks.demo_data import census

    pool = census(900, seed=2)
    option = "[series]\nkeep_groups = true"
    releases = [publish_month(tmp_path, monthly(pool, m, stay=0.8), option) for m in range(12)]
    store = Store(tmp_path / "privpub.duckdb")
    assert store.history().sequence.tolist() == list(range(1, 13))
    for out in releases[1:]:
        figures = {r.model: r for r in out["privacy"]}
        assert all(r.passed for r in out["privacy"])
        assert figures["series-composition-l"].value >= 3 and figures["k-anonymity"].value >= 10
        assert figures["series-composition-l"].worst["returning"] > 0
    # what the summaries keep: every published person of the series once, no orphan set
    people, orphans, members = store.query(
        lambda con: con.execute(
            "SELECT (SELECT count(*) FROM compose_people), "
            "(SELECT count(*) FROM compose_set_info WHERE set_id NOT IN (SELECT set_id FROM compose_people)), "
            "(SELECT count(*) FROM compose_membership)"
        ).fetchone()
    )
    assert orphans == 0 and members == 12 * int(0.8 * 900)
    assert people == len(set().union(*(set(monthly(pool, m, 0.8).pid) for m in range(12))))


def test_verify_replays_the_composition_from_the_stored_groups(prefect_server, tmp_path):
    from privpub.flows.reverify import reverify
    from privpub.tasks.demo_data import census

    pool = census(1200, seed=3)
    warn = '[series]\ncomposition = "warn"'
    ids = [publish_month(tmp_path, monthly(pool, m), warn)["release_id"] for m in range(3)]
    for rid in ids[1:]:
        ok, lines = reverify(tmp_path / "privpub.duckdb", rid)
        (line,) = [x for x in lines if "series-composition-l" in x]
        stored = Store(tmp_path / "privpub.duckdb").release(rid)["metrics"]
        value = stored[stored.name == "series-composition-l"].text_value.iloc[0]
        assert line.startswith(f"FAIL series-composition-l: {value} (required 3)") == (int(value) < 3)
        assert "replayed over" in line and "the publish stored" not in line
        assert ok == (int(value) >= 3)


@pytest.mark.parametrize(
    "name, params",
    [
        ("anatomy", dict(k=None, l=3, extra="")),
        ("muco", dict(k=None, l=3, extra='delta = "1/6"')),
        ("ambiguity", dict(k=None, l=None, extra="alpha = 0.25\nbeta = 0.1")),
        ("butterfly", dict(k=5, l=None, extra='qids = [["age", "sex", "education"], ["age", "marital", "race"]]')),
    ],
)
def test_every_technique_is_composed_over_its_series(prefect_server, tmp_path, name, params):
    from privpub.flows.publish import publish_flow
    from privpub.flows.reverify import reverify
    from privpub.tasks.demo_data import census
    from tests.helpers import census_spec_toml

    pool = census(800, seed=5)
    text = census_spec_toml(technique=name, seed=4, **params) + '\n[series]\ncomposition = "warn"\n'
    (tmp_path / "spec.toml").write_text(text)
    ids = []
    for month in range(2):
        monthly(pool, month).to_csv(tmp_path / "census.csv", index=False)
        ids.append(publish_flow(spec_path=str(tmp_path / "spec.toml")))
    m = Store(tmp_path / "privpub.duckdb").release(ids[1])["metrics"]
    (comp,) = m[m.name.str.startswith("series-composition")].itertuples()
    # ambiguity has neither l nor k: l = 2; butterfly has k only: the records figure
    assert comp.name == ("series-composition-k" if name == "butterfly" else "series-composition-l")
    assert comp.threshold == str({"anatomy": 3, "muco": 3, "ambiguity": 2, "butterfly": 5}[name])
    worst = json.loads(comp.detail)
    assert comp.passed == (worst["below"] == 0) and worst["returning"] > 0
    ok, lines = reverify(tmp_path / "privpub.duckdb", ids[1])
    (line,) = [x for x in lines if comp.name in x]
    assert line.split(": ")[1].startswith(f"{comp.text_value} (required {comp.threshold})")


def test_a_release_published_over_a_breach_says_so_in_history_and_trail(prefect_server, tmp_path):
    """Issue 25, item 9: under composition = "warn" the breach showed only in release_metrics."""
    from privpub.tasks.demo_data import census

    pool = census(1500, seed=1)
    first = publish_month(tmp_path, monthly(pool, 0))
    warned = publish_month(tmp_path, monthly(pool, 1), extra='[series]\ncomposition = "warn"')
    (comp,) = [r for r in warned["privacy"] if r.model == "series-composition-l"]
    assert not comp.passed
    expected = f"committed with series breach: series-composition-l {comp.value} < 3"
    store = Store(tmp_path / "privpub.duckdb")
    assert store.history().status.tolist() == ["committed", expected]
    trail = store.trail()
    committed = trail[trail.release_id.notna()]
    assert committed.release_id.tolist() == [first["release_id"], warned["release_id"]]
    assert committed.outcome.tolist() == ["committed", expected]


def test_a_refusal_keeps_its_message_and_verify_names_an_accepted_breach(prefect_server, tmp_path):
    """Issue 25, item 9: the trail's refused row carries its one-line message; `privpub verify`
    of a release published under composition = "warn" still fails, and says the breach was the
    one accepted at publish."""
    from privpub.flows.reverify import reverify
    from privpub.tasks.demo_data import census

    pool = census(1500, seed=1)
    first = publish_month(tmp_path, monthly(pool, 0))
    with pytest.raises(PrivacyRefused) as refused:
        publish_month(tmp_path, monthly(pool, 1))
    store = Store(tmp_path / "privpub.duckdb")
    trail = store.trail()
    assert trail.outcome.tolist() == ["committed", "refused"]
    assert trail.message.iloc[-1] == str(refused.value) and "series-composition-l" in trail.message.iloc[-1]

    warned = publish_month(tmp_path, monthly(pool, 1), extra='[series]\ncomposition = "warn"')
    ok, lines = reverify(tmp_path / "privpub.duckdb", warned["release_id"])
    (line,) = [l for l in lines if "series-composition-l" in l]
    assert not ok and line.startswith("FAIL") and 'accepted at publish ([series] composition = "warn")' in line
    ok, lines = reverify(tmp_path / "privpub.duckdb", first["release_id"])  # a clean release: no such words
    assert ok and not any("accepted" in l for l in lines)

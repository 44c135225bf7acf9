"""`[technique] suppress` of generalization (issue 28): the rows of Mondrian's widest groups are
left out, at most floor(suppress x n) of them, never published, counted in `suppressed_rows`; the
published table verifies on its own; the risk figures say whose records they count."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import privpub
from privpub.flows import pipeline
from privpub.flows.reverify import reverify
from privpub.schemas.errors import SpecError
from privpub.state.store import Store
from privpub.tasks.core.types import Partition
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.partition.suppression import suppression_budget, widest_groups_rows
from privpub.tasks.report.page import summary_lines
from privpub.tasks.risk import table_risk
from privpub.tasks.verify.published import class_ids, qi_columns
from tests.helpers import census_spec_toml, rng, technique_and_data
from tests.test_params import make, refused

AGE = [{"name": "age", "kind": "numeric"}]


def outlier_table() -> pd.DataFrame:
    """95 people aged 30-39 and 5 aged 90-94; one sensitive label per person (who is published)."""
    ages = np.concatenate([30 + np.arange(95) % 10, [90, 91, 92, 93, 94]])
    return pd.DataFrame({"pid": np.arange(100), "age": ages, "s": [f"v{i}" for i in range(100)]})


def release_of(frame: pd.DataFrame, qi: list[dict], **params):
    technique, data = technique_and_data(frame, qi, "s", "generalization", **params)
    part = technique.partition(data, rng(1))
    return technique, data, part, technique.anonymize(data, part, rng(2))


def published_labels(release) -> set[str]:
    return set(release.tables["table"].column("s").to_pylist())


# --- the budget ------------------------------------------------------------------------------------


def test_the_budget_is_the_floor_of_the_share_as_written_and_keeps_k_rows():
    assert 0.29 * 100 < 29  # the float below 29/100: a float floor would give 28
    assert suppression_budget(0.29, 100, 1) == 29
    assert suppression_budget(0.01, 60_000, 5) == 600
    assert suppression_budget(0.01, 99, 5) == 0
    assert suppression_budget(0.5, 10, 8) == 2  # never fewer than k rows kept
    assert suppression_budget(0.0, 1000, 5) == 0


def test_the_widest_group_is_left_out_exactly_when_it_fits_the_budget():
    """The outliers' group has 5 rows: a budget of 5 leaves it out, a budget of 4 leaves out none
    (whole groups only, widest first: nothing narrower is taken in its place)."""
    _, _, part, release = release_of(outlier_table(), AGE, k=5, suppress=0.05)
    assert release.info["suppressed"] == 5 and (part.group < 0).sum() == 5
    assert published_labels(release) == {f"v{i}" for i in range(95)}  # the five outliers are not published
    assert max(release.tables["table"].column("age_hi").to_pylist()) == 39
    _, _, part, release = release_of(outlier_table(), AGE, k=5, suppress=0.04)
    assert "suppressed" not in release.info and (part.group >= 0).all()
    assert len(published_labels(release)) == 100


@st.composite
def ranked_groups(draw):
    """Group sizes, a width per group (ties and zeros likely), a budget and the rows' order."""
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
    widths = draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]), min_size=len(sizes), max_size=len(sizes)))
    return sizes, widths, draw(st.integers(0, sum(sizes))), draw(st.permutations(range(sum(sizes))))


@example(([3, 2], [0.5, 0.25], 2, [0, 1, 2, 3, 4]))  # the widest group is one row over: nothing is taken
@example(([2, 2, 1], [1.0, 0.5, 0.25], 4, [4, 0, 3, 1, 2]))  # two groups fill the budget exactly
@given(ranked_groups())
def test_the_rows_left_out_are_the_widest_groups_walked_one_by_one_within_the_budget(case):
    """The selection against a walk written from its definition: groups widest first (ties: the
    earlier group), a group of width 0 never; each taken while the rows taken so far and its own
    stay within the budget; the first that does not fit ends the walk (whole groups only)."""
    sizes, widths, budget, order = case
    group = np.repeat(np.arange(len(sizes)), sizes)[list(order)]
    taken: set[int] = set()
    rows = 0
    for g in sorted(range(len(sizes)), key=lambda g: (-widths[g], g)):
        if widths[g] == 0 or rows + sizes[g] > budget:
            break
        taken.add(g)
        rows += sizes[g]
    got = widest_groups_rows(Partition(group, len(sizes)), np.array(widths), budget)
    assert got.tolist() == [i for i, g in enumerate(group.tolist()) if g in taken]
    assert len(got) <= budget


def test_suppression_narrows_the_groups_of_a_table_with_outliers():
    """Without suppression the outliers' group spans 90-94; with it no published range is wider
    than the dense people's."""
    frame = outlier_table()
    _, _, _, plain = release_of(frame, AGE, k=5)
    _, _, _, cut = release_of(frame, AGE, k=5, suppress=0.05)

    def widest(release) -> int:
        t = release.tables["table"]
        return max(np.subtract(t.column("age_hi").to_numpy(), t.column("age_lo").to_numpy()))

    assert widest(plain) == 4 and widest(cut) == 0


def test_no_suppression_is_mondrian_as_before():
    frame = outlier_table()
    technique, data, part, release = release_of(frame, AGE, k=5, suppress=0)
    np.testing.assert_array_equal(part.group, mondrian_partition(data, 5).group)
    _, _, _, default = release_of(frame, AGE, k=5)
    assert release.tables["table"].equals(default.tables["table"])
    assert "suppressed" not in release.info


@st.composite
def tables(draw):
    n = draw(st.integers(2, 60))
    ages = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    kinds = draw(st.lists(st.sampled_from("abcde"), min_size=n, max_size=n))
    labels = draw(st.lists(st.sampled_from("pqrs"), min_size=n, max_size=n))
    k = draw(st.integers(1, n))
    l = draw(st.sampled_from([None, 2]))
    share = draw(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.99]) | st.floats(0, 0.999))
    frame = pd.DataFrame({"pid": np.arange(n), "age": ages, "kind": kinds, "s": labels})
    return frame, k, l, share


QIS = [{"name": "age", "kind": "numeric"}, {"name": "kind", "kind": "categorical"}]


@given(case=tables())
def test_suppression_stays_in_budget_and_the_published_table_verifies_on_its_own(case):
    """k and l hold on the published rows alone, which hold no suppressed row.

    Promise: suppressed-rows-never-published."""
    frame, k, l, share = case
    if l and frame["s"].nunique() < l:
        return
    params = {"k": k, "suppress": share, **({"l": l} if l else {})}
    technique, data, part, release = release_of(frame, QIS, **params)
    left_out = int((part.group < 0).sum())
    assert left_out <= math.floor(Fraction(str(share)) * data.n) and data.n - left_out >= k
    assert release.info.get("suppressed", 0) == left_out
    table = release.tables["table"]
    assert table.num_rows == data.n - left_out
    # the published sensitive values are the kept rows' (none of a suppressed row)
    kept = frame["s"].to_numpy()[part.group >= 0]
    assert sorted(table.column("s").to_pylist()) == sorted(kept.tolist())
    # k (and l) from the published cells alone: the verifier, and a direct count
    assert all(r.passed for r in technique.verify(release, {}))
    ids, n_classes = class_ids(table, qi_columns(table, ["age", "kind"]))
    assert np.bincount(ids, minlength=n_classes).min() >= k
    if l:
        distinct = pd.DataFrame({"c": ids, "s": table.column("s").to_pylist()}).groupby("c")["s"].nunique()
        assert distinct.min() >= l
    if share == 0:
        np.testing.assert_array_equal(part.group, mondrian_partition(data, k, l).group)


# --- the key ---------------------------------------------------------------------------------------


def test_suppress_is_a_strict_share_below_one():
    for inside in (0, 0.0, 0.5, 0.999999):
        assert make("generalization", suppress=inside).params.suppress == inside
    assert make("generalization").params.suppress == 0.0
    what = "[technique] suppress must be a number >= 0 and below 1 (the share of rows that may be left out), got "
    for wrong in (1, 1.0, -0.01, "0.1", True, False, math.nan, math.inf, None):
        assert refused("generalization", suppress=wrong) == what + repr(wrong)


def test_suppress_is_refused_where_it_does_not_run():
    from privpub.schemas.spec import spec_from_dict
    from privpub.tasks.techniques.registry import get_technique

    def spec(**sections):
        return spec_from_dict(
            {
                "dataset": {"name": "t", "input": "x.parquet", "person_id": "pid", "sensitive": "s", "qi": AGE},
                "technique": {"name": "generalization", "k": 2, "suppress": 0.01},
                **sections,
            }
        )

    with pytest.raises(SpecError) as err:
        get_technique(spec(run={"task_runner": "dask"}))
    assert str(err.value) == '[technique] suppress does not run with [run] task_runner = "dask" yet; publish in memory'
    with pytest.raises(SpecError) as err:
        get_technique(spec(series={"keep_groups": True}))
    assert str(err.value) == "[technique] suppress: [series] keep_groups would publish returning people left out"
    get_technique(spec(series={"keep_groups": False}))  # no error


# --- a release -------------------------------------------------------------------------------------


def publish(folder, frame: pd.DataFrame, extra: str, seed: int = 3) -> str:
    frame.to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(census_spec_toml(k=5, l=None, seed=seed, extra=extra))
    return pipeline.attempt(str(folder / "spec.toml"), None, None, driver=pipeline.Driver(None))


def test_a_release_with_suppress_counts_and_states_its_suppressed_rows(tmp_path):
    from privpub.tasks.demo_data import census

    release_id = publish(tmp_path, census(600, seed=2), "suppress = 0.05")
    store = Store(tmp_path / "privpub.duckdb")
    rel = store.release(release_id)
    m = rel["metrics"]
    utility = {r.name: r.value for r in m[m.kind == "utility"].itertuples()}
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    (table_row,) = rel["tables"].itertuples()
    suppressed = int(utility["suppressed-rows"])
    assert 0 < suppressed <= 30 and table_row.n_rows == 600 - suppressed
    # the release's figures are over the published records: recomputed from the file
    table = pq.read_table(tmp_path / "releases" / release_id / table_row.file)
    again = table_risk(table, qi_columns(table, [q["name"] for q in census_qi()]), "occupation", 0.2)
    assert again["prosecutor-risk-avg"] == pytest.approx(risk["prosecutor-risk-avg"])
    statement = (
        f"release figures over the {600 - suppressed:,} published records; "
        f"{suppressed:,} suppressed records are not published and not in their denominator"
    )
    report = (tmp_path / "releases" / release_id / "report.html").read_text()
    assert statement in report
    assert statement in summary_lines({**rel, "risk": risk}, [], {"suppressed_rows": suppressed})
    assert statement not in summary_lines({**rel, "risk": risk}, [], {"suppressed_rows": 0})
    assert statement not in summary_lines({**rel, "risk": {}}, [], {"suppressed_rows": suppressed})
    # `privpub verify` reads the published table alone and agrees with what the publish stored
    ok, lines = reverify(tmp_path / "privpub.duckdb", release_id)
    assert ok and "PASS k-anonymity: 5 (required 5)" in lines


def census_qi() -> list[dict]:
    from privpub.tasks.demo_data import CENSUS_QI

    return CENSUS_QI


def test_a_series_of_two_releases_with_suppress_is_composed_over_the_published_people(tmp_path):
    from privpub.tasks.demo_data import census

    pool = census(700, seed=5)
    extra = 'suppress = 0.05\n\n[series]\ncomposition = "warn"'
    ids = [
        publish(tmp_path, pool.sample(frac=0.9, random_state=month).reset_index(drop=True), extra, seed=3 + month)
        for month in range(2)
    ]
    store = Store(tmp_path / "privpub.duckdb")
    rel = store.release(ids[1])
    m = rel["metrics"]
    (comp,) = m[m.name.str.startswith("series-composition")].itertuples()
    worst = json.loads(comp.detail)
    suppressed = int(m[m.name == "suppressed-rows"].value.iloc[0])
    (table_row,) = rel["tables"].itertuples()
    assert suppressed > 0 and worst["people"] == table_row.n_rows == 630 - suppressed
    assert worst["returning"] > 0 and comp.passed == (worst["below"] == 0)


def test_a_share_whose_float_product_falls_below_it_publishes_with_the_budget_as_written(tmp_path, monkeypatch):
    """End to end through `privpub.publish`: 622 people aged 30-39 and 3 aged 90-92, k = 3. The
    share 0.0048 of 625 rows is 3 rows as written, though 0.0048 * 625 is 2.9999999999999996 as a
    float: the outliers' group (3 rows, the only one wider than one age) fits and is not published.
    0.0047 (2.9375 rows: a budget of 2) publishes every row, the outliers in a range 90-92."""
    monkeypatch.chdir(tmp_path)
    assert 0.0048 * 625 < 3
    ages = np.concatenate([30 + np.arange(622) % 10, [90, 91, 92]])
    frame = pd.DataFrame({"pid": np.arange(625), "age": ages, "s": [f"v{i}" for i in range(625)]})

    def published(share: float, state: str):
        spec = {
            "dataset": {"name": "ages", "person_id": "pid", "sensitive": "s", "qi": AGE},
            "technique": {"name": "generalization", "k": 3, "suppress": share},
            "output": {"seed": 1},
        }
        release = privpub.publish(frame, spec, state=state)
        return release.figures.set_index("name").value["suppressed-rows"], release.tables["table"]

    suppressed, table = published(0.0048, "written.duckdb")
    assert suppressed == 3 and len(table) == 622 and table.age_hi.max() == 39
    assert not {"v622", "v623", "v624"} & set(table.s)  # the outliers' rows are not published
    suppressed, table = published(0.0047, "below.duckdb")
    assert suppressed == 0 and len(table) == 625 and table.age_hi.max() == 92


@pytest.mark.parametrize("models", ['t = 0.35\ncloseness = "equal"', 'l = 2\ndiversity = "entropy"'])
def test_suppress_with_a_sensitive_value_model_publishes_a_table_meeting_both(tmp_path, models):
    """The second Mondrian honours the model over the kept rows; the verifier reads the
    published table (its own distribution) and the release passes, rows suppressed."""
    from privpub.tasks.demo_data import census

    release_id = publish(tmp_path, census(600, seed=2), f"suppress = 0.2\n{models}")
    m = Store(tmp_path / "privpub.duckdb").release(release_id)["metrics"]
    privacy = m[m.kind == "privacy"]
    name = "t-closeness" if models.startswith("t") else "entropy-l-diversity"
    assert privacy.passed.all() and name in privacy.name.tolist()
    assert int(m[(m.kind == "utility") & (m.name == "suppressed-rows")].value.iloc[0]) > 0
    ok, lines = reverify(tmp_path / "privpub.duckdb", release_id)
    assert ok and any(line.startswith(f"PASS {name}") for line in lines), lines

"""Issue 39 item 2: publish refuses a quasi-identifier that is a near-unique identifier (more
distinct values than half the people, and more than 100: schemas/input.py `is_near_unique`) unless
the spec marks it `near_unique = "allow"`; counted in people (the person id's distinct values under
`rows_per_person = "many"`), a date in its unit; one line, before any work, on every path that
validates (the Python API, the CLI, explore, the Dask path). Each threshold is checked just inside
and just outside, and against a count from the definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privpub
from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.executor import Executor
from privpub.tasks.validate import validate
from privpub.tasks.validate.parted import load_on_cluster
from tests.test_drivers import _without_a_server


def table(people: int, distinct: int, rows_each: int = 1, seed: int = 0) -> pd.DataFrame:
    """`people` people with `rows_each` rows each; the QI `code` takes exactly `distinct` values
    (value i % distinct for row i), `age` 20 values, the sensitive `s` 4."""
    rng = np.random.default_rng(seed)
    n = people * rows_each
    return pd.DataFrame(
        {
            "pid": np.repeat([f"person-{i:05d}" for i in range(people)], rows_each),
            "code": [f"c{i % distinct:05d}" for i in rng.permutation(n)],
            "age": rng.integers(20, 40, n),
            "s": np.array(["a", "b", "c", "d"], dtype=object)[rng.integers(0, 4, n)],
        }
    )


def spec(mark: dict | None = None, **dataset) -> dict:
    return {
        "dataset": {
            "name": "t",
            "person_id": "pid",
            "sensitive": "s",
            "qi": [{"name": "code", "kind": "categorical", **(mark or {})}, {"name": "age", "kind": "numeric"}],
            **dataset,
        },
        "technique": {"name": "generalization", "k": 2},
        "output": {"seed": 1},
    }


def refusal(distinct: int, people: int) -> str:
    return (
        f"[dataset] qi 'code': {distinct:,} distinct values for {people:,} people (over 50% as many values as "
        "people): a near-unique identifier, not a quasi-identifier; leave it out of qi or publish a coarser column, "
        'or mark it near_unique = "allow" to publish it generalized on purpose'
    )


def brute_force_refuses(frame: pd.DataFrame, qi: str, person: str) -> bool:
    """The definition, counted with Python sets: more values than half the people, and over 100."""
    values = set(frame[qi].tolist())
    people = set(frame[person].tolist())
    return len(values) > 100 and 2 * len(values) > len(people)


@pytest.mark.parametrize("distinct, refused", [(200, False), (201, True)])
def test_a_qi_with_more_values_than_half_the_people_is_refused_just_outside_the_threshold(
    tmp_path, monkeypatch, distinct, refused
):
    """Just inside and just outside half the people.

    Promise: near-unique-qi-refused."""
    monkeypatch.chdir(tmp_path)
    frame = table(400, distinct)
    assert brute_force_refuses(frame, "code", "pid") is refused
    if not refused:
        release = privpub.publish(frame, spec())
        assert len(release.tables["table"]) == 400
        return
    with pytest.raises(SpecError) as err:
        privpub.publish(frame, spec())
    assert str(err.value) == refusal(201, 400)
    assert privpub.history("privpub.duckdb").empty and not list(tmp_path.rglob("*.parquet"))
    assert privpub.Store(tmp_path / "privpub.duckdb").audit_log().outcome.tolist() == ["failed"]


@pytest.mark.parametrize("distinct, refused", [(100, False), (101, True)])
def test_a_column_of_at_most_100_values_is_never_near_unique(tmp_path, monkeypatch, distinct, refused):
    """150 people: 100 values are more than half of them, but the floor keeps them; 101 are not."""
    monkeypatch.chdir(tmp_path)
    frame = table(150, distinct)
    assert brute_force_refuses(frame, "code", "pid") is refused
    data_spec = spec_from_dict({**spec(), "dataset": {**spec()["dataset"], "input": "x.csv"}})
    if refused:
        with pytest.raises(SpecError, match=r"^\[dataset\] qi 'code': 101 distinct values for 150 people"):
            validate(frame, data_spec, None)
    else:
        assert validate(frame, data_spec, None).n == 150


def test_near_unique_allow_publishes_the_marked_qi_generalized(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table(400, 201)
    release = privpub.publish(frame, spec({"near_unique": "allow"}))
    published = release.tables["table"]
    assert len(published) == 400
    sets = published["code"].map(lambda v: tuple(sorted(v)))
    assert sets.value_counts().min() >= 2  # generalized: every published set is shared
    # the mark is strict: one value, named in the message
    for bad in ("yes", True, "Allow"):
        with pytest.raises(SpecError, match=r"near_unique"):
            privpub.publish(frame, spec({"near_unique": bad}))


def test_under_many_rows_per_person_people_are_counted_not_rows():
    """400 people with 2 rows each: 201 values are a quarter of the rows but over half the people."""
    for distinct, refused in [(200, False), (201, True)]:
        frame = table(400, distinct, rows_each=2)
        assert brute_force_refuses(frame, "code", "pid") is refused
        many = spec_from_dict({**spec(), "dataset": {**spec()["dataset"], "input": "x.csv", "rows_per_person": "many"}})
        if refused:
            with pytest.raises(SpecError) as err:
                validate(frame, many, None)
            assert str(err.value) == refusal(201, 400)
        else:
            assert validate(frame, many, None).people == 400


@pytest.mark.parametrize(
    "people, rows_each, distinct",
    [(p, r, d) for p, r in [(202, 1), (301, 1), (250, 3), (120, 2)] for d in (p // 2, p // 2 + 1, p // 2 + 2)],
)
def test_the_check_agrees_with_a_count_from_the_definition(people, rows_each, distinct):
    """The check against a direct count of values and people.

    Promise: near-unique-qi-refused."""
    frame = table(people, distinct, rows_each=rows_each, seed=people + distinct)
    body = {**spec()["dataset"], "input": "x.csv", "rows_per_person": "many" if rows_each > 1 else "one"}
    given = spec_from_dict({**spec(), "dataset": body})
    try:
        validate(frame, given, None)
        refused = False
    except SpecError:
        refused = True
    assert refused is brute_force_refuses(frame, "code", "pid")


def test_a_date_is_counted_in_its_unit(tmp_path, monkeypatch):
    """Birth dates over 50 years: near-unique by the day in 400 people, not by the year."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    frame = table(400, 10).assign(
        born=(pd.Timestamp("1950-01-01") + pd.to_timedelta(rng.integers(0, 18_000, 400), unit="D")).strftime("%Y-%m-%d")
    )
    by_day = spec()
    by_day["dataset"]["qi"] = [{"name": "born", "kind": "date"}]
    with pytest.raises(SpecError, match=r"^\[dataset\] qi 'born': \d+ distinct values for 400 people"):
        privpub.publish(frame, by_day)
    by_year = spec()
    by_year["dataset"]["qi"] = [{"name": "born", "kind": "date", "hierarchy": "year"}]
    assert len(privpub.publish(frame, by_year).tables["table"]) == 400


def test_the_cli_and_explore_refuse_it_with_one_line(tmp_path):
    table(400, 201).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "spec.toml").write_text(
        '[dataset]\nname = "t"\ninput = "t.csv"\nperson_id = "pid"\nsensitive = "s"\n'
        'qi = [{ name = "code", kind = "categorical" }, { name = "age", kind = "numeric" }]\n'
        '[technique]\nname = "generalization"\nk = 2\n'
    )
    res = _without_a_server(tmp_path, tmp_path, "-m", "privpub.flows.cli", "publish", "spec.toml")
    assert res.returncode == 1
    assert res.stderr.strip() == f"privpub: error: {refusal(201, 400)}"
    assert not (tmp_path / "releases").exists()
    with pytest.raises(SpecError, match=r"^\[dataset\] qi 'code': 201 distinct values for 400 people"):
        privpub.explore(tmp_path / "spec.toml", {"k": [2, 5]})


def test_the_dask_path_counts_values_over_every_file(tmp_path):
    """Four files of 100 rows: each holds at most 100 values (under the floor), the table 201."""
    frame = table(400, 201)
    folder = tmp_path / "data"
    folder.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(400), 4)):
        frame.iloc[rows].to_parquet(folder / f"part-{i}.parquet", index=False)
    body = {**spec()["dataset"], "input": "data"}
    with pytest.raises(SpecError) as err:
        load_on_cluster(spec_from_dict({**spec(), "dataset": body}, base_dir=tmp_path), Executor())
    assert str(err.value) == refusal(201, 400)
    body["qi"] = [{"name": "code", "kind": "categorical", "near_unique": "allow"}, {"name": "age", "kind": "numeric"}]
    assert load_on_cluster(spec_from_dict({**spec(), "dataset": body}, base_dir=tmp_path), Executor()).n == 400
    # a QI whose values the spec fixes (an order) is counted from the data too
    body["qi"] = [{"name": "code", "kind": "ordinal", "order": sorted(frame.code.unique())}]
    with pytest.raises(SpecError, match=r"^\[dataset\] qi 'code': 201 distinct values for 400 people"):
        load_on_cluster(spec_from_dict({**spec(), "dataset": body}, base_dir=tmp_path), Executor())

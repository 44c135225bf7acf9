"""Classification accuracy for `[evaluate] target` (issue 44 item 2): the held-out people drawn
before anonymizing never enter the release, the figures equal a direct scikit-learn computation,
the same seed gives the same figures, and every refusal is one line naming `[evaluate] target`
or `holdout`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import privpub
from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store

SEED = 11


def people(n: int = 240, seed: int = 3, rows_each: int = 1) -> pd.DataFrame:
    """n people (rows_each rows each): two numeric QIs, a categorical QI `grp` that follows age,
    and a sensitive `tag` unique per row (so a published row names its input row)."""
    rng = np.random.default_rng(seed)
    pid = np.repeat(np.arange(n), rows_each)
    age = rng.integers(20, 70, n)[pid] + rng.integers(0, 2, len(pid))
    hours = rng.integers(10, 60, len(pid))
    grp = np.where(age < 40, "young", np.where(age < 55, "mid", "old")).astype(object)
    return pd.DataFrame(
        {
            "pid": [f"p{i:04d}" for i in pid],
            "age": age,
            "hours": hours,
            "grp": grp,
            "tag": [f"t{i:05d}" for i in range(len(pid))],
        }
    )


def spec(target: str | None = "grp", k: int = 5, **evaluate) -> dict:
    out = {
        "dataset": {
            "name": "people",
            "person_id": "pid",
            "sensitive": "tag",
            "qi": [
                {"name": "age", "kind": "numeric"},
                {"name": "hours", "kind": "numeric"},
                {"name": "grp", "kind": "categorical"},
            ],
        },
        "technique": {"name": "generalization", "k": k},
        "output": {"seed": SEED},
    }
    if target is not None:
        out["evaluate"] = {"target": target, **evaluate}
    return out


def held_people(n_people: int, fraction: float, seed: int) -> tuple[np.ndarray, int]:
    """The definition: the release seed's third stream draws round(fraction x people) people;
    the model's random_state is that stream's second child's first word."""
    rng_seq, model_seq = np.random.SeedSequence(seed).spawn(3)[2].spawn(2)
    chosen = np.random.default_rng(rng_seq).choice(n_people, size=round(fraction * n_people), replace=False)
    return np.sort(chosen), int(model_seq.generate_state(1)[0])


def figure(release, name: str):
    f = release.figures
    return f[(f.kind == "utility") & (f.name == name)].value.iloc[0]


def test_held_out_people_never_enter_the_release_nor_its_private_tables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = people()
    release = privpub.publish(frame, spec())
    held, _ = held_people(240, 0.2, SEED)
    held_tags = set(frame.tag[np.isin(np.arange(240), held)])
    kept_tags = set(frame.tag) - held_tags
    published = set(release.tables["table"].tag)
    assert len(held_tags) == 48 and published == kept_tags and not published & held_tags
    private = Store(release.state).private(str(release))
    for name, value in private.items():  # no held-out row, as a table or as text
        text = value.to_pandas().to_string() if hasattr(value, "to_pandas") else str(value)
        assert not any(t in text for t in held_tags), name
    report = release.report.read_text()
    assert "Held out: 48 people (48 rows)" in report and "withheld from publication" in report
    acc = figure(release, "classification-accuracy")
    assert 0 <= acc <= 1 and 0 <= figure(release, "input-classification-accuracy") <= 1
    assert figure(release, "held-out-people") == figure(release, "held-out-rows") == 48


def test_all_rows_of_a_held_out_person_are_held_out_together(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = people(n=120, rows_each=3)
    s = spec(holdout=0.25)
    s["dataset"]["rows_per_person"] = "many"
    release = privpub.publish(frame, s)
    held, _ = held_people(120, 0.25, SEED)
    # people are numbered in order of first appearance: p0000 is 0, ...
    is_held = np.isin(frame.pid.str[1:].astype(int), held)
    assert set(release.tables["table"].tag) == set(frame.tag[~is_held])
    assert figure(release, "held-out-people") == 30 and figure(release, "held-out-rows") == 90
    assert 0 <= figure(release, "classification-accuracy") <= 1


def test_accuracies_equal_a_direct_scikit_learn_computation(tmp_path, monkeypatch):
    """target = the sensitive column (published as is): the release's features are its ranges'
    midpoints, the input's its values; both models tested on the held-out input rows."""
    monkeypatch.chdir(tmp_path)
    frame = people()
    s = spec(target=None)
    s["dataset"]["sensitive"], s["dataset"]["qi"] = "grp", s["dataset"]["qi"][:2]
    s["evaluate"] = {"target": "grp", "holdout": 0.3}
    frame = frame.drop(columns="tag")
    release = privpub.publish(frame, s)
    held, model_seed = held_people(240, 0.3, SEED)
    test = np.isin(np.arange(240), held)
    x_test, y_test = frame.loc[test, ["age", "hours"]].to_numpy(float), frame.grp[test].to_numpy()
    table = release.tables["table"]
    x_rel = np.column_stack([(table[f"{q}_lo"] + table[f"{q}_hi"]) / 2 for q in ("age", "hours")])

    def accuracy(x, y) -> float:
        model = RandomForestClassifier(n_estimators=50, random_state=model_seed, n_jobs=1).fit(x, y)
        return float((model.predict(x_test) == y_test).mean())

    train = frame.loc[~test]
    assert figure(release, "input-classification-accuracy") == accuracy(
        train[["age", "hours"]].to_numpy(float), train.grp.to_numpy()
    )
    assert figure(release, "classification-accuracy") == accuracy(x_rel, table.grp.to_numpy())


def test_the_same_seed_gives_the_same_figures_and_explore_agrees(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = people()
    first = privpub.publish(frame, spec(), state="a.duckdb", overrides={"output": {"dir": "a"}})
    again = privpub.publish(frame, spec(), state="b.duckdb", overrides={"output": {"dir": "b"}})
    names = ["classification-accuracy", "input-classification-accuracy"]
    assert [figure(first, n) for n in names] == [figure(again, n) for n in names]
    rows = privpub.explore(frame, spec(), {"k": [5]}, seed=SEED)
    assert [rows[n].iloc[0] for n in names] == [figure(first, n) for n in names]
    # a target changes the release (its people): its key is not that of the same seed without one
    plain = privpub.publish(frame, spec(target=None), state="c.duckdb", overrides={"output": {"dir": "c"}})
    assert (
        plain.info["release_key"] != first.info["release_key"]
        and len(plain.tables["table"]) == 240
        and len(first.tables["table"]) == 192
    )


def test_a_technique_with_no_one_table_reading_says_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = spec()
    s["technique"] = {"name": "muco", "delta": 0.5}
    s["dataset"]["qi"] = s["dataset"]["qi"][:2]
    s["evaluate"]["target"] = "age"
    release = privpub.publish(people(), s)
    f = release.figures.set_index("name")
    assert str(f.value["classification-accuracy"]).startswith("does not apply: ")
    assert 0 <= f.value["input-classification-accuracy"] <= 1


@pytest.mark.parametrize(
    ("evaluate", "words"),
    [
        ({"target": "income"}, "[evaluate] target = 'income': unknown column"),
        ({"target": "pid"}, "[evaluate] target = 'pid': the person id column is not a target"),
        ({"target": 3}, "[evaluate] target = 3: must be a column name"),
        ({"target": "grp", "holdout": 0}, "[evaluate] holdout = 0: must be a number above 0 and at most 0.5"),
        ({"target": "grp", "holdout": 0.51}, "[evaluate] holdout = 0.51: must be a number above 0"),
        ({"target": "grp", "holdout": "0.2"}, "[evaluate] holdout = '0.2': must be a number"),
        ({"target": "grp", "holdout": True}, "[evaluate] holdout = True: must be a number"),
        ({"target": "grp", "holdouts": 0.2}, "[evaluate] holdouts: unknown key"),
    ],
)
def test_strict_refusals_in_one_line(evaluate, words):
    s = spec(target=None)
    s["evaluate"], s["dataset"]["input"] = evaluate, "people.csv"
    with pytest.raises(SpecError) as err:
        spec_from_dict(s)
    assert str(err.value).startswith(words) and "\n" not in str(err.value)


def test_just_inside_holdout_bounds_and_a_target_of_one_class(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for inside in (0.5, 1e-9):  # just inside both bounds
        s = spec(holdout=inside)
        s["dataset"]["input"] = "people.csv"
        assert spec_from_dict(s).evaluate.holdout == inside
    frame = people()
    frame["grp"] = "one"
    with pytest.raises(InputError, match=r"^\[evaluate\] target = 'grp': the input holds one class only"):
        privpub.publish(frame, spec())

"""Issue 44 item 3: `privpub explore SPEC --optimize FIGURE` / `privpub.explore(..., optimize=)`:
the optimum equals the best passing setting of the grid computed point by point (two tables),
the ties rule, the refusals, a non-dominated Pareto front, the page, and the printed publish
command publishing exactly the chosen release."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privpub
from privpub.flows.explore import parse_sets, settings_of
from privpub.flows.optimize import Optimum, choose
from privpub.flows.settings import MAX_SETTINGS, parse_publish_sets
from privpub.schemas.errors import SpecError
from privpub.state.store import Store
from privpub.tasks.demo_data import census, census_spec
from tests.test_explore import same_figure
from tests.test_python_explore_set import cli

CODES = ["10115", "10117", "10119", "10245", "10247", "20095", "20097", "20099", "30159", "30161"]


def census_frame_spec(seed: int = 7) -> tuple[pd.DataFrame, dict]:
    spec = census_spec("unused", k=5, l=None, seed=seed)
    del spec["dataset"]["input"]
    return census(300, seed=3), spec


def postcode_frame_spec() -> tuple[pd.DataFrame, dict]:
    """Another shape: a categorical hierarchy (postcodes masked digit by digit), a date QI
    generalized by year and a 1-5 score; l-diversity and a [risk] limit vary too."""
    rng = np.random.default_rng(11)
    n = 400
    born = pd.Timestamp("1940-01-01") + pd.to_timedelta(rng.integers(0, 25_000, n), unit="D")
    frame = pd.DataFrame(
        {
            "pid": [f"p{i:05d}" for i in range(n)],
            "born": born.strftime("%Y-%m-%d"),
            "zip": np.array(CODES, dtype=object)[rng.integers(0, len(CODES), n)],
            "score": rng.integers(1, 6, n),
            "diagnosis": np.array([f"d{i}" for i in range(6)], dtype=object)[rng.integers(0, 6, n)],
        }
    )
    qi = [
        {"name": "born", "kind": "date", "hierarchy": "year"},
        {"name": "zip", "kind": "categorical", "hierarchy": "mask"},
        {"name": "score", "kind": "numeric"},
    ]
    spec = {
        "dataset": {"name": "people", "person_id": "pid", "sensitive": "diagnosis", "qi": qi},
        "technique": {"name": "generalization", "k": 5},
        "output": {"seed": 3},
    }
    return frame, spec


def number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def exhaustive_best(frame, spec, grid, figure, lower: bool, state: Path):
    """The oracle: explore called once per setting of the grid; the best passing setting by
    the figure, ties to the lower prosecutor-risk-max, then to the first in grid order."""
    scored = []
    for position, setting in enumerate(settings_of(grid)):
        row = privpub.explore(frame, spec, {n: [v] for n, v in setting.items()}, state=state).iloc[0]
        if row["passed"]:
            u = number(row[figure])
            scored.append(((u if lower else -u), row["prosecutor-risk-max"], position, setting, row))
    assert scored, "the test's grid must have a passing setting"
    best = min(scored, key=lambda t: t[:3])
    return best[3], best[4], len(scored)


@pytest.mark.parametrize(
    "table, grid, figure, lower",
    [
        ("census", {"k": range(4, 13, 2), "suppress": [0, 0.05], "risk.max_prosecutor": [0.15]}, "gen-iloss", True),
        ("postcodes", {"k": [3, 6, 12], "l": [2, 3], "risk.max_prosecutor": [0.2]}, "precision", False),
    ],
)
def test_the_optimum_is_the_best_passing_setting_of_the_exhaustive_grid(
    tmp_path, monkeypatch, table, grid, figure, lower
):
    monkeypatch.chdir(tmp_path)
    frame, spec = census_frame_spec() if table == "census" else postcode_frame_spec()
    found = privpub.explore(frame, spec, grid, optimize=figure, state="opt.duckdb")
    assert isinstance(found, Optimum) and found.strategy == "exhaustive"
    assert found.better == ("lower" if lower else "higher")
    assert found.settings == len(settings_of(grid)) and len(found.rows) == found.settings
    setting, row, passing = exhaustive_best(frame, spec, grid, figure, lower, tmp_path / "oracle.duckdb")
    assert 0 < passing < found.settings  # some settings fail the [risk] limit: the choice skips them
    assert found.passed == passing
    assert found.setting == setting
    assert found.figures[figure] == row[figure]
    assert found.figures["prosecutor-risk-max"] == row["prosecutor-risk-max"]
    assert found.risk_figure == "prosecutor-risk-max"
    assert [p for p in found.front if p.chosen] == [p for p in found.front if p.setting == setting]
    assert_non_dominated(found)


def assert_non_dominated(found: Optimum) -> None:
    """The front read against the rows directly: no passing setting is at least as good on both
    figures and better on one than a front point, and every passing setting off the front is so
    beaten by one on it."""
    sign = 1 if found.better == "lower" else -1
    rows = found.rows[found.rows.passed]
    points = [
        (sign * u, r, dict(zip(found.setting, vals)))
        for u, r, *vals in rows[[found.figure, found.risk_figure, *found.setting]].itertuples(index=False)
    ]

    def beats(a, b) -> bool:
        return a[0] <= b[0] and a[1] <= b[1] and (a[0] < b[0] or a[1] < b[1])

    front = [(sign * p.utility, p.risk, p.setting) for p in found.front]
    assert front and all(not any(beats(q, p) for q in points) for p in front)
    on_front = [p[2] for p in front]
    for p in points:
        if p[2] not in on_front:
            assert any(beats(q, p) for q in front), p
    assert [p[1] for p in front] == sorted(p[1] for p in front)  # by risk


def test_publishing_the_optimum_from_python_records_every_figure_it_showed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame, spec = census_frame_spec()
    best = privpub.explore(frame, spec, {"k": [4, 8], "suppress": [0, 0.05]}, optimize="kl-divergence")
    assert best.setting is not None and best.better == "lower"
    released = privpub.publish(frame, spec, set=best.setting, overrides={"output": {"seed": best.seed}})
    stored = Store(tmp_path / "privpub.duckdb").release(released.id)["metrics"]
    assert set(stored.name) == set(best.figures)
    for r in stored.itertuples():
        assert same_figure(best.figures[r.name], r.value, r.text_value), (r.name, best.figures[r.name])
    assert stored.set_index("name").loc["kl-divergence", "value"] == min(best.rows[best.rows.passed]["kl-divergence"])


# --- ties --------------------------------------------------------------------------------------


class FakeRow:
    def __init__(self, setting, passed, figures):
        self.setting, self.passed, self.figures = setting, passed, figures


def test_ties_go_to_the_lower_risk_then_to_the_first_setting_in_the_grid():
    rows = [
        FakeRow({"k": 1}, False, {"gen-iloss": 0.1, "prosecutor-risk-max": 0.5}),  # better but refused
        FakeRow({"k": 2}, True, {"gen-iloss": 0.3, "prosecutor-risk-max": 0.2}),
        FakeRow({"k": 3}, True, {"gen-iloss": 0.3, "prosecutor-risk-max": 0.1}),  # tie: lower risk wins
        FakeRow({"k": 4}, True, {"gen-iloss": 0.3, "prosecutor-risk-max": 0.1}),  # same both: grid order
        FakeRow({"k": 5}, True, {"gen-iloss": 0.4, "prosecutor-risk-max": 0.05}),
    ]
    choice = choose(rows, "gen-iloss")
    assert choice.best == 2 and choice.passed == 4 and choice.risk_figure == "prosecutor-risk-max"
    assert choice.front == [4, 2, 3]  # k=2 is beaten by k=3; equal points both stay
    assert choose(list(reversed(rows)), "gen-iloss").best == 1  # k=4 now first in the grid
    # higher is better: precision's best is the highest, ties by risk the same way
    for r, p in zip(rows, (0.9, 0.5, 0.7, 0.7, 0.6)):
        r.figures["precision"] = p
    assert choose(rows, "precision").best == 2
    assert choose(rows[:1], "gen-iloss").best is None  # nothing passes: nothing chosen


def test_identical_releases_tie_and_the_first_in_the_grid_is_chosen(census_dir, monkeypatch):
    """On the census, k = 25 and k = 30 publish the same classes (the smallest holds 30)."""
    monkeypatch.chdir(census_dir)
    frame, spec = census(600, seed=3), census_spec("unused", k=5, l=None, seed=7)
    del spec["dataset"]["input"]
    a = privpub.explore(frame, spec, {"k": [25, 30]}, optimize="gen-iloss")
    rows = a.rows.set_index("k")
    assert rows.loc[25, "gen-iloss"] == rows.loc[30, "gen-iloss"]  # the premise: a real tie
    assert rows.loc[25, "prosecutor-risk-max"] == rows.loc[30, "prosecutor-risk-max"]
    assert a.setting == {"k": 25}
    assert privpub.explore(frame, spec, {"k": [30, 25]}, optimize="gen-iloss").setting == {"k": 30}


# --- ranges and refusals -----------------------------------------------------------------------


def test_ranges_are_read_strictly():
    assert parse_sets(["k=5..8", "suppress=0,0.01"]) == {"k": [5, 6, 7, 8], "suppress": [0, 0.01]}
    assert parse_sets(["k=5..50..15"]) == {"k": [5, 20, 35, 50]}
    assert parse_sets(["k=5..5"]) == {"k": [5]}  # just inside: one value
    refusals = {
        "k=50..5": "--set k=50..5: empty range (5 < 50)",
        "k=5..50..0": "--set k=5..50..0: a range's step must be an integer >= 1, got 0",
        "k=a..b": "--set k=a..b: a range is two integers START..END",
        "k=0.5..3": "--set k=0.5..3: a range is two integers",
        f"k=1..{MAX_SETTINGS + 1}": f"--set k=1..{MAX_SETTINGS + 1}: {MAX_SETTINGS + 1} values, more than",
    }
    for text, message in refusals.items():
        with pytest.raises(SpecError) as err:
            parse_sets([text])
        assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert len(parse_sets([f"k=1..{MAX_SETTINGS}"])["k"]) == MAX_SETTINGS  # just inside the bound
    with pytest.raises(SpecError, match=r"--set k=5..9: publish takes one value per name \(a list or range"):
        parse_publish_sets(["k=5..9"])
    with pytest.raises(SpecError, match=f"the grid has 1,000 settings, more than the {MAX_SETTINGS}"):
        settings_of({"k": range(1, 101), "l": range(1, 11)})


@pytest.mark.parametrize(
    "grid, optimize, message",
    [
        ({"k": [5]}, "nosuch", "optimize='nosuch': not a utility figure with a better direction"),
        ({"k": [5]}, "groups", "optimize='groups': not a utility figure with a better direction"),
        ({"k": [5]}, "k-anonymity", "optimize='k-anonymity': not a utility figure"),
        ({"nosuch": [1, 2]}, "gen-iloss", "setting nosuch=1: [technique] nosuch: unknown key"),
        ({"k": [5, 1.5]}, "gen-iloss", "setting k=1.5: [technique] k must be an integer"),
        ({"diversity": [1]}, "gen-iloss", "setting diversity=1: [technique] diversity"),
    ],
)
def test_a_bad_figure_or_setting_is_refused_in_one_line_before_any_work(tmp_path, monkeypatch, grid, optimize, message):
    monkeypatch.chdir(tmp_path)
    frame, spec = census_frame_spec()
    with pytest.raises(SpecError) as err:
        privpub.explore(frame, spec, grid, optimize=optimize, state="s.duckdb")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert not (tmp_path / "explore-census.html").exists()  # no page: nothing was computed
    log = Store(tmp_path / "s.duckdb").audit_log()
    assert log.outcome.tolist() == ["refused"]


def test_a_figure_that_does_not_apply_to_the_technique_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame, spec = census_frame_spec()
    spec["technique"] = {"name": "muco", "delta": "1/6", "l": 3}
    said: list[str] = []
    with pytest.raises(SpecError) as err:
        privpub.explore(frame, spec, {"l": [2, 3, 4]}, optimize="gen-iloss", state="s.duckdb", progress=said.append)
    text = str(err.value)
    assert text.startswith("optimize='gen-iloss': does not apply: MuCo publishes perturbed points") and "\n" not in text
    assert sum(line.startswith("setting ") for line in said) == 1  # refused at the first setting computed
    assert Store(tmp_path / "s.duckdb").audit_log().outcome.tolist() == ["refused"]
    # its own loss figure is one it can optimize
    assert privpub.explore(frame, spec, {"l": [2, 3]}, optimize="iloss", state="s.duckdb").better == "lower"


# --- the command: table, page, JSON, and the printed publish ----------------------------------


def test_the_printed_publish_command_publishes_the_chosen_release(census_dir, tmp_path):
    spec = census_dir / "spec.toml"
    spec.write_text(
        "[dataset]\n"
        + "".join(
            f"{k} = {json.dumps(v)}\n"
            for k, v in {"name": "census", "input": "census.csv", "person_id": "pid", "sensitive": "occupation"}.items()
        )
        + 'qi = [{name = "age", kind = "numeric"}, {name = "sex", kind = "categorical"}, '
        '{name = "marital", kind = "categorical"}, {name = "race", kind = "categorical"}]\n'
        '[technique]\nname = "generalization"\nk = 5\n[output]\nseed = 7\n'
    )
    res = cli(
        census_dir,
        tmp_path,
        "explore",
        "spec.toml",
        "--optimize",
        "gen-iloss",
        "--set",
        "k=4..10..2",
        "--set",
        "suppress=0,0.02",
        "--set",
        "risk.max_prosecutor=0.2",
        "--html",
        "page.html",
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["setting", "result", "k-anonymity"] and "gen-iloss" in lines[0]
    chosen = next(line for line in lines if line.startswith("chosen: "))
    command = next(line for line in lines if line.startswith("publish it: ")).removeprefix("publish it: ")
    words = shlex.split(command)
    at = words.index("publish")
    assert words[at + 1 :][:1] == ["spec.toml"] and words[-2:] == ["--seed", "7"]
    figure = float(chosen.split("gen-iloss ")[1].split(",")[0])
    # nothing published by explore; the page marks the chosen setting and draws the front
    assert not (census_dir / "releases").exists()
    page = (census_dir / "page.html").read_text()
    assert 'class="chosen"' in page and 'class="front"' in page and "Optimized by" in page
    published = cli(census_dir, tmp_path, *words[at:], "--quiet")
    assert published.returncode == 0, published.stderr
    metrics = Store(census_dir / "privpub.duckdb").release(published.stdout.strip())["metrics"].set_index("name")
    assert metrics.loc["gen-iloss", "value"] == pytest.approx(figure, rel=1e-5)  # printed to 6 digits
    # the JSON form: the same choice, exactly
    res = cli(
        census_dir,
        tmp_path,
        "explore",
        "spec.toml",
        "--optimize",
        "gen-iloss",
        "--set",
        "k=4..10..2",
        "--set",
        "suppress=0,0.02",
        "--set",
        "risk.max_prosecutor=0.2",
        "--json",
    )
    last = json.loads(res.stdout.splitlines()[-1])
    assert last["optimize"] == "gen-iloss" and last["publish"] == command and last["strategy"] == "exhaustive"
    assert metrics.loc["gen-iloss", "value"] == next(p["gen-iloss"] for p in last["front"] if p["chosen"])
    assert f"--set k={last['chosen']['k']}" in command


def test_nothing_passing_exits_1_with_nothing_to_publish(census_dir, tmp_path):
    spec = census_dir / "spec.toml"
    spec.write_text(
        '[dataset]\nname = "census"\ninput = "census.csv"\nperson_id = "pid"\nsensitive = "occupation"\n'
        'qi = [{name = "age", kind = "numeric"}, {name = "sex", kind = "categorical"}]\n'
        '[technique]\nname = "generalization"\nk = 5\n[output]\nseed = 7\n'
    )
    res = cli(
        census_dir,
        tmp_path,
        "explore",
        "spec.toml",
        "--optimize",
        "gen-iloss",
        "--set",
        "k=2..3",
        "--set",
        "risk.max_prosecutor=0.01",
        "--quiet",
    )
    assert res.returncode == 1
    assert "no setting passes: nothing to choose" in res.stdout and "publish it" not in res.stdout

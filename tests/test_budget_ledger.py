"""The privacy-budget ledger of a series (issue 45 item 2, docs/dp.md "The budget ledger"): a
series of monthly DP releases refused exactly when `[series] budget` runs out (basic sequential
composition: the spends add up), the refusal's one line and audit row, the ledger in `privpub
history`, the report and the Python API, a repeat spending again, DP and syntactic releases never
mixed in one series, an edited ledger row failing verify, and the strict `[series] budget` key.

The DP technique here is a test-only plug-in (`privpub.plugin.register`): generalization with an
`epsilon` (and `delta`) parameter it declares as its spend; what it publishes is generalization's
(trivial but valid). Expected totals are summed independently with `fractions.Fraction` from the
parameters' decimal text."""

from __future__ import annotations

import shutil
import tomllib
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from pydantic import Field

import privpub
from privpub import plugin
from privpub.flows.cli import main
from privpub.schemas.errors import SpecError
from privpub.schemas.spec import SeriesSpec, read_section
from privpub.state import chain
from privpub.tasks.techniques import registry
from privpub.tasks.techniques.generalization.params import GeneralizationParams
from privpub.tasks.techniques.generalization.technique import Generalization
from privpub.testing import planted_census


class SpendParams(GeneralizationParams):
    epsilon: float = Field(gt=0, allow_inf_nan=False)
    delta: float = Field(0.0, ge=0, lt=1)


class SpendingGeneralization(Generalization):
    """Generalization that declares a DP spend from its parameters: the ledger's test double."""

    name = "test-dp-spend"
    Params = SpendParams

    def privacy_spend(self) -> dict[str, float] | None:
        return {"epsilon": self.params.epsilon, "delta": self.params.delta}


@pytest.fixture(scope="module")
def dp_technique():
    registry.registered()
    saved, modules = dict(registry._REGISTRY), dict(registry.MODULES)
    yield plugin.register(SpendingGeneralization)
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    registry.MODULES.clear()
    registry.MODULES.update(modules)


def spec(folder: Path, epsilon: float | None, seed: int, budget: dict | None = None, **technique) -> dict:
    out = {
        "dataset": {
            "name": "census",
            "person_id": "pid",
            "sensitive": "occupation",
            "qi": [{"name": "age", "kind": "numeric"}, {"name": "sex", "kind": "categorical"}],
        },
        "technique": {"name": "generalization", "k": 5, **technique},
        "output": {"dir": str(folder / "releases"), "state": str(folder / "state.duckdb"), "seed": seed},
    }
    if epsilon is not None:
        out["technique"].update(name="test-dp-spend", epsilon=epsilon)
    if budget is not None:
        out["series"] = {"budget": budget}
    return out


def month(i: int):
    return planted_census(120, seed=100 + i)


BUDGET = {"epsilon": 0.3}  # 0.1 three times is 0.30000000000000004 in floats: exactness matters


@pytest.fixture(scope="module")
def monthly(dp_technique, tmp_path_factory):
    """Three monthly releases of epsilon 0.1 under a budget of 0.3, with the refusals around the
    third: (folder, release ids, refusal lines)."""
    folder = tmp_path_factory.mktemp("monthly")
    ids = [str(privpub.publish(month(i), spec(folder, 0.1, seed=i, budget=BUDGET))) for i in (1, 2)]
    refusals = []
    with pytest.raises(privpub.PrivacyRefused) as outside:  # just outside: 0.2 + 0.1000001 > 0.3
        privpub.publish(month(3), spec(folder, 0.1000001, seed=3, budget=BUDGET))
    refusals.append(str(outside.value))
    ids.append(str(privpub.publish(month(3), spec(folder, 0.1, seed=3, budget=BUDGET))))  # just inside: == 0.3
    with pytest.raises(privpub.PrivacyRefused) as spent:
        privpub.publish(month(4), spec(folder, 0.1, seed=4, budget=BUDGET))
    refusals.append(str(spent.value))
    return folder, ids, refusals


def figure_text(state: Path, release_id: str, name: str) -> str:
    with duckdb.connect(str(state), read_only=True) as con:
        row = con.execute(
            "SELECT text_value FROM release_metrics WHERE release_id = ? AND kind = 'privacy' AND name = ?",
            [release_id, name],
        ).fetchone()
    assert row is not None, (release_id, name)
    return str(row[0])


def test_monthly_releases_are_refused_exactly_when_the_budget_runs_out(monthly):
    folder, ids, refusals = monthly
    state = folder / "state.duckdb"
    assert len(ids) == 3 and [i.split("-")[1] for i in ids] == ["0001", "0002", "0003"]
    # the ledger's figures against a direct sum of the parameters
    expected = [Fraction("0.1") * n for n in (1, 2, 3)]
    for rid, total in zip(ids, expected):
        assert Fraction(figure_text(state, rid, "epsilon")) == Fraction("0.1")
        assert Fraction(figure_text(state, rid, "series-epsilon")) == total
    assert Fraction(figure_text(state, ids[-1], "series-epsilon")) == Fraction(BUDGET["epsilon"]).limit_denominator()
    # nothing was committed by the refusals
    assert privpub.history(state).release_id.tolist() == ids


def test_the_refusal_names_the_spend_the_releases_and_what_remains(monthly):
    folder, ids, (outside, spent) = monthly
    assert outside == (
        "privacy budget of series 'census' exceeded: this release would spend epsilon = 0.1000001; spent "
        f"epsilon = 0.2 by 2 release(s) ({ids[0]}: 0.1, {ids[1]}: 0.1); remaining epsilon = 0.1 of the budget "
        "epsilon = 0.3; not published (basic sequential composition: the spends add up)"
    )
    assert "\n" not in spent and f"spent epsilon = 0.3 by 3 release(s) ({ids[0]}: 0.1" in spent
    assert "remaining epsilon = 0 of the budget epsilon = 0.3" in spent
    # each refusal left its audit row, with its line
    log = privpub.Store(folder / "state.duckdb").audit_log()
    refused = log[(log.action == "publish") & (log.outcome == "refused")]
    assert [m for m in refused.detail.str.extract(r'"message": "([^"]*)"')[0]] == [outside, spent]


def test_the_ledger_is_shown_by_history_the_report_and_the_python_api(monthly, capsys):
    folder, ids, _ = monthly
    state = folder / "state.duckdb"
    assert main(["history", "--state", str(state)]) == 0
    out = capsys.readouterr().out
    ledger_part = out.split("privacy budget ledger (basic sequential composition", 1)[1].splitlines()[1:]
    assert ledger_part[0].split() == [
        "series",
        "sequence",
        "release_id",
        "epsilon",
        "delta",
        "series_epsilon",
        "budget_epsilon",
        "remaining_epsilon",
    ]
    assert [line.split() for line in ledger_part[1:4]] == [
        ["census", str(n), rid, "0.1", "0", total, "0.3", left]
        for n, rid, total, left in zip((1, 2, 3), ids, ("0.1", "0.2", "0.3"), ("0.2", "0.1", "0"))
    ]
    frame = privpub.ledger(state, series="census")
    assert frame.release_id.tolist() == ids
    assert frame.series_epsilon.tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert frame.remaining_epsilon.tolist() == pytest.approx([0.2, 0.1, 0.0])
    second = privpub.PublishedRelease(ids[1], state)
    assert second.ledger.release_id.tolist() == ids[:2]  # the series' ledger up to that release
    report = (folder / "releases" / ids[2] / "report.html").read_text()
    section = report.split("<h2>Privacy budget</h2>", 1)[1].split("<h2>", 1)[0]
    assert "has spent epsilon = 0.3 of its budget 0.3; 0 remains" in section
    assert all(f"{rid}</td>" in section for rid in ids)


def test_an_untouched_ledger_passes_verify_and_an_edited_spend_fails_it(monthly, tmp_path):
    folder, ids, _ = monthly
    lines = privpub.verify(state=folder / "state.duckdb", history=True).attrs["lines"]
    assert any(line.startswith("PASS ledger: 3 differentially private release(s) in 1 series") for line in lines)
    state = tmp_path / "state.duckdb"
    shutil.copy(folder / "state.duckdb", state)
    shutil.copy(folder / "state.duckdb.key", tmp_path / "state.duckdb.key")
    with duckdb.connect(str(state)) as con:  # the second release's recorded total lowered, then re-chained
        con.execute(
            "UPDATE release_metrics SET text_value = '0.15', value = 0.15 WHERE release_id = ? AND name = 'series-epsilon'",
            [ids[1]],
        )
        chain.chain_existing(con)
    fails = [line for line in privpub.verify(state=state, history=True).attrs["lines"] if line.startswith("FAIL")]
    assert (
        f"FAIL ledger: ledger of series 'census', release {ids[1]}: series-epsilon / series-delta recorded "
        "(0.15, 0) differ from the sum of the releases' spends (0.2, 0)"
    ) in fails
    assert not [f for f in fails if f.startswith("FAIL ledger") and ids[1] not in f]  # only that row named
    with duckdb.connect(str(state)) as con:  # a spend edited without re-chaining: the chain names it too
        con.execute(
            "UPDATE release_metrics SET text_value = '0.05' WHERE release_id = ? AND name = 'epsilon'", [ids[0]]
        )
    fails = [line for line in privpub.verify(state=state, history=True).attrs["lines"] if line.startswith("FAIL")]
    assert any(f.startswith("FAIL history: release_metrics figure privacy epsilon of release " + ids[0]) for f in fails)
    assert any(f.startswith(f"FAIL ledger: ledger of series 'census', release {ids[0]}:") for f in fails)


def test_a_repeat_spends_again(dp_technique, tmp_path):
    frame = month(1)
    first = privpub.publish(frame, spec(tmp_path, 1.0, seed=1, budget={"epsilon": 2.0}))
    with pytest.raises(privpub.PrivacyRefused, match="input is unchanged"):
        privpub.publish(frame, spec(tmp_path, 1.0, seed=2, budget={"epsilon": 2.0}))
    again = privpub.publish(frame, spec(tmp_path, 1.0, seed=2, budget={"epsilon": 2.0}), allow_repeat=True)
    assert privpub.ledger(tmp_path / "state.duckdb").series_epsilon.tolist() == [1.0, 2.0]
    # the same seed is the same release: recognised, not spent again
    assert privpub.publish(frame, spec(tmp_path, 1.0, seed=1, budget={"epsilon": 2.0})) == first
    with pytest.raises(
        privpub.PrivacyRefused, match=rf"spent epsilon = 2 by 2 release\(s\) \({first}: 1, {again}: 1\)"
    ):
        privpub.publish(frame, spec(tmp_path, 1.0, seed=3, budget={"epsilon": 2.0}), allow_repeat=True)


def test_dp_and_syntactic_releases_are_not_mixed_in_a_series(dp_technique, tmp_path):
    dp = tmp_path / "dp"
    first = privpub.publish(month(1), spec(dp, 1.0, seed=1, budget={"epsilon": 3.0}))
    with pytest.raises(privpub.PrivacyRefused) as err:
        privpub.publish(month(2), spec(dp, None, seed=2))
    assert str(err.value) == (
        f"series 'census' is differentially private (its budget spent by {first}): a syntactic release "
        "(technique generalization) of the same people is not covered by the DP budget, so the series' "
        "guarantee would no longer be a DP guarantee; publish it as a new series ([dataset] name)"
    )
    syntactic = tmp_path / "syntactic"
    plain = privpub.publish(month(1), spec(syntactic, None, seed=1))
    with pytest.raises(
        privpub.PrivacyRefused, match=rf"^series 'census' has syntactic releases \({plain}\): a differentially"
    ):
        privpub.publish(month(2), spec(syntactic, 1.0, seed=2, budget={"epsilon": 3.0}))
    for folder in (dp, syntactic):
        log = privpub.Store(folder / "state.duckdb").audit_log()
        assert (log.outcome == "refused").sum() == 1 and len(privpub.history(folder / "state.duckdb")) == 1


def test_without_a_budget_a_series_spends_one_release(dp_technique, tmp_path):
    first = privpub.publish(month(1), spec(tmp_path, 0.7, seed=1))
    assert figure_text(tmp_path / "state.duckdb", str(first), "series-epsilon") == "0.7"
    with pytest.raises(
        privpub.PrivacyRefused,
        match=r"\[series\] budget is not set: a series without one may spend one release's own epsilon",
    ):
        privpub.publish(month(2), spec(tmp_path, 0.7, seed=2))


def test_delta_adds_up_and_a_budget_without_delta_limits_epsilon_alone(dp_technique, tmp_path):
    budget = {"epsilon": 5.0, "delta": 2e-6}
    privpub.publish(month(1), spec(tmp_path, 1.0, seed=1, budget=budget, delta=1e-6))
    privpub.publish(month(2), spec(tmp_path, 1.0, seed=2, budget=budget, delta=1e-6))  # 2e-6: just inside
    with pytest.raises(
        privpub.PrivacyRefused, match=r"spend epsilon = 1, delta = 1e-06; spent epsilon = 2, delta = 2e-06"
    ):
        privpub.publish(month(3), spec(tmp_path, 1.0, seed=3, budget=budget, delta=1e-6))
    assert privpub.ledger(tmp_path / "state.duckdb").series_delta.tolist() == pytest.approx([1e-6, 2e-6])
    # a budget of epsilon alone: the deltas are summed and recorded (no threshold), epsilon is limited
    nodelta = tmp_path / "nodelta"
    for m in (1, 2):
        privpub.publish(month(m), spec(nodelta, 2.5, seed=m, budget={"epsilon": 5.0}, delta=1e-9))
    ledger = privpub.ledger(nodelta / "state.duckdb")
    assert ledger.series_delta.tolist() == pytest.approx([1e-9, 2e-9]) and ledger.budget_delta.isna().all()
    with pytest.raises(privpub.PrivacyRefused, match=r"delta = not limited of the budget epsilon = 5, delta = not"):
        privpub.publish(month(3), spec(nodelta, 0.1, seed=3, budget={"epsilon": 5.0}, delta=1e-9))


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"epsilon": 0}, "[series] budget.epsilon = 0: must be a finite number above 0"),
        ({"epsilon": -1.0}, "[series] budget.epsilon = -1.0: must be a finite number above 0"),
        ({"epsilon": True}, "[series] budget.epsilon = True: must be a finite number above 0"),
        ({"epsilon": "2"}, "[series] budget.epsilon = '2': must be a finite number above 0"),
        ({"epsilon": 1.0, "delta": 1.0}, "[series] budget.delta = 1.0: must be a number above 0 and below 1"),
        ({"epsilon": 1.0, "delta": 0}, "[series] budget.delta = 0: must be a number above 0 and below 1"),
        ({"epsilon": 1.0, "delat": 1e-6}, "[series] budget.delat: unknown key; did you mean delta?"),
        ({"delta": 1e-6}, "[series] budget: epsilon is required (the series' total), e.g. { epsilon = 2.5 }"),
        (2.5, "[series] budget must be a table such as { epsilon = 2.5 }, got 2.5"),
    ],
)
def test_a_bad_budget_is_refused_in_one_line_before_any_work(dp_technique, tmp_path, budget, message):
    with pytest.raises(SpecError) as err:
        privpub.publish(month(1), spec(tmp_path, 1.0, seed=1, budget=budget))
    assert str(err.value) == message
    assert not (tmp_path / "releases").exists()


def test_a_budget_for_a_technique_that_spends_none_is_refused(tmp_path):
    with pytest.raises(
        SpecError, match=r"^\[series\] budget: technique 'generalization' is not differentially private"
    ):
        privpub.publish(month(1), spec(tmp_path, None, seed=1, budget={"epsilon": 1.0}))
    # the TOML form, an inline table, reads into the same model
    parsed = read_section("series", SeriesSpec, tomllib.loads("budget = { epsilon = 2.5, delta = 1e-6 }\n"))
    assert parsed.budget is not None and (parsed.budget.epsilon, parsed.budget.delta) == (2.5, 1e-6)


def test_verify_of_a_release_recomputes_its_spend_from_its_parameters(monthly, tmp_path):
    folder, ids, _ = monthly
    lines = privpub.verify(ids[0], folder / "state.duckdb").attrs["lines"]
    assert "PASS privacy spend: the parameters give epsilon = 0.1, delta = 0" in lines
    state = tmp_path / "state.duckdb"
    shutil.copy(folder / "state.duckdb", state)
    shutil.copy(folder / "state.duckdb.key", tmp_path / "state.duckdb.key")
    with duckdb.connect(str(state)) as con:  # the spend and the totals lowered together, re-chained
        for name, text in (("epsilon", "0.05"), ("series-epsilon", "0.05")):
            con.execute(
                "UPDATE release_metrics SET text_value = ? WHERE release_id = ? AND name = ?", [text, ids[0], name]
            )
        chain.chain_existing(con)
    frame = privpub.verify(ids[0], state)
    assert not frame.attrs["ok"]
    assert (
        "FAIL privacy spend: the parameters give epsilon = 0.1, delta = 0; the release recorded epsilon = 0.05, "
        "delta = 0.0"
    ) in frame.attrs["lines"]


def test_monthly_dp_synthetic_releases_are_refused_exactly_when_the_budget_runs_out(tmp_path):
    """The issue's contract end to end: dp-synthetic at epsilon = 1.0 under `[series] budget =
    { epsilon = 2.5 }` (no delta: epsilon alone is limited, the deltas are summed): months 1 and 2
    publish (total 2 <= 2.5), month 3 (total 3) is refused naming both releases and what remains;
    the ledger's totals add up, and verify --history agrees."""
    from privpub.tasks.demo_data import CENSUS_QI, census

    spec = {
        "dataset": {"name": "census", "input": "x.csv", "person_id": "pid", "sensitive": "occupation", "qi": CENSUS_QI},
        "technique": {"name": "dp-synthetic", "epsilon": 1.0, "bounds": {"age": [17, 95]}, "categories": "from-data"},
        "series": {"budget": {"epsilon": 2.5}},
        "output": {"dir": str(tmp_path / "rel"), "state": str(tmp_path / "s.duckdb")},
    }
    published = []
    for month in range(2):
        data = census(300, seed=month)
        data["pid"] = range(300)
        published.append(privpub.publish(data, spec).id)
    data = census(300, seed=2)
    data["pid"] = range(300)
    with pytest.raises(privpub.PrivacyRefused) as refused:
        privpub.publish(data, spec)
    line = str(refused.value)
    assert "would spend epsilon = 1, delta = 1e-06" in line and "remaining epsilon = 0.5" in line
    assert all(release in line for release in published) and "\n" not in line
    ledger = privpub.ledger(str(tmp_path / "s.duckdb"), "census")
    assert ledger["series_epsilon"].tolist() == [1.0, 2.0]
    assert ledger["series_delta"].tolist() == pytest.approx([1e-6, 2e-6])
    checks = privpub.verify(published[-1], state=str(tmp_path / "s.duckdb"), history=True)
    assert checks.attrs["ok"], checks.attrs["lines"]

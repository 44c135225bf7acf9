"""Risk against a population (issue 28): `journalist-risk-max`, `marketer-risk` and
`population-uniques` given `[risk] population` or `sample_fraction` (tasks/population_models.py,
docs/risk.md). Each model against its formula worked by hand and against ARX's published test
numbers; the edge cases (the table is the population; no small class); properties on
hypothesis-drawn class-size tables; the keys just inside and just outside their domains; and a
publish storing the figures, verified and named in the report."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import nbinom

import privpub
from privpub.flows import pipeline
from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.population_models import (
    expected_inverse_class_size,
    pitman_share,
    population_uniques,
    zayatz_share,
)
from privpub.tasks.risk import figures_from_classes, population_figures, risk_settings, table_risk
from tests.helpers import write_spec

# ARX's adult.csv (arx-deidentifier/arx data/adult.csv, every column a QI, as in its
# TestRiskMetrics.testDecisionRule2): class size -> number of classes, counted from the file
ADULT = {
    **{1: 15512, 2: 2098, 3: 754, 4: 375, 5: 189, 6: 155, 7: 97, 8: 73, 9: 39, 10: 37, 11: 29, 12: 18},
    **{13: 23, 14: 14, 15: 15, 16: 9, 17: 11, 18: 10, 19: 10, 20: 5, 21: 3, 22: 4, 23: 3, 24: 2, 25: 1},
    **{26: 3, 27: 5, 29: 1, 30: 2, 32: 1, 34: 1, 35: 1, 36: 1, 45: 1},
}
ADULT_SIZES, ADULT_COUNTS = np.array(list(ADULT)), np.array(list(ADULT.values()))
ADULT_N = 30162


def test_zayatz_on_a_worked_example():
    """Classes of sizes 1, 1, 1, 2, 2, 5 (n = 12) from a population of N = 120. A population
    class of size i gives one record to the sample with P_i = i C(N - i, n - 1) / C(N, n)
    = i n (N - n)(N - n - 1)...(N - n - i + 2) / (N (N - 1)...(N - i + 1))."""
    n, N = 12, 120
    p1 = Fraction(n, N)
    p2 = 2 * Fraction(n * (N - n), N * (N - 1))
    p5 = 5 * Fraction(n * 108 * 107 * 106 * 105, 120 * 119 * 118 * 117 * 116)
    share_unique = 3 * p1 / (3 * p1 + 2 * p2 + 1 * p5)  # P(population unique | sample unique)
    uniques = 3 * share_unique / p1  # the sample's uniques that are, scaled up by 1 / pi
    got = zayatz_share(np.array([1, 2, 5]), np.array([3, 2, 1]), N)
    assert got == pytest.approx(float(uniques / N), rel=1e-12)
    assert float(uniques) == pytest.approx(9 / (3 * 0.1 + 2 * 2592 / 14280 + 1 * float(p5)), rel=1e-12)


def test_zayatz_when_the_population_has_one_person_more_than_the_sample():
    """Classes 1, 1, 2 (n = 4), N = 5: the class of 2 gives one record when the one person left
    out is of it, P_2 = 2 C(3, 3) / C(5, 4) = 2/5, P_1 = C(4, 3) / C(5, 4) = 4/5 = pi;
    uniques = 2^2 / (2 P_1 + 1 P_2) = 4 / 2 = 2 of the 5 people."""
    assert zayatz_share(np.array([1, 2]), np.array([2, 1]), 5) == pytest.approx(2 / 5, rel=1e-12)


@settings(max_examples=100, deadline=None)
@example([1, 1, 3], 2)  # n = 5, N = 7: the class of 3 is the largest that can give one record (N - 3 = n - 1)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=8), st.integers(0, 6))
def test_zayatz_equals_its_hypergeometric_definition_in_exact_integers(size, extra):
    """Zayatz's estimate from P_i = i C(N - i, n - 1) / C(N, n) in exact integers (math.comb; 0
    when a class of i leaves fewer than n - 1 others, so it cannot give just one record), with N
    at most 6 above n: every class size meets the largest that still can (N - i = n - 1)."""
    n = sum(size)
    N = n + extra
    c = Counter(size)

    def p(i: int) -> Fraction:  # a population class of i people gives exactly one sampled record
        return Fraction(i * math.comb(N - i, n - 1), math.comb(N, n))

    # c_1 P_1 / sum_i c_i P_i: the share of sample uniques that are population uniques
    uniques = c[1] * (c[1] * p(1) / sum(count * p(i) for i, count in c.items())) / Fraction(n, N) if c[1] else 0
    sizes, counts = np.unique(size, return_counts=True)
    assert zayatz_share(sizes, counts, N) == pytest.approx(float(uniques / N), rel=1e-10, abs=0)


@pytest.mark.parametrize(
    "fraction, expected, model",
    [
        (0.1, 0.27684993883653597, "pitman"),  # ARX's Dankar rule: Pitman
        (0.01, 0.1446083531167384, "pitman"),
        (0.2, 0.3577099234829125, "zayatz"),  # ARX: Zayatz (smaller than SNB there)
        (1.0, 0.5142895033485844, "zayatz"),  # the sample is the population: its uniques
    ],
)
def test_population_uniques_agree_with_arx_on_adult(fraction, expected, model):
    """ARX's TestRiskMetrics.testDecisionRule2 (it compares 4 decimals; we agree to 8 digits)."""
    got, used = population_uniques(ADULT_SIZES, ADULT_COUNTS, round(ADULT_N / fraction))
    assert used == model and got == pytest.approx(expected, rel=1e-8)


def test_zayatz_alone_agrees_with_arx_where_its_rule_picks_pitman():
    """ARX's same test accepts 0.3207402393466189 at 0.1 when its rule takes Zayatz."""
    N = round(ADULT_N / 0.1)
    assert zayatz_share(ADULT_SIZES, ADULT_COUNTS, N) == pytest.approx(0.3207402393466189, rel=1e-8)


def test_pitman_has_no_fit_when_every_record_is_unique_and_the_rule_takes_zayatz():
    assert pitman_share(np.array([1]), np.array([50]), 5000) is None
    share, model = population_uniques(np.array([1]), np.array([50]), 5000)
    # Zayatz: 50^2 / (50 P_1) = 50 / pi = 5000 uniques: the population like the sample, all unique
    assert model == "zayatz" and share == 1.0


def test_pitman_has_no_fit_when_its_likelihood_peaks_at_alpha_0():
    """300 uniques, 100 pairs, 20 triples: the likelihood, summed term by term here, is highest
    as alpha tends to 0 (Ewens's model, whose number of population uniques is theta whatever N:
    no use as an estimate); ARX's Pitman gives no estimate either (alpha = 0), and the rule
    takes Zayatz's."""
    sizes, counts = np.array([1, 2, 3]), np.array([300, 100, 20])
    n, u = 560, 420

    def loglik(theta, alpha):
        return (
            sum(math.log(theta + i * alpha) for i in range(1, u))
            - sum(math.log(theta + i) for i in range(1, n))
            + sum(c * sum(math.log(k - alpha) for k in range(1, j)) for j, c in zip(sizes, counts))
        )

    best = max(loglik(t, a) for t in (100, 300, 500, 766, 1000, 3000) for a in (0.05, 0.2, 0.4, 0.6))
    assert loglik(766, 1e-7) > best
    assert pitman_share(sizes, counts, 56_000) is None
    assert population_uniques(sizes, counts, 56_000)[1] == "zayatz"


@pytest.mark.parametrize("pi", [1e-4, 0.01, 0.2, 1 / 3 - 1e-9, 1 / 3, 0.5, 0.9])
def test_expected_inverse_class_size_is_the_negative_binomial_mean_of_1_over_F(pi):
    """E[1 / F | f] summed over F's negative binomial law (scipy), on both sides of the switch
    between the two expansions at pi = 1/3, and f = 1 in closed form."""
    f = np.array([1, 2, 3, 7, 40, 300])
    got = expected_inverse_class_size(f, pi)
    for size, value in zip(f, got):
        extra = np.arange(int(nbinom.isf(1e-16, size, pi)) + 50)  # F - f, the unseen people
        assert value == pytest.approx((nbinom.pmf(extra, size, pi) / (extra + size)).sum(), rel=1e-10)
    assert got[0] == pytest.approx(-pi * math.log(pi) / (1 - pi), rel=1e-12)


def test_the_table_is_the_population_at_sample_fraction_1():
    assert expected_inverse_class_size(np.array([1, 2, 5]), 1.0) == pytest.approx([1, 1 / 2, 1 / 5], abs=0)


class_sizes = st.lists(st.integers(1, 30), min_size=1, max_size=40).map(lambda s: np.array(s, dtype=np.int64))


@settings(max_examples=100, deadline=None)
@given(class_sizes)
def test_at_sample_fraction_1_the_population_figures_are_the_sample_figures(size):
    figures = figures_from_classes(size, np.ones_like(size), 0.2, population=int(size.sum()))
    assert figures["journalist-risk-max"] == pytest.approx(figures["prosecutor-risk-max"], rel=1e-12)
    assert figures["marketer-risk"] == pytest.approx(figures["prosecutor-risk-avg"], rel=1e-12)
    assert figures["population-uniques"] == pytest.approx(figures["sample-uniques"], rel=1e-12, abs=1e-15)
    assert figures["sample-fraction"] == 1.0


def expected_inverse_by_terms(f: int, pi: float) -> float:
    """E[1 / F | f] as the sum over h = F >= f of C(h - 1, f - 1) pi^f (1 - pi)^(h - f) / h, term
    by term (each term from the one before), far past where the terms stop mattering."""
    total, term = 0.0, pi**f
    for h in range(f, f + 6000):
        total += term / h
        term *= h / (h - f + 1) * (1 - pi)
    return total


@settings(max_examples=40, deadline=None)
@example([0, 1, 1, 2, 2, 2, 2], 2)  # classes of 1, 2 and 4 at pi = 1/2
@given(st.lists(st.integers(0, 7), min_size=1, max_size=30), st.sampled_from([1.25, 2, 4, 10]))
def test_journalist_and_marketer_risks_from_each_records_expected_inverse_class_size(cells, times):
    """A published table's figures, record by record: each record's class seen f times, its
    E[1 / F | f] summed term by term; journalist-risk-max the highest over the records (a record
    of the smallest class), marketer-risk their mean."""
    n = len(cells)
    population = round(n * times)
    table = pa.table({"x": pa.array(cells), "s": pa.array(["a"] * n)})
    figures = table_risk(table, ["x"], "s", 0.2, population=population)
    size = Counter(cells)
    each = [expected_inverse_by_terms(size[c], n / population) for c in cells]
    assert figures["journalist-risk-max"] == pytest.approx(max(each), rel=1e-9)
    assert figures["marketer-risk"] == pytest.approx(sum(each) / n, rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(class_sizes, st.sampled_from([1.2, 2, 10, 1000]), st.sampled_from([1.5, 3, 10]))
def test_a_larger_population_lowers_the_journalist_and_marketer_risk(size, times, more):
    """Below the sample's own figures (population classes are at least as large), and lower
    again for a larger population; Zayatz's population uniques never above the sample uniques."""
    n = int(size.sum())
    small, large = round(n * times), round(n * times * more)
    at_small, at_large = population_figures(size, small), population_figures(size, large)
    sample = figures_from_classes(size, np.ones_like(size), 0.2)
    assert at_small["journalist-risk-max"] <= sample["prosecutor-risk-max"] * (1 + 1e-12)
    assert at_small["marketer-risk"] <= sample["prosecutor-risk-avg"] * (1 + 1e-12)
    assert at_large["journalist-risk-max"] < at_small["journalist-risk-max"]
    assert at_large["marketer-risk"] < at_small["marketer-risk"]
    sizes, counts = np.unique(size, return_counts=True)
    assert zayatz_share(sizes, counts, small) <= sample["sample-uniques"]


def test_no_small_class_means_no_population_unique():
    size = np.full(40, 25)
    figures = population_figures(size, 100_000)
    assert figures["population-uniques"] == 0 and "population-uniques-zayatz" in figures
    assert figures["journalist-risk-max"] == pytest.approx(0.01 / 25, rel=0.05)  # about pi / f


def test_a_release_with_fewer_records_is_a_smaller_sample_of_the_same_population():
    """Rows suppressed from a release leave the population as it is: pi = published / N."""
    table = pa.table({"x": pa.array([i % 7 for i in range(50)]), "s": pa.array(["a"] * 50)})
    figures = table_risk(table, ["x"], "s", 0.2, population=1000)
    assert figures["sample-fraction"] == 50 / 1000
    expected = population_figures(np.bincount(np.arange(50) % 7), 1000)
    assert {name: figures[name] for name in expected} == expected


def _settings(**risk):
    return risk_settings(spec_from_dict({**census_spec("x.csv", k=5, l=None), "risk": risk}))


@pytest.mark.parametrize("value", [1, 10**9])
def test_population_just_inside_its_domain(value):
    assert _settings(population=value).population_size(1) == value


@pytest.mark.parametrize("value", [1e-9, 0.5, 1])
def test_sample_fraction_just_inside_its_domain(value):
    assert _settings(sample_fraction=value).population_size(1000) == max(round(1000 / value), 1000)


@pytest.mark.parametrize(
    "risk, message",
    [
        ({"population": 0}, r"^\[risk\] population = 0: must be a whole number of people, at least 1$"),
        ({"population": 1000.0}, r"^\[risk\] population = 1000.0: must be a whole number"),
        ({"population": "1000"}, r"^\[risk\] population = '1000': must be a whole number"),
        ({"population": True}, r"^\[risk\] population = True: must be a whole number"),
        ({"sample_fraction": 0}, r"^\[risk\] sample_fraction = 0: must be a number above 0 and at most 1$"),
        ({"sample_fraction": 1.0000001}, r"^\[risk\] sample_fraction = 1.0000001: must be a number above 0"),
        ({"sample_fraction": float("nan")}, r"^\[risk\] sample_fraction = nan: not a finite number"),
        ({"sample_fraction": "0.1"}, r"^\[risk\] sample_fraction = '0.1': must be a number"),
        ({"sample_fraction": True}, r"^\[risk\] sample_fraction = True: must be a number"),
        (
            {"population": 1000, "sample_fraction": 0.1},
            r"^\[risk\] population and sample_fraction: give one of them, not both$",
        ),
    ],
)
def test_population_keys_just_outside_their_domains_are_refused(risk, message):
    with pytest.raises(SpecError, match=message):
        _settings(**risk)


def test_a_population_smaller_than_the_input_is_refused_and_equal_to_it_is_the_input(census_dir):
    spec = write_spec(census_dir, k=5, l=None, seed=3, extra="\n[risk]\npopulation = 599\n")
    with pytest.raises(SpecError, match=r"^\[risk\] population = 599: smaller than the input's 600 records"):
        pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    assert not (census_dir / "releases").exists() or not any((census_dir / "releases").iterdir())
    spec = write_spec(census_dir, k=5, l=None, seed=3, extra="\n[risk]\npopulation = 600\n")
    release_id = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    risk = _stored(census_dir, release_id)
    assert risk["input-sample-fraction"] == 1.0
    assert risk["input-population-uniques"] == pytest.approx(risk["input-sample-uniques"])


def _stored(folder, release_id) -> dict[str, float]:
    m = Store(folder / "privpub.duckdb").release(release_id)["metrics"]
    return {r.name: r.value for r in m[m.kind == "risk"].itertuples()}


def test_a_publish_stores_verifies_and_reports_the_population_figures(census_dir):
    from privpub.flows.reverify import reverify

    spec = write_spec(census_dir, k=5, l=None, seed=3, extra="\n[risk]\nsample_fraction = 0.01\n")
    release_id = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    risk = _stored(census_dir, release_id)
    # the input's figures from its classes counted directly, then the models' formulas
    frame = pd.read_csv(census_dir / "census.csv")
    qi = [q["name"] for q in census_spec("x.csv", k=5, l=None)["dataset"]["qi"]]
    size = frame.groupby(qi, dropna=False).size().to_numpy()
    expected = population_figures(size, 60_000)
    for name, value in expected.items():
        assert risk[f"input-{name}"] == pytest.approx(value, rel=1e-12), name
    # pi = 0.01: Dankar et al.'s rule asks for Pitman's model, which has no fit on an input of
    # 598 uniques and a pair (its alpha tends to 1): Zayatz's model gives the figure
    assert "input-population-uniques-zayatz" in risk and "input-population-uniques-pitman" not in risk
    assert risk["sample-fraction"] == pytest.approx(600 / 60_000)  # nothing suppressed
    for name in ("journalist-risk-max", "marketer-risk", "population-uniques"):
        assert risk[name] <= risk[f"input-{name}"], name
    assert risk["journalist-risk-max"] <= risk["prosecutor-risk-max"]
    ok, lines = reverify(census_dir / "privpub.duckdb", release_id)
    assert ok and any(line.startswith("PASS journalist-risk-max: ") for line in lines), lines
    assert any(line.startswith("PASS population-uniques") and "at publish" in line for line in lines)
    report = (census_dir / "releases" / release_id / "report.html").read_text()
    assert "journalist-risk-max" in report and "marketer-risk" in report
    assert (
        "for the input, the first model, the table holding 0.01 of the population; for the release, the first model"
        in report
    )
    assert "(Zayatz, 1991)" in report


SEX_RACE_WORKCLASS = [{"name": q, "kind": "categorical"} for q in ("sex", "race", "workclass")]


def test_a_publish_at_a_sample_fraction_of_exactly_0_1_takes_pitmans_model(tmp_path, monkeypatch):
    """Dankar et al.'s rule takes Pitman's model up to pi = 0.1 included. 600 census records on
    sex, race and workclass (75 classes, 30 unique: Pitman's likelihood has its maximum inside)
    published through the Python API with sample_fraction = 0.1: the stored input figure is
    Pitman's, on the class sizes counted here; one person fewer in the population (pi just
    above 0.1) and the rule takes Zayatz's."""
    monkeypatch.chdir(tmp_path)
    frame = census(600, seed=3)
    spec = {
        "dataset": {"name": "c", "person_id": "pid", "sensitive": "occupation", "qi": SEX_RACE_WORKCLASS},
        "technique": {"name": "generalization", "k": 5},
        "risk": {"sample_fraction": 0.1},
        "output": {"seed": 3},
    }
    release = privpub.publish(frame, spec)
    figures = release.figures.set_index("name").value
    sizes, counts = np.unique(frame.groupby(["sex", "race", "workclass"]).size().to_numpy(), return_counts=True)
    assert figures["input-sample-fraction"] == 0.1
    assert figures["input-population-uniques-pitman"] == pytest.approx(pitman_share(sizes, counts, 6000), rel=1e-12)
    assert "input-population-uniques-zayatz" not in figures
    assert "for the input, the second model, the table holding 0.1 of the population;" in release.report.read_text()
    assert population_uniques(sizes, counts, 5999)[1] == "zayatz"


def test_explore_over_the_population_refuses_one_below_the_input_and_reads_an_equal_one_as_the_table(census_dir):
    """`privpub explore` over [risk] population: 599 (one person fewer than the 600 records) is
    a failed setting naming the key; 600 says the table is the population, so each population
    figure is its sample twin (definition: F = f); 6000 a sample of a tenth, below them."""
    spec = write_spec(census_dir, k=5, l=None, seed=8)
    frame = privpub.explore(spec, {"risk.population": [599, 600, 6000]})
    assert frame.passed.tolist() == [False, True, True]
    assert frame.reason.iloc[0] == "[risk] population = 599: smaller than the input's 600 records " + (
        "(the input is a sample of the population)"
    )
    equal, tenth = frame.iloc[1], frame.iloc[2]
    for prefix in ("input-", ""):
        assert equal[f"{prefix}sample-fraction"] == 1.0
        assert equal[f"{prefix}journalist-risk-max"] == pytest.approx(equal[f"{prefix}prosecutor-risk-max"])
        assert equal[f"{prefix}marketer-risk"] == pytest.approx(equal[f"{prefix}prosecutor-risk-avg"])
        assert equal[f"{prefix}population-uniques"] == pytest.approx(equal[f"{prefix}sample-uniques"])
        assert tenth[f"{prefix}journalist-risk-max"] < equal[f"{prefix}journalist-risk-max"]


def test_the_report_names_the_model_of_each_figure():
    from privpub.tasks.report.page import population_note, summary_lines

    risk = {
        "input-population-uniques": 0.3,
        "input-population-uniques-pitman": 0.3,
        "input-sample-fraction": 0.01,
        "population-uniques": 0.0,
        "population-uniques-zayatz": 0.0,
        "sample-fraction": 0.0098,
    }
    assert population_note(risk) == (
        "How many people are unique in the whole population is estimated from how many classes of each size the "
        "table has, by a statistical model: for the input, the second model, the table holding 0.01 of the population; "
        "for the release, the first model, the table holding 0.0098 of the population. The first model takes the "
        "population's classes to be sized as the table's (Zayatz, 1991); the second fits how class sizes spread over "
        "the population (Pitman's model, as Hoshino, 2001, applies it). A small share of the population is best "
        "served by the second model, a larger one by the first: the choice Dankar and others recommend (2012)"
    )
    meta = {"release_id": "r", "series": "s", "sequence": 1, "technique": "t", "seed": 1, "rows_in": 9, "risk": risk}
    lines = summary_lines(meta, [], {})
    assert "population-uniques 0.3 -> 0" in lines[-2] and lines[-1] == population_note(risk)


def test_without_a_population_the_figures_are_not_computed_and_the_report_says_why(census_dir):
    release_id = pipeline.attempt(
        str(write_spec(census_dir, k=5, l=None, seed=3)), None, None, driver=pipeline.Driver(None)
    )
    risk = _stored(census_dir, release_id)
    assert not {k for k in risk if "journalist" in k or "marketer" in k or "population" in k}
    report = (census_dir / "releases" / release_id / "report.html").read_text()
    assert "estimated share unique in the population: not computed ([risk] population or sample_fraction" in report

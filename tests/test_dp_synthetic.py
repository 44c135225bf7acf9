"""dp-synthetic (docs/dp.md): the accounting against independent formulas, the verifier's
recomputation of epsilon from the published mechanism table (and its refusal of a tampered
parameter), strict parameters, the contribution limit, and a statistical test of the noise."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy.stats import norm

import privpub
from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.types import VerifyContext
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.evaluate.quality import not_applicable, quality_figures
from privpub.tasks.techniques.dp_synthetic.accounting import approx_epsilon, exponential_rho, rho_for
from privpub.tasks.techniques.dp_synthetic.mst import marginal, measure, noise_scales
from privpub.tasks.techniques.dp_synthetic.technique import person_limit
from privpub.tasks.techniques.registry import get_technique

TECHNIQUE = {"name": "dp-synthetic", "epsilon": 1.0, "bounds": {"age": [17, 95]}, "categories": "from-data"}


def spec(tmp_path, technique=None, **dataset):
    return {
        "dataset": {"name": "census", "input": "x.csv", "person_id": "pid", "sensitive": "occupation", "qi": CENSUS_QI}
        | dataset,
        "technique": TECHNIQUE if technique is None else technique,
        "output": {"dir": str(tmp_path / "rel"), "state": str(tmp_path / "s.duckdb"), "seed": 5},
    }


def frame(n=600, seed=1):
    data = census(n, seed=seed)
    data["pid"] = range(n)
    return data


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dp")
    return folder, privpub.publish(frame(), spec(folder))


# --- accounting ---------------------------------------------------------------------------------


def gaussian_delta(epsilon, mu):
    """The exact delta(epsilon) of a Gaussian mechanism with sensitivity / sigma = mu (Balle and Wang 2018)."""
    return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-9])
def test_rho_for_epsilon_stays_within_it_and_within_the_independent_bounds(epsilon, delta):
    rho = rho_for(epsilon, delta)
    assert approx_epsilon(rho, delta) <= epsilon
    assert approx_epsilon(rho * 1.001, delta) > epsilon  # not needlessly small
    # Bun and Steinke's simple conversion is looser than the optimal one OpenDP uses
    assert epsilon <= rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12
    # a single Gaussian mechanism of that rho meets (epsilon, delta) exactly: a direct check
    assert gaussian_delta(epsilon, math.sqrt(2 * rho)) <= delta * (1 + 1e-6)
    assert gaussian_delta(epsilon * 0.9, math.sqrt(2 * rho)) > delta  # and the bound is near tight


def test_the_split_spends_exactly_rho():
    for d in (1, 2, 9):
        rho = 0.02
        sigma1, eps, sigma2 = noise_scales(d, rho, 3.0)
        spent = d * 9 / (2 * sigma1**2)
        if d > 1:
            spent += (d - 1) * (exponential_rho(eps) + 9 / (2 * sigma2**2))
        assert spent == pytest.approx(rho, rel=1e-12)


# --- the release and its verifier -------------------------------------------------------------


def verify(folder, release_id, alter=None):
    from privpub.flows.reverify import load_release

    store = Store(folder / "s.duckdb")
    rel, spec_, rel_obj, problems = load_release(store, release_id)
    assert not problems
    if alter is not None:
        rel_obj = replace(rel_obj, tables={**rel_obj.tables, "mechanism": alter(rel_obj.tables["mechanism"])})
    technique = get_technique(spec_)
    return technique.verify(rel_obj, VerifyContext(None, {}, rel))


def set_column(table, name, values):
    at = table.schema.get_field_index(name)
    return table.set_column(at, name, pa.array(values, table.schema.field(at).type))


def test_the_release_records_epsilon_as_a_privacy_figure(release):
    folder, release_id = release
    metrics = Store(folder / "s.duckdb").release(str(release_id))["metrics"]
    row = metrics[(metrics.kind == "privacy") & (metrics.name == "epsilon")].iloc[0]
    assert float(row.value) <= 1.0 and float(row.value) == pytest.approx(1.0, rel=1e-6)
    assert bool(row.passed)
    table = release_id.tables["table"]
    assert {"age_lo", "age_hi", "occupation"} <= set(table.columns) and "pid" not in table.columns
    # the report: epsilon in plain words, what guards the sensitive column, what the risk figures mean
    report = release_id.report.read_text()
    assert "changes by at most a factor of 2.72" in report
    assert "What can be learned of occupation is bounded by epsilon (differential privacy)" in report
    assert "a unique synthetic row is no real person" in report


def test_verify_recomputes_epsilon_and_refuses_each_tampered_parameter(release):
    folder, release_id = release
    (ok,) = verify(folder, str(release_id))
    assert ok.passed and ok.model == "epsilon" and ok.value <= 1.0
    # total rho is recomputed from the noise scales, not read: a halved sigma overspends
    sigma = lambda t: t.column("sigma").to_numpy(zero_copy_only=False).copy()  # noqa: E731
    halved = lambda t: set_column(t, "sigma", np.where(np.arange(t.num_rows) == 0, sigma(t) / 2, sigma(t)))  # noqa: E731
    assert not verify(folder, str(release_id), halved)[0].passed
    # a larger sigma (its rho with it) spends less: still within the claim
    quarter = lambda t: np.where(np.isnan(sigma(t)), t.column("rho").to_numpy(), t.column("rho").to_numpy() / 4)  # noqa: E731
    doubled = lambda t: set_column(set_column(t, "sigma", sigma(t) * 2), "rho", quarter(t))  # noqa: E731
    assert verify(folder, str(release_id), doubled)[0].passed
    eps = lambda t: t.column("exp_epsilon").to_numpy(zero_copy_only=False).copy()  # noqa: E731
    louder = lambda t: set_column(t, "exp_epsilon", eps(t) * 1.5)  # noqa: E731
    assert not verify(folder, str(release_id), louder)[0].passed
    # a recorded rho that disagrees with its sigma, a measurement dropped, a smaller contribution
    rho = lambda t: set_column(t, "rho", t.column("rho").to_numpy() * 0.5)  # noqa: E731
    assert not verify(folder, str(release_id), rho)[0].passed
    assert not verify(folder, str(release_id), lambda t: t.slice(1))[0].passed
    sens = lambda t: set_column(t, "sensitivity", np.full(t.num_rows, 0.5))  # noqa: E731
    assert not verify(folder, str(release_id), sens)[0].passed


def test_the_same_seed_publishes_the_same_table_and_another_seed_another(tmp_path):
    one = privpub.publish(frame(200), spec(tmp_path / "a"))
    two = privpub.publish(frame(200), spec(tmp_path / "b"))
    assert one.tables["table"].equals(two.tables["table"])
    other = spec(tmp_path / "c")
    other["output"]["seed"] = 6
    assert not privpub.publish(frame(200), other).tables["table"].equals(one.tables["table"])


def test_a_large_epsilon_reproduces_the_one_way_marginals(tmp_path):
    """The sampler is right: at epsilon = 100 the synthetic shares of each attribute are the data's."""
    data = frame(3000)
    technique = {**TECHNIQUE, "epsilon": 100.0}
    table = privpub.publish(data, spec(tmp_path, technique)).tables["table"]
    assert abs(len(table) - len(data)) < 0.02 * len(data)  # the noisy row count
    for column in ("sex", "education", "occupation"):
        synthetic = (table[column].str[0] if column != "occupation" else table[column]).value_counts(normalize=True)
        real = data[column].astype(str).value_counts(normalize=True)
        assert (synthetic.reindex(real.index, fill_value=0) - real).abs().max() < 0.03


# --- strict parameters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("technique", "dataset", "named"),
    [
        ({"name": "dp-synthetic", "epsilon": 1.0, "categories": "from-data"}, {}, "bins.age or bounds.age"),
        ({**TECHNIQUE, "categories": "declared"}, {}, "'sex'"),
        ({**TECHNIQUE, "bounds": {"sex": [0, 1]}}, {}, "bounds.sex"),
        ({**TECHNIQUE, "bins": {"age": [30, 20]}}, {}, "bins.age"),
        ({**TECHNIQUE, "epsilon": 0}, {}, "epsilon"),
        ({**TECHNIQUE, "delta": 0.5}, {}, "delta"),
        ({**TECHNIQUE, "max_rows_per_person": 2}, {}, "max_rows_per_person"),
        ({**TECHNIQUE, "bounds": {"age": ["2020-01-01", "2021-01-01"]}}, {}, "'age' must be numbers"),
        ({**TECHNIQUE, "bounds": {"age": ["2020-01-01", 5]}}, {}, "bounds.age mixes"),
        ({**TECHNIQUE, "bins": {"age": ["2020-13-01", "2021-01-01"]}}, {}, "bins.age"),
    ],
)
def test_a_spec_the_mechanism_cannot_honour_is_refused_in_one_line(tmp_path, technique, dataset, named):
    with pytest.raises(SpecError) as refused:
        get_technique(spec_from_dict(spec(tmp_path, technique, **dataset)))
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_declared_value_lists_need_no_from_data(tmp_path):
    qi = [{"name": "age", "kind": "numeric"}, {"name": "sex", "kind": "categorical", "order": ["female", "male"]}]
    technique = {"name": "dp-synthetic", "epsilon": 1.0, "bins": {"age": [17, 30, 50, 95]}}
    occupations = sorted(census(50).occupation.unique())
    s = spec(tmp_path, technique, qi=qi, sensitive_order=[f"occ-{i:02d}" for i in range(1, 51)])
    assert get_technique(spec_from_dict(s)).params.categories == "declared" and occupations


# --- several rows per person ------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_person_limit_keeps_at_most_the_limit_of_each_persons_rows(limit):
    person = np.repeat(np.arange(50), np.random.default_rng(0).integers(1, 6, 50))
    kept = person_limit(person, limit, np.random.default_rng(1))
    per_person = np.bincount(person[kept], minlength=50)
    assert np.array_equal(per_person, np.minimum(np.bincount(person), limit))  # a direct count
    assert len(np.unique(kept)) == len(kept)


def test_many_rows_without_a_limit_keep_one_row_per_person(tmp_path):
    data = frame(300)
    data = data.loc[data.index.repeat(3)].reset_index(drop=True)  # each person three times
    many = privpub.publish(data, spec(tmp_path / "m", rows_per_person="many"))
    assert (many.tables["mechanism"].sensitivity == 1).all()
    # about 300 rows published (one per person), not 900
    assert abs(len(many.tables["table"]) - 300) < 60


def test_many_rows_per_person_scales_the_noise_to_the_limit(tmp_path):
    data = frame(400)
    data = data.loc[data.index.repeat(2)].reset_index(drop=True)  # each person twice
    technique = {**TECHNIQUE, "max_rows_per_person": 2}
    many = privpub.publish(data, spec(tmp_path / "m", technique, rows_per_person="many"))
    one = privpub.publish(frame(400), spec(tmp_path / "o"))
    m, o = many.tables["mechanism"], one.tables["mechanism"]
    assert np.allclose(m.sigma.dropna(), 2 * o.sigma.dropna()) and (m.sensitivity == 2).all()
    assert np.allclose(m.rho, o.rho)  # the same budget


# --- the statistical test of the noise --------------------------------------------------------


def audit(epsilon, limit, runs, seed=11, z=3.09):
    """The measurement step run `runs` times on neighbouring inputs D and D' (D' = D plus one
    person with `limit` rows, all in one cell: the worst case of the L2 sensitivity). The
    statistic T = sum_k s (y_k[cell] - c_k[cell]) / sigma_k^2 (the likelihood-ratio test of the
    CLAIMED Gaussian noise) separates them by mu = (mean T' - mean T) / sd(T); for Gaussian
    noise that is the mechanism's Gaussian-DP parameter, mu^2 / 2 its rho (Dong, Roth and Su 2019).
    Returns the epsilon of the one-sided lower confidence bound of mu (z = 3.09: 99.9%), the
    selection step's rho added at its claimed value, and the claimed epsilon."""
    rng = np.random.default_rng(seed)
    sizes = [3, 4, 2, 5]
    codes = np.column_stack([rng.integers(0, s, 150) for s in sizes])
    target = np.array([[1, 2, 0, 4]] * limit)
    neighbour = np.vstack([codes, target])
    rho = rho_for(epsilon, 1e-6)
    sigma1, eps_sel, sigma2 = noise_scales(len(sizes), rho, float(limit))
    cliques = {sigma1: [(a,) for a in range(len(sizes))], sigma2: [(0, 1), (1, 2), (1, 3)]}
    stats = []
    for data in (codes, neighbour):
        t = np.zeros(runs)
        for sigma, group in cliques.items():
            cells = [marginal(target[:1], sizes, c).argmax() for c in group]
            base = [marginal(codes, sizes, c)[cell] for c, cell in zip(group, cells)]
            for r in range(runs):
                noisy = measure(data, sizes, group, sigma, rng)
                t[r] += sum(limit * (y[cell] - b) / sigma**2 for y, cell, b in zip(noisy, cells, base))
        stats.append(t)
    sd = np.sqrt((stats[0].var(ddof=1) + stats[1].var(ddof=1)) / 2)
    shift = stats[1].mean() - stats[0].mean()
    mu_low = max((shift - z * sd * math.sqrt(2 / runs)) / sd, 0.0)
    claimed_mu = math.sqrt(sum(limit**2 * len(g) / s**2 for s, g in cliques.items()))
    spent = approx_epsilon(mu_low**2 / 2 + (len(sizes) - 1) * exponential_rho(eps_sel), 1e-6)
    return spent, epsilon, shift / sd, claimed_mu


def test_the_empirical_privacy_loss_of_the_noise_is_within_the_claim():
    """Fast: epsilon 1, one row per person, 3000 runs a side. A noise scaled down by half doubles
    mu (the empirical epsilon then about twice the claim), caught at 99.9% confidence."""
    spent, claimed, mu, claimed_mu = audit(1.0, 1, 3000)
    assert spent <= claimed
    assert mu == pytest.approx(claimed_mu, abs=0.1)  # and the noise is not needlessly large either


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("limit", [1, 3])
def test_the_empirical_privacy_loss_holds_over_epsilons_and_limits(epsilon, limit):
    spent, claimed, mu, claimed_mu = audit(epsilon, limit, 20000)
    assert spent <= claimed
    assert mu == pytest.approx(claimed_mu, abs=0.05)


def test_the_noise_of_each_cell_has_the_recorded_scale():
    """The measured counts minus the true ones have the standard deviation the mechanism table
    records (within 4%, 20000 cells)."""
    rng = np.random.default_rng(4)
    codes = np.column_stack([rng.integers(0, 4, 100), rng.integers(0, 5, 100)])
    for sigma in (0.5, 7.0):
        noisy = np.concatenate([measure(codes, [4, 5], [(0, 1)], sigma, rng)[0] for _ in range(1000)])
        truth = np.tile(marginal(codes, [4, 5], (0, 1)), 1000)
        assert np.std(noisy - truth) == pytest.approx(sigma, rel=0.04)


# --- explore over an epsilon grid -------------------------------------------------------------


def test_explore_over_an_epsilon_grid_shows_the_utility_budget_trade_off(tmp_path):
    s = spec(tmp_path)
    del s["dataset"]["input"]
    rows = privpub.explore(frame(1500), s, {"epsilon": [0.5, 1.0, 4.0]})
    assert rows.passed.all() and rows.epsilon.tolist() == pytest.approx([0.5, 1.0, 4.0])
    assert rows["query-error-1pct"].iloc[2] < rows["query-error-1pct"].iloc[0]  # more budget, less error
    page = open(rows.attrs["page"]).read()
    assert "against epsilon (differential privacy)" in page


def test_a_date_qi_is_published_as_its_bins_dates(tmp_path):
    data = frame(400)
    data["visit"] = (np.datetime64("2024-01-01") + np.random.default_rng(2).integers(0, 366, 400)).astype(str)
    qi = [{"name": "age", "kind": "numeric"}, {"name": "visit", "kind": "date", "near_unique": "allow"}]
    edges = ["2024-01-01", "2024-04-01", "2024-07-01", "2024-10-01", "2024-12-31"]
    technique = {**TECHNIQUE, "bins": {"visit": edges}}
    table = privpub.publish(data, spec(tmp_path, technique, qi=qi)).tables["table"]
    lo, hi = pd.to_datetime(table.visit_lo), pd.to_datetime(table.visit_hi)
    starts = pd.to_datetime(edges[:-1])
    assert set(lo) <= set(starts) and (hi >= lo).all()
    assert set(hi) <= set(starts[1:] - pd.Timedelta(days=1)) | {pd.Timestamp("2024-12-31")}
    with pytest.raises(SpecError, match="ISO dates"):
        get_technique(
            spec_from_dict(spec(tmp_path, {**TECHNIQUE, "bounds": {"age": [17, 95], "visit": [0, 9]}}, qi=qi))
        )


def test_no_published_file_holds_the_seed_the_noise_was_drawn_from(tmp_path):
    """Anyone holding a DP release's seed could redraw its noise and subtract it: the seed stays in
    the state (for the steward's republishing) and no file of the release folder holds it, while
    `privpub verify --history` still checks the manifest against the state."""
    seed = 987654321987
    given = spec(tmp_path)
    given["output"]["seed"] = seed
    release = privpub.publish(frame(), given)
    folder = tmp_path / "rel" / release.id
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"manifest.json", "report.html"}
    assert not [p.name for p in files if str(seed).encode() in p.read_bytes()]
    history = Store(tmp_path / "s.duckdb").history(None)
    assert int(history["seed"].iloc[0]) == seed
    checks = privpub.verify(release.id, state=str(tmp_path / "s.duckdb"), history=True)
    assert checks.attrs["ok"], checks.attrs["lines"]


@pytest.mark.parametrize("seed", [3, 6])
def test_a_synthetic_box_empty_on_a_column_prints_no_warning(tmp_path, seed):
    """These seeds draw a synthetic table one of whose boxes is empty on a column (width 0): the
    KL divergence's search order took log 0 and numpy printed a RuntimeWarning to the steward's
    terminal (session 24); the figures are the same, the line is gone."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = spec(tmp_path)
        settings["output"]["seed"] = seed
        release = privpub.publish(frame(200), settings)
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert "kl-divergence" in set(release.figures.name)  # computed (here: infinite, said in words)


def test_synthetic_rows_as_many_as_the_input_give_no_non_uniform_entropy(tmp_path):
    """The synthetic row count is a noisy count, so it can equal the input's: the rows are still
    no input records, and P(original | published cell) has no original to read (a synthetic box
    may hold no input value: log 0, a RuntimeWarning and an infinite figure, seen in CI). The
    model does not apply, as docs/utility.md says; a generalized table of as many rows keeps it."""
    settings = spec(tmp_path)
    tech = get_technique(spec_from_dict(settings))
    data = Microdata.from_frame(tech.spec, frame(200))
    release = tech.anonymize(data, tech.partition(data, np.random.default_rng(5)), np.random.default_rng(5))
    synthetic = release.tables["table"]
    as_many = pa.concat_tables([synthetic] * (data.n // synthetic.num_rows + 1)).slice(0, data.n)
    view = replace(tech.quality_view(release), table=as_many)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figures = quality_figures(view, data)
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert figures["non-uniform-entropy"] == not_applicable("the published rows are not one per input row")
    records = replace(view, records=True)  # the same rows read as records: the model applies
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not isinstance(quality_figures(records, data)["non-uniform-entropy"], str)

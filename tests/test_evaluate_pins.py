"""`evaluate` gives the same queries and the same figures as before it was made fast.

The expected values were computed by the per-query implementation (one DuckDB conditional sum
per query, one estimate loop per query) on this fixed input and seed, before any change: a
faster evaluate must reproduce every utility figure exactly (integers) or to float round-off,
the workload query for query (its SQL text), the exact answers and every estimate (three
weighted sums of the estimate vector, so one changed estimate moves them).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.evaluate import evaluate
from privpub.tasks.evaluate.workload import exact_answers, make_workload
from tests.helpers import release_of, technique_and_data

ROWS, DATA_SEED, RELEASE_SEED = 2500, 5, 7
# Butterfly's two QIDs (as in test_butterfly_pipeline): salary is the sensitive column there.
S1 = ["age", "occupation", "country", "sex", "marital", "education"]
S2 = ["sex", "marital", "education", "workclass", "race"]
MULTI_QI = [q for q in CENSUS_QI if q["name"] != "salary"] + [{"name": "occupation", "kind": "categorical"}]

CASES = {
    "generalization": (CENSUS_QI, "occupation", {"k": 5, "l": 3}),
    "muco": (CENSUS_QI, "occupation", {"l": 3, "delta": "1/6"}),
    "anatomy": (CENSUS_QI, "occupation", {"l": 3}),
    "ambiguity": (CENSUS_QI, "occupation", {"alpha": 0.25, "beta": 0.1}),
    "priview": (CENSUS_QI, "occupation", {"alpha": 0.25, "beta": 0.1}),
    "butterfly": (MULTI_QI, "salary", {"k": 6, "k_prime": 2, "qids": [S1, S2]}),
    "union-qid": (MULTI_QI, "salary", {"k": 6, "qids": [S1, S2]}),
}


def _fingerprint(values: np.ndarray) -> list[float]:
    """Sum, position-weighted sum and sum of squares: one changed entry moves at least one."""
    v = np.asarray(values, dtype=float)
    return [float(v.sum()), float(v @ np.arange(1, len(v) + 1)), float(v @ v)]


def figures_of(name: str) -> dict:
    qi, sensitive, params = CASES[name]
    tech, data = technique_and_data(census(ROWS, seed=DATA_SEED), qi, sensitive, name, **params)
    _, release = release_of(tech, data, RELEASE_SEED)
    workload = make_workload(data, np.random.default_rng(0))
    sql = "\n".join(f"{q.selectivity}|{q.sql_where(sensitive)}" for q in workload)
    return {
        "utility": evaluate(tech, release, data),
        "workload_sha256": hashlib.sha256(sql.encode()).hexdigest(),
        "exact": _fingerprint(exact_answers(data.frame, workload, sensitive)),
        "estimates": _fingerprint(tech.estimate_counts(release, workload)),
    }


def assert_same(got, want, where: str) -> None:
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for key in want:
            assert_same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, float), where
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-9, abs=1e-12), where
    else:
        assert type(got) is type(want) and got == want, where


EXPECTED: dict = {
    "ambiguity": {
        "estimates": [2459.6379262198707, 472655.0763147099, 33400.29101111553],
        "exact": [2028.0, 397850.0, 22960.0],
        "utility": {
            "avg-group-size": 10.0,
            "discernibility": 25000,
            "groups": 250,
            "max-group-size": 10,
            "min-group-size": 10,
            "queries": 300,
            "query-error-10pct": 0.5392974070694688,
            "query-error-1pct": 0.842398219702696,
            "query-error-5pct": 0.9033831265189712,
            "suppressed-rows": 0,
        },
        "workload_sha256": "0169d23b471b5f6eaf38d09f9c2a58256ac0653c5b3272167d79cb18d2dd6f2a",
    },
    "anatomy": {
        "estimates": [1831.4999999999998, 371203.4999999999, 19745.069444444438],
        "exact": [2028.0, 397850.0, 22960.0],
        "utility": {
            "queries": 300,
            "query-error-10pct": 0.19036163731444947,
            "query-error-1pct": 0.389079365079365,
            "query-error-5pct": 0.3284948246198247,
            "suppressed-rows": 0,
        },
        "workload_sha256": "0169d23b471b5f6eaf38d09f9c2a58256ac0653c5b3272167d79cb18d2dd6f2a",
    },
    "butterfly": {
        "estimates": [1986.1413581680035, 392810.9204399358, 22383.506610437656],
        "exact": [2326.0, 461794.0, 31532.0],
        "utility": {
            "avg-group-size": 7.0821529745042495,
            "discernibility": 21658,
            "groups": 353,
            "max-group-size": 15,
            "min-group-size": 2,
            "penalty-age": 757.7285714285714,
            "penalty-country": 289.6769230769231,
            "penalty-education": 868.5,
            "penalty-marital": 317.0,
            "penalty-occupation": 779.4897959183672,
            "penalty-race": 343.25,
            "penalty-sex": 0.0,
            "penalty-workclass": 301.1111111111111,
            "queries": 300,
            "query-error-10pct": 0.2738038233749818,
            "query-error-1pct": 0.5049953190476542,
            "query-error-5pct": 0.4034400168408662,
            "suppressed-rows": 0,
            "uncertainty-penalty": 3656.7564015349726,
            "uncertainty-penalty-common": 1185.5,
            "uncertainty-penalty-distinct": 2471.2564015349726,
            "uncertainty-penalty-normalized": 0.18283782007674862,
        },
        "workload_sha256": "4d65e7c876ba61ef12779ce3a44e1a3cf2424cc3da6fa2c896c369e6627d6e7d",
    },
    "generalization": {
        "estimates": [1784.1652805442668, 354219.9243613382, 17566.552970610624],
        "exact": [2028.0, 397850.0, 22960.0],
        "utility": {
            "avg-group-size": 6.410256410256411,
            "discernibility": 16728,
            "groups": 390,
            "max-group-size": 9,
            "min-group-size": 5,
            "penalty-age": 554.9142857142857,
            "penalty-country": 294.2307692307692,
            "penalty-education": 562.875,
            "penalty-marital": 248.8,
            "penalty-race": 307.125,
            "penalty-salary": 579.4285714285713,
            "penalty-sex": 0.0,
            "penalty-workclass": 276.44444444444446,
            "queries": 300,
            "query-error-10pct": 0.21427833972349153,
            "query-error-1pct": 0.4748602536440092,
            "query-error-5pct": 0.49247088208738526,
            "suppressed-rows": 0,
            "uncertainty-penalty": 2823.8180708180707,
            "uncertainty-penalty-normalized": 0.14119090354090355,
        },
        "workload_sha256": "0169d23b471b5f6eaf38d09f9c2a58256ac0653c5b3272167d79cb18d2dd6f2a",
    },
    "muco": {
        "estimates": [1982.0, 405149.0, 24184.0],
        "exact": [2028.0, 397850.0, 22960.0],
        "utility": {
            "iloss": 0.07580595663265306,
            "queries": 300,
            "query-error-10pct": 0.2407236974297346,
            "query-error-1pct": 0.6587619047619048,
            "query-error-5pct": 0.5361916416916417,
            "suppressed-rows": 0,
        },
        "workload_sha256": "0169d23b471b5f6eaf38d09f9c2a58256ac0653c5b3272167d79cb18d2dd6f2a",
    },
    "priview": {
        "estimates": [1790.713888888889, 364010.7083333334, 18756.465594135807],
        "exact": [2028.0, 397850.0, 22960.0],
        "utility": {
            "avg-group-size": 40.53333333333333,
            "discernibility": 99584,
            "groups": 60,
            "max-group-size": 72,
            "min-group-size": 40,
            "queries": 300,
            "query-error-10pct": 0.24767650528965932,
            "query-error-1pct": 0.45344391534391526,
            "query-error-5pct": 0.4073264307451808,
            "suppressed-rows": 68,
        },
        "workload_sha256": "0169d23b471b5f6eaf38d09f9c2a58256ac0653c5b3272167d79cb18d2dd6f2a",
    },
    "union-qid": {
        "estimates": [2048.3243874365444, 402417.91830716014, 23701.26365397634],
        "exact": [2326.0, 461794.0, 31532.0],
        "utility": {
            "avg-group-size": 8.064516129032258,
            "discernibility": 21168,
            "groups": 310,
            "max-group-size": 12,
            "min-group-size": 6,
            "penalty-age": 641.8142857142857,
            "penalty-country": 497.7076923076923,
            "penalty-education": 650.125,
            "penalty-marital": 284.2,
            "penalty-occupation": 677.7346938775511,
            "penalty-race": 365.0,
            "penalty-sex": 0.0,
            "penalty-workclass": 298.4444444444444,
            "queries": 300,
            "query-error-10pct": 0.2868618914408052,
            "query-error-1pct": 0.5135334157284994,
            "query-error-5pct": 0.4460876281111762,
            "suppressed-rows": 0,
            "uncertainty-penalty": 3415.0261163439736,
            "uncertainty-penalty-common": 934.325,
            "uncertainty-penalty-distinct": 2480.701116343974,
            "uncertainty-penalty-normalized": 0.1707513058171987,
        },
        "workload_sha256": "4d65e7c876ba61ef12779ce3a44e1a3cf2424cc3da6fa2c896c369e6627d6e7d",
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_evaluate_reproduces_the_pinned_figures(name):
    assert_same(figures_of(name), EXPECTED[name], name)


def test_small_blocks_draw_the_same_queries(monkeypatch):
    """The drawn row is looked for block by block, from the nearer end: with blocks much smaller
    than the table (many blocks, both directions), the workload is still the pinned one."""
    from privpub.tasks.evaluate.workload import _Selections

    monkeypatch.setattr(_Selections, "BLOCK", 37)
    qi, sensitive, params = CASES["generalization"]
    _, data = technique_and_data(census(ROWS, seed=DATA_SEED), qi, sensitive, "generalization", **params)
    workload = make_workload(data, np.random.default_rng(0))
    sql = "\n".join(f"{q.selectivity}|{q.sql_where(sensitive)}" for q in workload)
    assert hashlib.sha256(sql.encode()).hexdigest() == EXPECTED["generalization"]["workload_sha256"]

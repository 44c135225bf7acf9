"""The one-pass workload answers (tasks/evaluate/counting.py) against plain references: the SQL
of exact_answers, and row-by-row Python estimates that share no code with production."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.evaluate.counting import count_in_microdata
from privpub.tasks.evaluate.estimate_generalized import estimate_from_generalized
from privpub.tasks.evaluate.workload import RangeCond, exact_answers, make_workload
from tests.helpers import release_of, technique_and_data


def _share(cell, cond) -> float:
    """One published cell's share of a condition, by the paper's uniformity rule."""
    if isinstance(cond, RangeCond):
        lo, hi = cell
        if hi == lo:
            return float(cond.lo <= lo <= cond.hi)
        return max(0.0, min(hi, cond.hi) - max(lo, cond.lo)) / (hi - lo)
    return sum(str(v) in cond.values for v in cell) / len(cell) if len(cell) else 0.0


def brute_generalized(table, sensitive: str, workload) -> list[float]:
    rows = table.to_pylist()
    out = []
    for q in workload:
        total = 0.0
        for row in rows:
            if row[sensitive] != q.sensitive_value:
                continue
            weight = 1.0
            for name, cond in q.conditions:
                cell = (row[f"{name}_lo"], row[f"{name}_hi"]) if f"{name}_lo" in row else row[name]
                weight *= _share(cell, cond)
            total += weight
        out.append(total)
    return out


def brute_anatomy(qit, st_table, sensitive: str, workload) -> list[float]:
    qit_rows, st_rows = qit.to_pylist(), st_table.to_pylist()
    size: dict = {}
    for r in qit_rows:
        size[r["gid"]] = size.get(r["gid"], 0) + 1
    out = []
    for q in workload:
        count = {r["gid"]: r["count"] for r in st_rows if r[sensitive] == q.sensitive_value}
        out.append(
            sum(
                count.get(r["gid"], 0) / size[r["gid"]]
                for r in qit_rows
                if all(
                    _share([r[name]] if not isinstance(c, RangeCond) else (r[name], r[name]), c)
                    for name, c in q.conditions
                )
            )
        )
    return out


@settings(max_examples=8)
@given(rows=st.integers(40, 300), seed=st.integers(0, 10_000))
def test_exact_counts_equal_the_sql(rows, seed):
    tech, data = technique_and_data(census(rows, seed=seed), CENSUS_QI, "occupation", "generalization", k=2)
    workload = make_workload(data, np.random.default_rng(seed), per_band=6)
    assert workload
    np.testing.assert_array_equal(count_in_microdata(data, workload), exact_answers(data.frame, workload, "occupation"))


@pytest.mark.parametrize(
    "name, params", [("generalization", {"k": 4, "l": 2}), ("anatomy", {"l": 3}), ("muco", {"l": 3, "delta": "1/4"})]
)
def test_estimates_equal_a_row_by_row_reference(name, params):
    tech, data = technique_and_data(census(240, seed=2), CENSUS_QI, "occupation", name, **params)
    _, release = release_of(tech, data, 3)
    workload = make_workload(data, np.random.default_rng(4), per_band=15)
    got = tech.estimate_counts(release, workload)
    if name == "anatomy":
        want = brute_anatomy(release.tables["QIT"], release.tables["ST"], "occupation", workload)
    elif name == "muco":  # plain published values: a cell is a one-value set or a point range
        table = release.tables["table"]
        want = brute_anatomy(
            table.append_column("gid", [list(range(table.num_rows))]), _one_per_row(table), "occupation", workload
        )
    else:
        want = brute_generalized(release.tables["table"], "occupation", workload)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(got) > len(workload) // 3  # the queries do reach the rows


def _one_per_row(table):
    import pyarrow as pa

    return pa.table(
        {"gid": list(range(table.num_rows)), "occupation": table.column("occupation"), "count": [1] * table.num_rows}
    )


def test_generalized_estimate_of_a_suppressed_value_is_zero():
    """A null sensitive cell (serial's suppression) never matches a query's value."""
    import pyarrow as pa

    from privpub.tasks.evaluate.workload import CountQuery

    table = pa.table({"age_lo": [20, 20], "age_hi": [60, 60], "s": ["a", None]})
    q = CountQuery((("age", RangeCond(45, 60)),), "a")
    assert estimate_from_generalized(table, ["age"], "s", [q]).tolist() == [0.375]
    assert estimate_from_generalized(table, ["age"], "s", [CountQuery(q.conditions, "b")]).tolist() == [0.0]

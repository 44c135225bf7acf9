"""The quality models' lookup tables (tasks/evaluate/quality.py, issue 43 round 2): a trie level's
extension bounds read from a (code, prefix) count table must be np.searchsorted's, and the KL
divergence must be the direct count's with the table or the search, with the set cells as one
bit per (box, code) or searched by (set, code) keys, the input sorted by one key or a lexsort; a table of repeated rows (read per class)
gives the figures a table of its distinct rows repeated by hand gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privpub.tasks.evaluate.quality as quality
from tests.test_quality_kl_search import covering_rows, direct_kl, published, row_strategy, small_data


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 300),
    st.integers(1, 40),
    st.integers(1, 400),
    st.integers(0, 2**31),
)
def test_extension_bounds_are_the_binary_searchs(size, n_prefixes, n_candidates, seed):
    rng = np.random.default_rng(seed)
    # a level: distinct (prefix, code) keys, sorted; some prefixes with no extension at all
    keys = np.unique(rng.integers(0, n_prefixes, 3 * n_prefixes) * size + rng.integers(0, size, 3 * n_prefixes))
    prefix = rng.integers(0, n_prefixes, n_candidates)
    lo = rng.integers(0, size + 1, n_candidates)  # up to size: an empty cell reads lo = size
    hi = rng.integers(-1, size, n_candidates)  # down to -1: hi = -1
    want_a = np.searchsorted(keys, prefix * size + lo, "left")
    want_b = np.searchsorted(keys, prefix * size + hi, "right")
    a, b = quality._extensions(keys, size, n_prefixes, prefix, lo, hi)
    assert (a == want_a).all() and (b == want_b).all()


def test_extension_bounds_search_past_the_table_limit(monkeypatch):
    keys = np.array([0, 3, 5, 9, 10, 14], dtype=np.int64)  # size 5: prefixes 0, 1, 2
    prefix, lo, hi = np.array([0, 1, 2, 2]), np.array([0, 0, 0, 5]), np.array([4, 3, 4, -1])
    table = quality._extensions(keys, 5, 3, prefix, lo, hi)
    monkeypatch.setattr(quality, "DENSE_LEVEL", 0)
    searched = quality._extensions(keys, 5, 3, prefix, lo, hi)
    assert [list(x) for x in table] == [list(x) for x in searched] == [[0, 2, 4, 6], [2, 3, 6, 4]]


def _kl_table(rows):
    return pa.table(
        {
            "age_lo": pa.array([r["age_lo"] for r in rows], pa.float64()),
            "age_hi": pa.array([r["age_hi"] for r in rows], pa.float64()),
            "sex": pa.array([r["sex"] for r in rows], pa.list_(pa.string())),
            "edu": pa.array([r["edu"] for r in rows], pa.list_(pa.string())),
            "disease": pa.array([r["disease"] for r in rows], pa.string()),
        }
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(row_strategy, min_size=1, max_size=12), st.integers(0, 2), st.integers(0, 2**31))
def test_kl_with_and_without_the_tables_equals_the_direct_count(monkeypatch, drawn, suppressed, seed):
    data = small_data(
        [20, 21, 21, 25, 30, 30], ["f", "m", "x", "f", "m", "f"], list("abcdab"), ["flu"] * 3 + ["hiv"] * 3
    )
    rows = covering_rows(data) + published(drawn, data)
    weights = list(np.random.default_rng(seed).uniform(0.1, 3.0, len(rows)))
    want = direct_kl(data, rows, weights, suppressed)
    table = _kl_table(rows)
    view = quality.QualityView(table, "disease", joint=table, weights=np.array(weights), suppressed=suppressed)
    ways = [(1 << 25, 1 << 24, 2.0**62), (0, 1 << 24, 2.0**62), (1 << 25, 0, 2.0**62), (0, 0, 0.0)]
    for level, sets, one_key in ways:  # one_key 0: the input sorted by a lexsort
        with monkeypatch.context() as m:
            m.setattr(quality, "DENSE_LEVEL", level)
            m.setattr(quality, "DENSE_SETS", sets)
            m.setattr(quality, "ONE_KEY", one_key)
            m.setattr(quality, "STOP_AT", 0)  # down to the last column: every level's bounds are read
            got = quality.kl_divergence(view, data)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (level, sets)


def test_repeated_rows_read_per_class_give_the_figures_of_the_rows_one_by_one():
    """Rows equal on every QI column (one class, read once) still count once per row: the figures
    are the hand count's and the direct KL count's, row by row."""
    data = small_data([20, 21, 25, 30], ["f", "m", "f", "m"], list("abcd"), ["flu", "hiv", "flu", "hiv"])
    rows = [
        {"age_lo": 20.0, "age_hi": 21.0, "sex": ["f", "m"], "edu": ["a", "b"], "disease": "flu"},
        {"age_lo": 20.0, "age_hi": 21.0, "sex": ["f", "m"], "edu": ["a", "b"], "disease": "hiv"},
        {"age_lo": 25.0, "age_hi": 30.0, "sex": ["f", "m"], "edu": ["c", "d"], "disease": "flu"},
        {"age_lo": 25.0, "age_hi": 30.0, "sex": ["f", "m"], "edu": ["c", "d"], "disease": "hiv"},
    ]
    table = _kl_table(rows)
    view = quality.QualityView(table, "disease", classes_are_boxes=True, k=2)
    read = quality.TableCells.of_table(table, data.domains)
    assert len(read.cells[0].lo) == 2 and list(read.of) == [0, 0, 1, 1]  # two classes of two rows
    got = quality.quality_figures(view, data)
    # by hand: age cells [20, 21] (width 1 of span 10) and [25, 30] (5 of 10); sex: 2 of 2 values
    # (loss 1); edu: 2 of 4 values (loss 1/3); four rows of three QI cells each
    assert got["gen-iloss"] == pytest.approx((2 * 0.1 + 2 * 0.5 + 4 * 1 + 4 / 3) / 12, rel=1e-12)
    assert got["aecs"] == 1  # 4 rows / (2 boxes x k = 2)
    assert got["kl-divergence"] == pytest.approx(direct_kl(data, rows, [1.0] * 4, 0), rel=1e-12)

"""Every verified privacy model, just inside its threshold (passes) and one step outside (fails).

Each case builds the smallest published input that sits exactly at the threshold and then moves
it by the smallest step the model allows (one tuple, one value, one unit of a ratio), and
asserts the verdict and the reported figure exactly. tests/mutation/run_mutants.py loosens each
comparison in turn and checks that these tests notice.
"""
from __future__ import annotations

import math
from fractions import Fraction

import pyarrow as pa
import pytest

from tasks.verify import delta_probability as dp

# --- MuCo: delta-probability (Definition 3) and the cover (Corollary 3.2) ----------------------


def stored_tables(entries: list[tuple[str, int, int, int, float]]) -> pa.Table:
    """MuCo's stored long table from (attribute, gid, row, code, prob) entries."""
    a, g, r, c, p = zip(*entries)
    return pa.table({"attribute": list(a), "gid": pa.array(g, pa.int32()), "row": pa.array(r, pa.int64()),
                     "code": pa.array(c, pa.int32()), "prob": pa.array(p, pa.float64())})


def column_at_delta(delta: Fraction, step: Fraction) -> tuple[pa.Table, Fraction]:
    """Tuples over two values whose column of value 0 has max / sum = delta + a step: one tuple
    puts weight a/s (+ step) on value 0, b - a tuples put 1/s on it (delta = a/b, s a power of
    two, so every entry is exact in binary). Returns the table and its largest column ratio."""
    a, b = delta.numerator, delta.denominator
    s = 2 ** math.ceil(math.log2(a + 1))
    col0 = [Fraction(a, s) + step] + [Fraction(1, s)] * (b - a)
    col1 = [1 - p for p in col0]
    entries = [("age", 0, r, code, float(p)) for r, p0 in enumerate(col0)
               for code, p in ((0, p0), (1, 1 - p0)) if p > 0]
    worst = max(max(c) / sum(c) for c in (col0, col1) if sum(c))
    return stored_tables(entries), worst


DELTAS = [Fraction(1, 2), Fraction(1, 3), Fraction(1, 4), Fraction(2, 7), Fraction(3, 10)]


@pytest.mark.parametrize("delta", DELTAS, ids=str)
@pytest.mark.parametrize("step, passes", [
    (Fraction(0), True),  # exactly delta
    (Fraction(1, 2**34), True),  # above by LP round-off only (excess < 1e-9)
    (Fraction(1, 2**24), False),  # the smallest step the check must see (excess ~ 4e-8)
    (Fraction(1, 64), False),  # one grid step
], ids=["at", "round-off", "tiny-step", "grid-step"])
def test_delta_probability_at_and_above_delta(delta, step, passes):
    tables, worst = column_at_delta(delta, step)
    res = dp.check_delta_probability(tables, delta)
    assert res.passed is passes
    assert res.value == pytest.approx(float(worst), rel=1e-12)
    assert (worst > delta) is (step > 0)


def cover_case(need: int, carriers: int) -> tuple[pa.Table, pa.Table, pa.Table]:
    """One group of need + 1 tuples; value "a" carried (p = 1/2) by `carriers` of them, value "b"
    by all; published row 0 shows "a", the others "b"."""
    m = need + 1
    entries = []
    for r in range(m):
        if r < carriers:
            entries += [("job", 0, r, 0, 0.5), ("job", 0, r, 1, 0.5)]
        else:
            entries.append(("job", 0, r, 1, 1.0))
    published = pa.table({"job": ["a"] + ["b"] * (m - 1)})
    codes = pa.table({"attribute": ["job", "job"], "code": pa.array([0, 1], pa.int32()), "value": ["a", "b"]})
    return stored_tables(entries), published, codes


@pytest.mark.parametrize("delta", DELTAS + [Fraction(1, 6), Fraction(1667, 10000)], ids=str)
@pytest.mark.parametrize("short", [0, 1], ids=["exactly-ceil(1/delta)", "one-short"])
def test_cover_exactly_ceil_one_over_delta_and_one_short(delta, short):
    need = math.ceil(1 / delta)
    tables, published, codes = cover_case(need, need - short)
    res = dp.check_cover(tables, published, codes, delta, ["job"])
    assert res.value == need - short
    assert res.threshold == need
    assert res.passed is (short == 0)
    if short:
        assert res.worst == {"attribute": "job", "row": 0, "gid": 0}

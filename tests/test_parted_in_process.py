"""Rows kept in parts (tasks/validate/parted.PartedData) on the in-process executor: the Dask path's
code, without Dask. Reading, Mondrian's top levels from histograms, the subtrees finished per
node, the folder table's verification and the workload all run on any executor, and give the
in-memory release (up to row order) and its figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privpub.schemas.errors import InputError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.executor import Executor
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.parted_table import PartedTable
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.evaluate import evaluate
from privpub.tasks.evaluate.parted import evaluate_on_cluster
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.validate.parted import load_on_cluster


def _parts(folder: Path, frame: pd.DataFrame, n: int) -> None:
    folder.mkdir(parents=True)
    for i, piece in enumerate(np.array_split(np.arange(len(frame)), n)):
        frame.iloc[piece].to_parquet(folder / f"part-{i:03d}.parquet", index=False)


def _spec(root: Path, k: int, l: int | None, chunk_rows: int):
    d = census_spec("data", k=k, l=l)
    d["run"] = {"chunk_rows": chunk_rows}
    d["output"] = {"dir": "releases", "state": "privpub.duckdb", "seed": 3}
    return spec_from_dict(d, base_dir=root)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for c in frame.columns:
        if len(frame) and isinstance(frame[c].iloc[0], (list, np.ndarray)):
            frame[c] = frame[c].map(lambda v: "|".join(map(str, v)))
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


@pytest.mark.parametrize("k, l, chunk_rows", [(5, None, 200), (4, 3, 150)])
def test_parts_in_process_give_the_in_memory_release_and_figures(tmp_path, k, l, chunk_rows):
    frame = census(1500, seed=k)
    _parts(tmp_path / "data", frame, 4)
    spec = _spec(tmp_path, k, l, chunk_rows)
    tech = get_technique(spec)
    parted = load_on_cluster(spec, Executor())
    assert parted.in_parts and parted.n == 1500 and len(parted.parts) == 4
    memory = Microdata.from_frame(spec, validate_input(frame, spec))
    assert not memory.in_parts

    rng = np.random.default_rng(1)
    cpart = tech.partition(parted, rng)
    assert cpart.levels >= 1 and len(cpart.ready) > 1
    release = tech.anonymize(parted, cpart, rng)
    table = release.tables["table"]
    assert isinstance(table, PartedTable) and len(table.parts) == len(cpart.ready)
    mem_release = tech.anonymize(memory, tech.partition(memory, rng), rng)
    pd.testing.assert_frame_equal(_sorted(table.read().to_pandas()), _sorted(mem_release.tables["table"].to_pandas()))

    ours, theirs = tech.verify(release, {}), tech.verify(mem_release, {})
    assert [(r.model, r.value, r.passed) for r in ours] == [(r.model, r.value, r.passed) for r in theirs]
    assert sorted(tech.group_sizes(release)) == sorted(tech.group_sizes(mem_release))
    on_parts = evaluate_on_cluster(tech, release, parted, 5)
    in_memory = evaluate(tech, mem_release, memory, 5)
    assert on_parts.keys() == in_memory.keys()
    for name, value in in_memory.items():
        assert on_parts[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_a_repeated_person_id_across_parts_is_refused_in_process(tmp_path):
    frame = census(300, seed=2)
    frame.loc[250, "pid"] = frame.loc[10, "pid"]
    _parts(tmp_path / "data", frame, 3)
    with pytest.raises(
        InputError, match=r"part-002.parquet row 51, column person id: repeats the person id of part-000.parquet row 11"
    ):
        load_on_cluster(_spec(tmp_path, 5, None, 100), Executor())


@pytest.mark.parametrize("population", [None, 50_000])  # with it, the population figures too
def test_risk_of_rows_in_parts_and_of_a_folder_table_equals_in_memory(tmp_path, population):
    from privpub.tasks.risk import input_risk
    from privpub.tasks.risk.parted import release_risk, rows_risk

    frame = census(1200, seed=9)
    _parts(tmp_path / "data", frame, 3)
    spec = _spec(tmp_path, 4, 2, 300)
    tech = get_technique(spec)
    parted = load_on_cluster(spec, Executor())
    memory = Microdata.from_frame(spec, validate_input(frame, spec))
    got = rows_risk(parted, 0.2, population)
    assert got == pytest.approx(input_risk(memory, 0.2, population))
    assert ("input-population-uniques" in got) == (population is not None)
    rng = np.random.default_rng(2)
    release = tech.anonymize(parted, tech.partition(parted, rng), rng)
    mem_release = tech.anonymize(memory, tech.partition(memory, rng), rng)
    figures = release_risk(tech, release, 0.2, population)
    assert figures == pytest.approx(release_risk(tech, mem_release, 0.2, population))
    assert ("marketer-risk" in figures) == (population is not None)

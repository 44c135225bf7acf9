"""Chunked anonymize work mapped over Prefect task runners: the release does not depend on the
runner, its workers, or the order the chunks finish in; chunk tasks persist nothing."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from privpub.flows import publish as publish_mod
from privpub.flows.cli import main as cli_main
from privpub.flows.publish import publish, publish_flow
from privpub.schemas.errors import SpecError
from privpub.schemas.spec import load_spec, spec_from_dict
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import ANONYMIZE
from privpub.tasks.demo_data import census
from privpub.tasks.techniques.muco.technique import chunk_bounds
from privpub.tasks.techniques.registry import get_technique
from tests.helpers import write_spec

CHUNKED = 'delta = "1/4"\nchunk_rows = 120'  # 600 rows -> several chunks of whole groups


def _folder(root: Path, name: str, frame: pd.DataFrame, seed: int = 21) -> Path:
    folder = root / name
    folder.mkdir()
    frame.to_csv(folder / "census.csv", index=False)
    write_spec(folder, technique="muco", k=None, l=3, seed=seed, extra=CHUNKED)
    return folder


def _published(folder: Path, release_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = pd.read_parquet(folder / "releases" / release_id / "table.parquet")
    stored = Store(folder / "privpub.duckdb").private(release_id)["output_tables"].to_pandas()
    return table, stored


@pytest.fixture(scope="module")
def frame():
    out = census(600, seed=4)
    out["pid"] = [f"person-{uuid.uuid4().hex}" for _ in range(len(out))]
    return out


def _direct_release(folder: Path, seed: int):
    """technique.anonymize in this process, one chunk after the other, with the flow's stream."""
    spec = load_spec(folder / "spec.toml")
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, pd.read_csv(folder / "census.csv"))
    release_seq, _ = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(release_seq)
    part = tech.partition(data, rng)
    return tech, data, part, rng


def test_chunk_tasks_neither_cache_nor_persist():
    for t in (publish_mod.plan_chunks_task, publish_mod.anonymize_chunk_task, publish_mod.combine_chunks_task):
        assert t.persist_result is False
        assert t.cache_policy is NO_CACHE


def test_same_release_in_process_threads_and_direct(prefect_server, tmp_path, frame):
    a = _folder(tmp_path, "default", frame)
    b = _folder(tmp_path, "threads", frame)
    rel_a = publish_flow(spec_path=str(a / "spec.toml"))
    rel_b = publish_flow.with_options(task_runner=ThreadPoolTaskRunner(max_workers=3))(spec_path=str(b / "spec.toml"))
    table_a, stored_a = _published(a, rel_a)
    table_b, stored_b = _published(b, rel_b)
    pd.testing.assert_frame_equal(table_a, table_b)
    pd.testing.assert_frame_equal(stored_a, stored_b)
    assert len(table_a) == len(frame)

    tech, data, part, rng = _direct_release(a, 21)
    plan = ANONYMIZE.plan(tech, data, part, np.random.default_rng(0))
    assert len(plan.chunks) >= 3  # the test is about several chunks
    direct = tech.anonymize(data, part, rng)
    pd.testing.assert_frame_equal(direct.tables["table"].to_pandas(), table_a)


def test_chunk_order_does_not_matter(frame, tmp_path):
    folder = _folder(tmp_path, "order", frame)
    tech, data, part, rng = _direct_release(folder, 3)
    plan = ANONYMIZE.plan(tech, data, part, rng)
    results = [plan.run(c) for c in reversed(plan.chunks)][::-1]
    shuffled = plan.combine(results)
    tech, data, part, rng = _direct_release(folder, 3)
    sequential = tech.anonymize(data, part, rng)
    assert shuffled.tables["table"].equals(sequential.tables["table"])
    assert shuffled.private["output_tables"].equals(sequential.private["output_tables"])
    # another seed gives another release: the streams really come from the seed
    _, _, part2, rng2 = _direct_release(folder, 4)
    assert not tech.anonymize(data, part2, rng2).tables["table"].equals(sequential.tables["table"])


@given(st.lists(st.integers(1, 40), min_size=1, max_size=60), st.integers(1, 100))
def test_chunks_hold_whole_consecutive_groups(sizes, chunk_rows):
    sizes = np.array(sizes)
    bounds = chunk_bounds(sizes, chunk_rows)
    assert bounds[0] == 0 and bounds[-1] == len(sizes) and (np.diff(bounds) > 0).all()
    start = np.concatenate([[0], np.cumsum(sizes)])
    # brute force: a chunk starts at group g (g > 0) iff g's first row is in a later block of
    # chunk_rows rows than the first row of group g - 1
    expect = [0] + [g for g in range(1, len(sizes)) if start[g] // chunk_rows > start[g - 1] // chunk_rows]
    assert bounds[:-1].tolist() == expect


def test_run_section_is_checked():
    base = {
        "dataset": {
            "name": "t",
            "input": "x.csv",
            "person_id": "pid",
            "sensitive": "s",
            "qi": [{"name": "a", "kind": "numeric"}],
        }
    }
    assert spec_from_dict(base).run.task_runner == "inprocess"
    spec = spec_from_dict({**base, "run": {"task_runner": "dask", "workers": 2}})
    assert (spec.run.task_runner, spec.run.workers) == ("dask", 2)
    for bad in ({"task_runner": "ray"}, {"workers": 0}, {"threads": 2}):
        with pytest.raises(SpecError, match="run"):
            spec_from_dict({**base, "run": bad})


def test_dask_release_equals_in_process_and_leaks_nothing(prefect_server, prefect_results_dir, tmp_path, frame, capsys):
    """LocalCluster, 2 worker processes, through the CLI option; then the secret scan."""
    inproc = _folder(tmp_path, "inprocess", frame, seed=5)
    dask = _folder(tmp_path, "dask", frame, seed=5)
    rel_in = publish(str(inproc / "spec.toml"))
    assert cli_main(["publish", str(dask / "spec.toml"), "--task-runner", "dask", "--workers", "2", "--quiet"]) == 0
    rel_dask = capsys.readouterr().out.strip().splitlines()[-1]
    table_in, stored_in = _published(inproc, rel_in)
    table_dask, stored_dask = _published(dask, rel_dask)
    pd.testing.assert_frame_equal(table_in, table_dask)
    pd.testing.assert_frame_equal(stored_in, stored_dask)
    assert Store(dask / "privpub.duckdb").release(rel_dask)["spec"]["run"]["task_runner"] == "dask"

    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    needles = [pid.encode() for pid in frame.pid]
    scanned = 0
    for root in (prefect_results_dir, home / "storage", dask / "releases"):
        for path in (p for p in root.rglob("*") if p.is_file()) if root.exists() else ():
            blob = path.read_bytes()
            scanned += 1
            assert not [n for n in needles if n in blob], f"{path} contains person ids"
    assert scanned >= 2


def test_a_flow_started_without_publish_honours_run_dask(prefect_server, tmp_path, frame, monkeypatch):
    """A deployment runs publish_flow itself, with the flow's default runner: the chunks still go
    to the Dask cluster [run] asks for, and the release is the in-process one."""
    inproc = _folder(tmp_path, "inprocess", frame, seed=9)
    dask = _folder(tmp_path, "dask", frame, seed=9)
    spec = dask / "spec.toml"
    spec.write_text(spec.read_text() + '\n[run]\ntask_runner = "dask"\nworkers = 2\n')
    made = []
    real = publish_mod.make_task_runner
    monkeypatch.setattr(publish_mod, "make_task_runner", lambda run: made.append(run) or real(run))
    rel_dask = publish_flow(spec_path=str(spec))
    assert [type(real(r)).__name__ for r in made] == ["DaskTaskRunner"]
    rel_in = publish(str(inproc / "spec.toml"))
    pd.testing.assert_frame_equal(_published(inproc, rel_in)[0], _published(dask, rel_dask)[0])

"""MuCo's verify (its verdicts, the Section 5.1 disclosure figures) and evaluate (the workload's
counts, ILoss) run as chunks through the technique's hooks: every figure is the one-step computation's, to the
last bit, whatever the chunk layout, the order the chunks ran in, or the runner (Prefect's
threads in the flow process, a Dask LocalCluster of 2 worker processes)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from privpub.flows import publish as publish_mod
from privpub.flows.publish import publish
from privpub.schemas.spec import load_spec
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import UTILITY, VERIFY
from privpub.tasks.demo_data import census
from privpub.tasks.evaluate import evaluation_workload, utility_summary
from privpub.tasks.techniques.muco import delta_probability as dp
from privpub.tasks.techniques.muco import technique as muco
from privpub.tasks.techniques.registry import get_technique
from tests.helpers import write_spec

ROWS, SEED = 3000, 13


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("muco-chunked")
    census(ROWS, seed=8).to_csv(root / "census.csv", index=False)
    write_spec(root, technique="muco", k=None, l=3, seed=SEED, extra='delta = "1/4"\nchunk_rows = 1000')
    return root


def _release(folder):
    """The flow's release, made directly (the release's stream of the flow, same seed)."""
    spec = load_spec(folder / "spec.toml")
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, pd.read_csv(folder / "census.csv"))
    rng = np.random.default_rng(np.random.SeedSequence(SEED).spawn(2)[0])
    return tech, data, tech.anonymize(data, tech.partition(data, rng), rng)


def _one_step(tech, data, release) -> tuple[dict, dict]:
    """The figures computed without chunks: every QI subset in one disclosure pass, the counts
    over the whole published table, ILoss over every QI at once."""
    pub = dp.published_codes(release.tables["table"], release.private["value_codes"], data.qi_names)
    src, own = muco.own_rows(release)
    figures = dp.disclosure(data.codes.astype(np.int64), pub, own, data.sensitive_codes, data.sensitive_codes[src])
    privacy = muco.verify_muco(release, tech.spec) + muco.disclosure_results(figures)
    workload = evaluation_workload(data)
    utility = utility_summary(
        tech, release, data, workload, tech.estimate_counts(release, workload), {"iloss": muco.iloss(release, data)}
    )
    return {r.model: (r.value, r.passed) for r in privacy}, utility


@pytest.fixture(scope="module")
def reference(folder):
    tech, data, release = _release(folder)
    return _one_step(tech, data, release)


@pytest.mark.parametrize("n_chunks", [1, 3, 200])
def test_any_layout_and_order_gives_the_one_step_figures(folder, reference, monkeypatch, n_chunks):
    monkeypatch.setattr(muco, "DISCLOSURE_CHUNKS", n_chunks)
    monkeypatch.setattr(muco, "UTILITY_CHUNKS", n_chunks)
    tech, data, release = _release(folder)
    context = {"data": data}
    plan = VERIFY.plan(tech, release, context)
    assert len(plan.chunks) == 1 + min(n_chunks, 2 ** len(data.qi_names) - 1)  # verdicts, subsets
    results = [plan.run(c) for c in reversed(plan.chunks)][::-1]  # run last to first
    privacy = plan.combine(results)
    assert {r.model: (r.value, r.passed) for r in privacy} == reference[0]
    assert {r.model: (r.value, r.passed) for r in tech.verify(release, context)} == reference[0]

    workload = evaluation_workload(data)
    plan = UTILITY.plan(tech, release, data, workload)
    assert len(plan.chunks) >= 2  # counts and ILoss are separate pieces
    # as sent to a worker: a run of rows travels as its own bytes, not the whole table's buffers
    sent = [pickle.loads(pickle.dumps(c, protocol=5)) for c in plan.chunks]
    whole = len(pickle.dumps(release.tables["table"], protocol=5))
    counts = [c for c in plan.chunks if isinstance(c, muco.CountChunk)]
    if len(counts) >= 20:
        assert max(len(pickle.dumps(c.rows, protocol=5)) for c in counts) < whole / 10
    results = [plan.run(c) for c in reversed(sent)][::-1]
    estimate, figures = plan.combine(results)
    assert utility_summary(tech, release, data, workload, estimate, figures) == reference[1]


def test_verify_without_the_data_gives_the_verdicts_only(folder, reference):
    tech, _, release = _release(folder)
    assert len(VERIFY.plan(tech, release, {}).chunks) == 1
    verdicts = {r.model: (r.value, r.passed) for r in tech.verify(release, {})}
    assert verdicts == {k: v for k, v in reference[0].items() if "disclosure" not in k}
    assert all(passed for _, passed in verdicts.values())


def test_a_release_of_at_most_chunk_rows_is_checked_and_evaluated_in_one_step(folder, reference):
    from privpub.tasks.evaluate import evaluate

    tech, data, release = _release(folder)
    tech.params = tech.params.model_copy(update={"chunk_rows": ROWS})
    assert VERIFY.plan(tech, release, {"data": data}) is None
    assert UTILITY.plan(tech, release, data, evaluation_workload(data)) is None
    assert {r.model: (r.value, r.passed) for r in tech.verify(release, {"data": data})} == reference[0]
    assert evaluate(tech, release, data) == reference[1]


def _stored_figures(folder, release_id) -> dict:
    metrics = Store(folder / "privpub.duckdb").release(release_id)["metrics"]
    return dict(zip(metrics["name"], metrics["text_value"]))


@pytest.mark.parametrize("runner", ["inprocess", "dask"])
def test_flow_figures_on_threads_and_on_dask_equal_the_one_step_ones(
    prefect_server, tmp_path, folder, reference, monkeypatch, runner
):
    mapped = []
    real_map = publish_mod._map_chunks

    def spy(technique, chunks, run, chunk_task=None):
        mapped.append((chunk_task or publish_mod.anonymize_chunk_task).name)
        return real_map(technique, chunks, run, chunk_task)

    monkeypatch.setattr(publish_mod, "_map_chunks", spy)
    (tmp_path / "census.csv").write_bytes((folder / "census.csv").read_bytes())
    spec = tmp_path / "spec.toml"
    spec.write_text((folder / "spec.toml").read_text() + f'\n[run]\ntask_runner = "{runner}"\nworkers = 2\n')
    release_id = publish(str(spec))
    assert mapped == ["anonymize-chunk", "verify-chunk", "evaluate-chunk"]
    stored = _stored_figures(tmp_path, release_id)
    privacy, utility = reference
    for name, (value, _) in privacy.items():
        assert stored[name] == str(value), name
    for name, value in utility.items():
        assert stored[name] == str(value), name


def test_chunked_check_tasks_neither_cache_nor_persist():
    from prefect.cache_policies import NO_CACHE

    for t in (
        publish_mod.verify_plan_task,
        publish_mod.verify_chunk_task,
        publish_mod.verify_combine_task,
        publish_mod.evaluate_plan_task,
        publish_mod.evaluate_chunk_task,
        publish_mod.evaluate_combine_task,
    ):
        assert t.persist_result is False
        assert t.cache_policy is NO_CACHE

"""butterfly, anatomy and serial verify as chunks through the publish flow (tests/test_chunked_verify.py
checks the chunks themselves): on Prefect's threads and on a Dask LocalCluster of 2 worker
processes, a release stores the privacy figures and worst cases of a one-step verify."""

from __future__ import annotations

import json

import pytest

from privpub.flows import publish as publish_mod
from privpub.flows.publish import publish
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import census_spec_toml
from tests.test_butterfly_pipeline import spec_toml as multi_qid_toml
from tests.test_chunked_verify import SERIAL

# --- through the flow: Prefect's threads and a Dask LocalCluster of 2 ------------------------------


def _flow_spec(name: str) -> str:
    if name == "butterfly":
        return multi_qid_toml("butterfly", 4, "k_prime = 2")
    if name == "anatomy":
        return census_spec_toml(technique="anatomy", k=None, l=3, seed=4)
    return census_spec_toml(technique="serial", k=None, l=2, seed=4, extra=SERIAL)


def _stored_privacy(folder, release_id) -> dict:
    metrics = Store(folder / "privpub.duckdb").release(release_id)["metrics"]
    privacy = metrics[metrics.kind == "privacy"]
    return {
        r.name: (r.text_value, bool(r.passed), json.loads(r.detail) if r.detail else None) for r in privacy.itertuples()
    }


def _publish(folder, name: str, run: str) -> str:
    census(600, seed=3).to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(_flow_spec(name) + run)
    return publish(str(folder / "spec.toml"))


@pytest.fixture(scope="module")
def one_step_flow_figures(prefect_server, tmp_path_factory):
    out = {}
    for name in ("butterfly", "anatomy", "serial"):
        folder = tmp_path_factory.mktemp(f"one-step-{name}")
        out[name] = _stored_privacy(folder, _publish(folder, name, ""))
    return out


@pytest.mark.parametrize("runner", ["inprocess", "dask"])
@pytest.mark.parametrize("name", ["butterfly", "anatomy", "serial"])
def test_flow_verify_chunks_on_threads_and_on_dask_store_the_one_step_figures(
    one_step_flow_figures, tmp_path, monkeypatch, name, runner
):
    mapped = []
    real_map = publish_mod._map_chunks

    def spy(technique, chunks, run, chunk_task=None):
        mapped.append(((chunk_task or publish_mod.anonymize_chunk_task).name, len(chunks)))
        return real_map(technique, chunks, run, chunk_task)

    monkeypatch.setattr(publish_mod, "_map_chunks", spy)
    release_id = _publish(tmp_path, name, f'\n[run]\ntask_runner = "{runner}"\nworkers = 2\nchunk_rows = 150\n')
    assert mapped == [("verify-chunk", mapped[0][1])] and mapped[0][1] >= 3
    assert _stored_privacy(tmp_path, release_id) == one_step_flow_figures[name]

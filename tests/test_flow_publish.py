"""The publish flow end to end under a Prefect test server."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pandas as pd
import pytest

from privpub.flows.publish import publish_flow
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import write_spec


@pytest.fixture
def secret_census(tmp_path):
    """Person ids that cannot occur by chance anywhere else."""
    frame = census(500, seed=9)
    frame["pid"] = [f"person-{uuid.uuid4().hex}" for _ in range(len(frame))]
    frame.to_csv(tmp_path / "census.csv", index=False)
    return tmp_path, frame


def _files_under(*roots: Path):
    for root in roots:
        if root.exists():
            for p in root.rglob("*"):
                if p.is_file():
                    yield p


def test_two_runs_make_two_releases_of_one_series(prefect_server, secret_census):
    folder, _ = secret_census
    spec = write_spec(folder, seed=None)
    first = publish_flow(spec_path=str(spec))
    second = publish_flow(spec_path=str(spec), allow_repeat=True)  # the same input again
    hist = Store(folder / "privpub.duckdb").history()
    assert hist.release_id.tolist() == [first, second]
    assert hist.series.tolist() == ["census", "census"] and hist.sequence.tolist() == [1, 2]
    assert (folder / "releases" / first / "table.parquet").is_file()
    assert (folder / "releases" / second / "report.html").is_file()


def test_same_seed_and_input_is_recognised(prefect_server, secret_census):
    folder, _ = secret_census
    spec = write_spec(folder, seed=5)
    first = publish_flow(spec_path=str(spec))
    assert publish_flow(spec_path=str(spec)) == first
    assert len(Store(folder / "privpub.duckdb").history()) == 1


def test_secret_rows_never_reach_prefect_storage_or_the_output(prefect_server, secret_census, prefect_results_dir):
    folder, frame = secret_census
    release = publish_flow(spec_path=str(write_spec(folder, seed=3)))
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    needles = [pid.encode() for pid in frame.pid]
    rows = frame.drop(columns=["pid"]).astype(str).agg(",".join, axis=1)
    needles += [r.encode() for r in rows.head(50)]
    scanned = 0
    for path in _files_under(prefect_results_dir, home / "storage", folder / "releases"):
        blob = path.read_bytes()
        scanned += 1
        leaked = [n for n in needles if n in blob]
        assert not leaked, f"{path} contains input rows / person ids"
    assert scanned >= 2  # at least the published table and the report were scanned
    published = pd.read_parquet(folder / "releases" / release / "table.parquet")
    assert "pid" not in published.columns


def test_report_shows_provenance_series_and_what_figures_mean(prefect_server, secret_census):
    """report.html links back to its run (flow run id, trigger, actor, spec, input and file
    hashes), explains each figure and shows the release's place in its series."""
    folder, frame = secret_census
    spec = write_spec(folder, seed=None)
    first = publish_flow(spec_path=str(spec), actor="steward")
    second = publish_flow(spec_path=str(spec), actor="steward", allow_repeat=True)
    store = Store(folder / "privpub.duckdb")
    rel = store.release(second)
    page = (folder / "releases" / second / "report.html").read_text()
    for text in (
        "Provenance",
        "started by",
        "steward",
        "Prefect flow run",
        rel["flow_run_id"],
        rel["input_fingerprint"],
        str(spec),
        "what it measures",
        "lower is better",
        "In its series",
        first,
        second,
    ):
        assert text in page, text
    for t in rel["tables"].itertuples():
        assert f"sha256 of {t.file}" in page and t.sha256 in page
    assert not any(pid in page for pid in frame.pid)

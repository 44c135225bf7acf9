"""No person id and no unpublished cell anywhere a person reads (issue 25): every technique
publishes two releases of a series through the CLI, as a flow run of a Prefect server, from an
input with planted person ids and a planted column the release does not read; then every file of
every release folder (tables and report), the CLI's output, the audit log, the release figures'
details and the Prefect server's run names, state messages, logs and artifacts are scanned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
import pytest

from privpub.tasks.demo_data import census
from tests.helpers import child_pythonpath
from tests.test_contract import NAMES, ROWS, spec_dict, toml

ROOT = Path(__file__).resolve().parents[1]


def _publish_twice(folder: Path, name: str, api_url: str) -> tuple[list[str], str, list[str]]:
    frame = census(ROWS, seed=5)
    frame["pid"] = [f"PLANTED-ID-{uuid.uuid4().hex}" for _ in range(len(frame))]
    frame["note"] = [f"PLANTED-NOTE-{uuid.uuid4().hex}" for _ in range(len(frame))]  # never read
    frame.to_csv(folder / "census.csv", index=False)
    spec = spec_dict(name, series={"composition": "warn"})
    spec["output"].pop("seed")  # each release draws its own
    text = "\n".join(f"[{s}]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in body.items()) for s, body in spec.items())
    (folder / "spec.toml").write_text(text)
    env = {**os.environ, "PREFECT_API_URL": api_url, "PYTHONPATH": child_pythonpath(ROOT)}
    ids, output = [], ""
    for _ in range(2):
        done = subprocess.run(
            # --server: recorded on the server whose texts are searched, asked (issue 42)
            [sys.executable, "-m", "privpub.flows.cli", "publish", "spec.toml", "--allow-repeat", "--server"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.split()[0])
        output += done.stdout + done.stderr
    needles = [*frame.pid, *frame.note]
    return ids, output, needles


def _prefect_texts(api_url: str, names: list[str]) -> str:
    """What the Prefect server holds about the runs: names, state messages, logs, artifacts."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterName,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=names)))
        assert len(runs) == len(names)
        ids = [r.id for r in runs]
        logs: list = []
        while batch := client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)), limit=200, offset=len(logs)
        ):
            logs += batch
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=ids)))
        parts = [r.model_dump_json() for r in runs] + [log.message for log in logs]
        parts += [json.dumps(a.data, default=str) + str(a.description) for a in artifacts]
        assert logs and artifacts  # something was scanned
    return "\n".join(parts)


@pytest.mark.parametrize("name", NAMES)
def test_no_planted_id_or_unread_cell_anywhere_a_person_reads(prefect_server, tmp_path, name):
    """No planted id or unread cell in the CLI output, published files, audit log, figures or Prefect.

    Promise: messages-quote-no-cell."""
    ids, output, needles = _publish_twice(tmp_path, name, prefect_server)
    assert needles[0] in (tmp_path / "census.csv").read_text()  # the needles are what the input holds
    places: dict[str, str] = {"the CLI's output": output}
    for path in (tmp_path / "releases").rglob("*"):
        if path.is_file():
            places[str(path.relative_to(tmp_path))] = path.read_bytes().decode("latin-1")
    assert any(p.endswith("report.html") for p in places) and any(".parquet" in p for p in places)
    with duckdb.connect(str(tmp_path / "privpub.duckdb"), read_only=True) as con:
        places["audit_log"] = "\n".join(map(str, con.execute("SELECT * FROM audit_log").fetchall()))
        places["release_metrics"] = "\n".join(map(str, con.execute("SELECT * FROM release_metrics").fetchall()))
    places["Prefect"] = _prefect_texts(prefect_server, ids)
    found = {where: [n for n in needles if n in text][:2] for where, text in places.items()}
    assert not {where: hits for where, hits in found.items() if hits}
    assert "PLANTED" not in output

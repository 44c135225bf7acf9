"""Issue 42, items 2 and 5: a release is recorded on a Prefect server only when asked (`--server`,
`[run] server = true`), and the trail's rows carry their reason under one actor convention.
(With the service running: tests/test_service_e2e.py.)"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import privpub
from privpub.flows.cli import main
from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.demo_data import census, census_spec
from tests.helpers import child_pythonpath, write_spec

ROOT = Path(__file__).resolve().parents[1]


def _cli(folder: Path, tmp_path: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh process with no Prefect API anywhere unless `env_extra` names one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT),
        PRIVPUB_HOME=str(tmp_path / "no-service"),
        PREFECT_HOME=str(tmp_path / "prefect"),
        **env_extra,
    )
    code = (
        "import sys\nfrom privpub.flows.cli import main\ncode = main(sys.argv[1:])\n"
        "print('prefect' in sys.modules, file=sys.stderr)\nsys.exit(code)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=folder, timeout=180
    )


def test_run_server_is_a_strict_boolean_key():
    base = census_spec("census.csv", seed=1)
    assert spec_from_dict({**base, "run": {"server": True}}).run.server is True
    assert spec_from_dict(base).run.server is False
    with pytest.raises(SpecError, match=r"\[run\] server: Input should be a valid boolean") as err:
        spec_from_dict({**base, "run": {"server": "yes"}})
    assert "\n" not in str(err.value)
    with pytest.raises(SpecError, match=r"\[run\] servr: unknown key; did you mean server\?"):
        spec_from_dict({**base, "run": {"servr": True}})


def test_a_configured_api_without_server_asked_is_not_used(census_dir, tmp_path):
    """PREFECT_API_URL names a server that is not there: without --server nothing asks it (the
    release is in process, Prefect not even imported); with --server the run goes there and fails."""
    spec = write_spec(census_dir, seed=3)
    nobody = "http://127.0.0.1:9/api"
    done = _cli(census_dir, tmp_path, "publish", str(spec), "--quiet", PREFECT_API_URL=nobody)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "False"  # Prefect not imported
    release_id = done.stdout.strip()
    assert Store(census_dir / "privpub.duckdb").release(release_id)["flow_run_id"] is None
    spec.write_text(spec.read_text().replace("seed = 3", "seed = 4"))
    asked = _cli(
        census_dir, tmp_path, "publish", str(spec), "--quiet", "--allow-repeat", "--server", PREFECT_API_URL=nobody
    )
    assert asked.returncode == 1 and "privpub: error:" in asked.stderr
    assert Store(census_dir / "privpub.duckdb").history().release_id.tolist() == [release_id]


@pytest.mark.parametrize("how", ["flag", "spec"])
def test_server_asked_with_none_running_is_refused_before_any_work(census_dir, tmp_path, how):
    spec = write_spec(census_dir, seed=3)
    if how == "spec":
        spec.write_text(spec.read_text() + "\n[run]\nserver = true\n")
    args = ["publish", str(spec)] + (["--server"] if how == "flag" else [])
    done = _cli(census_dir, tmp_path, *args)
    assert done.returncode == 1
    error, prefect_loaded = done.stderr.strip().splitlines()
    assert error.startswith("privpub: error: --server / [run] server = true: no Prefect server to record the run on")
    assert "server start`" in error and prefect_loaded == "False"
    assert not (census_dir / "releases").exists()
    [row] = Store(census_dir / "privpub.duckdb").trail().itertuples()
    assert row.outcome == "failed" and row.message == error.removeprefix("privpub: error: ")


def test_a_dataframe_asking_for_a_server_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = census_spec("unused", seed=1)
    del spec["dataset"]["input"]
    spec["run"] = {"server": True}
    with pytest.raises(SpecError, match=r"\[run\] server = true: a DataFrame's release runs in this process only"):
        privpub.publish(census(300, seed=1), spec)


# --- the trail (issue 42, item 5) ------------------------------------------------------------


def test_a_repeat_refusal_row_carries_its_reason(census_dir, capsys):
    spec = write_spec(census_dir, seed=None)  # each publish draws a seed: the second is a repeat
    assert main(["publish", str(spec), "--quiet"]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["publish", str(spec), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    trail = Store(census_dir / "privpub.duckdb").trail()
    assert trail.outcome.tolist() == ["committed", "refused"]
    refused = trail.iloc[1]
    assert refused.error == "PrivacyRefused"
    assert refused.message == err.removeprefix("privpub: error: ")
    assert refused.message.startswith("the input is unchanged since release #1") and first in refused.message
    detail = json.loads(Store(census_dir / "privpub.duckdb").audit_log().detail.iloc[-1])
    assert detail["repeat_of"] == first and detail["trigger"] == "cli"


def test_a_risk_refusal_row_names_its_error_and_reason(census_dir, capsys):
    # k = 5: a prosecutor risk up to 1/5, above a limit of 0.01
    spec = write_spec(census_dir, seed=2, extra="\n[risk]\nmax_prosecutor = 0.01")
    assert main(["publish", str(spec), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    [row] = Store(census_dir / "privpub.duckdb").trail().itertuples()
    assert row.outcome == "refused" and row.error == "PrivacyRefused"
    assert row.message == err.removeprefix("privpub: error: ")
    assert row.message.startswith("release refused, re-identification risk above its limit")


def test_verify_and_publish_rows_share_the_actor_convention(census_dir, capsys):
    """One convention: --as when given, else the OS user, for every CLI command (verify was 'cli')."""
    spec = write_spec(census_dir, seed=5)
    state = str(census_dir / "privpub.duckdb")
    assert main(["publish", str(spec), "--quiet"]) == 0
    release_id = capsys.readouterr().out.strip()
    assert main(["verify", release_id, "--state", state]) == 0
    assert main(["verify", "--history", "--state", state]) == 0
    assert main(["verify", release_id, "--state", state, "--as", "auditor"]) == 0
    capsys.readouterr()
    rows = Store(state).trail()
    assert rows.action.tolist() == ["publish", "verify", "verify-history", "verify"]
    assert rows.actor.tolist() == [getpass.getuser()] * 3 + ["auditor"]


NOTICE_IN_A_FLOW = """
from prefect import flow
from privpub.flows.cli import quiet_prefect_console
from privpub.state.store import notice

@flow
def waits():
    notice("the state file x is busy (held open by a reader); waiting up to 1 s")

quiet_prefect_console()  # what the CLI does before a --server run without --verbose
waits()
"""


def test_privpub_lines_in_a_flow_run_look_as_in_process(prefect_server, tmp_path):
    """The busy-wait line of a run through a server reaches the terminal as `[privpub] ...`, the
    in-process format, not in Prefect's log format (issue 42)."""
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PYTHONPATH": child_pythonpath(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", NOTICE_IN_A_FLOW], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180
    )
    assert done.returncode == 0, done.stderr
    busy = [line for line in done.stderr.splitlines() if "busy" in line]
    assert busy == ["[privpub] the state file x is busy (held open by a reader); waiting up to 1 s"], done.stderr


def test_a_recorded_run_is_on_the_server_without_prefect_in_the_cli(prefect_server, census_dir, tmp_path):
    """--server: the release runs in the CLI's process (Prefect not imported) and is recorded as a
    flow run of the server, named after its release, with the Prefect driver's artifacts and the
    progress lines in its log; a refusal ends Failed, named after its reason (flows/recorded.py)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )

    spec = write_spec(census_dir, seed=None)
    done = _cli(census_dir, tmp_path, "publish", str(spec), "--server", PREFECT_API_URL=prefect_server)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False"  # Prefect not imported
    release_id = done.stdout.split()[0]
    refused = _cli(census_dir, tmp_path, "publish", str(spec), "--server", PREFECT_API_URL=prefect_server)
    assert refused.returncode == 1 and "the input is unchanged" in refused.stderr
    ids = [r.flow_run_id for r in Store(census_dir / "privpub.duckdb").audit_log().itertuples()]
    assert len(ids) == 2 and None not in ids
    with get_client(sync_client=True) as client:
        runs = {
            str(r.id): r for r in client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids)))
        }
        committed, failed = runs[ids[0]], runs[ids[1]]
        assert committed.name == release_id and committed.state_type.value == "COMPLETED"
        assert f"release:{release_id}" in committed.tags
        assert client.read_flow(committed.flow_id).name == "publish"
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[committed.id]))
        )
        assert {a.key for a in found} == {"release-summary", "release-report", "release-figures"}
        logs = [x.message for x in client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[committed.id])))]
        assert any(m.startswith("partition done in") for m in logs)
        assert failed.state_type.value == "FAILED" and "refused" in failed.tags
        assert failed.name.startswith("refused: the input is unchanged since release #1")
        assert failed.state.message in refused.stderr
    assert Store(census_dir / "privpub.duckdb").release(release_id)["flow_run_id"] == ids[0]

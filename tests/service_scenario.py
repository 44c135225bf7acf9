"""The release service driven as an operator drives it (tests/test_service_e2e.py and
tests/test_browser.py share one run of it): `privpub server start` on a free loopback port with
its own home folder, then runs of `publish/monthly-census` created through the Prefect client the
way the UI's "Custom run" and "Retry" buttons create them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest

DEPLOYMENT = "publish/monthly-census"
SERIAL = "serial/monthly-serial"
TYPED_NAME = "census check by hand"
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def privpub(*args: str, timeout: float = 200) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_RUNNER_POLL_FREQUENCY"] = "1"  # serve picks a new run up within 1 s, not 10 s
    return subprocess.run(
        [sys.executable, "-m", "privpub.flows.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def processes_with_home(home: Path) -> list[int]:
    """Every live process whose environment names this home folder: all the service started."""
    from privpub.flows.service import carries_home

    return [
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and carries_home(int(e.name), home) and not _zombie(int(e.name))
    ]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@dataclass
class Service:
    home: Path
    record: dict
    state: Path
    runs: dict = field(default_factory=dict)  # name -> final FlowRun
    notes: dict = field(default_factory=dict)

    @property
    def api(self) -> str:
        return self.record["api_url"]

    def client(self):
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: self.api}):
            return get_client(sync_client=True)

    def custom_run(self, overrides: dict, wait: bool = True, name: str | None = None, deployment: str = DEPLOYMENT):
        """What the UI's "Custom run" form sends: POST /deployments/{id}/create_flow_run with the
        edited parameters (merged over the deployment's defaults by the server) and, when the
        user typed one, the run's name (else the server makes one up)."""
        with self.client() as client:
            found = client.read_deployment_by_name(deployment)
            run = client.create_flow_run_from_deployment(found.id, parameters={"overrides": overrides}, name=name)
        return self.wait(run.id) if wait else run

    def retry(self, run_id: UUID):
        """The UI's "Retry": the finished run set back to Scheduled / AwaitingRetry, forced."""
        from prefect.states import AwaitingRetry

        with self.client() as client:
            client.set_flow_run_state(run_id, state=AwaitingRetry(scheduled_time=datetime.now(UTC)), force=True)
        time.sleep(0.5)
        return self.wait(run_id, after_count=1)

    def wait(self, run_id: UUID, timeout: float = 150, after_count: int = 0):
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while time.monotonic() < deadline:
                run = client.read_flow_run(run_id)
                if run.state_type.value in FINAL and run.run_count > after_count:
                    return run
                time.sleep(0.5)
        raise AssertionError(
            f"flow run {run_id} did not finish within {timeout} s "
            f"(serve log: {_tail(self.home / 'logs' / 'serve.log')})"
        )

    def logs(self, run_id: UUID) -> list[str]:
        from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

        with self.client() as client:
            return [
                log.message
                for log in client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])), limit=200)
            ]

    def artifacts(self, run_id: UUID) -> dict:
        """The run's artifacts by key (what the UI's Artifacts tab lists)."""
        from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

        with self.client() as client:
            found = client.read_artifacts(
                artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
            )
        return {a.key: a for a in found}

    def report_link(self, run_id: UUID) -> str:
        """The link of the run's "release-report" artifact (stored as "[text](link)")."""
        data = str(self.artifacts(run_id)["release-report"].data)
        return data[data.rindex("(") + 1 : -1] if data.endswith(")") else data

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        import duckdb

        with duckdb.connect(str(self.state), read_only=True) as con:
            return con.execute(sql, params or []).fetchall()


def _tail(path: Path, n: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "no log"


def _hold_read_only(state: Path) -> subprocess.Popen:
    """An analyst's read-only DuckDB session in another process, closed on a line on stdin."""
    code = (
        "import duckdb, sys\n"
        f"con = duckdb.connect({str(state)!r}, read_only=True)\n"
        "con.execute('SELECT count(*) FROM releases').fetchall()\n"
        "print('open', flush=True)\n"
        "sys.stdin.readline()\n"
        "con.close()\n"
        "print('closed', flush=True)\n"
    )
    reader = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert reader.stdout.readline().strip() == "open"
    return reader


def _run_while_reader_holds(service: Service):
    """A run created while the reader holds the file: it must wait (the wait is in its log),
    then commit once the reader lets go."""
    reader = _hold_read_only(service.state)
    try:
        run = service.custom_run({"technique": {"k": 8}}, wait=False)
        deadline, waited = time.monotonic() + 120, []
        while time.monotonic() < deadline and not waited:
            waited = [m for m in service.logs(run.id) if "busy" in m and "waiting" in m]
            time.sleep(0.5)
        service.notes["reader_wait_log"] = waited
        service.notes["reader_open_while_waiting"] = reader.poll() is None
    finally:
        reader.stdin.write("\n")
        reader.stdin.flush()
        reader.wait(timeout=30)
    return service.wait(run.id)


def run_scenario(home: Path) -> Service:
    from privpub.flows.demo import prepare_demo, prepare_serial_demo

    prepare_demo(home / "data", rows=400)
    prepare_serial_demo(home / "data", rows=400)
    # the scenario republishes the same people with other k overrides in one series, which the
    # series composition check refuses (tests/test_series_composition.py); here it only warns
    with open(home / "data" / "census.toml", "a") as spec:
        spec.write('\n[series]\ncomposition = "warn"\n')
    (home / "service.toml").write_text(
        'spec = "data/census.toml"\nserial_spec = "data/serial.toml"\ncron = "0 2 1 * *"\ntimezone = "Europe/Vienna"\n'
    )
    port, began = free_port(), time.monotonic()
    started = privpub("server", "start", "--port", str(port), "--home", str(home))
    assert started.returncode == 0, started.stdout + started.stderr
    record = json.loads((home / "server.json").read_text())
    service = Service(home=home, record=record, state=home / "data" / "privpub.duckdb")
    service.notes["start_output"] = started.stdout
    service.notes["start_seconds"] = round(time.monotonic() - began, 1)
    service.runs["override"] = service.custom_run({"technique": {"k": 7}})
    service.runs["misspelled"] = service.custom_run({"technique": {"kk": 7}})
    service.runs["retry"] = service.retry(service.runs["override"].id)
    service.runs["reader"] = _run_while_reader_holds(service)
    # refusals: one with a name typed in the form (kept), one of the serial deployment
    service.runs["typed_name"] = service.custom_run({"technique": {"kk": 7}}, name=TYPED_NAME)
    service.runs["serial_misspelled"] = service.custom_run({"technique": {"ll": 5}}, deployment=SERIAL)
    # the same people once more, the series check asked to refuse (the spec warns) and to keep 12
    # candidate values for everybody, which groups of 7 to 13 people cannot give
    service.runs["privacy_refused"] = service.custom_run(
        {"technique": {"k": 7}, "series": {"composition": "refuse", "l": 12}}
    )
    service.notes["scenario_seconds"] = round(time.monotonic() - began, 1)
    print(f"service scenario: start {service.notes['start_seconds']} s, all {service.notes['scenario_seconds']} s")
    return service


def stop_service(home: Path) -> subprocess.CompletedProcess:
    return privpub("server", "stop", "--home", str(home), timeout=90)


def group_alive(pgid: int) -> bool:
    from privpub.flows.service import group_members

    return bool(group_members(pgid))


def restart_if_stopped(service: Service) -> Service:
    """The scenario's service running again on its own home after a stop test ended it. Under
    `pytest -n` (loadfile, the larger file first) tests/test_service_e2e.py's stop tests can run
    before tests/test_browser.py in the same worker; the runs and their releases live in the home
    (Prefect's database, the state), so a restart on the same port (the report links the runs
    stored name the port after it) serves the same pages."""
    if (service.home / "server.json").exists():
        return service
    started = privpub("server", "start", "--port", str(service.record["port"]), "--home", str(service.home))
    assert started.returncode == 0, started.stdout + started.stderr
    service.record = json.loads((service.home / "server.json").read_text())
    return service


@pytest.fixture(scope="session")
def privpub_service(tmp_path_factory):
    home = tmp_path_factory.mktemp("service-home")
    try:
        yield run_scenario(home)
    finally:
        stop_service(home)
        for pid in processes_with_home(home):  # a failed stop must not leave them to later tests
            os.kill(pid, signal.SIGKILL)

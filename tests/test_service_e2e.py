"""End to end: `privpub server start`, runs of the served deployment created as the UI creates
them, and `privpub server stop` (tests/service_scenario.py drives the service once per session)."""

from __future__ import annotations

import json

from tests.service_scenario import (
    free_port,
    group_alive,
    privpub,
    processes_with_home,
    restart_if_stopped,
    stop_service,
)


def test_start_refuses_a_busy_port_and_a_misspelled_setting(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = privpub("server", "start", "--port", str(port), "--home", str(tmp_path / "a"))
    assert done.returncode == 1
    assert done.stderr.strip() == f"privpub: error: port {port} on 127.0.0.1 is in use; choose another with --port"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "service.toml").write_text('cron = "0 2 1 * *"\ntimezon = "UTC"\n')
    done = privpub("server", "start", "--port", str(free_port()), "--home", str(tmp_path / "b"))
    assert done.returncode == 1 and "timezon: unknown key; did you mean timezone?" in done.stderr
    assert not (tmp_path / "b" / "server.json").exists() and not processes_with_home(tmp_path / "b")


def test_stop_clears_a_stale_record_without_signalling_anyone(tmp_path):
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)
    (tmp_path / "server.json").write_text(
        json.dumps({"api_url": "http://127.0.0.1:1/api", "url": "x", "server_pid": pid, "server_started": "1"})
    )
    status = privpub("server", "status", "--home", str(tmp_path))
    assert status.returncode == 1 and "not answering" in status.stdout
    stopped = privpub("server", "stop", "--home", str(tmp_path))
    assert stopped.returncode == 0 and not (tmp_path / "server.json").exists()


def test_start_serves_the_ui_on_its_own_port_and_home(privpub_service):
    import urllib.request

    s = privpub_service
    assert f"UI {s.record['url']}" in s.notes["start_output"]
    with urllib.request.urlopen(f"{s.record['url']}/ui-settings", timeout=5) as response:
        assert json.loads(response.read())["api_url"] == s.api  # the UI calls this port, not 4200
    status = privpub("server", "status", "--home", str(s.home))
    assert status.returncode == 0 and "running" in status.stdout and "deployments served" in status.stdout
    # the settings of service.toml reached the schedule
    with s.client() as client:
        deployment = client.read_deployment_by_name("publish/monthly-census")
    assert [(d.schedule.cron, d.schedule.timezone) for d in deployment.schedules] == [("0 2 1 * *", "Europe/Vienna")]
    assert deployment.parameters["spec_path"] == str(s.home / "data" / "census.toml")


def test_custom_run_with_an_override_commits_one_release(privpub_service):
    s = privpub_service
    run = s.runs["override"]
    assert run.state_type.value == "COMPLETED"
    rows = s.query(
        "SELECT release_id, parameters, trigger, deployment, flow_run_id FROM release_rows WHERE flow_run_id = ?",
        [str(run.id)],
    )
    assert len(rows) == 1
    release_id, parameters, trigger, deployment, _ = rows[0]
    assert json.loads(parameters)["k"] == 7
    assert (trigger, deployment) == ("manual", "monthly-census")
    assert run.name == release_id  # the run is named after its release in the UI
    assert (s.home / "data" / "releases" / release_id / "report.html").is_file()


def test_misspelled_override_fails_with_did_you_mean_and_an_audit_row(privpub_service):
    s = privpub_service
    run = s.runs["misspelled"]
    assert run.state_type.value == "FAILED"
    assert run.state.message == "[technique] kk: unknown key; did you mean k?"
    rows = s.query("SELECT outcome, detail FROM audit_log WHERE flow_run_id = ?", [str(run.id)])
    assert len(rows) == 1 and rows[0][0] == "failed"
    detail = json.loads(rows[0][1])
    assert "kk: unknown key; did you mean k?" in json.dumps(detail)
    assert detail.get("trigger") == "manual"
    assert not s.query("SELECT 1 FROM release_rows WHERE flow_run_id = ?", [str(run.id)])


def test_retry_of_a_completed_run_publishes_nothing_new(privpub_service):
    s = privpub_service
    first, retried = s.runs["override"], s.runs["retry"]
    assert retried.id == first.id and retried.run_count == 2
    assert retried.state_type.value == "COMPLETED"
    assert s.query("SELECT count(*) FROM release_rows WHERE flow_run_id = ?", [str(first.id)]) == [(1,)]
    outcomes = [
        r[0] for r in s.query("SELECT outcome FROM audit_log WHERE flow_run_id = ? ORDER BY id", [str(first.id)])
    ]
    assert outcomes == ["committed", "already-published"]


def test_run_waits_for_a_read_only_session_then_commits(privpub_service):
    s = privpub_service
    run = s.runs["reader"]
    assert s.notes["reader_open_while_waiting"] and s.notes["reader_wait_log"], (
        "the run should have announced its wait while the reader held the file"
    )
    assert run.state_type.value == "COMPLETED"
    rows = s.query("SELECT parameters, trigger FROM release_rows WHERE flow_run_id = ?", [str(run.id)])
    assert len(rows) == 1 and json.loads(rows[0][0])["k"] == 8 and rows[0][1] == "manual"
    assert s.query("SELECT count(*) FROM release_rows") == [(2,)]  # the override's and this one


def test_cli_uses_the_running_service(privpub_service):
    """No PREFECT_API_URL: asked with --server, the CLI finds the service through its home
    folder's server.json, so its run is recorded by the service's server (and shows in its UI)."""
    import os
    import subprocess
    import sys

    s = privpub_service
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PRIVPUB_HOME"] = str(s.home)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "privpub.flows.cli",
            "publish",
            str(s.home / "data" / "census.toml"),
            "--quiet",
            "--as",
            "analyst",
            "--server",  # a CLI publish reports to the service only when asked (issue 42)
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    release_id = done.stdout.split()[0]
    [(run_id, trigger)] = s.query("SELECT flow_run_id, trigger FROM release_rows WHERE release_id = ?", [release_id])
    assert trigger == "cli"
    with s.client() as client:
        assert client.read_flow_run(run_id).name == release_id


def test_a_plain_cli_publish_stays_off_the_running_service(privpub_service):
    """Issue 42: with the service running, a CLI publish without --server runs in its own process
    (no flow run on the service, Prefect not imported); `server start` said which runs report there."""
    import os
    import subprocess
    import sys

    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    s = privpub_service
    assert "a CLI publish or serial only with --server or [run] server = true" in s.notes["start_output"]
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PRIVPUB_HOME"] = str(s.home)
    # the runs that ran (the scheduler adds future Scheduled runs of the cron at any time)
    ran = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(not_any_=[StateType.SCHEDULED])))
    with s.client() as client:
        before = client.count_flow_runs(flow_run_filter=ran)
    code = "import sys\nfrom privpub.flows.cli import main\nc = main(sys.argv[1:])\nprint('prefect' in sys.modules)\nsys.exit(c)"
    spec = str(s.home / "data" / "census.toml")
    done = subprocess.run(
        [sys.executable, "-c", code, "publish", spec, "--quiet", "--allow-repeat", "--as", "analyst"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    release_id, prefect_loaded = done.stdout.split()
    assert prefect_loaded == "False"
    [(run_id, trigger)] = s.query("SELECT flow_run_id, trigger FROM release_rows WHERE release_id = ?", [release_id])
    assert run_id is None and trigger == "cli"
    with s.client() as client:
        assert client.count_flow_runs(flow_run_filter=ran) == before


def test_the_run_links_its_report_over_http(privpub_service):
    """The override run's "release-report" artifact opens the report in a browser: a link to the
    service's report server (recorded in server.json, printed by start and status)."""
    import urllib.request

    s = privpub_service
    run = s.runs["override"]
    release_id = run.name
    reports_url = s.record["reports_url"]
    assert reports_url.startswith("http://127.0.0.1:") and reports_url != s.record["url"]
    assert f"reports: {reports_url}/reports/<release id>" in s.notes["start_output"]
    link = s.report_link(run.id)
    assert link == f"{reports_url}/reports/{release_id}"
    with urllib.request.urlopen(link, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/html")
        page = response.read().decode()
    assert release_id in page and page == (s.home / "data" / "releases" / release_id / "report.html").read_text()
    summary = str(s.artifacts(run.id)["release-summary"].data)
    assert f"[Open the full report]({link})" in summary and release_id in summary
    assert (s.home / "reports" / f"{release_id}.html").is_symlink()
    assert f"release:{release_id}" in run_tags(s, run.id)
    status = privpub("server", "status", "--home", str(s.home))
    assert f"reports: {reports_url}/reports/<release id>" in status.stdout


def run_tags(s, run_id) -> list[str]:
    with s.client() as client:
        return client.read_flow_run(run_id).tags


def test_a_refused_run_is_named_after_its_reason_and_logs_no_traceback(privpub_service):
    import time

    s = privpub_service
    run = s.runs["misspelled"]
    message = "[technique] kk: unknown key; did you mean k?"
    with s.client() as client:
        run = client.read_flow_run(run.id)
    assert run.state_type.value == "FAILED" and run.state.message == message
    assert run.name == f"refused: {message}"  # the generated name replaced
    assert "refused" in run.tags
    deadline, logs = time.monotonic() + 30, []
    while time.monotonic() < deadline and not any("Finished in state Failed" in m for m in logs):
        logs = s.logs(run.id)
        time.sleep(0.5)
    assert any(message in m for m in logs if "Finished in state Failed" in m), logs
    noisy = [m for m in logs if "Traceback" in m or 'File "' in m or "unexpected exception" in m]
    assert not noisy, noisy


def test_a_typed_run_name_is_kept_and_tagged(privpub_service):
    s = privpub_service
    with s.client() as client:
        run = client.read_flow_run(s.runs["typed_name"].id)
    assert run.state_type.value == "FAILED"
    assert run.state.message == "[technique] kk: unknown key; did you mean k?"
    assert run.name == "census check by hand" and "refused" in run.tags


def test_the_serial_deployment_refuses_the_same_way(privpub_service):
    s = privpub_service
    with s.client() as client:
        run = client.read_flow_run(s.runs["serial_misspelled"].id)
    assert run.state_type.value == "FAILED" and "ll: unknown key" in run.state.message
    assert "\n" not in run.state.message
    assert run.name == f"refused: {run.state.message}" and "refused" in run.tags
    assert not [m for m in s.logs(run.id) if "Traceback" in m or 'File "' in m]


def test_failed_runs_show_their_reason_where_runs_are_listed(privpub_service):
    """The run list (read_flow_runs, as the UI's Runs page) shows each failed run's one-line
    reason: in its state message and in its name or tags."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    s = privpub_service
    failed = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.FAILED])))
    with s.client() as client:
        runs = {r.id: r for r in client.read_flow_runs(flow_run_filter=failed)}
    expected = {s.runs[k].id for k in ("misspelled", "typed_name", "serial_misspelled")}
    assert expected <= set(runs)
    for run in runs.values():
        assert run.state.message and "\n" not in run.state.message
        assert "refused" in run.tags
        assert run.name.startswith("refused: ") or run.name == "census check by hand"
    with s.client() as client:
        completed = client.read_flow_run(s.runs["override"].id)
    assert completed.name.startswith("census-") and f"release:{completed.name}" in completed.tags


def test_deployment_parameters_carry_help_text(privpub_service):
    """The UI's Custom run form shows each parameter's description (from the flows' docstrings)."""
    s = privpub_service
    with s.client() as client:
        for name in ("publish/monthly-census", "serial/monthly-serial"):
            props = client.read_deployment_by_name(name).parameter_openapi_schema["properties"]
            assert set(props) == {"spec_path", "overrides", "actor", "new_release", "allow_repeat"}
            assert all(p.get("description", "").strip() for p in props.values()), props
    with s.client() as client:
        publish = client.read_deployment_by_name("publish/monthly-census").parameter_openapi_schema
    assert '{"technique": {"k": 20}}' in publish["properties"]["overrides"]["description"]


def test_a_run_the_series_check_refuses_fails_with_its_reason_and_publishes_nothing(privpub_service):
    """Issue 25, item 10: the scenario's series warns, so this run asks the check to refuse: the
    run ends Failed with the refusal's one line, named after it, and only its audit row is new."""
    s = privpub_service
    run = s.runs["privacy_refused"]
    assert run.state_type.value == "FAILED"
    assert "series-composition-l reached" in run.state.message and "\n" not in run.state.message
    assert run.name.startswith("refused: ") and "refused" in run.tags
    [(outcome, detail)] = s.query("SELECT outcome, detail FROM audit_log WHERE flow_run_id = ?", [str(run.id)])
    assert outcome == "refused" and json.loads(detail)["message"] in run.state.message
    assert not s.query("SELECT 1 FROM release_rows WHERE flow_run_id = ?", [str(run.id)])
    assert not any("Traceback" in line for line in s.logs(run.id))


def test_stop_leaves_no_process(privpub_service):
    s = privpub_service
    stopped = stop_service(s.home)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not processes_with_home(s.home)
    assert not group_alive(s.record["server_pid"]) and not group_alive(s.record["serve_pid"])
    assert not (s.home / "server.json").exists()
    status = privpub("server", "status", "--home", str(s.home))
    assert status.returncode == 1 and "not running" in status.stdout


def test_stop_ends_the_report_server(privpub_service):
    """The report server dies with the service (stop is idempotent: the test above may have run)."""
    import urllib.error
    import urllib.request

    import pytest

    s = privpub_service
    assert stop_service(s.home).returncode == 0
    assert not group_alive(s.record["reports_pid"]) and not processes_with_home(s.home)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{s.record['reports_url']}/reports/", timeout=5)


def test_a_stopped_service_starts_again_on_its_own_port(privpub_service):
    """`server stop` then `server start --port` the same port works at once: the stopped server's
    closed connections (TIME_WAIT) do not hold the port. The runs and releases are still there."""
    from privpub.flows.service import healthy

    s = privpub_service
    port = s.record["port"]
    assert stop_service(s.home).returncode == 0
    restart_if_stopped(s)
    try:
        assert s.record["port"] == port and healthy(s.record["api_url"])
        with s.client() as client:
            assert client.read_flow_run(s.runs["override"].id).state_type.value == "COMPLETED"
    finally:
        assert stop_service(s.home).returncode == 0

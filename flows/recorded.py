"""A CLI release recorded on a Prefect server without running as a Prefect flow (issue 42).

`--server` / `[run] server = true`: the release runs in this process with the plain driver
(pipeline.Driver) and the run is recorded through the server's REST API (urllib; Prefect is not
imported): a flow run of the `publish` (or `serial`) flow, Running while the release is made, then
named after its release and tagged `release:<id>` with the Prefect driver's three artifacts
("release-summary", "release-report", "release-figures"), its log lines and its final state; a
refusal ends Failed, named "refused: <reason>" and tagged "refused", as a deployment's run is.
Importing Prefect and running each step as a task cost seconds; this costs a few requests
(docs/benchmarks.md, "Issue 42"). `--verbose` (Prefect's own log lines) still runs the release as
a flow run in this process (flows/publish.py)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privpub.flows.attempts import recorded_as
from privpub.flows.pipeline import Driver
from privpub.flows.report_server import register_report
from privpub.flows.service import service_home, service_reports_url
from privpub.schemas.errors import EXPECTED_ERRORS, CliError, public_message
from privpub.tasks.report import page as report_mod

TIMEOUT = 30.0  # seconds per request (a loaded server answers slowly; a release is never lost for it)
REFUSED = "refused"
NAME_LIMIT = 100  # "refused: " and the reason, shortened at a word boundary
# A loaded server (its SQLite database locked by another writer) answers 5xx or 429 and has done
# nothing: the request is sent again, at most ATTEMPTS times in all, PAUSES seconds apart.
ATTEMPTS = 3
PAUSES = (0.25, 1.0)
RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


def refused_name(message: str, limit: int = NAME_LIMIT) -> str:
    """ "refused: <the one-line message>", cut at a word boundary to `limit` characters with "..."."""
    prefix = f"{REFUSED}: "
    name = prefix + " ".join(message.split())
    if len(name) <= limit:
        return name
    cut = name[: limit - 3]
    if " " in cut[len(prefix) :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "..."


class ServerApi:
    """The few calls of Prefect's REST API a recorded run needs (JSON over HTTP)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body, default=str).encode()
        for attempt in range(ATTEMPTS):
            request = urllib.request.Request(
                f"{self.url}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                    text = response.read()
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRIED_STATUS or attempt == ATTEMPTS - 1:
                    raise
                time.sleep(PAUSES[attempt])
                continue
            return json.loads(text) if text else None
        raise AssertionError("unreachable: the last attempt returns or raises")


def _utc_now() -> str:
    return datetime.now(UTC).isoformat()


class RecordingDriver(Driver):
    """The plain driver, its progress lines kept for the run's log and, after the commit, the run
    named after its release with its artifacts (flows/publish.py PrefectDriver.after_commit)."""

    def __init__(self, echo: Callable[[str], None] | None, api: ServerApi, run_id: str):
        super().__init__(echo)
        self.api, self.run_id, self.lines = api, run_id, []  # type: ignore[var-annotated]

    def progress(self, message: str) -> None:
        self.lines.append({"name": "privpub", "level": 20, "message": message, "timestamp": _utc_now()})
        super().progress(message)

    def after_commit(self, run_id: str | None, meta: dict, privacy: list, utility: dict) -> None:
        release_id = meta["release_id"]
        try:
            self.api.call("PATCH", f"/flow_runs/{self.run_id}", {"name": release_id, "tags": [f"release:{release_id}"]})
            for artifact in _recorded_artifacts(self.api.url, meta, privacy, utility):
                self.api.call("POST", "/artifacts/", {**artifact, "flow_run_id": self.run_id})
        except (OSError, ValueError) as exc:  # the release is committed: the record is a convenience
            self.progress(f"warning: could not name the flow run or add its artifacts ({type(exc).__name__})")


def _recorded_artifacts(api_url: str, meta: dict, privacy: list, utility: dict) -> list[dict]:
    """The Prefect driver's artifacts, as the REST API stores them (a link is markdown)."""
    served = None
    if meta.get("report"):
        reports_url = service_reports_url(api_url)
        if reports_url and register_report(service_home(), meta["release_id"], Path(meta["report"])) is not None:
            served = f"{reports_url}/reports/{meta['release_id']}"
    summary = report_mod.markdown_summary(meta, privacy, utility)
    out = [
        {
            "key": "release-summary",
            "type": "markdown",
            "data": f"[Open the full report]({served})\n\n{summary}" if served else summary,
            "description": f"release {meta['release_id']}",
        }
    ]
    if meta.get("report"):
        link = served or Path(meta["report"]).as_uri()
        out.append(
            {
                "key": "release-report",
                "type": "markdown",
                "data": f"[report of {meta['release_id']}]({link})",
                "description": report_mod.artifact_verdict(meta, privacy, utility),
            }
        )
    rows = report_mod.figure_rows(privacy, utility)
    out.append(
        {"key": "release-figures", "type": "table", "data": json.dumps(rows), "description": "privacy and utility"}
    )
    return out


def recorded_release(
    api_url: str,
    flow_name: str,
    series: str,
    parameters: dict,
    echo: Callable[[str], None] | None,
    body: Callable[[Driver], str],
) -> str:
    """`body(driver)` (the release, in this process) recorded as a flow run of `flow_name` on the
    server at `api_url`; its release id. The run is created first (a server that does not answer
    fails the command before any release is made); what fails in recording it afterwards is a
    warning."""
    api = ServerApi(api_url)
    try:
        flow = api.call("POST", "/flows/", {"name": flow_name})
        running = {"type": "RUNNING", "name": "Running"}
        name = f"{series}: running"  # renamed after its release (or "refused: ...") when it ends
        run = api.call(
            "POST",
            "/flow_runs/",
            {"flow_id": flow["id"], "name": name, "parameters": parameters, "state": running, "tags": []},
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"could not record the run on the Prefect server {api_url} ({type(exc).__name__})") from None
    driver = RecordingDriver(echo, api, str(run["id"]))
    try:
        with recorded_as(driver.run_id):
            release_id = body(driver)
    except BaseException as exc:
        message = public_message(exc) if isinstance(exc, Exception) else "interrupted"
        if isinstance(exc, EXPECTED_ERRORS):
            _quietly(
                api.call, "PATCH", f"/flow_runs/{driver.run_id}", {"name": refused_name(message), "tags": [REFUSED]}
            )
        _finish(api, driver, "FAILED", "Failed", message)
        raise
    _finish(api, driver, "COMPLETED", "Completed", None)
    return release_id


def _finish(api: ServerApi, driver: RecordingDriver, kind: str, name: str, message: str | None) -> None:
    """The run's log lines, then its final state (forced: the run never went through Prefect's
    engine)."""
    logs = [{**line, "flow_run_id": driver.run_id} for line in driver.lines]
    if logs:
        _quietly(api.call, "POST", "/logs/", logs)
    state = {"type": kind, "name": name, "message": message}
    if not _quietly(api.call, "POST", f"/flow_runs/{driver.run_id}/set_state", {"state": state, "force": True}):
        driver.progress(f"warning: the flow run on the server could not be set {name}")


def _quietly(fn: Callable[..., Any], *args: Any) -> bool:
    try:
        fn(*args)
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return True

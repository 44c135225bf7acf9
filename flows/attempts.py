"""Who started a run and what became of an attempt: the audit trail's side of a run.

Light on purpose (no Prefect import at module level): the CLI records attempts refused before
Prefect starts.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
import os
import sys
import tomllib
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from uuid import UUID

from privpub.flows.records import DEFAULT_STATE
from privpub.state.store import Store, attempt_running, lock_wait_seconds, notice, state_file_problem


def current_actor(actor: str | None) -> str:
    """Every audit row's actor, one convention (docs/ARCHITECTURE.md, "The trail"): the `actor`
    given (the CLI's --as, a Python call's actor=, a deployment run's parameter), else
    `deployment:<name>` in a run of a served deployment (UI, schedule), else the OS user (every
    CLI command and Python call: publish, verify, explore, audit alike)."""
    if actor:
        return actor
    try:
        if "prefect" not in sys.modules:
            raise ImportError  # a CLI run before Prefect started: not a deployment
        from prefect.runtime import deployment  # lazy: the CLI records attempts before Prefect starts

        if deployment.name:
            return f"deployment:{deployment.name}"
    except Exception:
        pass
    try:
        return getpass.getuser()
    except Exception:
        return os.environ.get("USER", "unknown")


# what started the runs of this context: "cli" inside the CLI's `started_from` (a flow run in
# its own process too), else "direct" (a Python call) unless Prefect says otherwise
_TRIGGER: contextvars.ContextVar[str] = contextvars.ContextVar("privpub_trigger", default="direct")


@contextlib.contextmanager
def started_from(trigger: str) -> Iterator[None]:
    """Attempts inside the block (and the audit rows of their failures) name `trigger`."""
    token = _TRIGGER.set(trigger)
    try:
        yield
    finally:
        _TRIGGER.reset(token)


def for_caller(cli: str, python: str) -> str:
    """The words of an advice for whoever called: the CLI's flag (`--allow-repeat`) inside the
    CLI, else the Python parameter (`allow_repeat=True`), so a message never names an option the
    caller cannot pass."""
    return cli if _TRIGGER.get() == "cli" else python


# the flow run a CLI release is recorded as without running in Prefect (flows/recorded.py)
_RECORDED: contextvars.ContextVar[str | None] = contextvars.ContextVar("privpub_recorded_run", default=None)


@contextlib.contextmanager
def recorded_as(run_id: str) -> Iterator[None]:
    """Rows written inside the block name the flow run `run_id` (a CLI run, no deployment)."""
    token = _RECORDED.set(run_id)
    try:
        yield
    finally:
        _RECORDED.reset(token)


def attribution() -> dict:
    """What started this run: trigger (cli, schedule, manual for a UI/API run of a deployment,
    retry, direct for a Python call), the deployment and, for a scheduled run, its slot."""
    out: dict = {"trigger": _TRIGGER.get(), "deployment": None, "scheduled_for": None}
    run_id = flow_run_id()
    if run_id is None or run_id == _RECORDED.get():  # a recorded CLI run has no deployment
        return out
    try:
        from prefect.client.orchestration import get_client  # lazy: see the module docstring
        from prefect.runtime import deployment  # lazy: the CLI records attempts before Prefect starts

        with get_client(sync_client=True) as client:
            run = client.read_flow_run(UUID(run_id))
        if run.deployment_id is None:
            return out
        out["deployment"] = deployment.name or str(run.deployment_id)
        if run.run_count > 1:
            out["trigger"] = "retry"
        elif run.auto_scheduled:
            out["trigger"] = "schedule"
        else:
            out["trigger"] = "manual"
        if run.auto_scheduled and run.expected_start_time:  # the slot, in UTC like every timestamp
            slot = run.expected_start_time
            out["scheduled_for"] = slot.astimezone(UTC).replace(tzinfo=None) if slot.tzinfo else slot
    except Exception as exc:  # attribution must not stop a release
        notice(f"warning: could not read the flow run's trigger ({type(exc).__name__})")
    return out


def flow_run_id() -> str | None:
    if _RECORDED.get() is not None:
        return _RECORDED.get()
    if "prefect" not in sys.modules:
        return None
    try:
        from prefect.runtime import flow_run  # lazy: see the module docstring

        return str(flow_run.id) if flow_run.id else None
    except Exception:
        return None


def record_failure(
    spec_path: str,
    overrides: dict | None,
    actor: str | None,
    exc: BaseException,
    message: str,
    action: str = "publish",
    outcome: str = "failed",
    detail: dict | None = None,
) -> None:
    """An audit-log row for a failed attempt, in the state file the spec names (or would name:
    a spec that cannot be read still has a folder). A state file that cannot be written gets it
    in its journal, folded into audit_log by the next writer. action, outcome: the row's (an
    explore refused: "explore", "refused"); detail: more of it."""
    series, state = None, None
    try:
        # only a regular file is read (a FIFO would block the failure's record forever)
        data = tomllib.loads(Path(spec_path).read_text()) if spec_path and Path(spec_path).is_file() else {}
        for section, values in (overrides or {}).items():
            if isinstance(values, dict) and isinstance(data.get(section, {}), dict):
                data[section] = {**data.get(section, {}), **values}
        series = (data.get("dataset") or {}).get("name")
        state = (data.get("output") or {}).get("state", "privpub.duckdb")
    except Exception:
        state = "privpub.duckdb"
    base = Path(spec_path).resolve().parent if spec_path else Path.cwd()
    path = Path(str(state)).expanduser()
    path = path if path.is_absolute() else base / path
    journal_only = False
    if state_file_problem(path) is not None and state_file_problem(base / DEFAULT_STATE) is None:
        # a path that cannot be a state (/dev/null, the input table): the attempt goes to the
        # journal of the default state beside the spec, folded in when that state is next written
        path, journal_only = base / DEFAULT_STATE, True
    if not path.parent.is_dir():
        notice(f"warning: this failed attempt could not be logged (no folder {path.parent})")
        return
    where = Store(path, lock_timeout=min(lock_wait_seconds(), 30)).log_attempt(
        current_actor(actor),
        action,
        series,
        outcome,
        flow_run_id(),
        {"error": type(exc).__name__, "message": message, "spec": spec_path, **(detail or {}), **attribution()},
        journal_only=journal_only,
    )
    if where == "journal":
        notice(f"warning: the state file could not be written; this failed attempt went to the journal {path}.journal")
    elif where != "audit_log":
        notice(f"warning: the state file could not be written; this failed attempt went to {where}")


# the attempt markers this process holds, by state file: the CLI opens one before reading the
# input; the pipeline's attempt inside it then adds none
_OPEN_MARKERS: dict[str, object] = {}


@contextlib.contextmanager
def attempt_marker(state: Path, actor: str | None, target: str | None, detail: dict) -> Iterator[None]:
    """While the block runs, a marker that makes a killed attempt an "interrupted" audit row
    (Store.begin_attempt); nested blocks for the same state file share the outer one."""
    key = str(Path(state).resolve())
    if key in _OPEN_MARKERS:
        yield
        return
    marker = Store(state).begin_attempt(current_actor(actor), "publish", target, flow_run_id(), detail)
    if marker is not None:
        _OPEN_MARKERS[key] = marker
    try:
        # the rows this attempt writes name its marker: a kill after its outcome's row (just
        # after the COMMIT) is not folded into an "interrupted" row too
        with attempt_running(marker) if marker is not None else contextlib.nullcontext():
            yield
    finally:
        if marker is not None:
            _OPEN_MARKERS.pop(key, None)
            marker.close()

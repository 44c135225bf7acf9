"""The Prefect driver of the pipeline (flows/pipeline.py): the `publish` flow, each step a task.

Used when a Prefect server is configured or running (`privpub server`, PREFECT_API_URL): runs
are flow runs the UI shows, with artifacts, retries, deployments and schedules. Without one, the
CLI and `privpub.publish` run the same pipeline with plain calls (flows/run.py).

No task caches or persists its result: several of them carry the secret rows, which must never
land in Prefect's result storage.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast
from uuid import UUID

from prefect import flow, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.exceptions import FailedRun
from prefect.logging import get_run_logger
from prefect.settings import PREFECT_API_URL
from prefect.states import Failed
from prefect.utilities.annotations import quote

from privpub.flows import pipeline
from privpub.flows.attempts import (
    flow_run_id,
    record_failure,  # noqa: F401  (callers import it from here)
)
from privpub.flows.beside import done_now
from privpub.flows.pipeline import (  # noqa: F401  (the names callers of this module use)
    SERIES_FIGURES,
    Driver,
    RunPlan,
    chain_hooks,
    draw_seed,
    echo_to_stderr,
    plan_run,
    release_key,
    run_release,
    transient_error,
)
from privpub.flows.recorded import NAME_LIMIT, REFUSED, refused_name  # noqa: F401  (one naming rule: a recorded run's too)
from privpub.flows.report_server import register_report
from privpub.flows.service import service_home, service_reports_url
from privpub.schemas.errors import EXPECTED_ERRORS, public_message
from privpub.schemas.spec import RunSpec
from privpub.tasks.core.executor import Executor
from privpub.tasks.report import page as report_mod

T = TypeVar("T")

# No caching, no persisted results: inputs and outputs of these tasks hold secret rows.
SECRET: dict[str, Any] = dict(cache_policy=NO_CACHE, persist_result=False)
# errors that ended this process's flow runs (the CLI runs flows in-process and re-raises them)
FAILURES: list[BaseException] = []


def transient(task, task_run, state) -> bool:
    """Prefect's retry condition: the pipeline's `transient_error` of the task's exception."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:
        return False
    return transient_error(exc)


def _retries(name: str) -> dict[str, Any]:
    delays = pipeline.RETRY_DELAYS[name]
    return dict(retries=len(delays), retry_delay_seconds=delays, retry_condition_fn=transient)


IO_RETRIES: dict[str, Any] = _retries("load-input")


def _step_task(fn, name: str):
    return task(fn, name=name, **SECRET, **(_retries(name) if name in pipeline.RETRY_DELAYS else {}))


# the steps as Prefect tasks, by the names the UI shows
load_input_task = _step_task(pipeline.load_input_step, "load-input")
cluster_input_task = _step_task(pipeline.cluster_input_step, "load-input-on-cluster")
validate_task = _step_task(pipeline.validate_step, "validate")
partition_task = _step_task(pipeline.partition_step, "partition")
anonymize_task = _step_task(pipeline.anonymize_whole_step, "anonymize")
verify_task = _step_task(pipeline.verify_step, "verify")
composition_task = _step_task(pipeline.composition_step, "series-composition")
evaluate_task = _step_task(pipeline.evaluate_step, "evaluate")
risk_task = _step_task(pipeline.risk_step, "risk")
stage_task = _step_task(pipeline.stage_step, "stage-files")
commit_task = _step_task(pipeline.commit_step, "commit")


# the chunks on the run's executor: fn may run in a Dask worker process, which must write nothing
def _map(fn, chunks, executor):
    return executor.map(fn, chunks)


def _step_tasks(label: str) -> tuple:
    """The plan, chunk and combine tasks of a chunked step, as Prefect shows them."""
    return (
        _step_task(pipeline.plan_step, f"{label}-plan"),
        _step_task(_map, f"{label}-chunk"),
        _step_task(pipeline.combine_step, f"{label}-combine"),
    )


plan_chunks_task, anonymize_chunk_task, combine_chunks_task = _step_tasks("anonymize")
verify_plan_task, verify_chunk_task, verify_combine_task = _step_tasks("verify")
evaluate_plan_task, evaluate_chunk_task, evaluate_combine_task = _step_tasks("evaluate")

TASKS = {
    t.name: t
    for t in (
        load_input_task,
        cluster_input_task,
        validate_task,
        partition_task,
        anonymize_task,
        verify_task,
        composition_task,
        evaluate_task,
        risk_task,
        stage_task,
        commit_task,
        plan_chunks_task,
        combine_chunks_task,
        verify_plan_task,
        verify_combine_task,
        evaluate_plan_task,
        evaluate_combine_task,
    )
}
CHUNK_TASKS = {"anonymize": anonymize_chunk_task, "verify": verify_chunk_task, "evaluate": evaluate_chunk_task}


def _map_chunks(fn, chunks: list, executor: Executor, chunk_task) -> list:
    """The chunk results, in chunk order. The executor (make_task_runner) alone decides where
    chunks run; chunk_task is the step's one Prefect task run around the map."""
    return chunk_task(fn, quote(chunks), quote(executor))


def quoted(value: T) -> T:
    """`value` wrapped so that Prefect does not walk its items; the task receives `value` itself
    (Prefect would otherwise walk every item of every list a release holds, for each task:
    seconds at a million rows)."""
    return cast(T, quote(value))


class PrefectDriver(Driver):
    """Each step a Prefect task of the current flow run, one after the other in the pipeline's
    order; progress to the run's log (which the console shows too)."""

    overlaps = False

    def run(self, name: str, fn, *args):
        return TASKS[name](*[quoted(a) for a in args])

    def beside(self, name: str, fn, *args) -> Future:
        """A step "beside" the main line runs now, as the flow run's task: the run's tasks stay
        one after the other, as its graph in the UI shows them."""
        return done_now(partial(self.run, name, fn, *args))

    def map_chunks(self, label: str, fn, chunks: list, executor: Executor) -> list:
        return _map_chunks(fn, chunks, executor, CHUNK_TASKS[label])

    def make_executor(self, run: RunSpec) -> Executor:
        return make_task_runner(run)

    def progress(self, message: str) -> None:
        try:
            get_run_logger().info(message)  # the run's log (the console shows it with --verbose)
        except Exception:  # outside a run context (plain function calls in tests)
            echo_to_stderr(message)
            return
        echo = self.echo if self.echo is not None else _ECHO.get()
        if echo is not None:  # the CLI without --verbose: its own one-line progress
            echo(message)

    def after_commit(self, run_id, meta, privacy, utility) -> None:
        label_flow_run(run_id, meta["release_id"], f"release:{meta['release_id']}")
        _artifacts(meta, privacy, utility, _served_report(meta))


PREFECT = PrefectDriver(echo=None)

# where PREFECT's progress lines go besides the run's log, inside `echoing` (the CLI's terminal)
_ECHO: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar("privpub_echo", default=None)


@contextlib.contextmanager
def echoing(echo: Callable[[str], None] | None) -> Iterator[None]:
    """Inside the block, the flow runs' progress lines go to `echo` too (None: the log only)."""
    token = _ECHO.set(echo)
    try:
        yield
    finally:
        _ECHO.reset(token)


# the plan of the flow run this process is about to run (`with_plan`): the flow's body takes it
# rather than resolving its parameters' spec again (a run started elsewhere resolves them)
_PLAN: contextvars.ContextVar[RunPlan | None] = contextvars.ContextVar("privpub_plan", default=None)


def handed_plan(spec_path: str, overrides: dict | None) -> RunPlan | None:
    """The plan handed over for these flow parameters, if any (else the attempt resolves them)."""
    plan = _PLAN.get()
    if plan is not None and (plan.spec_path or "") == spec_path and plan.overrides == overrides:
        return plan
    return None


def call_planned(flow_, plan: RunPlan, **parameters) -> Any:
    """`call_flow` of a flow whose spec_path and overrides are the plan's; the flow run in this
    process takes the plan itself."""
    token = _PLAN.set(plan)
    try:
        return call_flow(flow_, spec_path=plan.spec_path or "", overrides=plan.overrides, **parameters)
    finally:
        _PLAN.reset(token)


def make_task_runner(run: RunSpec) -> Executor:
    """The executor [run] asks for (flows/pipeline.make_executor); a name tests can replace."""
    return pipeline.make_executor(run)


# the names Prefect gives a run nobody named: "adjective-animal" (prefect.utilities.names
# generate_slug(2), by the server or the client) or, in the UI's "Custom run" form, a star's
# name ("alpha-aquarii", "gamma12-ceti-nebula": a Greek letter, maybe digits, two to four words)
GREEK = "alpha|beta|gamma|delta|epsilon|zeta|eta|theta|iota|kappa|lambda|mu|nu|xi|omicron|pi|rho|sigma|tau|upsilon|phi|chi|psi|omega"
GENERATED_NAME = re.compile(rf"[a-z]+-[a-z]+|(?:{GREEK})[0-9]*(?:-[a-z]+){{1,3}}")


def generated_name(name: str) -> bool:
    """A run name Prefect or its UI made up, or an earlier attempt's "refused: ..." (replaced by
    what this attempt produced), not one the user typed (kept)."""
    return GENERATED_NAME.fullmatch(name) is not None or name.startswith(f"{REFUSED}: ")


def label_flow_run(run_id: str | None, name: str, tag: str) -> None:
    """The run shows what it produced where runs are listed: a generated name becomes `name` (the
    release id, or "refused: ..."); a name the user typed is kept. The tag is added either way
    (a release's replaces the "refused" tag of an earlier attempt of the run)."""
    if run_id is None:
        return
    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(UUID(run_id))
            tags = [t for t in run.tags if t not in (tag, REFUSED)] + [tag]
            if generated_name(run.name):
                client.update_flow_run(UUID(run_id), name=name, tags=tags)
            else:
                client.update_flow_run(UUID(run_id), tags=tags)
    except Exception as exc:
        PREFECT.progress(f"warning: could not name the flow run ({type(exc).__name__})")


def _served_report(meta) -> str | None:
    """The report's URL on the release service's report server, when this run reports to the
    running service: the report is linked into the service's registry first. Else None."""
    if not meta.get("report"):
        return None
    try:
        reports_url = service_reports_url(str(PREFECT_API_URL.value() or ""))
        if reports_url is None or register_report(service_home(), meta["release_id"], Path(meta["report"])) is None:
            return None
    except Exception as exc:  # the release is committed: its link artifact falls back to the file
        PREFECT.progress(f"warning: could not link the report for the report server ({type(exc).__name__})")
        return None
    return f"{reports_url}/reports/{meta['release_id']}"


def _artifacts(meta, privacy, utility, served: str | None = None) -> None:
    """The run's artifacts: "release-summary" (markdown; with a link to the report when the
    service serves it), "release-report" (a link: the served report, else the file, under the verdict: release id,
    a one-line summary, pass / fail per check) and
    "release-figures" (a table)."""
    try:
        summary = report_mod.markdown_summary(meta, privacy, utility)
        create_markdown_artifact(
            markdown=f"[Open the full report]({served})\n\n{summary}" if served else summary,
            key="release-summary",
            description=f"release {meta['release_id']}",
        )
        if meta.get("report"):  # the artifacts link to the report; the report names this run
            create_link_artifact(
                link=served or Path(meta["report"]).as_uri(),
                link_text=f"report of {meta['release_id']}",
                key="release-report",
                description=report_mod.artifact_verdict(meta, privacy, utility),
            )
        create_table_artifact(
            table=report_mod.figure_rows(privacy, utility), key="release-figures", description="privacy and utility"
        )
    except Exception as exc:  # artifacts are a convenience; the release is already committed
        PREFECT.progress(f"warning: could not create Prefect artifacts: {type(exc).__name__}: {exc}")


@flow(name="publish", persist_result=False, validate_parameters=True)
def publish_flow(
    spec_path: str = "",
    overrides: dict | None = None,
    actor: str | None = None,
    new_release: bool = False,
    allow_repeat: bool = False,
):
    """Publish the next release of the series described by the spec file. Returns the release id.

    Args:
        spec_path: The release's TOML spec file (docs/spec.md); relative paths in it are taken from its folder.
        overrides: Spec values merged over the file's, by section, e.g. {"technique": {"k": 20}}.
        actor: Who asks for the release, as the audit log records it (default: the deployment's name).
        new_release: Publish again although this run (a retry) or this scheduled slot already published a release.
        allow_repeat: Publish although the input and parameters equal those of the series' last release.
    """
    return run_attempt(spec_path, overrides, actor, new_release, allow_repeat)


def run_attempt(
    spec_path: str, overrides: dict | None, actor: str | None, new_release: bool = False, allow_repeat: bool = False
):
    """The body of the publish and serial flows: the release id, or a Failed state whose message
    is the error's one line. Returning the state (not raising) keeps Prefect from pickling the
    exception into its result storage; the attempt gets its audit-log row either way."""
    try:
        plan = handed_plan(spec_path, overrides)
        return pipeline.attempt(
            spec_path, overrides, actor, new_release, driver=PREFECT, allow_repeat=allow_repeat, plan=plan
        )
    except Exception as exc:
        return failed_state(exc)


def failed_state(exc: Exception):
    """The Failed state a flow returns for `exc`: its one-line public message as the state
    message. Remembered in FAILURES for an in-process caller (call_flow raises it again). An
    expected error (a refusal) also names the run "refused: ..." and tags it "refused", and its
    log gets no traceback; an internal error logs its frames."""
    FAILURES.append(exc)
    message = public_message(exc)
    if isinstance(exc, EXPECTED_ERRORS):
        REFUSALS.add(message)
        _quiet_engine_traceback()
        label_flow_run(flow_run_id(), refused_name(message), REFUSED)
    else:
        # frames only: the exception's own text may quote data
        PREFECT.progress("internal error; traceback (frames only):\n" + "".join(traceback.format_tb(exc.__traceback__)))
    return Failed(message=message)


# the one-line messages of the refusals that ended this process's flow runs
REFUSALS: set[str] = set()


class QuietRefusal(logging.Filter):
    """Drops the record Prefect's engine logs when a flow run it ran in a subprocess (serve, a
    worker) ends Failed: "Engine execution exited with unexpected exception" and the traceback
    of the FailedRun that `state.result()` raises for the returned state (prefect/flow_engine.py
    run_flow, error_logger). For a refusal that traceback shows only Prefect's own frames and
    repeats the state message, which the run's log already has ("Finished in state Failed")."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, FailedRun) and str(exc) in REFUSALS)


_QUIET = QuietRefusal()


def _quiet_engine_traceback() -> None:
    """QuietRefusal on the flow-run logger (installed once Prefect's logging is configured)."""
    logger = logging.getLogger("prefect.flow_runs")
    if _QUIET not in logger.filters:
        logger.addFilter(_QUIET)


def publish(
    spec_path: str,
    overrides: dict | None = None,
    actor: str | None = None,
    allow_repeat: bool = False,
    plan: RunPlan | None = None,
) -> str:
    """Run `publish_flow` in this process (the spec is resolved first, unless `plan` is given:
    a bad spec fails before any flow run). The release is the same whichever [run] executor and
    however many workers."""
    plan = plan or plan_run(spec_path, overrides)
    return call_planned(publish_flow, plan, actor=actor, allow_repeat=allow_repeat)


def call_flow(flow_, **parameters) -> Any:
    """Run a publish-like flow in this process: its result, or the error that failed it, raised
    again here (the flow ends Failed with the error's one line rather than raising it)."""
    seen = len(FAILURES)
    state = flow_(**parameters, return_state=True)
    if state.is_completed():
        return state.result()
    if len(FAILURES) > seen:
        raise FAILURES[-1]
    raise RuntimeError(f"the {flow_.name} flow ended {state.type.value}: {state.message}")

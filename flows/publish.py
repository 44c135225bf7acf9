"""The `publish` flow: validate -> partition -> anonymize -> verify -> evaluate -> commit -> report.

Thin by design: every step is a plain function from tasks/; this module only wires them as
Prefect tasks. No task caches or persists its result: several of them carry the secret rows,
which must never land in Prefect's result storage.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
import time
import traceback
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast
from uuid import UUID

import numpy as np
import pandas as pd
from prefect import flow, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.logging import get_run_logger
from prefect.states import Failed
from prefect.utilities.annotations import quote

from privpub.flows.attempts import attribution, current_actor, record_failure
from privpub.flows.attempts import flow_run_id as _flow_run_id
from privpub.flows.cluster import cluster_input, dask_task_runner, uses_cluster
from privpub.schemas.errors import EXPECTED_ERRORS, PrivacyRefused, public_message
from privpub.schemas.spec import ReleaseSpec, RunSpec, resolve_spec
from privpub.state.failpoints import failpoint
from privpub.state.store import StagedFiles, Store, check_output_dir, stage_tables
from privpub.tasks import report as report_mod
from privpub.tasks.cluster.compose import PartedSeriesCheck
from privpub.tasks.cluster.evaluate import evaluate_on_cluster
from privpub.tasks.cluster.input import PartedData
from privpub.tasks.compose.check import SeriesCheck
from privpub.tasks.core.executor import Executor, ThreadExecutor
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.types import Partition, PrivacyResult, Release
from privpub.tasks.evaluate import evaluate, evaluation_workload, utility_summary
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.validate import checked_input, load_input, validate
from privpub.tasks.verify.published import check_published

T = TypeVar("T")

# No caching, no persisted results: inputs and outputs of these tasks hold secret rows.
SECRET: dict[str, Any] = dict(cache_policy=NO_CACHE, persist_result=False)


def transient(task, task_run, state) -> bool:
    """Retry only what may succeed on a second try (a disk or network hiccup); a missing file,
    bad input, a bad spec, a refusal or a busy state file (already waited for) fails at once."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:
        return False
    return isinstance(exc, OSError) and not isinstance(
        exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
    )


IO_RETRIES: dict[str, Any] = dict(retries=2, retry_delay_seconds=[1, 5], retry_condition_fn=transient)
# ids of the releases this process committed: whatever fails afterwards (artifacts, the summary,
# Prefect's own bookkeeping) must not turn a committed release into a failed command
COMMITTED: list[str] = []
# called with the release id right after the commit (the CLI prints it there)
ON_COMMIT: list = []
# errors that ended this process's flow runs (the CLI runs flows in-process and re-raises them)
FAILURES: list[BaseException] = []


def progress(message: str) -> None:
    """Progress for the person at the terminal (stderr) and for the Prefect run log."""
    try:
        get_run_logger().info(message)  # the run logger also prints to the console
    except Exception:  # outside a run context (plain function calls in tests)
        print(f"[privpub] {message}", file=sys.stderr, flush=True)


def _timed(label: str, fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    progress(f"{label} done in {time.perf_counter() - t0:.2f} s")
    return out


@task(name="load-input", **SECRET, **IO_RETRIES)
def load_input_task(spec: ReleaseSpec) -> tuple[pd.DataFrame, str]:
    return _timed("load input", load_input, spec)


@task(name="load-input-on-cluster", **SECRET)
def cluster_input_task(spec: ReleaseSpec, technique, executor: Executor) -> tuple[str, PartedData]:
    fp, data = _timed("load and validate input on the Dask cluster", cluster_input, spec, technique, executor)
    progress(f"{data.n} valid rows in {len(data.parts)} partitions, {len(data.domains)} quasi-identifiers")
    return fp, data


@task(name="validate", **SECRET)
def validate_task(frame, spec: ReleaseSpec, technique) -> Microdata:
    data = _timed("validate", validate, frame, spec, technique)
    progress(f"{data.n} valid rows, {len(data.domains)} quasi-identifiers")
    return data


@task(name="partition", **SECRET)
def partition_task(technique, data, rng) -> Partition:
    failpoint("partition")
    part = _timed("partition", technique.partition, data, rng)
    progress(f"{part.n_groups} QI-groups")
    return part


@task(name="anonymize", **SECRET)
def anonymize_task(technique, data, part, rng) -> Release:
    failpoint("anonymize")
    return _timed("anonymize", technique.anonymize, data, part, rng)


def _plan(technique, step: str, inputs: tuple):
    if step == "anonymize":
        failpoint("anonymize")
    return technique.plan(step, *inputs)


# the chunks on the run's executor: fn may run in a Dask worker process, which must write nothing
def _map(fn, chunks, executor):
    return executor.map(fn, chunks)


def _combine(plan, results, finish=None):
    out = plan.combine(results)
    return out if finish is None else finish(out)


def _step_tasks(label: str) -> tuple:
    """The plan, chunk and combine tasks of a chunked step, as Prefect shows them."""
    parts: tuple[tuple[Any, str], ...] = ((_plan, "plan"), (_map, "chunk"), (_combine, "combine"))
    return tuple(task(fn, name=f"{label}-{part}", **SECRET) for fn, part in parts)


plan_chunks_task, anonymize_chunk_task, combine_chunks_task = _step_tasks("anonymize")
verify_plan_task, verify_chunk_task, verify_combine_task = _step_tasks("verify")
evaluate_plan_task, evaluate_chunk_task, evaluate_combine_task = _step_tasks("evaluate")


def anonymize_step(technique, data, part, rng, executor: Executor):
    """One anonymize task, or, for a technique that splits its work (Technique.chunked), its
    chunks mapped on the run's executor and a combine step in the flow process."""
    t0 = time.perf_counter()
    plan = (
        plan_chunks_task(technique, "anonymize", quote((data, part, rng))) if "anonymize" in technique.chunked else None
    )
    if plan is None:
        return anonymize_task(technique, data, part, rng)
    results = _map_chunks(plan.run, plan.chunks, executor, anonymize_chunk_task)
    release = combine_chunks_task(quote(plan), results)
    progress(f"anonymize done in {time.perf_counter() - t0:.2f} s ({len(plan.chunks)} chunks)")
    return release


def _map_chunks(fn, chunks: list, executor: Executor, chunk_task) -> list:
    """The chunk results, in chunk order. The executor (make_task_runner) alone decides where
    chunks run; chunk_task is the step's one Prefect task run around the map."""
    return chunk_task(fn, quote(chunks), quote(executor))


@task(name="verify", **SECRET)
def verify_task(technique, release, spec: ReleaseSpec, context: dict) -> list[PrivacyResult]:
    check_published(release, spec, technique)
    return _timed("verify", technique.verify, release, context)


@task(name="series-composition", **SECRET)
def composition_task(check: SeriesCheck, data, part) -> list[PrivacyResult]:
    return _timed("series composition", check.check_release, data, part)


@task(name="evaluate", **SECRET)
def evaluate_task(technique, release, data, workload_seed: int):
    step = evaluate_on_cluster if data.in_parts else evaluate  # the workload drawn where the rows are
    return _timed("evaluate", step, technique, release, data, workload_seed)


def quoted(value: T) -> T:
    """`value` wrapped so that Prefect does not walk its items; the task receives `value` itself
    (Prefect's annotations type the wrapper, not what the task gets)."""
    return cast(T, quote(value))


def verify_and_evaluate(
    technique, release, spec: ReleaseSpec, context: dict, data, workload_seed: int, executor: Executor
):
    """verify, then (when it passes) evaluate; each as one task or, when the technique splits it,
    as chunks on the run's executor. Returns (privacy results, utility figures or None if refused).

    The release and the context are passed quoted: Prefect would otherwise walk every item of
    every list they hold (a MuCo release lists its unchangeable rows) for each task, seconds at
    a million rows."""
    t0 = time.perf_counter()
    plan = verify_plan_task(technique, "verify", quote((release, context))) if "verify" in technique.chunked else None
    if plan is None:
        privacy = verify_task(technique, quoted(release), spec, quoted(context))
    else:
        check_published(release, spec, technique)
        results = _map_chunks(plan.run, plan.chunks, executor, verify_chunk_task)
        privacy = verify_combine_task(quote(plan), results)
        progress(f"verify done in {time.perf_counter() - t0:.2f} s ({len(plan.chunks)} chunks)")
    if any(not r.passed for r in privacy):
        return privacy, None
    t0 = time.perf_counter()
    workload = evaluation_workload(data, workload_seed) if "utility" in technique.chunked else None
    plan = evaluate_plan_task(technique, "utility", quote((release, data, workload))) if workload is not None else None
    if plan is None:
        return privacy, evaluate_task(technique, quoted(release), data, workload_seed)
    results = _map_chunks(plan.run, plan.chunks, executor, evaluate_chunk_task)
    finish = partial(_utility_summary, technique, release, data, workload)
    utility = evaluate_combine_task(quote(plan), results, finish)
    progress(f"evaluate done in {time.perf_counter() - t0:.2f} s ({len(plan.chunks)} chunks)")
    return privacy, utility


def _utility_summary(technique, release, data, workload, estimate_and_figures):
    return utility_summary(technique, release, data, workload, *estimate_and_figures)


@task(name="stage-files", **SECRET, **IO_RETRIES)
def stage_task(output_dir: Path, tables) -> StagedFiles:
    return _timed("write files", stage_tables, output_dir, tables)


@task(name="commit", **SECRET, retries=2, retry_delay_seconds=[2, 10], retry_condition_fn=transient)
def commit_task(store: Store, kwargs: dict) -> tuple[str, bool]:
    return store.commit_release(**kwargs)


def draw_seed() -> int:
    return secrets.randbits(63)


def release_key(spec: ReleaseSpec, fingerprint: str, seed: int) -> str:
    body = {
        "series": spec.dataset.name,
        "input": fingerprint,
        "seed": seed,
        "technique": spec.technique.model_dump(),
        "dataset": spec.dataset.model_dump(exclude={"input", "table"}),
    }
    if spec.section("series"):  # keep_groups changes the release (absent: keys as before)
        body["series_options"] = spec.section("series")
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


# the figures the report follows over a series (beside the privacy figures)
SERIES_FIGURES = ["query_error_1pct", "uncertainty_penalty_normalized", "suppressed_rows"]


def read_rows(spec: ReleaseSpec, technique, executor: Executor, in_parts: bool) -> tuple[str, Microdata | PartedData]:
    """The input's fingerprint and its rows: read and validated by the executor's workers and kept
    there in parts, or in this process (the CLI may have read it a moment ago)."""
    if in_parts:
        return cluster_input_task(spec, technique, quoted(executor))
    checked = checked_input(spec)
    if checked is not None:
        _, fp, data = checked
        progress(f"{data.n} valid rows (read and validated before the run started)")
        return fp, data
    frame, fp = load_input_task(spec)
    return fp, validate_task(frame, spec, technique)


def run_release(
    spec: ReleaseSpec,
    actor: str | None = None,
    context: dict | None = None,
    store: Store | None = None,
    new_release: bool = False,
    spec_path: str | None = None,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """The pipeline itself; returns a summary dict (release id, figures, where things are).

    new_release: publish even if this flow run (a retry) or this deployment's scheduled slot
    already published a release of the series (without it, that release is returned).
    executor: where chunks run (None: the one [run] asks for, closed when the release is done)."""
    if executor is None:
        with make_task_runner(spec.run) as executor:
            return run_release(spec, actor, context, store, new_release, spec_path, executor)
    started = datetime.now(UTC).replace(tzinfo=None)
    technique = get_technique(spec)
    # chosen once: the rows read into this process, or kept in parts where the executor works
    # (Parquet input read by Dask workers); the series check reads its people accordingly
    in_parts = uses_cluster(spec, technique)
    series_check = (PartedSeriesCheck if in_parts else SeriesCheck)(spec, technique)  # refuses before any work
    seed = spec.output.seed if spec.output.seed is not None else draw_seed()
    store = store or Store(spec.state_path)
    check_output_dir(spec.output_dir)  # before any work: a run must not fail only at the end
    store.check_usable()
    store.watch_output_dir(spec.output_dir)
    who, run_id, origin = current_actor(actor), _flow_run_id(), attribution()
    done = store.published_for(spec.dataset.name, run_id, origin["deployment"], origin["scheduled_for"])
    if done and not new_release:
        progress(
            f"already published as {done} by this run or for this scheduled slot: nothing to do "
            "(new_release=true publishes another)"
        )
        store.log(who, "publish", done, "already-published", run_id, origin)
        return {"release_id": done, "created": False, "state": str(store.path)}
    if done:
        progress(f"a release ({done}) exists for this run or slot; new_release=true asks for another")
    progress(
        f"series '{spec.dataset.name}', technique '{technique.name}', seed {seed}, "
        f"started by {who} ({origin['trigger']})"
    )

    fp, data = read_rows(spec, technique, executor, in_parts)
    key = release_key(spec, fp, seed)
    existing = store.find_by_key(key)
    if existing:
        progress(f"already published as {existing} (same input, parameters and seed): nothing to do")
        store.log(
            who,
            "publish",
            existing,
            "recognised",
            run_id,
            {"reason": "same series, input, parameters and seed as an existing release", **origin},
        )
        return {"release_id": existing, "created": False, "state": str(store.path)}

    # independent streams: the release's draws do not depend on how the workload is drawn
    release_seq, _ = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(release_seq)
    # the composition check reads the summaries it combines: another release of the series
    # committed meanwhile would make them stale, so the commit checks the sequence
    based_on = store.last_sequence(spec.dataset.name)
    series_check.prepare(store, data)
    if series_check.history_missing(based_on):
        progress(
            f"series composition: the {based_on} earlier releases of the series have no stored groups "
            "(published before privpub kept them); the check starts with this release"
        )
    history = technique.prior_context(store, spec)
    data.extra.update(history)
    part = partition_task(technique, data, rng)
    if series_check.settings.keep_groups:  # PartedSeriesCheck refused it for rows in parts
        assert isinstance(data, Microdata)
        part = series_check.keep_groups(data, part)
        progress(f"{part.n_groups} groups kept from earlier releases ({part.info['merge_rounds']} merge rounds)")
    release = anonymize_step(technique, data, part, rng, executor)
    privacy, utility = verify_and_evaluate(
        technique,
        release,
        spec,
        {**(context or {}), **history, "data": data},
        data,
        int(spec.section("evaluate").get("workload_seed", 0)),
        executor,
    )
    privacy = privacy + composition_task(series_check, data, part)
    failed = [r for r in privacy if not r.passed and not series_check.tolerated(r)]
    for r in privacy:
        if not r.passed and series_check.tolerated(r):
            what = f"{r.worst['below']} people below {r.threshold} when all releases of the series are combined"
            progress(f'warning: {r.model}: {what}; published because [series] composition = "warn"')
    if failed:
        detail = {r.model: {"value": str(r.value), "threshold": str(r.threshold), "worst": r.worst} for r in failed}
        store.log(who, "publish", spec.dataset.name, "refused", run_id, {**detail, **origin})
        series_check.discard()
        raise PrivacyRefused(
            "release refused, privacy check failed: "
            + "; ".join(f"{r.model} reached {r.value}, required {r.threshold}" for r in failed)
        )

    staged = stage_task(spec.output_dir, release.tables)
    # before the commit reads release.private: a hook may move state out of it into its own tables
    on_commit = chain_hooks(technique.commit_hook(release), series_check.commit_hook())
    sizes = technique.group_sizes(release)
    meta = {
        "series": spec.dataset.name,
        "technique": technique.name,
        "parameters": spec.technique.params,
        "seed": seed,
        "rows_in": data.n,
        "actor": who,
        "flow_run_id": run_id,
        "input_fingerprint": fp,
        "spec_path": spec_path,
        **origin,
        "hashes": {meta_["file"]: meta_["sha256"] for meta_ in staged.files.values()},
    }
    series_names = [r.model for r in privacy] + SERIES_FIGURES
    earlier = store.series_figures(spec.dataset.name, series_names)

    def write_report(release_id: str, sequence: int, folder: Path) -> None:
        # inside the commit, once the id is known: a committed release always has its report
        failpoint("report")
        final = spec.output_dir.resolve() / release_id
        meta.update(
            release_id=release_id,
            sequence=sequence,
            created_at=datetime.now(UTC),
            files=[str(final / m["file"]) for m in staged.files.values()],
        )
        this = [
            {"sequence": sequence, "release_id": release_id, "name": r.model, "value": str(r.value)} for r in privacy
        ]
        this += [
            {"sequence": sequence, "release_id": release_id, "name": n, "value": str(utility[n])}
            for n in SERIES_FIGURES
            if n in utility
        ]
        meta["series_figures"] = (
            pd.concat([earlier, pd.DataFrame(this)], ignore_index=True)
            if earlier is not None and len(earlier)
            else pd.DataFrame(this)
        )
        report_mod.write_html_report(folder / "report.html", meta, privacy, utility, sizes)

    try:
        release_id, created = commit_task(
            store,
            quoted(
                dict(  # quoted: see verify_and_evaluate
                    staged=staged,
                    series=spec.dataset.name,
                    technique=technique.name,
                    parameters=spec.technique.params,
                    spec=spec.model_dump(),
                    seed=seed,
                    input_fingerprint=fp,
                    release_key=key,
                    rows_in=data.n,
                    privacy=privacy,
                    utility=utility,
                    private=release.private,
                    info=release.info,
                    actor=who,
                    flow_run_id=run_id,
                    started_at=started,
                    attribution={**origin, "new_release": new_release},
                    based_on_sequence=based_on,
                    on_commit=on_commit,
                    before_commit=write_report,
                )
            ),
        )
    finally:
        staged.release_owner()
        series_check.discard()  # written by the commit, or of no use after a failed one
    COMMITTED.append(release_id)
    for announce in ON_COMMIT:  # the CLI prints the id now, before the run's bookkeeping
        announce(release_id)
    failpoint("published")
    meta.setdefault("release_id", release_id)  # a recognised re-run wrote no report
    meta.setdefault("sequence", int(release_id.split("-")[-2]))
    out_dir = spec.output_dir.resolve() / release_id
    progress(f"committed release {release_id}: {out_dir}")
    _name_flow_run(run_id, release_id)
    meta["report"] = str(out_dir / "report.html")
    _artifacts(meta, privacy, utility)  # after the commit: a failure here is a warning only
    return {
        **meta,
        "release_id": release_id,
        "created": created,
        "privacy": privacy,
        "utility": utility,
        "report": str(out_dir / "report.html"),
        "state": str(store.path),
        "output_dir": str(out_dir),
    }


def chain_hooks(*hooks):
    """One commit hook running the given ones (None skipped) in order, in the same transaction."""
    present = [h for h in hooks if h is not None]

    def run(con, release_id: str, sequence: int) -> None:
        for hook in present:
            hook(con, release_id, sequence)

    return run


def _name_flow_run(run_id: str | None, release_id: str) -> None:
    """The flow run is renamed after its release, so the UI's run list links to it."""
    if run_id is None:
        return
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(UUID(run_id), name=f"{release_id}")
    except Exception as exc:
        progress(f"warning: could not rename the flow run ({type(exc).__name__})")


def _artifacts(meta, privacy, utility) -> None:
    try:
        create_markdown_artifact(
            markdown=report_mod.markdown_summary(meta, privacy, utility),
            key="release-summary",
            description=f"release {meta['release_id']}",
        )
        if meta.get("report"):  # the artifacts link to the report; the report names this run
            create_link_artifact(
                link=Path(meta["report"]).as_uri(),
                link_text=f"report of {meta['release_id']}",
                key="release-report",
                description=str(Path(meta["report"]).parent),
            )
        rows = [
            {
                "kind": "privacy",
                "figure": r.model,
                "value": str(r.value),
                "required": str(r.threshold),
                "result": "pass" if r.passed else "FAIL",
            }
            for r in privacy
        ]
        rows += [
            {"kind": "utility", "figure": k, "value": report_mod.fmt(v), "required": "", "result": ""}
            for k, v in utility.items()
        ]
        create_table_artifact(table=rows, key="release-figures", description="privacy and utility")
    except Exception as exc:  # artifacts are a convenience; the release is already committed
        progress(f"warning: could not create Prefect artifacts: {type(exc).__name__}: {exc}")


@flow(name="publish", persist_result=False, validate_parameters=True)
def publish_flow(
    spec_path: str = "", overrides: dict | None = None, actor: str | None = None, new_release: bool = False
):
    """Publish the next release of the series described by the spec file.

    spec_path: a TOML spec (see README); overrides: e.g. {"technique": {"k": 20}} merged over it;
    actor: who asks (the audit log); new_release: publish again although this run (a retry) or
    this scheduled slot already published one. Returns the release id.
    """
    return run_attempt(spec_path, overrides, actor, new_release)


def run_attempt(spec_path: str, overrides: dict | None, actor: str | None, new_release: bool = False):
    """The body of the publish and serial flows: the release id, or a Failed state whose message
    is the error's one line. Returning the state (not raising) keeps Prefect from pickling the
    exception into its result storage; the attempt gets its audit-log row either way."""
    committed = len(COMMITTED)
    try:
        release_id = run_release(
            resolve_spec(spec_path, None, overrides), actor=actor, new_release=new_release, spec_path=spec_path
        )["release_id"]
        return release_id
    except Exception as exc:
        if len(COMMITTED) > committed:  # the release exists: what failed after it is a warning
            progress(
                f"warning: release {COMMITTED[-1]} is committed, but a step after the commit "
                f"failed ({type(exc).__name__})"
            )
            return COMMITTED[-1]
        if not isinstance(exc, PrivacyRefused):  # a refusal was logged with its figures
            record_failure(spec_path, overrides, actor, exc, public_message(exc))
        return failed_state(exc)


def failed_state(exc: Exception):
    """The Failed state a flow returns for `exc`: its one-line public message as the state
    message. Remembered in FAILURES for an in-process caller (call_flow raises it again)."""
    FAILURES.append(exc)
    if not isinstance(exc, EXPECTED_ERRORS):
        # frames only: the exception's own text may quote data
        progress("internal error; traceback (frames only):\n" + "".join(traceback.format_tb(exc.__traceback__)))
    return Failed(message=public_message(exc))


def make_task_runner(run: RunSpec) -> Executor:
    """The executor [run] asks for, one per run: threads of the flow process, or Dask workers.
    Only a technique's chunks use it; every other step, and every store write, stays in the
    flow process."""
    if run.task_runner == "dask":
        return dask_task_runner(run)
    return ThreadExecutor(run.workers)


def publish(spec_path: str, overrides: dict | None = None, actor: str | None = None) -> str:
    """Run `publish_flow` in this process (the spec is read first: a bad spec fails before any
    flow run). The release is the same whichever [run] executor and however many workers."""
    get_technique(resolve_spec(spec_path, None, overrides))
    return call_flow(publish_flow, spec_path=spec_path, overrides=overrides, actor=actor)


def call_flow(flow_, **parameters) -> str:
    """Run a publish-like flow in this process: its result, or the error that failed it, raised
    again here (the flow ends Failed with the error's one line rather than raising it)."""
    seen = len(FAILURES)
    state = flow_(**parameters, return_state=True)
    if state.is_completed():
        return state.result()
    if len(FAILURES) > seen:
        raise FAILURES[-1]
    raise RuntimeError(f"the {flow_.name} flow ended {state.type.value}: {state.message}")

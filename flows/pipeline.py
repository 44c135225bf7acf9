"""The release pipeline: validate -> partition -> anonymize -> verify -> evaluate -> commit -> report.

One pipeline, two drivers. The steps, their order, the checks and the commit are written here,
once. A driver decides how each step runs:
- `Driver` (here): a plain call in this process. No Prefect import, no server, no API call: the
  CLI and `privpub.publish` use it when no Prefect server is configured (flows/run.py).
- `flows/publish.PrefectDriver`: each step a Prefect task of a flow run (the service, the UI,
  deployments, schedules, retries of the whole run).
Both retry the same steps on the same transient I/O errors, log every attempt, and give the same
release, byte for byte (tests/test_drivers.py).

No step caches or persists its result: several of them carry the secret rows.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privpub.flows.attempts import (
    attempt_marker,
    attribution,
    current_actor,
    flow_run_id,
    for_caller,
    record_failure,
)
from privpub.flows.beside import Beside, done_now, on_a_thread
from privpub.flows.cluster import cluster_input, dask_task_runner, uses_cluster
from privpub.flows.lazy import load_lazily
from privpub.schemas.errors import PrivacyRefused, public_message
from privpub.schemas.names import inside
from privpub.schemas.spec import ROW_ID, ReleaseSpec, RunSpec, resolve_spec
from privpub.state.failpoints import failpoint
from privpub.state.store import StagedFiles, Store, check_output_dir, stage_tables
from privpub.tasks.compose.budget import budget_settings, ledger_check, ledger_with
from privpub.tasks.compose.check import SeriesCheck, series_settings
from privpub.tasks.core.executor import Executor, ThreadExecutor
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import ANONYMIZE, UTILITY, VERIFY, ChunkedStep, Technique
from privpub.tasks.core.threads import worth_threads
from privpub.tasks.core.types import Partition, PrivacyResult, Release, VerifyContext
from privpub.tasks.evaluate import SharedWorkload, evaluate, evaluation_workload, shared_workload, utility_summary
from privpub.tasks.evaluate.classification import classification_figures, hold_out
from privpub.tasks.evaluate.parted import evaluate_on_cluster
from privpub.tasks.evaluate.quality import quality_figures
from privpub.tasks.report import page as report_mod
from privpub.tasks.report import verdict as report_verdict
from privpub.tasks.report.series import SERIES_FIGURES
from privpub.tasks.risk import RiskSettings, over_limits, risk_settings
from privpub.tasks.risk.parted import release_figures, release_riskiest, rows_figures
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.validate import checked_input, load_input, validate
from privpub.tasks.validate.parted import PartedData
from privpub.tasks.verify.published import PEOPLE, PEOPLE_IN, check_published

# --- transient failures: retried by both drivers ----------------------------------------------


def transient_error(exc: BaseException) -> bool:
    """Only what may succeed on a second try (a disk or network hiccup); a missing file, bad
    input, a bad spec, a refusal or a busy state file (already waited for) fails at once."""
    return isinstance(exc, OSError) and not isinstance(
        exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
    )


# step -> seconds to wait before each retry (the Prefect tasks get the same, flows/publish.py)
RETRY_DELAYS: dict[str, list[int]] = {"load-input": [1, 5], "stage-files": [1, 5], "commit": [2, 10]}


# --- the driver ---------------------------------------------------------------------------------


def echo_to_stderr(message: str) -> None:
    """A progress line for the person at the terminal."""
    print(f"[privpub] {message}", file=sys.stderr, flush=True)


class Driver:
    """Each step a plain call in this process; progress lines go to `echo` (stderr by default;
    None: silent). Steps that read only what is final already run beside the main line on a
    thread of their own (flows/beside.py: the series composition beside anonymize; the evaluation
    beside verify, the series composition and risk; the published files beside them all)."""

    overlaps = True  # steps may start before the step ahead of them in the pipeline's order ends

    def __init__(self, echo: Callable[[str], None] | None = echo_to_stderr):
        self.echo = echo

    def run(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) as the step `name`; a transient error retried as RETRY_DELAYS says."""
        delays = RETRY_DELAYS.get(name, [])
        for attempt in range(len(delays) + 1):
            try:
                return fn(*args)
            except Exception as exc:
                if attempt == len(delays) or not transient_error(exc):
                    raise
                self.progress(f"{name} failed ({type(exc).__name__}); retry {attempt + 1} in {delays[attempt]} s")
                time.sleep(delays[attempt])

    def beside(self, name: str, fn: Callable[..., Any], *args: Any) -> Future:
        """Step `name` started on a thread of its own while the caller goes on (flows/beside.py);
        its result, or its error, from the future. A publish of few rows in a process that keeps
        their work in one thread (tasks/core/threads.py) runs it now, in this thread."""
        rows = _RUN_ROWS.get()
        if rows is not None and not worth_threads(rows):
            return done_now(partial(self.run, name, fn, *args))
        return on_a_thread(partial(self.run, name, fn, *args))

    def map_chunks(self, label: str, fn: Callable[[Any], Any], chunks: list, executor: Executor) -> list:
        """A chunked step's chunks on the run's executor, results in chunk order."""
        return executor.map(fn, chunks)

    def make_executor(self, run: RunSpec) -> Executor:
        return make_executor(run)

    def progress(self, message: str) -> None:
        if self.echo is not None:
            self.echo(message)

    def after_commit(self, run_id: str | None, meta: dict, privacy: list, utility: dict) -> None:
        """Bookkeeping after the commit (the Prefect driver names the run and adds artifacts)."""


PLAIN = Driver()
# the rows of the publish under way in this process (None: none, or rows kept in parts)
_RUN_ROWS: contextvars.ContextVar[int | None] = contextvars.ContextVar("privpub_run_rows", default=None)
# the driver of the release being made (steps and helpers print progress through it)
_DRIVER: contextvars.ContextVar[Driver | None] = contextvars.ContextVar("privpub_driver", default=None)


def current_driver() -> Driver:
    return _DRIVER.get() or PLAIN


@contextlib.contextmanager
def using_driver(driver: Driver) -> Iterator[Driver]:
    """Steps and helpers run under `driver` (their progress lines go to it) inside the block."""
    token = _DRIVER.set(driver)
    try:
        yield driver
    finally:
        _DRIVER.reset(token)


def progress(message: str) -> None:
    """Progress for the person at the terminal and, in a Prefect run, the run's log."""
    current_driver().progress(message)


def _timed(label: str, fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    progress(f"{label} done in {time.perf_counter() - t0:.2f} s")
    return out


def make_executor(run: RunSpec) -> Executor:
    """The executor [run] asks for, one per run: threads of this process, or Dask workers. A
    technique's chunks and rows kept in parts use it; every store write stays in this process."""
    if run.task_runner == "dask":
        return dask_task_runner(run)
    return ThreadExecutor(run.workers)


# --- the steps (each a Prefect task under the Prefect driver, named as in RETRY_DELAYS) --------


def load_input_step(spec: ReleaseSpec) -> tuple[pd.DataFrame, str]:
    return _timed("load input", load_input, spec)


def cluster_input_step(spec: ReleaseSpec, technique, executor: Executor) -> tuple[str, PartedData]:
    fp, data = _timed("load and validate input on the Dask cluster", cluster_input, spec, technique, executor)
    progress(f"{data.n} valid rows in {len(data.parts)} partitions, {len(data.domains)} quasi-identifiers")
    return fp, data


def validate_step(frame, spec: ReleaseSpec, technique) -> Microdata:
    data = _timed("validate", validate, frame, spec, technique)
    progress(f"{data.n} valid rows, {len(data.domains)} quasi-identifiers")
    return data


def hold_out_step(data: Microdata, seed: int) -> Microdata:
    """[evaluate] target: the held-out people drawn, before anonymizing, from the release's seed."""
    data = hold_out(data, seed)
    held = data.held_out
    progress(f"{held.people} people ({int(held.test.sum())} rows) held out of the release to test classification")
    return data


def partition_step(technique, data, rng) -> Partition:
    failpoint("partition")
    part = _timed("partition", technique.partition, data, rng)
    progress(f"{part.n_groups} QI-groups")
    return part


def anonymize_whole_step(technique, data, part, rng) -> Release:
    failpoint("anonymize")
    return _timed("anonymize", technique.anonymize, data, part, rng)


def plan_step(technique, step: ChunkedStep, inputs: tuple):
    if step is ANONYMIZE:
        failpoint("anonymize")
    return step.plan(technique, *inputs)


def combine_step(plan, results, finish=None):
    out = plan.combine(results)
    return out if finish is None else finish(out)


def verify_step(technique, release, spec: ReleaseSpec, context: VerifyContext) -> list[PrivacyResult]:
    check_published(release, spec, technique)
    return _timed("verify", technique.verify, release, context)


def composition_step(check: SeriesCheck, data, part) -> list[PrivacyResult]:
    return _timed("series composition", check.check_release, data, part)


# the quality models read the input's codes in this process (tasks/evaluate/quality.py)
ROWS_IN_PARTS = "the rows are kept in parts on a cluster: the quality models are computed in memory only"


@dataclass
class InputFigures:
    """What a release's figures read of the input alone: the workload with its exact answers, and
    the input's risk figures (risk_step's memo)."""

    workload: SharedWorkload
    risk_memo: dict


def input_figures(data, workload_seed: int, settings: RiskSettings, after: Future | None = None) -> InputFigures:
    """after: a step beside to wait for first (its error is its taker's)."""
    if after is not None:
        after.exception()
    population = settings.population_size(data.people)
    risk = {(settings.threshold, population): rows_figures(data, settings.threshold, population)}
    return InputFigures(shared_workload(data, workload_seed), risk)


def workload_of(shared: SharedWorkload | Future | None) -> SharedWorkload | None:
    """The workload given (explore's), or drawn beside the partition (a Future of InputFigures)."""
    return shared.result().workload if isinstance(shared, Future) else shared


def evaluate_step(technique, release, data, workload_seed: int, shared: SharedWorkload | Future | None = None):
    """shared: the workload drawn and answered already, or being drawn beside (rows in this
    process only)."""
    if data.in_parts:  # the workload drawn where the rows are
        figures = _timed("evaluate", evaluate_on_cluster, technique, release, data, workload_seed)
        return {**figures, **quality_figures(ROWS_IN_PARTS, data)}
    shared = workload_of(shared)  # an error drawing it beside is the evaluation's
    figures = _timed("evaluate", partial(evaluate, shared=shared), technique, release, data, workload_seed)
    return {**figures, **_timed("quality models", _quality, technique, release, data)}


def _quality(technique, release, data) -> dict[str, Any]:
    view = technique.quality_view(release)
    return {**quality_figures(view, data), **classification_figures(view, data)}


def risk_step(
    technique, release, data, settings: RiskSettings, input_memo: dict | None = None, where_too: bool = True
) -> tuple[dict[str, float], dict | None, dict | None]:
    """Re-identification risk before (the input, when its rows are here) and after (the
    published table the technique names), where the riskiest published rows are, and what
    the report says of attribute disclosure ({"release": ..., "input": ...}, tasks/risk/__init__.py
    attribute_summary). input_memo: the input's figures by (threshold, population), kept across
    the releases `privpub explore` computes from one input; where_too False: no riskiest rows
    and no attribute summary (no report)."""
    t0 = time.perf_counter()
    population = settings.population_size(data.people)  # None: no journalist / marketer figures
    memo = {} if input_memo is None else input_memo
    key = (settings.threshold, population)
    if key not in memo:
        memo[key] = rows_figures(data, settings.threshold, population)
    before, input_summary = memo[key]
    after, summary = release_figures(technique, release, settings.threshold, population)
    figures = {**before, **after}
    where = release_riskiest(technique, release) if where_too else None
    attribute = {"release": summary, "input": input_summary} if where_too else None
    progress(f"risk done in {time.perf_counter() - t0:.2f} s")
    return figures, where, attribute


def stage_step(output_dir: Path, tables) -> StagedFiles:
    return _timed("write files", stage_tables, output_dir, tables)


def commit_step(store: Store, kwargs: dict) -> tuple[str, bool]:
    return store.commit_release(**kwargs)


# --- chunked steps ---------------------------------------------------------------------------


def _chunked(driver: Driver, label: str, step: ChunkedStep, technique, inputs: tuple, executor: Executor, finish=None):
    """A step the technique splits (`step`, its tasks named `<label>-plan`, `-chunk`, `-combine`):
    plan, its chunks on the run's executor, combine. None when the technique's plan is None (the
    step then runs whole)."""
    t0 = time.perf_counter()
    plan = driver.run(f"{label}-plan", plan_step, technique, step, inputs)
    if plan is None:
        return None
    results = driver.map_chunks(label, plan.run, plan.chunks, executor)
    out = driver.run(f"{label}-combine", combine_step, plan, results, finish)
    progress(f"{label} done in {time.perf_counter() - t0:.2f} s ({len(plan.chunks)} chunks)")
    return out


def anonymize_step(driver: Driver, technique, data, part, rng, executor: Executor) -> Release:
    """One anonymize step, or, for a technique that splits it (Technique.split_anonymize), its chunks."""
    if ANONYMIZE.name in technique.capabilities.chunked:
        release = _chunked(driver, "anonymize", ANONYMIZE, technique, (data, part, rng), executor)
        if release is not None:
            return release
    return driver.run("anonymize", anonymize_whole_step, technique, data, part, rng)


def verify_and_evaluate(
    driver: Driver,
    technique,
    release,
    spec: ReleaseSpec,
    context: VerifyContext,
    data,
    workload_seed: int,
    executor,
    shared: SharedWorkload | Future | None = None,
):
    """verify, then (when it passes) evaluate; each whole or, when the technique splits it, as
    chunks. Returns (privacy results, utility figures or None if refused); an evaluation whole
    runs beside the caller (Driver.beside), its figures then a Future. A driver that overlaps
    steps starts it beside verify already: it is waited for, and dropped, when verify fails.
    shared: the workload drawn and answered once for several releases of the same rows (explore)."""
    # a release evaluated whole (one_piece) draws its workload in evaluate_step: not twice (issue 43)
    whole = UTILITY.name not in technique.capabilities.chunked or technique.one_piece(release)
    ahead = whole and driver.overlaps and not data.in_parts  # rows in parts: their steps one by one
    early = evaluate_whole(driver, technique, release, data, workload_seed, shared) if ahead else None
    try:
        privacy = verify_release(driver, technique, release, spec, context, executor)
    except BaseException:
        settle(early)
        raise
    if any(not r.passed for r in privacy):
        settle(early)
        return privacy, None
    if early is not None:
        return privacy, early
    if not whole:
        shared = workload_of(shared)
        workload = evaluation_workload(data, workload_seed) if shared is None else shared.queries
        actual = None if shared is None else shared.actual
        finish = partial(_utility_summary, technique, release, data, workload, actual)
        utility = _chunked(driver, "evaluate", UTILITY, technique, (release, data, workload), executor, finish)
        if utility is not None:
            return privacy, utility
    return privacy, evaluate_whole(driver, technique, release, data, workload_seed, shared)


def verify_release(driver: Driver, technique, release, spec: ReleaseSpec, context: VerifyContext, executor):
    """The verify step, whole or, when the technique splits it, as chunks."""
    if VERIFY.name in technique.capabilities.chunked:
        check_published(release, spec, technique)
        privacy = _chunked(driver, "verify", VERIFY, technique, (release, context), executor)
        if privacy is not None:
            return privacy
    return driver.run("verify", verify_step, technique, release, spec, context)


def evaluate_whole(driver: Driver, technique, release, data, workload_seed: int, shared) -> Future:
    """The evaluate step whole, started beside the caller; rows in parts are evaluated where they
    are, on the run's executor, which the main line's steps use too: then now, in this thread."""
    args = (technique, release, data, workload_seed) + (() if shared is None else (shared,))
    if data.in_parts:  # (without `shared`: the call the Prefect task of this name takes)
        return done_now(partial(driver.run, "evaluate", evaluate_step, *args))
    return driver.beside("evaluate", evaluate_step, *args)


def settle(future: Future | None) -> None:
    """Wait for a step beside that nobody will take (no thread outlives its run); its error, if
    any, is dropped: the caller is failing or refusing for its own reason."""
    if future is not None:
        future.exception()  # waits (its thread too), raises nothing


def _utility_summary(technique, release, data, workload, actual, estimate_and_figures):
    estimate, figures = estimate_and_figures
    summary = utility_summary(technique, release, data, workload, estimate, figures, actual)
    return {**summary, **_timed("quality models", _quality, technique, release, data)}


# --- the release ----------------------------------------------------------------------------


def draw_seed() -> int:
    return secrets.randbits(63)


# [dataset] keys added after releases were keyed, with the value that changes nothing: left out
# of the key at that value, so a spec that does not use them keeps the key it had (repeat protection)
LATER_DATASET_KEYS: dict[str, str | None] = {"rows_per_person": "one"}
LATER_QI_KEYS: dict[str, str | None] = {"near_unique": None}


def _keyed_dataset(spec: ReleaseSpec) -> dict:
    body = spec.dataset.model_dump(exclude={"input", "table"})
    for key, value in LATER_DATASET_KEYS.items():
        if body.get(key) == value:
            del body[key]
    for qi in body["qi"]:
        for key, value in LATER_QI_KEYS.items():
            if key in qi and qi[key] == value:
                del qi[key]
    return body


def release_key(spec: ReleaseSpec, fingerprint: str, seed: int) -> str:
    body = {
        "series": spec.dataset.name,
        "input": fingerprint,
        "seed": seed,
        "technique": spec.technique.model_dump(),
        "dataset": _keyed_dataset(spec),
    }
    if spec.section("series"):  # keep_groups changes the release (absent: keys as before)
        body["series_options"] = spec.section("series")
    if spec.evaluate.target is not None:  # the held-out people change the release (absent: keys as before)
        body["held_out"] = {"target": spec.evaluate.target, "holdout": spec.evaluate.holdout}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


# the figures the report follows over a series (beside the privacy figures)


def read_rows(
    driver: Driver, spec: ReleaseSpec, technique, executor: Executor, in_parts: bool
) -> tuple[str, Microdata | PartedData]:
    """The input's fingerprint and its rows: read and validated by the executor's workers and kept
    there in parts, or in this process (the CLI may have read it a moment ago)."""
    if in_parts:
        return driver.run("load-input-on-cluster", cluster_input_step, spec, technique, executor)
    checked = checked_input(spec)
    if checked is not None:
        _, fp, data = checked
        progress(f"{data.n} valid rows (read and validated before the run started)")
        return fp, data
    frame, fp = driver.run("load-input", load_input_step, spec)
    return fp, driver.run("validate", validate_step, frame, spec, technique)


def refuse_repeat(store: Store, spec: ReleaseSpec, technique, fp: str, who, run_id, origin) -> None:
    """Refuse the series' next release when the input and parameters are those of its last one
    (the same seed too is recognised before: that release is returned). Another draw of the
    same data adds nothing a steward needs and, for a randomized technique, helps an adversary
    average the randomness out; `allow_repeat` publishes it anyway."""
    last = store.last_release(spec.dataset.name)
    if (
        last is None
        or last["input_fingerprint"] != fp
        or last["technique"] != technique.name
        or last["parameters"] != spec.technique.params
    ):
        return
    why = (
        f"; {technique.name} is randomized: two releases of the same data with different randomness "
        "let an adversary average the noise out"
        if technique.capabilities.randomized
        else ""
    )
    message = (
        f"the input is unchanged since release #{last['sequence']} ({last['release_id']}) of series "
        f"'{spec.dataset.name}', with the same technique and parameters: not published again{why} "
        f"({for_caller('--allow-repeat', 'allow_repeat=True')} publishes it anyway; the same seed returns that release)"
    )
    store.log(
        who,
        "publish",
        spec.dataset.name,
        "refused",
        run_id,
        refusal_detail(message, {"repeat_of": last["release_id"], **origin}),
    )
    raise PrivacyRefused(message)


def refusal_detail(message: str, detail: dict[str, Any]) -> dict[str, Any]:
    """A refusal's audit-row detail: like a failure's, its error and its one-line reason (the
    trail's `error` and `message` columns), with what else it names."""
    return {**detail, "error": PrivacyRefused.__name__, "message": message}


@dataclass
class Refusal:
    """Why a computed release may not be published: the one-line message and the audit row's detail."""

    message: str
    detail: dict


@dataclass
class Computed:
    """A release computed and checked, nothing written: what `publish` commits and `explore`
    reports. utility is None when a privacy check failed; risk too, and when a privacy check
    failed or a [risk] limit was exceeded, `refusal` says why."""

    release: Release
    part: Partition
    privacy: list[PrivacyResult]
    utility: dict[str, Any] | Future | None  # a Future: still evaluated beside (compute_release)
    risk: dict[str, float] | None
    riskiest: dict | None
    refusal: Refusal | None
    attribute: dict | None = None  # risk_step's attribute summaries (the report's)


def compute_release(
    driver: Driver,
    spec: ReleaseSpec,
    technique,
    data,
    store: Store,
    series_check: SeriesCheck,
    settings: RiskSettings,
    seed: int,
    context: dict | None,
    executor: Executor,
    shared: SharedWorkload | Future | None = None,
    input_risk: dict | None = None,
    on_release: Callable[[Release], None] | None = None,
    utility_later: bool = False,
) -> Computed:
    """partition -> anonymize -> verify and evaluate -> series composition -> risk, on rows
    read and validated already and a prepared series check. Writes nothing (the technique's
    history is read from the store); `data` is read, never changed, beyond `data.extra`, which
    holds the technique's history (the same for every release of the series made next).
    shared, input_risk: what `privpub explore` computes once for all its settings (the workload
    and its answers; the input's risk figures); with them no riskiest rows (nothing reported).
    on_release: called with the release as soon as it is made (publish starts writing its files).
    utility_later: a release passing every check may return its utility as the Future of the
    evaluation still running beside (publish's commit takes it); the caller then owns it."""
    # independent streams: the release's draws do not depend on how the workload is drawn
    release_seq, _ = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(release_seq)
    history = technique.prior_context(store, spec)
    data.extra.update(history)
    input_side = None
    if shared is None and input_risk is None and driver.overlaps and not data.in_parts:
        # what reads the input only (the workload and its answers, the input's risk figures) is
        # computed beside the partition, which leaves a core free (numpy's passes release the
        # GIL), instead of after anonymize, when verify, evaluate and the files fill both cores;
        # once the person ids are hashed: three threads for two cores slowed the partition by
        # what they saved (issue 43, docs/benchmarks.md)
        after = series_check.hashing()  # the ids' pseudonyms fill the other core first
        input_side = driver.beside("input-figures", input_figures, data, spec.evaluate.workload_seed, settings, after)
        shared = input_side
    composing: list[Future] = []  # the series composition, started beside anonymize

    def compose_beside(part: Partition) -> None:
        # it reads the partition and the input only, and anonymize leaves a core idle (issue 43)
        if driver.overlaps and not data.in_parts:
            composing.append(driver.beside("series-composition", composition_step, series_check, data, part))

    try:
        part, release = make_release(driver, technique, data, series_check, rng, executor, compose_beside)
        if on_release is not None:
            on_release(release)
        context_ = VerifyContext(data, {**(context or {}), **history})
        privacy, utility = verify_and_evaluate(
            driver, technique, release, spec, context_, data, spec.evaluate.workload_seed, executor, shared
        )
        try:  # the evaluation (a Future: Driver.beside) runs while the series and risk are checked
            computed = series_and_risk(
                driver,
                technique,
                release,
                part,
                data,
                series_check,
                settings,
                privacy,
                input_risk,
                input_side,
                composing[0] if composing else None,
            )
        except BaseException:  # the first error is the one raised
            settle(utility if isinstance(utility, Future) else None)
            raise
        later = utility_later and computed.refusal is None
        computed.utility = utility.result() if isinstance(utility, Future) and not later else utility
        return computed
    finally:  # refused before anything took it, or failed: no thread outlives the run
        settle(composing[0] if composing else None)
        settle(input_side)


def make_release(
    driver: Driver,
    technique,
    data,
    series_check: SeriesCheck,
    rng: np.random.Generator,
    executor: Executor,
    on_partition: Callable[[Partition], None] | None = None,
) -> tuple[Partition, Release]:
    """partition (the groups of earlier releases kept, when the series asks), then anonymize.
    on_partition: called with the final partition before anonymize starts."""
    part = driver.run("partition", partition_step, technique, data, rng)
    if series_check.settings.keep_groups:  # PartedSeriesCheck refused it for rows in parts
        assert isinstance(data, Microdata)
        part = series_check.keep_groups(data, part)
        progress(f"{part.n_groups} groups kept from earlier releases ({part.info['merge_rounds']} merge rounds)")
    if on_partition is not None:
        on_partition(part)
    release = anonymize_step(driver, technique, data, part, rng, executor)
    if getattr(data, "person", None) is not None:  # rows_per_person = "many" (docs/models.md)
        if PEOPLE not in release.private:  # without it the verifier would count rows as people
            raise RuntimeError(f'technique {technique.name} kept no people table under rows_per_person = "many"')
        # the input's people: the population of [risk] sample_fraction when `privpub verify` recomputes
        release = replace(release, private={**release.private, PEOPLE_IN: data.people})
    return part, release


def series_and_risk(
    driver: Driver,
    technique,
    release: Release,
    part: Partition,
    data,
    series_check: SeriesCheck,
    settings: RiskSettings,
    privacy: list[PrivacyResult],
    input_risk: dict | None,
    input_side: Future | None = None,
    composing: Future | None = None,
) -> Computed:
    """After verify: the series composition check, then (when every check passes) the risk
    figures and their limits. The Computed's utility is the caller's to fill. input_side: the
    input's figures being computed beside (a Future of InputFigures); composing: the series
    composition started beside anonymize (its figures taken here, in the same order)."""
    if composing is not None:
        privacy = privacy + composing.result()
    else:
        privacy = privacy + driver.run("series-composition", composition_step, series_check, data, part)
    failed = [r for r in privacy if not r.passed and not series_check.tolerated(r)]
    for r in privacy:
        if not r.passed and series_check.tolerated(r):
            what = f"{r.worst['below']} people below {r.threshold} when all releases of the series are combined"
            progress(f'warning: {r.model}: {what}; published because [series] composition = "warn"')
    if failed:
        detail = {r.model: {"value": str(r.value), "threshold": str(r.threshold), "worst": r.worst} for r in failed}
        message = "release refused, privacy check failed: " + "; ".join(
            f"{r.model} reached {r.value}, required {r.threshold}" for r in failed
        )
        if any(r.model == series_check.model for r in failed):  # which releases combine, the remedies
            message += "; " + series_check.breach_note()
        return Computed(release, part, privacy, None, None, None, Refusal(message, detail))

    memo = input_side.result().risk_memo if input_side is not None else input_risk
    risk, riskiest, attribute = driver.run(
        "risk", risk_step, technique, release, data, settings, memo, input_risk is None
    )
    broken = over_limits(risk, settings)
    if broken:
        message = "release refused, re-identification risk above its limit: " + "; ".join(broken)
        return Computed(release, part, privacy, None, risk, riskiest, Refusal(message, {"risk": broken}), attribute)
    return Computed(release, part, privacy, None, risk, riskiest, None, attribute)


def row_ids_refusal(store: Store, spec: ReleaseSpec) -> str | None:
    """Why a release of this spec is refused in its series, or None: `person_id = "@row"` numbers
    rows, not people: row i of two releases is not one person, so the series composition check
    could not see what releases reveal together (it does not apply to such a release: SeriesCheck
    `row_ids`). Such a table is published once: a series that already has a release refuses it.
    `privpub explore` shows the same refusal on every setting."""
    earlier = store.last_sequence(spec.dataset.name)
    if spec.dataset.person_id != ROW_ID or earlier == 0:
        return None
    return (
        f"person_id = \"{ROW_ID}\" numbers rows, not people: series '{spec.dataset.name}' already has "
        f"{earlier} release(s), and what its releases reveal together can only be checked with a real "
        "person id; name the person id column, or publish the table as a new series"
    )


def refuse_row_ids_in_a_series(store: Store, spec: ReleaseSpec, who, run_id, origin) -> None:
    """`row_ids_refusal` raised, with its audit row."""
    message = row_ids_refusal(store, spec)
    if message is None:
        return
    store.log(
        who,
        "publish",
        spec.dataset.name,
        "refused",
        run_id,
        refusal_detail(message, {"reason": "@row in a series", **origin}),
    )
    raise PrivacyRefused(message)


# --- one publish: the plan (the spec resolved and checked once), the run, its phases ----------


@dataclass(frozen=True)
class RunPlan:
    """A publish's spec resolved and checked once (`plan_run`), carried through the whole run:
    the CLI's checks, the input's early read, the attempt, the Prefect flow run in this process
    and the commit all read it, none resolves the spec again.

    spec_path, overrides: what it was resolved from (the audit row of a failed attempt reads
    them; a flow run gets them as its parameters). places_checked: the output folder and the
    state file were found usable already (`check_places`)."""

    spec: ReleaseSpec
    technique: Technique  # the spec's, its parameters validated
    risk: RiskSettings
    in_parts: bool  # rows read and kept where the executor works (flows/cluster.py uses_cluster)
    spec_path: str | None = None
    overrides: dict | None = None
    places_checked: bool = False

    @property
    def series(self) -> str:
        return self.spec.dataset.name

    @property
    def state_path(self) -> Path:
        return self.spec.state_path


def plan_from_spec(spec: ReleaseSpec, spec_path: str | None = None, overrides: dict | None = None) -> RunPlan:
    """The plan of a spec resolved already: its technique, [series] and [risk] checked (refused
    before any work, one line)."""
    technique = get_technique(spec)
    series_settings(spec, technique)
    budget_settings(spec, technique)
    return RunPlan(spec, technique, risk_settings(spec), uses_cluster(spec, technique), spec_path, overrides)


def plan_run(spec_path: str | None, overrides: dict | None) -> RunPlan:
    """The one place a publish resolves its spec (the file, or with no path the overrides as the
    whole spec), then checks it (`plan_from_spec`)."""
    return plan_from_spec(resolve_spec(spec_path, None, overrides), spec_path, overrides)


def check_places(plan: RunPlan) -> RunPlan:
    """The output folder and the state file usable (before any work: a run must not fail only at
    the end); the plan says so, and the run does not check again."""
    if not plan.places_checked:
        check_output_dir(plan.spec.output_dir)
        Store(plan.state_path).check_usable()
    return replace(plan, places_checked=True)


# called with the release id right after the commit (the CLI prints it there; an attempt notes
# it: whatever fails afterwards must not turn a committed release into a failed command)
_ON_COMMIT: contextvars.ContextVar[tuple[Callable[[str], None], ...]] = contextvars.ContextVar(
    "privpub_on_commit", default=()
)


@contextlib.contextmanager
def on_commit(callback: Callable[[str], None]) -> Iterator[None]:
    """`callback(release_id)` after each commit inside the block (a flow run in this process too)."""
    token = _ON_COMMIT.set((*_ON_COMMIT.get(), callback))
    try:
        yield
    finally:
        _ON_COMMIT.reset(token)


@dataclass(frozen=True)
class RunOptions:
    """What the caller of a publish asks beyond the spec (run_release's keyword arguments)."""

    actor: str | None = None
    context: dict | None = None
    new_release: bool = False
    allow_repeat: bool = False


@dataclass
class ReleaseRun:
    """One publish under way: its plan, how its steps run, and what its first phase fixed."""

    plan: RunPlan
    options: RunOptions
    driver: Driver
    executor: Executor
    store: Store
    series_check: SeriesCheck
    started: datetime
    seed: int
    who: str
    run_id: str | None
    origin: dict
    beside: Beside = field(default_factory=Beside)  # steps started beside the main line

    @property
    def spec(self) -> ReleaseSpec:
        return self.plan.spec

    @property
    def technique(self) -> Technique:
        return self.plan.technique

    def log(self, target: str, outcome: str, detail: dict) -> None:
        self.store.log(self.who, "publish", target, outcome, self.run_id, {**detail, **self.origin})

    def unchanged(self, release_id: str) -> dict[str, Any]:
        """The summary of a run that found its release made already."""
        return {"release_id": release_id, "created": False, "state": str(self.store.path)}


@dataclass(frozen=True)
class RowsRead:
    """The input's rows, their fingerprint, the release key they give and the series' last
    sequence when they were checked (the commit refuses if another release landed since)."""

    fp: str
    data: Microdata | PartedData
    key: str
    based_on: int
    ledger: tuple[PrivacyResult, ...] = ()  # the budget ledger's figures of this release (tasks/compose/budget.py)
    spends: tuple = ()  # the series' ledger as read then (state/ledger.py Spend), for the report


def run_release(
    spec: ReleaseSpec | RunPlan,
    actor: str | None = None,
    context: dict | None = None,
    store: Store | None = None,
    new_release: bool = False,
    spec_path: str | None = None,
    executor: Executor | None = None,
    driver: Driver | None = None,
    allow_repeat: bool = False,
) -> dict[str, Any]:
    """The pipeline itself; returns a summary dict (release id, figures, where things are).

    spec: the run's plan (`plan_run`), or a spec resolved already (planned here).
    new_release: publish even if this flow run (a retry) or this deployment's scheduled slot
    already published a release of the series (without it, that release is returned).
    allow_repeat: publish although the input and parameters equal the series' last release's
    (refuse_repeat).
    executor: where chunks run (None: the one [run] asks for, closed when the release is done).
    driver: how steps run (None: the driver of the surrounding call, else plain calls)."""
    plan = spec if isinstance(spec, RunPlan) else plan_from_spec(spec, spec_path)
    options = RunOptions(actor, context, new_release, allow_repeat)
    driver = driver or current_driver()
    own = driver.make_executor(plan.spec.run) if executor is None else contextlib.nullcontext(executor)
    # the series lock, once taken, held until the release ends; the executor closed after it
    with using_driver(driver), contextlib.ExitStack() as held, own as runs_chunks:
        return publish_run(open_run(plan, options, driver, runs_chunks, store or Store(plan.state_path), held))


def open_run(
    plan: RunPlan, options: RunOptions, driver: Driver, executor: Executor, store: Store, held: contextlib.ExitStack
) -> ReleaseRun:
    """The checks before any work: the series check's settings, the output folder and the state
    file (unless the plan's caller checked them), then the series lock, held until `held` closes."""
    started = datetime.now(UTC).replace(tzinfo=None)
    spec = plan.spec
    # the rows read into this process, or kept in parts where the executor works: the series
    # check reads its people accordingly
    # the cluster's series check loaded only for rows in parts (a release in memory never needs it)
    kind = load_lazily("privpub.tasks.compose.parted:PartedSeriesCheck") if plan.in_parts else SeriesCheck
    series_check: SeriesCheck = kind(spec, plan.technique)
    seed = spec.output.seed if spec.output.seed is not None else draw_seed()
    if not plan.places_checked:
        check_output_dir(spec.output_dir)
        store.check_usable()
    store.watch_output_dir(spec.output_dir)
    # one publish of a series at a time, from here (its first look at the series) to its commit
    held.enter_context(store.series_lock(spec.dataset.name))
    who, run_id, origin = current_actor(options.actor), flow_run_id(), attribution()
    run = ReleaseRun(plan, options, driver, executor, store, series_check, started, seed, who, run_id, origin)
    held.callback(run.beside.close, discard_unclaimed)  # before the series lock is let go
    return run


def discard_unclaimed(name: str, result: Any) -> None:
    """What a step beside the main line made and the run did not take (it was refused or failed
    first): staged files are deleted."""
    if isinstance(result, StagedFiles):
        result.discard()


def publish_run(run: ReleaseRun) -> dict[str, Any]:
    """The phases of one publish, in order: the slot, the rows and the checks on them, compute,
    the refusal's audit row, then stage and commit."""
    done = already_published(run)
    if done is not None:
        return run.unchanged(done)
    rows = read_and_check(run)
    if isinstance(rows, str):
        return run.unchanged(rows)
    token = _RUN_ROWS.set(None if run.plan.in_parts else rows.data.n)
    try:
        computed = compute(run, rows)
        if computed.refusal is not None:
            refuse(run, computed.refusal)
        return stage_and_commit(run, rows, computed)
    finally:
        _RUN_ROWS.reset(token)


def already_published(run: ReleaseRun) -> str | None:
    """The release this flow run (a retry) or this scheduled slot published already, unless
    new_release asks for another."""
    series, origin = run.plan.series, run.origin
    done = run.store.published_for(series, run.run_id, origin["deployment"], origin["scheduled_for"])
    if done and not run.options.new_release:
        progress(
            f"already published as {done} by this run or for this scheduled slot: nothing to do "
            "(new_release=true publishes another)"
        )
        run.log(done, "already-published", {})
        return done
    if done:
        progress(f"a release ({done}) exists for this run or slot; new_release=true asks for another")
    progress(
        f"series '{series}', technique '{run.technique.name}', seed {run.seed}, "
        f"started by {run.who} ({origin['trigger']})"
    )
    return None


def read_and_check(run: ReleaseRun) -> RowsRead | str:
    """The input's rows, then what they decide before any computing: [risk] population against
    the input's people, a release of the same key (returned: its id), a repeat of the series'
    last release and "@row" in a series (refused, with their audit rows)."""
    spec = run.spec
    fp, data = read_rows(run.driver, spec, run.technique, run.executor, run.plan.in_parts)
    if isinstance(data, Microdata) and spec.evaluate.target is not None:  # never enters the release
        data = hold_out_step(data, run.seed)  # (a target with rows in parts is refused by the spec)
    run.plan.risk.check_population(data.people)  # [risk] population below the input's people: refused now
    key = release_key(spec, fp, run.seed)
    existing = run.store.find_by_key(key)
    if existing:
        progress(f"already published as {existing} (same input, parameters and seed): nothing to do")
        reason = "same series, input, parameters and seed as an existing release"
        run.log(existing, "recognised", {"reason": reason})
        return existing
    if not run.options.allow_repeat:
        refuse_repeat(run.store, spec, run.technique, fp, run.who, run.run_id, run.origin)
    refuse_row_ids_in_a_series(run.store, spec, run.who, run.run_id, run.origin)
    figures, spends = refuse_over_budget(run)
    # the composition check reads the summaries it combines: another release of the series
    # committed meanwhile would make them stale, so the commit checks the sequence
    return RowsRead(fp, data, key, run.store.last_sequence(spec.dataset.name), tuple(figures), tuple(spends))


def refuse_over_budget(run: ReleaseRun) -> tuple[list[PrivacyResult], list]:
    """The series' privacy-budget ledger (docs/dp.md): a DP release that would take the series
    above its budget, or a release mixing DP and syntactic releases in one series, refused with
    its audit row before any work; else the ledger figures this release records, and the ledger
    read (the report shows it). The series lock is held until the commit, so the ledger read here
    is still the series' then."""
    series = run.plan.series
    releases = run.store.ledger(series).get(series, [])
    message, figures = ledger_check(run.spec, run.technique, releases)
    if message is not None:
        run.log(series, "refused", refusal_detail(message, {"reason": "privacy budget"}))
        raise PrivacyRefused(message)
    return figures, releases


def compute(run: ReleaseRun, rows: RowsRead) -> Computed:
    """The series check prepared on the rows, then `compute_release`."""
    run.series_check.prepare(run.store, rows.data)
    if run.series_check.history_missing(rows.based_on):
        progress(f"series composition: {run.series_check.not_applied(rows.based_on)}")
    computed = compute_release(
        run.driver,
        run.spec,
        run.technique,
        rows.data,
        run.store,
        run.series_check,
        run.plan.risk,
        run.seed,
        run.options.context,
        run.executor,
        on_release=None if run.plan.in_parts else partial(start_staging, run),
        utility_later=True,  # the commit writes what needs no figure while the evaluation ends
    )
    # the ledger's figures beside the technique's own (a DP technique may record its epsilon itself)
    own = {r.model for r in computed.privacy}
    computed.privacy = computed.privacy + [r for r in rows.ledger if r.model not in own]
    return computed


def start_staging(run: ReleaseRun, release: Release) -> None:
    """The published files written beside the checks and the evaluation (they read the same
    tables, which nothing changes); a release refused discards them (ReleaseRun.beside)."""
    run.beside.start("stage-files", run.driver.beside("stage-files", stage_step, run.spec.output_dir, release.tables))


def refuse(run: ReleaseRun, refusal: Refusal) -> None:
    """A refused release: its audit row with the figures that refused it, nothing written."""
    run.log(run.plan.series, "refused", refusal_detail(refusal.message, refusal.detail))
    run.series_check.discard()
    raise PrivacyRefused(refusal.message)


def release_meta(run: ReleaseRun, rows: RowsRead, computed: Computed, staged: StagedFiles) -> dict[str, Any]:
    """What the report and the summary say of the release (the commit adds its id and sequence)."""
    spec, technique = run.spec, run.technique
    return {
        "series": spec.dataset.name,
        "technique": technique.name,
        "parameters": spec.technique.params,
        # a DP release's noise is drawn from its seed: its report does not show it (state/chain.py)
        "seed": run.seed if technique.privacy_spend() is None else "withheld (differential privacy)",
        "rows_in": rows.data.n,
        "person_id": spec.dataset.person_id,  # the column's name (the report says when it is @row)
        "actor": run.who,
        "flow_run_id": run.run_id,
        "input_fingerprint": rows.fp,
        "spec_path": run.plan.spec_path,
        "risk": computed.risk,
        "riskiest": computed.riskiest,
        "attribute": computed.attribute,
        "risk_note": technique.capabilities.risk_note,
        # the report's words in the technique's own terms (its describe hook: the report imports no technique)
        "technique_words": asdict(technique.describe(computed.privacy, spec.dataset.sensitive or "sensitive")),
        **report_verdict.spec_facts(spec),  # quasi_identifiers, sensitive, input_name: the report's verdict
        **run.origin,
        "hashes": {meta_["file"]: meta_["sha256"] for meta_ in staged.files.values()},
        "people_in": computed.release.private.get(PEOPLE_IN),  # rows_per_person = "many": the input's people
    }


def report_writer(
    run: ReleaseRun, rows: RowsRead, computed: Computed, staged: StagedFiles, meta: dict[str, Any]
) -> Callable[[str, int, Path], None]:
    """The commit's `before_commit`: the report written into the staged folder inside the commit,
    once the id is known (a committed release always has its report). The series' earlier
    figures and budget ledger are those of the releases before `rows.based_on` (the series lock
    is held since they were read, and the commit refuses if another release landed): a series'
    first release reads none."""
    privacy = computed.privacy
    sizes = run.technique.group_sizes(computed.release)
    names = [r.model for r in privacy] + SERIES_FIGURES
    earlier = run.store.series_figures(run.plan.series, names) if rows.based_on else None
    spends = list(rows.spends)  # the report's budget ledger
    output_dir = run.spec.output_dir

    def write_report(release_id: str, sequence: int, folder: Path) -> None:
        failpoint("report")
        utility = computed.utility or {}  # evaluated by now (the commit takes its figures first)
        assert isinstance(utility, dict)
        final = output_dir.resolve() / release_id
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
        meta["ledger"] = ledger_with(run.plan.series, spends, release_id, sequence, privacy)
        meta["series_figures"] = (
            pd.concat([earlier, pd.DataFrame(this)], ignore_index=True)
            if earlier is not None and len(earlier)
            else pd.DataFrame(this)
        )
        t0 = time.perf_counter()
        report_mod.write_html_report(inside(folder, "report.html"), meta, privacy, utility, sizes)
        progress(f"report done in {time.perf_counter() - t0:.2f} s")

    return write_report


def commit_arguments(run: ReleaseRun, rows: RowsRead, computed: Computed, staged: StagedFiles) -> dict[str, Any]:
    """Store.commit_release's arguments for this release."""
    spec, release = run.spec, computed.release
    return dict(
        staged=staged,
        series=spec.dataset.name,
        technique=run.technique.name,
        parameters=spec.technique.params,
        spec=spec.model_dump(),
        seed=run.seed,
        input_fingerprint=rows.fp,
        release_key=rows.key,
        rows_in=rows.data.n,
        privacy=computed.privacy,
        utility=computed.utility,
        risk=computed.risk,
        private=release.private,
        info=release.info,
        actor=run.who,
        flow_run_id=run.run_id,
        started_at=run.started,
        attribution={**run.origin, "new_release": run.options.new_release},
        based_on_sequence=rows.based_on,
    )


def evaluated(computed: Computed, evaluating: Future, staged: StagedFiles) -> dict[str, Any]:
    """Inside the commit, once what needs no figure is written: the evaluation's figures (waited
    for); its error discards the staged files and rolls the commit back."""
    try:
        utility: dict[str, Any] = evaluating.result()
    except BaseException:
        staged.discard()
        raise
    computed.utility = utility
    return utility


def stage_and_commit(run: ReleaseRun, rows: RowsRead, computed: Computed) -> dict[str, Any]:
    """The published files staged, then one commit (the report written inside it); the release id
    announced (`on_commit`) before the run's bookkeeping (`Driver.after_commit`)."""
    release, privacy = computed.release, computed.privacy
    assert computed.utility is not None  # not refused: every verifier passed, so the release was evaluated
    evaluating = computed.utility if isinstance(computed.utility, Future) else None
    try:
        if run.beside.started("stage-files"):  # started as soon as the release was made
            staged = run.beside.take("stage-files")
        else:
            staged = run.driver.run("stage-files", stage_step, run.spec.output_dir, release.tables)
    except BaseException:
        settle(evaluating)
        raise
    # before the commit reads release.private: a hook may move state out of it into its own tables
    hooks = chain_hooks(run.technique.commit_hook(release), run.series_check.commit_hook())
    meta = release_meta(run, rows, computed, staged)
    arguments = commit_arguments(run, rows, computed, staged)
    if evaluating is not None:  # the commit writes the summaries while the evaluation ends beside
        arguments["utility"] = partial(evaluated, computed, evaluating, staged)
    arguments.update(on_commit=hooks, before_commit=report_writer(run, rows, computed, staged, meta))
    t_commit = time.perf_counter()
    try:
        release_id, created = run.driver.run("commit", commit_step, run.store, arguments)
    finally:
        settle(evaluating)  # a commit that failed before taking it: no thread outlives the run
        staged.release_owner()
        run.series_check.discard()  # written by the commit, or of no use after a failed one
    if isinstance(computed.utility, Future):  # recognised: the same release committed meanwhile
        computed.utility = computed.utility.result()
    utility = computed.utility
    assert isinstance(utility, dict)  # taken by the commit, or just above
    progress(f"commit done in {time.perf_counter() - t_commit:.2f} s (report included)")
    for announce in _ON_COMMIT.get():  # the CLI prints the id now, before the run's bookkeeping
        announce(release_id)
    failpoint("published")
    meta.setdefault("release_id", release_id)  # a recognised re-run wrote no report
    meta.setdefault("sequence", int(release_id.split("-")[-2]))
    out_dir = run.spec.output_dir.resolve() / release_id
    progress(f"committed release {release_id}: {out_dir}")
    meta["report"] = str(out_dir / "report.html")
    run.driver.after_commit(run.run_id, meta, privacy, utility)  # a failure there is a warning only
    return {
        **meta,
        "release_id": release_id,
        "created": created,
        "privacy": privacy,
        "utility": utility,
        "report": str(out_dir / "report.html"),
        "state": str(run.store.path),
        "output_dir": str(out_dir),
    }


def chain_hooks(*hooks):
    """One commit hook running the given ones (None skipped) in order, in the same transaction."""
    present = [h for h in hooks if h is not None]

    def run(con, release_id: str, sequence: int) -> None:
        for hook in present:
            hook(con, release_id, sequence)

    return run


def attempt(
    spec_path: str,
    overrides: dict | None,
    actor: str | None,
    new_release: bool = False,
    driver=None,
    allow_repeat: bool = False,
    plan: RunPlan | None = None,
) -> str:
    """One publish attempt: the release id. `plan`: the spec resolved and checked by the caller
    (else resolved here from spec_path and overrides). Every attempt leaves its audit row: a
    refusal is logged with its figures by the pipeline, any other failure here (then raised)."""
    committed: list[str] = []
    with on_commit(committed.append):
        try:
            plan = plan or plan_run(spec_path, overrides)
        except Exception as exc:
            record_failure(spec_path, overrides, actor, exc, public_message(exc))
            raise
        # a marker while the attempt runs: killed, it still leaves a row ("interrupted"); the
        # failure's row is written while it is held, so no kill point leaves none or two
        with attempt_marker(plan.state_path, actor, plan.series, {"spec": spec_path}):
            try:
                summary = run_release(
                    plan, actor=actor, new_release=new_release, driver=driver, allow_repeat=allow_repeat
                )
                return str(summary["release_id"])
            except Exception as exc:
                if committed:  # the release exists: what failed after it is a warning
                    progress(
                        f"warning: release {committed[-1]} is committed, but a step after the commit "
                        f"failed ({type(exc).__name__})"
                    )
                    return committed[-1]
                if not isinstance(exc, PrivacyRefused):  # a refusal was logged with its figures
                    record_failure(spec_path, overrides, actor, exc, public_message(exc))
                raise

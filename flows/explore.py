"""`privpub explore`: a dry run of a release over a grid of parameter settings (issue 29).

    privpub explore SPEC --set k=5,10,20 [--set l=2,3] [--seed N] [--json] [--html PATH]
    privpub.explore(SPEC, {"k": [5, 10, 20], "l": [2, 3]}) -> a pandas DataFrame

The grid is the cartesian product of the `--set` lists, in the order given. Every setting is
checked as strictly as a spec file (resolve_spec with the setting as overrides, the technique's
parameter model, [series], [risk]) before any work; a bad one refuses the whole grid with one
line naming the key and value. The input is then read and validated once, the evaluation
workload drawn and answered once, and each setting runs the pipeline's own computation
(pipeline.compute_release: partition, anonymize, verify, evaluate, series composition, risk) on
the same rows with the same seed, so its figures are those `privpub publish` with that setting
and seed records. Nothing is written but one audit row (action `explore`: `explored` with the
grid, or `refused` / `failed`) and the trade-off page (tasks/report/explore_page.py, beside the state
file unless --html says where): no release folder, no staging folder, no release rows or
figures, no series summaries. A setting that fails (k above the table, a privacy check or a
[risk] limit) is a row with passed = false and the reason. Where the series composition check
does not apply (`person_id = "@row"`: rows, not people; no earlier release, or none with stored
groups; a technique that checks its series itself) a row says so and why
(`series_composition_note`), never a composition failure; an "@row" spec in a series that has a
release already fails every setting with publish's own refusal (pipeline.row_ids_refusal).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, overload

import numpy as np
import pandas as pd

from privpub.flows import attempts
from privpub.flows.api import given_sections
from privpub.flows.attempts import current_actor, for_caller, record_failure
from privpub.flows.optimize import (
    STRATEGY,
    Choice,
    Optimum,
    check_applies,
    choose,
    direction,
    front_points,
    page_marks,
)
from privpub.flows.pipeline import (
    Driver,
    compute_release,
    draw_seed,
    hold_out_step,
    load_input_step,
    row_ids_refusal,
    using_driver,
    validate_step,
)
from privpub.flows.settings import MAX_SETTINGS, parse_value, parse_values, where  # noqa: F401  (parse_value: the tests')
from privpub.schemas.errors import InputError, PrivacyRefused, SpecError, public_message
from privpub.schemas.input import frame_input
from privpub.schemas.names import inside
from privpub.schemas.spec import ReleaseSpec, resolve_spec
from privpub.state.store import Store
from privpub.tasks.compose.check import SeriesCheck, series_settings
from privpub.tasks.core.technique import Technique
from privpub.tasks.evaluate import shared_workload
from privpub.tasks.report.explore_page import KEY_FIGURES, once, write_explore_page
from privpub.tasks.report.page import fmt
from privpub.tasks.risk import RiskSettings, risk_settings
from privpub.tasks.techniques.registry import get_technique

PARALLEL_SETTINGS = 2  # settings computed at once after the first (one per core here)

# --- the grid ------------------------------------------------------------------------------------


def parse_sets(items: Sequence[str]) -> dict[str, list[Any]]:
    """`--set NAME=v1,v2,...` options, in the order given, as {name: [values]}."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise SpecError(f"--set {item!r}: expected NAME=VALUE[,VALUE...], e.g. --set k=5,10,20")
        if name in grid:
            raise SpecError(f"--set {name}: given twice; list all its values in one --set")
        grid[name] = parse_values(name, values.strip())
    return grid


def settings_of(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of the grid, the first name varying slowest."""
    if not isinstance(grid, Mapping):
        raise SpecError(
            f'grid must be a dict of name -> list of values, e.g. {{"k": [5, 10]}}, not {type(grid).__name__}'
        )
    if not grid:
        raise SpecError(
            "explore needs at least one setting ("
            + for_caller("--set NAME=VALUE[,VALUE...]", 'a grid such as {"k": [5, 10]}')
            + ")"
        )
    for name, values in grid.items():
        where(name)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not len(values):
            raise SpecError(f"{name}: the grid needs a list of values, e.g. {{{name!r}: [5, 10]}}")
    names = list(grid)
    size = math.prod(len(grid[n]) for n in names)
    if size > MAX_SETTINGS:  # counted before any setting is made or checked
        raise SpecError(
            f"the grid has {size:,} settings, more than the {MAX_SETTINGS} one explore computes; "
            + for_caller("give fewer values or a larger range step", "give fewer values")
        )
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def overrides_of(setting: Mapping[str, Any], seed: int) -> dict[str, dict[str, Any]]:
    """The setting as resolve_spec overrides, with the run's seed."""
    out: dict[str, dict[str, Any]] = {"output": {"seed": seed}}
    for name, value in setting.items():
        section, key = where(name)
        out.setdefault(section, {})[key] = value
    return out


def setting_words(setting: Mapping[str, Any]) -> str:
    return " ".join(f"{name}={value}" for name, value in setting.items())


@dataclass
class Setting:
    values: dict[str, Any]  # as given: {"k": 10}, {"risk.threshold": 0.1}
    spec: ReleaseSpec
    technique: Technique
    risk: RiskSettings


def checked_settings(
    spec_path: str | None,
    spec: dict | None,
    grid: Mapping[str, Sequence[Any]],
    seed: int,
    base_dir: str | Path | None = None,
):
    """Every setting through the strict spec path, before any work; the first bad one refuses
    the grid with one line naming its key and value."""
    out = []
    for values in settings_of(grid):
        try:
            resolved = resolve_spec(spec_path, spec, overrides_of(values, seed), base_dir=base_dir)
            technique = get_technique(resolved)
            series_settings(resolved, technique)
            out.append(Setting(values, resolved, technique, risk_settings(resolved)))
        except SpecError as exc:
            raise SpecError(f"setting {setting_words(values)}: {public_message(exc)}") from None
    return out


# --- one row per setting -------------------------------------------------------------------------


@dataclass
class Row:
    setting: dict[str, Any]
    passed: bool
    figures: dict[str, Any] = field(default_factory=dict)
    series_composition: bool | None = None  # None: no figure (series_composition_note says why)
    reason: str | None = None
    series_composition_note: str | None = None  # "does not apply: <why>" when there is no figure
    seconds: float = 0.0
    privacy: list[str] = field(default_factory=list)  # which figures are privacy checks'

    def as_json(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "passed": self.passed,
            "figures": {name: json_value(v) for name, v in self.figures.items()},
            "series_composition": self.series_composition,
            "series_composition_note": self.series_composition_note,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
        }


def plain_value(value: Any) -> Any:
    """A figure as a Python value: numpy scalars unwrapped, anything else (a fraction) as stored."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def json_value(value: Any) -> Any:
    """A figure for JSON: numbers as numbers, non-finite as null, a fraction or text as text."""
    value = plain_value(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


def number(value: Any) -> float | None:
    """A figure as release_metrics' `value` column reads it (a fraction's quotient; text: None)."""
    try:
        return float(Fraction(str(value))) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        return None


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Explored:
    rows: list[Row]
    seed: int
    seed_drawn: bool
    page: Path | None
    series: str
    choice: Choice | None = None  # with --optimize: the best passing setting and the front


def run_explore(
    spec_path: str | None,
    grid: Mapping[str, Sequence[Any]],
    *,
    spec: dict | None = None,
    seed: int | None = None,
    actor: str | None = None,
    html: str | Path | None = None,
    echo: Callable[[str], None] | None = None,
    on_row: Callable[[Row], None] | None = None,
    base_dir: str | Path | None = None,
    optimize: str | None = None,
) -> Explored:
    """The dry run: every setting checked, the input read once, one row per setting (on_row
    called as each is done), the page written, one audit row. Raises SpecError for a bad
    setting (audit row `refused`) and what reading the input raises (`failed`). A spec dict's
    relative paths start from `base_dir` (default: the current folder). `optimize`: a utility
    figure; the best passing setting by it and the Pareto front are chosen (flows/optimize.py)."""
    detail: dict[str, Any] = {"grid": {name: _logged(values) for name, values in grid.items()}}
    if optimize is not None:
        detail["optimize"] = optimize
    base = None
    try:
        base = resolve_spec(spec_path, spec, None, base_dir=base_dir)
        if optimize is not None:
            direction(optimize)  # an unknown figure, or one with no better direction: before any work
        drawn = seed is None and base.output.seed is None
        seed = seed if seed is not None else base.output.seed if base.output.seed is not None else draw_seed()
        settings = checked_settings(spec_path, spec, grid, seed, base_dir)
        first = settings[0].spec
        # any spec asking for the cluster, whatever its input (docs/cli.md: refused)
        if any(s.spec.run.task_runner == "dask" for s in settings):
            raise SpecError(
                '[run] task_runner = "dask": explore runs in this process; explore with task_runner = '
                '"inprocess" (the figures are the same)'
            )
        if html is not None:  # the page's place, checked before any work
            _check_page(Path(html))
        store = Store(first.state_path, makes_key=False)  # explore writes no key (docs/cli.md)
        store.check_usable()
    except Exception as exc:
        _record(spec_path, base, actor, exc, "refused" if isinstance(exc, SpecError) else "failed", detail)
        raise
    who = current_actor(actor)
    say = echo or (lambda _: None)
    if drawn:
        again = for_caller(f"--seed {seed}", f'overrides={{"output": {{"seed": {seed}}}}}')
        say(f"seed {seed} drawn (publish with {again} to reproduce a setting's release)")
    driver = Driver(None)  # the steps' own lines stay quiet: one line per setting instead
    try:
        with using_driver(driver), driver.make_executor(first.run) as executor:
            rows = explore_settings(driver, settings, store, seed, executor, say, _checking(optimize, first, on_row))
        choice = choose(rows, optimize) if optimize is not None else None
        page = Path(html) if html else inside(first.state_path.parent, f"explore-{first.dataset.name}.html")
        marks = page_marks(rows, choice) if choice is not None else None
        write_explore_page(page, first.dataset.name, seed, [r.as_json() for r in rows], marks)
    except Exception as exc:
        outcome = "refused" if isinstance(exc, SpecError) else "failed"  # --optimize of a figure that does not apply
        _record(spec_path, base, actor, exc, outcome, {**detail, "seed": seed})
        raise
    if choice is not None:
        detail["chosen"] = None if choice.best is None else rows[choice.best].setting
    passed = sum(r.passed for r in rows)
    store.log(
        who,
        "explore",
        first.dataset.name,
        "explored",
        None,
        {**detail, "seed": seed, "settings": len(rows), "passed": passed, "page": str(page), **attempts.attribution()},
    )
    return Explored(rows, seed, drawn, page, first.dataset.name, choice)


def _checking(
    optimize: str | None, first: ReleaseSpec, on_row: Callable[[Row], None] | None
) -> Callable[[Row], None] | None:
    """on_row, after refusing the grid at the first computed setting whose figures lack the
    figure optimized (it does not apply to the technique: one line, the rest not computed)."""
    if optimize is None:
        return on_row

    def check(row: Row) -> None:
        check_applies(optimize, row.figures, first.technique.name)
        if on_row is not None:
            on_row(row)

    return check


def _logged(values: Any) -> Any:
    """A grid's values as the audit row holds them: the list, or how many when above the bound
    (a Python range of a billion values is refused by settings_of, never listed)."""
    if isinstance(values, Sequence) and not isinstance(values, (str, bytes)) and len(values) > MAX_SETTINGS:
        return f"{len(values):,} values"
    return list(values) if isinstance(values, Sequence) and not isinstance(values, (str, bytes)) else values


def _check_page(page: Path) -> None:
    """--html names a file, not a folder (its folder is made when the page is written)."""
    if page.is_dir():
        raise SpecError(f"--html {page} is a directory; name the page's file")


def _record(
    spec_path: str | None, base: ReleaseSpec | None, actor: str | None, exc: BaseException, outcome: str, detail: dict
) -> None:
    """The audit row of an explore refused or failed, in the state file the spec names."""
    if spec_path:  # read as publish's failures are, even when the spec itself is bad
        record_failure(spec_path, None, actor, exc, public_message(exc), "explore", outcome, detail)
    elif base is not None:  # a spec given as a dict: its state file, if it got that far
        message = {"error": type(exc).__name__, "message": public_message(exc), **detail}
        Store(base.state_path).log_attempt(current_actor(actor), "explore", base.dataset.name, outcome, None, message)


def explore_settings(
    driver: Driver, settings: list[Setting], store: Store, seed: int, executor, say, on_row=None
) -> list[Row]:
    """The input read and validated once, the workload drawn once, then each setting computed."""
    first = settings[0]
    t0 = time.perf_counter()
    frame, _ = driver.run("load-input", load_input_step, first.spec)
    data = driver.run("validate", validate_step, frame, first.spec, None)  # each technique's check below
    del frame
    if first.spec.evaluate.target is not None:  # held out as publish holds them out (same seed, same people)
        data = hold_out_step(data, seed)
    shared = shared_workload(data, first.spec.evaluate.workload_seed)
    people = f" of {data.people} people" if data.person is not None else ""  # rows_per_person = "many"
    say(
        f"{data.n} valid rows{people} read and validated, workload drawn, in {time.perf_counter() - t0:.2f} s; "
        f"{len(settings)} settings, seed {seed}"
    )
    rows: list[Row] = []
    prepared: list[SeriesCheck] = []  # the first series check prepared: the others take what it read
    input_risk: dict = {}  # the input's risk figures, computed once (pipeline.risk_step)
    # the series as publish finds it (a setting varies neither the series nor the person id)
    series = Series(store.last_sequence(first.spec.dataset.name), row_ids_refusal(store, first.spec))

    def one(setting: Setting) -> Row:
        t0 = time.perf_counter()
        row = explore_one(driver, setting, data, store, seed, executor, shared, prepared, input_risk, series)
        row.seconds = time.perf_counter() - t0
        return row

    def done(i: int, row: Row) -> None:
        verdict = "passes" if row.passed else f"fails: {row.reason}"
        say(f"setting {i}/{len(settings)} {setting_words(row.setting)}: {verdict} ({row.seconds:.2f} s)")
        rows.append(row)
        if on_row is not None:
            on_row(row)

    # The first setting alone (it reads the series' summaries and the input's risk for all),
    # then two at a time: a setting's work is numpy and Arrow that mostly runs without the GIL,
    # and each has its own generator from the seed, so the rows are those of one at a time.
    done(1, one(settings[0]))
    with ThreadPoolExecutor(max_workers=PARALLEL_SETTINGS) as pool:
        futures = [pool.submit(contextvars.copy_context().run, one, s) for s in settings[1:]]
        try:
            for i, future in enumerate(futures, start=2):
                done(i, future.result())
        except BaseException:  # a refusal (--optimize of a figure a row lacks): the rest not computed
            pool.shutdown(cancel_futures=True)
            raise
    return rows


@dataclass(frozen=True)
class Series:
    """What publish checks of the series before it computes a release."""

    earlier: int  # its releases so far
    refusal: str | None  # why publish refuses any release of the spec in it ("@row" after a release)


def explore_one(
    driver: Driver,
    setting: Setting,
    data,
    store: Store,
    seed: int,
    executor,
    shared,
    prepared: list[SeriesCheck],
    input_risk: dict,
    series: Series,
) -> Row:
    """One setting's release computed and checked as publish would, nothing written."""
    technique, spec = setting.technique, setting.spec
    series_check = SeriesCheck(spec, technique)
    series_check.commits = False
    try:
        technique.check_data(data)
        setting.risk.check_population(data.people)
        if not (prepared and series_check.share_prepared(prepared[0])):
            series_check.prepare(store, data)  # reads this input's people's summaries, writes nothing
            prepared[:] = [series_check]
        done = compute_release(
            driver, spec, technique, data, store, series_check, setting.risk, seed, None, executor, shared, input_risk
        )
    except ValueError as exc:  # the data cannot meet the parameters (Technique.check_data)
        return Row(setting.values, False, reason=str(exc))
    except (InputError, PrivacyRefused, SpecError) as exc:
        return Row(setting.values, False, reason=public_message(exc))
    finally:
        series_check.discard()
    figures: dict[str, Any] = {r.model: plain_value(r.value) for r in done.privacy}
    assert not isinstance(done.utility, Future)  # explore computes without utility_later
    figures.update({name: plain_value(v) for name, v in (done.utility or {}).items()})
    figures.update({name: plain_value(v) for name, v in (done.risk or {}).items()})
    composed = [r.passed for r in done.privacy if r.model == series_check.model]
    why = None if composed else series_check.not_applied(series.earlier)
    # publish refuses an "@row" release in a series before computing it: so does every setting
    reasons = [m for m in (series.refusal, done.refusal and done.refusal.message) if m]
    return Row(
        setting.values,
        not reasons,
        figures,
        bool(composed[0]) if composed else None,
        "; and: ".join(reasons) or None,
        privacy=[r.model for r in done.privacy],
        series_composition_note=None if why is None else f"does not apply: {why}",
    )


# --- the Python API ------------------------------------------------------------------------------


@overload
def explore(
    data: pd.DataFrame | str | Path | dict | None = None,
    spec: dict | str | Path | ReleaseSpec | Mapping[str, Sequence[Any]] | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    state: str | Path | None = None,
    seed: int | None = None,
    actor: str | None = None,
    html: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    optimize: None = None,
) -> pd.DataFrame: ...


@overload
def explore(
    data: pd.DataFrame | str | Path | dict | None = None,
    spec: dict | str | Path | ReleaseSpec | Mapping[str, Sequence[Any]] | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    state: str | Path | None = None,
    seed: int | None = None,
    actor: str | None = None,
    html: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    optimize: str,
) -> Optimum: ...


def explore(
    data: pd.DataFrame | str | Path | dict | None = None,
    spec: dict | str | Path | ReleaseSpec | Mapping[str, Sequence[Any]] | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    state: str | Path | None = None,
    seed: int | None = None,
    actor: str | None = None,
    html: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    optimize: str | None = None,
) -> pd.DataFrame | Optimum:
    """Try several parameter settings on the data without publishing anything: for each setting,
    the figures a release with it would have (privacy checks, utility, risk) and whether it
    would be published.

    Parameters
    ----------
    data : a pandas DataFrame, or an input file's path; it replaces the spec's
        ``[dataset] input`` (leave it out to read the spec's own input).
    spec : a dict of the spec's sections (no ``input`` needed when ``data`` is given), a TOML
        file's path, or a ``privpub.ReleaseSpec``.
    grid : ``{name: [values]}``; a name is a ``[technique]`` key (``"k"``), or ``"series.KEY"``
        / ``"risk.KEY"``. The settings are every combination, the first name varying slowest.
    state : the state file to read the series' history from, instead of ``[output] state``.
    seed : every setting's seed (default: the spec's ``[output] seed``, else one drawn).
    actor : who explores, for the audit log. html : where the trade-off page goes (default
        ``explore-<series>.html`` beside the state file). progress : called with one line per
        setting (e.g. ``print``).
    optimize : a utility figure (``"gen-iloss"``, ``"precision"``, ...): choose the best setting
        that passes every check and ``[risk]`` limit by it (lower or higher is better, as the
        figure says; ties: the lower risk, then the first in the grid), by exhaustive search of
        the grid (a range: ``{"k": range(5, 51)}``), with the Pareto front of the figure
        against the worst re-identification risk (docs/utility.md).

    Returns
    -------
    pandas.DataFrame : one row per setting: the setting's names, ``passed``, ``reason`` (why it
    would be refused), ``series_composition`` and ``series_composition_note``, one column per
    figure (named as ``release.figures`` names them) and ``seconds``. ``.attrs["seed"]`` is the
    seed; publishing a row's setting with that seed (``privpub.publish(..., set={"k": 20},
    overrides={"output": {"seed": seed}})``) gives exactly the figures shown.
    With ``optimize``: an ``Optimum`` (``.setting``, ``.figures``, ``.front``, ``.rows`` the
    DataFrame above, ``.seed``; ``.setting`` is None when no setting passes).

    Raises
    ------
    SpecError : the spec or a setting is refused (before any work; the message names it); an
        ``optimize`` figure unknown, with no better direction, or that does not apply to the
        technique (refused at the first setting computed).
    InputError : the data is refused. A setting that fails a check is a row, not an error.

    Nothing is published or stored but one audit row and the page.
    ``privpub.explore("spec.toml", grid)`` and ``privpub.explore(spec_dict, grid)`` (the spec,
    then the grid) still work.

    Example
    -------
    >>> rows = privpub.explore(frame, spec, {"k": [5, 10, 20]})
    >>> rows[["k", "passed", "k-anonymity", "query-error-1pct"]]
    >>> best = privpub.explore(frame, spec, {"k": range(5, 21)}, optimize="gen-iloss")
    >>> privpub.publish(frame, spec, set=best.setting, overrides={"output": {"seed": best.seed}})
    """
    data, spec, grid = _explore_arguments(data, spec, grid)
    options = {"seed": seed, "actor": actor, "html": html, "echo": progress, "optimize": optimize}
    done = _explore_given(data, spec, grid, state, options)
    frame_out = _settings_frame(done)
    return frame_out if done.choice is None else _optimum(done, done.choice, frame_out)


def _explore_given(data: Any, spec: Any, grid: Mapping[str, Sequence[Any]], state: Any, options: dict) -> Explored:
    """run_explore on Python's arguments: a spec file alone by its path (refusals recorded as the
    CLI's are), else the sections with the data as the input."""
    if data is None and state is None and isinstance(spec, (str, os.PathLike)):
        return run_explore(str(spec), grid, **options)
    sections, base_dir, frame = given_sections(data, spec, state, caller="privpub.explore")
    with frame_input(frame) if frame is not None else contextlib.nullcontext():
        return run_explore(None, grid, spec=sections, base_dir=base_dir, **options)


def _optimum(done: Explored, choice: Choice, rows: pd.DataFrame) -> Optimum:
    best = None if choice.best is None else done.rows[choice.best]
    return Optimum(
        figure=choice.figure,
        better=choice.better,
        setting=None if best is None else dict(best.setting),
        figures={} if best is None else dict(best.figures),
        risk_figure=choice.risk_figure,
        front=front_points(done.rows, choice),
        rows=rows,
        seed=done.seed,
        strategy=STRATEGY,
        settings=len(done.rows),
        passed=choice.passed,
    )


def _explore_arguments(data: Any, spec: Any, grid: Any) -> tuple[Any, Any, Mapping[str, Sequence[Any]]]:
    """(data, spec, grid) of any of explore's call forms; a missing or non-dict grid refused."""
    if grid is None and spec is not None and data is not None and not isinstance(data, pd.DataFrame):
        # explore(spec, grid): the form before `data`
        data, spec, grid = None, data, spec
    if spec is None and data is not None and not isinstance(data, pd.DataFrame):  # explore(spec, grid=...)
        data, spec = None, data
    if grid is None or not isinstance(grid, Mapping):
        raise SpecError(
            'privpub.explore needs a grid: a dict of name -> list of values, e.g. {"k": [5, 10]}'
            + ("" if grid is None else f", not {type(grid).__name__}")
        )
    return data, spec, grid


def _settings_frame(done: Any) -> pd.DataFrame:
    """One row per setting: its names, the verdict, every figure and the seconds it took."""
    records = [
        {
            **r.setting,
            "passed": r.passed,
            "series_composition": r.series_composition,
            "series_composition_note": r.series_composition_note,
            "reason": r.reason,
            **r.figures,
            "seconds": r.seconds,
        }
        for r in done.rows
    ]
    frame_out = pd.DataFrame.from_records(records)
    frame_out.attrs.update(seed=done.seed, page=str(done.page))
    return frame_out


# --- the command's output ----------------------------------------------------------------------


def json_lines(done: Explored) -> list[str]:
    return [json.dumps({**r.as_json(), "seed": done.seed}, allow_nan=False) for r in done.rows]


def table_lines(done: Explored) -> list[str]:
    """One line per setting: the setting, PASS / FAIL, the privacy figures, the key utility and
    risk figures, the seconds; then why each failing setting would be refused."""
    privacy = list(dict.fromkeys(n for r in done.rows for n in r.privacy))
    optimized = [done.choice.figure] if done.choice is not None and done.choice.figure not in KEY_FIGURES else []
    shown = [n for n in (*optimized, *KEY_FIGURES) if any(n in r.figures for r in done.rows)]
    head = ["setting", "result", *privacy, *shown, "seconds"]
    cells = [head]
    for r in done.rows:
        figs = [fmt(r.figures[n]) if n in r.figures else "-" for n in (*privacy, *shown)]
        cells.append([setting_words(r.setting), "PASS" if r.passed else "FAIL", *figs, f"{r.seconds:.2f}"])
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in cells
    ]
    rows = [r.as_json() for r in done.rows]
    lines += once(rows, "reason")  # a reason every setting shares (publish's "@row" refusal) once
    lines += once(rows, "series_composition_note", "series composition ")
    lines.append(f"seed {done.seed}; nothing published; page: {done.page}")
    return lines

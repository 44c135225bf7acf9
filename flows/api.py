"""The Python API: `privpub.publish` (`publish_data` here), `privpub.verify`,
`privpub.change_series` (the CLI's `verify` and `series change` print what these return;
`privpub.history` and `privpub.snapshot` are flows/records.py, light for `privpub history`).

    release = privpub.publish(frame, {"dataset": {...}, "technique": {...}}, state="privpub.duckdb")
    release.tables["table"]; release.figures; release.report
    privpub.history("privpub.duckdb"); privpub.verify(release.id, "privpub.duckdb")
    privpub.change_series("spec.toml")   # the series' [series] settings become the spec's

A publish resolves its spec once (`publish_plan`: one `resolve_spec`, then flows/pipeline.py
`plan_from_spec`) and runs with that plan, in this process or as a flow run of a configured
Prefect server (flows/run.py chooses; Prefect is imported only then).
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from privpub.flows import run
from privpub.flows.attempts import current_actor, record_failure
from privpub.flows.history_check import Check, check_line, verify_history
from privpub.flows.lazy import load_lazily
from privpub.flows.pipeline import Driver, RunPlan, attempt, plan_from_spec, plan_run
from privpub.flows.published_release import PublishedRelease
from privpub.flows.records import DEFAULT_STATE, snapshot, state_file  # noqa: F401  (the API's names; history: privpub.history)
from privpub.flows.reverify import reverify_checks
from privpub.flows.settings import as_overrides, checked_set, set_refusal
from privpub.schemas.errors import SpecError, StateError, public_message
from privpub.schemas.input import frame_input
from privpub.schemas.spec import FRAME_INPUT, ReleaseSpec, read_spec_file, resolve_spec
from privpub.state.store import Store
from privpub.tasks.compose.change import SeriesChange, rebuild_series
from privpub.tasks.compose.check import series_settings
from privpub.tasks.techniques.registry import get_technique


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def _absolute(path: str | os.PathLike) -> str:
    """A path as an absolute one, from the current folder; links and globs are left as they are."""
    return os.path.abspath(os.path.expanduser(path))


def _sections(spec: Any) -> tuple[dict[str, Any], Path]:
    """(the spec's sections as written, the folder its relative paths start from): a dict's
    from the current folder, a spec file's from the file's folder, a ReleaseSpec's from its own."""
    if isinstance(spec, ReleaseSpec):
        return spec.model_dump(exclude={"base_dir"}), Path(spec.base_dir)
    if isinstance(spec, dict):
        return copy.deepcopy(spec), Path.cwd()  # the caller's dict stays as it was
    if _is_path(spec):
        return read_spec_file(spec), Path(spec).resolve().parent
    raise SpecError(
        "spec must be a dict of sections ({'dataset': {...}, 'technique': {...}, 'output': {...}}), "
        f"a TOML file's path or a ReleaseSpec, not {type(spec).__name__}"
    )


def _merge_section(sections: dict[str, Any], section: str, values: dict[str, Any]) -> None:
    given = sections.get(section, {})
    if not isinstance(given, dict):
        raise SpecError(f"[{section}] must be a table of keys")
    sections[section] = {**given, **values}


def absolute_spec(spec: ReleaseSpec) -> dict[str, Any]:
    """The spec's sections with every path made absolute, so that they mean the same whichever
    folder reads them (a flow run, the stored spec)."""
    data = spec.model_dump(exclude={"base_dir"})
    ds, out = data["dataset"], data["output"]
    for key in ("input", "registration"):
        if ds.get(key) and ds[key] != FRAME_INPUT:
            ds[key] = _absolute(spec.path(ds[key]))
    if ds.get("table"):
        db, sep, table = ds["table"].rpartition(":")
        ds["table"] = f"{_absolute(spec.path(db))}{sep}{table}" if db else ds["table"]
    out["dir"], out["state"] = _absolute(spec.output_dir), _absolute(spec.state_path)
    return data


def with_absolute_paths(spec: ReleaseSpec, sections: dict[str, Any]) -> ReleaseSpec:
    """`spec` with the paths of `sections` (its absolute_spec) and the current folder as its base:
    the spec a flow run resolves from those sections, without checking it again."""
    dataset = {k: sections["dataset"][k] for k in ("input", "registration", "table")}
    output = {k: sections["output"][k] for k in ("dir", "state")}
    return spec.model_copy(
        update={
            "dataset": spec.dataset.model_copy(update=dataset),
            "output": spec.output.model_copy(update=output),
            "base_dir": str(Path.cwd()),
        }
    )


def given_sections(
    data: Any, spec: Any, state: Any, overrides: dict | None = None, caller: str = "privpub.publish"
) -> tuple[dict[str, Any], Path, pd.DataFrame | None]:
    """(the spec's sections with `data`, `state` and `overrides` merged in, the folder its
    relative paths start from, the DataFrame input if any), not yet checked. `data` (a DataFrame
    or an input file's path) replaces [dataset] input (and table); `state` replaces [output]
    state; both are read from the current folder."""
    if spec is None:
        raise SpecError(f"{caller} needs a spec: a dict of sections, a TOML file's path or a ReleaseSpec")
    sections, base_dir = _sections(spec)
    for section, values in (overrides or {}).items():
        if not isinstance(values, dict):
            raise SpecError(f'overrides: [{section}] must be a table of keys, e.g. {{"technique": {{"k": 20}}}}')
        _merge_section(sections, section, values)
    frame = None
    if isinstance(data, pd.DataFrame):
        frame = data
        _merge_section(sections, "dataset", {"input": FRAME_INPUT})
    elif _is_path(data):
        _merge_section(sections, "dataset", {"input": _absolute(data)})
    elif data is not None:
        raise SpecError(f"data must be a pandas DataFrame or an input file's path, not {type(data).__name__}")
    if data is not None:
        sections["dataset"].pop("table", None)  # the data given is the input
    if state is not None:
        _merge_section(sections, "output", {"state": _absolute(state)})
    return sections, base_dir, frame


def release_spec(
    data: Any = None, spec: Any = None, state: Any = None, overrides: dict | None = None
) -> tuple[ReleaseSpec, pd.DataFrame | None]:
    """The spec `publish_data` runs, resolved and checked once (SpecError before any work), and
    the DataFrame input if any (`given_sections`)."""
    sections, base_dir, frame = given_sections(data, spec, state, overrides)
    return resolve_spec(None, sections, None, base_dir=base_dir), frame


def publish_plan(data: Any, spec: Any, state: Any, overrides: dict | None) -> tuple[RunPlan, pd.DataFrame | None]:
    """The plan `publish_data` runs (the spec resolved once) and its DataFrame input, if any."""
    if spec is None and _is_path(data):  # one path: the spec file, as always
        spec, data = data, None
    if _is_path(spec) and data is None:  # the spec file itself (its path is logged)
        if state is not None:
            overrides = {
                **(overrides or {}),
                "output": {**(overrides or {}).get("output", {}), "state": _absolute(state)},
            }
        return plan_run(str(spec), overrides), None
    checked, frame = release_spec(data, spec, state, overrides)
    sections = absolute_spec(checked)  # a flow run's parameters: paths that mean the same anywhere
    return plan_from_spec(with_absolute_paths(checked, sections), "", sections), frame


def record_refusal(data: Any, spec: Any, state: Any, overrides: Any, actor: str | None, exc: Exception) -> None:
    """The audit row of a publish whose spec was refused, where the spec would have logged it:
    a spec file's as the CLI writes it (attempts.record_failure); a dict's or ReleaseSpec's in
    its [output] state (or `state`), from the folder its paths start from, naming its series."""
    message = public_message(exc)
    given = dict(overrides) if isinstance(overrides, dict) else {}
    if state is not None and _is_path(state):
        output = given.get("output")
        given["output"] = {**(output if isinstance(output, dict) else {}), "state": _absolute(state)}
    if spec is None and _is_path(data):
        spec = data
    if _is_path(spec):
        record_failure(str(spec), given, actor, exc, message)
        return
    try:
        sections, base = _sections(spec)
    except Exception:
        sections, base = {}, Path.cwd()
    dataset, output = sections.get("dataset"), {**_table(sections.get("output")), **_table(given.get("output"))}
    where = Path(str(output.get("state") or DEFAULT_STATE)).expanduser()
    named = {
        "dataset": {"name": _table(dataset).get("name")},
        "output": {"state": str(where if where.is_absolute() else Path(base).resolve() / where)},
    }
    record_failure("", named, actor, exc, message, detail={"spec": f"<{type(spec).__name__}>"})


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def publish_release(
    plan: RunPlan,
    actor: str | None = None,
    progress: Callable[[str], None] | None = None,
    allow_repeat: bool = False,
    frame: pd.DataFrame | None = None,
) -> str:
    """Publish the plan's release; returns its id.

    In this process, server or not (issue 42); with `[run] server = true` recorded as a flow run
    of the configured or running Prefect server (flows/recorded.py). The release is the same
    either way. `progress`
    receives one line per step (e.g. `print`; None: silent). `frame`: the input rows, for a spec
    whose [dataset] input is "<DataFrame>"; such a release always runs in this process (a flow
    run's parameters and task inputs are the server's to keep, and rows must never get there).
    Raises SpecError, InputError, PrivacyRefused, ... with a one-line message; every attempt
    leaves its row in the audit log."""
    path = plan.spec_path or ""
    if frame is not None and plan.spec.run.server:
        raise SpecError(
            "[run] server = true: a DataFrame's release runs in this process only (its rows never go to a server)"
        )
    url = run.recording_server(plan.spec.run.server)

    def in_process(driver: Driver) -> str:
        return attempt(path, plan.overrides, actor, driver=driver, allow_repeat=allow_repeat, plan=plan)

    if url is not None:  # in this process, recorded as a flow run of the server (no Prefect import)
        parameters = {"spec_path": path, "overrides": plan.overrides, "actor": actor}
        recorded_release = load_lazily("privpub.flows.recorded:recorded_release")  # only when recorded on a server
        return recorded_release(url, "publish", plan.series, parameters, progress, in_process)
    with frame_input(frame) if frame is not None else contextlib.nullcontext():
        return in_process(Driver(progress))


def with_set(overrides: dict | None, values: dict[str, Any]) -> dict | None:
    """`overrides` with the set values merged over their sections ({"k": 20} over [technique])."""
    if not values:
        return overrides
    merged = copy.deepcopy(overrides) if isinstance(overrides, dict) else {}
    for section, keys in as_overrides(values).items():
        given = merged.get(section, {})
        merged[section] = {**(given if isinstance(given, dict) else {}), **keys}
    return merged


def publish_data(
    data: pd.DataFrame | str | os.PathLike | None = None,
    spec: dict | str | os.PathLike | ReleaseSpec | None = None,
    state: str | os.PathLike | None = None,
    *,
    set: dict[str, Any] | None = None,  # noqa: A002  (the CLI's --set, by the same name)
    overrides: dict | None = None,
    actor: str | None = None,
    progress: Callable[[str], None] | None = None,
    allow_repeat: bool = False,
) -> PublishedRelease:
    """Publish the next release of a series: anonymize the data, check every privacy figure,
    and, when they pass, write the published tables, the report and the release's history.

    Parameters
    ----------
    data : a pandas DataFrame, or an input file's path (CSV, Parquet, a folder or glob of
        Parquet files). It replaces the spec's ``[dataset] input``; leave it out to read the
        spec's own input.
    spec : a dict of the spec's sections (``{"dataset": {...}, "technique": {...}}``, the TOML
        file's sections), a TOML file's path, or a ``privpub.ReleaseSpec``. Relative paths in a
        dict are read from the current folder, a file's from its own folder.
        ``publish("spec.toml")`` (one path) publishes the spec file as it is.
    state : the state file (history of releases) to use instead of ``[output] state``.
    set : parameter values, named as ``explore``'s grid names them: ``{"k": 20}`` for
        ``[technique] k``, ``{"series.l": 3}`` or ``{"risk.threshold": 0.05}`` for the
        ``[series]`` and ``[risk]`` keys. Checked as strictly as the spec file (``20`` is an
        integer, ``"20"`` is refused); the release's stored spec shows them.
    overrides : whole sections merged over the spec's, e.g. ``{"output": {"seed": 7}}``.
    actor : who publishes, for the audit log (default: the operating-system user).
    progress : called with one line per step (e.g. ``print``); default silent.
    allow_repeat : publish although the input and parameters equal the series' last release's
        (refused by default: a repeat adds nothing and can help an adversary average noise out).

    Returns
    -------
    PublishedRelease : a ``str`` equal to the release id, with ``.tables`` (the published
    tables as DataFrames), ``.figures`` (every privacy, utility and risk figure), ``.report``
    (the report's path) and ``.state``.

    Raises
    ------
    SpecError : the spec or a ``set`` value is refused, before any work.
    InputError : the data is refused (the message names rows and columns, never a value).
    PrivacyRefused : a privacy check failed, or the release would repeat the last one;
        nothing was published.
    Every attempt, refused or not, leaves its row in the audit log.

    Example
    -------
    >>> release = privpub.publish(frame, spec, state="privpub.duckdb", set={"k": 20})
    >>> release.tables["table"].head(); release.figures
    """
    values: dict[str, Any] = {}
    try:
        values = checked_set(set) if set is not None else {}
        overrides = with_set(overrides, values)
        plan, frame = publish_plan(data, spec, state, overrides)
    except Exception as exc:  # refused before any work: still an attempt, logged as the CLI's is
        named = set_refusal(exc, values)
        record_refusal(data, spec, state, overrides, actor, named)
        if named is exc:
            raise
        raise named from None
    release_id = publish_release(plan, actor, progress, allow_repeat, frame=frame)
    return PublishedRelease(release_id, plan.state_path)


def verify(
    release_id: str | None = None,
    state: str | os.PathLike | None = None,
    *,
    actor: str | None = None,
    history: bool = False,
) -> pd.DataFrame:
    """Check a committed release again from its published files, as ``privpub verify`` does.

    Parameters: ``release_id``, the release (a PublishedRelease or its id); ``state``, the
    state file (default ``$PRIVPUB_STATE``, else ./privpub.duckdb); ``actor``, who checks, for
    the audit log; ``history=True`` also checks the whole state's history (every hash chain and
    every release folder's manifest with the files it lists); then ``release_id`` may be left out.

    Returns a DataFrame, one row per check: status (PASS, FAIL, SKIP, INFO), check, passed,
    detail. ``.attrs["ok"]`` is True when no check failed; ``.attrs["lines"]`` holds the lines
    the command prints. A release's checks include its rows against the history's hash chains
    and its manifest.json.

    Raises StateError with neither a release nor ``history=True``, or no such release.

    Example: ``checks = privpub.verify(release.id); assert checks.attrs["ok"]``."""
    if release_id is None and not history:
        raise StateError("privpub.verify needs a release id, or history=True for the whole state's history")
    who, path = current_actor(actor), state_file(state)
    ok, header = True, ""
    checks: list[Check] = []
    if release_id is not None:
        ok, header, checks = reverify_checks(path, str(release_id), actor=who)
    if history:
        passed, lines = verify_history(path, actor=who)
        ok &= passed
        header = header or lines[0]
        checks += [check_line(line) for line in lines[1:]]
    frame = pd.DataFrame(
        {
            "status": [c.status for c in checks],
            "check": [c.check for c in checks],
            "passed": [c.status != "FAIL" for c in checks],
            "detail": [c.detail for c in checks],
        }
    )
    frame.attrs.update(ok=ok, release=header, lines=[header, *(c.line for c in checks)])
    return frame


def series_spec(spec: Any, state: Any = None, overrides: dict | None = None) -> ReleaseSpec:
    """The spec whose [series] a change takes, checked: as `publish` reads it, but no input is
    read, so a dict spec may leave [dataset] input out."""
    if _is_path(spec) and state is None:  # the file itself: its folder anchors its paths
        return resolve_spec(str(spec), None, overrides)
    if isinstance(spec, dict):
        dataset = spec.get("dataset")
        if isinstance(dataset, dict) and not dataset.get("input") and not dataset.get("table"):
            spec = {**spec, "dataset": {**dataset, "input": FRAME_INPUT}}
    checked, _ = release_spec(None, spec, state, overrides)
    return checked


def change_series(
    spec: dict | str | os.PathLike | ReleaseSpec,
    state: str | os.PathLike | None = None,
    *,
    overrides: dict | None = None,
    actor: str | None = None,
) -> SeriesChange:
    """Give a series new ``[series]`` settings (transient, l, composition) and keep its history,
    as ``privpub series change SPEC`` does (docs/series.md, "Changing a series' settings").

    Every release of the series is checked again under the new settings; only when the whole
    series passes are the settings kept (with a ``series-change`` row in the audit log).

    Parameters: ``spec``, the spec holding the new settings (a dict of sections, a TOML file's
    path or a ReleaseSpec; a dict needs no ``input``); ``state``, the state file instead of
    ``[output] state``; ``overrides``, sections merged over the spec's; ``actor``, who changes it.

    Returns a SeriesChange (its figures; ``.lines()`` as the command prints them).

    Raises PrivacyRefused naming the releases that, combined, narrow people down; SpecError
    when the stored values break the new settings; StateError when the series has nothing
    stored. Then nothing changed, and the refusal is in the audit log.

    Example: ``privpub.change_series("spec.toml")`` after editing its ``[series]`` section."""
    who = current_actor(actor)
    checked = None
    try:  # refused before any work: still an attempt, with its audit row where the spec says
        checked = series_spec(spec, state, overrides)
        technique = get_technique(checked)
        if technique.capabilities.guards_series:
            raise SpecError(
                f"[technique] {technique.name} guards its own series (its statistics are its series check): "
                "[series] settings do not apply to it"
            )
        settings = series_settings(checked, technique)
        store = Store(checked.state_path)
        if not store.path.exists():
            raise StateError(f"no state file at {store.path} (nothing has been published there yet)")
        store.check_usable()
    except Exception as exc:
        detail = {"error": type(exc).__name__, "message": public_message(exc)}
        if checked is not None and Path(checked.state_path).exists():
            Store(checked.state_path).log_attempt(who, "series-change", checked.dataset.name, "refused", None, detail)
        elif _is_path(spec):
            record_failure(str(spec), overrides, who, exc, detail["message"], "series-change", "refused")
        raise
    views = len(technique.composition_views())  # Butterfly: each person once per QID
    return rebuild_series(store, checked.dataset.name, settings, who, views=views)

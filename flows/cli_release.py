"""The CLI's commands that make or read releases: `publish`, `serial`, `demo`, `init`,
`explore`, `verify`, `report`, `series change`.

A publish resolves and checks its spec once (`check_spec`: a RunPlan, flows/pipeline.py), reads
and validates the input before anything starts (`check_input`), then runs the release with that
plan: in this process, server or not; asked (`--server`, `[run] server = true`) recorded as a
flow run of the configured or running server through its REST API (flows/recorded.py); with
`--verbose` too, a Prefect flow run in this process that takes the same plan. Prefect is
imported only on that last path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from privpub.flows import api, run
from privpub.flows.api import with_set
from privpub.flows.attempts import attempt_marker, record_failure, started_from
from privpub.flows.cli import quiet_prefect_console, quiet_tracebacks, warn
from privpub.flows.cli_state import state_path
from privpub.flows.demo import prepare_demo
from privpub.flows.lazy import load_lazily
from privpub.flows.pipeline import Driver, RunPlan, attempt, check_places, echo_to_stderr, on_commit, plan_run
from privpub.flows.settings import parse_publish_sets, set_refusal
from privpub.schemas.command import advice
from privpub.schemas.errors import CliError, public_message
from privpub.schemas.input import input_files
from privpub.state.store import Store
from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.report.page import summary_lines
from privpub.tasks.validate import validate_and_keep


def check_spec(spec_path: str, overrides: dict | None = None) -> RunPlan:
    """The cheap checks, before anything starts: the spec resolved and checked (its technique's
    parameters, [series], [risk]), and that the output folder and the state file can be used.
    The plan they give is the run's: nothing resolves the spec again."""
    return check_places(plan_run(spec_path, overrides))


def check_input(plan: RunPlan, echo: Callable[[str], None] | None = None) -> None:
    """The input read and validated as the flow would; bad input fails here, with one message and
    nothing written. The flow, run next in this process, takes the result instead of reading the
    file again (UI-started runs, with no CLI in front of them, read and validate it themselves)."""
    if plan.in_parts:  # read and validated by the cluster's workers, in the flow
        input_files(plan.spec)
        return
    t0 = time.perf_counter()
    data = validate_and_keep(plan.spec, plan.technique)  # kept for the flow this process runs next
    if echo is not None:
        echo(f"input read and validated in {time.perf_counter() - t0:.2f} s: {data.n} valid rows")


def _record_refusal(args: argparse.Namespace, spec_path: str, overrides: dict | None, exc: Exception) -> None:
    """A run refused before it started still leaves its audit row (nothing else)."""
    record_failure(spec_path, overrides, args.actor, exc, public_message(exc))


SERIAL_ONLY = (
    'privpub serial needs a technique that publishes series ([technique] name = "serial"); '
    "for a one-off release: {publish}"
)


def _run_flow(
    args: argparse.Namespace, spec_path: str, overrides: dict | None, serial: bool = False, sets: dict | None = None
) -> int:
    """Check the spec and the input, run the release, print the id and the summary. The release
    runs in this process, server or not; asked to (`--server`, `[run] server = true`) it is
    recorded as a flow run of the configured or running Prefect server (flows/run.py,
    flows/recorded.py; with --verbose a Prefect flow run in this process). Once a release is committed the command
    succeeds: whatever fails afterwards is a warning. Every attempt leaves its audit row, and
    each names the CLI as what started it."""
    with started_from("cli"):
        try:
            plan = check_spec(spec_path, overrides)
            if serial and not plan.technique.capabilities.uses_history:
                raise CliError(SERIAL_ONLY.format(publish=advice("publish", spec_path)))
            # a server records the run only when asked (issue 42): else in this process, server or not
            server = run.recording_server(getattr(args, "server", False) or plan.spec.run.server)
        except Exception as exc:
            named = set_refusal(exc, sets or {})  # a --set value's refusal names the --set
            _record_refusal(args, spec_path, overrides, named)
            if named is exc:
                raise
            raise named from None
        # from here a kill leaves an "interrupted" row (the run's own attempt shares this marker)
        with attempt_marker(plan.state_path, args.actor, plan.series, {"spec": spec_path}):
            return _checked_run(args, replace(plan, spec_path=str(Path(spec_path).resolve())), serial, server)


def _checked_run(args: argparse.Namespace, plan: RunPlan, serial: bool, server: str | None) -> int:
    echo = None if args.quiet else echo_to_stderr
    try:
        check_input(plan, echo)
    except Exception as exc:
        _record_refusal(args, args.spec, plan.overrides, exc)
        raise
    path = plan.spec_path or ""

    def in_process(driver: Driver) -> str:
        return attempt(path, plan.overrides, args.actor, driver=driver, allow_repeat=args.allow_repeat, plan=plan)

    if server and getattr(args, "verbose", False):  # Prefect's own lines: a flow run in this process
        with _prefect_run(args):
            return _release(args, plan, _as_flow_run(args, plan, serial))
    if server:  # in this process, recorded on the server (flows/recorded.py: no Prefect import)
        parameters = {"spec_path": path, "overrides": plan.overrides, "actor": args.actor}
        flow = "serial" if serial else "publish"
        recorded_release = load_lazily("privpub.flows.recorded:recorded_release")
        return _release(args, plan, lambda: recorded_release(server, flow, plan.series, parameters, echo, in_process))
    return _release(args, plan, lambda: in_process(Driver(echo)))


@contextlib.contextmanager
def _prefect_run(args: argparse.Namespace) -> Iterator[None]:
    """The configured Prefect API for the run; Prefect's own console lines only with --verbose
    (the run's log in the UI keeps them all)."""
    with load_lazily("privpub.flows.server:prefect_api")() as ready:
        ready()
        echoing = load_lazily("privpub.flows.publish:echoing")  # Prefect only when a server is configured
        quiet_tracebacks()
        echo = None
        if not getattr(args, "verbose", False):
            quiet_prefect_console()
            echo = None if args.quiet else echo_to_stderr
        with echoing(echo):
            yield


def _as_flow_run(args: argparse.Namespace, plan: RunPlan, serial: bool) -> Callable[[], str]:
    def start() -> str:
        if serial:
            call_planned = load_lazily("privpub.flows.publish:call_planned")
            serial_flow = load_lazily("privpub.flows.serial:serial_flow")
            release_id: str = call_planned(serial_flow, plan, actor=args.actor, allow_repeat=args.allow_repeat)
            return release_id
        publish = load_lazily("privpub.flows.publish:publish")
        published: str = publish(plan.spec_path, plan.overrides, args.actor, args.allow_repeat, plan=plan)
        return published

    return start


def _release(args: argparse.Namespace, plan: RunPlan, start: Callable[[], str]) -> int:
    """Run `start`, print the release id as soon as it is committed, then the summary."""
    printed: list[str] = []

    def announce(release_id: str) -> None:
        print(release_id, flush=True)
        printed.append(release_id)

    try:
        with on_commit(announce):
            release_id = start()
    except BaseException as exc:
        if not printed or isinstance(exc, CliError):
            raise
        warn(
            f"release {printed[-1]} is committed, but the run failed after the commit "
            f"({type(exc).__name__}); `{advice('report', printed[-1], '--state', plan.state_path)}` rewrites its report"
        )
        return 0
    if release_id not in printed:  # a recognised re-run: nothing was committed
        print(release_id, flush=True)
    if not args.quiet:
        try:
            print_summary(plan.state_path, release_id)
        except Exception as exc:
            warn(f"release {release_id} is committed; its summary could not be printed ({type(exc).__name__})")
    return 0


def print_summary(state: Path, release_id: str) -> None:
    store = Store(state)
    with store.read():  # the reads below share this attachment of the state (state/attached.py)
        _print_summary(store, release_id)


def _print_summary(store: Store, release_id: str) -> None:
    rel = store.release(release_id)
    m = rel["metrics"]
    privacy = [
        PrivacyResult(r.name, r.text_value, r.threshold, bool(r.passed)) for r in m[m.kind == "privacy"].itertuples()
    ]
    utility = {}
    for r in m[m.kind == "utility"].itertuples():
        utility[r.name] = r.value if r.value is not None and r.value == r.value else r.text_value
    for key in ("groups", "max-group-size", "suppressed-rows", "dropped-rows", "queries"):
        if key in utility:
            utility[key] = int(utility[key])
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    people = store.private(release_id).get("people_in")  # rows_per_person = "many": the input's people
    for line in summary_lines({**rel, "risk": risk, "people_in": people}, privacy, utility):
        print(f"  {line}")
    out = Path(rel["output_dir"]) / release_id
    print(f"  published files: {out}/")
    for t in rel["tables"].itertuples():
        print(f"    {t.file} ({t.n_rows} rows)")
    print(f"  report: {out / 'report.html'}")
    manifest = store.query(
        lambda con: con.execute("SELECT sha256 FROM release_manifests WHERE release_id = ?", [release_id]).fetchone()
    )
    if manifest is not None:  # the history's anchor: worth a copy where the state's writers cannot reach
        print(
            f"  manifest: {out / 'manifest.json'} (sha256 {manifest[0]}; keep a copy outside: "
            f"{advice('verify', '--history', '--state', store.path)})"
        )
    print(f"  history: {store.path}  ({advice('history', '--state', store.path)})")


def cmd_publish(args: argparse.Namespace) -> int:
    """Publish the spec's next release; `--set NAME=VALUE` values (explore's names) override the
    spec's and are stored with the release as any spec value."""
    with started_from("cli"):
        try:
            sets = parse_publish_sets(getattr(args, "set", None) or [])
        except Exception as exc:  # before any work, with its audit row
            _record_refusal(args, args.spec, None, exc)
            raise
    given: dict = with_set(None, sets) or {}
    if args.seed is not None:
        given["output"] = {"seed": args.seed}
    runs = {
        k: v
        for k, v in (("task_runner", getattr(args, "task_runner", None)), ("workers", getattr(args, "workers", None)))
        if v is not None
    }
    if runs:
        given["run"] = runs
    return _run_flow(args, args.spec, given or None, sets=sets)


def cmd_serial(args: argparse.Namespace) -> int:
    """The next release of a serial series: refuses a spec whose technique keeps no history."""
    return _run_flow(args, args.spec, None, serial=True)


def cmd_init(args: argparse.Namespace) -> int:
    """Write the proposed spec; print what was proposed and why (counts, never values)."""
    report: list[str] = []
    init = load_lazily("privpub.flows.init:init")
    with started_from("cli"):  # refusals name the command's options (--sensitive), not Python's
        path = init(
            args.data,
            sensitive=args.sensitive,
            person_id=args.person_id,
            output=args.output,
            force=args.force,
            report=report,
            max_qi=load_lazily("privpub.flows.init:MAX_QI") if args.max_qi is None else args.max_qi,
        )
    for line in report:
        print(line)
    print(f"wrote {path}; review it, then: {advice('publish', path)}")
    return 0


def cmd_explore(args: argparse.Namespace) -> int:
    """A dry run over the grid of --set values: one row (or JSON line) per setting."""
    # loaded by the command that uses them (a publish's start-up skips them, issue 43)
    parse_sets, run_explore, json_lines, table_lines = (
        load_lazily(f"privpub.flows.explore:{name}")
        for name in ("parse_sets", "run_explore", "json_lines", "table_lines")
    )
    choice_json, choice_lines, set_words = (
        load_lazily(f"privpub.flows.optimize:{name}") for name in ("choice_json", "choice_lines", "set_words")
    )
    with started_from("cli"):
        try:
            grid = parse_sets(args.set)
        except Exception as exc:
            record_failure(args.spec, None, args.actor, exc, public_message(exc), "explore", "refused")
            raise
        echo = None if args.quiet or args.json else echo_to_stderr
        done = run_explore(
            args.spec, grid, seed=args.seed, actor=args.actor, html=args.html, echo=echo, optimize=args.optimize
        )
    if done.seed_drawn and args.json and not args.quiet:
        echo_to_stderr(f"seed {done.seed} drawn (publish with --seed {done.seed} to reproduce a setting's release)")
    for line in json_lines(done) if args.json else table_lines(done):
        print(line)
    if done.choice is None:
        return 0
    best = None if done.choice.best is None else done.rows[done.choice.best]
    command = None if best is None else advice("publish", args.spec, *set_words(best.setting), "--seed", done.seed)
    if args.json:
        print(json.dumps(choice_json(done.rows, done.choice, command), allow_nan=False))
    else:
        for line in choice_lines(done.rows, done.choice, command):
            print(line)
    return 0 if best is not None else 1  # nothing passes: nothing to publish


def cmd_verify(args: argparse.Namespace) -> int:
    """`verify RELEASE_ID` (its history included), `verify --history` (the whole state's), or both."""
    if not args.release_id and not args.history:
        raise CliError("verify needs a RELEASE_ID, or --history for the whole state's history")
    checks = api.verify(args.release_id, state_path(args), actor=args.actor, history=args.history)
    for line in checks.attrs["lines"]:
        print(line)
    return 0 if checks.attrs["ok"] else 1


def cmd_series(args: argparse.Namespace) -> int:
    """`series change SPEC`: the spec's [series] settings for its series, which keeps its history."""
    done = api.change_series(args.spec, actor=args.actor)
    if not args.quiet:
        for line in done.lines():
            print(line)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    print(load_lazily("privpub.flows.reverify:rewrite_report")(state_path(args), args.release_id))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    spec_path = prepare_demo(Path(args.dir), rows=args.rows)
    if not args.quiet:
        print(f"demo data and spec: {spec_path}")
    # a demonstration publishes another release each time it is run (no repeat refusal)
    args.spec, args.seed, args.allow_repeat = str(spec_path), None, True
    return cmd_publish(args)

"""The `privpub` command line.

    privpub publish SPEC.toml          publish the next release of the spec's series
    privpub serial SPEC.toml           the next release of a serial series (global guarantee)
    privpub explore SPEC.toml --set k=5,10,20 [--set l=2,3] [--json]
                                       a dry run over a grid of settings: figures, nothing published
    privpub history [--state FILE]     list committed releases
    privpub snapshot OUT [--state FILE]  a copy of the state to read with duckdb, blocking nobody
    privpub verify RELEASE_ID          re-verify a committed release from its published files
    privpub series change SPEC.toml    the series' [series] settings become the spec's: summaries
                                       rebuilt, the whole series re-checked (docs/series.md)
    privpub report RELEASE_ID          (re)write and show the HTML report of a release
    privpub demo                       publish a release of the embedded sample data
    privpub audit init|ask|batch|log [--summary]   the online auditor (l-uncertainty)
    privpub audit set TABLE --budget N  a registered table's work budget per decision (logged)
    privpub server start|stop|status   the release service (Prefect server, UI, deployments)

Exit status 0 on success; on failure one line `privpub: error: ...` and status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path

# Offline and quiet before Prefect is imported (see docs/ARCHITECTURE.md, "Running offline").
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PY_KEY_VALUE_DISABLE_BEARTYPE", "true")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "false")

from privpub.flows.api import DEFAULT_STATE  # noqa: E402  (light: no Prefect, no pandas)
from privpub.schemas.errors import CliError, public_message  # noqa: E402  (light: no Prefect, no pandas)


def warn(message: str) -> None:
    print(f"privpub: warning: {message}", file=sys.stderr, flush=True)


def _quiet_tracebacks() -> None:
    """Prefect's console log prints a task's traceback when it fails; at the terminal the one
    `privpub: error:` line says what happened (PRIVPUB_DEBUG=1 keeps the tracebacks)."""
    if os.environ.get("PRIVPUB_DEBUG"):
        return

    def strip(record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True

    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", []):
            if type(handler).__name__ == "PrefectConsoleHandler" and strip not in handler.filters:
                handler.addFilter(strip)


def _state_path(args) -> Path:
    if getattr(args, "spec", None):
        # lazy: `--help` and `history` import no Prefect, no technique
        from privpub.schemas.spec import load_spec

        return load_spec(args.spec).state_path
    from privpub.flows.api import state_file  # lazy: as above

    return state_file(args.state)


def check_spec(spec_path: str, overrides: dict | None = None):
    """The cheap checks, before anything starts: the spec, its technique's parameters, and that
    the output folder and the state file can be used."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.schemas.spec import resolve_spec
    from privpub.state.store import Store, check_output_dir
    from privpub.tasks.compose.check import series_settings
    from privpub.tasks.risk import risk_settings
    from privpub.tasks.techniques.registry import get_technique

    spec = resolve_spec(spec_path, None, overrides)
    series_settings(spec, get_technique(spec))
    risk_settings(spec)
    check_output_dir(spec.output_dir)
    Store(spec.state_path).check_usable()
    return spec


def check_input(spec, echo=None) -> None:
    """The input read and validated as the flow would; bad input fails here, with one message and
    nothing written. The flow, run next in this process, takes the result instead of reading the
    file again (UI-started runs, with no CLI in front of them, read and validate it themselves)."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.cluster import uses_cluster
    from privpub.schemas.input import input_files
    from privpub.tasks.techniques.registry import get_technique
    from privpub.tasks.validate import validate_and_keep

    technique = get_technique(spec)
    if uses_cluster(spec, technique):  # read and validated by the cluster's workers, in the flow
        input_files(spec)
        return
    t0 = time.perf_counter()
    data = validate_and_keep(spec, technique)  # kept for the flow this process runs next
    if echo is not None:
        echo(f"input read and validated in {time.perf_counter() - t0:.2f} s: {data.n} valid rows")


def _record_refusal(args, spec_path: str, overrides: dict | None, exc: Exception) -> None:
    """A run refused before Prefect started still leaves its audit row (nothing else)."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows import attempts

    attempts.STARTED_BY_CLI = True  # the row says "cli", as a refusal inside the run does
    attempts.record_failure(spec_path, overrides, args.actor, exc, public_message(exc))


def _run_flow(args, spec_path: str, overrides: dict | None, serial: bool = False) -> int:
    """Check the spec and the input, run the release, print the id and the summary. With a
    Prefect server configured or running the release is a flow run of it; otherwise it runs in
    this process, with no server (flows/run.py). Once a release is committed the command
    succeeds: whatever fails afterwards is a warning."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows import attempts

    attempts.STARTED_BY_CLI = True
    try:
        spec = check_spec(spec_path, overrides)
    except Exception as exc:
        _record_refusal(args, spec_path, overrides, exc)
        raise
    # from here a kill leaves an "interrupted" row (the run's own attempt shares this marker)
    with attempts.attempt_marker(spec.state_path, args.actor, spec.dataset.name, {"spec": spec_path}):
        return _checked_run(args, spec, spec_path, overrides, serial)


def _checked_run(args, spec, spec_path: str, overrides: dict | None, serial: bool) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.pipeline import echo_to_stderr
    from privpub.flows.run import prefect_configured

    echo = None if args.quiet else echo_to_stderr
    try:
        check_input(spec, echo)
    except Exception as exc:
        _record_refusal(args, spec_path, overrides, exc)
        raise
    if prefect_configured():
        with _prefect_run(args):
            return _release(args, spec, spec_path, overrides, _as_flow_run(args, spec_path, overrides, serial))
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.pipeline import Driver, attempt

    driver = Driver(echo)
    path = str(Path(spec_path).resolve())
    return _release(
        args,
        spec,
        spec_path,
        overrides,
        lambda: attempt(path, overrides, args.actor, driver=driver, allow_repeat=args.allow_repeat),
    )


@contextlib.contextmanager
def _prefect_run(args):
    """The configured Prefect API for the run; Prefect's own console lines only with --verbose
    (the run's log in the UI keeps them all)."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.server import prefect_api

    with prefect_api() as ready:
        ready()
        from privpub.flows import publish as pub  # lazy: Prefect only when a server is configured

        _quiet_tracebacks()
        if not getattr(args, "verbose", False):
            _quiet_prefect_console()
            pub.PREFECT.echo = None if args.quiet else _echo()
        try:
            yield
        finally:
            pub.PREFECT.echo = None


def _echo():
    from privpub.flows.pipeline import echo_to_stderr  # lazy: as above

    return echo_to_stderr


def _quiet_prefect_console() -> None:
    """Prefect's INFO lines (task states, "View at" links) stay in the run's log, off the terminal."""
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", []):
            if type(handler).__name__ == "PrefectConsoleHandler":
                handler.setLevel(logging.WARNING)


def _as_flow_run(args, spec_path: str, overrides: dict | None, serial: bool):
    def start() -> str:
        # lazy: `--help` and `history` import no Prefect, no technique
        from privpub.flows.publish import call_flow, publish

        path = str(Path(spec_path).resolve())
        if serial:
            from privpub.flows.serial import serial_flow  # lazy: as above

            return call_flow(serial_flow, spec_path=path, actor=args.actor, allow_repeat=args.allow_repeat)
        return publish(path, overrides=overrides, actor=args.actor, allow_repeat=args.allow_repeat)

    return start


def _release(args, spec, spec_path: str, overrides: dict | None, start) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows import pipeline

    printed: list[str] = []

    def announce(release_id: str) -> None:
        print(release_id, flush=True)
        printed.append(release_id)

    pipeline.ON_COMMIT.append(announce)
    try:
        release_id = start()
    except BaseException as exc:
        if not pipeline.COMMITTED or isinstance(exc, CliError):
            raise
        release_id = pipeline.COMMITTED[-1]
        if release_id not in printed:
            print(release_id, flush=True)
        warn(
            f"release {release_id} is committed, but the run failed after the commit "
            f"({type(exc).__name__}); `privpub report {release_id}` rewrites its report"
        )
        return 0
    finally:
        pipeline.ON_COMMIT.remove(announce)
    if release_id not in printed:  # a recognised re-run: nothing was committed
        print(release_id, flush=True)
    if not args.quiet:
        try:
            print_summary(spec.state_path, release_id)
        except Exception as exc:
            warn(f"release {release_id} is committed; its summary could not be printed ({type(exc).__name__})")
    return 0


def print_summary(state: Path, release_id: str) -> None:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.state.store import Store
    from privpub.tasks.core.types import PrivacyResult
    from privpub.tasks.report.page import summary_lines

    store = Store(state)
    rel = store.release(release_id)
    m = rel["metrics"]
    privacy = [
        PrivacyResult(r.name, r.text_value, r.threshold, bool(r.passed)) for r in m[m.kind == "privacy"].itertuples()
    ]
    utility = {}
    for r in m[m.kind == "utility"].itertuples():
        utility[r.name] = r.value if r.value is not None and r.value == r.value else r.text_value
    for key in ("groups", "max_group_size", "suppressed_rows", "dropped_rows", "queries"):
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
    print(f"  history: {store.path}  (privpub history --state {store.path})")


def cmd_publish(args) -> int:
    given: dict = {}
    if args.seed is not None:
        given["output"] = {"seed": args.seed}
    run = {
        k: v
        for k, v in (("task_runner", getattr(args, "task_runner", None)), ("workers", getattr(args, "workers", None)))
        if v is not None
    }
    if run:
        given["run"] = run
    return _run_flow(args, args.spec, given or None)


def cmd_serial(args) -> int:
    """The next release of a serial series: refuses a spec whose technique keeps no history."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.schemas.spec import resolve_spec
    from privpub.tasks.techniques.registry import get_technique

    try:  # a refusal here is an attempt too: it leaves its audit row, as publish's do
        if not get_technique(resolve_spec(args.spec, None, None)).capabilities.uses_history:
            raise CliError(
                "privpub serial needs a technique that publishes series "
                '([technique] name = "serial"); use privpub publish for one-off releases'
            )
    except Exception as exc:
        _record_refusal(args, args.spec, None, exc)
        raise
    return _run_flow(args, args.spec, None, serial=True)


def cmd_init(args) -> int:
    """Write the proposed spec; print what was proposed and why (counts, never values)."""
    from privpub.flows.init import MAX_QI, init  # lazy: as the other commands

    report: list[str] = []
    path = init(
        args.data,
        sensitive=args.sensitive,
        person_id=args.person_id,
        output=args.output,
        force=args.force,
        report=report,
        max_qi=MAX_QI if args.max_qi is None else args.max_qi,
    )
    for line in report:
        print(line)
    print(f"wrote {path}; review it, then: privpub publish {path}")
    return 0


def cmd_explore(args) -> int:
    """A dry run over the grid of --set values: one row (or JSON line) per setting."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows import attempts
    from privpub.flows.explore import json_lines, parse_sets, run_explore, table_lines
    from privpub.flows.pipeline import echo_to_stderr

    attempts.STARTED_BY_CLI = True
    try:
        grid = parse_sets(args.set)
    except Exception as exc:
        from privpub.flows.attempts import record_failure  # lazy: as above

        record_failure(args.spec, None, args.actor, exc, public_message(exc), "explore", "refused")
        raise
    echo = None if args.quiet or args.json else echo_to_stderr
    done = run_explore(args.spec, grid, seed=args.seed, actor=args.actor, html=args.html, echo=echo)
    if done.seed_drawn and args.json and not args.quiet:
        echo_to_stderr(f"seed {done.seed} drawn (publish with --seed {done.seed} to reproduce a setting's release)")
    for line in json_lines(done) if args.json else table_lines(done):
        print(line)
    return 0


def cmd_history(args) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.api import history

    frame = history(_state_path(args), args.series)
    if frame.empty:
        print("no releases yet")
        return 0
    with_cols = frame.assign(created_at=frame.created_at.astype(str).str.slice(0, 19))
    print(with_cols.to_string(index=False))
    return 0


def cmd_snapshot(args) -> int:
    """Copy the state for reading: `duckdb -readonly` on the live file would hold every publish."""
    from privpub.flows.api import snapshot  # lazy: as the other commands

    print(snapshot(args.out, _state_path(args)))
    return 0


def cmd_trail(args) -> int:
    """The audit trail for a compliance officer: every attempt, its outcome, release and trigger."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.state.store import Store

    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since)
        except ValueError:
            raise CliError(f"--since {args.since!r} is not a date (YYYY-MM-DD or an ISO timestamp)") from None
    frame = Store(_state_path(args)).trail(args.series, since)
    if args.format == "json":
        for line in frame.to_json(orient="records", lines=True, date_format="iso").splitlines():
            if line.strip():
                print(line)
    else:
        sys.stdout.write(frame.to_csv(index=False))
    return 0


def cmd_verify(args) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.api import verify

    checks = verify(args.release_id, _state_path(args), actor=args.actor or "cli")
    for line in checks.attrs["lines"]:
        print(line)
    return 0 if checks.attrs["ok"] else 1


def cmd_series(args) -> int:
    """`series change SPEC`: the spec's [series] settings for its series, which keeps its history."""
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.api import change_series

    done = change_series(args.spec, actor=args.actor)
    if not args.quiet:
        for line in done.lines():
            print(line)
    return 0


def cmd_report(args) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.reverify import rewrite_report

    print(rewrite_report(_state_path(args), args.release_id))
    return 0


def cmd_audit(args) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows import audit
    from privpub.flows.attempts import current_actor

    actor = current_actor(args.actor)
    if args.audit_command == "init":
        # lazy: `--help` and `history` import no Prefect, no technique
        from privpub.schemas.spec import load_spec

        spec = load_spec(args.spec)
        name = audit.init_audit(spec, actor)
        print(json.dumps({"registered": name, "state": str(spec.state_path.resolve()), **audit.audit_settings(spec)}))
        return 0
    state = _state_path(args)
    if args.audit_command == "set":
        print(json.dumps(audit.set_budget(state, args.table, args.budget, actor)))
        return 0
    if args.audit_command == "ask":
        print(json.dumps(audit.ask(state, args.where, actor, args.table), default=str))
        return 0
    if args.audit_command == "batch":
        queries = _read_batch(Path(args.file))
        # lazy: `--help` and `history` import no Prefect, no technique
        from privpub.flows.run import prefect_configured

        responses: list[dict]
        if prefect_configured():  # a flow run of the configured server, as `publish` would
            from privpub.flows.audit_batch import audit_flow  # lazy: Prefect only when configured
            from privpub.flows.publish import call_flow
            from privpub.flows.server import prefect_api

            with prefect_api() as ready:
                ready()
                _quiet_tracebacks()
                responses = call_flow(
                    audit_flow, state=str(Path(state).resolve()), queries=queries, actor=actor, table=args.table
                )
        else:  # no server: decided in this process, no Prefect
            responses = audit.decide_batch(str(Path(state).resolve()), queries, actor, args.table, None)
        for response in responses:
            print(json.dumps(response, default=str))
        return 0
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.state.store import Store

    log = Store(state).audit_log()
    log = log[log.action.str.startswith("audit-")]
    if args.summary:
        for table in audit.summary(log):
            print(json.dumps(table))
        return 0
    for row in log.itertuples():
        print(
            json.dumps(
                {
                    "at": str(row.logged_at),
                    "requester": row.actor,
                    "action": row.action,
                    "table": row.target,
                    "response": row.outcome,
                    **json.loads(row.detail or "{}"),
                },
                default=str,
            )
        )
    return 0


def _read_batch(path: Path) -> list[dict]:
    """A batch file: one query per line, either a bare SQL predicate or a JSON object
    {"where": ..., "as": requester, "id": name}; blank lines and # comments are skipped."""
    if not path.is_file():
        raise CliError(f"batch file not found: {path}")
    queries = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                q = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CliError(f"{path}, line {n}: not valid JSON ({exc})") from None
            if "where" not in q:
                raise CliError(f'{path}, line {n}: a query needs a "where" predicate')
            queries.append(q)
        else:
            queries.append({"where": line})
    if not queries:
        raise CliError(f"{path} holds no query")
    return queries


def cmd_demo(args) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.demo import prepare_demo

    spec_path = prepare_demo(Path(args.dir), rows=args.rows)
    if not args.quiet:
        print(f"demo data and spec: {spec_path}")
    # a demonstration publishes another release each time it is run (no repeat refusal)
    args.spec, args.seed, args.allow_repeat = str(spec_path), None, True
    return cmd_publish(args)


def cmd_server(args) -> int:
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.flows.service import command

    return command(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="privpub", description="privacy-preserving microdata publishing")
    sub = p.add_subparsers(dest="command", required=True)

    sp = sub.add_parser("publish", help="publish the next release of a series")
    sp.add_argument("spec", help="the release spec (TOML)")
    sp.add_argument("--seed", type=int, help="override the spec's seed")
    sp.add_argument("--as", dest="actor", help="who runs this (audit log); default: the OS user")
    sp.add_argument("--quiet", action="store_true", help="print only the release id")
    sp.add_argument("--verbose", action="store_true", help="also print Prefect's log lines (a server's runs)")
    sp.add_argument(
        "--allow-repeat",
        action="store_true",
        help="publish although the input and parameters equal the series' last release's (refused by default)",
    )
    sp.add_argument(
        "--task-runner",
        choices=["inprocess", "dask"],
        help="where a technique's chunk tasks run (overrides [run] task_runner; "
        "default in-process); the release is the same either way",
    )
    sp.add_argument(
        "--workers",
        type=int,
        help="threads (inprocess) or Dask worker processes (overrides [run] workers; Dask default 2)",
    )
    sp.set_defaults(func=cmd_publish)

    sp = sub.add_parser("init", help="propose a spec for a table: kinds, quasi-identifiers and hierarchies")
    sp.add_argument("data", help="the table: a CSV or Parquet file, or file.duckdb:table")
    sp.add_argument("--sensitive", required=True, help="the sensitive column (published as it is)")
    sp.add_argument(
        "--person-id",
        help="the person id column (it may repeat: several rows per person); without it a repeating "
        "id-like column is looked for, else the row number is used (@row)",
    )
    sp.add_argument("--max-qi", type=int, help="propose at most this many quasi-identifiers (default 6)")
    sp.add_argument("-o", "--output", default="spec.toml", help="the spec file to write (default spec.toml)")
    sp.add_argument("--force", action="store_true", help="overwrite the spec file if it exists")
    sp.set_defaults(func=cmd_init)

    sp = sub.add_parser("serial", help="publish the next release of a serial series (global guarantee)")
    sp.add_argument("spec", help='the release spec (TOML), [technique] name = "serial"')
    sp.add_argument("--as", dest="actor", help="who runs this (audit log); default: the OS user")
    sp.add_argument("--quiet", action="store_true", help="print only the release id")
    sp.add_argument("--verbose", action="store_true", help="also print Prefect's log lines (a server's runs)")
    sp.add_argument(
        "--allow-repeat",
        action="store_true",
        help="publish although the input and parameters equal the series' last release's (refused by default)",
    )
    sp.set_defaults(func=cmd_serial)

    sp = sub.add_parser("explore", help="a dry run over a grid of settings: each one's figures, nothing published")
    sp.add_argument("spec", help="the release spec (TOML)")
    sp.add_argument(
        "--set",
        action="append",
        required=True,
        metavar="NAME=V1,V2,...",
        help="values of a [technique] key (series.KEY, risk.KEY for those sections); repeat it: "
        "the grid is every combination, in the order given",
    )
    sp.add_argument("--seed", type=int, help="every setting's seed (default: the spec's, else one drawn and printed)")
    sp.add_argument("--json", action="store_true", help="one JSON object per setting and line")
    sp.add_argument(
        "--html", help="where the trade-off page goes (default: explore-<series>.html beside the state file)"
    )
    sp.add_argument("--as", dest="actor", help="who runs this (audit log); default: the OS user")
    sp.add_argument("--quiet", action="store_true", help="no progress lines")
    sp.set_defaults(func=cmd_explore)

    for name, func, hlp in (
        ("history", cmd_history, "list committed releases"),
        ("verify", cmd_verify, "re-verify a committed release from its published files"),
        ("report", cmd_report, "(re)write the HTML report of a release"),
    ):
        sp = sub.add_parser(name, help=hlp)
        if name != "history":
            sp.add_argument("release_id")
        sp.add_argument("--state", help=f"the state file (default ${'{'}PRIVPUB_STATE{'}'} or ./{DEFAULT_STATE})")
        sp.add_argument("--spec", help="take the state file from this spec")
        if name == "history":
            sp.add_argument("--series", help="only this series")
        sp.add_argument("--as", dest="actor", help="who runs this (audit log)")
        sp.set_defaults(func=func)

    sp = sub.add_parser("series", help="change the settings of a series that keeps its history")
    series_sub = sp.add_subparsers(dest="series_command", required=True)
    a = series_sub.add_parser(
        "change",
        help="the series' [series] settings (transient, l, composition) become the spec's: its summaries "
        "rebuilt from every release's stored groups, the whole series re-checked; refused, nothing changed, "
        "if the series would fail the check",
    )
    a.add_argument("spec", help="the series' release spec (TOML), its [series] edited")
    a.add_argument("--as", dest="actor", help="who runs this (audit log); default: the OS user")
    a.add_argument("--quiet", action="store_true", help="print nothing on success")
    sp.set_defaults(func=cmd_series)

    sp = sub.add_parser(
        "snapshot",
        help="a consistent copy of the state file for analysts (a DuckDB session on the copy blocks nobody)",
    )
    sp.add_argument("out", help="the copy's file (must not exist)")
    sp.add_argument("--state", help=f"the state file (default ${'{'}PRIVPUB_STATE{'}'} or ./{DEFAULT_STATE})")
    sp.add_argument("--spec", help="take the state file from this spec")
    sp.set_defaults(func=cmd_snapshot)

    sp = sub.add_parser("trail", help="export the audit trail (every attempt and its outcome)")
    sp.add_argument("--state", help=f"the state file (default ${'{'}PRIVPUB_STATE{'}'} or ./{DEFAULT_STATE})")
    sp.add_argument("--spec", help="take the state file from this spec")
    sp.add_argument("--series", help="only this series")
    sp.add_argument("--since", help="only attempts from this date on (YYYY-MM-DD, UTC)")
    sp.add_argument("--format", choices=["csv", "json"], default="csv", help="csv (default) or JSON lines")
    sp.set_defaults(func=cmd_trail)

    sp = sub.add_parser("audit", help="answer online microdata queries under l-uncertainty")
    audit_sub = sp.add_subparsers(dest="audit_command", required=True)
    a = audit_sub.add_parser("init", help="register a secret table ([audit] l, budget, strategy)")
    a.add_argument("spec")
    a.add_argument("--as", dest="actor")
    for name, hlp in (
        ("ask", "decide one query"),
        ("batch", "decide a file of concurrent queries (Prefect flow)"),
        ("log", "the decisions, as JSON lines"),
    ):
        a = audit_sub.add_parser(name, help=hlp)
        if name == "ask":
            a.add_argument("--where", required=True, help="SQL predicate over the QI columns")
        if name == "batch":
            a.add_argument("file", help='one predicate (or JSON object with "where") per line')
        if name == "log":
            a.add_argument(
                "--summary",
                action="store_true",
                help="per table: how many queries were answered, denied (exactly or by the budget), refused",
            )
        a.add_argument("--as", dest="actor", help="the requester (audit log)")
        a.add_argument("--state", help=f"the state file (default ./{DEFAULT_STATE})")
        a.add_argument("--spec", help="take the state file from this spec")
        a.add_argument("--table", help="which registered table, when there are several")
    a = audit_sub.add_parser("set", help="change a registered table's settings (logged): its work budget")
    a.add_argument("table", help="the registered table (its dataset name)")
    a.add_argument("--budget", required=True, help="units of work (solves + solver nodes) per decision, > 0")
    a.add_argument("--as", dest="actor", help="who changes it (audit log); default: the OS user")
    a.add_argument("--state", help=f"the state file (default ./{DEFAULT_STATE})")
    a.add_argument("--spec", help="take the state file from this spec")
    sp.set_defaults(func=cmd_audit)

    sp = sub.add_parser("demo", help="publish a release of the embedded census sample")
    sp.add_argument("--dir", default="demo", help="where the demo data, releases and history go")
    sp.add_argument("--rows", type=int, default=5000)
    sp.add_argument("--as", dest="actor")
    sp.add_argument("--quiet", action="store_true", help="print only the release id")
    sp.add_argument("--verbose", action="store_true", help="also print Prefect's log lines (a server's runs)")
    sp.set_defaults(func=cmd_demo)

    sp = sub.add_parser("server", help="the release service: Prefect server, UI and served deployments")
    server_sub = sp.add_subparsers(dest="server_command", required=True)
    for name, hlp in (
        ("start", "start it, detached (state and releases in the home folder)"),
        ("stop", "stop it (serve first, then the server)"),
        ("status", "running or not, and where"),
    ):
        a = server_sub.add_parser(name, help=hlp)
        if name == "start":
            a.add_argument("--port", type=int, default=4200, help="the UI's and API's port (default 4200)")
        a.add_argument("--home", help="the service's folder (default $PRIVPUB_HOME or ~/.privpub)")
    sp.set_defaults(func=cmd_server)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # lazy: `--help` and `history` import no Prefect, no technique
    from privpub.state.permissions import private_umask

    private_umask()  # secret-bearing files owner-only; published ones follow the operator's umask
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("privpub: interrupted; nothing was published by this run", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("PRIVPUB_DEBUG"):
            traceback.print_exc()
        print(f"privpub: error: {public_message(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

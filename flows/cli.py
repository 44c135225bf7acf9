"""The `privpub` command line: a table of commands over privpub's Python API.

    privpub publish SPEC.toml [--server]  publish the next release of the spec's series (--server:
                                       recorded as a flow run of the running server)
    privpub serial SPEC.toml           the next release of a serial series (global guarantee)
    privpub explore SPEC.toml --set k=5,10,20 [--set l=2,3] [--json] [--optimize FIGURE]
                                       a dry run over a grid of settings: figures, nothing published
    privpub history [--state FILE]     list committed releases
    privpub snapshot OUT [--state FILE]  a copy of the state to read with duckdb, blocking nobody
    privpub verify RELEASE_ID          re-verify a committed release from its published files
    privpub verify --history           every release row, figure and audit row against its hash chain,
                                       every release folder's manifest.json (docs/ARCHITECTURE.md)
    privpub series change SPEC.toml    the series' [series] settings become the spec's: summaries
                                       rebuilt, the whole series re-checked (docs/series.md)
    privpub report RELEASE_ID          (re)write and show the HTML report of a release
    privpub demo                       publish a release of the embedded sample data
    privpub audit init|ask|batch|log [--summary]   the online auditor (l-uncertainty)
    privpub audit set TABLE --budget N | --request-budget N  a registered table's work limits (logged)
    privpub server start|stop|status   the release service (Prefect server, UI, deployments)

Exit status 0 on success; on failure one line `privpub: error: ...` and status 1.

`COMMANDS` names each command's function as "module:function", imported (flows/lazy.py `load`)
only when that command runs: `--help` and `history` import no Prefect, no technique. Adding a
command: a function taking the parsed arguments and returning the exit status, and a row here
(its help line and the function adding its arguments).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import logging
import os
import select
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

# Offline and quiet before Prefect is imported (see docs/ARCHITECTURE.md, "Running offline").
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PY_KEY_VALUE_DISABLE_BEARTYPE", "true")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "false")

from privpub.flows.lazy import load_lazily  # noqa: E402  (light: importlib only)
from privpub.schemas.errors import public_message  # noqa: E402  (light: no Prefect, no pandas)
from privpub.state.location import DEFAULT_STATE  # noqa: E402  (light: no DuckDB, no Arrow)
from privpub.state.permissions import private_umask  # noqa: E402  (light)

STATE_HELP = f"the state file (default ${{PRIVPUB_STATE}} or ./{DEFAULT_STATE})"
ACTOR_HELP = "who runs this (audit log); default: the OS user"
SERVER_HELP = (
    "record the run on a Prefect server (PREFECT_API_URL, else the running `privpub server`), as "
    "[run] server = true does; without it the release runs in this process, server or not"
)
REPEAT_HELP = "publish although the input and parameters equal the series' last release's (refused by default)"


def warn(message: str) -> None:
    print(f"privpub: warning: {message}", file=sys.stderr, flush=True)


def quiet_tracebacks() -> None:
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


def _as_privpub_line(record: logging.LogRecord) -> bool:
    """privpub's own warnings in a flow run (state/store.py `notice`, flagged `privpub_line`)
    reach the terminal as without a server, "[privpub] ...", not in Prefect's log format."""
    if getattr(record, "privpub_line", False):
        print(f"[privpub] {record.getMessage()}", file=sys.stderr, flush=True)
        return False
    return True


def quiet_prefect_console() -> None:
    """Prefect's INFO lines (task states, "View at" links) stay in the run's log, off the terminal;
    privpub's own lines look the same whichever path ran."""
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", []):
            if type(handler).__name__ == "PrefectConsoleHandler":
                handler.setLevel(logging.WARNING)
                if _as_privpub_line not in handler.filters:
                    handler.addFilter(_as_privpub_line)


# --- each command's arguments ---------------------------------------------------------------


def _run_args(sp: argparse.ArgumentParser, spec_help: str) -> None:
    """The arguments of the commands that publish: the spec, who, how much is printed."""
    sp.add_argument("spec", help=spec_help)
    sp.add_argument("--as", dest="actor", help=ACTOR_HELP)
    sp.add_argument("--quiet", action="store_true", help="print only the release id")
    sp.add_argument("--verbose", action="store_true", help="also print Prefect's log lines (a server's runs)")
    sp.add_argument("--allow-repeat", action="store_true", help=REPEAT_HELP)
    sp.add_argument("--server", action="store_true", help=SERVER_HELP)


def publish_args(sp: argparse.ArgumentParser) -> None:
    _run_args(sp, "the release spec (TOML)")
    sp.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="publish with this value of a [technique] key (series.KEY, risk.KEY for those sections), "
        "as explore's --set names it; repeat it for several keys",
    )
    sp.add_argument("--seed", type=int, help="override the spec's seed")
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


def serial_args(sp: argparse.ArgumentParser) -> None:
    _run_args(sp, 'the release spec (TOML), [technique] name = "serial"')


def init_args(sp: argparse.ArgumentParser) -> None:
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


def explore_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("spec", help="the release spec (TOML)")
    sp.add_argument(
        "--set",
        action="append",
        required=True,
        metavar="NAME=V1,V2,...",
        help="values of a [technique] key (series.KEY, risk.KEY for those sections), or an integer range "
        "START..END[..STEP]; repeat it: the grid is every combination, in the order given",
    )
    sp.add_argument(
        "--optimize",
        metavar="FIGURE",
        help="choose the best setting passing every check and [risk] limit by this utility figure (e.g. "
        "gen-iloss), with the Pareto front against risk; prints the publish command (docs/utility.md)",
    )
    sp.add_argument("--seed", type=int, help="every setting's seed (default: the spec's, else one drawn and printed)")
    sp.add_argument("--json", action="store_true", help="one JSON object per setting and line")
    sp.add_argument(
        "--html", help="where the trade-off page goes (default: explore-<series>.html beside the state file)"
    )
    sp.add_argument("--as", dest="actor", help=ACTOR_HELP)
    sp.add_argument("--quiet", action="store_true", help="no progress lines")


def _state_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--state", help=STATE_HELP)
    sp.add_argument("--spec", help="take the state file from this spec")


def history_args(sp: argparse.ArgumentParser) -> None:
    _state_args(sp)
    sp.add_argument("--series", help="only this series")
    sp.add_argument("--as", dest="actor", help="who runs this (audit log)")


def release_args(sp: argparse.ArgumentParser) -> None:
    """verify and report: one committed release."""
    sp.add_argument("release_id")
    _state_args(sp)
    sp.add_argument("--as", dest="actor", help="who runs this (audit log)")


def verify_args(sp: argparse.ArgumentParser) -> None:
    """verify: one committed release, and/or (--history) the whole state's chained history."""
    sp.add_argument("release_id", nargs="?", help="the release to re-verify (its history rows and manifest too)")
    sp.add_argument(
        "--history",
        action="store_true",
        help="check the whole state's history: every release row, figure and audit row against its chain, "
        "every release folder's manifest.json and the files it lists",
    )
    _state_args(sp)
    sp.add_argument("--as", dest="actor", help="who runs this (audit log)")


def series_args(sp: argparse.ArgumentParser) -> None:
    series_sub = sp.add_subparsers(dest="series_command", required=True)
    a = series_sub.add_parser(
        "change",
        help="the series' [series] settings (transient, l, composition) become the spec's: its summaries "
        "rebuilt from every release's stored groups, the whole series re-checked; refused, nothing changed, "
        "if the series would fail the check",
    )
    a.add_argument("spec", help="the series' release spec (TOML), its [series] edited")
    a.add_argument("--as", dest="actor", help=ACTOR_HELP)
    a.add_argument("--quiet", action="store_true", help="print nothing on success")


def snapshot_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("out", help="the copy's file (must not exist)")
    _state_args(sp)


def trail_args(sp: argparse.ArgumentParser) -> None:
    _state_args(sp)
    sp.add_argument("--series", help="only this series")
    sp.add_argument("--since", help="only attempts from this date on (YYYY-MM-DD, UTC)")
    sp.add_argument("--format", choices=["csv", "json"], default="csv", help="csv (default) or JSON lines")


def _audit_query_args(a: argparse.ArgumentParser, name: str) -> None:
    if name == "ask":
        a.add_argument("--where", required=True, help="SQL predicate over the QI columns")
    if name in ("ask", "batch"):
        a.add_argument("--ids", action="store_true", help="list an answer's person ids (default: counts only)")
    if name == "batch":
        a.add_argument("file", help='one predicate (or JSON object with "where") per line')
        a.add_argument("--server", action="store_true", help="decide it as a flow run of the running Prefect server")
    if name == "log":
        a.add_argument(
            "--summary",
            action="store_true",
            help="per table: how many queries were answered, denied (exactly or by the budget), refused",
        )
    a.add_argument("--as", dest="actor", help="the requester (audit log)")
    a.add_argument("--state", help=f"the state file (default ./{DEFAULT_STATE})")
    a.add_argument("--spec", help="take the state file from this spec")
    a.add_argument(
        "--table", help="which registered table (its dataset name), when there are several; default: the --spec's"
    )


def audit_args(sp: argparse.ArgumentParser) -> None:
    audit_sub = sp.add_subparsers(dest="audit_command", required=True)
    a = audit_sub.add_parser("init", help="register a secret table ([audit] l, budget, strategy)")
    a.add_argument("spec")
    a.add_argument("--as", dest="actor")
    for name, hlp in (
        ("ask", "decide one query"),
        ("batch", "decide a file of concurrent queries (a Prefect flow run with --server)"),
        ("log", "the decisions, as JSON lines"),
    ):
        _audit_query_args(audit_sub.add_parser(name, help=hlp), name)
    a = audit_sub.add_parser("set", help="change a registered table's settings (logged): its work budgets")
    a.add_argument("table", help="the registered table (its dataset name)")
    limit = a.add_mutually_exclusive_group(required=True)
    limit.add_argument("--budget", help="units of work (solves + solver nodes) per decision's check, > 0")
    limit.add_argument("--request-budget", help="units of work of one request over all its checks, > 0")
    a.add_argument("--as", dest="actor", help="who changes it (audit log); default: the OS user")
    a.add_argument("--state", help=f"the state file (default ./{DEFAULT_STATE})")
    a.add_argument("--spec", help="take the state file from this spec")


def demo_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--dir", default="demo", help="where the demo data, releases and history go")
    sp.add_argument("--rows", type=int, default=5000)
    sp.add_argument("--as", dest="actor")
    sp.add_argument("--quiet", action="store_true", help="print only the release id")
    sp.add_argument("--verbose", action="store_true", help="also print Prefect's log lines (a server's runs)")


def server_args(sp: argparse.ArgumentParser) -> None:
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


# --- the table ------------------------------------------------------------------------------


class Command(NamedTuple):
    target: str  # "module:function": the function, imported when the command runs
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]


RELEASE_COMMANDS = "privpub.flows.cli_release"
STATE_COMMANDS = "privpub.flows.cli_state"

COMMANDS: dict[str, Command] = {
    "publish": Command(f"{RELEASE_COMMANDS}:cmd_publish", "publish the next release of a series", publish_args),
    "init": Command(
        f"{RELEASE_COMMANDS}:cmd_init",
        "propose a spec for a table: kinds, quasi-identifiers and hierarchies",
        init_args,
    ),
    "serial": Command(
        f"{RELEASE_COMMANDS}:cmd_serial", "publish the next release of a serial series (global guarantee)", serial_args
    ),
    "explore": Command(
        f"{RELEASE_COMMANDS}:cmd_explore",
        "a dry run over a grid of settings: each one's figures, nothing published",
        explore_args,
    ),
    "history": Command(f"{STATE_COMMANDS}:cmd_history", "list committed releases", history_args),
    "verify": Command(
        f"{STATE_COMMANDS}:cmd_verify_or_history",  # --history alone is light; a RELEASE_ID goes on to cli_release
        "re-verify a committed release from its published files (--history: the whole state's history)",
        verify_args,
    ),
    "report": Command(f"{RELEASE_COMMANDS}:cmd_report", "(re)write the HTML report of a release", release_args),
    "series": Command(
        f"{RELEASE_COMMANDS}:cmd_series", "change the settings of a series that keeps its history", series_args
    ),
    "snapshot": Command(
        f"{STATE_COMMANDS}:cmd_snapshot",
        "a consistent copy of the state file for analysts (a DuckDB session on the copy blocks nobody)",
        snapshot_args,
    ),
    "trail": Command(
        f"{STATE_COMMANDS}:cmd_trail", "export the audit trail (every attempt and its outcome)", trail_args
    ),
    "audit": Command(
        "privpub.flows.cli_audit:cmd_audit", "answer online microdata queries under l-uncertainty", audit_args
    ),
    "demo": Command(f"{RELEASE_COMMANDS}:cmd_demo", "publish a release of the embedded census sample", demo_args),
    "server": Command(
        "privpub.flows.service:command",
        "the release service: Prefect server, UI and served deployments",
        server_args,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="privpub", description="privacy-preserving microdata publishing")
    sub = p.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        sp = sub.add_parser(name, help=command.help)
        command.arguments(sp)
        sp.set_defaults(target=command.target)
    return p


# the commands that read a spec's input first thing: their CSV input is parsed while they import
READS_AHEAD = ("publish", "serial")
MAKE_RELEASES = (*READS_AHEAD, "demo")  # the commands whose steps run beside the state's writes


HASH_AHEAD_ROWS = 100_000  # fewer ids hash in milliseconds: not worth a second thread's imports


def hash_ids_ahead(spec: Any, table: Any) -> None:
    """On the read-ahead thread, after the parse: the person ids hashed under the state's key
    (state/pseudonyms.py `hash_ahead`) while the imports leave the other core idle; the series
    check takes them if its ids are these (one row per person; `@row` is not a file's column).
    At the thread's normal priority: the series check waits for these pseudonyms, and a lowered
    one would starve them on a busy machine."""
    ds = spec.dataset
    if ds.rows_per_person != "one" or ds.person_id not in table.column_names or table.num_rows < HASH_AHEAD_ROWS:
        return
    load_lazily("privpub.state.pseudonyms:hash_ahead")(spec.state_path, table.column(ds.person_id))


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h


def _mallopt(settings: list[tuple[int, int]], unless_set: tuple[str, ...]) -> bool:
    """glibc's mallopt(param, value) for each setting in turn, unless the operator set one of the
    environment variables `unless_set` (then glibc's own policy, as for a C library without
    mallopt: musl's, or not Linux); True when every setting took."""
    if any(name in os.environ for name in unless_set) or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = load_lazily("ctypes:CDLL")(None).mallopt
    except AttributeError:  # a C library without mallopt (musl): its own allocator's policy
        return False
    return all(mallopt(param, value) for param, value in settings)


def one_malloc_arena() -> bool:
    """glibc's malloc keeps one arena for every thread (mallopt M_ARENA_MAX = 1), unless the
    operator set MALLOC_ARENA_MAX. A publish runs steps beside each other (flows/beside.py); with
    an arena per thread, what one step freed could not serve the other's next arrays: the 1M
    publish peaked 100-150 MiB higher and spent more system time (docs/benchmarks.md). Called by
    the process's entry before any thread starts; True when the setting took."""
    return _mallopt([(M_ARENA_MAX, 1)], ("MALLOC_ARENA_MAX",))


HEAP_ARRAYS_UP_TO = 1 << 30  # bytes: larger arrays still get their own mapping, given back when freed
MALLOC_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def malloc_keeps_freed_memory() -> bool:
    """For a one-shot command that builds million-row arrays step after step (publish, serial):
    glibc's malloc serves arrays up to HEAP_ARRAYS_UP_TO from its heap and keeps what is freed
    there until the process ends (mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD), so the next
    step's arrays reuse pages already touched instead of faulting in fresh ones: the 1M publish
    took 15% fewer page faults and 0.1-0.3 s less system time, its peak the same within 2%
    (docs/benchmarks.md, session 24). Not for long-lived commands (the server, the auditor): their
    peak would stay theirs. Left to glibc when the operator set a malloc variable; True when the
    settings took."""
    # the trim threshold first: setting either fixes both (no dynamic threshold any more)
    return _mallopt(
        [(M_TRIM_THRESHOLD, 2 * HEAP_ARRAYS_UP_TO - 1), (M_MMAP_THRESHOLD, HEAP_ARRAYS_UP_TO)], MALLOC_SETTINGS
    )


def main(argv: list[str] | None = None) -> int:
    """The `privpub` command. As the process's entry (argv None: the console script, `python -m`;
    a call in a longer-lived process, a test, passes argv and is left as it was), the garbage
    collector skips what lives to the end (issue 43): the command's imports run without it
    (a tenth of their time went to collections that found nothing: modules, classes and
    functions stay), and what they made is frozen, as is everything alive when the command
    ends, so the interpreter's last collections do not walk it (pandera's objects alone cost
    half a second at exit). Nothing is lost by leaving that to the process's exit: every file
    and the state are closed by then (`with` blocks; the state detached)."""
    entry = argv is None
    args = build_parser().parse_args(argv)
    private_umask()  # secret-bearing files owner-only; published ones follow the operator's umask
    try:
        if entry:
            gc.disable()
            # Arrow's default pool (mimalloc) keeps the pages a step frees for its next
            # allocations, and numpy's and DuckDB's arrays cannot use them: the 1M publish peaked
            # 100-150 MiB higher on it (issue 43, docs/benchmarks.md); an operator's choice stays
            os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
            # pydantic and typeguard (pandera's) each scan every installed package's entry points
            # for plugins of theirs, which privpub does not use: 10-20 ms a command (issue 43,
            # item 4); an operator's setting stays
            os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
            os.environ.setdefault("TYPEGUARD_DISABLE_PLUGIN_AUTOLOAD", "1")
            one_malloc_arena()
            if args.command in READS_AHEAD:
                malloc_keeps_freed_memory()
                if getattr(args, "task_runner", None) != "dask":
                    # the input parsed by Arrow while this command's imports run (schemas/read_ahead.py)
                    load_lazily("privpub.schemas.read_ahead:ahead")(args.spec, hash_ids_ahead)
            if args.command in MAKE_RELEASES:  # (after the read-ahead's start: this imports DuckDB)
                load_lazily("privpub.state.attached:leave_a_core")()  # the state's DuckDB leaves a core
                # a small table's steps and helpers in one thread: handing the interpreter between
                # threads across cores costs more than they save on few rows (tasks/core/threads.py)
                load_lazily("privpub.tasks.core.threads:keep_small_work_in_one_thread")()
        try:
            run: Callable[[Any], int] = load_lazily(args.target)
        finally:
            if entry:
                gc.freeze()
                gc.enable()
        return run(args)
    except KeyboardInterrupt:
        print("privpub: interrupted; nothing was published by this run", file=sys.stderr)
        return 130
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and reader_gone():
            return leave_quietly()
        if os.environ.get("PRIVPUB_DEBUG"):
            traceback.print_exc()
        print(f"privpub: error: {public_message(exc)}", file=sys.stderr)
        return 1
    finally:
        if entry:
            gc.freeze()


READER_GONE = 128 + 13  # a Unix tool's status when SIGPIPE ends it (`privpub trail | head`)


def reader_gone() -> bool:
    """Whether the reader of stdout or stderr has closed its end of the pipe (`head` had enough
    lines): then a BrokenPipeError is no error of the command's."""
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _, events in poll.poll(0)):
            return True
    return False


def leave_quietly() -> int:
    """End as a Unix tool whose reader went away: nothing more written (the output streams point
    at /dev/null, so the interpreter's last flush finds no closed pipe), status READER_GONE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return READER_GONE


def __getattr__(name: str) -> Any:
    """The release commands' checks, as `privpub.flows.cli.check_spec` (tests call them)."""
    if name in ("check_spec", "check_input", "print_summary"):
        return load_lazily(f"{RELEASE_COMMANDS}:{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def end_process(code: int) -> None:
    """End the process with status `code` once the command has returned, without the
    interpreter's teardown of every module and object (25-35 ms after a publish, issue 43 item 4;
    the collector's part is skipped already, `main`): the state's DuckDB databases closed,
    the exit handlers run (logging's flush, temporary folders removed, a library's own), stdout and
    stderr flushed, then `os._exit`. Returns, and the ordinary exit follows, while a thread that is
    not a daemon still runs (the ordinary exit waits for it), a state file is still open, or a
    stream cannot be flushed (a closed pipe: the interpreter's exit reports it as it always did)."""
    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        return
    attached = sys.modules.get("privpub.state.attached")  # not imported: no state was opened
    if attached is not None and not attached.close_idle():
        return
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def console_script() -> None:
    """The console script `privpub`: `main`, then the process ends at once (`end_process`).
    (`python -m privpub.flows.cli` exits the ordinary way: a caller of runpy goes on after it.)"""
    code = main()
    end_process(code)
    sys.exit(code)


if __name__ == "__main__":
    sys.exit(main())

"""How the store opens the state file (issue 43, item 4): one in-memory DuckDB database per state
file, kept for the process, on which each read or write ATTACHes the file (about 2 ms) and
DETACHes it after, instead of a new DuckDB database per connection (10-40 ms each: its catalog
of built-in functions built and torn down; a publish opened the state eight times).

What a caller sees is unchanged: a connection whose default catalog is the state file, holding
DuckDB's file lock (shared when read-only) exactly while it is open; DETACH checkpoints a
written file as closing a connection did, and a failed ATTACH raises the error `duckdb.connect`
raised (the lock another process holds, a file that is not a database). Users of one state file
in this process at once share its attachment, as `duckdb.connect` shared a database of the same
configuration; another mode meanwhile is refused as `duckdb.connect` refused it."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb

ALIAS = "privpub_state"
KEEP = 4  # idle databases kept (a test process opens many state files; a command one)


@dataclass
class _Host:
    base: duckdb.DuckDBPyConnection
    read_only: bool = True  # the attachment's mode while users > 0
    users: int = 0


_LOCK = threading.Lock()
_HOSTS: dict[str, _Host] = {}
_THREADS: list[int | None] = [None]  # DuckDB's threads for databases opened next (None: its default)
_PID = [os.getpid()]
_INHERITED: list[_Host] = []  # a forked child never touches its parent's databases, nor frees them


def _sql_path(path: str) -> str:
    return path.replace("'", "''")


def _host(path: str) -> _Host:
    if os.getpid() != _PID[0]:
        _INHERITED.extend(_HOSTS.values())
        _HOSTS.clear()
        _PID[0] = os.getpid()
    host = _HOSTS.pop(path, None)
    if host is None:
        # where a file database spills (DuckDB's default for it), not the working folder
        config: dict[str, str | bool | int | float | list[str]] = {"temp_directory": path + ".tmp"}
        if _THREADS[0] is not None:
            config["threads"] = _THREADS[0]
        host = _Host(duckdb.connect(config=config))
        idle = [p for p, h in _HOSTS.items() if h.users == 0]
        for old in idle[: max(0, len(idle) - KEEP + 1)]:
            _HOSTS.pop(old).base.close()
    _HOSTS[path] = host  # the most recently used last
    return host


def attach(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection on the state file at `path`, its default catalog; `detach` ends it."""
    key = str(path)
    with _LOCK:
        host = _host(key)
        if host.users == 0:
            mode = " (READ_ONLY)" if read_only else ""
            host.base.execute(f"ATTACH '{_sql_path(key)}' AS {ALIAS}{mode}")
            host.read_only = read_only
        elif host.read_only != read_only:
            raise duckdb.ConnectionException(
                f"Can't open a connection to same database file with a different configuration than existing "
                f"connections ({key} is open {'read-only' if host.read_only else 'for writing'} in this process)"
            )
        host.users += 1
        con = host.base.cursor()
    try:
        con.execute(f"USE {ALIAS}")
    except BaseException:
        detach(path, con)
        raise
    return con


def detach(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """End a connection from `attach`; the last one open DETACHes the file (a written one is
    checkpointed, as closing its connection did). A database whose DETACH failed is closed."""
    key = str(path)
    with _LOCK:
        host = _HOSTS[key]
        try:
            con.close()
        finally:
            host.users -= 1
            if host.users == 0:
                try:
                    host.base.execute(f"DETACH {ALIAS}")
                except BaseException:
                    del _HOSTS[key]
                    host.base.close()
                    raise


def close_idle() -> bool:
    """Close every database kept for a state file no connection uses (a process about to end
    without the interpreter's teardown: DuckDB then removes its spill folders itself); False, and
    nothing closed, when a connection is still open."""
    with _LOCK:
        if any(host.users for host in _HOSTS.values()):
            return False
        while _HOSTS:
            _HOSTS.popitem()[1].base.close()
        return True


def leave_a_core() -> None:
    """The state's DuckDB runs one thread fewer than the machine has cores (one at least) in the
    databases opened from now on: a release's commit writes the state while its evaluation ends
    on a thread beside it, and on two cores DuckDB's second thread took that thread's core (the
    1M publish ended 0.33 s sooner with one, the demo 0.03 s; session 25, docs/benchmarks.md).
    For the commands that make a release; the others keep DuckDB's default."""
    _THREADS[0] = max(1, (os.cpu_count() or 1) - 1)

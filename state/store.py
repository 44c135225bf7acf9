"""The DuckDB store: it opens every connection to the state database. A technique's own SQL runs
only on connections lent by it: `query(fn)` (read-only) and `commit_release(on_commit=...)`
(inside the commit transaction).

Commit protocol of one release (a crash at any point leaves either no release or a whole one):
1. the published tables are written as Parquet under <dir>/.staging/<token>/ while the writing
   process holds an flock on <token>/.owner (the kernel drops it if the process dies);
2. one DuckDB transaction inserts the release row, its tables, metrics, private metadata and an
   audit-log row: this COMMIT is the moment the release exists;
3. the staging folder is renamed to <dir>/<release_id>/.
Recovery runs whenever the store is opened for writing: a staging folder whose release committed
is renamed into place (roll forward); one whose owner is gone and that never committed is deleted
(roll back). Writers serialise on an flock of <state>.lock, readers share it.
Nothing after the COMMIT fails the commit (issue 41, item 2): the release id is checked before it
(a name, its folder under <dir>), and a rename that fails or is killed leaves the files staged for
the next writer's roll forward, said in a warning; a roll forward that cannot be done is a warning
too, never an error that would stop every later writer.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

if TYPE_CHECKING:  # the tables the read-outs return (DuckDB's .df()); pyarrow: imported where used,
    # so that `privpub history` loads neither it nor numpy (issue 43, item 4)
    import pandas as pd
    import pyarrow as pa

from privpub.schemas.errors import StaleHistory, StateBusy, StateError
from privpub.schemas.figure_names import current_name, old_names
from privpub.schemas.names import inside, name_problem, shown
from privpub.state import attached, chain, ledger
from privpub.state.failpoints import failpoint
from privpub.state.migrations import MIGRATIONS
from privpub.state.permissions import as_published, make_public_dir, owner_only, private_umask
from privpub.state.pseudonyms import (
    KEY_BYTES,
    Pseudonyms,
    create_key,
    first_use,
    key_path,
    missing_key,
    read_key,
    record_check,
    recorded_check,
    wrong_key,
)

STAGING = ".staging"


class PrivacyFigure(Protocol):
    """What the store records of a privacy result (tasks/core/types.py PrivacyResult, a layer up)."""

    @property
    def model(self) -> str: ...
    @property
    def value(self) -> Any: ...
    @property
    def threshold(self) -> Any: ...
    @property
    def passed(self) -> bool: ...
    @property
    def worst(self) -> Mapping[str, Any]: ...


class _Digest(Protocol):
    """A hashlib object, as _hash_into feeds it."""

    def update(self, data: bytes, /) -> None: ...


def lock_wait_seconds() -> float:
    """How long a command waits for a state file another process holds (the one lock-wait
    policy: privpub's own writers and an analyst's open DuckDB session alike). Setting:
    PRIVPUB_LOCK_WAIT, seconds, default 300."""
    try:
        return max(0.0, float(os.environ.get("PRIVPUB_LOCK_WAIT", "300")))
    except ValueError:
        return 300.0


def notice(message: str) -> None:
    """A warning line for the operator: the run logger inside a flow, else stderr (a command that
    runs no flow never imports Prefect for it)."""
    try:
        if "prefect" not in sys.modules:
            raise LookupError
        from prefect.logging import get_run_logger  # lazy: the state layer never loads Prefect itself

        # flagged: the CLI's terminal shows it as its own "[privpub] ..." line, as without a
        # server (flows/cli.py quiet_prefect_console); the run's log keeps it for the UI
        get_run_logger().warning(message, extra={"privpub_line": True})
    except Exception:
        print(f"[privpub] {message}", file=sys.stderr, flush=True)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _hash_into(h: _Digest, path: Path) -> None:
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    _hash_into(h, path)
    return h.hexdigest()


def sha256_files(files: list[Path], root: Path) -> str:
    """One sha256 over several files (a partitioned input, a folder table): for each file in
    the order of its name relative to `root` (POSIX form), the name in UTF-8, a NUL byte, its
    size as 8 bytes big-endian, then its bytes. Renaming, adding, removing or changing any file
    changes it; listing order does not."""
    h = hashlib.sha256()
    named = sorted((Path(f).resolve().relative_to(Path(root).resolve()).as_posix(), Path(f)) for f in files)
    for name, path in named:
        h.update(name.encode() + b"\0" + path.stat().st_size.to_bytes(8, "big"))
        _hash_into(h, path)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_files(folder: Path) -> None:
    for path in folder.iterdir():
        if path.is_file() and not path.name.startswith("."):
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    _fsync_dir(folder)


@dataclass
class StagedFiles:
    """Published tables written to a hidden staging folder, not yet part of any release."""

    token: str
    output_dir: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    _owner: Any = None

    @property
    def path(self) -> Path:
        return self.output_dir / STAGING / self.token

    def release_owner(self) -> None:
        if self._owner is not None:
            self._owner.close()
            self._owner = None

    def discard(self) -> None:
        self.release_owner()
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()  # only succeeds when no other staging folder is there


def _lock_holder(text: str) -> str:
    """Who holds DuckDB's file lock, from its message: the program's name and pid (a DuckDB
    session, read-only ones included, holds it while open)."""
    found = re.search(r"Conflicting lock is held in (.+?) \(PID (\d+)\)", text)
    if not found:
        return "held open by another process"
    return (
        f"held open by {Path(found[1]).name}, pid {found[2]}: a DuckDB session on the state file, read-only "
        "ones included, blocks writers; analysts read a copy (privpub snapshot)"
    )


def _sql_text(text: str) -> str:
    """`text` inside a single-quoted SQL literal."""
    return text.replace("'", "''")


def _entry(
    actor: str,
    action: str,
    target: str | None,
    flow_run_id: str | None,
    detail: dict[str, Any],
    outcome: str | None = None,
) -> dict[str, Any]:
    """An audit-log row kept outside the database (the journal, an attempt's marker)."""
    entry = {"logged_at": _now().isoformat(), "actor": actor, "action": action, "target": target}
    return {**entry, "outcome": outcome, "flow_run_id": flow_run_id, "detail": detail}


def _in_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """An explicit transaction is open on `con`. Probed, not tried: a BEGIN refused inside a
    transaction aborts it. Outside one, each statement runs in a transaction of its own."""
    first = con.execute("SELECT txid_current()").fetchone()
    second = con.execute("SELECT txid_current()").fetchone()
    return first == second


@contextlib.contextmanager
def _atomic(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """A transaction of its own unless the caller holds one (DuckDB has no savepoints): what runs
    inside commits together or not at all, also when the process is killed half way."""
    if _in_transaction(con):  # the caller's transaction commits it
        yield
        return
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _insert_entry(con: duckdb.DuckDBPyConnection, e: dict[str, Any]) -> None:
    with _atomic(con):  # an audit row and its chain entry exist together or not at all
        _insert_row(con, e)


def _insert_row(con: duckdb.DuckDBPyConnection, e: dict[str, Any]) -> None:
    row = con.execute(
        "INSERT INTO audit_log (logged_at, actor, action, target, outcome, flow_run_id, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [e["logged_at"], e["actor"], e["action"], e["target"], e["outcome"], e["flow_run_id"],
         json.dumps(e["detail"], default=str)],
    ).fetchone()  # fmt: skip
    assert row is not None
    failpoint("audit-row")  # a kill here must leave neither the row nor its chain entry
    chain.append_audit(con, row[0])  # the row at the end of the audit chain, in the same transaction


@dataclass
class AttemptMarker:
    """An attempt in progress (Store.begin_attempt): its file, flocked while the attempt runs."""

    path: Path
    handle: Any
    state: str = ""  # the state file it is an attempt on

    @property
    def token(self) -> str:
        return self.path.stem

    def close(self) -> None:
        """The attempt ended and logged its outcome: no marker remains (nor an empty folder)."""
        self.path.unlink(missing_ok=True)
        self.handle.close()
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()  # only when no other attempt's marker is there


# the attempts this context runs, by state file: the audit rows an attempt writes carry its
# marker's token, so the next writer never folds a marker whose attempt logged its outcome into
# an "interrupted" row as well (a kill between the COMMIT and the marker's removal)
_ATTEMPTS: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar("privpub_attempts", default=())


@contextlib.contextmanager
def attempt_running(marker: AttemptMarker) -> Iterator[None]:
    """While the block runs, audit rows written to the marker's state file name its attempt."""
    token = _ATTEMPTS.set((*_ATTEMPTS.get(), (marker.state, marker.token)))
    try:
        yield
    finally:
        _ATTEMPTS.reset(token)


def open_staging(output_dir: Path) -> StagedFiles:
    """A new private staging folder under `<output_dir>/.staging/`, its `.owner` flock held (the
    kernel drops it if this process dies, and the next writer then deletes the folder)."""
    private_umask()  # staged files are secret until the commit publishes them
    staged = StagedFiles(uuid.uuid4().hex[:12], Path(output_dir).resolve())
    make_public_dir(staged.output_dir)
    inside(staged.output_dir, STAGING, staged.token).mkdir(parents=True, exist_ok=False)
    owner = open(staged.path / ".owner", "w")
    fcntl.flock(owner, fcntl.LOCK_EX)
    staged._owner = owner
    return staged


def stage_tables(output_dir: Path, tables: dict[str, Any]) -> StagedFiles:
    """Write each table as `<name>.parquet` into a new staging folder; a PartedTable (already
    written as parts, in a staging folder of its own) is moved in as the folder `<name>/`."""
    staged = open_staging(output_dir)
    try:
        for name, table in tables.items():
            problem = name_problem(name)
            if problem:  # a technique's (or plug-in's) table name becomes a file name
                raise StateError(f"published table name: {problem}")
            # a PartedTable (tasks/core/parted_table.py, a layer above: known by its parts)
            if hasattr(table, "parts"):
                path = inside(staged.path, name)
                os.replace(table.folder, path)
                table.folder = path
                if table.draft is not None:  # the now empty folder it was written in
                    table.draft.discard()
                _fsync_files(path)
                staged.files[name] = {"file": name, "n_rows": table.num_rows, "sha256": sha256_files(table.parts, path)}
            else:
                path = inside(staged.path, f"{name}.parquet")
                write_parquet(table, path)
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
                staged.files[name] = {"file": path.name, "n_rows": table.num_rows, "sha256": sha256_file(path)}
            failpoint("stage")
        _fsync_dir(staged.path)
    except BaseException:
        staged.discard()
        raise
    return staged


def write_parquet(table: pa.Table, path: Path) -> None:
    """`table` as a Parquet file. Lists of dictionary codes (tasks/partition/generalized_table.py
    `coded_lists`) are written as the text they stand for, and the file reads back as the table
    with plain `list<string>` columns: written without Arrow's schema (which would restore the
    dictionaries), then checked; a table whose types would not read back the same is decoded
    and written with its schema (issue 43)."""
    pq = first_use("pyarrow.parquet")
    plain = _plain_schema(table.schema)
    if plain.equals(table.schema):
        pq.write_table(table, path, write_statistics=_flat_columns(table))
        return
    # what the decoded table reads back as, written with its schema (no rows: a few bytes)
    expected = pq.read_schema(first_use("pyarrow").BufferReader(_table_to_parquet_bytes(table.slice(0, 0).cast(plain))))
    pq.write_table(table, path, write_statistics=_flat_columns(table), store_schema=False)
    if not pq.read_schema(path).remove_metadata().equals(expected.remove_metadata()):
        decoded = table.cast(plain)
        pq.write_table(decoded, path, write_statistics=_flat_columns(decoded))


def _plain_schema(schema: pa.Schema) -> pa.Schema:
    """The schema with every list of dictionary codes as the list of their values."""
    arrow = first_use("pyarrow")
    fields = []
    for f in schema:
        if arrow.types.is_list(f.type) and arrow.types.is_dictionary(f.type.value_type):
            f = f.with_type(arrow.list_(arrow.field(f.type.value_field.name, f.type.value_type.value_type)))
        fields.append(f)
    return arrow.schema(fields, metadata=schema.metadata)


def _flat_columns(table: pa.Table) -> list[str]:
    """The columns whose Parquet statistics (min and max per row group) say something: a list's
    are the least and greatest of its items, which no reader filters by, and cost a fifth of
    the writing of a generalized table (issue 43)."""
    return [f.name for f in table.schema if not first_use("pyarrow").types.is_nested(f.type)]


def published_sha256(path: Path) -> str:
    """The fingerprint of a published table: its file's sha256, or sha256_files over a folder's
    parts (what the commit recorded)."""
    path = Path(path)
    if path.is_dir():
        return sha256_files([p for p in path.iterdir() if p.is_file()], path)
    return sha256_file(path)


def _table_to_parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    first_use("pyarrow.parquet").write_table(table, buf)
    return buf.getvalue()


def check_output_dir(folder: Path, what: str = "output folder") -> None:
    """Before any work: the folder exists or can be created, and can be written."""
    folder = Path(folder).resolve()
    p = folder
    while not p.exists():
        p = p.parent
    if not p.is_dir():
        raise StateError(f"the {what} {folder} cannot be created: {p} is a file, not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        raise StateError(f"the {what} {folder} is not writable ({p} does not allow it)")


DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file (after the header's checksum)


def state_file_problem(path: Path) -> str | None:
    """Why `path` cannot be a state file, before anything opens it or writes beside it (None:
    it can, or does not exist yet): a folder, a device such as /dev/null, a FIFO, or a file that
    is not a DuckDB database (the input table, the spec). Its first bytes are read only from a
    regular file, so a FIFO never blocks here."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a device, FIFO or socket): it cannot be a state file"
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if head[8:12] != DUCKDB_MAGIC:
        return "is not a privpub state file (not a DuckDB database)"
    return None


class Store:
    def __init__(self, path: str | Path, lock_timeout: float | None = None, *, makes_key: bool = True):
        self.path = Path(path).resolve()
        self.lock_timeout = lock_wait_seconds() if lock_timeout is None else lock_timeout
        # False for a caller that never commits a release (explore): `pseudonyms` then neither
        # makes the key file nor records one, whatever a technique asks (serial asks for it)
        self.makes_key = makes_key

    # --- locking and connections ----------------------------------------------------------
    def _wait(self, attempt: int, deadline: float, holder: str) -> None:
        """Bounded backoff (0.1 s doubling to 2 s); the first wait is announced, the end says who."""
        if time.monotonic() > deadline:
            raise StateBusy(
                f"the state file {self.path} is busy ({holder}); waited {self.lock_timeout:.0f} s (PRIVPUB_LOCK_WAIT)"
            ) from None
        if attempt == 0:
            notice(f"the state file {self.path} is busy ({holder}); waiting up to {self.lock_timeout:.0f} s")
        time.sleep(min(2.0, 0.1 * 2 ** min(attempt, 5)))

    @contextlib.contextmanager
    def _flock(
        self, mode: int, suffix: str = ".lock", holder: str = "another privpub process is writing it"
    ) -> Iterator[None]:
        private_umask()
        problem = state_file_problem(self.path)
        if problem is not None:  # refused before a lock file is made beside it (/dev/null.lock)
            raise StateError(f"the state file {self.path} {problem}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(str(self.path) + suffix, "a")
        except OSError as exc:
            raise StateError(f"cannot use the state file {self.path}: {exc.strerror}") from None
        with lock:
            deadline = time.monotonic() + self.lock_timeout
            attempt = 0
            while True:
                try:
                    fcntl.flock(lock, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    self._wait(attempt, deadline, holder)
                    attempt += 1
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def series_lock(self, series: str) -> contextlib.AbstractContextManager[None]:
        """Held by a publish of `series` from its first look at the series' history to its commit:
        publishes of one series run one after the other (a scheduler firing overlapping runs),
        each seeing the one before (issue 25, item 5). Waited for under the lock-wait policy; the
        kernel drops it if the process dies. The file is named by a hash: no series name in it."""
        digest = hashlib.sha256(series.encode()).hexdigest()[:16]
        return self._flock(fcntl.LOCK_EX, f".series-{digest}.lock", "another publish of this series is running")

    def _connect(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        """DuckDB's own file lock (an analyst's `duckdb privpub.duckdb` holds it for writing) is
        waited for under the same policy; a file that is not a DuckDB database is named."""
        deadline = time.monotonic() + self.lock_timeout
        attempt = 0
        while True:
            try:
                con = attached.attach(self.path, read_only)
                break
            except duckdb.IOException as exc:
                text = str(exc)
                if "not a valid DuckDB database" in text:
                    raise StateError(f"{self.path} is not a privpub state file (not a DuckDB database)") from None
                if "lock" not in text:
                    raise StateError(f"cannot open the state file {self.path}: {text.splitlines()[0]}") from None
                self._wait(attempt, deadline, _lock_holder(text))
                attempt += 1
            except duckdb.Error as exc:
                raise StateError(f"cannot open the state file {self.path}: {str(exc).splitlines()[0]}") from None
        if not read_only:
            owner_only(self.path)  # also tightens a state file created by an older version
        return con

    @contextlib.contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._flock(fcntl.LOCK_EX):
            con: duckdb.DuckDBPyConnection | None = self._connect(read_only=False)
            try:
                assert con is not None
                if self._migrate(con):
                    attached.detach(self.path, con)
                    con = None
                    self._compact()
                    con = self._connect(read_only=False)
                with self._readable():
                    self._recover(con)
                    self._fold_journal(con)
                    self._fold_interrupted(con)
                    yield con
            finally:
                if con is not None:
                    attached.detach(self.path, con)

    @contextlib.contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.path.exists():
            raise StateError(f"no state file at {self.path} (nothing has been published there yet)")
        with self._flock(fcntl.LOCK_SH):
            con = self._connect(read_only=True)
            try:
                with self._readable():
                    yield con
            finally:
                attached.detach(self.path, con)

    @contextlib.contextmanager
    def _readable(self) -> Iterator[None]:
        """A state file DuckDB opens but cannot read back (truncated, overwritten in part) is
        named in one line, in every command, instead of an internal error."""
        try:
            yield
        except duckdb.IOException as exc:
            if "Could not read" not in str(exc) and "corrupt" not in str(exc).lower():
                raise
            raise StateError(
                f"the state file {self.path} is damaged (DuckDB could not read it back: truncated or overwritten?); "
                "restore it from a snapshot (privpub snapshot) or a backup"
            ) from None

    def snapshot(self, out: Path) -> Path:
        """A consistent copy of the state database at `out` (0600: it holds the series' private
        history), for analysts: a DuckDB session on the copy blocks nobody, while one on the state
        file itself, even read-only, makes every publish wait. Taken under the readers' lock, so
        no commit is half in it; written beside `out` and renamed into place."""
        out = Path(out).expanduser().resolve()
        if out.exists():
            raise StateError(f"{out} already exists; name a new file for the snapshot")
        check_output_dir(out.parent, "snapshot's folder")
        partial = out.with_name(f".{out.name}.partial")
        partial.unlink(missing_ok=True)
        private_umask()
        with self.read(), duckdb.connect() as con:  # no privpub writer until the copy is done
            con.execute(f"ATTACH '{_sql_text(str(self.path))}' AS state (READ_ONLY)")
            con.execute(f"ATTACH '{_sql_text(str(partial))}' AS snapshot")
            con.execute("COPY FROM DATABASE state TO snapshot")
        owner_only(partial)
        os.replace(partial, out)
        return out

    def check_usable(self) -> None:
        """Before any work: the state file's folder is writable and an existing state file is a
        DuckDB database (waiting, under the lock-wait policy, if another process holds it)."""
        check_output_dir(self.path.parent, "state file's folder")
        if self.path.exists():
            with self.read():
                pass

    # --- attempts that could not be logged ----------------------------------------------------
    @property
    def journal_path(self) -> Path:
        return Path(str(self.path) + ".journal")

    def log_attempt(
        self,
        actor: str,
        action: str,
        target: str | None,
        outcome: str,
        flow_run_id: str | None = None,
        detail: dict[str, Any] | None = None,
        journal_only: bool = False,
    ) -> str:
        """Log an attempt; when the state file cannot be written (locked, corrupt, unwritable
        folder), append it to the journal beside it, which the next writer folds into audit_log.
        journal_only: straight to the journal. Returns where it went ("audit_log", "journal" or
        "nowhere")."""
        detail = self.attempt_detail(detail or {})
        try:
            if journal_only:
                raise StateError("to the journal")
            self.log(actor, action, target, outcome, flow_run_id, detail)
            return "audit_log"
        except Exception:
            if not self.path.is_file() and self.path.exists():
                return "nowhere"  # a device or a folder: nothing beside it is privpub's to write
            entry = _entry(actor, action, target, flow_run_id, detail or {}, outcome=outcome)
            try:
                private_umask()
                with open(self.journal_path, "a") as f:
                    f.write(json.dumps(entry, default=str) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                return "journal"
            except OSError:
                return "nowhere"

    # --- attempts in progress ----------------------------------------------------------------
    @property
    def attempts_dir(self) -> Path:
        return Path(str(self.path) + ".attempts")

    def begin_attempt(
        self, actor: str, action: str, target: str | None, flow_run_id: str | None, detail: dict[str, Any]
    ) -> AttemptMarker | None:
        """A marker of an attempt in progress, `<state>.attempts/<token>.json`, its flock held
        until `AttemptMarker.close()`. A process killed meanwhile (even by SIGKILL) leaves it
        unlocked, and the next writer turns it into an audit-log row "interrupted". None when
        the folder cannot be written (the attempt goes on; its outcome is still logged)."""
        entry = _entry(actor, action, target, flow_run_id, detail)
        private_umask()
        for _ in range(3):  # another attempt's end may remove the empty folder in between
            try:
                self.attempts_dir.mkdir(exist_ok=True)
                token = uuid.uuid4().hex[:16]
                handle = open(self.attempts_dir / f"{token}.new", "w")
            except FileNotFoundError:
                continue
            except OSError:
                return None
            # locked and written before it is named *.json: a writer never folds a live marker
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.write(json.dumps(entry, default=str))
            handle.flush()
            path = self.attempts_dir / f"{token}.json"
            os.rename(self.attempts_dir / f"{token}.new", path)
            return AttemptMarker(path, handle, str(self.path))
        return None

    def _fold_interrupted(self, con: duckdb.DuckDBPyConnection) -> None:
        """Markers of attempts whose process died: one audit-log row each, outcome "interrupted"."""
        if not self.attempts_dir.is_dir():
            return
        markers = sorted(self.attempts_dir.glob("*.json"))
        logged = {  # attempts whose outcome has its row already (killed after writing it)
            r[0]
            for r in con.execute(
                "SELECT DISTINCT detail->>'attempt' FROM audit_log WHERE detail->>'attempt' IN (SELECT unnest(?))",
                [[m.stem for m in markers]],
            ).fetchall()
        }
        for marker in markers:
            if not self._lock_released(marker):
                continue  # a live attempt
            try:
                e = json.loads(marker.read_text())
            except (OSError, json.JSONDecodeError):
                e = None  # killed before its entry was written: nothing to say who it was
            if e is not None and marker.stem not in logged:
                message = "the process ended before the attempt did (killed?)"
                _insert_entry(con, {**e, "outcome": "interrupted", "detail": {**e["detail"], "message": message}})
            marker.unlink(missing_ok=True)
        for unnamed in self.attempts_dir.glob("*.new"):  # killed before its marker was named
            if self._lock_released(unnamed):
                unnamed.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.attempts_dir.rmdir()

    def _fold_journal(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.journal_path.is_file():
            return
        lines = self.journal_path.read_text().splitlines()
        con.execute("BEGIN TRANSACTION")
        for line in lines:
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            _insert_entry(con, {**e, "detail": {**e["detail"], "journaled": True}})
        con.execute("COMMIT")
        self.journal_path.unlink()

    # --- schema ---------------------------------------------------------------------------
    def _migrate(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Apply the pending migrations, each in its transaction. True when one rewrote values
        the file must not keep in its freed blocks (migration 9: person ids): compact it then.
        A new file (no table yet) takes them all in one transaction: all or nothing as each one
        alone, and one commit (one WAL sync) instead of one per migration (issue 43 item 4)."""
        new_file = _one_value(con, "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database()") == 0
        if new_file:
            con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "description VARCHAR, applied_at TIMESTAMP)"
            )
            done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
            compact = False
            for version, description, sql in MIGRATIONS:
                if version not in done:
                    compact = self._apply(con, version, description, sql, own_transaction=not new_file) or compact
            if new_file:
                con.execute("COMMIT")
        except BaseException:
            if new_file:
                con.execute("ROLLBACK")
            raise
        return compact

    def _apply(
        self, con: duckdb.DuckDBPyConnection, version: int, description: str, sql: Any, own_transaction: bool
    ) -> bool:
        """One migration applied and recorded (in its own transaction unless the caller holds one)."""
        if own_transaction:
            con.execute("BEGIN TRANSACTION")
        try:
            compact = False
            if callable(sql):
                compact = bool(sql(con, self.path))
            else:
                con.execute(sql)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, _now()])
            if own_transaction:
                con.execute("COMMIT")
        except BaseException:
            if own_transaction:
                con.execute("ROLLBACK")
            raise
        return compact

    def _compact(self) -> None:
        """Rewrite the state file into a fresh one (under the writers' lock, no connection open):
        DuckDB reuses freed blocks but never clears them, so values a migration replaced would
        otherwise stay readable in the file's bytes. Written beside it, then renamed into place."""
        fresh = self.path.with_name(f".{self.path.name}.compact")
        fresh.unlink(missing_ok=True)
        private_umask()
        with duckdb.connect() as con:
            con.execute(f"ATTACH '{_sql_text(str(self.path))}' AS state (READ_ONLY)")
            con.execute(f"ATTACH '{_sql_text(str(fresh))}' AS fresh")
            con.execute("COPY FROM DATABASE state TO fresh")
        owner_only(fresh)
        with open(fresh, "rb") as f:
            os.fsync(f.fileno())
        os.replace(fresh, self.path)
        Path(str(self.path) + ".wal").unlink(missing_ok=True)  # checkpointed into the copy
        _fsync_dir(self.path.parent)

    def schema_version(self) -> int:
        with self.read() as con:
            version: int = _one_value(con, "SELECT max(version) FROM schema_migrations")
            return version

    def upgrade(self) -> None:
        """Apply pending migrations now, so that readers (read-only connections, which never
        migrate) see the current schema of a state file written by an earlier version."""
        if not self.path.exists():
            return
        with self.read() as con:
            done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
        if any(version not in done for version, _, _ in MIGRATIONS):  # not only the last: any pending
            with self.write():
                pass

    # --- person ids ------------------------------------------------------------------------
    @property
    def key_path(self) -> Path:
        """The pseudonym key's file: PRIVPUB_PSEUDONYM_KEY_FILE, else `<state>.key`."""
        return key_path(self.path)

    def pseudonyms(self, create: bool = True) -> Pseudonyms:
        """The keyed hash that person ids are stored under (state/pseudonyms.py), after upgrading
        the state (an older one's ids in clear become pseudonyms first). The key file is created
        (and recorded in the state) when the state has none yet; a state that recorded a key is
        refused, in one line, when that key file is missing or another one is found.
        create=False, or a Store made with makes_key=False (a release that is never committed:
        explore): with no key anywhere, a throwaway key,
        since the state then holds no person to recognise."""
        create = create and self.makes_key
        self.upgrade()
        recorded = None
        if self.path.exists():
            with self.read() as con:
                recorded = recorded_check(con)
        path = self.key_path
        key = read_key(path)
        if key is None:
            if recorded is not None:
                raise missing_key(self.path, path)
            if not create:
                return Pseudonyms(os.urandom(KEY_BYTES))  # a throwaway key, as a new one is drawn
            private_umask()
            key = create_key(path)
        found = Pseudonyms(key)
        if recorded is None and create:
            with self.write() as con:
                record_check(con, found)
                recorded = recorded_check(con)
        if recorded is not None and recorded != found.check:
            raise wrong_key(self.path, path)
        return found

    # --- recovery -------------------------------------------------------------------------
    def _recover(self, con: duckdb.DuckDBPyConnection, extra_dirs: list[Path] | None = None) -> None:
        dirs = {Path(r[0]) for r in con.execute("SELECT DISTINCT output_dir FROM release_rows").fetchall()}
        dirs.update(self._recovery_dirs)
        committed = dict(con.execute("SELECT staging_dir, release_id FROM release_rows").fetchall())
        for out in dirs:
            staging_root = out / STAGING
            if not staging_root.is_dir():
                continue
            for staged in staging_root.iterdir():
                if not self._owner_gone(staged):
                    continue  # a live process is still writing it
                release_id = committed.get(staged.name)
                if release_id and not _placed(out, release_id):
                    _roll_forward(staged, out, release_id)  # a committed release (a warning if it cannot be)
                else:
                    shutil.rmtree(staged, ignore_errors=True)  # roll back an abandoned one
            with contextlib.suppress(OSError):
                staging_root.rmdir()

    _recovery_dirs: set[Path] = set()

    def watch_output_dir(self, output_dir: Path) -> None:
        """Also recover staging folders under this output folder (before any release there)."""
        self._recovery_dirs = set(self._recovery_dirs) | {Path(output_dir).resolve()}

    @staticmethod
    def _owner_gone(staged: Path) -> bool:
        return Store._lock_released(staged / ".owner")

    @staticmethod
    def _lock_released(owner: Path) -> bool:
        """No live process holds the flock of `owner` (the kernel drops it when one dies)."""
        if not owner.exists():
            return True
        with open(owner, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(f, fcntl.LOCK_UN)
            return True

    # --- releases -------------------------------------------------------------------------
    def find_by_key(self, release_key: str) -> str | None:
        if not self.path.exists():
            return None
        with self.read() as con:
            if not has_table(con, "release_rows"):
                return None
            row = con.execute("SELECT release_id FROM release_rows WHERE release_key = ?", [release_key]).fetchone()
            return row[0] if row else None

    def commit_release(
        self,
        *,
        staged: StagedFiles,
        series: str,
        technique: str,
        parameters: dict[str, Any],
        spec: dict[str, Any],
        seed: int,
        input_fingerprint: str,
        release_key: str,
        rows_in: int,
        privacy: Sequence[PrivacyFigure],
        utility: dict[str, Any] | Callable[[], dict[str, Any]],
        private: dict[str, Any],
        info: dict[str, Any],
        actor: str,
        flow_run_id: str | None,
        started_at: datetime,
        based_on_sequence: int | None = None,
        on_commit: Callable[[duckdb.DuckDBPyConnection, str, int], None] | None = None,
        before_commit: Callable[[str, int, Path], None] | None = None,
        attribution: dict[str, Any] | None = None,
        risk: dict[str, Any] | None = None,
    ) -> tuple[str, bool]:
        """Commit a staged release; returns (release_id, created). A release with the same key
        (same series, input, parameters and seed) is recognised and not duplicated.

        based_on_sequence: for techniques whose release depends on the series' history, the
        last sequence they read; if another release of the series committed since, the commit
        is refused (its statistics would be stale) and nothing is written.
        on_commit(con, release_id, sequence): the technique's own writes (e.g. the serial
        statistics), run inside the commit transaction so they exist exactly when the release does;
        utility may be what gives the figures after them (an evaluation still running beside).
        before_commit(release_id, sequence, folder): writes further files of the release (the
        report) into its staging folder once its id is known, before the COMMIT, so a committed
        release always has them."""
        self.watch_output_dir(staged.output_dir)
        with self.write() as con:
            existing = self._recognised(con, release_key, staged, actor, flow_run_id, attribution)
            if existing is not None:
                return existing, False
            con.execute("BEGIN TRANSACTION")
            try:
                seq = _next_sequence(con, series, based_on_sequence)
                release_id = f"{series}-{seq:04d}-{staged.token[:6]}"
                described = {
                    "series": series,
                    "technique": technique,
                    "parameters": json.dumps(parameters, default=str),
                    "spec": json.dumps(spec, default=str),
                    "seed": seed,
                    "input_fingerprint": input_fingerprint,
                    "release_key": release_key,
                    "rows_in": rows_in,
                    "flow_run_id": flow_run_id,
                    "actor": actor,
                    "started_at": started_at,
                }
                _insert_release_row(con, release_id, seq, staged, described, attribution or {})
                _insert_private(con, release_id, private)
                if on_commit is not None:
                    on_commit(con, release_id, seq)
                _insert_figures(con, release_id, privacy, {"utility": _given(utility), "risk": risk or {}})
                if before_commit is not None:
                    before_commit(release_id, seq, staged.path)
                    _fsync_files(staged.path)
                committed = self._sealed(con, release_id, staged, rows_in, info, attribution)
                self._log(con, actor, "publish", release_id, "committed", flow_run_id, committed)
                failpoint("commit")
                con.execute("COMMIT")
            except StaleHistory:
                con.execute("ROLLBACK")
                staged.discard()
                raise
            except BaseException:
                con.execute("ROLLBACK")
                raise
            _make_visible(staged, release_id)
            return release_id, True

    def _sealed(
        self,
        con: duckdb.DuckDBPyConnection,
        release_id: str,
        staged: StagedFiles,
        rows_in: int,
        info: dict[str, Any],
        attribution: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """Inside the commit: manifest.json written beside the report, the release's figures and
        row at the end of their hash chains (state/chain.py); the `committed` row's detail, with
        the manifest's sha256 and this attempt's token."""
        tables = {meta["file"]: meta["sha256"] for meta in staged.files.values()}
        manifest = chain.write_manifest(con, release_id, staged.path, tables)
        chain.append_release(con, release_id)
        return self.attempt_detail({"rows_in": rows_in, "info": info, **(attribution or {}), "manifest": manifest})

    def _recognised(
        self,
        con: duckdb.DuckDBPyConnection,
        release_key: str,
        staged: StagedFiles,
        actor: str,
        flow_run_id: str | None,
        attribution: dict[str, Any] | None,
    ) -> str | None:
        """The release committed already with this key (its staged files discarded, a
        "recognised" audit row), else None."""
        existing = con.execute("SELECT release_id FROM release_rows WHERE release_key = ?", [release_key]).fetchone()
        if not existing:
            return None
        staged.discard()
        reason = "same series, input, parameters and seed as an existing release"
        detail = self.attempt_detail({"reason": reason, **(attribution or {})})
        self._log(con, actor, "publish", existing[0], "recognised", flow_run_id, detail)
        return str(existing[0])

    def latest_release(
        self, series: str, technique: str | None = None, before_sequence: int | None = None
    ) -> str | None:
        """Id of the newest committed release of a series (optionally of one technique, and
        before a given sequence number)."""
        if not self.path.exists():
            return None
        sql = "SELECT release_id FROM release_rows WHERE series = ?"
        args: list[Any] = [series]
        if technique:
            sql += " AND technique = ?"
            args.append(technique)
        if before_sequence is not None:
            sql += " AND sequence < ?"
            args.append(before_sequence)
        with self.read() as con:
            if not has_table(con, "release_rows"):
                return None
            row = con.execute(sql + " ORDER BY sequence DESC LIMIT 1", args).fetchone()
        return row[0] if row else None

    def published_for(
        self, series: str, flow_run_id: str | None, deployment: str | None, scheduled_for: datetime | None
    ) -> str | None:
        """The release this flow run (a retry or re-run of it), or another run of the same
        deployment for the same scheduled slot, already published for the series."""
        if not self.path.exists() or not (flow_run_id or scheduled_for):
            return None
        with self.read() as con:
            if not has_table(con, "release_rows"):
                return None
            cols = {
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'release_rows'"
                ).fetchall()
            }
            slot = (
                "OR (deployment = ? AND scheduled_for = ? AND trigger IN ('schedule', 'retry'))"
                if "scheduled_for" in cols and scheduled_for and deployment
                else ""
            )
            args = [series, flow_run_id] + ([deployment, scheduled_for] if slot else [])
            row = con.execute(
                f"SELECT release_id FROM release_rows WHERE series = ? AND "
                f"(flow_run_id = ? {slot}) ORDER BY sequence DESC LIMIT 1",
                args,
            ).fetchone()
        return row[0] if row else None

    def last_release(self, series: str) -> dict[str, Any] | None:
        """The newest committed release of a series: its id, sequence, technique, parameters,
        seed and input fingerprint (None: the series has none)."""
        if not self.path.exists():
            return None
        with self.read() as con:
            if not has_table(con, "release_rows"):
                return None
            cur = con.execute(
                "SELECT release_id, sequence, technique, parameters, seed, input_fingerprint FROM release_rows "
                "WHERE series = ? ORDER BY sequence DESC LIMIT 1",
                [series],
            )
            row = cur.fetchone()
            if row is None:
                return None
            out = dict(zip([d[0] for d in cur.description], row))
        out["parameters"] = json.loads(out["parameters"])
        return out

    def ledger(self, series: str | None = None) -> dict[str, list[ledger.Spend]]:
        """Every release of `series` (None: of every series) with its ledger figures, in order, by
        series (state/ledger.py): the privacy-budget ledger and which releases are DP."""
        if not self.path.exists():
            return {}
        with self.read() as con:
            # no bound parameter (it would load pandas into `privpub history`)
            if not _one_value(con, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'release_rows'"):
                return {}
            return ledger.spends(con, series)

    def last_sequence(self, series: str) -> int:
        if not self.path.exists():
            return 0
        with self.read() as con:
            if not has_table(con, "release_rows"):
                return 0
            last: int = _one_value(
                con, "SELECT coalesce(max(sequence), 0) FROM release_rows WHERE series = ?", [series]
            )
            return last

    def log(
        self,
        actor: str,
        action: str,
        target: str | None,
        outcome: str,
        flow_run_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        with self.write() as con:
            self._log(con, actor, action, target, outcome, flow_run_id, self.attempt_detail(detail or {}))

    def attempt_detail(self, detail: dict[str, Any]) -> dict[str, Any]:
        """`detail`, with the token of the attempt this context runs on this state file, if any."""
        token = dict(_ATTEMPTS.get()).get(str(self.path))
        return {**detail, "attempt": token} if token else detail

    @staticmethod
    def log_in(
        con: duckdb.DuckDBPyConnection,
        actor: str,
        action: str,
        target: str | None,
        outcome: str,
        flow_run_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """An audit row written on a connection `write()` lent: inside its transaction, if one is
        open, so that the row exists exactly when what it records does."""
        Store._log(con, actor, action, target, outcome, flow_run_id, detail or {})

    @staticmethod
    def _log(
        con: duckdb.DuckDBPyConnection,
        actor: str,
        action: str,
        target: str | None,
        outcome: str,
        flow_run_id: str | None,
        detail: dict[str, Any],
    ) -> None:
        _insert_entry(con, _entry(actor, action, target, flow_run_id, detail, outcome) | {"logged_at": _now()})

    # --- reading ---------------------------------------------------------------------------
    def query(self, fn: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        """fn(con) on a read-only connection under the shared lock (a technique's own lookups)."""
        with self.read() as con:
            return fn(con)

    def history(self, series: str | None = None) -> pd.DataFrame:
        with self.read() as con:
            return con.execute(*self._history_query(con, series)).df()

    def history_rows(self, series: str | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """history's columns and rows as Python values: `privpub history` prints them without
        loading pandas (half a second of its start-up)."""
        with self.read() as con:
            cur = con.execute(*self._history_query(con, series))
            rows = cur.fetchall()
            return [d[0] for d in cur.description], rows

    @staticmethod
    def _history_query(con: duckdb.DuckDBPyConnection, series: str | None) -> tuple[str, list[str]]:
        cols = {
            r[0]
            for r in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'releases'"
            ).fetchall()
        }
        extra = ", trigger, actor, flow_run_id" if "trigger" in cols else ", actor, flow_run_id"
        sql = (
            f"SELECT release_id, series, sequence, technique, {ACCEPTED_BREACH_STATUS} AS status, seed, "
            f"created_at{extra} FROM releases LEFT JOIN ({ACCEPTED_BREACHES}) USING (release_id)"
        )
        if series:
            return sql + " WHERE series = ? ORDER BY sequence", [series]
        return sql + " ORDER BY series, sequence", []

    def release(self, release_id: str) -> dict[str, Any]:
        with self.read() as con:
            cur = con.execute("SELECT * FROM release_rows WHERE release_id = ?", [release_id])
            row = cur.fetchone()
            if row is None:
                raise StateError(f"no committed release '{release_id}' in {self.path}")
            rel = dict(zip([d[0] for d in cur.description], row))
            rel["spec"] = json.loads(rel["spec"])
            rel["parameters"] = json.loads(rel["parameters"])
            rel["tables"] = con.execute(
                "SELECT table_name, file, n_rows, sha256 FROM release_tables WHERE release_id = ? ORDER BY table_name",
                [release_id],
            ).df()
            rel["metrics"] = con.execute(
                "SELECT kind, name, value, text_value, threshold, passed, detail "
                "FROM release_metrics WHERE release_id = ? ORDER BY kind, name",
                [release_id],
            ).df()
            rel["metrics"] = _current_metric_names(rel["metrics"])
            return rel

    def private(self, release_id: str) -> dict[str, Any]:
        with self.read() as con:
            rows = con.execute(
                "SELECT name, format, payload FROM release_private WHERE release_id = ?", [release_id]
            ).fetchall()
        out: dict[str, Any] = {}
        for name, fmt, payload in rows:
            out[name] = (
                first_use("pyarrow.parquet").read_table(io.BytesIO(payload))
                if fmt == "parquet"
                else json.loads(bytes(payload))
            )
        return out

    # --- the online auditor -------------------------------------------------------------------
    def register_audit_table(
        self, name: str, spec: dict[str, Any], fingerprint: str, knowledge: dict[str, Any], actor: str
    ) -> None:
        with self.write() as con:
            if con.execute("SELECT 1 FROM audit_tables WHERE name = ?", [name]).fetchone():
                raise StateError(
                    f"table '{name}' is already registered with the auditor; its "
                    "knowledge must not be forgotten (use another dataset name)"
                )
            con.execute("BEGIN TRANSACTION")
            con.execute(
                "INSERT INTO audit_tables VALUES (?, ?, ?, ?, 0, ?, ?)",
                [name, json.dumps(spec, default=str), fingerprint, json.dumps(knowledge), _now(), _now()],
            )
            self._log(con, actor, "audit-init", name, "registered", None, {"fingerprint": fingerprint})
            con.execute("COMMIT")

    def audit_tables(self) -> list[str]:
        with self.read() as con:
            if not has_table(con, "audit_tables"):
                return []
            return [r[0] for r in con.execute("SELECT name FROM audit_tables ORDER BY name").fetchall()]

    def audit_table(self, name: str) -> dict[str, Any]:
        """One registered table's spec, fingerprint and knowledge, read under the readers' lock
        (what a decision starts from; nothing is held once it returns). "version" names this
        knowledge: `audit_session(name, version)` records only on the same one."""
        with self.read() as con:
            row = con.execute("SELECT spec, fingerprint, knowledge FROM audit_tables WHERE name = ?", [name]).fetchone()
        if row is None:
            raise StateError(f"no table '{name}' registered with the auditor in {self.path} (privpub audit init SPEC)")
        return self._audit_row(row)

    @staticmethod
    def _audit_row(row: tuple[Any, ...]) -> dict[str, Any]:
        version = hashlib.sha256(str(row[2]).encode()).hexdigest()
        return {
            "spec": json.loads(row[0]),
            "fingerprint": row[1],
            "knowledge": json.loads(row[2]),
            "version": version,
            "log": [],
        }

    @contextlib.contextmanager
    def audit_session(self, name: str, version: str | None = None) -> Iterator[dict[str, Any]]:
        """Exclusive access to one registered table's knowledge, held only to record: the caller
        fills session["knowledge"] and session["log"]; both are committed in one transaction on
        exit, so a decision is remembered exactly when it is logged (and before it is shown). A
        log entry's "action" is "audit-query" unless it says otherwise (`audit set`: "audit-set").
        With `version` (from `audit_table`), a decision made outside the lock on that knowledge:
        StaleHistory, nothing recorded, when any other decision or setting was recorded since,
        because the auditor's guarantee holds only for a decision on the whole answered history."""
        with self.write() as con:
            row = con.execute("SELECT spec, fingerprint, knowledge FROM audit_tables WHERE name = ?", [name]).fetchone()
            if row is None:
                raise StateError(
                    f"no table '{name}' registered with the auditor in {self.path} (privpub audit init SPEC)"
                )
            session = self._audit_row(row)
            if version is not None and session["version"] != version:
                raise StaleHistory(f"the auditor's history of table '{name}' changed while this request was decided")
            yield session
            con.execute("BEGIN TRANSACTION")
            try:
                queries = sum(entry.get("action", "audit-query") == "audit-query" for entry in session["log"])
                con.execute(
                    "UPDATE audit_tables SET knowledge = ?, decisions = decisions + ?, updated_at = ? WHERE name = ?",
                    [json.dumps(session["knowledge"]), queries, _now(), name],
                )
                for entry in session["log"]:
                    self._log(
                        con,
                        entry["actor"],
                        entry.get("action", "audit-query"),
                        name,
                        entry["response"],
                        entry.get("flow_run_id"),
                        entry["detail"],
                    )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def series_figures(self, series: str, names: list[str]) -> pd.DataFrame | None:
        """The given figures of every committed release of a series, one row per release (the
        report's 'place in its series' table)."""
        if not self.path.exists():
            return None
        with self.read() as con:
            if not has_table(con, "release_rows"):
                return None
            frame = con.execute(
                "SELECT r.sequence, r.release_id, r.created_at, m.name, coalesce(m.text_value, "
                "CAST(m.value AS VARCHAR)) AS value FROM release_rows r JOIN release_metrics m "
                "USING (release_id) WHERE r.series = ? AND list_contains(?, m.name) ORDER BY r.sequence",
                [series, old_names(names)],
            ).df()
            frame["name"] = frame["name"].map(current_name)
            return frame

    def trail(self, series: str | None = None, since: datetime | None = None) -> pd.DataFrame:
        """Every attempt with what it touched, for an auditor: the audit log joined with the
        releases (series, sequence, technique), the trigger and the error of failed attempts."""
        with self.read() as con:
            cols = {
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'release_rows'"
                ).fetchall()
            }
            trig = "coalesce(r.trigger, a.detail->>'trigger')" if "trigger" in cols else "a.detail->>'trigger'"
            sql = f"""
                SELECT a.logged_at, a.actor, a.action,
                       CASE WHEN b.breach IS NULL THEN a.outcome
                            ELSE a.outcome || ' with series breach: ' || b.breach END AS outcome,
                       coalesce(r.series, CASE WHEN a.action IN ('publish', 'explore') THEN a.target END) AS series,
                       r.release_id, r.sequence, r.technique, {trig} AS trigger,
                       a.detail->>'deployment' AS deployment, a.detail->>'scheduled_for' AS scheduled_for,
                       a.flow_run_id, a.detail->>'error' AS error,
                       coalesce(a.detail->>'message', a.detail->>'why') AS message
                FROM audit_log a LEFT JOIN release_rows r ON r.release_id = a.target
                LEFT JOIN ({ACCEPTED_BREACHES}) b ON b.release_id = a.target AND a.outcome = 'committed'
                WHERE (? IS NULL OR coalesce(r.series, a.target) = ?) AND (? IS NULL OR a.logged_at >= ?)
                ORDER BY a.id"""
            return con.execute(sql, [series, series, since, since]).df()

    def audit_log(self) -> pd.DataFrame:
        with self.read() as con:
            return con.execute("SELECT * FROM audit_log ORDER BY id").df()


# A committed release with a failed privacy figure was published over a series breach under
# [series] composition = "warn" (every other failed check refuses the release): history and trail
# say so instead of a plain "committed".
ACCEPTED_BREACHES = """
    SELECT release_id, string_agg(name || ' ' || text_value || ' < ' || threshold, '; ' ORDER BY name) AS breach
    FROM release_metrics WHERE kind = 'privacy' AND NOT passed GROUP BY release_id"""
ACCEPTED_BREACH_STATUS = "CASE WHEN breach IS NULL THEN status ELSE status || ' with series breach: ' || breach END"


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(_one_value(con, "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]))


def _as_float(value: Any) -> float | None:
    try:
        return float(Fraction(str(value))) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def _one_value(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    """The value of a query that gives one row of one column (an aggregate)."""
    row = con.execute(sql, params).fetchone()
    assert row is not None  # an aggregate without GROUP BY always gives a row
    return row[0]


def _next_sequence(con: duckdb.DuckDBPyConnection, series: str, based_on_sequence: int | None) -> int:
    """The series' next sequence number; StaleHistory when a release committed since the one the
    new release was computed from (based_on_sequence)."""
    seq = int(_one_value(con, "SELECT coalesce(max(sequence), 0) + 1 FROM release_rows WHERE series = ?", [series]))
    if based_on_sequence is not None and seq - 1 != based_on_sequence:
        raise StaleHistory(
            f"release #{seq - 1} of series '{series}' was committed while this "
            f"one was computed from the history up to #{based_on_sequence}; "
            "run it again"
        )
    return seq


def _insert_release_row(
    con: duckdb.DuckDBPyConnection,
    release_id: str,
    seq: int,
    staged: StagedFiles,
    described: dict[str, Any],
    attribution: dict[str, Any],
) -> None:
    """The release's row (described: its series, technique, spec, seed, input, key, who, when)
    and its published tables' rows."""
    _release_folder(staged.output_dir, described["series"], release_id)  # before the COMMIT
    row = {
        "release_id": release_id,
        "series": described["series"],
        "sequence": seq,
        **{k: v for k, v in described.items() if k != "series"},
        "status": "committed",
        "output_dir": str(staged.output_dir),
        "staging_dir": staged.token,
        "created_at": _now(),
        **{k: attribution.get(k) for k in ("trigger", "deployment", "scheduled_for")},
    }
    con.execute(
        f"INSERT INTO release_rows ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
        list(row.values()),
    )
    for name, meta in staged.files.items():
        con.execute(
            "INSERT INTO release_tables VALUES (?, ?, ?, ?, ?)",
            [release_id, name, meta["file"], meta["n_rows"], meta["sha256"]],
        )


def _current_metric_names(metrics: Any) -> Any:
    """A release's figures with the utility names of an old state (underscores) read as now
    (hyphens); the stored rows, which the hash chain covers, are not rewritten."""
    utility = metrics["kind"] == "utility"
    metrics.loc[utility, "name"] = metrics.loc[utility, "name"].map(current_name)
    return metrics.sort_values(["kind", "name"], kind="stable").reset_index(drop=True)


def _given(figures: dict[str, Any] | Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return figures() if callable(figures) else figures


def _insert_figures(
    con: duckdb.DuckDBPyConnection,
    release_id: str,
    privacy: Sequence[PrivacyFigure],
    figures: dict[str, dict[str, Any]],
) -> None:
    """The privacy results (value, threshold, passed, worst case) and the other figures by kind,
    in one INSERT (rows in this order: a statement each cost a tenth of a small commit)."""
    rows: list[list[Any]] = [
        [
            release_id,
            "privacy",
            res.model,
            _as_float(res.value),
            str(res.value),
            None if res.threshold is None else str(res.threshold),
            res.passed,
            json.dumps(res.worst, default=str),
        ]
        for res in privacy
    ]
    rows += [
        [release_id, kind, name, _as_float(value), str(value), None, None, None]
        for kind, values in figures.items()
        for name, value in values.items()
    ]
    if rows:
        values = ", ".join(["(?, ?, ?, ?::DOUBLE, ?, ?, ?::BOOLEAN, ?)"] * len(rows))
        con.execute(f"INSERT INTO release_metrics VALUES {values}", [v for row in rows for v in row])


def _insert_private(con: duckdb.DuckDBPyConnection, release_id: str, private: dict[str, Any]) -> None:
    """What the release keeps private for verification: Arrow tables as Parquet, the rest as JSON."""
    arrow = sys.modules.get("pyarrow")  # not loaded: no Arrow table among them (and no import)
    for name, obj in private.items():
        if arrow is not None and isinstance(obj, arrow.Table):
            con.execute(
                "INSERT INTO release_private VALUES (?, ?, 'parquet', ?)",
                [release_id, name, _table_to_parquet_bytes(obj)],
            )
        else:
            con.execute(
                "INSERT INTO release_private VALUES (?, ?, 'json', ?)",
                [release_id, name, json.dumps(obj, default=str).encode()],
            )


def _release_folder(output_dir: Path, series: str, release_id: str) -> Path:
    """Where a release's files go, checked before its COMMIT (nothing after it may fail):
    `<dir>/<release id>`, made of a series name (schemas/names.py), under the output folder and
    not taken."""
    problem = name_problem(series)
    if problem:
        raise StateError(f"series name: {problem}")
    folder = inside(output_dir, release_id)
    if folder.exists():
        raise StateError(f"cannot publish into {folder}: it exists already")
    return folder


def _placed(out: Path, release_id: str) -> bool:
    """The committed release's folder exists (False when its id cannot even name one)."""
    try:
        return (out / release_id).exists()
    except (OSError, ValueError):
        return False


def _roll_forward(staged: Path, out: Path, release_id: str) -> bool:
    """Move a committed release's staged files into `<out>/<release_id>`; False, with a warning
    naming where they wait, when that fails (the release stays committed: the next writer tries
    again, and no failure here stops the caller, issue 41 item 2). A release id of an older
    version holding `/` gets its folder's parent made, when that lies under `out`."""
    try:
        failpoint("after-commit")
        target = inside(out, release_id)
        (staged / ".owner").unlink(missing_ok=True)
        as_published(staged)
        target.parent.mkdir(parents=True, exist_ok=True)  # `out` itself, but for such old ids
        failpoint("rename")
        os.rename(staged, target)
    except Exception as exc:  # the release is committed whatever fails: say so, stop nobody
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        named = release_id if release_id.isprintable() and len(release_id) <= 80 else shown(release_id)
        notice(
            f"warning: release {named} is committed, but its files could not be moved into {out} ({why}); "
            f"they wait in {staged}, and each privpub command that writes this state tries again"
        )
        return False
    failpoint("renamed")
    return True


def _make_visible(staged: StagedFiles, release_id: str) -> None:
    """The release exists: its files under their final name. A failure or a kill from here on
    leaves them staged with no owner, for the next writer's roll forward (Store._recover)."""
    staged.release_owner()
    if _roll_forward(staged.path, staged.output_dir, release_id):
        with contextlib.suppress(OSError):
            (staged.output_dir / STAGING).rmdir()

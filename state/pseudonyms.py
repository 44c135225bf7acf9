"""Person ids in the state database are pseudonyms: a keyed hash of the id, the key kept apart
from the state file (issue 25, item 11). Equality still works (the same id gives the same
pseudonym under the same key, so returning people are recognised), and a copied state file
names nobody.

The key: 16 random bytes in `<state>.key` (0600, created with O_EXCL the first time a person id
is stored), or in the file the environment variable PRIVPUB_PSEUDONYM_KEY_FILE names; a state
made before session 24 keeps its 32-byte key, and its pseudonyms stay what they were. The state
records a check value of its key (table `pseudonym_key`); a state holding pseudonyms whose key
file is missing or different is refused: with another key no returning person would match, every
one would look new, and the series checks would silently combine nothing.

The pseudonym of an id is the first 128 bits, as 32 hex characters, of
SHA-256(hex(key) || text(id)), computed by DuckDB over a whole column (`SQL_PSEUDONYM`). hex(key)
is 32 characters, so the key and an id of up to 23 bytes share one SHA-256 block: one compression
an id (issue 43: DuckDB's software SHA-256 takes 0.50 s for a million ten-character ids with a
16-byte key, 0.73 s with the 32-byte key whose 64 hex characters filled a block of their own).
The keyed hash then rests on SHA-256's compression function being a pseudorandom function when
keyed through its message input, the "dual PRF" assumption HMAC's own proof makes (Bellare,
CRYPTO 2006); a 128-bit key matches the 128 bits kept. The weakness of such a secret-prefix hash
as an authenticator is length extension, which needs the whole 256-bit digest; the state keeps
128 bits, and a pseudonym is never an authenticator anyway. Proper HMAC (two hashes with unhex
between them, also expressible in DuckDB) measured four times slower at a million ids (1.6 s
against 0.44 s on one thread), so the single keyed hash is used. 128 bits: two of 10^9 people
share a pseudonym with probability below 10^-20. Pseudonyms are only ever compared for equality
and joined on; nothing published, drawn at random or sorted for a published table depends on
them.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:  # loaded by `first_use` where used: `privpub history` reaches this module
    # through the store and loads neither (issue 43, item 4)
    import numpy as np
    import pyarrow as pa

from privpub.schemas.errors import StateError
from privpub.state.chain import chain_existing, chained

KEY_ENV = "PRIVPUB_PSEUDONYM_KEY_FILE"
KEY_BYTES = 16  # a new key's size (module docstring: one SHA-256 block with the id)
OLD_KEY_BYTES = 32  # the key of a state made before session 24: still read, never drawn
CHECK_TEXT = "privpub pseudonym key check"


def first_use(module: str) -> Any:
    """pyarrow, numpy or one of their modules, imported when the state first needs it: the state's
    modules are on `privpub history`'s path, which loads neither (issue 43, item 4;
    tests/test_cli_imports.py). The state layer's counterpart of flows/lazy.py `load_lazily`."""
    return importlib.import_module(module)


# the pseudonym of the text `$1` under the key whose hex is `$key`, as DuckDB computes it
SQL_PSEUDONYM = "left(sha256($key || {text}), 32)"


@dataclass(frozen=True)
class Pseudonyms:
    """The keyed hash of one state's person ids. `of` maps a column of ids to their pseudonyms."""

    key: bytes = field(repr=False)

    @property
    def hex_key(self) -> str:
        return self.key.hex()

    @property
    def check(self) -> str:
        """What the state records of its key: the pseudonym of a fixed text (reveals nothing of it)."""
        return expected(self.key, CHECK_TEXT)

    def of(self, ids: Any) -> pa.Array:
        """The pseudonyms of `ids` (an Arrow array, numpy array or pandas column), as text: each
        id is first written as DuckDB's CAST(id AS VARCHAR) does (text stays as it is). Those
        hashed ahead (`hash_ahead`) under this key for these very ids are taken as they are."""
        array = _as_arrow(ids)
        ready = _taken_ahead(self.key, array)
        return ready if ready is not None else self._hashed(array)

    def _hashed(self, array: pa.Array, keep_going: Callable[[], bool] | None = None) -> pa.Array:
        """keep_going: asked before each HASH_CHUNK ids, which are then hashed one query at a
        time; False stops with HashingStopped (None: one query for all)."""
        arrow = first_use("pyarrow")
        step = HASH_CHUNK if keep_going is not None else max(len(array), 1)
        expr = SQL_PSEUDONYM.format(text="CAST(id AS VARCHAR)")
        parts = []
        con = duckdb.connect()
        try:
            con.execute("SET threads = 1")  # the machine's cores belong to the release's own work
            for start in range(0, max(len(array), 1), step):
                if keep_going is not None and not keep_going():
                    raise HashingStopped("stopped before every id was hashed")
                con.register("_ids", arrow.table({"id": array.slice(start, step)}))
                parts.append(con.execute(f"SELECT {expr} AS p FROM _ids", {"key": self.hex_key}).to_arrow_table())
        finally:
            con.close()
        return arrow.concat_tables(parts).column("p").combine_chunks()

    def of_beside(self, ids: Any) -> Future[pa.Array]:
        """`of` computed on a thread of its own while the caller goes on (issue 43): DuckDB hashes
        without holding the GIL, so a release's partition step runs beside it on the other core.
        The same pseudonyms as `of`; `.result()` gives them (or raises what `of` raised)."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="privpub-pseudonyms")
        try:
            return pool.submit(self.of, ids)
        finally:
            pool.shutdown(wait=False)  # the thread ends with its one task

    def of_numpy(self, ids: Any) -> np.ndarray:
        """`of` as a numpy object array (for the code that keys pandas indexes by person)."""
        result: np.ndarray = first_use("numpy").asarray(self.of(ids).to_numpy(zero_copy_only=False), dtype=object)
        return result


# Pseudonyms hashed ahead (issue 43): `privpub publish` parses its CSV input while it imports
# (schemas/read_ahead.py), and on that thread hashes the person ids as well, on the core the
# imports leave idle, instead of beside the partition step. At most one entry: the key, and a
# Future of (the ids as text, their pseudonyms); the first `of` under that key takes it.
_AHEAD_LOCK = threading.Lock()
_AHEAD: dict[bytes, Future[tuple[pa.Array, pa.Array]]] = {}
# key file -> the key a release creating that file will write (`create_key`): drawn by
# `hash_ahead` for a state that has no key yet, so that its first release's ids are hashed ahead too
_PROPOSED: dict[Path, bytes] = {}


HASH_CHUNK = 1 << 18  # ids a query hashes ahead: a command that ends stops the hashing within one


class HashingStopped(Exception):
    """The command ended while its ids were being hashed ahead: nobody will take them."""


def hash_ahead(state: Path, ids: pa.Array | pa.ChunkedArray) -> None:
    """Hash `ids` (a person id column as parsed) under the key of the state file `state`, for
    the `of` of this process that asks for the same ids under that key. A state with no key
    file yet gets its key drawn now and kept in memory, written by `create_key` if this process
    creates that file. Nothing is written here; raises what reading the key file raises, and
    HashingStopped when the main thread ends first (a run refused or interrupted: its exit
    does not wait for the rest of the hash)."""
    path = key_path(state).absolute()
    key = read_key(path)
    if key is None:
        with _AHEAD_LOCK:
            key = _PROPOSED.setdefault(path, secrets.token_bytes(KEY_BYTES))
    done: Future[tuple[pa.Array, pa.Array]] = Future()
    with _AHEAD_LOCK:
        _AHEAD.clear()
        _AHEAD[key] = done
    try:
        text = first_use("pyarrow.compute").cast(_as_arrow(ids), first_use("pyarrow").string())
        done.set_result((text, Pseudonyms(key)._hashed(text, _command_running)))
    except BaseException as exc:  # `of` then hashes them itself
        done.set_exception(exc)
        raise


def _command_running() -> bool:
    """The process's main thread still runs (it ends when a run is refused or interrupted)."""
    return threading.main_thread().is_alive()


def _taken_ahead(key: bytes, ids: pa.Array) -> pa.Array | None:
    """The pseudonyms `hash_ahead` computed under `key`, if they are those of `ids` (equal text,
    row by row); the entry is let go either way (waited for if it is still hashing)."""
    with _AHEAD_LOCK:
        pending = _AHEAD.pop(key, None)
    if pending is None:
        return None
    try:
        text, pseudonyms = pending.result()
    except BaseException:
        return None
    return pseudonyms if text.type == ids.type and text.equals(ids) else None


def expected(key: bytes, text: str) -> str:
    """The pseudonym of one text, in Python: the reference `Pseudonyms.of` must agree with."""
    return hashlib.sha256((key.hex() + text).encode()).hexdigest()[:32]


def _as_arrow(ids: Any) -> pa.Array:
    arrow = first_use("pyarrow")
    if isinstance(ids, arrow.ChunkedArray):
        return ids.combine_chunks()
    if isinstance(ids, arrow.Array):
        return ids
    values = first_use("numpy").asarray(ids)
    try:
        return arrow.array(values)
    except (arrow.ArrowInvalid, arrow.ArrowTypeError):  # mixed types: their text
        return arrow.array(values.astype(str), arrow.string())


def key_path(state: Path) -> Path:
    """Where the key of the state file `state` is: PRIVPUB_PSEUDONYM_KEY_FILE, else `<state>.key`."""
    named = os.environ.get(KEY_ENV)
    return Path(named).expanduser().resolve() if named else Path(str(state) + ".key")


def read_key(path: Path) -> bytes | None:
    """The key in `path`, None when there is no such file; a file that is not a key is refused."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read the pseudonym key file {path}: {exc.strerror}") from None
    if len(key) not in (KEY_BYTES, OLD_KEY_BYTES):
        raise StateError(
            f"{path} is not a privpub pseudonym key ({KEY_BYTES} or {OLD_KEY_BYTES} bytes expected, {len(key)} found)"
        )
    return key


def create_key(path: Path) -> bytes:
    """A new random key written to `path` (0600, O_EXCL); if another process made it first, its
    key. The key `hash_ahead` drew for this file, if it did (as random, drawn earlier)."""
    with _AHEAD_LOCK:
        key = _PROPOSED.pop(path.absolute(), None) or secrets.token_bytes(KEY_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        found = read_key(path)
        assert found is not None  # it exists
        return found
    except OSError as exc:
        raise StateError(f"cannot create the pseudonym key file {path}: {exc.strerror}") from None
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def missing_key(state: Path, path: Path) -> StateError:
    return StateError(
        f"the state file {state} holds pseudonymised person ids but their key {path} is missing: "
        f"restore the key file beside it or name it in {KEY_ENV} (with another key no returning "
        "person would be recognised)"
    )


def wrong_key(state: Path, path: Path) -> StateError:
    return StateError(
        f"the pseudonym key {path} is not the key of the state file {state}: restore that state's "
        f"own key file or name it in {KEY_ENV}"
    )


def pseudonymise_column(
    con: duckdb.DuckDBPyConnection, table: str, column: str, key: Pseudonyms, where: str = ""
) -> None:
    """Rewrite a text column of person ids into pseudonyms, in place (the migration)."""
    expr = SQL_PSEUDONYM.format(text=column)
    con.execute(f"UPDATE {table} SET {column} = {expr} {where}", {"key": key.hex_key})


# --- the state's record of its key, and migration 9 -----------------------------------------------
KEY_TABLE = "CREATE TABLE IF NOT EXISTS pseudonym_key (check_value VARCHAR NOT NULL)"

# the serial technique's per-release blobs of releases committed before migrations 3 and 5
# (Parquet tables with a person column) and its summaries (JSON naming the worst pair's person)
_PERSON_BLOBS = ("serial_stats", "serial_aggregate", "serial_pairs", "membership", "virtual_members")


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]).fetchone()
    return bool(row and row[0])


def recorded_check(con: duckdb.DuckDBPyConnection) -> str | None:
    """The check value of the key this state's pseudonyms were made with (None: none recorded)."""
    if not _has_table(con, "pseudonym_key"):
        return None
    row = con.execute("SELECT check_value FROM pseudonym_key LIMIT 1").fetchone()
    return row[0] if row else None


def record_check(con: duckdb.DuckDBPyConnection, key: Pseudonyms) -> None:
    """Record the key's check value (once: the first one stays)."""
    con.execute(KEY_TABLE)
    con.execute(
        "INSERT INTO pseudonym_key SELECT ? WHERE NOT EXISTS (SELECT 1 FROM pseudonym_key)",
        [key.check],
    )


def _rows_in(con: duckdb.DuckDBPyConnection, table: str, where: str = "") -> int:
    if not _has_table(con, table):
        return 0
    row = con.execute(f"SELECT count(*) FROM {table} {where}").fetchone()
    return int(row[0]) if row else 0


def _blob_filter() -> str:
    names = ", ".join(f"'{n}'" for n in (*_PERSON_BLOBS, "serial_summary"))
    return f"WHERE name IN ({names})"


def pseudonymise_state(con: duckdb.DuckDBPyConnection, state: Path) -> bool:
    """Migration 9: every person id the state holds in clear becomes its pseudonym, in the
    migration's transaction; the key is created (or the existing key file used) only when there
    is an id to rewrite. compose_people.person and serial_people.person hold the ids' text, so
    the pseudonym of the text is the pseudonym of the id; the serial summaries' worst pair and
    the serial blobs of old releases are rewritten too. True when ids were rewritten: the store
    then compacts the file, whose freed blocks still hold them."""
    con.execute(KEY_TABLE)
    if recorded_check(con) is not None:
        return False  # a state that recorded its key holds pseudonyms only (migration rows reset by hand)
    people = _rows_in(con, "compose_people") + _rows_in(con, "serial_people")
    blobs = _rows_in(con, "release_private", _blob_filter())
    summaries = _rows_in(con, "serial_summary")
    if not (people or blobs or summaries):
        return False  # nothing in clear: the key is made when the first id is stored
    path = key_path(state)
    key = Pseudonyms(read_key(path) or create_key(path))
    record_check(con, key)
    if _has_table(con, "compose_people"):
        pseudonymise_column(con, "compose_people", "person", key)
    if _has_table(con, "serial_people"):
        pseudonymise_column(con, "serial_people", "person", key)
    if _has_table(con, "serial_types"):
        con.execute("UPDATE serial_types SET person_type = 'VARCHAR'")  # pseudonyms are text
    if _has_table(con, "serial_summary"):
        for series, summary in con.execute("SELECT series, summary FROM serial_summary").fetchall():
            con.execute("UPDATE serial_summary SET summary = ? WHERE series = ?", [_summary_json(summary, key), series])
    if blobs:
        _pseudonymise_blobs(con, key)
        if chained(con):  # applied again after migration 10 (rows reset by hand): the digests changed
            chain_existing(con)
    return True


def _summary_json(text: str, key: Pseudonyms) -> str:
    """A serial summary (JSON) whose worst pair names its person by pseudonym."""
    summary = json.loads(text)
    worst = summary.get("worst") if isinstance(summary, dict) else None
    if isinstance(worst, dict) and worst.get("person") is not None:
        worst["person"] = key.of_numpy([worst["person"]])[0]
    return json.dumps(summary)


def _pseudonymise_blobs(con: duckdb.DuckDBPyConnection, key: Pseudonyms) -> None:
    """The person column of each old serial blob (one blob per release and name: a loop over
    releases, each column hashed whole)."""
    pq = first_use("pyarrow.parquet")
    rows = con.execute(f"SELECT release_id, name, format, payload FROM release_private {_blob_filter()}").fetchall()
    for release_id, name, fmt, payload in rows:
        if fmt == "json":
            new = _summary_json(bytes(payload).decode(), key).encode()
        else:
            table = pq.read_table(io.BytesIO(bytes(payload)))
            if "person" not in table.column_names:
                continue
            at = table.column_names.index("person")
            table = table.set_column(at, "person", key.of(table.column("person")))
            buf = io.BytesIO()
            pq.write_table(table, buf)
            new = buf.getvalue()
        con.execute("UPDATE release_private SET payload = ? WHERE release_id = ? AND name = ?", [new, release_id, name])

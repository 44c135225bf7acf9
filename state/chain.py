"""The tamper-evident history (issue 41 item 9): release rows, their figures and audit rows
chained by hash, and a manifest per release folder.

Three chains, one per table, each in the order its rows were written: `release_rows` (a release
row with its published tables' rows, the digests of its private rows and its manifest's sha256),
`release_metrics` (one entry per figure) and `audit_log`. Each entry of `history_chain` carries
the sha256 of its row's canonical content (`row_hash`), the previous entry's link (`prev_hash`)
and its own link, sha256(prev_hash + row_hash); `history_anchor` holds each chain's last link.
Editing a row changes its hash; deleting one leaves an entry without a row, or (the entry gone
too) a prev_hash that no longer meets the link before it; a row added by hand has no entry.

Canonical content: JSON of [version, table, [[column, value], ...]] in the column order fixed
below (never the table's own order), compact, ASCII; a NULL is null, an integer a JSON integer,
a float ["f", float.hex()] (exact, NaN and infinities included), a timestamp ["t", ISO with
microseconds], bytes ["b", sha256], a JSON column ["j", its text re-dumped with sorted keys].
Nothing in it depends on how DuckDB prints a value, so a snapshot (a copy of the database) or
another DuckDB version hashes the same rows to the same values.

Someone with write access to the state can still recompute every hash after an edit: the chain
proves the history unedited only against an anchor kept elsewhere, the manifest's sha256 that
publish prints (and the trail's `committed` rows carry), or the manifests in the release
folders, which the state cannot rewrite.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

CANONICAL_VERSION = 1
GENESIS = "0" * 64
MANIFEST = "manifest.json"

RELEASE_COLUMNS = (
    "release_id", "series", "sequence", "technique", "parameters", "spec", "seed", "input_fingerprint",
    "release_key", "status", "rows_in", "output_dir", "staging_dir", "flow_run_id", "actor", "started_at",
    "created_at", "trigger", "deployment", "scheduled_for",
)  # fmt: skip
METRIC_COLUMNS = ("release_id", "kind", "name", "value", "text_value", "threshold", "passed", "detail")
AUDIT_COLUMNS = ("id", "logged_at", "actor", "action", "target", "outcome", "flow_run_id", "detail")
JSON_COLUMNS = frozenset({"parameters", "spec", "detail"})
CHAINS = ("release_rows", "release_metrics", "audit_log")

SCHEMA = """
CREATE TABLE IF NOT EXISTS history_chain (
    chain     VARCHAR NOT NULL,   -- release_rows | release_metrics | audit_log
    pos       BIGINT NOT NULL,    -- 1, 2, ... in the order the rows were written
    row_key   VARCHAR NOT NULL,   -- the release id | JSON [release id, kind, name] | the audit_log id
    row_hash  VARCHAR NOT NULL,   -- sha256 of the row's canonical content
    prev_hash VARCHAR NOT NULL,   -- the previous entry's link (GENESIS for the first)
    link      VARCHAR NOT NULL    -- sha256(prev_hash || row_hash)
);
CREATE TABLE IF NOT EXISTS history_anchor (
    chain      VARCHAR PRIMARY KEY,
    pos        BIGINT NOT NULL,   -- the last entry's position
    link       VARCHAR NOT NULL,  -- and its link
    started_at TIMESTAMP NOT NULL,
    started_by VARCHAR NOT NULL,  -- 'migration' (the rows found then chained as they were)
    started_rows BIGINT NOT NULL  -- rows chained when the chain started
);
CREATE TABLE IF NOT EXISTS release_manifests (
    release_id VARCHAR PRIMARY KEY,
    sha256     VARCHAR NOT NULL,  -- of the release folder's manifest.json as written at publish
    previous   VARCHAR            -- the previous manifest's sha256 (the previous release of the state)
);
"""


# --- canonical content ------------------------------------------------------------------------


def _value(column: str, value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if column in JSON_COLUMNS and isinstance(value, str):
        return ["j", json.dumps(json.loads(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)]
    if isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return ["f", value.hex()]
    if isinstance(value, datetime):
        return ["t", value.isoformat(timespec="microseconds")]
    if isinstance(value, date):
        return ["d", value.isoformat()]
    if isinstance(value, Decimal):
        return ["n", str(value)]
    if isinstance(value, bytes | bytearray | memoryview):
        return ["b", hashlib.sha256(bytes(value)).hexdigest()]
    raise TypeError(f"no canonical form for a {type(value).__name__} in column {column}")


def canonical_row(table: str, columns: Sequence[str], row: Sequence[Any], extra: Any = None) -> bytes:
    """The bytes a row's hash is taken over (module docstring)."""
    cells = [[c, _value(c, v)] for c, v in zip(columns, row, strict=True)]
    body = [CANONICAL_VERSION, table, cells] + ([] if extra is None else [extra])
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def link_of(prev_hash: str, row_hash: str) -> str:
    return _sha((prev_hash + row_hash).encode())


def _cols(columns: Sequence[str], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{c}"' for c in columns)


def release_hashes(con: duckdb.DuckDBPyConnection, release_ids: Sequence[str] | None = None) -> dict[str, str]:
    """Each release's content hash: its row, its tables' rows, its private rows' digests and its
    manifest's sha256 (None for a release committed before manifests)."""
    where = "" if release_ids is None else "WHERE release_id IN (SELECT unnest(?))"
    args = [] if release_ids is None else [list(release_ids)]
    rows = con.execute(
        f"SELECT {_cols(RELEASE_COLUMNS, 'r.')}, m.sha256 FROM (SELECT * FROM release_rows {where}) r "
        "LEFT JOIN release_manifests m USING (release_id)",
        args,
    ).fetchall()
    tables: dict[str, list[Any]] = {}
    for rid, *t in con.execute(
        f"SELECT release_id, table_name, file, n_rows, sha256 FROM release_tables {where} ORDER BY release_id, table_name",
        args,
    ).fetchall():
        tables.setdefault(rid, []).append(t)
    private: dict[str, list[Any]] = {}
    # digests taken here, not by DuckDB's sha256(): the hash must not depend on DuckDB's version
    for rid, name, fmt, payload in con.execute(
        f"SELECT release_id, name, format, payload FROM release_private {where} ORDER BY release_id, name", args
    ).fetchall():
        private.setdefault(rid, []).append([name, fmt, _sha(bytes(payload))])
    out = {}
    for *row, manifest in rows:
        rid = row[0]
        extra = {"tables": tables.get(rid, []), "private": private.get(rid, []), "manifest": manifest}
        out[rid] = _sha(canonical_row("release_rows", RELEASE_COLUMNS, row, extra))
    return out


def metric_key(release_id: str, kind: str, name: str) -> str:
    return json.dumps([release_id, kind, name], ensure_ascii=True, separators=(",", ":"))


def metric_hashes(con: duckdb.DuckDBPyConnection, release_id: str | None = None) -> dict[str, str]:
    """Each figure's content hash, by its key (JSON [release id, kind, name]), in chain order."""
    where, args = ("WHERE release_id = ?", [release_id]) if release_id is not None else ("", [])
    rows = con.execute(f"SELECT {_cols(METRIC_COLUMNS)} FROM release_metrics {where} ORDER BY kind, name", args)
    return {
        metric_key(*row[:3]): _sha(canonical_row("release_metrics", METRIC_COLUMNS, row)) for row in rows.fetchall()
    }


def audit_hashes(con: duckdb.DuckDBPyConnection, audit_id: int | None = None) -> dict[str, str]:
    where, args = ("WHERE id = ?", [audit_id]) if audit_id is not None else ("", [])
    rows = con.execute(f"SELECT {_cols(AUDIT_COLUMNS)} FROM audit_log {where} ORDER BY id", args).fetchall()
    return {str(row[0]): _sha(canonical_row("audit_log", AUDIT_COLUMNS, row)) for row in rows}


# --- appending --------------------------------------------------------------------------------


def chained(con: duckdb.DuckDBPyConnection) -> bool:
    """The state has the chain's tables (migration 10 applied)."""
    row = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'history_anchor'").fetchone()
    return bool(row and row[0])


def _append(con: duckdb.DuckDBPyConnection, chain: str, entries: Sequence[tuple[str, str]]) -> None:
    """Entries (row key, row hash) at the end of `chain`, and its anchor moved to the last."""
    head = con.execute("SELECT pos, link FROM history_anchor WHERE chain = ?", [chain]).fetchone()
    last = (
        head
        or con.execute(  # an anchor deleted by hand: go on from the last entry
            "SELECT pos, link FROM history_chain WHERE chain = ? ORDER BY pos DESC LIMIT 1", [chain]
        ).fetchone()
    )
    pos, link = last if last is not None else (0, GENESIS)
    rows = []
    for key, row_hash in entries:
        pos, prev = pos + 1, link
        link = link_of(prev, row_hash)
        rows.append([chain, pos, key, row_hash, prev, link])
    if not rows:
        return
    con.executemany("INSERT INTO history_chain VALUES (?, ?, ?, ?, ?, ?)", rows)
    if head is None:
        con.execute(
            "INSERT INTO history_anchor VALUES (?, ?, ?, now()::TIMESTAMP, 'a lost anchor', ?)", [chain, pos, link, pos]
        )
    else:
        con.execute("UPDATE history_anchor SET pos = ?, link = ? WHERE chain = ?", [pos, link, chain])


def append_audit(con: duckdb.DuckDBPyConnection, audit_id: int) -> None:
    """The audit row just inserted, at the end of the audit chain (in the caller's transaction)."""
    if chained(con):
        _append(con, "audit_log", list(audit_hashes(con, audit_id).items()))


def append_release(con: duckdb.DuckDBPyConnection, release_id: str) -> None:
    """A release's figures, then its row (tables, private digests, manifest), at the end of
    their chains, inside the commit transaction."""
    _append(con, "release_metrics", list(metric_hashes(con, release_id).items()))
    _append(con, "release_rows", list(release_hashes(con, [release_id]).items()))


def chain_existing(con: duckdb.DuckDBPyConnection, _path: Path | None = None) -> bool:
    """Migration 10: the tables, and every row already there chained as found (releases by
    creation, their figures in the same order, audit rows by id). The chain proves nothing about
    edits made before it started; the anchor says when that was."""
    con.execute(SCHEMA)
    # applied again (a state whose migration rows were rolled back by hand): chained afresh
    con.execute("DELETE FROM history_chain; DELETE FROM history_anchor")
    for chain in CHAINS:  # every chain anchored from the start: a deleted anchor is seen even when empty
        con.execute("INSERT INTO history_anchor VALUES (?, 0, ?, now()::TIMESTAMP, 'migration', 0)", [chain, GENESIS])
    order = [
        r[0]
        for r in con.execute("SELECT release_id FROM release_rows ORDER BY created_at, series, sequence").fetchall()
    ]
    hashes = release_hashes(con)
    figures = [item for rid in order for item in metric_hashes(con, rid).items()]
    for chain, entries in (
        ("release_metrics", figures),
        ("release_rows", [(rid, hashes[rid]) for rid in order]),
        ("audit_log", list(audit_hashes(con).items())),
    ):
        _append(con, chain, entries)
        con.execute(
            "UPDATE history_anchor SET started_by = 'migration', started_rows = ? WHERE chain = ?",
            [len(entries), chain],
        )
    return False  # nothing to compact


# --- the manifest -----------------------------------------------------------------------------


def _file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_figures(con: duckdb.DuckDBPyConnection, release_id: str) -> dict[str, dict[str, Any]]:
    """The figures as the manifest lists them, by kind and name: the exact value as text (a
    privacy figure with its threshold and whether it passed); no worst-case detail (it may
    name a class's cells)."""
    out: dict[str, dict[str, Any]] = {}
    for kind, name, text, threshold, passed in con.execute(
        "SELECT kind, name, text_value, threshold, passed FROM release_metrics WHERE release_id = ? ORDER BY kind, name",
        [release_id],
    ).fetchall():
        value = {"value": text, "threshold": threshold, "passed": passed} if kind == "privacy" else text
        out.setdefault(kind, {})[name] = value
    return out


SEED_WITHHELD = "differential privacy: the noise is drawn from the seed, so it stays in the state"


def spends_budget(figures: dict[str, dict[str, Any]]) -> bool:
    """A differentially private release (it records the epsilon it spent: docs/dp.md)."""
    return "epsilon" in figures.get("privacy", {})


def published_seed(seed: int | None, figures: dict[str, dict[str, Any]]) -> int | None:
    """The seed a release's manifest shows: none for a DP release, whose noise anyone holding the
    seed could recompute and subtract (the state keeps it for the steward's republishing)."""
    return None if spends_budget(figures) else seed


def previous_manifest(con: duckdb.DuckDBPyConnection) -> tuple[str | None, str | None]:
    """(release id, manifest sha256) of the last release in the chain (None, None: none yet)."""
    row = con.execute(
        "SELECT c.row_key, m.sha256 FROM history_chain c LEFT JOIN release_manifests m ON m.release_id = c.row_key "
        "WHERE c.chain = 'release_rows' ORDER BY c.pos DESC LIMIT 1"
    ).fetchone()
    return (row[0], row[1]) if row else (None, None)


def manifest_body(
    con: duckdb.DuckDBPyConnection, release_id: str, files: dict[str, str], previous: tuple[str | None, str | None]
) -> dict[str, Any]:
    row = con.execute(
        "SELECT series, sequence, technique, parameters, seed, created_at FROM release_rows WHERE release_id = ?",
        [release_id],
    ).fetchone()
    assert row is not None  # inserted in this transaction
    series, sequence, technique, parameters, seed, created_at = row
    figures = manifest_figures(con, release_id)
    return {
        "manifest": "privpub release manifest",
        "version": CANONICAL_VERSION,
        "release_id": release_id,
        "series": series,
        "sequence": sequence,
        "technique": technique,
        "created_at": created_at.isoformat(timespec="microseconds"),
        "parameters": json.loads(parameters),
        "seed": published_seed(seed, figures),
        **({"seed_withheld": SEED_WITHHELD} if spends_budget(figures) else {}),
        "files": files,
        "figures": figures,
        "previous_release": previous[0],
        "previous_manifest": previous[1],
    }


def write_manifest(con: duckdb.DuckDBPyConnection, release_id: str, folder: Path, tables: dict[str, str]) -> str:
    """manifest.json in the staged folder (inside the commit, after the report): the published
    files with their sha256 (tables as committed; report.html as written now), parameters, seed,
    figures and the previous manifest's sha256; recorded in release_manifests. Returns its sha256."""
    files = dict(tables)
    report = folder / "report.html"
    if report.is_file():
        files["report.html"] = _file_sha(report)
    previous = previous_manifest(con)
    text = json.dumps(manifest_body(con, release_id, files, previous), indent=2, sort_keys=True) + "\n"
    path = folder / MANIFEST
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    digest = _sha(text.encode())
    con.execute("INSERT INTO release_manifests VALUES (?, ?, ?)", [release_id, digest, previous[1]])
    return digest


# --- checking ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One finding: which table and row (ids and positions only, never a value), and what."""

    table: str
    row: str
    what: str

    def line(self) -> str:
        return f"FAIL history: {self.table} {self.row}: {self.what}"


def _name(chain: str, key: str) -> str:
    if chain == "release_rows":
        return f"release {key}"
    if chain == "release_metrics":
        rid, kind, name = json.loads(key)
        return f"figure {kind} {name} of release {rid}"
    return f"row id {key}"


def _walk(chain: str, entries: list[tuple[int, str, str, str, str]], current: dict[str, str]) -> Iterator[Problem]:
    """The chain's entries against the rows as they are now."""
    link, expected = GENESIS, 1
    for pos, key, row_hash, prev_hash, stored_link in entries:
        where = _name(chain, key)
        if pos != expected:
            yield Problem(chain, f"before {where}", f"chain entries {expected} to {pos - 1} deleted")
        if prev_hash != link:
            yield Problem(chain, where, "the entry before it was deleted or edited (its previous hash does not match)")
        if stored_link != link_of(prev_hash, row_hash):
            yield Problem(chain, where, "its chain entry was edited")
        if key not in current:
            yield Problem(chain, where, "deleted (its chain entry remains)")
        elif current[key] != row_hash:
            yield Problem(chain, where, "edited since it was written (its content no longer matches its hash)")
        link, expected = stored_link, pos + 1


def check_chains(con: duckdb.DuckDBPyConnection) -> tuple[list[Problem], dict[str, Any]]:
    """Every chain against the rows it covers: (problems, a summary per chain: rows, since)."""
    if not chained(con):
        return [Problem("history_chain", "(all)", "the state has no chain (it was never migrated)")], {}
    current = {
        "release_rows": release_hashes(con),
        "release_metrics": metric_hashes(con),
        "audit_log": audit_hashes(con),
    }
    anchors = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT chain, pos, link, started_at, started_by, started_rows FROM history_anchor"
        ).fetchall()
    }
    problems: list[Problem] = []
    summary: dict[str, Any] = {}
    for chain in CHAINS:
        entries = con.execute(
            "SELECT pos, row_key, row_hash, prev_hash, link FROM history_chain WHERE chain = ? ORDER BY pos", [chain]
        ).fetchall()
        problems += _walk(chain, entries, current[chain])
        keys = {e[1] for e in entries}
        problems += [
            Problem(chain, _name(chain, k), "not in the chain (written outside privpub)")
            for k in current[chain]
            if k not in keys
        ]
        anchor = anchors.get(chain)
        last = (entries[-1][0], entries[-1][4]) if entries else (0, GENESIS)
        if anchor is None and entries:
            problems.append(Problem(chain, "(anchor)", "its anchor row was deleted"))
        elif anchor is not None and (anchor[0], anchor[1]) != last:
            problems.append(
                Problem(chain, f"after position {last[0]}", f"entries up to position {anchor[0]} deleted at the end")
            )
        summary[chain] = {"rows": len(current[chain]), "since": anchor[2:] if anchor else None}
    return problems, summary


def check_manifest(
    con: duckdb.DuckDBPyConnection, release_id: str, folder: Path, file_sha: Callable[[Path], str] | None = None
) -> tuple[list[Problem], list[str]]:
    """A release folder's manifest.json against its recorded sha256 and the state's rows, and,
    with `file_sha` (a published file's fingerprint), the files beside it: (problems, notes)."""
    row = con.execute("SELECT sha256, previous FROM release_manifests WHERE release_id = ?", [release_id]).fetchone()
    if row is None:
        return [], [f"release {release_id} has no manifest (committed before the history was chained)"]
    where = f"of release {release_id}"
    path = folder / MANIFEST
    if not path.is_file():
        return [Problem(MANIFEST, where, "missing from its folder")], []
    text = path.read_bytes()
    problems = []
    if _sha(text) != row[0]:
        problems.append(Problem(MANIFEST, where, "edited (its sha256 is not the one recorded at publish)"))
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return [*problems, Problem(MANIFEST, where, "not a manifest (unreadable JSON)")], []
    stored = con.execute(
        "SELECT parameters, seed, series, sequence, technique FROM release_rows WHERE release_id = ?", [release_id]
    ).fetchone()
    if stored is not None:
        figures = manifest_figures(con, release_id)
        said = {
            "parameters": json.loads(stored[0]),
            "seed": published_seed(stored[1], figures),
            "series": stored[2],
            "sequence": stored[3],
            "technique": stored[4],
            "figures": figures,
            "previous_manifest": row[1],
        }
        problems += [
            Problem("release_rows", f"release {release_id}", f"its {name} in the state and in its manifest.json differ")
            for name, value in said.items()
            if body.get(name) != value
        ]
    listed = body.get("files")
    files = {str(k): str(v) for k, v in listed.items()} if isinstance(listed, dict) else {}
    tables = dict(con.execute("SELECT file, sha256 FROM release_tables WHERE release_id = ?", [release_id]).fetchall())
    problems += [
        Problem("release_tables", f"release {release_id}", f"{name}'s sha256 differs from its manifest.json")
        for name, digest in sorted(files.items())
        if name != "report.html" and tables.get(name) != digest
    ]
    on_disk, notes = _files_on_disk(release_id, folder, files, file_sha)
    return problems + on_disk, notes


def _files_on_disk(
    release_id: str, folder: Path, files: dict[str, str], file_sha: Callable[[Path], str] | None
) -> tuple[list[Problem], list[str]]:
    """The files beside the manifest against it: a table missing or changed is a problem;
    report.html rewritten since publish (`privpub report` does) a note."""
    if file_sha is None:
        return [], []
    problems, notes = [], []
    for name, digest in sorted(files.items()):
        path = folder / name
        if path.exists() and file_sha(path) == digest:
            continue
        if name == "report.html":
            notes.append(
                f"release {release_id}: report.html is not the one written at publish (privpub report rewrites it)"
            )
        else:
            problems.append(
                Problem(
                    "published file", f"{name} of release {release_id}", "missing or not the one in its manifest.json"
                )
            )
    return problems, notes


def check_manifest_chain(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """Each recorded manifest names the previous release's manifest (in the release chain's order)."""
    rows = con.execute(
        "SELECT c.row_key, m.sha256, m.previous FROM history_chain c "
        "LEFT JOIN release_manifests m ON m.release_id = c.row_key WHERE c.chain = 'release_rows' ORDER BY c.pos"
    ).fetchall()
    problems, before = [], None
    for rid, sha, previous in rows:
        if sha is not None and previous != before:
            problems.append(Problem("release_manifests", f"release {rid}", "does not name the previous manifest"))
        before = sha
    return problems

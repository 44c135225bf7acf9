"""The Section 7 statistics in the state database (serial_pairs, serial_people, serial_values,
serial_summary; migrations 3 and 4): read through `Store.query`, written by the commit hook inside
the release's commit transaction, so the statistics change exactly when a release is committed.

serial_pairs keeps only the latest state of each (person, value) pair of a series, keyed by
integers (serial_people / serial_values give every person id and value, as text, a dense key),
with the id of the release that last changed it. A release reads the special pairs of its present
people and the pairs it names (`StoredPairs`), and replaces the pairs it names (`statistics_writer`).
Readers get positions in their own arrays back, never the stored text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from duckdb import DuckDBPyConnection as Connection

from privpub.state.store import Store, has_table
from privpub.tasks.techniques.serial import pairs
from privpub.tasks.techniques.serial import statistics as st


def head(store: Store, series: str) -> tuple[str, int, dict[str, Any]] | None:
    """(release id, release number, summary) of the series' latest statistics, or None."""

    def fetch(con: Connection) -> tuple[Any, ...] | None:
        if not has_table(con, "serial_summary"):
            return None
        return con.execute(
            "SELECT release_id, release, summary FROM serial_summary WHERE series = ?", [series]
        ).fetchone()

    row = store.query(fetch) if store.path.exists() else None
    return None if row is None else (row[0], int(row[1]), json.loads(row[2]))


# the special pairs of the given persons and values (a PairSource.special question): persons and
# values are joined to their integer keys first, so that serial_pairs is scanned with integer joins
_SPECIAL = """
WITH x AS (SELECT k.pkey, x.i FROM _serial_persons x JOIN serial_people k
             ON k.series = $series AND k.person = CAST(x.person AS VARCHAR)),
     y AS (SELECT v.vkey, y.i FROM _serial_values y JOIN serial_values v
             ON v.series = $series AND v.value = CAST(y.value AS VARCHAR))
SELECT x.i AS row, y.i AS code, p.p_hi FROM serial_pairs p
JOIN x ON p.pkey = x.pkey JOIN y ON p.vkey = y.vkey
WHERE p.series = $series AND p.p_hi > $floor"""

# the stored state of given (person, value) pairs (a PairSource.state question)
_STATE = """
WITH n AS (SELECT n.j, k.pkey, v.vkey FROM _serial_named n
             JOIN serial_people k ON k.series = $series AND k.person = CAST(n.person AS VARCHAR)
             JOIN serial_values v ON v.series = $series AND v.value = CAST(n.value AS VARCHAR))
SELECT n.j, p.links, p.q, p.d FROM serial_pairs p JOIN n ON p.pkey = n.pkey AND p.vkey = n.vkey
WHERE p.series = $series"""


class StoredPairs:
    """The committed pairs of a series in the state database, as a PairSource (tasks/techniques/serial/
    pairs.py). Each question is one read-only query whose answer is as large as the question
    (present people's special pairs, or the pairs a release names), not as the series. Picklable;
    remembers its last `state` answer, since partition and anonymize ask for the same pairs."""

    def __init__(self, store: Store, series: str):
        self.store, self.series = store, series
        self._last: tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "series": self.series, "_last": None}

    def _query(self, sql: str, tables: dict[str, pa.Table], params: dict[str, Any]) -> pa.Table | None:
        def fetch(con: Connection) -> pa.Table | None:
            if not has_table(con, "serial_people"):
                return None  # nothing committed with the statistics tables yet
            for name, table in tables.items():
                con.register(name, table)
            try:
                return con.execute(sql, {"series": self.series, **params}).to_arrow_table()
            finally:
                for name in tables:
                    con.unregister(name)

        return self.store.query(fetch) if self.store.path.exists() else None

    def special(
        self, persons: np.ndarray, values: np.ndarray, p_floor: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not len(persons) or not len(values) or p_floor == np.inf:
            return pairs.empty_special()
        found = self._query(
            _SPECIAL,
            {
                "_serial_persons": pa.table({"i": np.arange(len(persons)), "person": pa.array(persons)}),
                "_serial_values": pa.table({"i": np.arange(len(values)), "value": pa.array(values)}),
            },
            {"floor": float(p_floor)},
        )
        if found is None or not found.num_rows:
            return pairs.empty_special()
        return (found.column("row").to_numpy(), found.column("code").to_numpy(), found.column("p_hi").to_numpy())

    def state(self, person: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        person, value = np.asarray(person), np.asarray(value, dtype=object)
        if self._last is not None and np.array_equal(self._last[0], person) and np.array_equal(self._last[1], value):
            return self._last[2]
        out = pairs.empty_state(len(person))
        found = (
            self._query(
                _STATE,
                {
                    "_serial_named": pa.table(
                        {"j": np.arange(len(person)), "person": pa.array(person), "value": pa.array(value)}
                    )
                },
                {},
            )
            if len(person)
            else None
        )
        if found is not None and found.num_rows:
            j = found.column("j").to_numpy()
            out[0][j] = True
            out[1][j] = found.column("links").to_numpy()
            out[2][j] = st.to_int(st.column_values(found, "q"))
            out[3][j] = st.to_int(st.column_values(found, "d"))
        self._last = (person, value, out)
        return out


_TYPE = re.compile(r"^[A-Z][A-Z0-9_]*$")  # a plain DuckDB type name (BIGINT, VARCHAR, DOUBLE, ...)


def _column_type(con: Connection, table: str, column: str) -> str:
    kind = con.execute(f"SELECT typeof({column}) FROM {table} LIMIT 1").fetchone()
    return kind[0] if kind and _TYPE.match(kind[0]) else "VARCHAR"


def _add_keys(con: Connection, series: str, table: str, name: str, key: str, source: str) -> None:
    """Dense keys, after the largest so far, for the names in `source` that have none yet."""
    con.execute(
        f"INSERT INTO {table} SELECT $series, n.{name}, "
        f"(SELECT coalesce(max({key}), -1) FROM {table} WHERE series = $series) "
        f"+ row_number() OVER (ORDER BY n.{name}) "
        f"FROM (SELECT DISTINCT {name} FROM ({source})) n "
        f"ANTI JOIN (SELECT {name} FROM {table} WHERE series = $series) k USING ({name})",
        {"series": series},
    )


def statistics_writer(
    series: str,
    *,
    pairs: pa.Table,
    history: pa.Table,
    members: pa.Table,
    summary: dict[str, Any],
    release: int,
    replace: bool,
) -> Callable[[Any, str, int], None]:
    """The commit hook: this release's history rows and membership (`members`: person, gid,
    virtual) are appended, the rows of the pairs in `pairs` (stored form) replaced, and the summary
    row of the series replaced; new persons and values get their integer keys first.
    replace: `pairs` is the whole aggregate (first release after migration 3 on an old state)."""

    def write(con: Connection, release_id: str, sequence: int) -> None:
        args = {"series": series, "rid": release_id}
        tables = {
            "_sp_pairs": pairs.select(st.STORED_COLUMNS),
            "_sp_history": history.select(st.HISTORY_COLUMNS),
            "_sp_members": members.select(["person", "gid", "virtual"]),
        }
        for name, table in tables.items():
            con.register(name, table)
        try:
            people = ["SELECT CAST(person AS VARCHAR) AS person FROM _sp_members"]
            values = ["SELECT CAST(value AS VARCHAR) AS value FROM _sp_history"]
            if pairs.num_rows:
                people.append("SELECT CAST(person AS VARCHAR) AS person FROM _sp_pairs")
                values.append("SELECT CAST(value AS VARCHAR) AS value FROM _sp_pairs")
            _add_keys(con, series, "serial_people", "person", "pkey", " UNION ALL ".join(people))
            if history.num_rows or pairs.num_rows:
                _add_keys(con, series, "serial_values", "value", "vkey", " UNION ALL ".join(values))
            if members.num_rows:
                _record_types(
                    con,
                    series,
                    _column_type(con, "_sp_members", "person"),
                    _column_type(con, "_sp_history", "value") if history.num_rows else None,
                )
                con.execute(
                    "INSERT INTO serial_membership SELECT $series, $rid, k.pkey, m.gid, m.virtual "
                    "FROM _sp_members m JOIN serial_people k ON k.series = $series "
                    "AND k.person = CAST(m.person AS VARCHAR)",
                    args,
                )
            if history.num_rows:
                con.execute(
                    "INSERT INTO serial_history SELECT $series, $rid, h.release, k.pkey, v.vkey, h.size, "
                    "h.count FROM _sp_history h "
                    "JOIN serial_people k ON k.series = $series AND k.person = CAST(h.person AS VARCHAR) "
                    "JOIN serial_values v ON v.series = $series AND v.value = CAST(h.value AS VARCHAR)",
                    args,
                )
            _replace_pairs(con, args, replace, bool(pairs.num_rows))
        finally:
            for name in tables:
                con.unregister(name)
        con.execute(
            "INSERT OR REPLACE INTO serial_summary VALUES (?, ?, ?, ?)",
            [series, release_id, int(release), json.dumps(summary, default=str)],
        )

    return write


def _replace_pairs(con: Connection, args: dict[str, str], replace: bool, named: bool) -> None:
    """The pairs registered as _sp_pairs (`named`: any) keyed and written for the series, after
    the series' old pairs (replace) or the named pairs' old rows (an upsert) are deleted."""
    series = {"series": args["series"]}
    if replace:
        con.execute("DELETE FROM serial_pairs WHERE series = $series", series)
    if named:
        con.execute(
            "CREATE TEMP TABLE _sp_keyed AS SELECT k.pkey, v.vkey, r.links, r.q, r.d, r.p_hi "
            "FROM _sp_pairs r "
            "JOIN serial_people k ON k.series = $series AND k.person = CAST(r.person AS VARCHAR) "
            "JOIN serial_values v ON v.series = $series AND v.value = CAST(r.value AS VARCHAR)",
            series,
        )
        if not replace:  # an upsert: the named pairs' old rows go, their new state comes in
            con.execute(
                "DELETE FROM serial_pairs p USING _sp_keyed n WHERE p.series = $series "
                "AND p.pkey = n.pkey AND p.vkey = n.vkey",
                series,
            )
        con.execute("INSERT INTO serial_pairs SELECT $series, pkey, vkey, links, q, d, p_hi, $rid FROM _sp_keyed", args)
        con.execute("DROP TABLE _sp_keyed")


def _record_types(con: Connection, series: str, person: str, value: str | None) -> None:
    """Keep the series' person and value types; a series whose types change is read back as text."""
    row = con.execute("SELECT person_type, value_type FROM serial_types WHERE series = ?", [series]).fetchone()
    if row is None:
        con.execute("INSERT INTO serial_types VALUES (?, ?, ?)", [series, person, value or "VARCHAR"])
        return
    person = person if row[0] == person else "VARCHAR"
    value = row[1] if value is None or row[1] == value else "VARCHAR"
    if (person, value) != tuple(row):
        con.execute("UPDATE serial_types SET person_type = ?, value_type = ? WHERE series = ?", [person, value, series])


def _types(con: Connection, series: str) -> tuple[str, str]:
    row = con.execute("SELECT person_type, value_type FROM serial_types WHERE series = ?", [series]).fetchone()
    return tuple(row) if row else ("VARCHAR", "VARCHAR")


def history_rows(store: Store, series: str, before_sequence: int) -> pa.Table | None:
    """The history rows of the series' releases before `before_sequence` (one query), in the
    snapshots' own types; rows of releases committed before migration 5 come from their blobs."""

    def fetch(con: Connection) -> tuple[pa.Table | None, list[str]]:
        if not has_table(con, "serial_history"):
            return None, []
        ptype, vtype = _types(con, series)
        rows = con.execute(
            f"SELECT CAST(k.person AS {ptype}) AS person, CAST(v.value AS {vtype}) AS value, h.release, h.size, "
            "h.count FROM serial_history h JOIN release_rows r USING (release_id) "
            "JOIN serial_people k ON k.series = h.series AND k.pkey = h.pkey "
            "JOIN serial_values v ON v.series = h.series AND v.vkey = h.vkey "
            "WHERE h.series = ? AND r.sequence < ? ORDER BY h.release",
            [series, before_sequence],
        ).to_arrow_table()
        older = [
            r[0]
            for r in con.execute(
                "SELECT r.release_id FROM release_rows r JOIN release_private p USING (release_id) "
                "WHERE r.series = ? AND r.sequence < ? AND p.name = 'serial_stats' ORDER BY r.sequence",
                [series, before_sequence],
            ).fetchall()
        ]
        return rows, older

    rows, older = store.query(fetch)
    blobs = [store.private(rid)["serial_stats"] for rid in older]
    return st.concat_history(blobs + ([rows] if rows is not None else []))


def release_private(store: Store, series: str, release_id: str) -> dict[str, pa.Table]:
    """A committed release's history rows, membership and virtual members (what its commit hook
    moved into the tables), for re-verifying it; empty for a release that kept them as blobs."""

    def fetch(con: Connection) -> dict[str, pa.Table]:
        if not has_table(con, "serial_membership"):
            return {}
        ptype, vtype = _types(con, series)
        members = con.execute(
            f"SELECT CAST(k.person AS {ptype}) AS person, m.gid, m.virtual FROM serial_membership m "
            "JOIN serial_people k ON k.series = m.series AND k.pkey = m.pkey "
            "WHERE m.series = ? AND m.release_id = ?",
            [series, release_id],
        ).to_arrow_table()
        if not members.num_rows:
            return {}
        history = con.execute(
            f"SELECT CAST(k.person AS {ptype}) AS person, CAST(v.value AS {vtype}) AS value, h.release, h.size, "
            "h.count FROM serial_history h "
            "JOIN serial_people k ON k.series = h.series AND k.pkey = h.pkey "
            "JOIN serial_values v ON v.series = h.series AND v.vkey = h.vkey "
            "WHERE h.series = ? AND h.release_id = ?",
            [series, release_id],
        ).to_arrow_table()
        virtual = members.column("virtual").to_numpy(zero_copy_only=False)
        return {
            "serial_stats": history,
            "membership": members.filter(pa.array(~virtual)).select(["person", "gid"]),
            "virtual_members": members.filter(pa.array(virtual)).select(["person", "gid"]),
        }

    return store.query(fetch) if store.path.exists() else {}


def pairs_as_of(store: Store, series: str) -> pa.Table | None:
    """Every stored pair of the series with the sequence of the release that last changed it."""

    def fetch(con: Connection) -> pa.Table | None:
        if not has_table(con, "serial_pairs"):
            return None
        return con.execute(
            "SELECT k.person, v.value, p.links, p.q, p.d, r.sequence FROM serial_pairs p "
            "JOIN serial_people k ON k.series = p.series AND k.pkey = p.pkey "
            "JOIN serial_values v ON v.series = p.series AND v.vkey = p.vkey "
            "JOIN release_rows r USING (release_id) WHERE p.series = ?",
            [series],
        ).to_arrow_table()

    return store.query(fetch)


def compare(stored: pa.Table, rebuilt: pd.DataFrame, sequence: int) -> tuple[bool, dict[str, int]]:
    """Whether the stored pairs agree with the aggregate rebuilt from the history rows up to
    release `sequence`: every rebuilt pair is stored, and every stored pair last changed at or
    before that release is rebuilt with the same links, q and d (pairs changed later hold a later
    state and are not compared)."""
    mine = st.aggregate_to_arrow(rebuilt)
    mine = pa.table(
        {
            "person": pc.cast(mine.column("person"), pa.string()) if mine.num_rows else pa.array([], pa.string()),
            "value": pc.cast(mine.column("value"), pa.string()) if mine.num_rows else pa.array([], pa.string()),
            "links": mine.column("links"),
            "q": mine.column("q"),
            "d": mine.column("d"),
        }
    ).to_pandas()
    theirs = stored.to_pandas()
    m = mine.merge(theirs, on=["person", "value"], how="outer", suffixes=("_r", "_s"), indicator=True)
    unstored = int((m["_merge"] == "left_only").sum())
    due = m["sequence"].le(sequence).to_numpy()
    unknown = int(((m["_merge"] == "right_only").to_numpy() & due).sum())
    both = (m["_merge"] == "both").to_numpy() & due
    b = m[both]
    differ = int(
        (
            ~(
                (b["links_r"].astype(np.int64) == b["links_s"].astype(np.int64))
                & (b["q_r"] == b["q_s"])
                & (b["d_r"] == b["d_s"])
            )
        ).sum()
    )
    detail = {
        "pairs": len(mine),
        "compared": int(both.sum()),
        "changed_later": int(((m["_merge"] == "both").to_numpy() & ~due).sum()),
        "not_stored": unstored,
        "not_in_history": unknown,
        "differ": differ,
    }
    return unstored == 0 and unknown == 0 and differ == 0, detail

"""The Section 7 statistics in the state database (tables serial_pairs and serial_summary,
migration 3): read through `Store.query`, written by the commit hook inside the release's commit
transaction, so the statistics change exactly when a release is committed.

serial_pairs keeps only the latest state of each (person, value) pair of a series, with the id of
the release that last changed it; a release reads the pairs of its present people and replaces the
pairs it names, so neither side grows with the history. person and value are stored as text
(DuckDB's CAST on both sides); readers map them back to the snapshot's own values.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tasks.serial import statistics as st


def _has_table(con, name: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                            [name]).fetchone()[0])


def head(store, series: str) -> tuple[str, int, dict] | None:
    """(release id, release number, summary) of the series' latest statistics, or None."""
    def fetch(con):
        if not _has_table(con, "serial_summary"):
            return None
        return con.execute("SELECT release_id, release, summary FROM serial_summary WHERE series = ?",
                           [series]).fetchone()
    row = store.query(fetch) if store.path.exists() else None
    return None if row is None else (row[0], int(row[1]), json.loads(row[2]))


class PairLookup:
    """The committed pairs of given people (stored form, person and value as text). Picklable;
    remembers its last answer, since partition, anonymize and verify ask for the same people."""

    def __init__(self, store, series: str):
        self.store, self.series = store, series
        self._last: tuple[np.ndarray, pa.Table | None] | None = None

    def __getstate__(self):
        return {"store": self.store, "series": self.series, "_last": None}

    def __call__(self, persons: Any) -> pa.Table | None:
        keys = np.sort(pd.unique(np.asarray(persons)))
        if self._last is not None and np.array_equal(self._last[0], keys):
            return self._last[1]
        present = pa.table({"person": pa.array(keys)})

        def fetch(con):
            if not _has_table(con, "serial_pairs"):
                return None
            con.register("_serial_present", present)
            try:  # a hash join against the present people: O(pairs of the present people)
                return con.execute(
                    "SELECT p.person, p.value, p.links, p.q, p.d, p.p_hi FROM serial_pairs p "
                    "JOIN (SELECT DISTINCT CAST(person AS VARCHAR) AS person FROM _serial_present) x "
                    "ON p.person = x.person WHERE p.series = ?", [self.series]).to_arrow_table()
            finally:
                con.unregister("_serial_present")
        table = self.store.query(fetch) if self.store.path.exists() and len(keys) else None
        self._last = (keys, table)
        return table


def as_native(table: pa.Table | None, persons: Any, values: Any) -> pa.Table | None:
    """Stored pairs with person and value turned back from text into the snapshot's own values
    (`persons`, `values`); pairs of values the snapshot does not hold are dropped (this release
    cannot name them)."""
    if table is None or table.num_rows == 0:
        return None
    out = {}
    for name, native in (("person", pd.unique(np.asarray(persons))), ("value", np.asarray(values, dtype=object))):
        native = np.asarray(native)
        if native.dtype == object and all(isinstance(v, str) for v in native):
            out[name] = table.column(name)
            continue
        text = pc.cast(pa.array(native), pa.string()) if native.dtype != object else pa.array([str(v) for v in native])
        at = pc.fill_null(pc.index_in(table.column(name), value_set=text), -1).to_numpy(zero_copy_only=False)
        out[name] = (at, native)
    keep = np.ones(table.num_rows, dtype=bool)
    for name, v in out.items():
        if isinstance(v, tuple):
            keep &= v[0] >= 0
    idx = np.flatnonzero(keep)
    cols = {}
    for name in ("person", "value"):
        v = out[name]
        cols[name] = (pa.array(v[1][v[0][idx]]) if isinstance(v, tuple)
                      else v.take(pa.array(idx)))
    for name in ("links", "q", "d", "p_hi"):
        cols[name] = table.column(name).take(pa.array(idx))
    return pa.table(cols)


def writer(series: str, pairs: pa.Table, summary: dict, release: int,
           replace: bool) -> Callable[[Any, str, int], None]:
    """The commit hook: replace the rows of `pairs` (stored form) and the summary row of the series.
    replace: `pairs` is the whole aggregate (first release after migration 3 on an old state)."""
    def write(con, release_id: str, sequence: int) -> None:
        if replace:
            con.execute("DELETE FROM serial_pairs WHERE series = ?", [series])
        if pairs.num_rows:
            con.register("_serial_new", pairs.select(st.STORED_COLUMNS))
            try:
                con.execute("CREATE TEMP TABLE _serial_rows AS SELECT CAST(person AS VARCHAR) AS person, "
                            "CAST(value AS VARCHAR) AS value, links, q, d, p_hi FROM _serial_new")
                if not replace:  # an upsert: the named pairs' old rows go, their new state comes in
                    con.execute("DELETE FROM serial_pairs p USING _serial_rows n WHERE p.series = ? "
                                "AND p.person = n.person AND p.value = n.value", [series])
                con.execute("INSERT INTO serial_pairs SELECT ?, person, value, links, q, d, p_hi, ? "
                            "FROM _serial_rows", [series, release_id])
                con.execute("DROP TABLE _serial_rows")
            finally:
                con.unregister("_serial_new")
        con.execute("INSERT OR REPLACE INTO serial_summary VALUES (?, ?, ?, ?)",
                    [series, release_id, int(release), json.dumps(summary, default=str)])
    return write


def pairs_as_of(store, series: str) -> pa.Table | None:
    """Every stored pair of the series with the sequence of the release that last changed it."""
    def fetch(con):
        if not _has_table(con, "serial_pairs"):
            return None
        return con.execute("SELECT p.person, p.value, p.links, p.q, p.d, r.sequence FROM serial_pairs p "
                           "JOIN release_rows r USING (release_id) WHERE p.series = ?",
                           [series]).to_arrow_table()
    return store.query(fetch)


def compare(stored: pa.Table, rebuilt: pd.DataFrame, sequence: int) -> tuple[bool, dict[str, int]]:
    """Whether the stored pairs agree with the aggregate rebuilt from the history rows up to
    release `sequence`: every rebuilt pair is stored, and every stored pair last changed at or
    before that release is rebuilt with the same links, q and d (pairs changed later hold a later
    state and are not compared)."""
    mine = st.aggregate_to_arrow(rebuilt)
    mine = pa.table({"person": pc.cast(mine.column("person"), pa.string()) if mine.num_rows else pa.array([], pa.string()),
                     "value": pc.cast(mine.column("value"), pa.string()) if mine.num_rows else pa.array([], pa.string()),
                     "links": mine.column("links"), "q": mine.column("q"), "d": mine.column("d")}).to_pandas()
    theirs = stored.to_pandas()
    m = mine.merge(theirs, on=["person", "value"], how="outer", suffixes=("_r", "_s"), indicator=True)
    unstored = int((m["_merge"] == "left_only").sum())
    due = m["sequence"].le(sequence).to_numpy()
    unknown = int(((m["_merge"] == "right_only").to_numpy() & due).sum())
    both = (m["_merge"] == "both").to_numpy() & due
    b = m[both]
    differ = int((~((b["links_r"].astype(np.int64) == b["links_s"].astype(np.int64))
                    & (b["q_r"] == b["q_s"]) & (b["d_r"] == b["d_s"]))).sum())
    detail = {"pairs": len(mine), "compared": int(both.sum()), "changed_later": int(((m["_merge"] == "both").to_numpy() & ~due).sum()),
              "not_stored": unstored, "not_in_history": unknown, "differ": differ}
    return unstored == 0 and unknown == 0 and differ == 0, detail

"""The composition summaries in the state database (migration 7), read through `Store.query` and
written by a commit hook inside the release's commit transaction.

A release reads only the rows of the people it holds (joined on the person's pseudonym: the
state never holds a person id, state/pseudonyms.py) and the sets those people point at: as
large as the release, whatever the length of the series.
Readers get positions in their own arrays back, never the stored text.

Several rows per person (`[dataset] rows_per_person = "many"`): compose_people keeps one row per
person, compose_membership one per (person, value) of each release; a set's largest excess
(tasks/compose/algebra.py) is a compose_sets row of value key EXCESS_VKEY (-1, never a value's
key) whose minc holds it, written only where it is above 0 (so a series of one row per person
stores what it stored before).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from privpub.schemas.errors import StaleHistory
from privpub.state.store import Store, has_table
from privpub.tasks.compose.algebra import Sets

EXCESS_VKEY = -1  # compose_sets: the row carrying a set's largest excess (several rows per person)


@dataclass
class Prior:
    """What the series' earlier releases say about the people of this input (row-aligned)."""

    sid: int  # the series' key
    release_id: str
    release: int  # number of the latest release the summaries include
    sets: Sets  # the summaries of the people below, value codes in this input's value order
    set_of_row: np.ndarray  # (n,) the row's set in `sets`, -1 for a newcomer
    pkey: np.ndarray  # (n,) stored person key, -1 for a newcomer
    cohort: np.ndarray  # (n,) the row's kept group, -1 for a newcomer
    stored_vkey: np.ndarray  # (n,) the value key in the person's latest release, -1 for a newcomer
    code_to_vkey: np.ndarray  # (values,) this input's value codes -> stored keys (-1: a new value)
    vkey_transient: np.ndarray  # (stored values,) whether a stored value is transient
    next_pkey: int
    next_set: int
    next_cohort: int
    transient: list[str]


def _fetch_prior(
    con: duckdb.DuckDBPyConnection, series: str, persons: pa.Array
) -> tuple[tuple[Any, ...], list[Any], pa.Table, pa.Table, pa.Table] | None:
    """The series' head, stored values, and the stored people among `persons` with their sets
    (their values' counts and the sets' info); None when the series has no summaries."""
    if not has_table(con, "compose_head"):
        return None
    head = con.execute(
        "SELECT sid, release_id, release, next_pkey, next_set, next_cohort, transient "
        "FROM compose_head WHERE series = ?",
        [series],
    ).fetchone()
    if head is None:
        return None
    p = {"sid": head[0]}
    con.register("_compose_rows", pa.table({"i": np.arange(len(persons), dtype=np.int64), "person": persons}))
    try:
        stored = con.execute("SELECT vkey, value FROM compose_values WHERE sid = $sid ORDER BY vkey", p).fetchall()
        people = con.execute(
            "SELECT x.i, p.pkey, p.set_id, p.vkey, p.cohort FROM compose_people p "
            "JOIN _compose_rows x ON p.person = x.person WHERE p.sid = $sid",
            p,
        ).fetch_arrow_table()
        con.register("_compose_ids", people.select(["set_id"]))
        sets = con.execute(
            "SELECT set_id, vkey, minc FROM compose_sets WHERE sid = $sid AND "
            "set_id IN (SELECT set_id FROM _compose_ids)",
            p,
        ).fetch_arrow_table()
        info = con.execute(
            "SELECT set_id, min_t, min_tc FROM compose_set_info WHERE sid = $sid "
            "AND set_id IN (SELECT set_id FROM _compose_ids) ORDER BY set_id",
            p,
        ).fetch_arrow_table()
    finally:
        for name in ("_compose_rows", "_compose_ids"):
            with contextlib.suppress(Exception):  # _compose_ids exists only if the join ran
                con.unregister(name)
    return head, stored, people, sets, info


def _value_keys(stored: list[Any], values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stored values as text, stored key -> this input's code (-1: absent; one slot more for
    none), and this input's code -> stored key (-1: a new value)."""
    stored_text = np.array([v for _, v in stored], dtype=object)
    vkey_to_code = np.full(len(stored) + 1, -1, np.int64)  # dense keys 0..; the last slot: none
    vkey_to_code[: len(stored)] = pd.Index(values).get_indexer(stored_text) if len(stored) else []
    code_to_vkey = np.full(len(values), -1, np.int64)
    known = vkey_to_code[: len(stored)] >= 0
    code_to_vkey[vkey_to_code[: len(stored)][known]] = np.flatnonzero(known)
    return stored_text, vkey_to_code, code_to_vkey


def _stored_sets(sets: pa.Table, info: pa.Table, ids: np.ndarray, vkey_to_code: np.ndarray) -> Sets:
    """The fetched sets as Sets, value codes in this input's value order."""
    owner = np.searchsorted(ids, sets.column("set_id").to_numpy())
    vkey = sets.column("vkey").to_numpy()
    minc = sets.column("minc").to_numpy().astype(np.int64)
    excess = vkey == EXCESS_VKEY
    max_e = None
    if excess.any():  # people with several values: each set's largest excess (0 where no row)
        max_e = np.zeros(len(ids), np.int64)
        max_e[owner[excess]] = minc[excess]
        owner, vkey, minc = owner[~excess], vkey[~excess], minc[~excess]
    code = vkey_to_code[vkey]
    order = np.lexsort((code, owner))
    return Sets(
        np.searchsorted(owner[order], np.arange(len(ids) + 1)).astype(np.int64),
        code[order],
        minc[order],
        info.column("min_t").to_numpy().astype(np.int64),
        info.column("min_tc").to_numpy().astype(np.int64),
        max_e,
    )


def started(store: Store, series: str) -> bool:
    """Whether the series has summaries (`load` would read some): a release of a series without
    any needs its people's pseudonyms only when it commits."""

    def head(con: duckdb.DuckDBPyConnection) -> bool:
        if not has_table(con, "compose_head"):
            return False
        return con.execute("SELECT 1 FROM compose_head WHERE series = ?", [series]).fetchone() is not None

    return bool(store.query(head)) if store.path.exists() else False


def load(store: Store, series: str, persons: pa.Array, values: np.ndarray) -> Prior | None:
    """persons: this input's person pseudonyms (`Store.pseudonyms().of(person_text(...))`), per
    row; values: its distinct sensitive values
    as text, in code order. None when the series has no summaries yet."""

    def fetch(con: duckdb.DuckDBPyConnection) -> tuple[tuple[Any, ...], list[Any], pa.Table, pa.Table, pa.Table] | None:
        return _fetch_prior(con, series, persons)

    got = store.query(fetch) if store.path.exists() else None
    if got is None:
        return None
    head, stored, people, sets, info = got
    transient = json.loads(head[6])
    stored_text, vkey_to_code, code_to_vkey = _value_keys(stored, values)
    n = len(persons)
    ids = info.column("set_id").to_numpy()
    rows = people.column("i").to_numpy()

    def per_row(column: str, what: np.ndarray | None = None) -> np.ndarray:
        out = np.full(n, -1, np.int64)
        out[rows] = people.column(column).to_numpy() if what is None else what
        return out

    return Prior(
        int(head[0]),
        head[1],
        int(head[2]),
        _stored_sets(sets, info, ids, vkey_to_code),
        per_row("set_id", np.searchsorted(ids, people.column("set_id").to_numpy())),
        per_row("pkey"),
        per_row("cohort"),
        per_row("vkey"),
        code_to_vkey,
        np.isin(stored_text, transient),
        int(head[3]),
        int(head[4]),
        int(head[5]),
        transient,
    )


def latest_values(store: Store, sid: int, pkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stored value keys of people in their latest release (compose_membership), for people
    with several values (rows_per_person = "many"): (position in `pkeys`, value key) pairs."""

    def fetch(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        con.register("_compose_keys", pa.table({"i": np.arange(len(pkeys), dtype=np.int64), "pkey": pkeys}))
        try:
            return con.execute(
                "SELECT k.i, m.vkey FROM _compose_keys k JOIN compose_people p ON p.sid = $sid AND p.pkey = k.pkey "
                "JOIN compose_membership m ON m.sid = $sid AND m.pkey = p.pkey AND m.release = p.release",
                {"sid": sid},
            ).fetchnumpy()
        finally:
            con.unregister("_compose_keys")

    got = store.query(fetch)
    return np.asarray(got["i"], np.int64), np.asarray(got["vkey"], np.int64)


def summaries_writer(
    series: str,
    prior: Prior | None,
    *,
    persons: pa.Array,
    pkey: np.ndarray,
    set_id: np.ndarray,
    code: np.ndarray,
    cohort: np.ndarray,
    gid: np.ndarray,
    sets: Sets,
    set_base: int,
    values: np.ndarray,
    next_ids: tuple[int, int, int],
    transient: list[str],
    several_rows: bool = False,
) -> Callable[..., Any]:
    """The writes of one release (its published people only; `code` = their value codes): their
    rows replaced, new values keyed, the new sets added, sets nobody points at any more dropped,
    the release's groups appended, the head moved. several_rows: the arrays hold a person once
    per value of theirs (same key, set, cohort and group): compose_people gets one row per
    person, compose_membership one per (person, value)."""
    code_to_vkey, new_values = value_keys(prior, values)
    people, set_rows, info = summary_tables(
        code_to_vkey,
        persons=persons,
        pkey=pkey,
        set_id=set_id,
        code=code,
        cohort=cohort,
        gid=gid,
        sets=sets,
        set_base=set_base,
    )
    tables = {
        "_compose_people": people,
        "_compose_sets": set_rows,
        "_compose_info": info,
        "_compose_values": new_values,
    }
    if several_rows:
        first = np.unique(pkey, return_index=True)[1]
        tables["_compose_people"] = people.take(pa.array(np.sort(first)))
        tables["_compose_membership"] = people
    return table_writer(
        series, prior.sid if prior else None, tables, next_ids, transient, prior.next_set if prior else None
    )


def value_keys(prior: Prior | None, values: np.ndarray) -> tuple[np.ndarray, pa.Table]:
    """This input's value codes -> stored keys, new values getting the next keys; and the rows
    of compose_values to add."""
    code_to_vkey = prior.code_to_vkey.copy() if prior else np.full(len(values), -1, np.int64)
    fresh = np.flatnonzero(code_to_vkey < 0)
    first_vkey = len(prior.vkey_transient) if prior else 0
    code_to_vkey[fresh] = first_vkey + np.arange(len(fresh))
    return code_to_vkey, pa.table(
        {"vkey": code_to_vkey[fresh].astype(np.int32), "value": pa.array(values[fresh], pa.string())}
    )


def summary_tables(
    code_to_vkey: np.ndarray,
    *,
    persons: pa.Array,
    pkey: np.ndarray,
    set_id: np.ndarray,
    code: np.ndarray,
    cohort: np.ndarray,
    gid: np.ndarray,
    sets: Sets,
    set_base: int,
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The rows of compose_people (and compose_membership), compose_sets and compose_set_info."""
    people = pa.table(
        {
            "person": persons,
            "pkey": pkey,
            "set_id": set_id,
            "vkey": code_to_vkey[code].astype(np.int32),
            "cohort": cohort,
            "gid": gid,
        }
    )
    set_rows = set_table(sets, code_to_vkey[sets.value], set_base)
    info = pa.table(
        {
            "set_id": np.arange(sets.size, dtype=np.int64) + set_base,
            "min_t": sets.min_t.astype(np.int32),
            "min_tc": sets.min_tc.astype(np.int32),
        }
    )
    return people, set_rows, info


def set_table(sets: Sets, vkey: np.ndarray, set_base: int) -> pa.Table:
    """The rows of compose_sets of `sets` (vkey: the stored key of each of their values), numbered
    from set_base; with a row of EXCESS_VKEY for each set whose largest excess is above 0."""
    set_id, minc = sets.owner() + set_base, sets.minc
    if sets.max_e is not None and (sets.max_e > 0).any():
        over = np.flatnonzero(sets.max_e > 0)
        set_id = np.concatenate([set_id, over + set_base])
        vkey = np.concatenate([vkey, np.full(len(over), EXCESS_VKEY)])
        minc = np.concatenate([minc, sets.max_e[over]])
    return pa.table({"set_id": set_id, "vkey": vkey.astype(np.int32), "minc": minc.astype(np.int32)})


# A summary table handed to the commit hook: an Arrow table, or the Parquet files a release on a
# cluster staged (DuckDB reads them as it writes)
SummarySource: TypeAlias = "pa.Table | list[str]"


def _attach(con: duckdb.DuckDBPyConnection, name: str, source: SummarySource) -> None:
    if isinstance(source, list):
        con.read_parquet(source).create_view(name)
    else:
        con.register(name, source)


def _detach(con: duckdb.DuckDBPyConnection, name: str, source: SummarySource) -> None:
    if isinstance(source, list):
        con.execute(f"DROP VIEW IF EXISTS {name}")
    else:
        con.unregister(name)


def _series_key(con: duckdb.DuckDBPyConnection, sid: int | None) -> int:
    """The series' key: its own, or for a series without summaries yet a key no forgotten series left."""
    if sid is not None:
        return sid
    row = con.execute(
        "SELECT coalesce(max(sid), -1) + 1 FROM (SELECT sid FROM compose_head UNION ALL "
        "SELECT sid FROM compose_values UNION ALL SELECT sid FROM compose_membership)"
    ).fetchone()
    assert row is not None  # an aggregate returns one row
    return int(row[0])


def _refuse_rebuilt(con: duckdb.DuckDBPyConnection, series: str, sid: int, read_next_set: int) -> None:
    """Refuse the commit when the summaries were rebuilt since this release read them."""
    now = con.execute("SELECT next_set FROM compose_head WHERE sid = ?", [sid]).fetchone()
    if now is None or now[0] != read_next_set:
        raise StaleHistory(
            f"the summaries of series '{series}' were rebuilt (privpub series change) while this "
            "release was computed from them; run it again"
        )


def _write_rows(
    con: duckdb.DuckDBPyConnection, p: dict[str, int], replace: bool, membership: str, sequence: int
) -> None:
    """The attached tables into the summaries: people replaced (`replace`: the series has rows),
    values, sets and their info added, sets nobody points at dropped, the release's groups."""
    con.execute("INSERT INTO compose_values SELECT $sid, vkey, value FROM _compose_values", p)
    if replace:
        con.execute("DELETE FROM compose_people WHERE sid = $sid AND pkey IN (SELECT pkey FROM _compose_people)", p)
    con.execute(
        "INSERT INTO compose_people SELECT $sid, person, pkey, set_id, vkey, cohort, $r FROM _compose_people",
        {**p, "r": sequence},
    )
    con.execute("INSERT INTO compose_sets SELECT $sid, set_id, vkey, minc FROM _compose_sets", p)
    con.execute("INSERT INTO compose_set_info SELECT $sid, set_id, min_t, min_tc FROM _compose_info", p)
    if replace:
        for table in ("compose_sets", "compose_set_info"):
            con.execute(
                f"DELETE FROM {table} WHERE sid = $sid AND set_id NOT IN "
                "(SELECT set_id FROM compose_people WHERE sid = $sid)",
                p,
            )
    con.execute(  # a person once per value of theirs under rows_per_person = "many"
        "INSERT INTO compose_membership SELECT $sid, $r, pkey, gid, vkey FROM " + membership,
        {**p, "r": sequence},
    )


@contextlib.contextmanager
def _bulk_insert(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The summaries' rows (a row per person: a million for a 1M release) inserted on one thread
    and without DuckDB's dictionary analysis, which finds nothing in distinct pseudonyms: half the
    CPU time of the insert (0.72 s -> 0.29 s for 1M people, docs/benchmarks.md), the same rows
    and file size. The settings are the state's own in-process database's (state/attached.py,
    held by this writer alone), restored after."""
    row = con.execute("SELECT current_setting('threads'), current_setting('disabled_compression_methods')").fetchone()
    assert row is not None  # one row of settings
    threads, disabled = row
    con.execute("SET threads = 1")
    con.execute("SET disabled_compression_methods = 'dictionary'")
    try:
        yield
    finally:
        con.execute(f"SET threads = {int(threads)}")
        if disabled:
            con.execute("SET disabled_compression_methods = ?", [disabled])
        else:
            con.execute("RESET disabled_compression_methods")


def table_writer(
    series: str,
    sid: int | None,
    tables: dict[str, SummarySource],
    next_ids: tuple[int, int, int],
    transient: list[str],
    read_next_set: int | None = None,
) -> Callable[[duckdb.DuckDBPyConnection, str, int], None]:
    """The commit hook writing one release's summaries. tables: `_compose_people`, `_compose_sets`,
    `_compose_info`, `_compose_values`, each an Arrow table or a list of Parquet files (what a
    release on a cluster staged, tasks/compose/cluster.py: DuckDB reads them as it writes).
    sid: the series' key, None for a series without summaries yet. read_next_set: the series'
    next set id when its summaries were read; another one at the commit means they were rebuilt
    meanwhile (tasks/compose/change.py), and the commit is refused."""

    def write(con: duckdb.DuckDBPyConnection, release_id: str, sequence: int) -> None:
        p = {"sid": _series_key(con, sid)}
        if sid is not None and read_next_set is not None:
            _refuse_rebuilt(con, series, sid, read_next_set)
        for name, source in tables.items():
            _attach(con, name, source)
        try:
            membership = "_compose_membership" if "_compose_membership" in tables else "_compose_people"
            with _bulk_insert(con):
                _write_rows(con, p, sid is not None, membership, sequence)
            con.execute(
                "INSERT OR REPLACE INTO compose_head VALUES ($s, $sid, $rid, $r, $np, $ns, $nc, $t)",
                {
                    **p,
                    "s": series,
                    "rid": release_id,
                    "r": sequence,
                    "np": next_ids[0],
                    "ns": next_ids[1],
                    "nc": next_ids[2],
                    "t": json.dumps(sorted(transient)),
                },
            )
        finally:
            for name, source in tables.items():
                _detach(con, name, source)

    return write

"""The composition figure of a committed release, rebuilt from the stored groups of every release
of its series up to it (`compose_membership`), for `privpub verify`: it does not trust the
summaries the publish read, it replays the series.

In batches of people, so the process holds one batch's rows and summaries, not the series': a
person's summary depends only on its own earlier summary and on its groups' records per value in
each release. DuckDB counts the records per (release, group, value) of the whole series once, into
a temporary table of the read connection (held by DuckDB, not by the arrays of a batch), and the
groups' excess (rows_per_person = "many": a person stored once per value of theirs; the group's
rows beyond one per person, tasks/compose/algebra.py). A
batch is a range of person keys, so it holds every row of each of its people; release by release
it reads its people's rows and the counts of the groups they are in (whole groups, whoever else
is in them). Sets are shared within a batch only, which changes their numbering, not their
contents, so the figures are those of one replay of everybody.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from privpub.state.store import Store
from privpub.tasks.compose.algebra import GroupCounts, Sets, compose, shared

BATCH_PEOPLE = 1_000_000  # people replayed at once (as a cluster publish composes them)
COUNTS = "_replay_counts"  # the series' records per (release, group, value): a temporary table
EXCESS = "_replay_excess"  # (release, group, rows beyond one per person), where any: a temporary table
GROUPS = "_replay_groups"  # a batch's groups in one release, shown to the read connection


def one_row(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | dict[str, Any] | None = None
) -> tuple[Any, ...]:
    """The one row of an aggregate query (it always has one)."""
    row = con.execute(sql, params).fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    return row


def _concat(a: Sets, b: Sets) -> Sets:
    several = a.max_e is not None or b.max_e is not None
    return Sets(
        np.concatenate([a.ptr, b.ptr[1:] + a.ptr[-1]]),
        np.concatenate([a.value, b.value]),
        np.concatenate([a.minc, b.minc]),
        np.concatenate([a.min_t, b.min_t]),
        np.concatenate([a.min_tc, b.min_tc]),
        np.concatenate([a.excess(), b.excess()]) if several else None,
    )


def replay(
    store: Store, series: str, sequence: int, by_values: bool, threshold: int, batch_people: int = BATCH_PEOPLE
) -> tuple[int, int, int] | None:
    """(fewest figure, people below the threshold, releases replayed) for the people of the
    newest release up to `sequence` with stored groups, or None when the series has none.
    by_values: candidate values (the l figure), else records (the k figure)."""
    result: tuple[int, int, int] | None = store.query(
        lambda con: _replay(con, series, sequence, by_values, threshold, batch_people)
    )
    return result


def _replay(
    con: duckdb.DuckDBPyConnection,
    series: str,
    sequence: int,
    by_values: bool,
    threshold: int,
    batch_people: int,
) -> tuple[int, int, int] | None:
    head = con.execute("SELECT sid, transient FROM compose_head WHERE series = ?", [series]).fetchone()
    if head is None:
        return None
    sid, transient = head
    transient_mask = np.isin(stored_values(con, sid), json.loads(transient))
    lo, hi, releases = stored_releases(con, sid, sequence)
    if not releases:
        return None
    fewest, below = np.iinfo(np.int64).max, 0
    with counted_groups(con, sid, releases):
        for people in person_batches(lo, hi, batch_people):  # the figures folded over the batches
            fig = _batch(con, sid, people, releases, transient_mask, by_values)
            fewest = int(fig.min(initial=fewest))
            below += int((fig < threshold).sum())
    return fewest, below, len(releases)


def stored_values(con: duckdb.DuckDBPyConnection, sid: int) -> np.ndarray:
    """The series' sensitive values as text, by value key."""
    values = con.execute("SELECT value FROM compose_values WHERE sid = ? ORDER BY vkey", [sid]).fetchall()
    return np.array([v for (v,) in values], dtype=object)


def stored_releases(
    con: duckdb.DuckDBPyConnection, sid: int, sequence: int | None = None
) -> tuple[int, int, list[int]]:
    """(the lowest and highest person key, the releases with stored groups), up to `sequence`."""
    lo, hi, releases = one_row(
        con,
        "SELECT min(pkey), max(pkey), list(DISTINCT release ORDER BY release) FROM compose_membership "
        "WHERE sid = ? AND release <= ?",
        [sid, np.iinfo(np.int32).max if sequence is None else sequence],
    )
    return lo, hi, releases or []


def person_batches(lo: int, hi: int, batch_people: int) -> list[tuple[int, int]]:
    """Ranges [a, b) of person keys, batch_people keys each."""
    return [(first, min(first + batch_people, hi + 1)) for first in range(lo, hi + 1, batch_people)]


@contextlib.contextmanager
def counted_groups(con: duckdb.DuckDBPyConnection, sid: int, releases: list[int]) -> Iterator[None]:
    """The series' records per (release, group, value) in a temporary table of `con` while the
    block runs (what `_group_counts` reads), counted one release at a time: DuckDB holds one
    release's groups to count them."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {COUNTS} (release INTEGER, gid BIGINT, vkey INTEGER, n BIGINT)")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {EXCESS} (release INTEGER, gid BIGINT, e BIGINT)")
    try:
        for release in releases:
            con.execute(
                f"INSERT INTO {COUNTS} SELECT release, gid, vkey, count(*) FROM compose_membership "
                "WHERE sid = ? AND release = ? GROUP BY ALL",
                [sid, release],
            )
            con.execute(  # a person with several values is stored once per value (rows_per_person = "many")
                f"INSERT INTO {EXCESS} SELECT release, gid, count(*) - count(DISTINCT pkey) AS e "
                "FROM compose_membership WHERE sid = ? AND release = ? GROUP BY ALL HAVING e > 0",
                [sid, release],
            )
        yield
    finally:
        con.execute(f"DROP TABLE IF EXISTS {COUNTS}")
        con.execute(f"DROP TABLE IF EXISTS {EXCESS}")


def _batch(
    con: duckdb.DuckDBPyConnection,
    sid: int,
    people: tuple[int, int],
    releases: list[int],
    transient: np.ndarray,
    by_values: bool,
) -> np.ndarray:
    """The figures, in the newest release, of the people whose keys are in [people[0], people[1])
    (none when they are not in it)."""
    sets, set_of, latest = replay_people(con, sid, people, releases, transient)
    in_newest = set_of[latest == releases[-1]]
    result: np.ndarray = (sets.candidates() if by_values else sets.identity())[in_newest]
    return result


def replay_people(
    con: duckdb.DuckDBPyConnection, sid: int, people: tuple[int, int], releases: list[int], transient: np.ndarray
) -> tuple[Sets, np.ndarray, np.ndarray]:
    """The summaries of the people whose keys are in [people[0], people[1]) after `releases`
    (sorted), replayed release by release, one release's rows at a time: (the sets, each person's
    set, each person's latest release; -1 for a key in none of them). `transient`: per stored
    value key, whether the model replayed calls it transient. The sets of the newest release are
    not shared with the earlier ones (`shared` does it when they are to be stored)."""
    set_of = np.full(people[1] - people[0], -1, np.int64)
    latest = np.full(people[1] - people[0], -1, np.int64)
    several = bool(one_row(con, f"SELECT count(*) FROM {EXCESS}")[0])  # people with several values
    sets = Sets.empty(several)
    for release in releases:
        rows = con.execute(
            "SELECT pkey, gid, vkey FROM compose_membership WHERE sid = $sid AND release = $r "
            "AND pkey >= $a AND pkey < $b",
            {"sid": sid, "r": release, "a": people[0], "b": people[1]},
        ).fetchnumpy()
        if not len(rows["pkey"]):
            continue
        person = np.asarray(rows["pkey"], np.int64) - people[0]
        groups, g = np.unique(rows["gid"], return_inverse=True)  # the batch's groups, numbered densely
        new, row_set = compose(
            sets, set_of[person], g, _group_counts(con, release, groups, transient, several), ~transient
        )
        set_of[person] = row_set + sets.size
        latest[person] = release
        sets = _concat(sets, new)  # absent people keep their sets
        if release != releases[-1]:  # equal summaries shared, so the sets stay few
            sets, index = shared(sets)
            set_of = np.where(set_of >= 0, index[np.clip(set_of, 0, None)], -1)
    return sets, set_of, latest


def _group_counts(
    con: duckdb.DuckDBPyConnection, release: int, groups: np.ndarray, transient: np.ndarray, several_rows: bool = False
) -> GroupCounts:
    """Every record of the release's `groups` (sorted ids), whoever holds it, counted per value;
    the groups numbered by their position in `groups`; several_rows: with each group's excess."""
    con.register(GROUPS, pa.table({"gid": groups, "pos": np.arange(len(groups), dtype=np.int64)}))
    try:  # keyed and sorted by DuckDB: position * values + value
        got = con.execute(
            f"SELECT g.pos * ? + c.vkey AS key, c.n FROM {COUNTS} c JOIN {GROUPS} g USING (gid) "
            "WHERE c.release = ? ORDER BY key",
            [len(transient), release],
        ).fetchnumpy()
        over = con.execute(
            f"SELECT g.pos, x.e FROM {EXCESS} x JOIN {GROUPS} g USING (gid) WHERE x.release = ?", [release]
        ).fetchnumpy()
    finally:
        con.unregister(GROUPS)
    excess = None
    if several_rows:
        excess = np.zeros(len(groups), np.int64)
        excess[np.asarray(over["pos"], np.int64)] = np.asarray(over["e"], np.int64)
    return GroupCounts.of_counts(
        np.asarray(got["key"], np.int64), np.asarray(got["n"], np.int64), len(groups), transient, excess
    )

"""Changing the settings of a series that keeps its history (`privpub series change SPEC`,
`privpub.change_series`; docs/series.md, "Changing a series' settings").

The stored summaries assume the series' transient list, so a publish refuses another list. A
change rebuilds every person's summary from the stored groups of every release
(`compose_membership`) under the spec's `[series]` settings, with the replay `privpub verify`
uses (tasks/compose/rebuild.py), and re-checks the whole series as the adversary holding every
release would: the change is refused exactly when some release of the series, published from the
start under the new settings, would have been refused. It refuses too when the stored values
break the new model (a person's value changed between releases, one of the two not transient).

One transaction of the state database: the new summaries and settings and the audit row are
written together, or nothing is (a refusal, a failure or a killed process leave the series as it
was). The write lock is held throughout, so no release of the series commits meanwhile; a
release computed from the summaries read before is refused at its commit (StaleHistory).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from privpub.schemas.errors import PrivacyRefused, SpecError, StateError, public_message
from privpub.state.failpoints import failpoint
from privpub.state.store import Store, has_table, lock_wait_seconds
from privpub.tasks.compose import remedies
from privpub.tasks.compose.algebra import Sets, expand, shared
from privpub.tasks.compose.check import SeriesSettings
from privpub.tasks.compose.rebuild import (
    BATCH_PEOPLE,
    counted_groups,
    one_row,
    person_batches,
    replay_people,
    stored_releases,
    stored_values,
)
from privpub.tasks.compose.summaries import set_table

NEW_SETS = "_change_sets"  # a batch's rebuilt summaries, shown to the connection while written
NEW_INFO = "_change_info"
NEW_PEOPLE = "_change_people"


@dataclass(frozen=True)
class SeriesChange:
    """A series' settings changed: the figure over the whole series under the new settings."""

    series: str
    model: str  # series-composition-l or series-composition-k
    threshold: int
    value: int | None  # the fewest over the people checked (None: nobody is, one release only)
    below: int  # people below the threshold (0 unless [series] composition = "warn")
    people: int  # people whose figure was checked (those in a release after the series' first)
    releases: int  # releases replayed
    transient_before: int  # how many values the list held, and holds now (never the values)
    transient_after: int
    views: int = 1  # adversaries composed (Butterfly: one per QID): people are then (person, QID) pairs

    @property
    def who(self) -> str:
        return "(person, QID) pairs" if self.views > 1 else "people"

    def lines(self) -> list[str]:
        figure = "-" if self.value is None else str(self.value)
        return [
            f"series '{self.series}' changed: [series] transient {self.transient_before} -> "
            f"{self.transient_after} values; summaries rebuilt from {self.releases} releases",
            f"{self.model}: {figure} (required {self.threshold}) over {self.people} {self.who} of the series, "
            f"{self.below} below",
        ]


@dataclass
class _Figures:
    """The whole series' figures, folded over the batches of people."""

    fewest: int = int(np.iinfo(np.int64).max)
    checked: int = 0
    below_pkeys: list[np.ndarray] = field(default_factory=list)

    def add(self, fig: np.ndarray, checked: np.ndarray, pkeys: np.ndarray, threshold: int) -> None:
        self.fewest = int(fig[checked].min(initial=self.fewest))
        self.checked += int(checked.sum())
        below = checked & (fig < threshold)
        self.below_pkeys.append(pkeys[below])

    @property
    def below(self) -> np.ndarray:
        return np.concatenate(self.below_pkeys) if self.below_pkeys else np.zeros(0, np.int64)


def rebuild_series(
    store: Store,
    series: str,
    settings: SeriesSettings,
    actor: str,
    batch_people: int = BATCH_PEOPLE,
    views: int = 1,
) -> SeriesChange:
    """Rebuild the series' summaries under `settings` (the spec's [series]) and keep them when
    the whole series passes; else raise (PrivacyRefused: a figure below the threshold;
    SpecError: the stored values break the new model; StateError: nothing stored to change),
    the series unchanged and the refusal in the audit log."""
    try:
        return _change(store, series, settings, actor, batch_people, views)
    except (PrivacyRefused, SpecError, StateError):
        raise  # refusals are logged inside the change's connection
    except Exception as exc:  # the transaction rolled back: the attempt is still recorded
        detail = {"error": type(exc).__name__, "message": public_message(exc)}
        Store(store.path, lock_timeout=min(lock_wait_seconds(), 30)).log_attempt(
            actor, "series-change", series, "failed", None, detail
        )
        raise


def _change(
    store: Store, series: str, settings: SeriesSettings, actor: str, batch_people: int, views: int
) -> SeriesChange:
    model = "series-composition-l" if settings.l else "series-composition-k"
    threshold = settings.l or settings.k
    assert threshold is not None  # series_settings sets k when there is no l
    with store.write() as con:
        sid, before, next_set = _stored_head(con, series, actor)
        values = stored_values(con, sid)
        transient = np.isin(values, list(settings.transient))
        detail: dict[str, Any] = {
            "series": series,
            "before": {"transient": before},
            "after": {"transient": sorted(settings.transient), "composition": settings.mode, model: threshold},
        }
        _refuse_broken(con, sid, np.flatnonzero(transient), series, actor, detail)
        lo, hi, releases = stored_releases(con, sid)
        figures = _Figures()
        con.execute("BEGIN TRANSACTION")
        try:
            new_next_set = _rewrite(
                con, sid, (lo, hi, releases), transient, settings, threshold, next_set, figures, batch_people
            )
            below = figures.below
            result = SeriesChange(
                series,
                model,
                threshold,
                figures.fewest if figures.checked else None,
                len(below),
                figures.checked,
                len(releases),
                len(before),
                len(set(settings.transient)),
                views,
            )
            detail |= {
                "figure": result.value,
                "threshold": threshold,
                "below": result.below,
                "people": result.people,
                "releases": result.releases,
            }
            refused = bool(len(below)) and settings.mode == "refuse"
            if refused:  # which releases combine, read before the rebuilt summaries are dropped
                named = remedies.name_releases(remedies.releases_holding(con, series, sid, below))
                con.execute("ROLLBACK")
            else:
                _keep(con, sid, settings, new_next_set, actor, series, detail)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        if refused:
            message = (
                f"series change refused: {model} would be {result.value}, required {threshold}: "
                f"{len(below)} {result.who} of series '{series}' fall below it when its releases are combined "
                f"under the spec's [series] settings; they are in releases {named}; nothing was changed; "
                + remedies.change_remedies(model)
            )
            refusal = {**detail, "error": "PrivacyRefused", "message": message}
            Store.log_in(con, actor, "series-change", series, "refused", None, refusal)
            raise PrivacyRefused(message)
    return result


def _stored_head(con: duckdb.DuckDBPyConnection, series: str, actor: str) -> tuple[int, list[Any], int]:
    """The series' summaries (sid), the transient values they were built under and the next
    set id; refused (and logged) when the series has none."""
    head = (
        con.execute("SELECT sid, transient, next_set FROM compose_head WHERE series = ?", [series]).fetchone()
        if has_table(con, "compose_head")
        else None
    )
    if head is None:
        message = (
            f"series '{series}' has no stored composition summaries (no release yet, or only releases "
            'published before privpub kept them or with person_id = "@row"): nothing to change; its next '
            "release starts them under the spec's [series] settings"
        )
        Store.log_in(con, actor, "series-change", series, "refused", None, {"error": "StateError", "message": message})
        raise StateError(message)
    return int(head[0]), json.loads(head[1]), int(head[2])


def _refuse_broken(
    con: duckdb.DuckDBPyConnection,
    sid: int,
    transient_vkeys: np.ndarray,
    series: str,
    actor: str,
    detail: dict[str, Any],
) -> None:
    """Refuse (and log) a change under which a stored value change is no longer transient."""
    broken = _broken_by(con, sid, transient_vkeys)
    if broken:
        changes = sum(n for _, n in broken)
        message = (
            f"series change refused: under the spec's [series] transient, a person's value changes "
            f"between releases of series '{series}' although it is not transient ({changes} times, in "
            f"releases {', '.join(f'#{r}' for r, _ in broken[: remedies.LISTED])}); name every value "
            "that changes in [series] transient; nothing was changed"
        )
        refused = {**detail, "error": "SpecError", "message": message}
        Store.log_in(con, actor, "series-change", series, "refused", None, refused)
        raise SpecError(message)


def _keep(
    con: duckdb.DuckDBPyConnection,
    sid: int,
    settings: SeriesSettings,
    new_next_set: int,
    actor: str,
    series: str,
    detail: dict[str, Any],
) -> None:
    """Keep the rebuilt summaries: the head names the new transient values; logged, committed."""
    con.execute(
        "UPDATE compose_head SET transient = ?, next_set = ? WHERE sid = ?",
        [json.dumps(sorted(settings.transient)), new_next_set, sid],
    )
    Store.log_in(con, actor, "series-change", series, "changed", None, detail)
    failpoint("series-change")
    con.execute("COMMIT")


def _broken_by(con: duckdb.DuckDBPyConnection, sid: int, transient_vkeys: np.ndarray) -> list[tuple[int, int]]:
    """(release, people) where a person's value differs from its value in its previous release
    and the two are not both transient (publish's `broken_rows`, over the whole series); under
    rows_per_person = "many", where a person's permanent values differ as sets (`_broken_sets`)."""
    t = {"sid": sid, "t": [int(v) for v in transient_vkeys]}
    several = one_row(  # a person stored once per value of theirs in some release
        con,
        "SELECT EXISTS (SELECT 1 FROM compose_membership WHERE sid = $sid GROUP BY release, pkey HAVING count(*) > 1)",
        {"sid": sid},
    )[0]
    if several:
        return _broken_sets(con, t)
    result: list[tuple[int, int]] = con.execute(
        "SELECT release, count(*) FROM (SELECT release, vkey, lag(vkey) OVER (PARTITION BY pkey ORDER BY release) "
        "AS before FROM compose_membership WHERE sid = $sid) WHERE before <> vkey AND NOT "
        "(list_contains($t, vkey) AND list_contains($t, before)) GROUP BY release ORDER BY release",
        t,
    ).fetchall()
    return result


def _broken_sets(con: duckdb.DuckDBPyConnection, t: dict[str, Any]) -> list[tuple[int, int]]:
    """(release, people) where a person's permanent values (the values of theirs not transient, as
    a set) differ from those of their previous release (`SeriesCheck._refuse_changed_sets`, over
    the whole series); for one value per person this is the rule of `_broken_by`."""
    result: list[tuple[int, int]] = con.execute(
        "SELECT release, count(*) FROM (SELECT release, kept, lag(kept) OVER (PARTITION BY pkey ORDER BY release) "
        "AS before FROM (SELECT pkey, release, coalesce(list_sort(list(vkey) FILTER (WHERE NOT list_contains($t, vkey))), "
        "[]::INTEGER[]) AS kept FROM compose_membership WHERE sid = $sid GROUP BY pkey, release)) "
        "WHERE before IS NOT NULL AND before <> kept GROUP BY release ORDER BY release",
        t,
    ).fetchall()
    return result


def _rewrite(
    con: duckdb.DuckDBPyConnection,
    sid: int,
    stored: tuple[int, int, list[int]],
    transient: np.ndarray,
    settings: SeriesSettings,
    threshold: int,
    next_set: int,
    figures: _Figures,
    batch_people: int,
) -> int:
    """Replace the series' summaries by those rebuilt under the new model, batch by batch of
    people, inside the caller's transaction; fold the figures into `figures`. Returns the
    series' next set id. New set ids start after every old one, so a release computed from the
    old summaries cannot take the new ones for its own (its commit is refused instead)."""
    lo, hi, releases = stored
    first = releases[0]
    for table in ("compose_sets", "compose_set_info"):
        con.execute(f"DELETE FROM {table} WHERE sid = ?", [sid])
    updated = 0
    with counted_groups(con, sid, releases):
        for people in person_batches(lo, hi, batch_people):
            sets, set_of, latest = replay_people(con, sid, people, releases, transient)
            if settings.l:  # stored as a publish under an l check stores them (check.summarise)
                sets.minc[:] = 0
            stored_people = np.flatnonzero(latest >= 0)
            sets, set_id = _kept(sets, set_of[stored_people])
            per_set = sets.candidates() if settings.l else sets.identity()
            # a person in the series' first release only was checked by its technique alone
            figures.add(per_set[set_id], latest[stored_people] > first, stored_people + people[0], threshold)
            _write_batch(con, sid, sets, next_set, set_id, stored_people + people[0])
            updated += len(stored_people)
            next_set += sets.size
    total = one_row(con, "SELECT count(*) FROM compose_people WHERE sid = ?", [sid])[0]
    if updated != total:  # every stored person is in some release's groups
        raise StateError(f"the stored summaries of series key {sid} do not match its stored groups")
    return int(next_set)


def _kept(sets: Sets, set_of: np.ndarray) -> tuple[Sets, np.ndarray]:
    """Only the sets somebody points at (the replay keeps every set it made), equal ones shared
    as a publish shares them; and each person's set among them."""
    used, index = np.unique(set_of, return_inverse=True)
    _, pos = expand(sets.ptr[used], sets.ptr[used + 1])
    lens = np.diff(sets.ptr)[used]
    kept = Sets(
        np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        sets.value[pos],
        sets.minc[pos],
        sets.min_t[used],
        sets.min_tc[used],
        None if sets.max_e is None else sets.max_e[used],
    )
    kept, renumber = shared(kept)
    return kept, renumber[index]


def _write_batch(
    con: duckdb.DuckDBPyConnection, sid: int, sets: Sets, base: int, set_id: np.ndarray, pkey: np.ndarray
) -> None:
    """A batch's sets added (numbered from `base`) and its people pointed at them."""
    set_id = set_id + base
    tables = {
        NEW_SETS: set_table(sets, sets.value, base),
        NEW_INFO: pa.table(
            {
                "set_id": np.arange(sets.size, dtype=np.int64) + base,
                "min_t": sets.min_t.astype(np.int32),
                "min_tc": sets.min_tc.astype(np.int32),
            }
        ),
        NEW_PEOPLE: pa.table({"pkey": pkey, "set_id": set_id}),
    }
    for name, table in tables.items():
        con.register(name, table)
    try:
        con.execute(f"INSERT INTO compose_sets SELECT $sid, set_id, vkey, minc FROM {NEW_SETS}", {"sid": sid})
        con.execute(f"INSERT INTO compose_set_info SELECT $sid, set_id, min_t, min_tc FROM {NEW_INFO}", {"sid": sid})
        con.execute(
            f"UPDATE compose_people SET set_id = n.set_id FROM {NEW_PEOPLE} n "
            "WHERE compose_people.sid = $sid AND compose_people.pkey = n.pkey",
            {"sid": sid},
        )
    finally:
        for name in tables:
            con.unregister(name)

"""The series composition check: the verifier also plays the adversary who holds every committed
release of the series (tasks/compose/algebra.py says what that adversary learns).

`SeriesCheck` is used by the publish flow for every technique:
  prepare(store, data)   reads the summaries of this input's people (before any work) and refuses
                         an input that breaks the model (a value changed but is not transient);
                         for rows kept in parts (PartedSeriesCheck, tasks/compose/parted.py)
                         the people are read batch by batch at the check
  keep_groups(data, part) the safe option: returning people stay in their earlier groups
  check_release(data, part) the figures of the people of the new release -> [PrivacyResult]
  commit_hook()          the new summaries, written inside the release's commit
Settings come from `[series]`: composition = "refuse" (default) | "warn", transient = [values],
l (default: the technique's l), keep_groups = false.

Several rows per person (`[dataset] rows_per_person = "many"`, docs/series.md): a person's rows
are in one group, so the check composes each PERSON once per release, as its (person, value)
pairs (`units`: one per distinct value of the person's rows, each pointing at a row); records
per (group, value) are then people holding the value, and the figures below, people and
returning count people.

`person_id = "@row"` numbers rows, not people: such a release is linked to no other, so the check
does not apply to it (no figure, no summaries stored) and `not_applied` says why; a later release
with a person id starts the check (flows/pipeline.py refuses an "@row" release after a first one).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.spec import ROW_ID, ReleaseSpec
from privpub.state.store import Store
from privpub.tasks.compose import remedies, summaries
from privpub.tasks.compose.algebra import GroupCounts, Sets, compose, shared
from privpub.tasks.compose.keep_groups import kept_partition
from privpub.tasks.compose.rebuild import one_row
from privpub.tasks.core.microdata import Microdata, person_text
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.threads import done, worth_threads
from privpub.tasks.core.types import Partition, PrivacyResult
from privpub.tasks.partition.parted import PartedRows

if TYPE_CHECKING:  # parted.py imports this module
    from privpub.tasks.compose.parted import Staged

# why the check does not apply to a release whose person id is the row number
ROW_WORDS = (
    f'person_id = "{ROW_ID}" numbers rows, not people: row i of two releases is not one person, so no '
    "release of this table can be linked to another person by person (publish it once)"
)


@dataclass(frozen=True)
class SeriesSettings:
    mode: str
    transient: tuple[str, ...]
    l: int | None  # the fewest candidate values allowed (None: check k instead)
    k: int | None  # the fewest records that can be a person's, when there is no l
    keep_groups: bool


def series_settings(spec: ReleaseSpec, technique: Technique) -> SeriesSettings:
    """[series] read strictly (unknown keys were refused by the spec check)."""
    sec = spec.series  # schemas/spec.py SeriesSpec: the keys' own domains
    keep = sec.keep_groups
    if keep and not technique.capabilities.accepts_kept_groups:
        raise SpecError(
            f"[series] keep_groups: technique '{technique.name}' builds groups it cannot "
            "hand over; keep_groups works with generalization"
        )
    k, own_l = technique.params.k_and_l()
    l = sec.l if sec.l is not None else own_l
    if l is None and k is None:
        l = 2  # a technique with neither l nor k: nobody's value may be pinned
    return SeriesSettings(sec.composition, sec.transient, l, k if l is None else None, keep)


class SeriesCheck:
    _persons: pa.Array | Future[pa.Array]  # set by prepare (see `persons`)

    def __init__(self, spec: ReleaseSpec, technique: Technique):
        self.spec, self.technique = spec, technique
        self.settings = series_settings(spec, technique)
        self.prior: summaries.Prior | None = None
        self._composed: tuple[np.ndarray, Sets, np.ndarray] | None = None
        self.cohort: np.ndarray | None = None  # per row, set by keep_groups
        self._staged: Staged | None = None  # staged summaries of rows kept in parts (tasks/compose/parted.py)
        self.store: Store | None = None
        # the stored keys of the returning people below the threshold, and how many newcomers are
        # (the refusal names the earlier releases they were in: breach_note)
        self.below_pkeys: list[np.ndarray] = []
        self.below_newcomers = 0
        self.below_people = 0
        # False: the release is never committed (privpub explore), so its summaries need not be
        # built when there is nothing to combine them with
        self.commits = True
        # the adversaries the check plays (Technique.composition_views): each person is composed
        # once per view, view v's rows after view v-1's, under an id tagged with the view
        self.views = technique.composition_views()
        # rows_per_person = "many": one unit per (person, value) of the input, each the first row
        # holding it, and its person's number (None: a row is a person)
        self.unit_rows: np.ndarray | None = None
        self.unit_person: np.ndarray | None = None
        self.row_ids = spec.dataset.person_id == ROW_ID  # nothing to link: the check does not apply
        self.unlinked_before = 0  # earlier releases of the series that took "@row" (set by prepare)

    @property
    def persons(self) -> pa.Array:
        """Per row (per unit, per view), the person's text, then after `prepare` their pseudonym;
        hashed on a thread of its own when nothing stored is read before the release's work
        (issue 43: 1M ids take about 0.45 s), and waited for here, when first read."""
        if isinstance(self._persons, Future):
            self._persons = self._persons.result()
        return self._persons

    @persons.setter
    def persons(self, value: pa.Array) -> None:
        self._persons = value

    def hashing(self) -> Future[pa.Array] | None:
        """The ids being hashed on their thread, if they still are (None: done, or never)."""
        return self._persons if isinstance(getattr(self, "_persons", None), Future) else None

    @property
    def model(self) -> str:
        return "series-composition-l" if self.settings.l else "series-composition-k"

    @property
    def threshold(self) -> int:
        threshold = self.settings.l or self.settings.k
        assert threshold is not None  # series_settings sets k when there is no l
        return threshold

    # --- before any work ------------------------------------------------------------------
    def prepare(self, store: Store, data: Microdata | PartedRows) -> None:
        """data: Microdata here; PartedSeriesCheck takes rows kept in parts."""
        assert isinstance(data, Microdata)  # the flow checks rows in parts with PartedSeriesCheck
        ds = self.spec.dataset
        person = getattr(data, "person", None)
        if person is not None:  # rows_per_person = "many": composed per (person, value)
            assert len(self.views) == 1, "a technique with several views does not take several rows per person"
            width = len(data.sensitive_values)
            _, self.unit_rows = np.unique(person * width + data.sensitive_codes, return_index=True)
            self.unit_person = person[self.unit_rows]
            self.people = int(person.max()) + 1 if len(person) else 0
        ids = data.frame[ds.person_id]
        self.persons = person_text(ids if self.unit_rows is None else ids.iloc[self.unit_rows])
        self.values = np.asarray(data.sensitive_values).astype(str).astype(object)
        self.codes = data.sensitive_codes if self.unit_rows is None else data.sensitive_codes[self.unit_rows]
        self.transient = np.isin(self.values, list(self.settings.transient))
        if self.technique.capabilities.guards_series or self.row_ids:  # its own verifier is the series check; no people
            return
        self.store = store
        self.unlinked_before = row_numbered_releases(store, ds.name)
        if len(self.views) > 1:
            self.persons = per_view(self.persons, len(self.views))
            self.codes = np.tile(self.codes, len(self.views))
        # the state keeps pseudonyms, never the ids (state/pseudonyms.py): the ids are compared
        # with the stored ones, and stored, as their pseudonyms
        keyed = store.pseudonyms(create=self.commits)
        pending = keyed.of_beside(self.persons) if worth_threads(len(self.persons)) else done(keyed.of, self.persons)
        if not summaries.started(store, ds.name):  # nothing to read: hashed beside the partition step
            self._persons = pending
            return
        self.persons = pending.result()
        self.prior = summaries.load(store, ds.name, self.persons, self.values)
        if self.prior is None:
            return
        same_transient(self.prior, self.settings, ds.name)
        if self.unit_rows is not None:
            self._refuse_changed_sets(store)
            return
        broken = self.by_person(broken_rows(self.prior, self.codes, self.transient))
        if broken.any():
            rows = np.flatnonzero(broken)
            raise InputError(
                f"row {rows[0] + 1}, column '{ds.sensitive}': the value differs from this "
                f"person's value in an earlier release of the series ({len(rows)} rows); " + remedies.VALUE_CHANGES
            )

    def _refuse_changed_sets(self, store: Store) -> None:
        """rows_per_person = "many": a returning person whose permanent values (the set of their
        rows' values not named transient) differ from those of their latest earlier release is
        refused, as a changed value is under one row per person (`broken_rows`)."""
        prior = self.prior
        assert prior is not None and self.unit_person is not None and self.unit_rows is not None
        back = prior.pkey >= 0
        first_unit = np.unique(self.unit_person[back], return_index=True)[1]
        person, vkey = summaries.latest_values(store, prior.sid, prior.pkey[back][first_unit])
        person = self.unit_person[back][first_unit][person]  # positions -> person numbers
        stored = ~prior.vkey_transient[vkey]
        now = back & ~self.transient[self.codes]
        # a value new to the series has no stored key: a key of its own, below every stored one
        now_key = np.where(prior.code_to_vkey[self.codes] >= 0, prior.code_to_vkey[self.codes], -1 - self.codes)
        width = len(prior.vkey_transient) + len(self.values) + 1
        offset = len(self.values) + 1
        pairs = np.concatenate(
            [self.unit_person[now] * width + now_key[now] + offset, person[stored] * width + vkey[stored] + offset]
        )
        key, times = np.unique(pairs, return_counts=True)  # a pair held on one side only: a change
        changed = np.unique(key[times == 1] // width)
        if len(changed):
            ds = self.spec.dataset
            row = int(self.unit_rows[np.isin(self.unit_person, changed)].min())
            raise InputError(
                f"row {row + 1}, column '{ds.sensitive}': this person's values differ from their values in "
                f"their latest earlier release of the series ({len(changed)} {'person' if len(changed) == 1 else 'people'}); "
                + remedies.VALUE_CHANGES
            )

    def by_person(self, per_row: np.ndarray) -> np.ndarray:
        """A per-row flag over every view -> per input row: set in any view. Under rows_per_person
        = "many", a per-unit flag -> per person: set for one of their values."""
        if self.unit_person is not None:
            out = np.zeros(self.people, bool)
            out[self.unit_person[per_row]] = True
            return out
        return np.asarray(per_row.reshape(len(self.views), -1).any(axis=0))

    @property
    def grouped(self) -> bool:
        """Whether the check's arrays hold several entries per person (views, or units)."""
        return len(self.views) > 1 or self.unit_person is not None

    def units(self, group: np.ndarray) -> np.ndarray:
        """A per-row array (the groups) as the check's arrays hold it: per unit under "many"."""
        return group if self.unit_rows is None else group[self.unit_rows]

    def per_row(self, per_unit: np.ndarray, person: np.ndarray) -> np.ndarray:
        """A per-unit array whose units of one person agree -> per input row (person: each row's
        person number); unchanged when a row is a person."""
        if self.unit_person is None:
            return per_unit
        out = np.empty(self.people, per_unit.dtype)
        out[self.unit_person] = per_unit
        result: np.ndarray = out[person]
        return result

    def share_prepared(self, other: SeriesCheck) -> bool:
        """Take what `other.prepare` read from the same input and store (privpub explore's
        settings share one input; the summaries are only read). False, nothing taken, when
        the two would read differently (another transient list, a technique guarding its series)."""
        if (
            other.technique.capabilities.guards_series != self.technique.capabilities.guards_series
            or other.settings.transient != self.settings.transient
            or other.views != self.views
            or not hasattr(other, "persons")
        ):
            return False
        self.persons, self.values, self.codes = other.persons, other.values, other.codes
        self.unit_rows, self.unit_person = other.unit_rows, other.unit_person
        if other.unit_person is not None:
            self.people = other.people
        self.transient, self.prior, self.store = other.transient, other.prior, other.store
        self.unlinked_before = other.unlinked_before
        return True

    def discard(self) -> None:
        """Delete a cluster release's staged summaries (person ids): after its commit, or when the
        release is refused."""
        if self._staged is not None:
            self._staged.draft.discard()

    # --- the safe option ----------------------------------------------------------------------
    def keep_groups(self, data: Microdata, part: Partition) -> Partition:
        return kept_partition(self, data, part)

    # --- the check ------------------------------------------------------------------------------
    def compose(self, data: Microdata, group: np.ndarray, n_groups: int) -> tuple[GroupCounts, Sets, np.ndarray]:
        if self.unit_rows is not None:
            return compose_rows(self.prior, self.units(group), self.codes, n_groups, self.transient, self.unit_person)
        return compose_rows(self.prior, group, data.sensitive_codes, n_groups, self.transient)

    def figures(self, sets: Sets, row_set: np.ndarray) -> np.ndarray:
        """Per row: fewest candidate values (or records, for k); a large number when unpublished."""
        per_set = sets.candidates() if self.settings.l else sets.identity()
        out = np.full(len(row_set), np.iinfo(np.int64).max, dtype=np.int64)
        kept = row_set >= 0  # none when the release publishes no row (per_set is then empty)
        out[kept] = per_set[row_set[kept]]
        return out

    def check_release(self, data: Microdata, part: Partition) -> list[PrivacyResult]:
        """The figures of a release (rows kept in parts: tasks/compose/parted.PartedSeriesCheck)."""
        if self.technique.capabilities.guards_series or self.row_ids:
            return []
        return self.check(data, *self.technique.composition_groups(data, part))

    def history_missing(self, based_on: int) -> bool:
        """Earlier releases exist but left no stored groups (published before privpub kept them,
        or with "@row")."""
        return (
            bool(based_on) and self.prior is None and not self.technique.capabilities.guards_series and not self.row_ids
        )

    def not_applied(self, based_on: int) -> str | None:
        """Why this release has no composition figure (after `prepare`; based_on: the releases of
        the series before it), None when it has one."""
        series = self.spec.dataset.name
        if self.technique.capabilities.guards_series:
            return f"technique '{self.technique.name}' checks its series itself (its own privacy figures)"
        if self.row_ids:
            return ROW_WORDS
        if self.prior is not None:
            return None
        if not based_on:
            return f"no earlier release of series '{series}' to combine with"
        why = "published before privpub kept them"
        if self.unlinked_before:  # an "@row" release stores no groups: its rows are nobody's
            why = f'{self.unlinked_before} took person_id = "{ROW_ID}": their rows cannot be linked to people'
            why += "" if self.unlinked_before == based_on else "; the others were published before privpub kept them"
        return (
            f"the {based_on} earlier releases of series '{series}' have no stored groups ({why}); "
            "the check starts with this release"
        )

    def check(self, data: Microdata, group: np.ndarray, n_groups: int) -> list[PrivacyResult]:
        if self.technique.capabilities.guards_series or self.row_ids or (self.prior is None and not self.commits):
            return []
        codes = self.codes if self.grouped else data.sensitive_codes
        person = getattr(data, "person", None)
        if (
            self.unit_rows is not None
            and person is not None
            and (self.per_row(self.units(group), person) != group).any()
        ):
            # the model (docs/series.md) needs each person in one group of a release
            raise ValueError(f"technique {self.technique.name} put a person's rows in several groups")
        group = self.units(group)
        sets, row_set = summarise(
            self.prior, group, codes, n_groups, self.transient, bool(self.settings.l), self.unit_person
        )
        self._composed = (group, sets, row_set)
        if self.prior is None:  # the first release with summaries: nothing to combine yet
            return []
        fig = self.figures(sets, row_set)
        published = row_set >= 0
        below = published & (fig < self.threshold)
        worst = int(np.argmin(fig))
        n = len(fig) // len(self.views)
        self.note_below(self.prior.pkey[below], self.by_person(below) if self.grouped else None)
        what = (
            "candidate values"
            if self.settings.l
            else "people who can be the person"
            if self.unit_person is not None
            else "records that can be the person's"
        )
        views = {"view": self.views[worst // n], "views": self.views} if len(self.views) > 1 else {}
        return [
            PrivacyResult(
                self.model,
                int(fig[worst]),
                self.threshold,
                not below.any(),
                {
                    "row": (worst % n if self.unit_rows is None else int(self.unit_rows[worst])) + 1,
                    "below": int(self.by_person(below).sum()),
                    "people": int(self.by_person(published).sum()),
                    "returning": int(self.by_person(published & (self.prior.set_of_row >= 0)).sum()),
                    "releases": self.prior.release + 1,
                    "measures": what,
                    "mode": self.settings.mode,
                    "adversary": "holds every release of the series",
                    **views,
                },
            )
        ]

    def note_below(self, pkey: np.ndarray, below: np.ndarray | None = None) -> None:
        """Keep the stored keys of people below the threshold (-1: a newcomer) for breach_note.
        below: per input row, whether the person is below in some view (several views: a person
        has a key per view and is a newcomer when it has none)."""
        self.below_pkeys.append(np.unique(pkey[pkey >= 0]) if self.unit_person is not None else pkey[pkey >= 0])
        if below is None:
            self.below_people += len(pkey)
            self.below_newcomers += int((pkey < 0).sum())
            return
        assert self.prior is not None  # several views are composed only against stored summaries
        self.below_people += int(below.sum())
        self.below_newcomers += int((below & ~self.by_person(self.prior.pkey >= 0)).sum())

    def breach_note(self) -> str:
        """Which earlier releases the people below the threshold were in, and the remedies: what
        the publish refusal adds to the figure. Never fails the refusal it explains."""
        pkeys = np.concatenate(self.below_pkeys) if self.below_pkeys else np.zeros(0, np.int64)
        below = self.below_people
        releases: list[Any] = []
        sid = self.prior.sid if self.prior is not None else self._staged.sid if self._staged is not None else None
        if self.store is not None and sid is not None and len(pkeys):
            try:
                releases = self.store.query(
                    lambda con: remedies.releases_holding(con, self.spec.dataset.name, sid, pkeys)
                )
            except Exception:  # the refusal stands without the list
                releases = []
        return remedies.breach_note(releases, below, self.threshold, self.below_newcomers, self.model)

    def tolerated(self, result: PrivacyResult) -> bool:
        """A failed composition figure under composition = "warn": published and recorded."""
        return result.model == self.model and self.settings.mode == "warn"

    # --- the commit ------------------------------------------------------------------------------
    def commit_hook(self) -> Callable[[duckdb.DuckDBPyConnection, str, int], None] | None:
        if self._staged is not None:  # a release made on a cluster: its batches were staged
            staged = self._staged
            tables = {**staged.files, "_compose_values": staged.values}
            write = summaries.table_writer(
                self.spec.dataset.name,
                staged.sid,
                tables,
                staged.next_ids,
                list(self.settings.transient),
                staged.read_next_set,
            )

            return write
        if self._composed is None:  # nothing composed (a technique that guards its own series)
            return None
        group, sets, row_set = self._composed
        cohort = self.cohort
        prior = self.prior
        rows = np.flatnonzero(row_set >= 0)
        pkey = prior.pkey[rows].copy() if prior else np.full(len(rows), -1, np.int64)
        fresh = pkey < 0
        next_pkey = prior.next_pkey if prior else 0
        if self.unit_person is None:
            new_keys = int(fresh.sum())
            pkey[fresh] = next_pkey + np.arange(new_keys)
        else:  # a key per new person, whatever their number of values
            newcomers, which = np.unique(self.unit_person[rows][fresh], return_inverse=True)
            new_keys = len(newcomers)
            pkey[fresh] = next_pkey + which
        set_base = prior.next_set if prior else 0
        next_cohort = prior.next_cohort if prior else 0
        if cohort is None:  # without keep_groups every release starts new cohorts
            cohort = next_cohort + group
        elif self.unit_rows is not None:  # kept cohorts are per input row
            cohort = cohort[self.unit_rows]
        kept = cohort[rows]
        next_ids = (
            next_pkey + new_keys,
            set_base + sets.size,
            max(next_cohort, int(kept.max()) + 1 if len(kept) else 0),
        )
        return summaries.summaries_writer(
            self.spec.dataset.name,
            prior,
            persons=self.persons.take(rows),
            pkey=pkey,
            set_id=row_set[rows] + set_base,
            code=self.codes[rows],
            cohort=kept,
            gid=group[rows],
            sets=sets,
            set_base=set_base,
            values=self.values,
            next_ids=next_ids,
            transient=list(self.settings.transient),
            several_rows=self.unit_person is not None,
        )


def row_numbered_releases(store: Store, series: str) -> int:
    """Releases of the series whose person id was the row number ("@row", in their stored spec)."""
    if not store.last_sequence(series):
        return 0
    return int(
        store.query(
            lambda con: one_row(
                con,
                "SELECT count(*) FROM release_rows WHERE series = ? "
                "AND json_extract_string(spec, '$.dataset.person_id') = ?",
                [series, ROW_ID],
            )[0]
        )
    )


def per_view(persons: pa.Array, views: int) -> pa.Array:
    """The person ids once per view: view 0 as they are (a technique with one view stores them
    so), view v tagged "<id>\\x1fview<v>", so the state keeps one summary per person and view."""
    tagged = [pc.binary_join_element_wise(persons, f"view{v}", "\x1f") for v in range(1, views)]
    return pa.concat_arrays([persons, *tagged])


def broken_rows(prior: summaries.Prior, codes: np.ndarray, transient: np.ndarray) -> np.ndarray:
    """Per row: a returning person whose value differs from its latest stored one, where the two
    are not both transient (the model says a permanent value never changes)."""
    back = prior.stored_vkey >= 0
    changed = back & (prior.stored_vkey != prior.code_to_vkey[codes])
    was_transient = (
        prior.vkey_transient[np.clip(prior.stored_vkey, 0, None)]
        if len(prior.vkey_transient)
        else np.zeros(len(back), bool)
    )
    result: np.ndarray = changed & ~(transient[codes] & was_transient)
    return result


def same_transient(prior: summaries.Prior, settings: SeriesSettings, series: str) -> None:
    if sorted(prior.transient) != sorted(settings.transient):
        raise SpecError(
            f"[series] transient differs from the list release #{prior.release} of "
            f"series '{series}' was checked with; a series keeps one list: {remedies.CHANGE} rebuilds "
            "its summaries under the spec's list and re-checks the whole series (or keep the stored list)"
        )


def compose_rows(
    prior: summaries.Prior | None,
    group: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    transient: np.ndarray,
    person: np.ndarray | None = None,
) -> tuple[GroupCounts, Sets, np.ndarray]:
    """One release's records per (group, value), its people's new summaries and each row's set.
    person: each entry's person, when the entries are (person, value) pairs (rows_per_person =
    "many"): the counts are then people holding each value (GroupCounts.of)."""
    counts = GroupCounts.of(group, codes, n_groups, transient, person)
    sets, row_set = compose(
        prior.sets if prior else Sets.empty(),
        prior.set_of_row if prior else np.full(len(group), -1, np.int64),
        group,
        counts,
        ~transient,
    )
    return counts, sets, row_set


def summarise(
    prior: summaries.Prior | None,
    group: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    transient: np.ndarray,
    by_values: bool,
    person: np.ndarray | None = None,
) -> tuple[Sets, np.ndarray]:
    """The new summaries as they are stored (equal ones shared) and each row's set (-1: not
    published). by_values: an l check, whose summaries need no record counts. person: see
    compose_rows."""
    _, sets, row_set = compose_rows(prior, group, codes, n_groups, transient, person)
    if by_values:  # the record counts serve only the k figure: without them most people
        sets.minc[:] = 0  # share a handful of summaries (a later k check would read 0: refuse)
    sets, index = shared(sets)
    out = np.full(len(row_set), -1, dtype=index.dtype)
    kept = row_set >= 0  # a release may publish no row at all (every row suppressed): index is then empty
    out[kept] = index[row_set[kept]]
    return sets, out

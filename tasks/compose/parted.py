"""The series composition check of a release made on a Dask cluster: the algebra of
tasks/compose/algebra.py, run in the flow one batch of people at a time.

Who is in which group stays on the workers: each node finished on a worker keeps its `members`
(person id, group, value, file and row; tasks/partition/parted.py). A batch is a run of
consecutive nodes holding at most BATCH_PEOPLE people (at least one node). Nodes hold whole
groups, so a batch's members are all the records of its groups: the flow gathers them, counts
records per (group, value) of those groups, reads the batch's summaries from the state database
(`summaries.load`, the in-memory check's reader), composes, keeps the figures, and writes the new
summaries as Parquet files into a private staging folder (`state.store.open_staging`:
owner-only, deleted if the process dies) that the commit hook reads (`summaries.table_writer`). The
flow holds one batch at a time.

The figures are the in-memory check's, person by person: a person's summary depends only on its
own groups. Sets are shared within a batch only, which changes their numbering, not their
contents.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.spec import ReleaseSpec
from privpub.state.store import Store, open_staging
from privpub.tasks.compose import remedies, summaries
from privpub.tasks.compose.check import SeriesCheck, broken_rows, same_transient, summarise
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.parted_table import StagingFolder
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import Partition, PrivacyResult
from privpub.tasks.partition.parted import ClusterPartition, PartedRows

BATCH_PEOPLE = 1_000_000


class PartedPeople(PartedRows, Protocol):
    """The input kept in parts (tasks/validate/parted.PartedData), with its files' paths."""

    files: list[str]


TABLES = ("_compose_people", "_compose_sets", "_compose_info")


def batches(sizes: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Runs [a, b) of consecutive nodes of at most `limit` rows in all (a larger node alone)."""
    out, start, rows = [], 0, 0
    for i, size in enumerate(sizes):
        if i > start and rows + size > limit:
            out.append((start, i))
            start, rows = i, 0
        rows += int(size)
    if len(sizes):
        out.append((start, len(sizes)))
    return out


@dataclass
class WorstOverBatches:
    """The figures over all batches: the fewest, where, and how many fall below."""

    figure: int = np.iinfo(np.int64).max
    file: int = -1
    row: int = -1
    below: int = 0
    people: int = 0
    returning: int = 0

    def add(self, fig: np.ndarray, file: np.ndarray, row: np.ndarray, threshold: int, returning: int) -> None:
        if len(fig):
            i = int(np.argmin(fig))
            if fig[i] < self.figure:
                self.figure, self.file, self.row = int(fig[i]), int(file[i]), int(row[i])
        self.below += int((fig < threshold).sum())
        self.people += len(fig)
        self.returning += returning


@dataclass
class Staged:
    """What the commit hook writes: the staged Parquet files and the series' next keys."""

    draft: StagingFolder
    files: dict[str, Any] = field(default_factory=lambda: {name: [] for name in TABLES})
    sid: int | None = None
    release: int = -1
    values: pa.Table | None = None
    next_ids: tuple[int, int, int] = (0, 0, 0)
    read_next_set: int | None = None  # the series' next set id as read (summaries.table_writer)


class PartedSeriesCheck(SeriesCheck):
    """The series check of a release whose rows stay in parts where the run works: the people
    are read batch by batch at the check, never all in the flow."""

    def __init__(self, spec: ReleaseSpec, technique: Technique) -> None:
        super().__init__(spec, technique)
        if self.settings.keep_groups and not technique.capabilities.guards_series:  # before any work
            # keep_groups would need the earlier cohorts next to the parts
            raise SpecError("[series] keep_groups does not run on a Dask cluster yet; publish in memory")

    def prepare(self, store: Store, data: Microdata | PartedRows) -> None:
        self.store = store
        self.values = np.asarray(data.sensitive_values).astype(str).astype(object)
        self.transient = np.isin(self.values, list(self.settings.transient))
        if not self.technique.capabilities.guards_series:  # the people are stored as pseudonyms, batch by batch
            self.pseudonyms = store.pseudonyms(create=self.commits)

    def check_release(self, data: Microdata, part: Partition) -> list[PrivacyResult]:
        # by the contract's names; here rows kept in parts and the top of their split tree
        if self.technique.capabilities.guards_series:
            return []
        assert self.store is not None  # set by prepare
        results, self._staged = compose_on_cluster(
            self, self.store, cast(PartedPeople, data), cast(ClusterPartition, part)
        )
        result: list[PrivacyResult] = results
        return result

    def history_missing(self, based_on: int) -> bool:
        return False  # the stored groups are read at the check


def compose_on_cluster(
    check: PartedSeriesCheck, store: Store, data: PartedPeople, cpart: ClusterPartition
) -> tuple[list[PrivacyResult], Staged]:
    """The composition figures of a release made on the cluster (check: the SeriesCheck), and what
    its commit writes (`Staged`). Refuses, naming file and row, a returning person whose
    permanent value changed."""
    staged = Staged(open_staging(check.spec.output_dir))
    weakref.finalize(staged, staged.draft.discard)
    try:
        return _compose_batches(check, store, data, cpart, staged)
    except BaseException:
        staged.draft.discard()
        raise


def _compose_batches(
    check: PartedSeriesCheck, store: Store, data: PartedPeople, cpart: ClusterPartition, staged: Staged
) -> tuple[list[PrivacyResult], Staged]:
    ex, spec, settings = data.executor, check.spec, check.settings
    assert cpart.group_offset is not None and cpart.n_groups is not None  # set by finish_on_cluster
    worst = WorstOverBatches()
    code_to_vkey = None
    next_cohort = 0
    pkey_base = set_base = 0
    prior_seen = False
    offset = cpart.group_offset
    for number, (a, b) in enumerate(batches(np.asarray(cpart.ready_sizes), BATCH_PEOPLE)):
        parts = ex.gather(cpart.members[a:b])
        cpart.members[a:b] = [None] * (b - a)  # each node's members are read once
        rows = pa.concat_tables(parts)
        del parts
        persons = check.pseudonyms.of(rows.column("person"))  # stored and compared as pseudonyms
        group = _batch_groups(rows, cpart, a, b)  # global group ids
        code = rows.column("s").to_numpy().astype(np.int64)
        file, row = rows.column("file").to_numpy(), rows.column("row").to_numpy()
        del rows
        prior = summaries.load(store, spec.dataset.name, persons, check.values)
        if code_to_vkey is None:  # the series' head is the same for every batch
            prior_seen = prior is not None
            if prior is not None:
                same_transient(prior, settings, spec.dataset.name)
                staged.sid, staged.release = prior.sid, prior.release
                pkey_base, set_base, next_cohort = prior.next_pkey, prior.next_set, prior.next_cohort
                staged.read_next_set = prior.next_set
            code_to_vkey, staged.values = summaries.value_keys(prior, check.values)
        if prior is not None:
            _refuse_changed_values(check, prior, code, file, row, data.files)
        first = int(offset[a])  # a batch holds whole groups: number them from its first
        sets, row_set = summarise(prior, group - first, code, int(offset[b]) - first, check.transient, bool(settings.l))
        if prior is not None:
            fig = check.figures(sets, row_set)
            worst.add(fig, file, row, check.threshold, int((prior.set_of_row >= 0).sum()))
            check.note_below(prior.pkey[(row_set >= 0) & (fig < check.threshold)])
        pkey = prior.pkey.copy() if prior else np.full(len(group), -1, np.int64)
        fresh = pkey < 0
        pkey[fresh] = pkey_base + np.arange(int(fresh.sum()))
        pkey_base += int(fresh.sum())
        tables = summaries.summary_tables(
            code_to_vkey,
            persons=persons,
            pkey=pkey,
            set_id=row_set + set_base,
            code=code,
            cohort=next_cohort + group,
            gid=group,
            sets=sets,
            set_base=set_base,
        )
        set_base += sets.size
        for name, table in zip(TABLES, tables):
            path = staged.draft.path / f"{name}-{number:05d}.parquet"
            pq.write_table(table, path)
            staged.files[name].append(str(path))
    staged.next_ids = (pkey_base, set_base, next_cohort + cpart.n_groups)
    results: list[PrivacyResult] = []
    if prior_seen:
        what = "candidate values" if settings.l else "records that can be the person's"
        results.append(_result(check, worst, staged.release + 1, what, data.files))
    return results, staged


def _batch_groups(rows: pa.Table, cpart: ClusterPartition, a: int, b: int) -> np.ndarray:
    """The global group of each member of nodes [a, b): its node's group number plus the node's
    first global group id (the members come node after node, ready_sizes rows each)."""
    sizes = np.asarray(cpart.ready_sizes[a:b], dtype=np.int64)
    assert cpart.group_offset is not None  # set by finish_on_cluster
    result: np.ndarray = rows.column("group").to_numpy() + np.repeat(cpart.group_offset[a:b], sizes)
    return result


def _result(check: SeriesCheck, worst: WorstOverBatches, releases: int, what: str, files: list[str]) -> PrivacyResult:
    return PrivacyResult(
        check.model,
        worst.figure,
        check.threshold,
        worst.below == 0,
        {
            "file": Path(files[worst.file]).name,
            "row": worst.row + 1,
            "below": worst.below,
            "people": worst.people,
            "returning": worst.returning,
            "releases": releases,
            "measures": what,
            "mode": check.settings.mode,
            "adversary": "holds every release of the series",
        },
    )


def _refuse_changed_values(
    check: SeriesCheck,
    prior: summaries.Prior,
    code: np.ndarray,
    file: np.ndarray,
    row: np.ndarray,
    files: list[str],
) -> None:
    """SeriesCheck.prepare's test of the model, on one batch (named by file and row)."""
    broken = np.flatnonzero(broken_rows(prior, code, check.transient))
    if len(broken):
        i = broken[np.lexsort((row[broken], file[broken]))[0]]
        raise InputError(
            f"{Path(files[file[i]]).name}: row {row[i] + 1}, column '{check.spec.dataset.sensitive}': "
            "the value differs from this person's value in an earlier release of the series "
            f"({len(broken)} rows in this batch); " + remedies.VALUE_CHANGES
        )

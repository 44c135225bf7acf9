"""The series composition check of a release made on a Dask cluster: the algebra of
tasks/compose/algebra.py, run in the flow one batch of people at a time.

Who is in which group stays on the workers (each finished node's `members`: person id, group,
value, file and row; tasks/partition/distributed.py). The flow first takes the records per
(group, value) of the whole release (one small table per node), then, batch after batch (people
by a hash of their id), that batch's members from every node: it reads their summaries from the
state database (`state.load`, the in-memory check's reader), composes, keeps the figures, and
stages the batch's new summaries as Parquet files in a private staging folder
(`state.store.open_staging`: owner-only, deleted if the process dies) that the commit hook reads
(`state.table_writer`). The flow holds one batch (about a million people) at a time.

The figures are the in-memory check's, person by person: a person's summary depends only on its
own groups. Sets are shared within a batch only, which changes their numbering, not their
contents.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from math import ceil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.input import InputError
from tasks.compose import state
from tasks.compose.algebra import GroupCounts, Sets, compose, shared

BATCH_PEOPLE = 1_000_000
TABLES = ("_compose_people", "_compose_sets", "_compose_info")


def node_counts(members: pa.Table, offset: int, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """On a worker: one node's records per (global group, value) key."""
    group = members.column("group").to_numpy() + offset
    return np.unique(group * n_values + members.column("s").to_numpy(), return_counts=True)


def batch_members(members: pa.Table, offset: int, n_batches: int, batch: int) -> pa.Table:
    """On a worker: the node's members of one batch, their groups made global."""
    keep = members.column("bucket").to_numpy() % n_batches == batch
    out = members.filter(pa.array(keep))
    return out.set_column(out.schema.get_field_index("group"), "group",
                          pa.array(out.column("group").to_numpy() + offset))


@dataclass
class Worst:
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

    draft: object
    files: dict = field(default_factory=lambda: {name: [] for name in TABLES})
    sid: int | None = None
    release: int = -1
    values: pa.Table | None = None
    next_ids: tuple[int, int, int] = (0, 0, 0)


def compose_on_cluster(check, store, data, cpart):
    """The composition figures of a release made on the cluster (check: the SeriesCheck), and what
    its commit writes (`Staged`). Refuses, naming file and row, a returning person whose
    permanent value changed."""
    from state.store import open_staging

    client, spec = data.client, check.spec
    n_values = len(check.values)
    offsets = [int(o) for o in cpart.group_offset[:-1]]
    got = client.gather([client.submit(node_counts, m, o, n_values, pure=False)
                         for m, o in zip(cpart.members, offsets)])
    key = np.concatenate([k for k, _ in got]) if got else np.zeros(0, np.int64)
    count = np.concatenate([c for _, c in got]) if got else np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")  # nodes hold disjoint groups: the keys are distinct
    counts = GroupCounts.of_counts(key[order], count[order], cpart.n_groups, check.transient)

    staged = Staged(open_staging(spec.output_dir))
    weakref.finalize(staged, staged.draft.discard)
    try:
        return _compose_batches(check, store, data, cpart, counts, staged)
    except BaseException:
        staged.draft.discard()
        raise


def _compose_batches(check, store, data, cpart, counts: GroupCounts, staged: Staged):
    from tasks.compose.check import same_transient

    client, spec, settings = data.client, check.spec, check.settings
    values = check.values
    offsets = [int(o) for o in cpart.group_offset[:-1]]
    n_batches = min(256, max(1, ceil(data.n / BATCH_PEOPLE)))
    worst = Worst()
    code_to_vkey = None
    next_pkey = next_set = next_cohort = 0
    pkey_base = set_base = 0
    prior_seen = False
    for batch in range(n_batches):
        rows = pa.concat_tables(client.gather([client.submit(batch_members, m, o, n_batches, batch, pure=False)
                                               for m, o in zip(cpart.members, offsets)]))
        persons = rows.column("person").combine_chunks()
        group = rows.column("group").to_numpy()
        code = rows.column("s").to_numpy().astype(np.int64)
        file, row = rows.column("file").to_numpy(), rows.column("row").to_numpy()
        prior = state.load(store, spec.dataset.name, persons, values)
        if code_to_vkey is None:  # the series' head is the same for every batch
            prior_seen = prior is not None
            if prior is not None:
                same_transient(prior, settings, spec.dataset.name)
            code_to_vkey, staged.values = state.value_keys(prior, values)
            if prior is not None:
                staged.sid, staged.release = prior.sid, prior.release
                next_pkey, next_set, next_cohort = prior.next_pkey, prior.next_set, prior.next_cohort
            pkey_base, set_base = next_pkey, next_set
        if prior is not None:
            _refuse_changed_values(check, prior, code, file, row, data.files)
        sets, row_set = compose(prior.sets if prior else Sets.empty(),
                                prior.set_of_row if prior else np.full(len(group), -1, np.int64),
                                group, counts, ~check.transient)
        if settings.l:  # as SeriesCheck.check: the record counts serve only the k figure
            sets.minc[:] = 0
        sets, index = shared(sets)
        row_set = index[row_set]
        if prior is not None:
            per_set = sets.candidates() if settings.l else sets.identity()
            worst.add(per_set[row_set], file, row, check.threshold, int((prior.set_of_row >= 0).sum()))
        pkey = prior.pkey.copy() if prior else np.full(len(group), -1, np.int64)
        fresh = pkey < 0
        pkey[fresh] = pkey_base + np.arange(int(fresh.sum()))
        pkey_base += int(fresh.sum())
        tables = state.summary_tables(code_to_vkey, persons=persons, pkey=pkey, set_id=row_set + set_base,
                                      code=code, cohort=next_cohort + group, gid=group, sets=sets,
                                      set_base=set_base)
        set_base += sets.size
        for name, table in zip(TABLES, tables):
            path = staged.draft.path / f"{name}-{batch:03d}.parquet"
            pq.write_table(table, path)
            staged.files[name].append(str(path))
    staged.next_ids = (pkey_base, set_base, next_cohort + cpart.n_groups)
    results = []
    if prior_seen:
        what = "candidate values" if settings.l else "records that can be the person's"
        results.append(_result(check, worst, staged.release + 1, what, data.files))
    return results, staged


def _result(check, worst: Worst, releases: int, what: str, files: list[str]):
    from pathlib import Path

    from tasks.anonymize.base import PrivacyResult

    return PrivacyResult(check.model, worst.figure, check.threshold, worst.below == 0, {
        "file": Path(files[worst.file]).name, "row": worst.row + 1, "below": worst.below,
        "people": worst.people, "returning": worst.returning, "releases": releases, "measures": what,
        "mode": check.settings.mode, "adversary": "holds every release of the series"})


def _refuse_changed_values(check, prior, code, file, row, files) -> None:
    """SeriesCheck.prepare's test of the model, on one batch (named by file and row)."""
    from pathlib import Path

    from tasks.compose.check import broken_rows

    broken = np.flatnonzero(broken_rows(prior, code, check.transient))
    if len(broken):
        i = broken[np.lexsort((row[broken], file[broken]))[0]]
        raise InputError(f"{Path(files[file[i]]).name}: row {row[i] + 1}, column '{check.spec.dataset.sensitive}': "
                         "the value differs from this person's value in an earlier release of the series "
                         f"({len(broken)} rows in this batch); a value that changes must be named in "
                         "[series] transient")

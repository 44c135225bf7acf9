"""`[series] keep_groups = true`: the next release of a series that passes the composition check.

Returning people stay in the group (cohort) they had; newcomers form new cohorts from the
technique's own groups of this input. A person's candidate values are the values every one of
their groups held, so a cohort keeps them as long as it keeps holding those values: the people
who stay carry theirs, newcomers add theirs. A cohort that no longer does (a member below the
threshold, fewer than k rows or fewer than l values) is merged with the next cohort in the order of
the technique's own groups (neighbours in QI space), in rounds, until none is left; merging never
removes a value from anybody's group. The cost is utility: cohorts drift apart in QI space as
people's QIs change and groups merge (docs/series.md has the figures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.types import Partition

if TYPE_CHECKING:  # check.py imports this module
    from privpub.tasks.compose.check import SeriesCheck

MAX_ROUNDS = 64


def people_per_group(group: np.ndarray, person: np.ndarray | None, n_groups: int) -> np.ndarray:
    """Rows per group, or its distinct people when a person may have several rows."""
    if person is None:
        return np.bincount(group, minlength=n_groups)
    width = int(person.max()) + 1 if len(person) else 1
    return np.bincount(np.unique(group.astype(np.int64) * width + person) // width, minlength=n_groups)


def kept_partition(check: SeriesCheck, data: Microdata, part: Partition) -> Partition:
    own = part.group
    prior = check.prior
    base = prior.next_cohort if prior is not None else 0
    cohort = base + own.astype(np.int64)
    if prior is not None:  # (a person's cohort on each of their rows under rows_per_person = "many")
        kept = check.per_row(prior.cohort, data.person) if data.person is not None else prior.cohort
        cohort = np.where(kept >= 0, kept, cohort)

    # cohorts in the order of the technique's own groups (the first member's), so merging a
    # cohort with the next one joins neighbours
    ids, label = np.unique(cohort, return_inverse=True)
    order_key = np.full(len(ids), np.iinfo(np.int64).max)
    np.minimum.at(order_key, label, own.astype(np.int64))
    order = np.lexsort((ids, order_key))
    rank = np.empty(len(ids), np.int64)
    rank[order] = np.arange(len(ids))
    group, cohort_of_group = rank[label], ids[order]

    k, l = check.technique.params.k_and_l()
    rounds = 0
    while rounds < MAX_ROUNDS:
        n_groups = len(cohort_of_group)
        counts, sets, row_set = check.compose(data, group, n_groups)
        bad = np.zeros(n_groups, bool)
        bad[check.units(group)[check.figures(sets, row_set) < check.threshold]] = True
        if k:
            bad |= people_per_group(group, data.person, n_groups) < k
        if l:
            bad |= np.bincount(counts.key // counts.n_values, minlength=n_groups) < l
        if not bad.any() or n_groups == 1:
            break
        start = np.ones(n_groups, bool)
        start[1:] = ~bad[:-1]  # a bad cohort takes in the next one
        if bad[-1]:
            start[-1] = False  # the last has no next: it joins the one before
        group = (np.cumsum(start) - 1)[group]
        cohort_of_group = cohort_of_group[start]
        rounds += 1
    check.cohort = cohort_of_group[group]
    info = {
        **part.info,
        "kept_groups": True,
        "merge_rounds": rounds,
        "returning": int(check.by_person(prior.cohort >= 0).sum()) if prior is not None else 0,
    }
    return Partition(group, len(cohort_of_group), None, info)

"""Suppression of the rows that widen Mondrian's groups most (`[technique] suppress`, issue 28).

Which rows force wide groups is what a first Mondrian run shows: its widest QI-groups are the
sparse corners of the QI space, where k rows can only be gathered in a large box. So:
1. Mondrian on every row (with the release's own models: k, l, ...);
2. each group's width per cell: the mean over the QIs of its range over the QI's span (the unit
   Mondrian compares dimensions in, `normalised_widths`; the uncertainty penalty of its cells);
3. leave out whole groups, widest first (ties: the earlier group), as long as the rows left out
   stay within floor(suppress x n) (the share as written: 0.29 is 29/100, not the float below it)
   and at least k rows remain; a group of width 0 widens nothing and is never left out;
4. Mondrian again on the kept rows, so every model it checks holds on exactly the rows that are
   published (a model against the table's overall distribution reads the kept rows').

Cost: two Mondrian runs, plus one sort of the group ids. Measured in docs/benchmarks.md ("Issue 28:
what suppression buys"): the widest published rows get narrower; the mean width per published
cell barely moves (Mondrian's recoding is local: one outlier widens one group, not a column).
A per-QI score (the narrowest window of k sorted values holding a row) was tried first and
left out: on the benchmark tables it finds almost no row, since the wide groups come from rows
rare in their combination of QIs, not in any one QI.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from privpub.tasks.core.microdata import Microdata, QIDomain
from privpub.tasks.core.types import Partition
from privpub.tasks.partition.mondrian import normalised_widths


def suppression_budget(share: float, n: int, k: int) -> int:
    """How many rows may be left out: floor(share x n) with the share read as written, and never
    so many that fewer than k rows remain."""
    return max(0, min(math.floor(Fraction(str(share)) * n), n - k))


def group_widths(codes: np.ndarray, domains: list[QIDomain], group: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group: the mean over the QIs of its range over the QI's span (0: exact values)."""
    order = np.argsort(group, kind="stable")
    starts = np.concatenate(([0], np.cumsum(np.bincount(group, minlength=n_groups))[:-1]))
    sorted_codes = codes[order]
    lo = np.minimum.reduceat(sorted_codes, starts, axis=0).T
    hi = np.maximum.reduceat(sorted_codes, starts, axis=0).T
    widths: np.ndarray = normalised_widths(domains, lo, hi).mean(axis=1)
    return widths


def widest_groups_rows(part: Partition, widths: np.ndarray, budget: int) -> np.ndarray:
    """Rows (increasing) of the widest groups, widest first, while they fit in the budget."""
    rank = np.lexsort((np.arange(part.n_groups), -widths))
    rank = rank[widths[rank] > 0]
    fits = np.cumsum(part.sizes[rank]) <= budget  # sizes >= 1: once one does not fit, none after
    chosen = np.zeros(part.n_groups, dtype=bool)
    chosen[rank[fits]] = True
    return np.flatnonzero(chosen[part.group])


@dataclass(frozen=True)
class KeptRows:
    """What Mondrian reads (tasks/partition/mondrian.CodedRows) of the kept rows, over the whole
    table's domains (so widths are normalised as without suppression)."""

    codes: np.ndarray
    domains: list[QIDomain]
    sensitive_codes: np.ndarray
    person: np.ndarray | None = None  # rows_per_person = "many": each kept row's person

    @property
    def n(self) -> int:
        return len(self.codes)


def suppressed_partition(
    data: Microdata, share: float, k: int, mondrian: Callable[[Microdata | KeptRows], Partition]
) -> Partition:
    """`mondrian(rows)` on the rows kept after suppression, spread over all input rows (group -1:
    left out, counted in info["suppressed"]); without suppression, `mondrian(data)` unchanged."""
    part = mondrian(data)
    budget = suppression_budget(share, data.n, k) if share > 0 else 0
    if budget == 0:
        return part
    left_out = widest_groups_rows(part, group_widths(data.codes, data.domains, part.group, part.n_groups), budget)
    if not len(left_out):
        return part
    keep = np.ones(data.n, dtype=bool)
    keep[left_out] = False
    # under "many" a group holds whole people, so whole people are left out
    person = None if data.person is None else data.person[keep]
    kept = mondrian(KeptRows(data.codes[keep], data.domains, data.sensitive_codes[keep], person))
    group = np.full(data.n, -1, dtype=np.int64)
    group[keep] = kept.group
    return Partition(group, kept.n_groups, kept.tree, {**kept.info, "suppressed": len(left_out)})


def published_rows(data: Microdata, group: np.ndarray, order: np.ndarray) -> tuple[Microdata, np.ndarray, np.ndarray]:
    """The rows to publish (group >= 0), their groups, and `order` (a permutation of all rows)
    restricted to them and renumbered into the kept rows: the input itself when none is left out."""
    keep = group >= 0
    if keep.all():
        return data, group, order
    position = np.cumsum(keep) - 1
    rows = replace(
        data,
        frame=data.frame[keep].reset_index(drop=True),
        codes=data.codes[keep],
        sensitive_codes=data.sensitive_codes[keep],
        person=None if data.person is None else data.person[keep],
    )
    return rows, group[keep], position[order[keep[order]]]

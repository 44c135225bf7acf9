"""The shared workload evaluated on a Dask cluster: the same queries and figures as the
in-memory path, from the coded partitions the workers hold and the published parts.

The workload's draws need, per QI, the histogram of its codes and, per set of QIs, their joint
histogram: sums of the partitions' histograms (added up on the workers). A drawn row is the nth
selected row in input order (files in name order): the partitions' selected counts say which
partition holds it, and that partition returns its sensitive value; all drawn rows are looked up
in two rounds. Exact answers are sums of the partitions' answers (integers, so equal); the
technique's estimates and penalties are sums over the published parts (floats, added in another
order than in memory: equal up to rounding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from typing import Any, cast

import numpy as np
import pyarrow as pa

from privpub.tasks.core.microdata import HasDomains, Microdata, QIDomain
from privpub.tasks.core.parted_table import PartedTable, map_parts
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import Release
from privpub.tasks.evaluate import utility_summary
from privpub.tasks.evaluate.counting import count_in_microdata
from privpub.tasks.evaluate.metrics import uncertainty_penalty
from privpub.tasks.evaluate.workload import CountQuery, Selections, joint_too_large, make_workload
from privpub.tasks.partition.parted import PartCodes, PartedRows, tree_reduce

PRECOMPUTE_KEYS = 300  # joint histograms computed up front (C(8, 2) + C(8, 3) = 84 for 8 QIs)


# on a worker: the domains and sensitive values every part's codes refer to
PartMeta = tuple[list[QIDomain], np.ndarray]


@dataclass
class PartView(HasDomains):
    """What the workload and the counts read from one coded partition (codes as (n, D))."""

    domains: list[QIDomain]
    codes: np.ndarray
    sensitive_values: np.ndarray
    sensitive_codes: np.ndarray

    @property
    def n(self) -> int:
        return len(self.sensitive_codes)


def _selections(part: PartCodes, meta: PartMeta) -> Selections:
    domains, s_values = meta
    return Selections(PartView(domains, part.xt.T, s_values, part.s))


def part_counts(part: PartCodes, meta: PartMeta) -> list[np.ndarray]:
    return _selections(part, meta).counts


def part_joints(part: PartCodes, meta: PartMeta, keys: list[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
    select = _selections(part, meta)
    return {key: select.joint(list(key)) for key in keys}


def _add_joints(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {key: a[key] + b[key] for key in a}


def part_count_rows(part: PartCodes, meta: PartMeta, attrs: list[int], picks: list[np.ndarray]) -> int:
    return _selections(part, meta).count_rows(attrs, picks)


def part_selected(part: PartCodes, meta: PartMeta, draws: list[tuple[Any, ...]]) -> np.ndarray:
    select = _selections(part, meta)
    return np.array([select.count(attrs, picks) for attrs, picks in draws], dtype=np.int64)


def part_drawn_codes(part: PartCodes, meta: PartMeta, wanted: list[tuple[Any, ...]]) -> list[int]:
    """The sensitive code of each (attrs, picks, nth, count) row of this partition."""
    select = _selections(part, meta)
    return [int(part.s[select.nth_row(*w)]) for w in wanted]


def part_answers(part: PartCodes, meta: PartMeta, workload: list[CountQuery]) -> np.ndarray:
    domains, s_values = meta
    return count_in_microdata(PartView(domains, part.xt.T, s_values, part.s), workload)


class ClusterSelections:
    """Selections over a cluster's partitions (the same counts, the same drawn rows)."""

    def __init__(self, data: PartedRows, max_attrs: int = 3) -> None:
        self.data, self.ex, self.n = data, data.executor, data.n
        self.meta = self.ex.scatter((data.domains, data.sensitive_values), broadcast=True)
        self.sizes = [d.size for d in data.domains]
        per_part = self._each(part_counts)
        self.counts = [np.sum([c[j] for c in per_part], axis=0) for j in range(len(self.sizes))]
        self._joint: dict[tuple[int, ...], np.ndarray] = {}
        # every joint histogram a draw may ask for, in one round (a round each costs ~100x more)
        keys = [
            key
            for m in range(2, max_attrs + 1)
            for key in combinations(range(len(self.sizes)), m)
            if not self.too_large(list(key))
        ]
        if 0 < len(keys) <= PRECOMPUTE_KEYS:
            self._joint = tree_reduce(
                self.ex,
                [self.ex.submit(part_joints, p, self.meta, keys) for p in data.parts],
                _add_joints,
            )

    def _each(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        result: list[Any] = self.ex.gather([self.ex.submit(fn, p, self.meta, *args) for p in self.data.parts])
        return result

    def too_large(self, attrs: list[int]) -> bool:
        return joint_too_large(self.sizes, self.n, attrs)

    def count(self, attrs: list[int], picks: list[np.ndarray]) -> int:
        if len(attrs) == 1:
            return int(self.counts[attrs[0]][picks[0]].sum())
        if self.too_large(attrs):
            return int(sum(self._each(part_count_rows, attrs, picks)))
        key = tuple(attrs)
        if key not in self._joint:
            self._joint[key] = tree_reduce(
                self.ex,
                [self.ex.submit(part_joints, p, self.meta, [key]) for p in self.data.parts],
                _add_joints,
            )[key]
        return int(self._joint[key][np.ix_(*picks)].sum())

    def drawn_values(self, draws: list[tuple[Any, ...]]) -> list[Any]:
        if not draws:
            return []
        selected = np.array(self._each(part_selected, [(a, p) for a, p, _, _ in draws]))  # (parts, draws)
        before = np.cumsum(selected, axis=0) - selected
        wanted: list[list[Any]] = [[] for _ in self.data.parts]
        where = []
        for q, (attrs, picks, nth, _) in enumerate(draws):
            part = int(np.searchsorted(np.cumsum(selected[:, q]), nth, side="right"))
            where.append((part, len(wanted[part])))
            wanted[part].append((attrs, picks, int(nth - before[part, q]), int(selected[part, q])))
        futures = [
            self.ex.submit(part_drawn_codes, p, self.meta, w) if w else None for p, w in zip(self.data.parts, wanted)
        ]
        codes = [self.ex.gather([f])[0] if f is not None else [] for f in futures]
        return [self.data.sensitive_values[codes[part][i]] for part, i in where]


def cluster_workload(data: PartedRows, rng: np.random.Generator, per_band: int) -> tuple[list[CountQuery], np.ndarray]:
    """The workload drawn from the cluster's partitions, and its exact answers."""
    select = ClusterSelections(data)
    workload = make_workload(data, rng, per_band=per_band, select=select)
    if not workload:
        return workload, np.zeros(0)
    actual = np.sum(select._each(part_answers, workload), axis=0)
    return workload, actual


def combine_penalties(per_part: list[dict[str, Any]], rows: int, names: list[str]) -> dict[str, float]:
    """uncertainty_penalty of a whole table from its parts' (sums per attribute)."""
    per_attr = {name: float(sum(p[f"penalty-{name}"] for p in per_part)) for name in names}
    total = float(sum(per_attr.values()))
    return {
        "uncertainty-penalty": total,
        "uncertainty-penalty-normalized": total / (max(rows, 1) * max(len(names), 1)),
        **{f"penalty-{k}": v for k, v in per_attr.items()},
    }


def evaluate_on_cluster(
    technique: Technique, release: Release, data: Microdata, workload_seed: int = 0, per_band: int = 100
) -> dict[str, Any]:
    """`evaluate` of data read on a Dask cluster: the same queries, from its partitions. `data` is
    the technique's Microdata by its contract; here rows kept in parts (tasks/validate/parted.PartedData)."""
    workload, actual = cluster_workload(cast(PartedRows, data), np.random.default_rng(workload_seed), per_band)
    return utility_summary(
        technique,
        release,
        data,
        workload,
        technique.estimate_counts(release, workload),
        technique.utility(release, data),
        actual,
    )


def table_estimates(table: pa.Table | PartedTable, estimate: Callable[..., Any], *args: Any) -> np.ndarray:
    """estimate(table, *args) of a published table in either shape (one Arrow table, or the sum
    over a folder's parts, computed where the table's executor works)."""
    if isinstance(table, PartedTable):
        result: np.ndarray = np.sum(map_parts(table, estimate, *args), axis=0)
        return result
    result = estimate(table, *args)
    return result


def table_penalty(table: pa.Table | PartedTable, data: Microdata) -> dict[str, float]:
    """uncertainty_penalty of a published table in either shape."""
    if isinstance(table, PartedTable):
        view = PartView(
            data.domains, np.zeros((0, len(data.domains)), np.int32), data.sensitive_values, np.zeros(0, np.int32)
        )
        return combine_penalties(map_parts(table, uncertainty_penalty, view), table.num_rows, data.qi_names)
    return uncertainty_penalty(table, data)

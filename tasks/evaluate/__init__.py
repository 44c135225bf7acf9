"""Step 5: utility of a release on the shared workload, plus penalties and group sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import UTILITY, Technique
from privpub.tasks.core.types import Release
from privpub.tasks.evaluate.counting import count_in_microdata
from privpub.tasks.evaluate.metrics import error_by_selectivity, group_size_stats
from privpub.tasks.evaluate.workload import make_workload


@dataclass(frozen=True)
class SharedWorkload:
    """The workload of one input and its exact answers, drawn and counted once for several
    releases of the same rows (`privpub explore`): they depend on the rows and the workload's
    seed only, so each release's figures are those it would get alone."""

    queries: list[Any]
    actual: np.ndarray


def shared_workload(data: Microdata, workload_seed: int = 0, per_band: int = 100) -> SharedWorkload:
    queries = evaluation_workload(data, workload_seed, per_band)
    return SharedWorkload(queries, count_in_microdata(data, queries))


def evaluate(
    technique: Technique,
    release: Release,
    data: Microdata,
    workload_seed: int = 0,
    per_band: int = 100,
    shared: SharedWorkload | None = None,
) -> dict[str, Any]:
    """Every technique on the same data gets the same queries (the workload's seed is fixed;
    `shared`: drawn and answered already). Rows kept in parts (data.in_parts) are evaluated by
    tasks/evaluate/parted.py::evaluate_on_cluster."""
    workload = evaluation_workload(data, workload_seed, per_band) if shared is None else shared.queries
    estimate, figures = UTILITY.run(technique, release, data, workload)
    actual = None if shared is None else shared.actual
    return utility_summary(technique, release, data, workload, estimate, figures, actual)


def evaluation_workload(data: Microdata, workload_seed: int = 0, per_band: int = 100) -> list[Any]:
    return make_workload(data, np.random.default_rng(workload_seed), per_band=per_band)


def utility_summary(
    technique: Technique,
    release: Release,
    data: Microdata,
    workload: list[Any],
    estimate: np.ndarray,
    figures: dict[str, float],
    actual: np.ndarray | None = None,
) -> dict[str, Any]:
    """The release's utility figures, given the technique's estimates of the workload and its
    own figures (Technique.utility), however they were computed (in one step or in chunks, in
    memory or on a cluster: then `actual`, the exact answers, come summed over its partitions)."""
    actual = count_in_microdata(data, workload) if actual is None else actual
    out: dict[str, Any] = {"queries": len(workload)}
    out.update(error_by_selectivity(workload, actual, estimate))
    sizes = technique.group_sizes(release)
    if sizes is not None:
        out.update(group_size_stats(sizes))
    out.update(figures)
    out["suppressed-rows"] = int(release.info.get("suppressed", 0))
    if data.spec.dataset.missing == "drop":  # rows with an empty cell, left out before any work
        out["dropped-rows"] = int(getattr(data, "dropped_rows", 0))
    return out

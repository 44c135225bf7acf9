"""Step 5: utility of a release on the shared workload, plus penalties and group sizes."""

from __future__ import annotations

from typing import Any

import numpy as np

from privpub.tasks.evaluate.counting import count_in_microdata
from privpub.tasks.evaluate.metrics import error_by_selectivity, group_size_stats
from privpub.tasks.evaluate.workload import make_workload


def evaluate(technique, release, data, workload_seed: int = 0, per_band: int = 100) -> dict[str, Any]:
    """Every technique on the same data gets the same queries (the workload's seed is fixed).
    Rows kept in parts (data.in_parts) are evaluated by tasks/cluster/evaluate.py::evaluate_on_cluster."""
    workload = evaluation_workload(data, workload_seed, per_band)
    estimate, figures = technique.run_step("utility", release, data, workload)
    return utility_summary(technique, release, data, workload, estimate, figures)


def evaluation_workload(data, workload_seed: int = 0, per_band: int = 100) -> list:
    return make_workload(data, np.random.default_rng(workload_seed), per_band=per_band)


def utility_summary(
    technique,
    release,
    data,
    workload: list,
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
    out["suppressed_rows"] = int(release.info.get("suppressed", 0))
    return out

"""Step 5: utility of a release on the shared workload, plus penalties and group sizes."""
from __future__ import annotations

from typing import Any

import numpy as np

from tasks.evaluate.metrics import error_by_selectivity, group_size_stats
from tasks.evaluate.counting import count_in_microdata
from tasks.evaluate.workload import make_workload


def evaluate(technique, release, data, workload_seed: int = 0, per_band: int = 100) -> dict[str, Any]:
    """Every technique on the same data gets the same queries (the workload's seed is fixed)."""
    rng = np.random.default_rng(workload_seed)
    if hasattr(data, "parts"):  # read on a Dask cluster: the same queries, from its partitions
        from tasks.evaluate.distributed import cluster_workload

        workload, actual = cluster_workload(data, rng, per_band)
    else:
        workload = make_workload(data, rng, per_band=per_band)
        actual = count_in_microdata(data, workload)
    estimate = technique.estimate_counts(release, workload)
    out: dict[str, Any] = {"queries": len(workload)}
    out.update(error_by_selectivity(workload, actual, estimate))
    sizes = technique.group_sizes(release)
    if sizes is not None:
        out.update(group_size_stats(sizes))
    out.update(technique.utility(release, data))
    out["suppressed_rows"] = int(release.info.get("suppressed", 0))
    return out

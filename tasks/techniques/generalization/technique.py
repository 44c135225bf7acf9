"""Technique `generalization`: Mondrian QI-groups, each QI replaced by its group's range or set,
sensitive values kept (k-anonymity, optionally distinct l-diversity). With `suppress`, outliers
are left out (tasks/partition/suppression.py) and never published."""

from __future__ import annotations

from typing import Any

import numpy as np

from privpub.schemas.errors import SpecError
from privpub.schemas.published import generalized_table_schema
from privpub.tasks.cluster.evaluate import table_estimates, table_penalty
from privpub.tasks.cluster.partition import distributed_mondrian, publish_parts
from privpub.tasks.cluster.verify import table_class_sizes, table_k_and_l
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import Partition, PrivacyResult, Release
from privpub.tasks.evaluate.estimate_generalized import estimate_from_generalized
from privpub.tasks.partition.generalized_table import generalized_table
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.partition.suppression import published_rows, suppressed_partition
from privpub.tasks.techniques.generalization.params import GeneralizationParams
from privpub.tasks.techniques.registry import register
from privpub.tasks.verify.published import qi_columns


@register("generalization")
class Generalization(Technique):
    Params = GeneralizationParams
    params: GeneralizationParams
    distributed = True
    table_names = ("table",)
    accepts_kept_groups = True  # anonymize builds each group's box from whatever rows it holds

    def check_params(self) -> None:
        if self.params.suppress > 0 and self.spec.run.task_runner == "dask":  # before any work
            raise SpecError('[technique] suppress does not run with [run] task_runner = "dask" yet; publish in memory')
        if self.params.suppress > 0 and self.spec.section("series").get("keep_groups"):
            raise SpecError("[technique] suppress: [series] keep_groups would publish returning people left out")

    def check_data(self, data: Microdata) -> None:
        if data.n < self.params.k:
            raise ValueError(f"k = {self.params.k} is larger than the table ({data.n} rows)")
        self.check_diversity(data, self.params.l)

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        if data.in_parts:  # rows kept in parts where the run works: the top of the tree from histograms
            # a ClusterPartition: the contract's Partition does not describe a partition kept in parts
            return distributed_mondrian(data, self.params.k, self.params.l, self.spec.run.chunk_rows)  # type: ignore[return-value]
        p = self.params
        # with suppress: Mondrian, its widest groups left out, Mondrian again on the rows kept
        return suppressed_partition(data, p.suppress, p.k, lambda rows: mondrian_partition(rows, p.k, p.l))

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        if data.in_parts:  # each subtree finished where its rows are, written as one part
            table, sizes = publish_parts(data, part, self.params.k, self.params.l, rng, self.spec.output_dir)
            return Release(
                {"table": table},
                info={"groups": len(sizes), "chunks": len(part.ready), "distributed_levels": part.levels},  # type: ignore[attr-defined]
            )
        # rows left out (group -1) are not published; the permutation is drawn over all rows
        rows, group, order = published_rows(data, part.group, rng.permutation(data.n))
        table = generalized_table(rows, group, part.n_groups, order)
        suppressed = {"suppressed": data.n - rows.n} if rows is not data else {}
        return Release({"table": table}, info={"groups": part.n_groups, **suppressed})

    def verify(self, release: Release, context: dict[str, Any]) -> list[PrivacyResult]:
        table = release.tables["table"]
        ds = self.spec.dataset
        return table_k_and_l(table, qi_columns(table, ds.qi_names), ds.sensitive, self.params.k, self.params.l)

    def estimate_counts(self, release: Release, workload) -> np.ndarray:
        ds = self.spec.dataset
        return table_estimates(release.tables["table"], estimate_from_generalized, ds.qi_names, ds.sensitive, workload)

    def group_sizes(self, release: Release) -> np.ndarray:
        """Equivalence-class sizes as the published table shows them."""
        table = release.tables["table"]
        return table_class_sizes(table, qi_columns(table, self.spec.dataset.qi_names))

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        table = release.tables["table"]  # one Arrow table, or a folder of parts (tasks/cluster/risk.py)
        return table, qi_columns(table, self.spec.dataset.qi_names)

    def utility(self, release: Release, data: Microdata) -> dict[str, float]:
        return table_penalty(release.tables["table"], data)

    def table_schemas(self, spec) -> dict[str, Any]:
        return {"table": generalized_table_schema(spec.dataset)}

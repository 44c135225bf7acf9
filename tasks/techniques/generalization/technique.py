"""Technique `generalization`: Mondrian QI-groups, each QI replaced by its group's range or set,
sensitive values kept (k-anonymity, optionally distinct, entropy or recursive (c, l)-diversity,
t-closeness and beta-likeness: docs/models.md). With `suppress`, outliers are left out
(tasks/partition/suppression.py) and never published."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from privpub.schemas.errors import SpecError
from privpub.schemas.published import generalized_table_schema
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.sensitive_models import ModelChoice, SensitiveModel
from privpub.tasks.core.technique import RANGES, Capabilities, Description, Technique
from privpub.tasks.core.types import Partition, PrivacyResult, Release, VerifyContext
from privpub.tasks.evaluate.estimate_generalized import estimate_from_generalized
from privpub.tasks.evaluate.parted import table_estimates, table_penalty
from privpub.tasks.evaluate.quality import QualityView
from privpub.tasks.evaluate.workload import CountQuery
from privpub.tasks.partition.generalized_table import generalized_table
from privpub.tasks.partition.mondrian import CodedRows, mondrian_partition
from privpub.tasks.partition.parted import distributed_mondrian, publish_parts
from privpub.tasks.partition.people import pair_value_counts, people_partition, person_value_pairs
from privpub.tasks.partition.suppression import KeptRows, published_rows, suppressed_partition
from privpub.tasks.techniques.generalization.params import GeneralizationParams
from privpub.tasks.techniques.registry import register
from privpub.tasks.verify.parted import table_class_sizes, table_k_and_l
from privpub.tasks.verify.published import people_table, qi_columns, release_people
from privpub.tasks.verify.sensitive import sensitive_results


@register
class Generalization(Technique):
    name = "generalization"
    Params = GeneralizationParams
    params: GeneralizationParams
    table_names = ("table",)
    capabilities = Capabilities(
        distributed=True,
        accepts_kept_groups=True,  # anonymize builds each group's box from whatever rows it holds
        publishes_dates=True,  # tasks/partition/generalized_table.py: date32 ranges
        many_rows_per_person=True,  # tasks/partition/people.py: groups of whole people, k counts people
    )

    @property
    def models(self) -> ModelChoice:
        """The sensitive-value models asked for (read from the parameters each time: a
        parameter set on the technique later counts)."""
        return self.params.model_choice(self.spec.dataset)

    @property
    def beyond_distinct(self) -> bool:
        """Entropy / recursive diversity, t-closeness or beta-likeness (docs/models.md), not just distinct l."""
        models = self.models
        return models.diversity not in (None, "distinct") or models.t is not None or models.beta is not None

    def check_params(self) -> None:
        if self.params.suppress > 0 and self.spec.run.task_runner == "dask":  # before any work
            raise SpecError('[technique] suppress does not run with [run] task_runner = "dask" yet; publish in memory')
        if self.params.suppress > 0 and self.spec.series.keep_groups:
            raise SpecError("[technique] suppress: [series] keep_groups would publish returning people left out")
        if self.beyond_distinct and self.spec.run.task_runner == "dask":
            raise SpecError(
                '[technique] entropy or recursive diversity, t-closeness and beta run in memory only: [run] task_runner = "dask" '
                "partitions rows in parts, which honours k and distinct l only"
            )
        if self.params.split_width != "range" and self.spec.run.task_runner == "dask":
            raise SpecError(
                '[technique] split_width = "values" runs in memory only: [run] task_runner = "dask" splits '
                "the top of the tree from histograms of code ranges"
            )

    def check_data(self, data: Microdata) -> None:
        if data.person is not None and data.people < self.params.k:
            raise ValueError(f"k = {self.params.k} is larger than the table ({data.people} people)")
        if data.n < self.params.k:
            raise ValueError(f"k = {self.params.k} is larger than the table ({data.n} rows)")
        self.check_diversity(data, self.params.l)
        if self.beyond_distinct:
            model = self.sensitive_model(data)
            codes = data.sensitive_codes
            if data.person is not None:  # each person's value one vote
                codes = person_value_pairs(data.person, codes.astype(np.int64), len(data.sensitive_values))[1]
            problem = model.table_problem(model.codes(codes))
            if problem:
                raise ValueError(problem)

    def sensitive_model(self, data: Microdata, rows: CodedRows | None = None) -> SensitiveModel:
        """The models over the rows to partition (all of data's, or the kept ones): their
        distribution over data's sensitive values (under "many", over people: each person's
        distinct values once), and the ground codes."""
        rows = data if rows is None else rows
        person = getattr(rows, "person", None)
        if person is None:
            counts = np.bincount(rows.sensitive_codes, minlength=len(data.sensitive_values))
        else:
            counts = pair_value_counts(person, rows.sensitive_codes.astype(np.int64), len(data.sensitive_values))
        return self.models.model(data.sensitive_values, counts)

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        if data.in_parts:  # rows kept in parts where the run works: the top of the tree from histograms
            # a ClusterPartition: the contract's Partition does not describe a partition kept in parts
            return distributed_mondrian(data, self.params.k, self.params.l, self.spec.run.chunk_rows)  # type: ignore[return-value]
        p = self.params

        def mondrian(rows: Microdata | KeptRows) -> Partition:
            # the models' distribution is that of the rows partitioned (the kept ones)
            model = self.sensitive_model(data, rows) if self.beyond_distinct else None
            person = getattr(rows, "person", None)
            if person is not None:  # rows_per_person = "many": groups of whole people
                return people_partition(rows, person, p.k, p.l, model=model, split_width=p.split_width)
            return mondrian_partition(rows, p.k, p.l, model=model, split_width=p.split_width)

        # with suppress: Mondrian, its widest groups left out, Mondrian again on the rows kept
        return suppressed_partition(data, p.suppress, p.k, mondrian)

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        if data.in_parts:  # each subtree finished where its rows are, written as one part
            table, sizes = publish_parts(data, part, self.params.k, self.params.l, rng, self.spec.output_dir)
            return Release(
                {"table": table},
                info={"groups": len(sizes), "chunks": len(part.ready), "distributed_levels": part.levels},  # type: ignore[attr-defined]
            )
        # rows left out (group -1) are not published; the permutation is drawn over all rows
        rows, group, order = published_rows(data, part.group, rng.permutation(data.n))
        table = generalized_table(rows, group, part.n_groups, order, coded_lists=True)
        suppressed = {"suppressed": data.n - rows.n} if rows is not data else {}
        private = {} if rows.person is None else {"people": people_table(rows.person[order])}
        return Release({"table": table}, private, info={"groups": part.n_groups, **suppressed})

    def verify(self, release: Release, context: VerifyContext) -> list[PrivacyResult]:
        table = release.tables["table"]
        ds = self.spec.dataset
        columns = qi_columns(table, ds.qi_names)
        distinct_l = self.params.l if self.models.diversity == "distinct" else None
        person = release_people(release)  # rows_per_person = "many": the figures count people
        if person is None and ds.rows_per_person == "many":  # never counted in rows instead
            reason = 'rows_per_person = "many" but the release keeps no people table: its classes cannot be counted in people'
            return [PrivacyResult("k-anonymity", 0, self.params.k, False, {"reason": reason})]
        results = table_k_and_l(table, columns, ds.sensitive, self.params.k, distinct_l, person)
        if self.beyond_distinct:
            results += sensitive_results(table, columns, ds.sensitive, self.models, person)
        return results

    def estimate_counts(self, release: Release, workload: list[CountQuery]) -> np.ndarray:
        ds = self.spec.dataset
        return table_estimates(release.tables["table"], estimate_from_generalized, ds.qi_names, ds.sensitive, workload)

    def group_sizes(self, release: Release) -> np.ndarray:
        """Equivalence-class sizes as the published table shows them."""
        table = release.tables["table"]
        return table_class_sizes(table, qi_columns(table, self.spec.dataset.qi_names))

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        return Description(published_as=RANGES)

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        table = release.tables["table"]  # one Arrow table, or a folder of parts (tasks/risk/parted.py)
        return table, qi_columns(table, self.spec.dataset.qi_names)

    def utility(self, release: Release, data: Microdata) -> dict[str, float]:
        return table_penalty(release.tables["table"], data)

    def quality_view(self, release: Release) -> QualityView | str:
        """One row per published record; a class is an equivalence class, bound to hold k rows."""
        table = release.tables["table"]
        if not isinstance(table, pa.Table):
            return "the release is a folder of parts (rows kept on a cluster): not computed on that path"
        suppressed = int(release.info.get("suppressed", 0))
        return QualityView(
            table,
            self.spec.dataset.sensitive,
            classes_are_boxes=True,  # its classes as the table shows them (group_sizes), counted once there
            k=self.params.k,
            suppressed=suppressed,
        )

    def table_schemas(self, spec: ReleaseSpec) -> dict[str, Any]:
        return {"table": generalized_table_schema(spec.dataset)}

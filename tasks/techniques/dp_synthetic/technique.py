"""Technique `dp-synthetic`: a differentially private synthetic table by MST (mst.py) at
(epsilon, delta)-DP, accounted in zCDP (accounting.py); docs/dp.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privpub.schemas.errors import SpecError
from privpub.schemas.published import generalized_table_schema
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Capabilities, Description, Technique, find_result
from privpub.tasks.core.types import Partition, PrivacyResult, Release, VerifyContext
from privpub.tasks.evaluate.estimate_generalized import estimate_from_generalized
from privpub.tasks.evaluate.parted import table_estimates
from privpub.tasks.evaluate.quality import QualityView
from privpub.tasks.evaluate.workload import CountQuery
from privpub.tasks.techniques.dp_synthetic.accounting import approx_epsilon, exponential_rho, gaussian_rho, rho_for
from privpub.tasks.techniques.dp_synthetic.mst import synthesize
from privpub.tasks.techniques.dp_synthetic.params import DPSyntheticParams
from privpub.tasks.techniques.dp_synthetic.tables import (
    attributes,
    mechanism_schema,
    mechanism_table,
    published_domains,
    synthetic_table,
)
from privpub.tasks.techniques.registry import register
from privpub.tasks.verify.published import people_table, qi_columns

SYNTHETIC = (
    "Every row is synthetic: drawn from a model built from noisy counts of the data, so no published row "
    "is a real person's, and a numeric quasi-identifier is published as its bin"
)


def person_limit(person: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """The rows kept when each person keeps at most `limit` of theirs, chosen at random."""
    order = rng.permutation(len(person))
    order = order[np.argsort(person[order], kind="stable")]
    sorted_person = person[order]
    starts = np.flatnonzero(np.r_[True, sorted_person[1:] != sorted_person[:-1]])
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    return np.sort(order[rank < limit])


@register
class DPSynthetic(Technique):
    name = "dp-synthetic"
    Params = DPSyntheticParams
    params: DPSyntheticParams
    table_names = ("table", "mechanism")
    capabilities = Capabilities(
        guards_series=True,  # a series of DP releases composes by its privacy budget, not by groups
        randomized=True,  # the noise: a second release of the same data spends the budget again
        publishes_dates=True,  # a date QI's bins as date32 ranges (tables.py)
        many_rows_per_person=True,  # max_rows_per_person bounds one person's rows; the noise is scaled to it
        risk_note=(
            "The rows are synthetic: the identity figures are computed on them as an adversary reads the table, "
            "but a unique synthetic row is no real person, and the protection is the epsilon bound, not these figures"
        ),
    )

    def check_params(self) -> None:
        p, ds = self.params, self.spec.dataset
        binned = {q.name: q.kind for q in ds.qi if q.kind in ("numeric", "date")}
        for key in ("bins", "bounds"):
            stray = sorted(set(getattr(p, key)) - set(binned))
            if stray:
                raise SpecError(f"[technique] {key}.{stray[0]}: not a numeric or date quasi-identifier")
        for name, kind in binned.items():
            if p.edges(name) is None:
                raise SpecError(
                    f"[technique] dp-synthetic needs bins.{name} or bounds.{name} (public bin edges or bounds of "
                    f"the {kind} QI: taken from the data they would spend budget)"
                )
            if p.gives_dates(name) != (kind == "date"):
                want = "ISO dates (2024-01-31)" if kind == "date" else "numbers"
                raise SpecError(f"[technique] the edges of {kind} QI '{name}' must be {want}")
        undeclared = published_domains(self.spec)
        if undeclared and p.categories == "declared":
            raise SpecError(
                f"[dataset] '{undeclared[0]}' declares no list of its values (order, hierarchy or sensitive_order): "
                'dp-synthetic needs public value lists, or [technique] categories = "from-data"'
            )
        if ds.rows_per_person != "many" and p.max_rows_per_person is not None:
            raise SpecError('[technique] max_rows_per_person applies to [dataset] rows_per_person = "many" only')

    @property
    def sensitivity(self) -> float:
        """Rows one person can change: 1, or the declared limit (rows_per_person = "many" without
        one: 1, each person's one row drawn at random)."""
        return float(self.params.max_rows_per_person or 1)

    def privacy_spend(self) -> dict[str, float] | None:
        return {"epsilon": self.params.epsilon, "delta": self.params.delta}

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        return Partition(np.zeros(data.n, dtype=np.int64), 1)  # no groups: the table is drawn whole

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        attrs = attributes(data, self.params)
        codes = np.column_stack([a.codes for a in attrs])
        if data.person is not None:
            codes = codes[person_limit(data.person, self.params.max_rows_per_person or 1, rng)]
        rho = rho_for(self.params.epsilon, self.params.delta)
        synthetic, record = synthesize(codes, [a.size for a in attrs], rho, self.sensitivity, rng)
        tables = {"table": synthetic_table(attrs, synthetic), "mechanism": mechanism_table(attrs, record)}
        # rows_per_person = "many": no synthetic row is a real person's; each is counted as one person
        private = {} if data.person is None else {"people": people_table(np.arange(len(synthetic)))}
        return Release(tables, private, info={"rows": len(synthetic), "measurements": len(record)})

    def verify(self, release: Release, context: VerifyContext) -> list[PrivacyResult]:
        """The privacy loss recomputed from the published mechanism table: each row's rho from its
        noise scale (or exponential-mechanism epsilon) and the spec's contribution limit, their
        sum converted by OpenDP, against the epsilon claimed; and the shape MST must have."""
        m = release.tables["mechanism"].to_pandas()
        p = self.params
        gaussian = m.step != "select"
        rho = np.where(
            gaussian, gaussian_rho(m.sigma.to_numpy(), self.sensitivity), exponential_rho(m.exp_epsilon.to_numpy())
        )
        problems = []
        attrs = len(self.spec.dataset.qi) + 1
        counts = m.step.value_counts()
        if counts.get("one-way", 0) != attrs:
            problems.append(f"{counts.get('one-way', 0)} one-way marginals measured for {attrs} attributes")
        if counts.get("two-way", 0) != counts.get("select", 0):
            problems.append("the two-way marginals measured are not the pairs selected")
        if not np.all(m.sensitivity.to_numpy() == self.sensitivity):
            problems.append(f"a measurement assumes a contribution other than {self.sensitivity:g} rows per person")
        if not np.allclose(rho, m.rho.to_numpy(), rtol=1e-9, atol=0):
            problems.append("a recorded rho disagrees with its noise scale")
        total = float(np.nansum(rho))
        epsilon = approx_epsilon(total, p.delta) if np.isfinite(total) else math.inf
        passed = epsilon <= p.epsilon * (1 + 1e-9) and not problems
        detail: dict[str, Any] = {"rho": total, "delta": p.delta, "measurements": len(m), "recomputed": epsilon}
        if problems:
            detail["reason"] = "; ".join(problems)
        # the figure is the spend the budget ledger counts (the claimed epsilon, which the
        # recomputation stays within; the recomputed value in the detail), else what was recomputed
        spent = p.epsilon if passed else epsilon
        return [PrivacyResult("epsilon", spent, p.epsilon, passed, detail)]

    def estimate_counts(self, release: Release, workload: list[CountQuery]) -> np.ndarray:
        ds = self.spec.dataset
        return table_estimates(release.tables["table"], estimate_from_generalized, ds.qi_names, ds.sensitive, workload)

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        table = release.tables["table"]
        return table, qi_columns(table, self.spec.dataset.qi_names)

    def quality_view(self, release: Release) -> QualityView | str:
        """Synthetic rows, none of them an input record (their count is a noisy count); classes
        are the distinct published boxes (no k bound)."""
        return QualityView(
            release.tables["table"],
            self.spec.dataset.sensitive,
            classes_are_boxes=True,
            aecs_reason="a synthetic table guarantees no class size k",
            records=False,
        )

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        result = find_result(privacy, "epsilon")
        epsilon = self.params.epsilon if result is None else result.threshold
        factor = math.exp(epsilon)
        sentences = (
            f"Differential privacy with epsilon = {epsilon:g} (delta = {self.params.delta:g}): whatever anyone "
            f"concludes from this table, the chance of that conclusion changes by at most a factor of {factor:.3g} "
            "whether or not any one person's rows were in the data (except with probability delta), so the table "
            "says almost the same about a person who took part as about one who did not",
            "Each further release of the same people spends epsilon again: the losses add up across the series",
        )
        return Description(published_as=SYNTHETIC, sentences=sentences)

    def table_schemas(self, spec: ReleaseSpec) -> dict[str, Any]:
        return {"table": generalized_table_schema(spec.dataset), "mechanism": mechanism_schema()}

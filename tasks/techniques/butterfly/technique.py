"""Techniques `butterfly` (Pei, Tao, Li, Xiao) and `union-qid` (its baseline): one release that is
k-anonymous for every listed QID.

[technique] keys: k, qids = [[...], [...]] (lists of QI names), optional k_prime (< k, the
two-level framework of Section 5.2: k'-anonymous on the union QID as well).

Published `table`: one row per input row, shuffled; each QI generalized the spine's way
(<qi>_lo/<qi>_hi or a list); for butterfly the body attributes carry the unit's range and each
wing attribute its wing group's range; the sensitive column kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from privpub.schemas.errors import PartitionError, SpecError
from privpub.schemas.published import generalized_table_schema
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import RANGES, Capabilities, Description, Technique
from privpub.tasks.core.types import ChunkPlan, Partition, PrivacyResult, Release, VerifyContext
from privpub.tasks.evaluate.estimate_generalized import estimate_from_generalized
from privpub.tasks.evaluate.metrics import uncertainty_penalty
from privpub.tasks.evaluate.quality import QualityView
from privpub.tasks.evaluate.workload import CountQuery
from privpub.tasks.partition.generalized_table import GroupIndex, generalized_columns, generalized_table
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.techniques.butterfly import multi_qid
from privpub.tasks.techniques.butterfly.core import Assignment, Points, butterflies, layout
from privpub.tasks.techniques.butterfly.params import MultiQIDParams
from privpub.tasks.techniques.registry import register
from privpub.tasks.verify.class_chunks import ClassChunk, class_partials
from privpub.tasks.verify.published import class_profile, qi_columns


class _MultiQID(Technique):
    """Parameters, verification and utility shared by butterfly and union-qid."""

    Params = MultiQIDParams
    params: MultiQIDParams
    capabilities = Capabilities(
        risk_note=(
            "The figures assume an adversary who knows every quasi-identifier, more than any one "
            "QID the technique protects: the highest prosecutor risk can therefore exceed 1/k of a "
            "single QID, whose own figure is in the privacy table."
        ),
    )

    def check_params(self) -> None:
        known = self.spec.dataset.qi_names
        for q in self.params.qids:
            for c in q:
                if c not in known:
                    raise SpecError(
                        f"[technique] qids: '{c}' is not a quasi-identifier in [dataset] qi ({', '.join(known)})"
                    )
        self.union = [n for n in known if any(n in q for q in self.params.qids)]
        # the adversary's union of all QIDs plus any declared QI no QID lists
        self.layout = layout(known, self.params.qids)

    def check_data(self, data: Microdata) -> None:
        if data.n < self.params.k:
            raise ValueError(f"k = {self.params.k} is larger than the table ({data.n} rows)")

    def one_piece(self, release: Release) -> bool:
        """One verify step for a table of at most chunk_rows rows."""
        rows: int = release.tables["table"].num_rows  # pyarrow is untyped
        return rows <= self.spec.run.chunk_rows

    def split_verify(
        self, release: Release, context: VerifyContext
    ) -> ChunkPlan[ClassChunk, list[pa.Table], list[PrivacyResult]]:
        """Every QID's classes counted in runs of `[run] chunk_rows` published rows (verify chunks
        on the task runner), added up per class in the flow (multi_qid.py)."""
        table = release.tables["table"]
        checks = multi_qid.multi_qid_checks(table, self.params.qids, self.params.k, self.params.k_prime, self.union)
        chunks = multi_qid.multi_qid_plan(table, checks, self.spec.run.chunk_rows)
        return ChunkPlan(chunks, class_partials, partial(multi_qid.multi_qid_results, checks))

    def estimate_counts(self, release: Release, workload: list[CountQuery]) -> np.ndarray:
        ds = self.spec.dataset
        return estimate_from_generalized(release.tables["table"], ds.qi_names, ds.sensitive, workload)

    def utility(self, release: Release, data: Microdata) -> dict[str, float]:
        """Definition 1 over the union QID, split into common (body) and distinct attributes."""
        table = release.tables["table"]
        out = uncertainty_penalty(table, data, self.union)
        common = [data.qi_names[j] for j in self.layout.body if data.qi_names[j] in self.union]
        out["uncertainty-penalty-common"] = sum(out[f"penalty-{c}"] for c in common)
        out["uncertainty-penalty-distinct"] = out["uncertainty-penalty"] - out["uncertainty-penalty-common"]
        return out

    def group_sizes(self, release: Release) -> np.ndarray:
        """Equivalence classes over the union QID, as the published table shows them."""
        table = release.tables["table"]
        sizes: np.ndarray = class_profile(table, qi_columns(table, self.union))["size"]
        return sizes

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        return Description(published_as=RANGES)

    def quality_view(self, release: Release) -> QualityView:
        """Every QI of the one published table (the union of the QIDs); a class is an equivalence
        class over the union QID and k the spec's k (Butterfly binds each QID to k, not the union:
        its union classes may be smaller, so its aecs may be below 1)."""
        table = release.tables["table"]
        return QualityView(table, self.spec.dataset.sensitive, classes=self.group_sizes(release), k=self.params.k)

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        """Every published QI column: the risk figures assume an adversary who knows all the
        QIs, more than any one QID (docs/risk.md)."""
        table = release.tables["table"]
        return table, qi_columns(table, self.spec.dataset.qi_names)

    def table_schemas(self, spec: ReleaseSpec) -> dict[str, Any]:
        return {"table": generalized_table_schema(spec.dataset)}


@register
class UnionQID(_MultiQID):
    """The naive method of Section 2.2: Mondrian k-anonymization on the union QID."""

    name = "union-qid"

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        cols = [data.qi_names.index(c) for c in self.union]
        return mondrian_partition(data, self.params.k, columns=cols)

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        table = generalized_table(data, part.group, part.n_groups, rng.permutation(data.n))
        return Release({"table": table}, info={"groups": part.n_groups})


@register
class Butterfly(_MultiQID):
    """Butterflies over a Mondrian hierarchy on the union QID (Sections 4-5)."""

    name = "butterfly"

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        points, row_point, k = self._points(data)
        assign = butterflies(points, self.layout, k)
        unit = assign.unit[row_point]
        return Partition(
            unit,
            assign.n_units,
            info={
                "assignment": assign,
                "row_point": row_point,
                "k_points": k,
                **assign.stats,
                "rows_in_butterflies": int(assign.in_butterfly[row_point].sum()),
            },
        )

    def _points(self, data: Microdata) -> tuple[Points, np.ndarray, int]:
        """One-level: every row is a point, k as given. Two-level (k_prime): Mondrian k'-classes on
        the union become points (their bounds, their size as weight), anonymized with ceil(k/k')."""
        if self.params.k_prime is None:
            return Points.of_rows(data.codes, data.domains), np.arange(data.n), self.params.k
        cols = [data.qi_names.index(c) for c in self.union]
        part = mondrian_partition(data, self.params.k_prime, columns=cols)
        k_points = math.ceil(self.params.k / self.params.k_prime)
        if part.n_groups < k_points:
            raise PartitionError(
                f"k_prime = {self.params.k_prime} leaves {part.n_groups} classes on the union QID, "
                f"fewer than ceil(k/k') = {k_points}: no two-level release exists"
            )
        lo, hi = _bounds(part.group, part.n_groups, data.codes)
        base = Points.of_rows(lo, data.domains)
        top = Points.of_rows(hi, data.domains)
        points = Points(
            (lo + hi) // 2,
            data.domains,
            base.x_lo,
            top.x_hi,
            np.bincount(part.group, minlength=part.n_groups).astype(float),
        )
        return points, part.group, k_points

    def composition_views(self) -> list[str]:
        """Butterfly protects each QID on its own (k rows per QID class), not the union: the
        series check plays one adversary per QID, who knows that QID's values."""
        return [f"QID {q + 1} ({', '.join(qid)})" for q, qid in enumerate(self.params.qids)]

    def composition_groups(self, data: Microdata, part: Partition) -> tuple[np.ndarray, int]:
        """Per QID, a row's class on that QID: its unit (the body's range) and its wing group of
        that QID (the wing's range); the QIDs one after the other (tests/test_composition_oracle.py).
        A box of another class that happens to cover the person too only adds candidates."""
        assign: Assignment = part.info["assignment"]
        row_point = part.info["row_point"]
        unit = assign.unit[row_point].astype(np.int64)
        groups, offset = [], 0
        for attrs, wing in zip(self.layout.wings, assign.wing):
            key = unit * (int(wing.max(initial=0)) + 1) + wing[row_point] if attrs else unit  # no wing: the unit
            pairs, index = np.unique(key, return_inverse=True)
            groups.append(index.ravel() + offset)
            offset += len(pairs)
        return np.concatenate(groups), offset

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        assign: Assignment = part.info["assignment"]
        row_point = part.info["row_point"]
        names = data.qi_names
        blocks = [([names[j] for j in self.layout.body], assign.unit, assign.n_units)]
        blocks += [
            ([names[j] for j in attrs], w, nw)
            for attrs, w, nw in zip(self.layout.wings, assign.wing, assign.n_wing)
            if attrs
        ]
        order = rng.permutation(data.n)
        cols: dict[str, pa.Array] = {}
        for qi_names, group, n_groups in blocks:
            row_group = group[row_point]
            per_group = generalized_columns(data, row_group, n_groups, qi_names)
            idx = pa.array(row_group[order])
            cols.update({c: arr.take(idx) for c, arr in per_group.items()})
        published = {c: cols[c] for c in _column_order(data)}
        s = self.spec.dataset.sensitive
        published[s] = pa.array(data.frame[s].to_numpy()[order])
        info = {k: v for k, v in part.info.items() if k not in ("assignment", "row_point")}
        return Release({"table": pa.table(published)}, info=info)


def _bounds(group: np.ndarray, n_groups: int, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-group min and max codes of every QI: (n_groups, d) each."""
    index = GroupIndex(group, n_groups)
    pairs = [index.bounds(codes[:, j]) for j in range(codes.shape[1])]
    return np.stack([p[0] for p in pairs], axis=1), np.stack([p[1] for p in pairs], axis=1)


def _column_order(data: Microdata) -> list[str]:
    """Published columns in the QIs' declared order, as the spine lays them out."""
    out = []
    for dom in data.domains:
        out += [f"{dom.name}_lo", f"{dom.name}_hi"] if dom.kind == "numeric" else [dom.name]
    return out

"""Anatomy (Xiao and Tao, VLDB 2006): l-diverse buckets, QI values published exactly.

Group creation (their Fig. 5): hash the tuples by sensitive value; while at least l hash buckets
are non-empty, take one tuple from each of the l largest buckets to form a QI-group. The at most
l - 1 remaining tuples (each with a different value) join a group that lacks their value. This
succeeds when no sensitive value occurs in more than n / l tuples (l-eligibility), and every
group then has l distinct values, each once (a residual tuple adds a new value), so an adversary
links a person to a sensitive value with probability at most 1/l.

Published tables:  QIT (QI columns, gid)  and  ST (gid, sensitive value, count).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pdr
import pyarrow as pa

from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.compact_table import CompactTable
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import ChunkPlan, Partition, PrivacyResult, Release
from privpub.tasks.evaluate.counting import QueryAnswers, arrow_codes, arrow_plain_column
from privpub.tasks.evaluate.workload import ColumnIndex
from privpub.tasks.risk import st_attribute_risk
from privpub.tasks.techniques.anatomy.params import AnatomyParams
from privpub.tasks.techniques.registry import register


class AnatomyError(ValueError):
    """The table is not l-eligible."""


def anatomy_groups(sensitive_codes: np.ndarray, l: int, rng: np.random.Generator) -> np.ndarray:
    """A group id per row, following Xiao and Tao's group-creation step."""
    n = len(sensitive_codes)
    counts = np.bincount(sensitive_codes)
    if n == 0 or counts.max() * l > n:
        most = int(counts.max()) if n else 0
        raise AnatomyError(
            f"Anatomy with l = {l} needs every sensitive value in at most n/l = {n / l:.1f} "
            f"rows; the most frequent value has {most}"
        )
    # rows of each value, in random order: value v's rows are stack[start[v]:start[v] + counts[v]]
    order = np.lexsort((rng.random(n), sensitive_codes))
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    left = counts.copy()
    group = np.full(n, -1, dtype=np.int64)
    gid = 0
    while (left > 0).sum() >= l:
        top = np.argpartition(-left, l - 1)[:l]  # the l largest buckets
        # taking alpha rounds at once keeps the same buckets on top while they stay >= the rest
        rest = np.delete(left, top)
        alpha = max(1, int(left[top].min() - (rest.max() if len(rest) else 0)))
        for v in top:
            rows = order[start[v] + counts[v] - left[v] : start[v] + counts[v] - left[v] + alpha]
            group[rows] = gid + np.arange(alpha)
        left[top] -= alpha
        gid += alpha
    residue = np.flatnonzero(group < 0)
    for r in residue:
        v = sensitive_codes[r]
        has_v = np.zeros(gid, dtype=bool)
        has_v[group[(sensitive_codes == v) & (group >= 0)]] = True
        group[r] = rng.choice(np.flatnonzero(~has_v))
    return group


@register("anatomy")
class Anatomy(Technique):
    Params = AnatomyParams
    params: AnatomyParams
    table_names = ("QIT", "ST")

    def check_data(self, data: Microdata) -> None:
        counts = np.bincount(data.sensitive_codes)
        if counts.max() * self.params.l > data.n:
            raise AnatomyError(
                f"the table is not {self.params.l}-eligible: a sensitive value occurs in "
                f"{counts.max()} of {data.n} rows (more than n/l)"
            )

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        self.check_data(data)
        group = anatomy_groups(data.sensitive_codes, self.params.l, rng)
        return Partition(group=group, n_groups=int(group.max()) + 1, info={"partitioner": "anatomy"})

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        perm = rng.permutation(data.n)
        qit = {name: pa.array(data.frame[name].to_numpy()[perm]) for name in data.qi_names}
        qit["gid"] = pa.array(part.group[perm])
        sens = data.spec.dataset.sensitive
        st = (
            pd.DataFrame({"gid": part.group, sens: data.frame[sens].to_numpy()})
            .groupby(["gid", sens], sort=True)
            .size()
            .rename("count")
            .reset_index()
        )
        st["count"] = st["count"].astype(np.int64)
        info = {"groups": int(part.n_groups), "min_group": int(part.sizes.min()), "max_group": int(part.sizes.max())}
        return Release({"QIT": pa.table(qit), "ST": pa.Table.from_pandas(st, preserve_index=False)}, {}, info)

    chunked = frozenset({"verify"})

    def one_piece(self, step: str, release: Release, *_: Any) -> bool:
        """One verify step for a QIT of at most chunk_rows rows."""
        return release.tables["QIT"].num_rows <= self.spec.run.chunk_rows

    def split(self, step: str, release: Release, context: dict[str, Any]) -> ChunkPlan:
        chunks = anatomy_chunks(release, self.spec.dataset.sensitive, self.spec.run.chunk_rows)
        return ChunkPlan(chunks, anatomy_chunk_figures, partial(anatomy_results, l=self.params.l))

    def _bucket_stats(self, release: Release):
        qit = release.tables["QIT"].to_pandas()
        st = release.tables["ST"].to_pandas()
        size = qit.groupby("gid").size()
        return qit, st, size

    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """Each matching QIT row holds value v with probability count(gid, v) / |gid|: one
        weighted copy of a QIT row per value its group holds, grouped by value once."""
        qit, st = release.tables["QIT"], release.tables["ST"]
        gid = qit.column("gid").to_numpy()
        order = np.argsort(gid, kind="stable")
        st_gid = st.column("gid").to_numpy()
        first = np.searchsorted(gid[order], st_gid, side="left")
        size = np.searchsorted(gid[order], st_gid, side="right") - first  # |gid| of each ST row
        entry = np.repeat(np.arange(st.num_rows), size)  # one copy per (ST row, member of its group)
        offset = np.arange(len(entry)) - np.repeat(np.cumsum(size) - size, size)
        rows = order[first[entry] + offset]
        weights = (st.column("count").to_numpy() / np.where(size > 0, size, 1))[entry]
        s_codes, s_values = arrow_codes(st.column(self.spec.dataset.sensitive))
        used = {name for q in workload for name, _ in q.conditions}
        columns = {name: arrow_plain_column(qit.column(name)) for name in used}
        return QueryAnswers(columns, s_codes[entry], s_values.tolist(), rows, weights).answers(workload)

    def estimate_sums(self, release: Release, queries) -> np.ndarray:
        """Each matching QIT row contributes its bucket's average sensitive value."""
        qit, st, size = self._bucket_stats(release)
        sens = self.spec.dataset.sensitive
        mean = (st[sens].astype(float) * st["count"]).groupby(st["gid"]).sum() / size
        out, index, gid = [], ColumnIndex(qit), qit["gid"].to_numpy()
        for q in queries:
            matched = pd.Series(gid[index.mask(q.conditions)]).value_counts()
            out.append(float((matched * mean.reindex(matched.index)).sum()))
        return np.array(out)

    randomized = True  # its groups are drawn at random
    risk_note = (
        "Anatomy publishes every quasi-identifier value unchanged (QIT): identity disclosure, "
        "finding a person's QIT row, is not reduced, so its identity figures equal the input's. "
        "It reduces attribute disclosure: ST shows each group's sensitive values only as counts, "
        "so a person linked to their group has their value guessed with probability at most "
        "attribute-risk-max."
    )

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        """QIT publishes the QI values as they are: its identity risk is the input's."""
        return release.tables["QIT"], self.spec.dataset.qi_names

    def attribute_risk(self, release: Release) -> float | None:
        """Per group, ST's largest count over the group's size (the sum of its counts)."""
        return st_attribute_risk(release.tables["ST"], self.spec.dataset.sensitive)

    def attribute_table(self, release: Release) -> tuple[Any, list[str], str | None] | None:
        """A person linked to their QIT row learns their group's ST counts."""
        return release.tables["ST"], ["gid"], "count"

    def table_schemas(self, data_spec: ReleaseSpec) -> dict[str, Any]:
        ds = data_spec.dataset
        qit = {name: pdr.Column(nullable=False) for name in ds.qi_names}
        qit["gid"] = pdr.Column(int, pdr.Check.ge(0))
        st = {
            "gid": pdr.Column(int, pdr.Check.ge(0)),
            ds.sensitive: pdr.Column(nullable=False),
            "count": pdr.Column(int, pdr.Check.ge(1)),
        }
        return {"QIT": pdr.DataFrameSchema(qit, strict=True), "ST": pdr.DataFrameSchema(st, strict=True)}


# verify: per group, QIT's size against ST's counts, in runs of group ids (verify chunks on the task
# runner). A run holds QIT's group ids of its range (the QI cells are not needed) and ST's rows of
# those groups, about `[run] chunk_rows` QIT rows; the combine keeps one figure per run.
@dataclass
class AnatomyChunk:
    gid: np.ndarray  # QIT's group id of every row of the run's groups
    st: CompactTable  # ST's rows (gid, sensitive value, count) of the run's groups
    sensitive: str


def anatomy_chunks(release: Release, sensitive: str, chunk_rows: int) -> list[AnatomyChunk]:
    """Runs of whole groups: a run starts at the group of every chunk_rows-th QIT row (in group
    order), and takes the ST rows of its group ids."""
    qit_gid = np.sort(release.tables["QIT"].column("gid").to_numpy())
    st = release.tables["ST"].select(["gid", sensitive, "count"])
    st_gid = st.column("gid").to_numpy()
    order = np.argsort(st_gid, kind="stable")
    st, st_gid = st.take(pa.array(order)), st_gid[order]
    cuts = np.unique(qit_gid[chunk_rows::chunk_rows])
    qit_at = np.concatenate([[0], np.searchsorted(qit_gid, cuts), [len(qit_gid)]])
    st_at = np.concatenate([[0], np.searchsorted(st_gid, cuts), [len(st_gid)]])
    return [
        AnatomyChunk(qit_gid[a:b], CompactTable(st.slice(c, d - c)), sensitive)
        for a, b, c, d in zip(qit_at[:-1], qit_at[1:], st_at[:-1], st_at[1:])
    ]


def anatomy_chunk_figures(chunk: AnatomyChunk) -> dict[str, Any]:
    """The run's groups: do QIT and ST agree on their sizes, the fewest distinct values (and the
    first group with them), the largest share of one value (and the first group with it)."""
    st = chunk.st.table.to_pandas()
    gids, counts = np.unique(chunk.gid, return_counts=True)
    size = pd.Series(counts.astype(np.int64), index=gids)
    st_size = st.groupby("gid")["count"].sum()
    consistent = size.sort_index().equals(st_size.sort_index().astype(size.dtype))
    distinct = st.groupby("gid")[chunk.sensitive].nunique()
    top = st.groupby("gid")["count"].max()
    frac = (top / size.reindex(top.index)).dropna()
    fewest = (int(distinct.min()), int(distinct.idxmin())) if len(distinct) else None
    if len(frac):
        g = int(frac.idxmax())
        worst = (float(frac[g]), int(top[g]), int(size[g]), g)
    else:
        worst = None
    return {"consistent": bool(consistent), "fewest": fewest, "worst": worst}


def anatomy_results(figures: list[dict[str, Any]], l: int) -> list[PrivacyResult]:
    """l-diversity and the 1/l attribute-disclosure bound from the runs' figures (in group
    order: among equal figures the first group wins, as in one pass over the groups)."""
    consistent = all(f["consistent"] for f in figures)
    fewest, g_least = min((f["fewest"] for f in figures if f["fewest"] is not None), key=lambda x: x[0])
    worst = max((f["worst"] for f in figures if f["worst"] is not None), key=lambda w: w[0], default=None)
    if worst is None:
        raise ValueError("ST names no group of QIT")
    _, top, size, g_worst = worst
    worst_frac = Fraction(top, size)
    return [
        PrivacyResult("QIT and ST agree on group sizes", consistent, True, consistent),
        PrivacyResult("l-diversity (distinct)", fewest, l, bool(fewest >= l), {"gid": g_least}),
        PrivacyResult(
            "attribute disclosure",
            str(worst_frac),
            str(Fraction(1, l)),
            bool(worst_frac <= Fraction(1, l)),
            {"gid": g_worst},
        ),
    ]


def verify_anatomy(release: Release, sensitive: str, l: int, chunk_rows: int | None = None) -> list[PrivacyResult]:
    """l-diversity and the 1/l attribute-disclosure bound, read from QIT and ST only (every run
    in this process; one run unless chunk_rows is given)."""
    rows = chunk_rows or max(release.tables["QIT"].num_rows, 1)
    return anatomy_results([anatomy_chunk_figures(c) for c in anatomy_chunks(release, sensitive, rows)], l)

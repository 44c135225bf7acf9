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

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas.spec import ReleaseSpec
from tasks.anonymize.base import Partition, PrivacyResult, Release, Technique, register
from tasks.anonymize.muco import ColumnIndex
from tasks.microdata import Microdata


class AnatomyError(ValueError):
    """The table is not l-eligible."""


def anatomy_groups(sensitive_codes: np.ndarray, l: int, rng: np.random.Generator) -> np.ndarray:
    """A group id per row, following Xiao and Tao's group-creation step."""
    n = len(sensitive_codes)
    counts = np.bincount(sensitive_codes)
    if n == 0 or counts.max() * l > n:
        top = int(counts.max()) if n else 0
        raise AnatomyError(f"Anatomy with l = {l} needs every sensitive value in at most n/l = {n / l:.1f} "
                           f"rows; the most frequent value has {top}")
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
            rows = order[start[v] + counts[v] - left[v]: start[v] + counts[v] - left[v] + alpha]
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
    parameters = ("l",)
    table_names = ("QIT", "ST")

    def check_params(self) -> None:
        self.l = self.int_param("l", None, minimum=2)
        if self.l is None:
            from schemas.spec import SpecError

            raise SpecError("[technique] anatomy needs l (an integer >= 2)")

    def check_data(self, data: Microdata) -> None:
        counts = np.bincount(data.sensitive_codes)
        if counts.max() * self.l > data.n:
            raise AnatomyError(f"the table is not {self.l}-eligible: a sensitive value occurs in "
                               f"{counts.max()} of {data.n} rows (more than n/l)")

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        self.check_data(data)
        group = anatomy_groups(data.sensitive_codes, self.l, rng)
        return Partition(group=group, n_groups=int(group.max()) + 1, info={"partitioner": "anatomy"})

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        perm = rng.permutation(data.n)
        qit = {name: pa.array(data.frame[name].to_numpy()[perm]) for name in data.qi_names}
        qit["gid"] = pa.array(part.group[perm])
        sens = data.spec.dataset.sensitive
        st = (pd.DataFrame({"gid": part.group, sens: data.frame[sens].to_numpy()})
              .groupby(["gid", sens], sort=True).size().rename("count").reset_index())
        st["count"] = st["count"].astype(np.int64)
        info = {"groups": int(part.n_groups), "min_group": int(part.sizes.min()),
                "max_group": int(part.sizes.max())}
        return Release({"QIT": pa.table(qit), "ST": pa.Table.from_pandas(st, preserve_index=False)},
                       {}, info)

    def verify(self, release: Release, context: dict[str, Any]) -> list[PrivacyResult]:
        return verify_anatomy(release, self.spec.dataset.sensitive, self.l)

    def _bucket_stats(self, release: Release):
        qit = release.tables["QIT"].to_pandas()
        st = release.tables["ST"].to_pandas()
        size = qit.groupby("gid").size()
        return qit, st, size

    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """Each matching QIT row holds value v with probability count(gid, v) / |gid|: one
        weighted copy of a QIT row per value its group holds, grouped by value once."""
        from tasks.evaluate.counting import QueryAnswers, arrow_codes, arrow_plain_column

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

    def table_schemas(self, data_spec: ReleaseSpec) -> dict[str, Any]:
        import pandera.pandas as pdr

        ds = data_spec.dataset
        qit = {name: pdr.Column(nullable=False) for name in ds.qi_names}
        qit["gid"] = pdr.Column(int, pdr.Check.ge(0))
        st = {"gid": pdr.Column(int, pdr.Check.ge(0)), ds.sensitive: pdr.Column(nullable=False),
              "count": pdr.Column(int, pdr.Check.ge(1))}
        return {"QIT": pdr.DataFrameSchema(qit, strict=True), "ST": pdr.DataFrameSchema(st, strict=True)}


def verify_anatomy(release: Release, sensitive: str, l: int) -> list[PrivacyResult]:
    """l-diversity and the 1/l attribute-disclosure bound, read from QIT and ST only."""
    qit = release.tables["QIT"].to_pandas()
    st = release.tables["ST"].to_pandas()
    size = qit.groupby("gid").size()
    st_size = st.groupby("gid")["count"].sum()
    consistent = size.sort_index().equals(st_size.sort_index().astype(size.dtype))
    distinct = st.groupby("gid")[sensitive].nunique()
    top = st.groupby("gid")["count"].max()
    frac = top / size.reindex(top.index)
    g_worst = int(frac.idxmax())
    worst_frac = Fraction(int(top[g_worst]), int(size[g_worst]))
    return [
        PrivacyResult("QIT and ST agree on group sizes", bool(consistent), True, bool(consistent)),
        PrivacyResult("l-diversity (distinct)", int(distinct.min()), l, bool(distinct.min() >= l),
                      {"gid": int(distinct.idxmin())}),
        PrivacyResult("attribute disclosure", str(worst_frac), str(Fraction(1, l)),
                      bool(worst_frac <= Fraction(1, l)), {"gid": g_worst}),
    ]

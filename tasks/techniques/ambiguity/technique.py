"""Technique `ambiguity` (Wang, JCST 2010): one duplicate-free AT_<qi>(<qi>, gid) per QI and
ST(gid, <sensitive>, count), so QI values are published exactly but their combinations are lost.

Construction (Section 7), near-linear instead of the paper's quadratic pick():
- Step 1: sensitive buckets hold their row ids in a random order (one array, one slice per
  bucket, a head pointer per bucket); QI "buckets" are not materialised: a group's coverage is
  a stamp per (QI, value) in one flat array, so "is this value new to the group" is one lookup.
- Step 2: a group takes one tuple from each of the ceil(1/beta) largest sensitive buckets, each
  the best of the next `window` candidates of its bucket by how much it lowers the presence
  probability |G| / prod_i k_i (sum over new values of log((k_i + 1) / k_i)); then tuples from
  the next largest buckets until |G| / prod_i k_i <= alpha. Cost O(n * window * m).
- Step 3: a residue goes to a group that lacks its sensitive value and stays within alpha
  (checked exactly); a residue that fits nowhere is suppressed (group -1) and counted.
Every sensitive value occurs at most once per group, so c / |G| <= 1 / ceil(1/beta) <= beta.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from math import ceil, prod
from typing import Any

import numpy as np
import numpy.typing as npt
import pandera.pandas as pa_schema
import pyarrow as pa

from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Capabilities, Description, Technique, find_result
from privpub.tasks.core.types import Partition, PrivacyResult, Release
from privpub.tasks.evaluate.workload import CountQuery, RangeCond, SetCond
from privpub.tasks.report.figures import fmt
from privpub.tasks.risk import st_attribute_risk
from privpub.tasks.techniques.ambiguity.association import ambiguity_association_part
from privpub.tasks.techniques.ambiguity.group_chunks import GroupChunk, GroupChunkedVerify, Worst
from privpub.tasks.techniques.ambiguity.params import DEFAULT_WINDOW, AmbiguityParams
from privpub.tasks.techniques.ambiguity.presence import ambiguity_presence_part
from privpub.tasks.techniques.registry import register

RESIDUE_TRIES = 256  # groups tried per residue before it is suppressed


def diversity(beta: Fraction) -> int:
    """ceil(1/beta): distinct sensitive values per group so that c / |G| <= beta."""
    return ceil(1 / beta)


# --- Step 1 + 2 -----------------------------------------------------------------------------------


class Buckets:
    """Row ids grouped by a key, in random order; `take(b, j)` removes the j-th remaining row."""

    def __init__(self, keys: np.ndarray, n_keys: int, rng: np.random.Generator):
        order = rng.permutation(len(keys))
        self.pool = order[np.argsort(keys[order], kind="stable")]
        bounds = np.concatenate(([0], np.cumsum(np.bincount(keys, minlength=n_keys))))
        self.head = bounds[:-1].copy()
        self.end = bounds[1:]
        self.remaining = self.end - self.head

    def window(self, b: int, w: int) -> np.ndarray:
        h = self.head[b]
        return self.pool[h : min(h + w, self.end[b])]

    def take(self, b: int, j: int) -> int:
        h = self.head[b]
        row = self.pool[h + j]
        self.pool[h + j] = self.pool[h]
        self.pool[h] = row
        self.head[b] += 1
        self.remaining[b] -= 1
        return int(row)

    def rest(self) -> np.ndarray:
        return (
            np.concatenate([self.pool[h:e] for h, e in zip(self.head, self.end)])
            if len(self.head)
            else np.zeros(0, np.int64)
        )


class Coverage:
    """Which (QI, value) pairs the group under construction holds, by stamping a flat array."""

    def __init__(self, codes: np.ndarray):
        sizes = codes.max(axis=0).astype(np.int64) + 1 if len(codes) else np.zeros(codes.shape[1], np.int64)
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        self.flat = codes.astype(np.int64) + offsets
        self.mark = np.zeros(int(sizes.sum()), np.int64)
        self.stamp = 0
        self.k = np.zeros(codes.shape[1], np.int64)

    def new_group(self) -> None:
        self.stamp += 1
        self.k[:] = 0

    def best(self, cands: np.ndarray) -> int:
        """Index of the candidate that lowers |G| / prod k_i the most (first on ties)."""
        if len(cands) == 1 or not self.k.any():
            return 0
        new = self.mark[self.flat[cands]] != self.stamp
        return int(np.argmax(new @ np.log1p(1.0 / np.maximum(self.k, 1))))

    def add(self, row: int) -> None:
        cells = self.flat[row]
        self.k += self.mark[cells] != self.stamp
        self.mark[cells] = self.stamp


def within(size: int, denominator: int, p: Fraction) -> bool:
    """size / denominator <= p, exactly."""
    return size * p.denominator <= p.numerator * denominator


def greedy_groups(
    codes: np.ndarray,
    s_codes: np.ndarray,
    alpha: Fraction,
    beta: Fraction,
    rng: np.random.Generator,
    window: int = DEFAULT_WINDOW,
) -> tuple[np.ndarray, int, dict[str, int]]:
    """Steps 1-3. Returns (group per row, -1 = suppressed; number of groups; counts)."""
    n = len(s_codes)
    ell = diversity(beta)
    n_s = int(s_codes.max()) + 1 if n else 0
    buckets = Buckets(s_codes, n_s, rng)
    cov = Coverage(codes)
    group = np.full(n, -1, np.int64)
    failed: list[int] = []
    n_groups = 0
    while np.count_nonzero(buckets.remaining) >= ell:
        cov.new_group()
        ranked = np.argsort(-buckets.remaining, kind="stable")  # largest buckets first
        members: list[int] = []
        for b in ranked:
            if len(members) >= ell and within(len(members), prod(cov.k.tolist()), alpha):
                break
            if buckets.remaining[b] == 0:
                break  # ranked is sorted: no bucket left for this group
            cands = buckets.window(b, window)
            row = buckets.take(b, cov.best(cands))
            cov.add(row)
            members.append(row)
        if len(members) >= ell and within(len(members), prod(cov.k.tolist()), alpha):
            group[members] = n_groups
            n_groups += 1
        else:
            failed.extend(members)  # even every remaining bucket could not hide presence
    residues = np.concatenate([buckets.rest(), np.asarray(failed, np.int64)])
    placed = place_residues(codes, s_codes, group, n_groups, residues[rng.permutation(len(residues))], alpha, rng)
    info = {
        "groups": n_groups,
        "residues": int(len(residues)),
        "residues_placed": placed,
        "suppressed": int(len(residues) - placed),
        "failed_group_rows": len(failed),
    }
    return group, n_groups, info


# --- Step 3 ---------------------------------------------------------------------------------------


def place_residues(
    codes: np.ndarray,
    s_codes: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    residues: np.ndarray,
    alpha: Fraction,
    rng: np.random.Generator,
) -> int:
    """Put each residue into a group without its sensitive value that stays within alpha."""
    if len(residues) == 0 or n_groups == 0:
        return 0
    assigned = np.flatnonzero(group >= 0)
    by_group = assigned[np.argsort(group[assigned], kind="stable")]
    sizes = np.bincount(group[assigned], minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(sizes)))
    members: dict[int, np.ndarray] = {}  # group -> rows added in this step
    k = np.zeros((n_groups, codes.shape[1]), np.int64)
    for j in range(codes.shape[1]):
        pairs = np.unique(group[assigned] * (int(codes[:, j].max()) + 1) + codes[assigned, j])
        k[:, j] = np.bincount(pairs // (int(codes[:, j].max()) + 1), minlength=n_groups)
    lacking: dict[int, list[int]] = {}
    placed = 0
    for r in residues.tolist():
        s = int(s_codes[r])
        if s not in lacking:
            has = np.zeros(n_groups, bool)
            has[group[assigned][s_codes[assigned] == s]] = True
            lacking[s] = rng.permutation(np.flatnonzero(~has)).tolist()
        cands = lacking[s]
        for pos, g in enumerate(cands[:RESIDUE_TRIES]):
            rows = by_group[starts[g] : starts[g + 1]]
            if g in members:
                rows = np.concatenate([rows, members[g]])
            new = ~(codes[rows] == codes[r]).any(axis=0)
            if within(int(sizes[g]) + 1, prod((k[g] + new).tolist()), alpha):
                group[r] = g
                sizes[g] += 1
                k[g] += new
                members[g] = np.append(members.get(g, np.zeros(0, np.int64)), r)
                cands.pop(pos)  # the group now holds s
                placed += 1
                break
    return placed


# --- published tables -----------------------------------------------------------------------------


def value_array(data: Microdata, j: int, codes: np.ndarray) -> pa.Array:
    """Domain values of QI j for the given codes, typed like the input column."""
    dom = data.domains[j]
    vals = dom.values[codes]
    if dom.kind == "numeric":
        dtype = data.frame[dom.name].dtype  # validated: a numpy dtype, not a pandas extension one
        if isinstance(dtype, np.dtype) and np.issubdtype(dtype, np.integer):
            return pa.array(vals.astype(np.int64))
        return pa.array(vals.astype(float))
    return pa.array(vals.astype(str))


def sensitive_array(data: Microdata, s_codes: np.ndarray) -> pa.Array:
    vals = np.asarray(data.sensitive_values)[s_codes]
    return pa.array(vals.tolist())


def _gid_code_pairs(gid: np.ndarray, code: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (gid, code) pairs sorted by gid then code, and how often each occurs."""
    keys, counts = np.unique(gid * width + code, return_counts=True)
    return keys // width, keys % width, counts


def ambiguity_tables(data: Microdata, group: np.ndarray) -> dict[str, pa.Table]:
    kept = np.flatnonzero(group >= 0)
    gid = group[kept]
    tables = {}
    for j, dom in enumerate(data.domains):
        g, c, _ = _gid_code_pairs(gid, data.codes[kept, j].astype(np.int64), dom.size)
        tables[f"AT_{dom.name}"] = pa.table({dom.name: value_array(data, j, c), "gid": pa.array(g)})
    n_s = len(data.sensitive_values)
    g, s, cnt = _gid_code_pairs(gid, data.sensitive_codes[kept].astype(np.int64), max(n_s, 1))
    tables["ST"] = pa.table(
        {
            "gid": pa.array(g),
            data.spec.dataset.sensitive: sensitive_array(data, s),
            "count": pa.array(cnt.astype(np.int64)),
        }
    )
    return tables


# --- Fig. 5 estimation ----------------------------------------------------------------------------


def condition_mask(cond: RangeCond | SetCond, values: np.ndarray) -> npt.NDArray[np.bool_]:
    """Which published values satisfy a workload condition (ranges on numbers, sets on text)."""
    if isinstance(cond, RangeCond):
        v = values.astype(float)
        return (v >= cond.lo) & (v <= cond.hi)
    return np.isin(values.astype(str), np.array(sorted(cond.values), dtype=str))


def dictionary_codes(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, index of each row's value) of a column, by Arrow's hash encoder:
    sorting object arrays with numpy costs ~100x more."""
    enc = table.column(name).combine_chunks().dictionary_encode()
    return (enc.dictionary.to_numpy(zero_copy_only=False), enc.indices.to_numpy(zero_copy_only=False).astype(np.int64))


def rows_by_value(table: pa.Table, name: str) -> dict[Any, np.ndarray]:
    """Row indices per distinct value of a column (one pass instead of a scan per query)."""
    uniq, inv = dictionary_codes(table, name)
    order = np.argsort(inv, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(inv, minlength=len(uniq)))))
    return {u.item() if hasattr(u, "item") else u: order[bounds[i] : bounds[i + 1]] for i, u in enumerate(uniq)}


class GidIndex:
    """Dense indexes 0..G-1 for the group ids of a release."""

    def __init__(self, *gid_arrays: np.ndarray):
        self.gid = np.unique(np.concatenate(gid_arrays))

    def __call__(self, gids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.gid, gids)

    def __len__(self) -> int:
        return len(self.gid)


def column_np(table: pa.Table, name: str) -> np.ndarray:
    column: np.ndarray = table.column(name).to_numpy(zero_copy_only=False)  # pyarrow is untyped
    return column


def ambiguity_estimates(tables: Mapping[str, pa.Table], sensitive: str, workload: list[CountQuery]) -> np.ndarray:
    """Per query: sum over groups with S = v of c x prod_i l_ij / k_ij (conditioned QIs only)."""
    st = tables["ST"]
    ats = {name[3:]: t for name, t in tables.items() if name.startswith("AT_")}
    index = GidIndex(column_np(st, "gid"), *(column_np(t, "gid") for t in ats.values()))
    st_g = index(column_np(st, "gid"))
    by_s = rows_by_value(st, sensitive)
    st_c = column_np(st, "count").astype(float)
    at_cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    frac_cache: dict[tuple[str, Any], np.ndarray] = {}

    def at_parts(qi: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if qi not in at_cache:
            t = ats[qi]
            g = index(column_np(t, "gid"))
            uniq, inv = dictionary_codes(t, qi)
            at_cache[qi] = (g, uniq, inv, np.bincount(g, minlength=len(index)).astype(float))
        return at_cache[qi]

    def fraction(qi: str, cond: RangeCond | SetCond) -> np.ndarray:
        key = (qi, cond)
        if key not in frac_cache:
            g, uniq, inv, k = at_parts(qi)
            hit = condition_mask(cond, uniq)[inv]
            l = np.bincount(g[hit], minlength=len(index))
            frac_cache[key] = l / np.where(k > 0, k, 1.0)
        return frac_cache[key]

    out = np.zeros(len(workload))
    for i, q in enumerate(workload):
        rows = by_s.get(q.sensitive_value, np.zeros(0, np.int64))
        est = st_c[rows]
        for qi, cond in q.conditions:
            est = est * fraction(qi, cond)[st_g[rows]]
        out[i] = est.sum()
    return out


# --- the plug-in ----------------------------------------------------------------------------------


@register
class Ambiguity(GroupChunkedVerify, Technique):
    name = "ambiguity"
    Params = AmbiguityParams
    params: AmbiguityParams
    capabilities = Capabilities(
        randomized=True,  # its groups are drawn at random
        risk_note=(
            "Ambiguity publishes each quasi-identifier's values unchanged (one AT table per QI) but "
            "not their combinations, and no table has a row per person: equivalence-class figures "
            "(prosecutor risk, uniques) do not apply to the release, and none is shown. Identity "
            "disclosure is bounded by alpha-presence instead (the probability that a person is in "
            "the table at all, in the privacy table). Attribute disclosure: ST shows each group's "
            "sensitive values as counts; attribute-risk-max is a group's largest count over its size "
            "(at most beta), the chance of naming a person's value once they are linked to their group."
        ),
    )
    # per release, not per class: ST plus AT_<qi> per QI of the spec (check_params), where the
    # contract declares a class variable
    table_names: tuple[str, ...] = ("ST",)  # type: ignore[misc]

    def check_params(self) -> None:
        self.table_names = tuple(f"AT_{q}" for q in self.spec.dataset.qi_names) + ("ST",)

    def check_data(self, data: Microdata) -> None:
        ell = diversity(self.params.beta)
        if len(data.sensitive_values) < ell:
            raise ValueError(
                f"beta = {self.params.beta} needs {ell} distinct sensitive values per group, "
                f"the table has {len(data.sensitive_values)}"
            )

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        group, n_groups, info = greedy_groups(
            data.codes, data.sensitive_codes, self.params.alpha, self.params.beta, rng, self.params.window
        )
        return Partition(group, n_groups, info=info)

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        tables = ambiguity_tables(data, part.group)
        info = {
            "groups": part.n_groups,
            "suppressed": int(np.count_nonzero(part.group < 0)),
            **{k: v for k, v in part.info.items() if k not in ("groups", "suppressed")},
        }
        return Release(tables, info=info)

    # verify: alpha-presence and beta-association per group, in chunks of group ids
    # (GroupChunkedVerify: one step up to [run] chunk_rows published rows)
    def verified_tables(self, release: Release) -> dict[str, pa.Table]:
        return {name: release.tables[name] for name in self.table_names}

    def check_chunk(self, chunk: GroupChunk) -> list[Worst]:
        ats = {q: chunk.tables[f"AT_{q}"] for q in self.spec.dataset.qi_names}
        st = chunk.tables["ST"]
        return [
            ambiguity_presence_part(ats, st, self.params.alpha),
            ambiguity_association_part(st, self.spec.dataset.sensitive, self.params.beta, chunk.rows["ST"]),
        ]

    def estimate_counts(self, release: Release, workload: list[CountQuery]) -> np.ndarray:
        return ambiguity_estimates(release.tables, self.spec.dataset.sensitive, workload)

    def quality_view(self, release: Release) -> str:
        return "Ambiguity publishes each QI in a table of its own per group (AT_<column>), not a row per record: its classes and cells are not one per record (not yet read as boxes)"

    def group_sizes(self, release: Release) -> np.ndarray:
        st = release.tables["ST"]
        _, inv = np.unique(column_np(st, "gid"), return_inverse=True)
        return np.bincount(inv, weights=column_np(st, "count")).astype(np.int64)

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        return describe_groups(
            "each quasi-identifier's values unchanged in a table of its own (AT_<column>), not their combinations",
            privacy,
            sensitive,
        )

    def attribute_risk(self, release: Release) -> float | None:
        return st_attribute_risk(release.tables["ST"], self.spec.dataset.sensitive)

    def attribute_table(self, release: Release) -> tuple[Any, list[str], str | None] | None:
        return release.tables["ST"], ["gid"], "count"

    def table_schemas(self, spec: ReleaseSpec) -> dict[str, Any]:
        ds = spec.dataset
        out = {
            f"AT_{q.name}": pa_schema.DataFrameSchema(
                {q.name: pa_schema.Column(nullable=False), "gid": gid_column()}, unique=[q.name, "gid"], strict=True
            )
            for q in ds.qi
        }
        out["ST"] = sensitive_table_schema([ds.sensitive])
        return out


def describe_groups(tables: str, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
    """The report's words of an Ambiguity or PriView release: what its tables publish of the
    quasi-identifiers (`tables`), the sensitive values only per group, and the alpha-presence
    and beta-association figures when computed."""
    al, be = find_result(privacy, "alpha-presence"), find_result(privacy, "beta-association")
    return Description(
        sentences=(
            f"The release publishes {tables}, and the {sensitive} values only per group (table ST)"
            + (
                f": the probability of telling that a person is in the data at all is at most "
                f"{fmt(al.threshold)} (alpha-presence {fmt(al.value)})"
                if al
                else ""
            )
            + (
                f", and of naming their {sensitive} value at most {fmt(be.threshold)} "
                f"(beta-association {fmt(be.value)})"
                if be
                else ""
            ),
        )
    )


def gid_column() -> pa_schema.Column:
    return pa_schema.Column("int64", checks=pa_schema.Check.ge(0), nullable=False, coerce=True)


def sensitive_table_schema(columns: list[str]) -> pa_schema.DataFrameSchema:
    """ST(gid, <columns>, count): one row per distinct combination in a group, count >= 1."""
    cols = {
        "gid": gid_column(),
        **{c: pa_schema.Column(nullable=False) for c in columns},
        "count": pa_schema.Column("int64", checks=pa_schema.Check.ge(1), coerce=True),
    }
    return pa_schema.DataFrameSchema(cols, unique=["gid", *columns], strict=True)

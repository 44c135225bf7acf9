"""Technique `priview` (Wang, JCST 2010, Section 8): AT(<m-1 QIs>, gid) with one row per person and
ST(gid, <QI'>, <sensitive>, count), for the split QI' that gives the smallest workload error.

The paper builds PriView groups like Ambiguity's and claims Pr(t in T) = 1/|G| and
Pr((t, s) | t) = c/|G| (Theorem 6). Under its own possible-world definition that is wrong: ST
shows QI' next to S, so for t = (a, q') the adversary only chooses among the n units of ST[G]
carrying q' (see tasks/verify/association.py), and a repeated AT row raises presence. With each
AT row unique in its group and each (q', s) at most once, the exact figures are
    Pr(t in T) = n_q' / |G|        Pr((t, s) | t) = 1 / n_q'
so a group is built from blocks: a block is ceil(1/beta) rows sharing one QI' value with distinct
sensitive values (bucketized on (QI', S), largest buckets first, as the paper's Section 8.3
says), and a group joins ceil(1/alpha) blocks of distinct QI' values. Rows of a group are
chosen so that their AT parts differ. Leftover blocks join groups lacking their QI' value;
leftover rows join a group only when the exact check still passes, else they are suppressed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from math import ceil
from typing import Any

import numpy as np
import numpy.typing as npt
import pandera.pandas as pa_schema
import pyarrow as pa

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Capabilities, Description, Technique
from privpub.tasks.core.types import Partition, PrivacyResult, Release
from privpub.tasks.evaluate.workload import CountQuery, RangeCond, SetCond, exact_answers, make_workload
from privpub.tasks.risk import st_attribute_risk
from privpub.tasks.techniques.ambiguity.association import priview_association_part
from privpub.tasks.techniques.ambiguity.group_chunks import GroupChunk, GroupChunkedVerify, Worst
from privpub.tasks.techniques.ambiguity.params import DEFAULT_WINDOW, PriViewParams
from privpub.tasks.techniques.ambiguity.presence import labeled_association, labeled_presence, priview_presence_part
from privpub.tasks.techniques.ambiguity.technique import (
    RESIDUE_TRIES,
    Buckets,
    GidIndex,
    column_np,
    condition_mask,
    describe_groups,
    dictionary_codes,
    diversity,
    gid_column,
    rows_by_value,
    sensitive_array,
    value_array,
)
from privpub.tasks.techniques.registry import register


def row_ids(codes: np.ndarray) -> np.ndarray:
    """An id per distinct row of `codes` (equal rows, equal ids)."""
    if codes.shape[1] == 0:
        return np.zeros(len(codes), np.int64)
    return np.unique(codes, axis=0, return_inverse=True)[1].ravel().astype(np.int64)


class Split:
    """Codes seen through one split: the QI' code, the sensitive code and an AT-row id."""

    def __init__(self, codes: np.ndarray, s_codes: np.ndarray, j: int):
        self.q = codes[:, j].astype(np.int64)
        self.s = s_codes.astype(np.int64)
        self.at = row_ids(np.delete(codes, j, axis=1))
        self.n_q = int(self.q.max()) + 1 if len(self.q) else 0
        self.n_s = int(self.s.max()) + 1 if len(self.s) else 0

    def group_ok(self, rows: np.ndarray, alpha: Fraction, beta: Fraction) -> bool:
        """The exact check of tasks/verify for one group, from its rows."""
        g = len(rows)
        m_max = int(np.bincount(np.unique(self.at[rows], return_inverse=True)[1]).max())
        pair, c = np.unique(self.q[rows] * self.n_s + self.s[rows], return_counts=True)
        n_of_q = np.bincount(self.q[rows], minlength=self.n_q)
        if m_max > 1 and c.max() > 1:
            return False  # the verifier would need the distinct-relations count: avoid
        if labeled_presence(g, int(n_of_q.max()), m_max) > alpha or Fraction(1, len(pair)) > alpha:
            return False
        for qs, cnt in zip(pair.tolist(), c.tolist()):
            n = int(n_of_q[qs // self.n_s])
            if Fraction(cnt, g) > beta or any(labeled_association(g, cnt, n, m) > beta for m in range(1, m_max + 1)):
                return False
        return True


class _Blocks:
    """Blocks of one split: `ell` rows sharing one QI' value with distinct sensitive values, taken
    from the (QI', S) buckets with the most rows left, each row's AT part differing from those
    marked with the current group's stamp."""

    def __init__(self, sp: Split, ell: int, rng: np.random.Generator, window: int):
        self.sp, self.ell, self.window = sp, ell, window
        self.buckets = Buckets(sp.q * sp.n_s + sp.s, sp.n_q * sp.n_s, rng)
        self.rem = self.buckets.remaining.reshape(sp.n_q, sp.n_s)  # a view: takes update it
        self.mark = np.zeros(int(sp.at.max()) + 1 if len(sp.s) else 1, np.int64)
        self.stamp = 0

    def block(self, v: int) -> list[int]:
        rows = []
        for s in np.argsort(-self.rem[v], kind="stable")[: self.ell]:
            b = v * self.sp.n_s + int(s)
            cands = self.buckets.window(b, self.window)
            fresh = np.flatnonzero(self.mark[self.sp.at[cands]] != self.stamp)
            row = self.buckets.take(b, int(fresh[0]) if len(fresh) else 0)
            self.mark[self.sp.at[row]] = self.stamp
            rows.append(row)
        return rows

    def can_block(self) -> npt.NDArray[np.bool_]:
        """Per QI' value: enough distinct sensitive values left for a block."""
        enough: npt.NDArray[np.bool_] = np.count_nonzero(self.rem, axis=1) >= self.ell
        return enough


def _full_groups(blocks: _Blocks, K: int) -> tuple[list[list[int]], list[set[int]]]:
    """Step 2: groups of K blocks of distinct QI' values, largest values first (rows, values)."""
    members: list[list[int]] = []
    values: list[set[int]] = []
    while True:
        avail = np.flatnonzero(blocks.can_block())
        if len(avail) < K:
            break
        chosen = avail[np.argsort(-blocks.rem[avail].sum(axis=1), kind="stable")[:K]]
        blocks.stamp += 1
        members.append([r for v in chosen.tolist() for r in blocks.block(v)])
        values.append(set(chosen.tolist()))
    return members, values


def _add_leftover_blocks(
    blocks: _Blocks,
    members: list[list[int]],
    values: list[set[int]],
    group: npt.NDArray[np.int64],
    order: list[int],
    alpha: Fraction,
    beta: Fraction,
) -> None:
    """Leftover blocks join groups (in `order`) that lack their value when the exact check
    passes; a refused block's rows are given back as residues (group -2)."""
    sp = blocks.sp
    for v in np.flatnonzero(blocks.can_block()).tolist():
        for g in order:
            if not blocks.can_block()[v]:
                break
            if v in values[g]:
                continue
            blocks.stamp += 1
            blocks.mark[sp.at[members[g]]] = blocks.stamp
            rows = blocks.block(v)
            if sp.group_ok(np.asarray(members[g] + rows), alpha, beta):
                members[g].extend(rows)
                values[g].add(v)
            else:
                group[rows] = -2


def _number_groups(
    sp: Split,
    members: list[list[int]],
    values: list[set[int]],
    group: npt.NDArray[np.int64],
    alpha: Fraction,
    beta: Fraction,
) -> None:
    """Groups whose AT rows could not all differ are checked exactly and a failing one is
    dissolved (its rows -2, residues); every row of the others gets its group's number."""
    for g, rows in enumerate(members):
        if len(set(sp.at[rows].tolist())) < len(rows) and not sp.group_ok(np.asarray(rows), alpha, beta):
            group[rows] = -2
            members[g], values[g] = [], set()
    for g, rows in enumerate(members):
        group[rows] = g


def _renumbered(members: list[list[int]], group: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], int]:
    """The groups that survived numbered 0.. (-1 stays -1); their count."""
    alive = np.flatnonzero([len(m) > 0 for m in members])
    remap = np.full(len(members) + 1, -1, np.int64)
    remap[alive] = np.arange(len(alive))
    return remap[group], int(len(alive))  # -1 maps through the extra last slot


def block_groups(
    codes: np.ndarray,
    s_codes: np.ndarray,
    j: int,
    alpha: Fraction,
    beta: Fraction,
    rng: np.random.Generator,
    window: int = DEFAULT_WINDOW,
) -> tuple[npt.NDArray[np.int64], int, dict[str, int]]:
    """QI-groups of ceil(1/alpha) blocks; returns (group per row, -1 = suppressed; count; info)."""
    sp = Split(codes, s_codes, j)
    K = max(1, ceil(1 / alpha))
    blocks = _Blocks(sp, diversity(beta), rng, window)
    group = np.full(len(s_codes), -1, np.int64)
    members, values = _full_groups(blocks, K)
    order = rng.permutation(len(members)).tolist() if members else []
    _add_leftover_blocks(blocks, members, values, group, order, alpha, beta)
    _number_groups(sp, members, values, group, alpha, beta)
    # Step 3: residues into groups that hold their QI' value, if the exact check passes
    residues = np.concatenate([blocks.buckets.rest(), np.flatnonzero(group == -2)])
    group[group == -2] = -1
    residues = residues[group[residues] < 0]
    placed = place_priview_residues(sp, members, values, residues[rng.permutation(len(residues))], alpha, beta, group)
    group, n_groups = _renumbered(members, group)
    info = {
        "groups": n_groups,
        "residues": int(len(residues)),
        "residues_placed": placed,
        "suppressed": int(np.count_nonzero(group < 0)),
        "blocks_per_group": K,
        "block_size": blocks.ell,
    }
    return group, n_groups, info


def place_priview_residues(
    sp: Split,
    members: list[list[int]],
    values: list[set[int]],
    residues: np.ndarray,
    alpha: Fraction,
    beta: Fraction,
    group: np.ndarray,
) -> int:
    """Step 3 for PriView: a residue (q', s) may only join a group that already has q' rows
    without s (a lone q' row would be linked to s for certain), and must keep n_q'/|G| <= alpha.
    Groups are screened by these counts first; the exact check runs only on survivors."""
    size = [len(m) for m in members]
    n_v: dict[tuple[int, int], int] = {}
    pairs: set[tuple[int, int, int]] = set()
    for g, rows in enumerate(members):
        for r in rows:
            n_v[(g, int(sp.q[r]))] = n_v.get((g, int(sp.q[r])), 0) + 1
            pairs.add((g, int(sp.q[r]), int(sp.s[r])))

    def roomy(g: int, v: int) -> bool:
        return (n_v[(g, v)] + 1) * alpha.denominator <= alpha.numerator * (size[g] + 1)

    eligible: dict[int, list[int]] = {}
    placed = 0
    for r in residues.tolist():
        v, s = int(sp.q[r]), int(sp.s[r])
        if v not in eligible:
            eligible[v] = [g for g, vs in enumerate(values) if v in vs and roomy(g, v)]
        for g in eligible[v][:RESIDUE_TRIES]:
            if (g, v, s) in pairs or not sp.group_ok(np.asarray(members[g] + [r]), alpha, beta):
                continue
            members[g].append(r)
            group[r] = g
            size[g] += 1
            n_v[(g, v)] += 1
            pairs.add((g, v, s))
            if not roomy(g, v):
                eligible[v].remove(g)
            placed += 1
            break
    return placed


def priview_tables(data: Microdata, group: np.ndarray, j: int) -> dict[str, pa.Table]:
    kept = np.flatnonzero(group >= 0)
    at_idx = [i for i in range(len(data.domains)) if i != j]
    # sort AT rows by (gid, values) so their order says nothing about the pairing with ST
    keys = [data.codes[kept, i] for i in reversed(at_idx)] + [group[kept]]
    rows = kept[np.lexsort(keys)] if len(kept) else kept
    at = {data.domains[i].name: value_array(data, i, data.codes[rows, i]) for i in at_idx}
    at["gid"] = pa.array(group[rows])
    n_q, n_s = data.domains[j].size, max(len(data.sensitive_values), 1)
    key = (group[kept] * n_q + data.codes[kept, j]) * n_s + data.sensitive_codes[kept]
    uniq, cnt = np.unique(key, return_counts=True)
    st = {
        "gid": pa.array(uniq // (n_q * n_s)),
        data.domains[j].name: value_array(data, j, (uniq // n_s) % n_q),
        data.spec.dataset.sensitive: sensitive_array(data, uniq % n_s),
        "count": pa.array(cnt.astype(np.int64)),
    }
    return {"AT": pa.table(at), "ST": pa.table(st)}


def st_qi_of(st: pa.Table, sensitive: str) -> str:
    cols: list[str] = [c for c in st.column_names if c not in ("gid", sensitive, "count")]  # pyarrow is untyped
    if len(cols) != 1:
        raise ValueError(f"a PriView ST needs exactly one QI column, found {cols}")
    return cols[0]


def priview_estimates(tables: Mapping[str, pa.Table], sensitive: str, workload: list[CountQuery]) -> np.ndarray:
    """Fig. 5 over two tables: per group c x l / k, c from ST (S = v and the QI' condition),
    l / k the share of the group's AT rows meeting every AT condition."""
    at, st = tables["AT"], tables["ST"]
    st_qi = st_qi_of(st, sensitive)
    index = GidIndex(column_np(at, "gid"), column_np(st, "gid"))
    at_g = index(column_np(at, "gid"))
    k = np.bincount(at_g, minlength=len(index)).astype(float)
    st_g = index(column_np(st, "gid"))
    st_c = column_np(st, "count").astype(float)
    decoded: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    cache: dict[tuple[str, Any], np.ndarray] = {}

    def mask(col: str, cond: RangeCond | SetCond) -> np.ndarray:
        """Rows of AT (or of ST for QI') meeting a condition, evaluated on distinct values."""
        if col not in decoded:
            decoded[col] = dictionary_codes(st if col == st_qi else at, col)
        if (col, cond) not in cache:
            uniq, inv = decoded[col]
            cache[(col, cond)] = condition_mask(cond, uniq)[inv]
        return cache[(col, cond)]

    by_s = rows_by_value(st, sensitive)
    out = np.zeros(len(workload))
    for i, q in enumerate(workload):
        rows = by_s.get(q.sensitive_value, np.zeros(0, np.int64))
        c = st_c[rows]
        share = np.ones(len(index))
        at_conds = [(col, cond) for col, cond in q.conditions if col != st_qi]
        for col, cond in q.conditions:
            if col == st_qi:
                c = c * mask(col, cond)[rows]
        if at_conds:
            hit = np.logical_and.reduce([mask(col, cond) for col, cond in at_conds])
            share = np.bincount(at_g[hit], minlength=len(index)) / np.where(k > 0, k, 1.0)
        out[i] = float((c * share[st_g[rows]]).sum())
    return out


@register
class PriView(GroupChunkedVerify, Technique):
    name = "priview"
    Params = PriViewParams
    params: PriViewParams
    table_names = ("AT", "ST")
    capabilities = Capabilities(
        randomized=True,  # its groups are drawn at random
        risk_note=(
            "PriView publishes all but one quasi-identifier unchanged (AT, a row per person) and the "
            "last one beside the sensitive value (ST): equivalence-class figures of AT would count "
            "people who cannot be told apart in AT alone, which says little once ST is joined, so "
            "no identity figure is shown for the release; alpha-presence bounds identity disclosure "
            "(privacy table). Attribute disclosure: a person with ST's QI value q in group G is one of "
            "the units of G showing q; attribute-risk-max is the largest share of one sensitive value "
            "among them (at most beta)."
        ),
    )

    def check_params(self) -> None:
        st_qi = self.params.st_qi
        if st_qi is not None and st_qi not in self.spec.dataset.qi_names:
            raise SpecError(f"[technique] st_qi = {st_qi!r} is not a quasi-identifier")

    def check_data(self, data: Microdata) -> None:
        if len(data.domains) < 2:
            raise ValueError("PriView needs at least two quasi-identifiers (one goes to ST)")
        ell = diversity(self.params.beta)
        if len(data.sensitive_values) < ell:
            raise ValueError(
                f"beta = {self.params.beta} needs {ell} distinct sensitive values per QI' "
                f"value, the table has {len(data.sensitive_values)}"
            )

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        """Build every candidate split (or the fixed one) and keep the smallest workload error."""
        names = data.qi_names
        candidates = [names.index(self.params.st_qi)] if self.params.st_qi else list(range(len(names)))
        probe_rng, build_rng = rng.spawn(2)
        workload = make_workload(data, probe_rng, per_band=self.params.probe_queries)
        actual = exact_answers(data.frame, workload, data.spec.dataset.sensitive)
        best, errors = None, {}
        for j in candidates:
            group, n_groups, info = block_groups(
                data.codes, data.sensitive_codes, j, self.params.alpha, self.params.beta, build_rng, self.params.window
            )
            est = priview_estimates(priview_tables(data, group, j), data.spec.dataset.sensitive, workload)
            ok = actual > 0
            err = float(np.mean(np.abs(actual[ok] - est[ok]) / actual[ok])) if ok.any() else 0.0
            errors[names[j]] = {"error": err, "suppressed": info["suppressed"]}
            if best is None or err < best[0]:
                best = (err, j, group, n_groups, info)
        assert best is not None  # every candidate split was scored
        err, j, group, n_groups, info = best
        return Partition(group, n_groups, info={**info, "st_qi": names[j], "probe_error": err, "split_errors": errors})

    def composition_groups(self, data: Microdata, part: Partition) -> tuple[np.ndarray, int]:
        """ST shows each unit's QI' next to its value, so an adversary who knows a person's QI'
        keeps only the units of its group with that QI': the series check composes over
        (group, QI' value) pairs (tests/test_composition_oracle.py)."""
        q = data.codes[:, data.qi_names.index(part.info["st_qi"])].astype(np.int64)
        kept = part.group >= 0
        pairs, index = np.unique(part.group[kept] * (int(q.max()) + 1) + q[kept], return_inverse=True)
        group = np.full(len(q), -1, np.int64)
        group[kept] = index.ravel()
        return group, len(pairs)

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        j = data.qi_names.index(part.info["st_qi"])
        info = {**part.info, "groups": part.n_groups, "suppressed": int(np.count_nonzero(part.group < 0))}
        return Release(priview_tables(data, part.group, j), info=info)

    # verify: alpha-presence and beta-association per group, in chunks of group ids
    # (GroupChunkedVerify: one step up to [run] chunk_rows published rows)
    def verified_tables(self, release: Release) -> dict[str, pa.Table]:
        return {"AT": release.tables["AT"], "ST": release.tables["ST"]}

    def check_chunk(self, chunk: GroupChunk) -> list[Worst]:
        at, st = chunk.tables["AT"], chunk.tables["ST"]
        s = self.spec.dataset.sensitive
        st_qi = st_qi_of(st, s)
        return [
            priview_presence_part(at, st, st_qi, s, self.params.alpha),
            priview_association_part(at, st, st_qi, s, self.params.beta, chunk.rows["ST"]),
        ]

    def estimate_counts(self, release: Release, workload: list[CountQuery]) -> np.ndarray:
        return priview_estimates(release.tables, self.spec.dataset.sensitive, workload)

    def quality_view(self, release: Release) -> str:
        return "PriView publishes marginal views (AT and ST joined by group), not a row per record with all its QIs (not yet read as boxes)"

    def group_sizes(self, release: Release) -> np.ndarray:
        at = release.tables["AT"]
        _, counts = np.unique(column_np(at, "gid"), return_counts=True)
        return counts

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        return describe_groups(
            "all quasi-identifiers but one unchanged (table AT), the last beside the sensitive values (ST)",
            privacy,
            sensitive,
        )

    def attribute_risk(self, release: Release) -> float | None:
        st = release.tables["ST"]
        sensitive = self.spec.dataset.sensitive
        return st_attribute_risk(st, sensitive, also=(st_qi_of(st, sensitive),))

    def attribute_table(self, release: Release) -> tuple[Any, list[str], str | None] | None:
        """A person with ST's QI value q in group G is one of the units of G showing q."""
        st = release.tables["ST"]
        return st, ["gid", st_qi_of(st, self.spec.dataset.sensitive)], "count"

    def table_schemas(self, spec: ReleaseSpec) -> dict[str, Any]:
        ds = spec.dataset
        qis = {q: pa_schema.Column(nullable=False, required=False) for q in ds.qi_names}
        one_qi = pa_schema.Check(
            lambda df: sum(q in df.columns for q in ds.qi_names) == 1, error="ST holds exactly one quasi-identifier"
        )
        at = pa_schema.DataFrameSchema({**qis, "gid": gid_column()}, strict=True)
        st = pa_schema.DataFrameSchema(
            {
                "gid": gid_column(),
                **qis,
                ds.sensitive: pa_schema.Column(nullable=False),
                "count": pa_schema.Column("int64", checks=pa_schema.Check.ge(1), coerce=True),
            },
            checks=[one_qi],
            strict=True,
        )
        return {"AT": at, "ST": st}

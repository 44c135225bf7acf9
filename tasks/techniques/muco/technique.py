"""MuCo, the mutual-cover technique (Li et al.): Algorithms 1 and 2.

1. Partition with Mondrian under distinct l-diversity, groups of at least ceil(1/delta) tuples
   (Property 1: a smaller group cannot meet delta).
2. For every group and QI, the optimal random output table (tables.py).
3. Each tuple draws its output value on each QI from its row of the table.
4. randomize_unchanged_tuples (Algorithm 2): a tuple whose QI values all came out unchanged gets
   one QI, chosen with weight dis_max(attr, group) / dis_max(attr, T), replaced by another value of
   its group. Replacements are drawn among the values whose column carries probability mass, so
   Corollary 3.2 still holds for every published cell; a tuple whose group offers no other such
   value on any QI cannot change and is reported.
5. Publish `table`: one row per input row in a random order, QIs perturbed, sensitive unchanged.
   The output tables and the row mapping are private metadata for the verifier.

Steps 2-4 are independent per group: they run per chunk of consecutive groups (Technique's
split_anonymize, a ChunkPlan), each chunk with its own generator spawned from
the release's seed sequence, so the flow can map them over a Dask task runner and the release is
the same on every runner. Step 5 (the shuffle and the tables) combines them in the flow process.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any, cast

import numpy as np
import pandas as pd
import pandera.pandas as pdr
import pyarrow as pa

from privpub.schemas.errors import PartitionError
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.compact_table import CompactTable
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Capabilities, Description, Technique, find_result
from privpub.tasks.core.types import (
    ChunkPlan,
    Partition,
    PrivacyResult,
    Release,
    UtilityEstimate,
    VerifyContext,
    chunk_bounds,
)
from privpub.tasks.evaluate.counting import count_in_table
from privpub.tasks.evaluate.workload import ColumnIndex, RangeCond, SetCond
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.report.figures import fmt
from privpub.tasks.risk import table_risk
from privpub.tasks.techniques.muco import delta_probability as dp
from privpub.tasks.techniques.muco.params import MuCoParams
from privpub.tasks.techniques.muco.tables import (
    ClassTables,
    Distance,
    MuCoError,
    concat_ranges,
    min_group_size,
    output_tables,
)
from privpub.tasks.techniques.registry import register

# --- drawing from the tables -----------------------------------------------------------------


def draw_outputs(t: ClassTables, rng: np.random.Generator) -> np.ndarray:
    """For every input row, the class (index into t.code) of its output value.

    Class rows lie back to back in t.q; key = class id + cumulative probability inside the row
    is increasing over the whole array, so one searchsorted draws every row at once.
    """
    n_cls = len(t.code)
    row_len = np.diff(t.ptr)[t.group_of_class()]
    row_id = np.repeat(np.arange(n_cls), row_len)
    cum = np.cumsum(t.q)
    start = np.repeat(cum[t.qptr] - t.q[t.qptr], row_len)
    within = cum - start
    within[t.qptr + row_len - 1] = 1.0  # absorb round-off: every row ends exactly at 1
    keys = row_id + within
    c = t.tuple_class
    pos = np.searchsorted(keys, c + rng.random(len(c)), side="right")
    pos = np.minimum(pos, t.qptr[c] + row_len[c] - 1)
    g_of = t.group_of_class()
    rows: np.ndarray = t.ptr[g_of[c]] + (pos - t.qptr[c])
    return rows


def column_mass(t: ClassTables) -> np.ndarray:
    """sum_i p_ik per class k (the expected number of tuples publishing class k's value)."""
    g_of = t.group_of_class()
    row_len = np.diff(t.ptr)[g_of]
    row_cls = np.repeat(np.arange(len(t.code)), row_len)
    col_cls = t.ptr[g_of[row_cls]] + (np.arange(len(t.q)) - np.repeat(t.qptr, row_len))
    mass: np.ndarray = np.bincount(col_cls, weights=t.q * t.weight[row_cls], minlength=len(t.code))
    return mass


def group_dis_max(t: ClassTables, dist: Distance) -> np.ndarray:
    """dis_max(attr, group) for every group."""
    n_groups = len(t.ptr) - 1
    if dist.matrix is not None:
        return np.array([dist.max_over(t.code[t.ptr[g] : t.ptr[g + 1]]) for g in range(n_groups)])
    n_g = np.diff(t.ptr)
    if dist.flat:
        return (n_g > 1).astype(float)
    pts = dist.points[t.code]  # classes are in code order: first and last are min and max
    spread: np.ndarray = pts[t.ptr[1:] - 1] - pts[t.ptr[:-1]]
    return spread


def randomize_unchanged(
    group: np.ndarray,
    tables: list[ClassTables],
    dists: list[Distance],
    totals: np.ndarray,
    out_cls: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2, vectorised, over the rows of `tables` (group: their group ids, numbered as in
    the tables; totals: dis_max(attr, T) per QI over the whole table). out_cls (n x d) is updated
    in place.

    The paper loops "pick a QI by weight, replace its value" until the tuple differs; we pick
    among the QIs that can change (weight > 0 and another positive-mass value in the group) and
    draw a value different from the original, so one step suffices.

    Returns (rows that were randomized, rows that cannot change).
    """
    n, d = out_cls.shape
    orig_cls = np.column_stack([t.tuple_class for t in tables])
    unchanged = np.flatnonzero((out_cls == orig_cls).all(axis=1))
    if not len(unchanged):
        return unchanged, unchanged
    g = group[unchanged]
    weights = np.zeros((len(unchanged), d))
    positive = []
    for a, (t, dist, total) in enumerate(zip(tables, dists, totals)):
        pos = column_mass(t) > 0
        positive.append(pos)
        n_pos = np.add.reduceat(pos.astype(np.int64), t.ptr[:-1]) if len(t.code) else np.zeros(0)
        n_pos = np.where(np.diff(t.ptr) > 0, n_pos, 0)
        others = n_pos[g] - pos[orig_cls[unchanged, a]]  # other values with mass in the group
        w = group_dis_max(t, dist)[g] / total if total > 0 else np.zeros(len(g))
        weights[:, a] = np.where(others > 0, w, 0.0)
    stuck = weights.sum(axis=1) <= 0
    movers = unchanged[~stuck]
    wm = weights[~stuck]
    cum = np.cumsum(wm, axis=1)
    # first QI whose cumulative weight exceeds r * total: zero-weight QIs are never picked
    pick = (cum <= rng.random(len(movers))[:, None] * cum[:, -1:]).sum(axis=1)
    pick = np.minimum(pick, d - 1)
    u = rng.random(len(movers))
    for a in range(d):
        sel = pick == a
        if not sel.any():
            continue
        t, pos = tables[a], positive[a]
        rows = movers[sel]
        gg = group[rows]
        # the positive classes of each group, listed group by group
        pos_cls = np.flatnonzero(pos)
        first = np.searchsorted(pos_cls, t.ptr[gg])
        count = np.searchsorted(pos_cls, t.ptr[gg + 1]) - first
        own = orig_cls[rows, a]
        own_pos = pos[own]
        k = np.floor(u[sel] * (count - own_pos)).astype(np.int64)  # uniform over the others
        own_rank = np.searchsorted(pos_cls, own) - first
        k = np.where(own_pos & (k >= own_rank), k + 1, k)
        out_cls[rows, a] = pos_cls[first + k]
    return movers, unchanged[stuck]


# --- chunks of groups: the per-group work, independent of every other chunk -----------------


@dataclass
class MuCoChunk:
    """Everything one chunk of consecutive groups needs (it may run in a Dask worker)."""

    index: int
    rows: np.ndarray  # input rows of the chunk, grouped by group
    group: np.ndarray  # group of each row, renumbered 0..n_groups-1 inside the chunk
    n_groups: int
    codes: np.ndarray  # (len(rows), d) QI codes
    seed: np.random.SeedSequence  # spawned from the release's stream for this chunk index
    dists: list[Distance]
    totals: np.ndarray  # dis_max(attr, T) per QI over the whole table (Algorithm 2's weights)
    delta: Fraction


@dataclass
class MuCoChunkResult:
    out_codes: np.ndarray  # (len(rows), d) published codes
    moved: np.ndarray  # chunk rows changed by Algorithm 2
    stuck: np.ndarray  # chunk rows Algorithm 2 cannot change
    entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per QI: (chunk row, code, p) with p > 0
    lp_cost: np.ndarray  # per QI
    seconds: dict[str, float]


_LP_POOL: list[ThreadPoolExecutor] = []
_LP_POOL_LOCK = threading.Lock()


def lp_pool() -> ThreadPoolExecutor:
    """One pool per process for the output-table LPs, shared by the chunks (which may themselves
    run on the executor's threads): at most one LP per core at a time."""
    with _LP_POOL_LOCK:
        if not _LP_POOL:
            _LP_POOL.append(ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="privpub-muco-lp"))
        return _LP_POOL[0]


def run_chunk(chunk: MuCoChunk) -> MuCoChunkResult:
    """Steps 2-4 for one chunk: output tables, draws, Algorithm 2, the stored-table entries."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(chunk.seed)
    # the QIs' LPs are independent and deterministic: solved side by side (HiGHS releases the
    # GIL), drawn from afterwards in QI order, so the release does not depend on the threads
    tables = list(
        lp_pool().map(
            lambda a: output_tables(chunk.group, chunk.n_groups, chunk.codes[:, a], chunk.dists[a], chunk.delta),
            range(len(chunk.dists)),
        )
    )
    t1 = time.perf_counter()
    out_cls = np.column_stack([draw_outputs(t, rng) for t in tables])
    moved, stuck = randomize_unchanged(chunk.group, tables, chunk.dists, chunk.totals, out_cls, rng)
    out_codes = np.column_stack([t.code[out_cls[:, a]] for a, t in enumerate(tables)])
    return MuCoChunkResult(
        out_codes,
        moved,
        stuck,
        [table_entries(t) for t in tables],
        np.array([t.cost.sum() for t in tables]),
        {"output_tables": t1 - t0, "draw": time.perf_counter() - t1},
    )


def table_entries(t: ClassTables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-zero entries of every tuple's row of P: (row, output code, probability)."""
    g_of = t.group_of_class()
    row_len = np.diff(t.ptr)[g_of]
    row_cls = np.repeat(np.arange(len(t.code)), row_len)
    col_cls = t.ptr[g_of[row_cls]] + (np.arange(len(t.q)) - np.repeat(t.qptr, row_len))
    nz = np.flatnonzero(t.q > 0)  # non-zero entries, grouped by row class
    nz_ptr = np.searchsorted(row_cls[nz], np.arange(len(t.code) + 1))
    order = np.argsort(t.tuple_class, kind="stable")  # rows grouped by class
    k = np.diff(nz_ptr)[t.tuple_class[order]]
    entry = nz[concat_ranges(nz_ptr[t.tuple_class[order]], k)]
    return np.repeat(order, k), t.code[col_cls[entry]], t.q[entry]


# --- the technique ---------------------------------------------------------------------------


@register
class MuCo(Technique):
    name = "muco"
    Params = MuCoParams
    params: MuCoParams
    table_names = ("table",)
    capabilities = Capabilities(
        randomized=True,  # its published QI values are drawn at random
        risk_note=(
            "MuCo publishes every record with its quasi-identifiers perturbed within its group (each "
            "published value stands for at least ceil(1/delta) records): classes of equal published "
            "values do not say whose record a row is, so no identity figure is shown for the release; "
            "the delta-probability check bounds identity disclosure (privacy table, with the "
            "identity and attribute disclosure of an adversary matching on the QIs). "
            "attribute-risk-max: over classes of rows with equal published quasi-identifiers, the "
            "largest share of one sensitive value, what an adversary matching a person's values "
            "exactly would guess."
        ),
    )

    def check_data(self, data: Microdata) -> None:
        need = min_group_size(self.params.delta)
        if data.n < need:
            raise MuCoError(
                f"{data.n} rows: delta = {self.params.delta} needs groups of at least "
                f"ceil(1/delta) = {need} tuples (Property 1)"
            )
        self.check_diversity(data, self.params.l)

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        self.check_data(data)
        try:
            part = mondrian_partition(data, min_group_size(self.params.delta), self.params.l)
        except PartitionError as exc:
            raise MuCoError(f"MuCo cannot partition this table: {exc}") from exc
        return part

    # every step in chunks: anonymize always (a chunk per run of whole QI-groups), verify and
    # evaluate unless the release is small (one_piece); the base class runs `anonymize` and
    # `verify` as these chunks one after the other
    def one_piece(self, release: Release) -> bool:
        """A release of at most chunk_rows rows is checked and evaluated in one step each."""
        rows: int = release.tables["table"].num_rows  # pyarrow is untyped
        return rows <= self.params.chunk_rows

    def split_anonymize(
        self, data: Microdata, part: Partition, rng: np.random.Generator
    ) -> ChunkPlan[MuCoChunk, MuCoChunkResult, Release]:
        need = min_group_size(self.params.delta)
        sizes = part.sizes
        if (sizes < need).any():
            raise MuCoError(
                f"a QI-group has {sizes.min()} tuples; delta = {self.params.delta} needs {need} (Property 1)"
            )
        bounds = chunk_bounds(sizes, self.params.chunk_rows)
        order = np.argsort(part.group, kind="stable")  # rows grouped by group
        first_row = np.concatenate([[0], np.cumsum(sizes)])
        dists = [Distance(dom) for dom in data.domains]
        totals = np.array([dist.max_over(data.codes[:, a]) for a, dist in enumerate(dists)])
        # one stream per chunk index, spawned from the release's seed sequence: the draws do not
        # depend on which worker runs a chunk, or when
        # (a SeedSequence: numpy types the attribute as its ISeedSequence interface)
        seeds = cast(np.random.SeedSequence, rng.bit_generator.seed_seq).spawn(len(bounds) - 1)
        chunks = []
        for i, (g_lo, g_hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            rows = order[first_row[g_lo] : first_row[g_hi]]
            chunks.append(
                MuCoChunk(
                    i,
                    rows,
                    part.group[rows] - g_lo,
                    int(g_hi - g_lo),
                    data.codes[rows],
                    seeds[i],
                    dists,
                    totals,
                    self.params.delta,
                )
            )
        return ChunkPlan(chunks, run_chunk, partial(self._combine_anonymize, data, part, chunks, rng))

    def _combine_anonymize(
        self,
        data: Microdata,
        part: Partition,
        chunks: list[MuCoChunk],
        rng: np.random.Generator,
        results: list[MuCoChunkResult],
    ) -> Release:
        t0 = time.perf_counter()
        out_codes = np.empty(data.codes.shape, dtype=np.int64)
        for c, r in zip(chunks, results):
            out_codes[c.rows] = r.out_codes
        moved = np.concatenate([c.rows[r.moved] for c, r in zip(chunks, results)])
        stuck = np.concatenate([c.rows[r.stuck] for c, r in zip(chunks, results)])

        perm = rng.permutation(data.n)  # published row i is input row perm[i]
        pub_row = np.empty(data.n, dtype=np.int64)
        pub_row[perm] = np.arange(data.n)
        table = publish_table(data, out_codes[perm], perm)
        private = {
            "delta": str(self.params.delta),
            "output_tables": stored_tables(data, part, chunks, results, pub_row),
            "value_codes": value_codes(data),
            "source_row": pa.table({"source_row": perm}),
            "unchangeable_rows": np.sort(pub_row[stuck]).tolist(),
        }
        cost = np.sum([r.lp_cost for r in results], axis=0)
        info = {
            "groups": int(part.n_groups),
            "min_group": int(part.sizes.min()),
            "max_group": int(part.sizes.max()),
            "randomized_unchanged": int(len(moved)),
            "unchangeable": int(len(stuck)),
            "chunks": len(chunks),
            "lp_cost": {d.name: float(c) for d, c in zip(data.domains, cost)},
            # summed over chunks (CPU-like when chunks ran in parallel)
            "seconds": {
                "output_tables": round(sum(r.seconds["output_tables"] for r in results), 3),
                "draw": round(sum(r.seconds["draw"] for r in results), 3),
                "combine": round(time.perf_counter() - t0, 3),
            },
        }
        return Release({"table": table}, private, info)

    def split_verify(
        self, release: Release, context: VerifyContext
    ) -> ChunkPlan[VerdictChunk | DisclosureChunk, list[Any], list[PrivacyResult]]:
        """The verdicts (one chunk), and with the original data (context["data"]) the Section 5.1
        figures in runs of QI subsets."""
        verdicts = verdict_chunk(release, self.spec)
        data = VerifyContext.of(context).data  # a plain mapping or None too (direct calls)
        if data is None:
            return ChunkPlan([verdicts], verify_piece, partial(_combine_verify, None))
        figures, subsets = disclosure_chunks(release, data)
        return ChunkPlan([verdicts, *figures], verify_piece, partial(_combine_verify, subsets))

    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """The published table holds plain (randomized) values: its own exact counts."""
        return count_chunk(CountChunk(CompactTable(release.tables["table"]), *self._count_args(workload)))

    def _count_args(self, workload: Any) -> tuple[list[str], str, Any]:
        used = sorted({name for q in workload for name, _ in q.conditions})
        return used, self.spec.dataset.sensitive, workload

    def estimate_sums(self, release: Release, queries: list[SumQuery]) -> np.ndarray:
        table = release.tables["table"].to_pandas()
        s = table[self.spec.dataset.sensitive].to_numpy(dtype=float)
        index = ColumnIndex(table)
        return np.array([float(s[index.mask(q.conditions)].sum()) for q in queries])

    def utility(self, release: Release, data: Microdata) -> dict[str, float]:
        """Figures the shared count workload does not cover (the flow may merge them)."""
        return {"iloss": iloss(release, data)}

    def split_utility(
        self, release: Release, data: Microdata, workload: Any
    ) -> ChunkPlan[CountChunk | ILossChunk, Any, UtilityEstimate]:
        """The workload's counts over runs of published rows (integer counts: their sum is the
        whole table's), and ILoss per run of QIs (each QI's cells whole, so the mean is the same
        sum in the same order)."""
        table = release.tables["table"]
        rows = max(1, -(-table.num_rows // UTILITY_CHUNKS))
        counts = [
            CountChunk(CompactTable(table.slice(lo, rows)), *self._count_args(workload))
            for lo in range(0, table.num_rows, rows)
        ]
        cells = iloss_inputs(release, data)
        qis = np.array_split(np.arange(len(cells)), min(UTILITY_CHUNKS, len(cells)))
        chunks = counts + [ILossChunk([cells[a] for a in run]) for run in qis]
        return ChunkPlan(chunks, utility_piece, partial(_combine_utility, len(workload), len(counts)))

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        dp = find_result(privacy, "delta-probability")
        cover = f"at least {math.ceil(1 / self.params.delta)} records"
        return Description(
            sentences=(
                "Every record is published with its quasi-identifiers perturbed within its group (MuCo): a published "
                f"value stands for {cover}"
                + (
                    f", so no published value can be tied to one original record with probability above "
                    f"{fmt(dp.threshold)} (delta-probability {fmt(dp.value)})"
                    if dp
                    else ""
                )
                + f"; the {sensitive} values are published as they are",
            )
        )

    def attribute_risk(self, release: Release) -> float | None:
        ds = self.spec.dataset
        return table_risk(release.tables["table"], ds.qi_names, ds.sensitive, threshold=1.0)["attribute-risk-max"]

    def attribute_table(self, release: Release) -> tuple[Any, list[str], str | None] | None:
        """Classes of rows with equal published QIs, as attribute_risk reads them."""
        return release.tables["table"], self.spec.dataset.qi_names, None

    def quality_view(self, release: Release) -> str:
        return (
            "MuCo publishes perturbed points, not generalized cells: a published value need not be the "
            "original, so widths, P(original | published) and a box read are undefined (its loss is iloss)"
        )

    def table_schemas(self, data_spec: ReleaseSpec) -> dict[str, Any]:
        ds = data_spec.dataset
        cols = {name: pdr.Column(nullable=False) for name in [*ds.qi_names, ds.sensitive]}
        return {"table": pdr.DataFrameSchema(cols, strict=True)}


def verify_piece(chunk: VerdictChunk | DisclosureChunk) -> list[PrivacyResult] | list[tuple[float, float]]:
    """One verify chunk: the verdicts, or the Section 5.1 means of a run of QI subsets."""
    if isinstance(chunk, VerdictChunk):
        return chunk.run()
    return dp.subset_means(chunk.inputs, chunk.subsets)


def _combine_verify(subsets: list[tuple[int, ...]] | None, results: list[list[Any]]) -> list[PrivacyResult]:
    """results: the verdicts, then each disclosure chunk's means (verify_piece's outputs)."""
    verdicts, *means = results
    if subsets is None:
        return verdicts
    # every subset, the whole set of QIs among them
    figures = dp.disclosure_figures(max(map(len, subsets)), subsets, [m for r in means for m in r])
    return verdicts + disclosure_results(figures)


def utility_piece(chunk: CountChunk | ILossChunk) -> np.ndarray | list[np.ndarray]:
    """One utility chunk: the workload's counts over a run of rows, or the ILoss cells of a run of QIs."""
    return count_chunk(chunk) if isinstance(chunk, CountChunk) else [iloss_cells(*c) for c in chunk.qis]


def _combine_utility(queries: int, n_counts: int, results: list[Any]) -> UtilityEstimate:
    """results: n_counts count arrays, then each ILoss chunk's list of cells (utility_piece's outputs)."""
    estimate = np.zeros(queries)
    for counts in results[:n_counts]:
        estimate = estimate + counts
    losses = [cells for r in results[n_counts:] for cells in r]
    return UtilityEstimate(estimate, {"iloss": float(np.mean(np.column_stack(losses)))})


def publish_table(data: Microdata, codes: np.ndarray, perm: np.ndarray) -> pa.Table:
    cols = {}
    for a, dom in enumerate(data.domains):
        values = dom.values[codes[:, a]]
        src = data.frame[dom.name]
        if dom.kind == "numeric" and pd.api.types.is_integer_dtype(src.dtype):
            values = values.astype(np.int64)
        cols[dom.name] = pa.array(values if dom.kind == "numeric" else values.astype(str))
    sens = data.spec.dataset.sensitive
    cols[sens] = pa.array(data.frame[sens].to_numpy()[perm])
    return pa.table(cols)


def stored_tables(
    data: Microdata, part: Partition, chunks: list[MuCoChunk], results: list[MuCoChunkResult], pub_row: np.ndarray
) -> pa.Table:
    """Long form of every table P: one row per (QI, tuple, output value) with p > 0."""
    parts = []
    for a, dom in enumerate(data.domains):
        rows = np.concatenate([c.rows[r.entries[a][0]] for c, r in zip(chunks, results)])
        parts.append(
            pa.table(
                {
                    "attribute": pa.array(np.full(len(rows), dom.name)),
                    "gid": pa.array(part.group[rows].astype(np.int32)),
                    "row": pa.array(pub_row[rows]),
                    "code": pa.array(np.concatenate([r.entries[a][1] for r in results]).astype(np.int32)),
                    "prob": pa.array(np.concatenate([r.entries[a][2] for r in results])),
                }
            )
        )
    return pa.concat_tables(parts)


def value_codes(data: Microdata) -> pa.Table:
    attrs, codes, values = [], [], []
    for dom in data.domains:
        attrs.append(np.full(dom.size, dom.name))
        codes.append(np.arange(dom.size, dtype=np.int32))
        values.append(dp.canonical(dom.values, dom.kind == "numeric"))
    return pa.table(
        {
            "attribute": np.concatenate(attrs),
            "code": np.concatenate(codes),
            "value": pa.array(np.concatenate(values).astype(str)),
        }
    )


# --- verification ----------------------------------------------------------------------------


@dataclass
class VerdictChunk:
    """The three verdicts: distributions, delta-probability and mutual cover, each a check of
    delta_probability (a module function, so it pickles) with its arguments. They run one after
    the other in one chunk: each reads the whole stored table (hundreds of MB as a pandas frame at
    a million rows), so side by side they would multiply the peak memory."""

    checks: list[tuple[Callable[..., PrivacyResult], tuple[Any, ...]]]

    def run(self) -> list[PrivacyResult]:
        return [check(*args) for check, args in self.checks]


def verdict_chunk(release: Release, spec: ReleaseSpec) -> VerdictChunk:
    """From the stored tables and the published table only."""
    delta = Fraction(release.private["delta"])
    tables = release.private["output_tables"]
    return VerdictChunk(
        [
            (dp.check_distributions, (tables,)),
            (dp.check_delta_probability, (tables, delta)),
            (
                dp.check_cover,
                (tables, release.tables["table"], release.private["value_codes"], delta, spec.dataset.qi_names),
            ),
        ]
    )


def verify_muco(release: Release, spec: ReleaseSpec) -> list[PrivacyResult]:
    """The verdicts, in this process."""
    return verdict_chunk(release, spec).run()


# Runs of QI subsets the Section 5.1 figures are split into. Each run gets every target and the
# whole published table (a copy per Dask task) and holds its own keys (about 250 MB at a million
# rows), so a few runs beside the verdicts' chunk: the figures are the same for any number.
DISCLOSURE_CHUNKS = 2
# Pieces of the utility figures (runs of published rows for the counts, runs of QIs for ILoss).
UTILITY_CHUNKS = 2


@dataclass
class DisclosureChunk:
    inputs: dp.DisclosureInput  # the same object in every chunk of a plan
    subsets: list[tuple[int, ...]]  # a run of dp.qi_subsets


def own_rows(release: Release) -> tuple[np.ndarray, np.ndarray]:
    """(input row of each published row, published row of each input row)."""
    src = release.private["source_row"].column("source_row").to_numpy()
    own = np.empty(len(src), dtype=np.int64)
    own[src] = np.arange(len(src))
    return src, own


def disclosure_chunks(release: Release, data: Microdata) -> tuple[list[DisclosureChunk], list[tuple[int, ...]]]:
    dp.check_qi_count(len(data.qi_names))
    pub = dp.published_codes(release.tables["table"], release.private["value_codes"], data.qi_names)
    src, own = own_rows(release)
    small = np.int32  # codes and rows fit; halves what a Dask worker is sent
    inputs = dp.DisclosureInput(
        data.codes.astype(small),
        pub.astype(small),
        own.astype(small),
        data.sensitive_codes.astype(small),
        data.sensitive_codes[src].astype(small),
    )
    subsets = dp.qi_subsets(len(data.qi_names))
    runs = np.array_split(np.arange(len(subsets)), min(DISCLOSURE_CHUNKS, len(subsets)))
    return [DisclosureChunk(inputs, [subsets[i] for i in run]) for run in runs], subsets


def disclosure_results(figures: dict[float, tuple[float, float]]) -> list[PrivacyResult]:
    out = []
    for p, (ident, attr) in figures.items():
        out.append(PrivacyResult(f"identity disclosure (P_match={p})", ident, None, True))
        out.append(PrivacyResult(f"attribute disclosure (P_match={p})", attr, None, True))
    return out


# --- utility ---------------------------------------------------------------------------------


@dataclass
class CountChunk:
    """The shared workload's exact counts over a run of published rows (as Arrow IPC when sent
    to a Dask worker: a pickled slice would carry the whole table's buffers)."""

    rows: CompactTable
    columns: list[str]
    sensitive: str
    workload: Any


def count_chunk(chunk: CountChunk) -> np.ndarray:
    return count_in_table(chunk.rows.table, chunk.columns, chunk.sensitive, chunk.workload)


@dataclass
class ILossChunk:
    qis: list[tuple[Distance, np.ndarray, np.ndarray]]  # per QI: (distance, original, published codes)


def iloss_inputs(release: Release, data: Microdata) -> list[tuple[Distance, np.ndarray, np.ndarray]]:
    pub = dp.published_codes(release.tables["table"], release.private["value_codes"], data.qi_names)
    src, _ = own_rows(release)
    return [(Distance(dom), data.codes[src, a], pub[:, a]) for a, dom in enumerate(data.domains)]


def iloss_cells(dist: Distance, orig: np.ndarray, pub: np.ndarray) -> np.ndarray:
    """dis(original, published) / largest distance of the QI, per published cell."""
    span = dist.domain_max
    d = dist(orig, pub)
    return d / span if span > 0 else np.zeros(len(d))


def iloss(release: Release, data: Microdata) -> float:
    """Average over published QI cells of dis(original, published) / largest distance of the QI."""
    return float(np.mean(np.column_stack([iloss_cells(*qi) for qi in iloss_inputs(release, data)])))


def query_mask(frame: pd.DataFrame, conditions: tuple[tuple[str, RangeCond | SetCond], ...]) -> np.ndarray:
    return ColumnIndex(frame).mask(conditions)


@dataclass(frozen=True)
class SumQuery:
    """SELECT SUM(S) WHERE pred(A_1) AND ... (Section 5.3)."""

    conditions: tuple[tuple[str, RangeCond | SetCond], ...]

    def sql_where(self) -> str:
        return " AND ".join(cond.sql(col) for col, cond in self.conditions)


def random_sum_queries(
    data: Microdata, rng: np.random.Generator, n: int = 1000, preds: int = 4, coverage: tuple[float, float] = (0.3, 0.8)
) -> list[SumQuery]:
    """n queries, each with `preds` predicates on distinct random QIs. A predicate keeps a random
    contiguous run of the QI's codes covering `coverage` of the domain (a value range for numeric
    QIs, a value set otherwise); queries whose exact answer is empty are redrawn."""
    out: list[SumQuery] = []
    d = len(data.domains)
    preds = min(preds, d)
    attempts = 0
    while len(out) < n and attempts < 50 * n:
        attempts += 1
        conds = []
        mask = np.ones(data.n, dtype=bool)
        for a in sorted(rng.choice(d, preds, replace=False)):
            dom = data.domains[a]
            width = max(1, int(round(rng.uniform(*coverage) * dom.size)))
            lo = int(rng.integers(0, dom.size - width + 1))
            hi = lo + width - 1
            cond: RangeCond | SetCond
            if dom.kind == "numeric":
                cond = RangeCond(float(dom.values[lo]), float(dom.values[hi]))
            else:
                cond = SetCond(frozenset(str(v) for v in dom.values[lo : hi + 1]))
            conds.append((dom.name, cond))
            mask &= (data.codes[:, a] >= lo) & (data.codes[:, a] <= hi)
        if mask.any():
            out.append(SumQuery(tuple(conds)))
    return out


def exact_sums(data: Microdata, queries: list[SumQuery]) -> np.ndarray:
    s = data.frame[data.spec.dataset.sensitive].to_numpy(dtype=float)
    index = ColumnIndex(data.frame)
    return np.array([float(s[index.mask(q.conditions)].sum()) for q in queries])


def sum_relative_errors(estimates: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|estimate - exact| / |exact| of every sum query, none skipped (unlike
    evaluate.metrics.nonzero_relative_errors): an exact sum of 0 gives inf or nan."""
    errors: np.ndarray = np.abs(estimates - exact) / np.abs(exact)
    return errors

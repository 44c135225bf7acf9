"""Mondrian on a Dask cluster: the top of the split tree from per-partition histograms, the
subtrees below it finished on one worker each.

A node's split depends on its own rows only (their ranges, the lower median of a dimension, the
>= k and l-diversity tests), so the tree can be grown anywhere the rows are. Level by level,
every worker reports, for every open node, the histograms of its rows' codes per dimension over
a range known to hold the node (the root: the whole domains; a child: its parent's range cut at
the split value), and, with l, which sensitive values lie below, at and above each median. The
sums are exactly the histograms of the whole node: its exact range per dimension (the first and
last occupied bins, `node_bounds`), and through `median_from_histograms` and `allowed_splits`
(the spine's own) the same split as the in-memory `split_levels`. Workers then move their rows
to the children (a node id per row) and, in the same pass, histogram the next level, so a level
costs one pass over the rows (two with l).
A node is split this way while it holds more than `chunk_rows` rows; below that its rows are
gathered on one worker, which finishes its subtree with today's `mondrian_partition` and builds
its part of the published table. The groups, their boxes and the published rows are those of
the in-memory release; only the row order differs (each part is shuffled on its own, from a
generator spawned for it).

Memory: a worker holds its partitions' codes (4 bytes per QI and row, plus the sensitive code
and a node id); the flow holds per open node D histograms over its code ranges (and with l a
3 x D x |S| bitmap), never rows; a finishing worker holds one node (<= chunk_rows rows, unless a
node that no dimension can split is larger).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privpub.schemas.errors import PartitionError
from privpub.schemas.spec import ReleaseSpec
from privpub.state.store import open_staging
from privpub.tasks.core.executor import Executor
from privpub.tasks.core.microdata import Microdata, QIDomain
from privpub.tasks.core.parted_table import PartedTable, part_name
from privpub.tasks.core.types import Partition
from privpub.tasks.partition.generalized_table import generalized_table
from privpub.tasks.partition.mondrian import (
    TreeBuilder,
    allowed_splits,
    histogram_offsets,
    median_from_histograms,
    mondrian_partition,
    normalised_widths,
)


class PartCodes(Protocol):
    """One part's rows as a worker keeps them (tasks/validate/parted.CodedPart)."""

    xt: np.ndarray  # (D, n) codes
    s: np.ndarray  # (n,) sensitive codes
    person: pa.Array

    @property
    def n(self) -> int: ...


def _open_rows(part: PartCodes, assign: np.ndarray | None, lookup: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of this partition in an open node: their positions and the node's open index."""
    nodes = np.zeros(part.n, dtype=np.int64) if assign is None else assign
    idx = lookup[nodes]
    rows = np.flatnonzero(idx >= 0)
    return rows, idx[rows]


def part_histograms(
    part: PartCodes, assign: np.ndarray | None, lookup: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """On a worker: per (open node, dimension), node-major, the histogram of its rows' codes over
    the node's global [lo, hi], concatenated as `histogram_offsets` lays them out."""
    rows, i = _open_rows(part, assign, lookup)
    D = part.xt.shape[0]
    offset = histogram_offsets(lo, hi)
    bins = int((hi - lo + 1).sum())
    hist = np.zeros(bins, dtype=np.int64)
    for d in range(D):
        seg = i * D + d
        hist += np.bincount(offset[seg] + (part.xt[d, rows] - lo[seg]), minlength=bins)
    return hist


def part_presence(
    part: PartCodes, assign: np.ndarray | None, lookup: np.ndarray, med: np.ndarray, n_s: int
) -> np.ndarray:
    """On a worker: per (open node, dimension), which sensitive codes occur below (0), at (1) and
    above (2) the node's median on that dimension."""
    rows, i = _open_rows(part, assign, lookup)
    n_open, D = med.shape
    seen = np.zeros((n_open, D, 3, n_s), dtype=bool)
    s = part.s[rows]
    for d in range(D):
        key, m = part.xt[d, rows], med[i, d]
        seen[i, d, (key > m).astype(np.int64) + (key >= m), s] = True
    return seen


def part_assign(
    part: PartCodes,
    assign: np.ndarray | None,
    dim_of: np.ndarray,
    value_of: np.ndarray,
    left_of: np.ndarray,
    lookup: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """On a worker: each row of a node that was split moves to its left or right child; in the
    same pass over the rows, the histograms of the next level's open nodes (`part_histograms`
    over the ranges the flow gives them). Returns (node id per row, histograms)."""
    nodes = np.zeros(part.n, dtype=np.int64) if assign is None else assign
    dims = dim_of[nodes]
    rows = np.flatnonzero(dims >= 0)
    parent = nodes[rows]
    right = part.xt[dims[rows], rows] > value_of[parent]
    out = nodes.copy()
    out[rows] = left_of[parent] + right
    return out, part_histograms(part, out, lookup, lo, hi)


def node_bounds(hist: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment of a summed histogram over [lo, hi]: the lowest and highest code that occurs
    (every segment holds rows, so both exist): the node's exact range on that dimension."""
    offset = histogram_offsets(lo, hi)
    index = np.arange(len(hist), dtype=np.int64)
    occupied = hist > 0
    first = np.minimum.reduceat(np.where(occupied, index, len(hist)), offset)
    last = np.maximum.reduceat(np.where(occupied, index, -1), offset)
    return lo + (first - offset), lo + (last - offset)


def extract_node(
    part: PartCodes, assign: np.ndarray | None, node: int
) -> tuple[np.ndarray, np.ndarray, pa.Array, np.ndarray]:
    """On a worker: this partition's rows in one node: codes, sensitive codes, and for the series
    composition their person ids and positions in the file."""
    nodes = np.zeros(part.n, dtype=np.int64) if assign is None else assign
    rows = np.flatnonzero(nodes == node)
    return part.xt[:, rows], part.s[rows], part.person.take(rows), rows


def tree_reduce(ex: Executor, futures: list[Any], fn: Callable[[Any, Any], Any]) -> Any:
    """Combine handles pairwise where the work runs (executor `ex`); gather only the result."""
    while len(futures) > 1:
        futures = [
            ex.submit(fn, *futures[i : i + 2]) if i + 1 < len(futures) else futures[i]
            for i in range(0, len(futures), 2)
        ]
    return ex.gather(futures)[0]


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out: np.ndarray = a + b
    return out


def _either(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out: np.ndarray = a | b
    return out


class PartedRows(Protocol):
    """What the distributed Mondrian reads of rows kept in parts (tasks/validate/parted.PartedData,
    a layer above): the domains and sensitive values, and handles of each part's CodedPart."""

    spec: ReleaseSpec
    executor: Executor
    parts: list[Any]
    domains: list[QIDomain]
    sensitive_values: np.ndarray
    integer: dict[str, bool]

    @property
    def n(self) -> int: ...


@dataclass
class ClusterPartition:
    """The top of the split tree; `ready`: the nodes each finished on one worker (node order)."""

    ready: np.ndarray
    ready_sizes: np.ndarray
    assign: list[Any]  # per partition: a future of its rows' node ids (None: all at the root)
    tree: TreeBuilder
    levels: int
    info: dict[str, Any] = field(default_factory=dict)
    n_groups: int | None = None  # known once the subtrees are finished
    members: list[Any] = field(default_factory=list)  # per ready node: a future of its `members`
    group_offset: np.ndarray | None = None  # (ready + 1,) the first global group id of each node


def _refuse_k_l(n: int, k: int, l: int | None, n_s: int) -> bool:
    """Refuse a k or l no partition can meet; whether l-diversity is asked for."""
    if k < 1:
        raise PartitionError("k must be at least 1")
    if n < k:
        raise PartitionError(f"k = {k} is larger than the table ({n} rows): no k-anonymous release exists")
    use_l = l is not None and l > 1
    if l is not None and use_l and n_s < l:
        raise PartitionError(f"l = {l} but the table has only {n_s} distinct sensitive values")
    return use_l


@dataclass
class _Frontier:
    """The open nodes of one level (node-major ranges: index node * D + d) and, per partition,
    handles of its rows' node ids and of its histograms over those ranges."""

    nodes: np.ndarray
    sizes: np.ndarray
    lo_flat: np.ndarray
    hi_flat: np.ndarray
    lookup: np.ndarray  # node id -> open index (-1: not open)
    assign: list[Any]
    hists: list[Any]


@dataclass
class _LevelSplit:
    """Per open node, the split each dimension allows at its median (shapes (open, D))."""

    med: np.ndarray
    n_le: np.ndarray
    n_lt: np.ndarray
    use_lt: np.ndarray
    lo: np.ndarray  # the node's exact range per dimension
    hi: np.ndarray
    can: np.ndarray  # (open,) some dimension can split the node
    dim: np.ndarray  # (open,) the widest dimension that can


def _parted_diversity(
    data: PartedRows, front: _Frontier, med: np.ndarray, l: int, n_s: int
) -> tuple[np.ndarray, np.ndarray]:
    """Whether both sides of "<= median" / "< median" keep l distinct sensitive values."""
    ex = data.executor
    seen = tree_reduce(
        ex,
        [ex.submit(part_presence, p, a, front.lookup, med, n_s) for p, a in zip(data.parts, front.assign)],
        _either,
    )
    below, at, above = seen[:, :, 0], seen[:, :, 1], seen[:, :, 2]
    diverse_le = ((below | at).sum(-1) >= l) & (above.sum(-1) >= l)
    diverse_lt = (below.sum(-1) >= l) & ((at | above).sum(-1) >= l)
    return diverse_le, diverse_lt


def _level_split(data: PartedRows, front: _Frontier, k: int, l: int | None, n_s: int) -> _LevelSplit:
    """The summed histograms of the open nodes read as split_levels reads a level's rows."""
    n_open, D, total = len(front.nodes), len(data.domains), front.sizes
    hist = tree_reduce(data.executor, front.hists, _add)
    lo_exact, hi_exact = node_bounds(hist, front.lo_flat, front.hi_flat)  # node-major: index node * D + d
    med, n_le, n_lt = (
        x.reshape(n_open, D) for x in median_from_histograms(hist, front.lo_flat, front.hi_flat, np.repeat(total, D))
    )
    diverse_le: np.ndarray | bool = True
    diverse_lt: np.ndarray | bool = True
    if l is not None and l > 1:
        diverse_le, diverse_lt = _parted_diversity(data, front, med, l, n_s)
    ok, use_lt = allowed_splits(n_le, n_lt, total[:, None], k, diverse_le, diverse_lt)
    lo, hi = lo_exact.reshape(n_open, D), hi_exact.reshape(n_open, D)
    widths = normalised_widths(data.domains, lo.T, hi.T)
    # the widest dimension that can split, as split_levels tries them
    dim_order = np.argsort(-widths, axis=1, kind="stable")
    row = np.arange(n_open)[:, None]
    usable = (ok & (widths > 0))[row, dim_order]
    dim = dim_order[np.arange(n_open), usable.argmax(axis=1)]
    return _LevelSplit(med, n_le, n_lt, use_lt, lo, hi, np.asarray(usable.any(axis=1)), dim)


def _split_frontier(
    data: PartedRows, front: _Frontier, split: _LevelSplit, tree: TreeBuilder, chunk_rows: int
) -> tuple[np.ndarray, np.ndarray, _Frontier]:
    """Split the nodes that can be split: the children small enough to finish on one worker
    (nodes, sizes), and the next level's frontier (its rows moved and histogrammed by the workers)."""
    ex, open_nodes, total = data.executor, front.nodes, front.sizes
    sp = np.flatnonzero(split.can)
    d_sp = split.dim[sp]
    lt = split.use_lt[sp, d_sp]
    value = np.where(lt, split.med[sp, d_sp] - 1, split.med[sp, d_sp])
    n_left = np.where(lt, split.n_lt[sp, d_sp], split.n_le[sp, d_sp])
    lefts, _ = tree.split(open_nodes[sp], d_sp, value, n_left, total[sp] - n_left)
    dim_of = np.full(tree.n_nodes, -1, dtype=np.int64)
    value_of = np.zeros(tree.n_nodes, dtype=np.int64)
    left_of = np.zeros(tree.n_nodes, dtype=np.int64)
    dim_of[open_nodes[sp]], value_of[open_nodes[sp]], left_of[open_nodes[sp]] = d_sp, value, lefts
    kids = np.ravel(np.column_stack([lefts, lefts + 1]))
    kid_sizes = np.ravel(np.column_stack([n_left, total[sp] - n_left]))
    kid_lo, kid_hi = np.repeat(split.lo[sp], 2, axis=0), np.repeat(split.hi[sp], 2, axis=0)
    pair = np.arange(len(sp))
    kid_hi[2 * pair, d_sp] = value  # left child: codes <= value on the split dimension
    kid_lo[2 * pair + 1, d_sp] = value + 1
    small = kid_sizes <= chunk_rows
    open_nodes = kids[~small]
    lo_flat, hi_flat = kid_lo[~small].ravel(), kid_hi[~small].ravel()
    lookup = np.full(tree.n_nodes, -1, dtype=np.int64)
    lookup[open_nodes] = np.arange(len(open_nodes))
    moved = [
        ex.submit(part_assign, p, a, dim_of, value_of, left_of, lookup, lo_flat, hi_flat)
        for p, a in zip(data.parts, front.assign)
    ]
    assign = [ex.submit(operator.getitem, f, 0) for f in moved]
    hists = [ex.submit(operator.getitem, f, 1) for f in moved]
    del moved
    nxt = _Frontier(open_nodes, kid_sizes[~small], lo_flat, hi_flat, lookup, assign, hists)
    return kids[small], kid_sizes[small], nxt


def distributed_mondrian(data: Microdata | PartedRows, k: int, l: int | None, chunk_rows: int) -> ClusterPartition:
    """Split on the cluster until every node holds at most `chunk_rows` rows (or cannot split)."""
    assert not isinstance(data, Microdata)  # the technique hands its data on as Microdata: here rows in parts
    n, ex, D = data.n, data.executor, len(data.domains)
    n_s = max(len(data.sensitive_values), 1)
    _refuse_k_l(n, k, l, n_s)
    tree = TreeBuilder(n)
    open_nodes, open_sizes = np.array([0], dtype=np.int64), np.array([n], dtype=np.int64)
    ready: list[np.ndarray] = []
    ready_sizes: list[np.ndarray] = []
    if n <= chunk_rows:
        ready, ready_sizes, open_nodes = [open_nodes], [open_sizes], open_nodes[:0]
    levels = 0
    # the histograms of the open nodes over ranges that hold their rows: at the root the whole
    # domains, below it the parent's range with the split dimension cut at the split value
    lo_flat = np.zeros(D, dtype=np.int64)
    hi_flat = np.array([dom.size - 1 for dom in data.domains], dtype=np.int64)
    lookup = np.zeros(1, dtype=np.int64)
    hists = (
        [ex.submit(part_histograms, p, None, lookup, lo_flat, hi_flat) for p in data.parts] if len(open_nodes) else []
    )
    front = _Frontier(open_nodes, open_sizes, lo_flat, hi_flat, lookup, [None] * len(data.parts), hists)
    while len(front.nodes):
        levels += 1
        split = _level_split(data, front, k, l, n_s)
        ready.append(front.nodes[~split.can])
        ready_sizes.append(front.sizes[~split.can])
        if not split.can.any():
            break
        small, small_sizes, front = _split_frontier(data, front, split, tree, chunk_rows)
        ready.append(small)
        ready_sizes.append(small_sizes)
    ready_nodes = np.concatenate(ready)
    order = np.argsort(ready_nodes)
    return ClusterPartition(
        ready_nodes[order],
        np.concatenate(ready_sizes)[order],
        front.assign,
        tree,
        levels,
        info={"partitioner": "mondrian", "k": k, "l": l, "distributed_levels": levels, "chunks": len(ready_nodes)},
    )


def finish_node(
    meta: tuple[ReleaseSpec, list[QIDomain], np.ndarray, dict[str, bool]],
    k: int,
    l: int | None,
    seed: np.random.SeedSequence,
    *pieces: tuple[np.ndarray, np.ndarray, pa.Array, np.ndarray],
) -> tuple[tuple[pa.Table, np.ndarray], pa.Table]:
    """On a worker: one node's rows (its pieces from every partition, in file order), its subtree
    finished by the in-memory Mondrian, and its part of the published table, rows shuffled by its
    own generator. Returns (table, group sizes) and, kept on the worker for the series
    composition, who is in which of the node's groups (`members`)."""
    spec, domains, s_values, integer = meta
    xt = np.concatenate([p[0] for p in pieces], axis=1)
    s = np.concatenate([p[1] for p in pieces])
    data = Microdata.from_codes(spec, domains, np.ascontiguousarray(xt.T), s_values, s, integer)
    part = mondrian_partition(data, k, l)
    order = np.random.default_rng(seed).permutation(data.n)
    members = pa.table(
        {
            "person": pa.concat_arrays([p[2] for p in pieces]),
            "group": part.group.astype(np.int64),
            "s": s.astype(np.int32),
            "file": np.repeat(np.arange(len(pieces), dtype=np.int32), [len(p[1]) for p in pieces]),
            "row": np.concatenate([p[3] for p in pieces]).astype(np.int64),
        }
    )
    return (generalized_table(data, part.group, part.n_groups, order), part.sizes), members


def finish_on_cluster(
    data: PartedRows,
    cpart: ClusterPartition,
    k: int,
    l: int | None,
    rng: np.random.Generator,
    write_part: Callable[[int, pa.Table], None],
) -> np.ndarray:
    """Finish every ready node on a worker; `write_part(index, table)` is called in the flow as
    each part arrives (in any order; index = the node's rank). Returns the group sizes, node
    order (the group ids made global by each node's offset). Each node's `members` stay on the
    workers: `cpart.members` (futures, node order) and `cpart.group_offset`."""
    ex = data.executor
    meta = ex.scatter((data.spec, data.domains, data.sensitive_values, data.integer), broadcast=True)
    seeds = np.random.SeedSequence(int(rng.integers(2**63))).spawn(len(cpart.ready))
    tables, members = [], []
    for index, node in enumerate(cpart.ready):
        pieces = [ex.submit(extract_node, p, a, int(node)) for p, a in zip(data.parts, cpart.assign)]
        done = ex.submit(finish_node, meta, k, l, seeds[index], *pieces)
        tables.append(ex.submit(operator.getitem, done, 0))
        members.append(ex.submit(operator.getitem, done, 1))
        del done
    sizes: list[Any] = [None] * len(cpart.ready)
    for index, (table, node_sizes) in ex.as_completed(tables):
        sizes[index] = node_sizes
        write_part(index, table)
        ex.release(tables[index])  # the worker forgets the part once it is written
        tables[index] = None
        del table
    cpart.members = members
    cpart.group_offset = np.concatenate([[0], np.cumsum([len(x) for x in sizes])]).astype(np.int64)
    cpart.n_groups = int(cpart.group_offset[-1])
    return np.concatenate(sizes)


def publish_parts(
    data: Microdata | PartedRows,
    cpart: Partition | ClusterPartition,
    k: int,
    l: int | None,
    rng: np.random.Generator,
    output_dir: Path,
) -> tuple[PartedTable, np.ndarray]:
    """The subtrees of a distributed Mondrian finished on the cluster, each node's rows written as
    one part, in node order, into a private staging folder of their own (moved into the release's
    staging folder by stage_tables; deleted if the release never gets there)."""
    # the technique's contract names them Microdata and Partition: here, rows in parts and their tree top
    assert not isinstance(data, Microdata) and isinstance(cpart, ClusterPartition)
    draft = open_staging(output_dir)
    folder = draft.path / "table"
    folder.mkdir()

    def write_part(index: int, table: pa.Table) -> None:
        pq.write_table(table, folder / part_name(index))

    try:
        sizes = finish_on_cluster(data, cpart, k, l, rng, write_part)
    except BaseException:
        draft.discard()
        raise
    parted = PartedTable(folder)
    parted.draft = draft
    parted.executor = data.executor  # its verification and evaluation run where it was built
    weakref.finalize(parted, draft.discard)
    return parted, sizes

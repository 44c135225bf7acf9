"""Butterfly construction (Pei, Tao, Li, Xiao), Sections 4.2 and 5.1, on a set of points.

A *point* is a tuple (one-level) or the representative of a k'-class (two-level, Section 5.2).
Every point carries its codes (for Mondrian and the i-NN distances), scaled bounds x_lo/x_hi per QI
(value / attribute range, so a width is directly Definition 1's penalty) and a weight (how many
tuples it stands for). Loss of a set of points on attributes A = weight x sum over A of
(max x_hi - min x_lo).

Attribute blocks: the *body* holds attributes in two or more QIDs (plus QIs that no QID lists,
which are kept identical inside a unit so they can never split a class); *wing* q holds the
attributes only QID q has (Definition 4; with two QIDs, S1 - S2 and S2 - S1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.spatial import cKDTree

from privpub.tasks.core.microdata import QIDomain
from privpub.tasks.partition.mondrian import SplitTree, mondrian_partition
from privpub.tasks.techniques.butterfly.wings import ragged, segmented_mondrian


@dataclass(frozen=True)
class Layout:
    body: list[int]  # QI indices (into the domain list)
    wings: list[list[int]]  # per QID, its exclusive QI indices
    union: list[int]  # QI indices in at least one QID


def layout(qi_names: list[str], qids: list[list[str]]) -> Layout:
    index = {n: j for j, n in enumerate(qi_names)}
    owners = {j: [q for q, qid in enumerate(qids) if qi_names[j] in qid] for j in range(len(qi_names))}
    union = [j for j in range(len(qi_names)) if owners[j]]
    body = [j for j in range(len(qi_names)) if len(owners[j]) != 1]
    wings = [[index[n] for n in qi_names if owners[index[n]] == [q]] for q in range(len(qids))]
    return Layout(body, wings, union)


def scaled(domains: list[QIDomain], codes: np.ndarray) -> np.ndarray:
    """Codes -> value / attribute range (numeric) or code / code range (ordered, categorical)."""
    out = np.zeros(codes.shape, dtype=float)
    for j, dom in enumerate(domains):
        if dom.span > 0:
            vals = dom.values.astype(float) if dom.kind == "numeric" else np.arange(dom.size, dtype=float)
            out[:, j] = vals[codes[:, j]] / dom.span
    return out


@dataclass
class Points:
    """Duck-types Microdata for mondrian_partition (codes, domains, sensitive_codes, n)."""

    codes: np.ndarray
    domains: list[QIDomain]
    x_lo: np.ndarray
    x_hi: np.ndarray
    weight: np.ndarray

    @property
    def n(self) -> int:
        return len(self.codes)

    @property
    def sensitive_codes(self) -> np.ndarray:
        return np.zeros(self.n, dtype=np.int32)  # Mondrian reads it only for l-diversity

    @property
    def x(self) -> np.ndarray:
        """Point position for distances: the middle of its bounds."""
        return self.x_lo if self.exact else (self.x_lo + self.x_hi) / 2

    @property
    def exact(self) -> bool:
        """One-level points: bounds and position are the scaled codes themselves."""
        return self.x_lo is self.x_hi

    def take(self, idx: np.ndarray) -> Points:
        x_lo = self.x_lo[idx]
        x_hi = x_lo if self.exact else self.x_hi[idx]
        return Points(self.codes[idx], self.domains, x_lo, x_hi, self.weight[idx])

    @classmethod
    def of_rows(cls, codes: np.ndarray, domains: list[QIDomain]) -> Points:
        x = scaled(domains, codes)
        return cls(codes, domains, x, x, np.ones(len(codes)))


# --- i-NN distances (Definition 3) ------------------------------------------------------------

_BLOCK = 250_000  # distances computed per batch


def leaf_inn(
    x: np.ndarray, starts: np.ndarray, sizes: np.ndarray, k: int, ident: np.ndarray | None = None
) -> np.ndarray:
    """best[g, i] <= min over t in leaf g of its i-th NN distance inside g (i = 0..k-1; 0 = itself),
    at most 3 d (d + 2) 2^-24 below it (positions scaled to [0, 1], d attributes: 3e-6 for
    d = 3), and 0 where it is 0.

    x: (n, d) positions already sorted by leaf; leaf g is x[starts[g]:starts[g]+sizes[g]]; every
    leaf has at least k points. ident: one integer per row, equal iff the rows' positions are
    (default: found from x).
    Equal rows have equal distance lists, so only each leaf's distinct rows are measured, against
    all of the leaf's rows (census wings: 33% to 72% of a leaf's rows are distinct). Only the k
    smallest distances of each are ordered (np.partition, then a sort of those k): the walk reads
    ranks below ceil(k/2) only. Distances are computed in float32 (half the memory traffic of the
    pairwise step, most of the cost) and then lowered by a bound on the rounding error, so
    Theorem 4's L(G) stays a lower bound."""
    best = np.zeros((len(sizes), k))
    d = x.shape[1]
    if d == 0 or k == 0:
        return best
    if ident is None:
        ident = distinct_rows(x)[1]
    elif float(ident.max() + 1) * len(sizes) >= 2.0**62:  # keep (leaf, ident) in one int64
        ident = np.unique(ident, return_inverse=True)[1].reshape(-1)
    leaf_of_row = np.repeat(np.arange(len(sizes)), sizes)
    # each leaf's distinct rows (first occurrences), grouped by leaf
    _, reps = np.unique(leaf_of_row * (int(ident.max()) + 1) + ident, return_index=True)
    n_reps = np.bincount(leaf_of_row[reps], minlength=len(sizes))
    rep_start = np.concatenate(([0], np.cumsum(n_reps)[:-1]))
    x = x - x.min(axis=0)  # distances do not move; float32 rounding then scales with the range
    top = float(x.max())
    x = np.ascontiguousarray(x.T, dtype=np.float32)  # (d, n): each attribute's values contiguous
    for s in np.unique(sizes):
        leaves = np.flatnonzero(sizes == s)
        leaves = leaves[np.argsort(n_reps[leaves], kind="stable")]  # similar counts share a batch
        c = 0
        while c < len(leaves):
            u = int(n_reps[leaves[c]])
            if u * s > _BLOCK:  # one huge leaf: its distinct rows in blocks, keep the k smallest
                g = leaves[c]
                best[g] = _big_leaf_inn(x[:, reps[rep_start[g] : rep_start[g] + u]], x[:, starts[g] : starts[g] + s], k)
                c += 1
                continue
            # leaves ascend in distinct rows: the batch ends before width x count x s passes _BLOCK
            grow = n_reps[leaves[c:]] * np.arange(1, len(leaves) - c + 1)
            ids = leaves[c : c + max(1, int(np.searchsorted(grow, _BLOCK // s, side="right")))]
            width = int(n_reps[ids].max())
            # pad each leaf's distinct rows to `width` by repeating its last one (no new minimum)
            pick = rep_start[ids][:, None] + np.minimum(np.arange(width), n_reps[ids][:, None] - 1)
            rows = x[:, reps[pick]]  # (d, G, width)
            cols = x[:, starts[ids][:, None] + np.arange(s)]  # (d, G, s)
            dist = _l1(rows[:, :, :, None], cols[:, :, None, :])  # (G, width, s)
            best[ids] = _k_smallest(dist, k).min(axis=1)
            c += len(ids)
    # each coordinate, difference and partial sum rounds by at most top * 2^-24 (times d for the
    # sums): d (d + 2) top 2^-24 in all; twice that is taken off, exact zeros stay zero
    lowered: npt.NDArray[np.float64] = np.maximum(best - 2.0 * d * (d + 2) * top * 2.0**-24, 0.0)
    return lowered


def _l1(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """L1 distance over the first axis (attributes), one attribute at a time (no (d, ...)
    temporary)."""
    out: npt.NDArray[np.float32] = a[0] - b[0]
    np.abs(out, out=out)
    tmp = np.empty_like(out)
    for j in range(1, len(a)):  # in place: no new temporaries per attribute
        np.subtract(a[j], b[j], out=tmp)
        out += np.abs(tmp, out=tmp)
    return out


def _k_smallest(dist: np.ndarray, k: int) -> np.ndarray:
    """The k smallest values along the last axis, ascending."""
    if k < dist.shape[-1]:
        dist = np.partition(dist, k - 1, axis=-1)[..., :k]
    return np.sort(dist, axis=-1)


def _big_leaf_inn(rows: np.ndarray, cols: np.ndarray, k: int) -> np.ndarray:
    """rows, cols: (d, ...) positions of a leaf's distinct rows and of all its rows."""
    out = np.full(k, np.inf)
    block = max(1, _BLOCK // cols.shape[1])
    for b in range(0, rows.shape[1], block):
        dist = _l1(rows[:, b : b + block, None], cols[:, None, :])
        out = np.minimum(out, _k_smallest(dist, k).min(axis=0))
    return out


def distinct_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of a 2-d array: (rows, inverse, counts). One lexsort: np.unique(axis=0)
    goes through a structured dtype and costs ~10x more on 300,000 rows."""
    order = np.lexsort(x.T[::-1])
    xs = x[order]
    new = np.ones(len(x), dtype=bool)
    new[1:] = (xs[1:] != xs[:-1]).any(axis=1)
    ids = np.cumsum(new) - 1
    inverse = np.empty(len(x), dtype=np.int64)
    inverse[order] = ids
    return xs[new], inverse, np.bincount(ids)


def _row_key(codes: np.ndarray) -> np.ndarray:
    """One int64 per row of non-negative integer codes, equal iff the rows are (mixed radix;
    falls back to the rank of each distinct row when the radix product overflows)."""
    radix = codes.max(axis=0).astype(np.int64) + 1 if len(codes) else np.ones(codes.shape[1], dtype=np.int64)
    if float(np.prod(radix, dtype=float)) >= 2.0**62:
        return distinct_rows(codes)[1]
    key = np.zeros(len(codes), dtype=np.int64)
    for j, r in enumerate(radix):
        key = key * r + codes[:, j]
    return key


def leaf_global_knn(x: np.ndarray, starts: np.ndarray, k: int, codes: np.ndarray | None = None) -> np.ndarray:
    """min over t in each leaf of NNDist(t, k-1, T): the only figure the walk needs.

    x: (n, d) sorted by leaf, leaf g starting at starts[g]. codes: integer rows with the same
    equalities as x (one-level points), to find the distinct points with one integer sort.
    A leaf holding a point repeated k times in T has 0 (on census data 85% to 99.9% of leaves).
    For the others, each leaf's most repeated point is searched first; its distance U bounds the
    leaf's minimum, so the leaf's other points are searched only within U (k-d tree pruning),
    in a few batches of similar bounds."""
    if x.shape[1] == 0 or k <= 1:
        return np.zeros(len(starts))
    if codes is not None:
        _, first, inverse, mult = np.unique(_row_key(codes), return_index=True, return_inverse=True, return_counts=True)
        uniq, inverse = x[first], inverse.reshape(-1)
    else:
        uniq, inverse, mult = distinct_rows(x)
    leaf_of_row = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(x))))
    zero = np.zeros(len(starts), dtype=bool)
    zero[leaf_of_row[mult[inverse] >= k]] = True
    rows = np.flatnonzero(~zero[leaf_of_row])
    dist = np.zeros(len(uniq))
    if len(rows):
        tree = cKDTree(uniq)
        leaf, point = leaf_of_row[rows], inverse[rows]
        order = np.lexsort((-mult[point], leaf))
        head = np.ones(len(order), dtype=bool)
        head[1:] = leaf[order][1:] != leaf[order][:-1]
        rep_leaf, rep = leaf[order][head], point[order][head]
        dist[point] = np.inf
        dist[rep] = _knn_within(tree, uniq, mult, rep, k, np.inf)
        bound = np.zeros(len(starts))
        bound[rep_leaf] = dist[rep]
        # a point can lower only the leaves that hold it: search it within their largest U
        reach = np.zeros(len(uniq))
        np.maximum.at(reach, point, bound[leaf])
        reach[rep] = 0
        todo = np.flatnonzero(reach > 0)
        if len(todo):
            edges = np.unique(np.quantile(reach[todo], np.linspace(0, 1, 9)[1:]))
            batch = np.searchsorted(edges, reach[todo], side="left")
            for j, edge in enumerate(edges):
                which = todo[batch == j]
                if len(which):  # a hair above the edge: a neighbour exactly at U still counts
                    dist[which] = _knn_within(tree, uniq, mult, which, k, edge * (1 + 1e-9) + 1e-12)
    return np.minimum.reduceat(np.where(zero[leaf_of_row], 0.0, dist[inverse]), starts)


def _knn_within(
    tree: cKDTree, uniq: np.ndarray, mult: np.ndarray, which: np.ndarray, k: int, bound: float
) -> np.ndarray:
    """NNDist(t, k-1, T) of the distinct points uniq[which] (T: the distinct points with
    multiplicities, searched through `tree`): the distance of the first neighbour that completes
    k tuples; inf when that is beyond `bound`."""
    kk = min(k, len(uniq))
    dist, idx = tree.query(uniq[which], k=kk, p=1, distance_upper_bound=bound)
    dist, idx = dist.reshape(len(which), kk), idx.reshape(len(which), kk)
    reached = np.cumsum(np.append(mult, 0)[idx], axis=1) >= k  # missing neighbours count 0
    return np.where(reached.any(axis=1), dist[np.arange(len(which)), reached.argmax(axis=1)], np.inf)


# --- the tree walk (Fig. 3) ---------------------------------------------------------------------


@dataclass
class Assignment:
    """Per point: its unit (leaf class or butterfly) and its wing group per QID."""

    unit: np.ndarray
    n_units: int
    wing: list[np.ndarray]
    n_wing: list[int]
    in_butterfly: np.ndarray  # per point: under a kept butterfly (not a plain union class)
    stats: dict[str, float] = field(default_factory=dict)  # counts, and losses
    checks: list[tuple[float, float]] = field(default_factory=list)  # (L(G), real loss) per build


def node_depths(tree: SplitTree) -> np.ndarray:
    """Depth of every node, one numpy step per level (the root is 0)."""
    depth = np.zeros(tree.n_nodes, dtype=np.int64)
    frontier, d = np.array([0]), 0
    while len(frontier):
        frontier = frontier[tree.left[frontier] >= 0]
        d += 1
        frontier = np.concatenate([tree.left[frontier], tree.right[frontier]])
        depth[frontier] = d
    return depth


def leaf_ranges(tree: SplitTree, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First leaf rank and leaf count of every node, leaves ranked in depth-first order (a node's
    leaves are then the ranks first .. first + count - 1)."""
    internal = np.flatnonzero(tree.left >= 0)
    levels = [internal[depth[internal] == d] for d in range(int(depth.max()) + 1)]
    count = np.ones(tree.n_nodes, dtype=np.int64)
    for lvl in reversed(levels):  # children before parents
        count[lvl] = count[tree.left[lvl]] + count[tree.right[lvl]]
    first = np.zeros(tree.n_nodes, dtype=np.int64)
    for lvl in levels:  # parents before children
        first[tree.left[lvl]] = first[lvl]
        first[tree.right[lvl]] = first[lvl] + count[tree.left[lvl]]
    return first, count


class _Wing:
    """One QID's wing over the points sorted by leaf rank.

    W(N), the wing's Mondrian groups on node N's points, is kept as a label per point (`label`:
    W of the highest node computed so far over that point) and a loss per node (`loss`, NaN while
    unknown). When the union tree splits N on one of this wing's attributes, the wing's own
    Mondrian on N makes that same first split (same points, same widths, same median, same k), so
    W(N) = W(left) + W(right): nothing is recomputed. On the census at k = 50 that is 30% to 60%
    of the nodes of most depths."""

    def __init__(
        self,
        pts: Points,
        attrs: list[int],
        nodes: int,
        leaves_at: np.ndarray,
        starts: np.ndarray,
        rank_of_point: np.ndarray,
    ):
        self.attrs = attrs
        self.codes = np.ascontiguousarray(pts.codes[:, attrs])
        self.domains = [pts.domains[a] for a in attrs]
        self.x_lo = pts.x_lo[:, attrs]
        self.x_hi = self.x_lo if pts.exact else pts.x_hi[:, attrs]
        self.weight = pts.weight
        self.loss = np.full(nodes, np.nan)
        # a union leaf cannot be split on a subset of its attributes: it is one wing group
        width = np.maximum.reduceat(self.x_hi, starts) - np.minimum.reduceat(self.x_lo, starts) if attrs else 0
        self.loss[leaves_at] = np.add.reduceat(pts.weight, starts) * np.sum(width, axis=-1)
        self.label = rank_of_point.copy()
        self.next = len(starts)
        self.final = np.full(len(rank_of_point), -1, dtype=np.int64)  # W of the kept butterfly
        uniq, ids = np.unique(_row_key(self.codes), return_inverse=True) if attrs else (np.zeros(1), rank_of_point * 0)
        self.ids = (ids.reshape(-1), len(uniq))  # the wing's distinct values, for counting

    def compute(self, nodes: np.ndarray, p0: np.ndarray, p1: np.ndarray, k: int) -> None:
        """Section 4.2.5's wing for several disjoint nodes (point ranges [p0, p1)) at once."""
        if not len(nodes):
            return
        seg_sizes = p1 - p0
        idx = ragged(p0, seg_sizes)
        wg = segmented_mondrian(
            self.codes[idx], self.domains, list(range(len(self.attrs))), seg_sizes, k, (self.ids[0][idx], self.ids[1])
        )
        total = int(wg.n_groups.sum())
        group = wg.point_group[wg.point_of_row]  # numbered across the nodes
        self.label[idx] = self.next + group
        self.next += total
        if not self.attrs:
            self.loss[nodes] = 0.0
            return
        # loss = weight x sum of widths per group
        if self.x_hi is self.x_lo:  # one-level: rows of one point share its position
            at = idx[wg.first_row[wg.points_by_group]]
            counts = np.bincount(wg.point_group, minlength=total)
        else:
            at = idx[wg.rows_by_group()]
            counts = np.bincount(group, minlength=total)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        x_lo = self.x_lo[at]
        x_hi = x_lo if self.x_hi is self.x_lo else self.x_hi[at]
        width = (np.maximum.reduceat(x_hi, starts) - np.minimum.reduceat(x_lo, starts)).sum(axis=1)
        weight = np.bincount(group, weights=self.weight[idx], minlength=total)
        seg_first = np.concatenate(([0], np.cumsum(wg.n_groups)[:-1]))
        self.loss[nodes] = np.add.reduceat(weight * width, seg_first)


@dataclass(frozen=True)
class _Leaves:
    """The union QID's Mondrian tree with its leaves ranked depth-first and the points sorted by
    leaf rank (a node's points are then one range of the sorted points)."""

    tree: SplitTree
    depth: npt.NDArray[np.int64]  # per node
    first: npt.NDArray[np.int64]  # per node: its first leaf rank
    count: npt.NDArray[np.int64]  # per node: its number of leaves
    order: npt.NDArray[np.intp]  # sorted point -> point
    sizes: npt.NDArray[np.int64]  # per leaf rank: its points
    offsets: npt.NDArray[np.int64]  # per leaf rank: its first sorted point; then the point count
    leaves_at: npt.NDArray[np.int64]  # leaf rank -> node
    rank_of_point: npt.NDArray[np.int64]  # per sorted point: its leaf rank

    @property
    def n_leaves(self) -> int:
        return len(self.sizes)

    @property
    def starts(self) -> npt.NDArray[np.int64]:
        return self.offsets[:-1]

    def points(self, nodes: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The sorted points [p0, p1) under each node."""
        return self.offsets[self.first[nodes]], self.offsets[self.first[nodes] + self.count[nodes]]


def _union_leaves(pts: Points, lay: Layout, k: int) -> _Leaves:
    """Step 1: Mondrian on the union QID."""
    part = mondrian_partition(pts, k, columns=lay.union)
    tree = part.tree
    depth = node_depths(tree)
    first, count = leaf_ranges(tree, depth)
    leaf_node = tree.leaf_of_group()
    rank = first[leaf_node]  # group -> leaf rank
    n_leaves = part.n_groups
    group_of_rank = np.empty(n_leaves, dtype=np.int64)
    group_of_rank[rank] = np.arange(n_leaves)
    order = np.argsort(rank[part.group], kind="stable")  # points sorted by leaf rank
    sizes = np.bincount(part.group, minlength=n_leaves)[group_of_rank]
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    rank_of_point = np.repeat(np.arange(n_leaves), sizes)
    return _Leaves(tree, depth, first, count, order, sizes, offsets, leaf_node[group_of_rank], rank_of_point)


@dataclass(frozen=True)
class _NodeSums:
    """Per node of the union tree, set at the leaves and merged upwards: weight, the body's
    bounds, and per wing its i-NN summaries ((nodes, ranks) best i-NN inside leaves, (nodes,)
    best global (k-1)-NN)."""

    weight: npt.NDArray[np.float64]
    body_lo: npt.NDArray[np.float64]
    body_hi: npt.NDArray[np.float64]
    inn: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]

    def merge(self, lvl: npt.NDArray[np.int64], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> None:
        """Nodes lvl from their children a and b."""
        self.weight[lvl] = self.weight[a] + self.weight[b]
        self.body_lo[lvl] = np.minimum(self.body_lo[a], self.body_lo[b])
        self.body_hi[lvl] = np.maximum(self.body_hi[a], self.body_hi[b])
        for best, glob in self.inn:
            best[lvl] = np.minimum(best[a], best[b])
            glob[lvl] = np.minimum(glob[a], glob[b])


def _leaf_sums(sorted_pts: Points, lay: Layout, leaves: _Leaves, k: int) -> tuple[_NodeSums, npt.NDArray[np.float64]]:
    """The leaves' weights, body bounds and i-NN summaries, and each leaf's loss as a union class
    (per leaf rank)."""
    nodes, starts, leaves_at = leaves.tree.n_nodes, leaves.starts, leaves.leaves_at
    weight = np.zeros(nodes)
    body_lo = np.zeros((nodes, len(lay.body)))
    body_hi = np.zeros((nodes, len(lay.body)))
    weight[leaves_at] = np.add.reduceat(sorted_pts.weight, starts)
    leaf_loss = weight[leaves_at] * (
        np.maximum.reduceat(sorted_pts.x_hi, starts) - np.minimum.reduceat(sorted_pts.x_lo, starts)
    ).sum(axis=1)
    if lay.body:
        body_lo[leaves_at] = np.minimum.reduceat(sorted_pts.x_lo[:, lay.body], starts, axis=0)
        body_hi[leaves_at] = np.maximum.reduceat(sorted_pts.x_hi[:, lay.body], starts, axis=0)
    x = sorted_pts.x
    exact = sorted_pts.exact
    # internal nodes read i = ceil(k / m) - 1 with m >= 2 leaves: ranks below ceil(k / 2) only
    ranks = -(-k // 2)
    inn = []
    for attrs in lay.wings:
        best = np.zeros((nodes, ranks))
        best[leaves_at] = leaf_inn(
            x[:, attrs], starts, leaves.sizes, ranks, _row_key(sorted_pts.codes[:, attrs]) if exact else None
        )
        glob = np.zeros(nodes)
        glob[leaves_at] = leaf_global_knn(x[:, attrs], starts, k, sorted_pts.codes[:, attrs] if exact else None)
        inn.append((best, glob))
    return _NodeSums(weight, body_lo, body_hi, inn), leaf_loss


@dataclass
class _Walk:
    """The bottom-up walk's state: per node its loss and whether it is pruned, per sorted point
    its top-most kept butterfly (-1: none), the table's loss, and the counts reported in stats."""

    loss: npt.NDArray[np.float64]
    pruned: npt.NDArray[np.bool_]
    unit_node: npt.NDArray[np.int64]
    total: float
    checks: list[tuple[float, float]] = field(default_factory=list)  # (L(G), real loss) per build
    bound_hits: int = 0
    successes: int = 0
    inherited: int = 0


def _walk_level(
    lvl: npt.NDArray[np.int64],
    leaves: _Leaves,
    sums: _NodeSums,
    wings: list[_Wing],
    wing_of_qi: npt.NDArray[np.int64],
    walk: _Walk,
    k: int,
) -> None:
    """Step 2 on the internal nodes lvl of one depth (disjoint): a butterfly is built where
    Theorem 4's bound L(G) says it may pay (or the body agrees), kept where it does."""
    tree = leaves.tree
    a, b = tree.left[lvl], tree.right[lvl]
    sums.merge(lvl, a, b)
    child_loss = walk.loss[a] + walk.loss[b]
    walk.loss[lvl] = child_loss
    live = ~(walk.pruned[a] | walk.pruned[b])
    walk.pruned[lvl] = ~live
    body_loss = sums.weight[lvl] * (sums.body_hi[lvl] - sums.body_lo[lvl]).sum(axis=1)
    i = -(-k // leaves.count[lvl]) - 1  # ceil(k / m) - 1
    lam = sum(np.maximum(best[lvl, i], glob[lvl]) for best, glob in sums.inn)
    bound = sums.weight[lvl] * lam + body_loss
    agree = body_loss == 0
    build = live & (agree | (child_loss > bound))
    if build.any():
        _build(
            lvl[build],
            bound[build],
            body_loss[build],
            child_loss[build],
            agree[build],
            leaves,
            wings,
            wing_of_qi,
            walk,
            k,
        )
    # Loss(body) only grows upwards: once it reaches the table's loss no ancestor can gain
    walk.pruned[lvl] |= live & ~agree & (body_loss >= walk.total)


def _build(
    nodes: npt.NDArray[np.int64],
    bound: npt.NDArray[np.float64],
    body_loss: npt.NDArray[np.float64],
    child_loss: npt.NDArray[np.float64],
    agree: npt.NDArray[np.bool_],
    leaves: _Leaves,
    wings: list[_Wing],
    wing_of_qi: npt.NDArray[np.int64],
    walk: _Walk,
    k: int,
) -> None:
    """The butterflies of disjoint nodes: body plus each wing's loss; kept where below the
    children's loss."""
    tree = leaves.tree
    p0, p1 = leaves.points(nodes)
    real = body_loss.astype(float)
    for q, wing in enumerate(wings):
        l, r = tree.left[nodes], tree.right[nodes]
        inherit = (wing_of_qi[tree.dim[nodes]] == q) & ~np.isnan(wing.loss[l]) & ~np.isnan(wing.loss[r])
        wing.loss[nodes[inherit]] = wing.loss[l[inherit]] + wing.loss[r[inherit]]
        walk.inherited += int(inherit.sum())
        wing.compute(nodes[~inherit], p0[~inherit], p1[~inherit], k)
        real += wing.loss[nodes]
    walk.checks += list(zip(bound.tolist(), real.tolist()))
    keep = real < child_loss
    walk.bound_hits += int((~agree).sum())
    walk.successes += int((keep & ~agree).sum())
    if keep.any():
        at = ragged(p0[keep], (p1 - p0)[keep])
        walk.unit_node[at] = np.repeat(nodes[keep], (p1 - p0)[keep])
        for wing in wings:
            wing.final[at] = wing.label[at]
    walk.loss[nodes[keep]] = real[keep]
    walk.total += float((real[keep] - child_loss[keep]).sum())


def butterflies(pts: Points, lay: Layout, k: int) -> Assignment:
    """Steps 1 and 2: Mondrian on the union QID, then butterflies bottom-up where they pay."""
    leaves = _union_leaves(pts, lay, k)
    sorted_pts = pts.take(leaves.order)
    sums, leaf_loss = _leaf_sums(sorted_pts, lay, leaves, k)
    tree, nodes = leaves.tree, leaves.tree.n_nodes
    wings = [
        _Wing(sorted_pts, attrs, nodes, leaves.leaves_at, leaves.starts, leaves.rank_of_point) for attrs in lay.wings
    ]
    wing_of_qi = np.full(len(pts.domains), -1)
    for q, attrs in enumerate(lay.wings):
        wing_of_qi[attrs] = q

    loss = np.zeros(nodes)
    loss[leaves.leaves_at] = leaf_loss
    union_loss = float(leaf_loss.sum())
    unit_node = np.full(len(leaves.order), -1, dtype=np.int64)
    walk = _Walk(loss, np.zeros(nodes, dtype=bool), unit_node, union_loss)
    internal = np.flatnonzero(tree.left >= 0)
    # bottom-up one depth at a time: nodes of one depth are disjoint, so their butterflies are
    # built in one batch; an ancestor kept later overwrites its descendants' labels
    for d in range(int(leaves.depth.max()), -1, -1):
        lvl = internal[leaves.depth[internal] == d]
        if len(lvl):
            _walk_level(lvl, leaves, sums, wings, wing_of_qi, walk, k)

    return _assign(
        leaves.order,
        leaves.rank_of_point,
        walk.unit_node,
        [w.final for w in wings],
        [w.next for w in wings],
        walk.checks,
        {
            "union_classes": leaves.n_leaves,
            "union_loss": union_loss,
            "loss": walk.total,
            "bound_hits": walk.bound_hits,
            "bound_successes": walk.successes,
            "builds": len(walk.checks),
            "wings_inherited": walk.inherited,
        },
    )


def _compact(key: np.ndarray) -> tuple[np.ndarray, int]:
    """Relabel non-negative integer keys 0.. (in key order), linear time."""
    used = np.zeros(int(key.max()) + 1 if len(key) else 0, dtype=bool)
    used[key] = True
    return (np.cumsum(used) - 1)[key], int(used.sum())


def _assign(
    order: npt.NDArray[np.intp],
    rank_of_point: npt.NDArray[np.int64],
    unit_node: npt.NDArray[np.int64],
    wing_label: list[npt.NDArray[np.int64]],
    next_label: list[int],
    checks: list[tuple[float, float]],
    stats: dict[str, float],
) -> Assignment:
    """Top-most kept butterflies become units; every other leaf class is a unit of its own (and
    one wing group per QID)."""
    in_bf = unit_node >= 0
    # butterflies first (by node id), then the plain leaf classes (by leaf rank)
    unit_sorted, n_units = _compact(np.where(in_bf, unit_node, int(unit_node.max()) + 1 + rank_of_point))
    unit = np.empty_like(unit_sorted)
    unit[order] = unit_sorted
    wing, n_wing = [], []
    for labels, top in zip(wing_label, next_label):
        w_sorted, nw = _compact(np.where(in_bf, labels, top + rank_of_point))
        w = np.empty_like(w_sorted)
        w[order] = w_sorted
        wing.append(w)
        n_wing.append(nw)
    n_bf = len(np.unique(unit_node[in_bf]))
    stats = {**stats, "units": n_units, "butterflies": n_bf, "points_in_butterflies": int(in_bf.sum())}
    in_butterfly = np.empty_like(in_bf)
    in_butterfly[order] = in_bf
    return Assignment(unit, n_units, wing, n_wing, in_butterfly, stats, checks)

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

from tasks.microdata import QIDomain
from tasks.anonymize.butterfly_wings import segmented_mondrian
from tasks.partition.mondrian import SplitTree, mondrian_partition


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
        return (self.x_lo + self.x_hi) / 2

    def take(self, idx: np.ndarray) -> "Points":
        return Points(self.codes[idx], self.domains, self.x_lo[idx], self.x_hi[idx], self.weight[idx])

    @classmethod
    def of_rows(cls, codes: np.ndarray, domains: list[QIDomain]) -> "Points":
        x = scaled(domains, codes)
        return cls(codes, domains, x, x, np.ones(len(codes)))


def group_loss(pts: Points, group: np.ndarray, n_groups: int, attrs: list[int]) -> np.ndarray:
    """Loss of each group on `attrs` (weight x sum of scaled widths)."""
    if not attrs or n_groups == 0:
        return np.zeros(n_groups)
    order = np.argsort(group, kind="stable")
    sizes = np.bincount(group, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    lo = np.minimum.reduceat(pts.x_lo[order][:, attrs], starts, axis=0)
    hi = np.maximum.reduceat(pts.x_hi[order][:, attrs], starts, axis=0)
    w = np.bincount(group, weights=pts.weight, minlength=n_groups)
    return w * (hi - lo).sum(axis=1)


# --- i-NN distances (Definition 3) ------------------------------------------------------------

def leaf_inn(x: np.ndarray, starts: np.ndarray, sizes: np.ndarray, k: int) -> np.ndarray:
    """best[g, i] = min over t in leaf g of its i-th NN distance inside g (i = 0..k-1; 0 = itself).

    x: (n, d) positions already sorted by leaf; leaf g is x[starts[g]:starts[g]+sizes[g]]."""
    best = np.zeros((len(sizes), k))
    if x.shape[1] == 0:
        return best
    for s in np.unique(sizes):
        leaves = np.flatnonzero(sizes == s)
        per_leaf = s * s * x.shape[1]
        chunk = max(1, 5_000_000 // per_leaf)
        for c in range(0, len(leaves), chunk):
            if per_leaf > 5_000_000:  # one huge leaf: rows in blocks, keep the k smallest
                best[leaves[c]] = _big_leaf_inn(x[starts[leaves[c]]:starts[leaves[c]] + s], k)
                continue
            ids = leaves[c:c + chunk]
            pts = x[starts[ids][:, None] + np.arange(s)]  # (G, s, d)
            dist = np.abs(pts[:, :, None, :] - pts[:, None, :, :]).sum(axis=3)  # (G, s, s)
            dist.sort(axis=2)
            best[ids] = dist[:, :, :k].min(axis=1)
    return best


def _big_leaf_inn(x: np.ndarray, k: int) -> np.ndarray:
    out = np.full(k, np.inf)
    block = max(1, 5_000_000 // (len(x) * x.shape[1]))
    for b in range(0, len(x), block):
        dist = np.abs(x[b:b + block, None, :] - x[None, :, :]).sum(axis=2)
        near = np.sort(np.partition(dist, k - 1, axis=1)[:, :k], axis=1)
        out = np.minimum(out, near.min(axis=0))
    return out


def global_knn(x: np.ndarray, k: int) -> np.ndarray:
    """NNDist(t, k-1, T) of every point (L1 on the scaled attributes)."""
    if x.shape[1] == 0 or k <= 1:
        return np.zeros(len(x))
    from scipy.spatial import cKDTree

    # census-like data repeat points heavily: search distinct points, counting multiplicities
    uniq, inverse, mult = np.unique(x, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    out = np.zeros(len(uniq))
    need = np.flatnonzero(mult < k)  # a point repeated k times has its (k-1)-th NN at distance 0
    if len(need):
        kk = min(k, len(uniq))
        dist, idx = cKDTree(uniq).query(uniq[need], k=kk, p=1)
        dist, idx = dist.reshape(len(need), kk), idx.reshape(len(need), kk)
        reached = np.cumsum(mult[idx], axis=1) >= k  # first neighbour that completes k tuples
        out[need] = dist[np.arange(len(need)), reached.argmax(axis=1)]
    return out[inverse]


# --- the tree walk (Fig. 3) ---------------------------------------------------------------------

@dataclass
class Assignment:
    """Per point: its unit (leaf class or butterfly) and its wing group per QID."""

    unit: np.ndarray
    n_units: int
    wing: list[np.ndarray]
    n_wing: list[int]
    stats: dict = field(default_factory=dict)
    checks: list[tuple[float, float]] = field(default_factory=list)  # (L(G), real loss) per build


def _leaf_ranges(tree: SplitTree) -> tuple[np.ndarray, np.ndarray]:
    """First leaf rank and leaf count of every node, leaves ranked in depth-first order."""
    n = tree.n_nodes
    count = np.ones(n, dtype=np.int64)
    for node in tree.bottom_up():  # children before parents
        count[node] = count[tree.left[node]] + count[tree.right[node]]
    first = np.zeros(n, dtype=np.int64)
    for node in np.flatnonzero(tree.left >= 0):  # ids grow with depth: parents first
        first[tree.left[node]] = first[node]
        first[tree.right[node]] = first[node] + count[tree.left[node]]
    return first, count


def build_level(pts: Points, lay: Layout, k: int, p0: np.ndarray, p1: np.ndarray,
                body_loss: np.ndarray) -> tuple[np.ndarray, list[tuple[list[np.ndarray], list[int]]]]:
    """Section 4.2.5 for several disjoint nodes (point ranges [p0, p1) of `pts`) at once: one value
    on the body (its loss is given), each wing k-anonymized on its own with Mondrian rules.

    Returns each node's real loss and its wings (a group per point, group counts), per QID."""
    seg_sizes = p1 - p0
    idx = np.concatenate([np.arange(a, b) for a, b in zip(p0.tolist(), p1.tolist())])
    sub = pts.take(idx)
    seg_of_row = np.repeat(np.arange(len(p0)), seg_sizes)
    real = body_loss.astype(float).copy()
    wing_groups, wing_counts = [], []
    for attrs in lay.wings:
        group, n_groups = segmented_mondrian(sub.codes, sub.domains, attrs, seg_sizes, k)
        seg_first = np.concatenate(([0], np.cumsum(n_groups)[:-1]))
        per_group = group_loss(sub, group + seg_first[seg_of_row], int(n_groups.sum()), attrs)
        real += np.add.reduceat(per_group, seg_first)
        wing_groups.append(group)
        wing_counts.append(n_groups)
    bounds = np.concatenate(([0], np.cumsum(seg_sizes)))
    wings = [([g[bounds[j]:bounds[j + 1]] for g in wing_groups], [int(c[j]) for c in wing_counts])
             for j in range(len(p0))]
    return real, wings


def butterflies(pts: Points, lay: Layout, k: int) -> Assignment:
    """Steps 1 and 2: Mondrian on the union QID, then butterflies bottom-up where they pay."""
    part = mondrian_partition(pts, k, columns=lay.union)
    tree = part.tree
    first, count = _leaf_ranges(tree)
    leaf_node = tree.leaf_of_group()
    rank = first[leaf_node]  # group -> leaf rank
    n_leaves = part.n_groups
    group_of_rank = np.empty(n_leaves, dtype=np.int64)
    group_of_rank[rank] = np.arange(n_leaves)
    order = np.argsort(rank[part.group], kind="stable")  # points sorted by leaf rank
    sizes = np.bincount(part.group, minlength=n_leaves)[group_of_rank]
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    starts = offsets[:-1]

    # per leaf (in rank order): weight, body bounds, loss as a union class, i-NN summaries
    sorted_pts = pts.take(order)
    rank_of_point = np.repeat(np.arange(n_leaves), sizes)
    everything = list(range(len(pts.domains)))
    leaf_loss = group_loss(sorted_pts, rank_of_point, n_leaves, everything)
    nodes = tree.n_nodes
    weight = np.zeros(nodes)
    body_lo = np.zeros((nodes, len(lay.body)))
    body_hi = np.zeros((nodes, len(lay.body)))
    leaves_at = leaf_node[group_of_rank]
    weight[leaves_at] = np.add.reduceat(sorted_pts.weight, starts)
    if lay.body:
        body_lo[leaves_at] = np.minimum.reduceat(sorted_pts.x_lo[:, lay.body], starts, axis=0)
        body_hi[leaves_at] = np.maximum.reduceat(sorted_pts.x_hi[:, lay.body], starts, axis=0)
    x = sorted_pts.x
    inn = []  # per wing: (nodes, k) best i-NN inside leaves, (nodes,) best global (k-1)-NN
    for attrs in lay.wings:
        best = np.zeros((nodes, k))
        best[leaves_at] = leaf_inn(x[:, attrs], starts, sizes, k)
        glob = np.zeros(nodes)
        glob[leaves_at] = np.minimum.reduceat(global_knn(x[:, attrs], k), starts)
        inn.append((best, glob))

    loss = np.zeros(nodes)
    loss[leaves_at] = leaf_loss
    total = float(leaf_loss.sum())
    union_loss = total
    pruned = np.zeros(nodes, dtype=bool)
    kept: dict[int, tuple[list[np.ndarray], list[int]]] = {}
    checks: list[tuple[float, float]] = []
    bound_hits = successes = 0
    depth = np.zeros(nodes, dtype=np.int64)
    for node in range(1, nodes):  # parents have smaller ids
        depth[node] = depth[tree.parent[node]] + 1
    internal = np.flatnonzero(tree.left >= 0)
    # bottom-up one depth at a time: nodes of one depth are disjoint, so their butterflies are
    # built in one batch
    for d in range(int(depth.max()), -1, -1):
        lvl = internal[depth[internal] == d]
        if not len(lvl):
            continue
        a, b = tree.left[lvl], tree.right[lvl]
        weight[lvl] = weight[a] + weight[b]
        body_lo[lvl] = np.minimum(body_lo[a], body_lo[b])
        body_hi[lvl] = np.maximum(body_hi[a], body_hi[b])
        for best, glob in inn:
            best[lvl] = np.minimum(best[a], best[b])
            glob[lvl] = np.minimum(glob[a], glob[b])
        child_loss = loss[a] + loss[b]
        loss[lvl] = child_loss
        live = ~(pruned[a] | pruned[b])
        pruned[lvl] = ~live
        body_loss = weight[lvl] * (body_hi[lvl] - body_lo[lvl]).sum(axis=1)
        i = -(-k // count[lvl]) - 1  # ceil(k / m) - 1
        lam = sum(np.maximum(best[lvl, i], glob[lvl]) for best, glob in inn)
        bound = weight[lvl] * lam + body_loss
        agree = body_loss == 0
        build = live & (agree | (child_loss > bound))
        if build.any():
            nodes_b = lvl[build]
            p0, p1 = offsets[first[nodes_b]], offsets[first[nodes_b] + count[nodes_b]]
            real, wings = build_level(sorted_pts, lay, k, p0, p1, body_loss[build])
            checks += list(zip(bound[build].tolist(), real.tolist()))
            keep = real < child_loss[build]
            bound_hits += int((~agree[build]).sum())
            successes += int((keep & ~agree[build]).sum())
            for j in np.flatnonzero(keep):
                kept[int(nodes_b[j])] = wings[j]
            loss[nodes_b[keep]] = real[keep]
            total += float((real[keep] - child_loss[build][keep]).sum())
        # Loss(body) only grows upwards: once it reaches the table's loss no ancestor can gain
        pruned[lvl] |= live & ~agree & (body_loss >= total)

    return _assign(tree, order, offsets, first, count, leaves_at, kept, len(lay.wings), checks, {
        "union_classes": n_leaves, "union_loss": union_loss, "loss": total,
        "bound_hits": bound_hits, "bound_successes": successes, "builds": len(checks)})


def _assign(tree, order, offsets, first, count, leaves_at, kept, n_qids, checks, stats) -> Assignment:
    """Top-most kept butterflies become units; every other leaf class is a unit of its own."""
    n = len(order)
    top = np.full(tree.n_nodes, -1, dtype=np.int64)
    for node in range(tree.n_nodes):
        parent = tree.parent[node]
        if parent >= 0 and top[parent] >= 0:
            top[node] = top[parent]
        elif node in kept:
            top[node] = node
    unit_sorted = np.empty(n, dtype=np.int64)
    wing_sorted = [np.empty(n, dtype=np.int64) for _ in range(n_qids)]
    n_units = 0
    n_wing = [0] * n_qids
    in_bf = 0
    tops = sorted(set(top[top >= 0].tolist()))
    for node in tops:
        p0, p1 = offsets[first[node]], offsets[first[node] + count[node]]
        unit_sorted[p0:p1] = n_units
        n_units += 1
        in_bf += p1 - p0
        wings, sizes = kept[node]
        for q in range(n_qids):
            wing_sorted[q][p0:p1] = n_wing[q] + wings[q]
            n_wing[q] += sizes[q]
    plain = [r for r, node in enumerate(leaves_at) if top[node] < 0]
    for r in plain:
        p0, p1 = offsets[r], offsets[r + 1]
        unit_sorted[p0:p1] = n_units
        n_units += 1
        for q in range(n_qids):
            wing_sorted[q][p0:p1] = n_wing[q]
            n_wing[q] += 1
    unit = np.empty(n, dtype=np.int64)
    unit[order] = unit_sorted
    wing = []
    for q in range(n_qids):
        w = np.empty(n, dtype=np.int64)
        w[order] = wing_sorted[q]
        wing.append(w)
    stats = {**stats, "units": n_units, "butterflies": len(tops), "points_in_butterflies": int(in_bf)}
    return Assignment(unit, n_units, wing, n_wing, stats, checks)

"""Privacy models on the sensitive values of groups: distinct, entropy and recursive (c, l)-diversity
(Machanavajjhala et al. 2007), t-closeness under the Earth Mover's Distance (Li, Li and
Venkatasubramanian 2007) and basic beta-likeness (Cao and Karras 2012), docs/models.md.

Every figure is computed from sparse per-(group, value) counts: three arrays `g`, `v`, `n` sorted
by group then value (`pair_counts`), so no groups x values matrix is ever built. The same
functions serve the verifier (groups = the equivalence classes of a published table, the overall
distribution = the published table's) and Mondrian (groups = the two sides of every candidate
split, the overall distribution = the rows being partitioned).

Values are coded by their `Ground` distance: 0..m-1 in the order the ordered distance walks
(numbers ascending, or `[dataset] sensitive_order`), or the leaves of `[dataset]
sensitive_hierarchy` in depth-first order; the equal distance ignores the order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privpub.tasks.core.microdata import hierarchy_leaves

# A figure within this relative distance of its threshold passes: the figures are sums of float
# terms, each exact value only rounded (an entropy of exactly log l may come out 1 ulp below).
ROUNDING = 1e-12

# (groups x values) cells counted with one bincount rather than a sort of the keys
_DENSE_CELLS = 1 << 22


def pair_counts(
    group: np.ndarray, value: np.ndarray, n_groups: int, m: int, weights: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """Rows per (group, value) that occur: (g, v, n), sorted by group then value. Linear
    (one bincount) while groups x values is small, else a sort of the keys. weights: rows each
    entry stands for (a published count table's counts), else one each."""
    key = group.astype(np.int64) * m + value
    if n_groups * m <= max(_DENSE_CELLS, 4 * len(key)):
        counts = np.bincount(key, weights=weights, minlength=n_groups * m)
        cells = np.flatnonzero(counts)
        n = counts[cells]
    elif weights is None:
        cells, n = sorted_counts(key)
    else:
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        start = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        cells, n = ordered[start], np.add.reduceat(weights[order], start)
    return cells // m, cells % m, n.astype(np.int64)


def sorted_counts(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys in order and how often each occurs, by one sort (numpy's np.unique may
    hash instead, several times slower on a million keys)."""
    ordered = np.sort(key)
    start = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[start], np.diff(np.append(start, len(ordered)))


def group_totals(g: np.ndarray, n: np.ndarray, n_groups: int) -> np.ndarray:
    return np.bincount(g, weights=n, minlength=n_groups)


def entropy(g: np.ndarray, n: np.ndarray, n_groups: int) -> np.ndarray:
    """Shannon entropy (natural log) of each group's values: log N - sum(n log n) / N.
    An empty group has entropy 0."""
    total = group_totals(g, n, n_groups)
    nlogn = np.bincount(g, weights=n * np.log(n), minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.log(total) - nlogn / total
    return np.where(total > 0, np.maximum(h, 0.0), 0.0)


def entropy_passes(h: np.ndarray, l: int) -> np.ndarray:
    """Entropy l-diversity: H >= log l (up to rounding)."""
    result: np.ndarray = h >= np.log(l) * (1 - ROUNDING)
    return result


def recursive_terms(g: np.ndarray, n: np.ndarray, n_groups: int, l: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, r1 and r_l + ... + r_m of its counts sorted in DESCENDING order
    (Machanavajjhala et al. 2007, Definition 4.1); the tail is 0 for a group of fewer than l values."""
    order = np.lexsort((-n, g))
    gs, ns = g[order], n[order]
    first = np.searchsorted(gs, np.arange(n_groups))
    rank = np.arange(len(gs)) - first[gs]
    r1 = np.zeros(n_groups, dtype=np.int64)
    top = rank == 0
    r1[gs[top]] = ns[top]
    tail = rank >= l - 1
    return r1, np.bincount(gs[tail], weights=ns[tail], minlength=n_groups).astype(np.int64)


def recursive_passes(r1: np.ndarray, tail: np.ndarray, c: float) -> np.ndarray:
    """Recursive (c, l)-diversity: r1 < c (r_l + ... + r_m), strictly."""
    return r1 < c * tail


@dataclass(frozen=True)
class Ground:
    """The ground distance between sensitive values, on codes 0..m-1.

    equal: every two values at distance 1. ordered: |i - j| / (m - 1). hierarchical: the height
    of the two leaves' lowest common ancestor over the tree's height; `node_of` / `start` list,
    per leaf, the nodes on its path up to (not including) the root, and `weight` is half the
    height step from a node to its parent over the tree's height, so that the EMD is
    sum over nodes C of weight[C] |P(C) - Q(C)| (the flow across the edge above C)."""

    kind: str  # equal | ordered | hierarchical
    m: int
    start: np.ndarray | None = None  # (m + 1,) where each leaf's path starts in node_of
    node_of: np.ndarray | None = None
    weight: np.ndarray | None = None  # per node
    n_nodes: int = 0

    @classmethod
    def hierarchical(cls, hierarchy: dict[str, list[str]]) -> tuple[Ground, list[str]]:
        """The ground distance of a tree {parent: [children]} (one root), and its leaves in code order."""
        leaves = hierarchy_leaves(hierarchy)
        parent_of = {c: p for p, kids in hierarchy.items() for c in kids}
        names = [*hierarchy, *(c for c in leaves if c not in hierarchy)]
        index = {name: i for i, name in enumerate(names)}
        height = np.zeros(len(names))
        for name in _bottom_up(hierarchy, leaves):
            kids = hierarchy.get(name)
            if kids:
                height[index[name]] = 1 + max(height[index[c]] for c in kids)
        root_height = float(height.max()) or 1.0
        weight = np.zeros(len(names))
        for child, parent in parent_of.items():
            weight[index[child]] = (height[index[parent]] - height[index[child]]) / (2 * root_height)
        paths = []
        for leaf in leaves:
            path, node = [], leaf
            while node in parent_of:  # up to the root, which has no edge above it
                path.append(index[node])
                node = parent_of[node]
            paths.append(path)
        start = np.concatenate([[0], np.cumsum([len(p) for p in paths])]).astype(np.int64)
        node_of = np.array([i for p in paths for i in p], dtype=np.int64)
        return cls("hierarchical", len(leaves), start, node_of, weight, len(names)), leaves


def _bottom_up(hierarchy: dict[str, list[str]], leaves: list[str]) -> list[str]:
    """Nodes of the tree, every node after its children (a loop over nodes of the spec, not rows)."""
    out: list[str] = []
    done: set[str] = set()
    stack = [(p, False) for p in hierarchy]
    while stack:
        node, expanded = stack.pop()
        if node in done:
            continue
        if expanded or not hierarchy.get(node):
            done.add(node)
            out.append(node)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in hierarchy[node] if c not in done)
    return out


def distribution(counts: np.ndarray) -> np.ndarray:
    """The overall distribution q over the m codes from the rows per code."""
    total = counts.sum()
    return counts / total if total else counts.astype(float)


def emd(ground: Ground, g: np.ndarray, v: np.ndarray, n: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
    """Earth Mover's Distance of each group's value distribution to the overall one (`counts`:
    rows per code over all groups' rows, or over the table the groups partition)."""
    if ground.kind == "equal":
        return emd_equal(g, v, n, n_groups, counts)
    if ground.kind == "ordered":
        return emd_ordered(g, v, n, n_groups, counts)
    return emd_hierarchical(ground, g, v, n, n_groups, counts)


def emd_equal(g: np.ndarray, v: np.ndarray, n: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
    """Equal distance: half the L1 distance, 0.5 sum_v |p_v - q_v|. A value absent from the group
    contributes q_v: sum over absent q_v = 1 - sum over present q_v."""
    q = distribution(counts)
    p = n / group_totals(g, n, n_groups)[g]
    present = np.bincount(g, weights=np.abs(p - q[v]) - q[v], minlength=n_groups)
    result: np.ndarray = np.maximum(0.5 * (1.0 + present), 0.0)
    return result


def emd_ordered(g: np.ndarray, v: np.ndarray, n: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
    """Ordered distance: sum_{i < m-1} |P_i - Q_i| / (m - 1), P and Q cumulative.

    Between two values a group holds its P is constant while Q grows, so each (group, value)
    pair stands for a run of i in [v, next value - 1], summed in O(log m) from prefix sums of Q
    (split where Q passes P). Cumulative counts are integers, so P and Q are exact up to one
    division each."""
    m = len(counts)
    if m <= 1:
        return np.zeros(n_groups)
    cum_q = np.cumsum(counts) / counts.sum()  # Q_i
    prefix = np.concatenate(([0.0], np.cumsum(cum_q)))  # prefix[i] = Q_0 + ... + Q_{i-1}
    total = group_totals(g, n, n_groups)
    running = np.cumsum(n)
    first = np.searchsorted(g, np.arange(n_groups))  # each group's first pair
    has = first < len(g)
    before = np.where(first > 0, running[np.maximum(first - 1, 0)], 0)
    big_p = (running - before[g]) / total[g]  # P from this pair's value up to the next one
    last = np.ones(len(g), dtype=bool)
    last[:-1] = g[1:] != g[:-1]
    nxt = np.where(last, m - 1, np.append(v[1:], m - 1))  # the run is [v, nxt - 1], i < m - 1
    runs = _abs_sum(prefix, cum_q, v, nxt, big_p)
    out = np.bincount(g, weights=runs, minlength=n_groups)
    lead = np.where(has, prefix[v[np.minimum(first, len(g) - 1)]] if len(g) else 0.0, 0.0)  # P = 0 before
    return (out + lead) / (m - 1)


def _abs_sum(prefix: np.ndarray, cum_q: np.ndarray, a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """sum_{i=a}^{b-1} |p - Q_i| for non-decreasing Q, per run."""
    split = np.clip(np.searchsorted(cum_q, p, side="left"), a, b)  # Q_i < p before split
    below = (split - a) * p - (prefix[split] - prefix[a])
    above = (prefix[b] - prefix[split]) - (b - split) * p
    result: np.ndarray = below + above
    return result


def emd_hierarchical(
    ground: Ground, g: np.ndarray, v: np.ndarray, n: np.ndarray, n_groups: int, counts: np.ndarray
) -> np.ndarray:
    """Hierarchical distance: sum over non-root nodes C of weight[C] |P(C) - Q(C)| (Li et al.
    2007 write it as sum over internal nodes N of height(N)/H min(pos_extra, neg_extra); both are
    the tree's transport cost). A node none of a group's values lies under has P(C) = 0 and costs
    weight[C] Q(C): that constant is added once, and each node that is touched corrects it."""
    assert ground.start is not None and ground.node_of is not None and ground.weight is not None
    total_rows = counts.sum()
    node_rows = np.zeros(ground.n_nodes)
    leaf_paths = np.diff(ground.start)
    leaf_rep = np.repeat(np.arange(ground.m), leaf_paths)
    np.add.at(node_rows, ground.node_of, counts[leaf_rep])
    q_node = node_rows / total_rows if total_rows else node_rows
    base = float(ground.weight @ q_node)
    # every (group, node above one of its values) pair, with the group's rows under that node
    steps = leaf_paths[v]
    pair = np.repeat(np.arange(len(g)), steps)
    within = np.arange(len(pair)) - np.repeat(np.cumsum(steps) - steps, steps)
    node = ground.node_of[ground.start[v][pair] + within]
    gn, nodes, rows = pair_counts_weighted(g[pair], node, n[pair], n_groups, ground.n_nodes)
    p_node = rows / group_totals(g, n, n_groups)[gn]
    fix = ground.weight[nodes] * (np.abs(p_node - q_node[nodes]) - q_node[nodes])
    result: np.ndarray = np.maximum(base + np.bincount(gn, weights=fix, minlength=n_groups), 0.0)
    return result


def pair_counts_weighted(
    group: np.ndarray, node: np.ndarray, w: np.ndarray, n_groups: int, n_nodes: int
) -> tuple[np.ndarray, ...]:
    """sum of w per (group, node) that occurs: (group, node, sum)."""
    key = group.astype(np.int64) * n_nodes + node
    cells, inverse = np.unique(key, return_inverse=True)
    sums = np.bincount(inverse, weights=w, minlength=len(cells))
    return cells // n_nodes, cells % n_nodes, sums


def closeness_passes(distance: np.ndarray, t: float) -> np.ndarray:
    """t-closeness: EMD <= t (up to rounding)."""
    return distance <= t + ROUNDING


def likeness_gain(g: np.ndarray, v: np.ndarray, n: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
    """Per group, the largest relative gain (p - q) / q over the values it holds, p the value's
    share in the group and q its share in the table (`counts`: rows per code over the table the
    groups partition). A group's shares and the table's both sum to 1, so some value it holds
    has p >= q: the largest gain is never negative (an empty group: 0). Computed from whole
    counts with one division, (n T - c N) / (c N) (T the table's rows, c the value's, N the
    group's), so a gain that is a whole number or a short fraction comes out exact."""
    gain = np.zeros(n_groups)
    if len(g):
        np.maximum.at(gain, g, pair_gain(g, v, n, n_groups, counts))
    return gain


def pair_gain(g: np.ndarray, v: np.ndarray, n: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
    """(p - q) / q of every (group, value) pair, as likeness_gain computes it."""
    size = group_totals(g, n, n_groups).astype(np.int64)[g]
    held = counts.astype(np.int64)[v]
    result: np.ndarray = (n.astype(np.int64) * int(counts.sum()) - held * size) / (held * size)
    return result


def likeness_passes(gain: np.ndarray, beta: float) -> np.ndarray:
    """Basic beta-likeness: every value's gain at most beta (up to rounding)."""
    return gain <= beta + ROUNDING * max(beta, 1.0)


def distinct_per_group(group: np.ndarray, value: np.ndarray, n_groups: int, m: int) -> np.ndarray:
    """Distinct values per group: a presence bitmap while groups x values is small (linear),
    else a sort of the keys (a bitmap far larger than the rows costs more to clear and sum)."""
    key = group.astype(np.int64) * m + value
    if n_groups * m <= max(_DENSE_CELLS, 4 * len(key)):
        seen = np.zeros(n_groups * m, dtype=bool)
        seen[key] = True
        result: np.ndarray = seen.reshape(n_groups, m).sum(axis=1)
        return result
    return np.bincount(sorted_counts(key)[0] // m, minlength=n_groups)


def ground_codes(
    values: np.ndarray, closeness: str, order: list[str] | None, hierarchy: dict[str, list[str]] | None
) -> tuple[Ground, np.ndarray]:
    """The ground distance and the code of each of `values` (distinct sensitive values) on it.

    ordered: values ranked by `order` (compared as text) or, without one, as numbers; m is the
    number of distinct values present (as pycanon counts it). hierarchical: the leaves' codes;
    m counts every leaf (a leaf no row holds has p = q = 0). A value outside the order or the
    leaves is a ValueError (the input schema refuses such rows before any work)."""
    m = len(values)
    if closeness == "equal":
        return Ground("equal", m), np.arange(m, dtype=np.int64)
    if closeness == "hierarchical":
        assert hierarchy is not None  # the parameters refuse hierarchical without a hierarchy
        ground, leaves = Ground.hierarchical(hierarchy)
        return ground, _positions(values, leaves, "a leaf of [dataset] sensitive_hierarchy")
    if order is not None:
        rank = _positions(values, order, "in [dataset] sensitive_order")
    else:
        try:
            rank = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(
                "the ordered distance needs numeric sensitive values or [dataset] sensitive_order"
            ) from None
    codes = np.empty(m, dtype=np.int64)
    codes[np.argsort(rank, kind="stable")] = np.arange(m)
    return Ground("ordered", m), codes


def _positions(values: np.ndarray, names: list[str], what: str) -> np.ndarray:
    index = {name: i for i, name in enumerate(names)}
    pos = np.array([index.get(str(v), -1) for v in values], dtype=np.int64)  # one per distinct value
    if (pos < 0).any():
        raise ValueError(f"a sensitive value is not {what}")
    return pos


@dataclass(frozen=True)
class SensitiveModel:
    """The sensitive-value models a release must meet, on ground codes 0..m-1.

    diversity: distinct | entropy | recursive (with `l`, and `c` for recursive) or None;
    t: the t-closeness bound (None: no closeness) on `ground`, measured against `counts`, the
    rows per code of the table the groups partition; beta: the basic beta-likeness bound (None:
    none), against the same `counts`."""

    diversity: str | None
    l: int | None
    c: float | None
    t: float | None
    ground: Ground
    counts: np.ndarray
    code_of: np.ndarray | None = None  # ground code of each data sensitive code (None: the same)
    beta: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.l and self.l > 1) or self.t is not None or self.beta is not None

    def codes(self, sensitive_codes: np.ndarray) -> np.ndarray:
        return sensitive_codes if self.code_of is None else self.code_of[sensitive_codes]

    @classmethod
    def distinct(cls, l: int, m: int) -> SensitiveModel:
        """Distinct l-diversity alone, on any coding of m values."""
        return cls("distinct", l, None, None, Ground("equal", m), np.zeros(0, dtype=np.int64))

    @property
    def m(self) -> int:
        return self.ground.m

    @property
    def needs_counts(self) -> bool:
        return self.diversity in ("entropy", "recursive") or self.t is not None or self.beta is not None

    def groups_ok(self, group: np.ndarray, value: np.ndarray, n_groups: int) -> np.ndarray:
        """Which groups (rows' group ids, their ground codes) meet every model."""
        ok = np.ones(n_groups, dtype=bool)
        if self.diversity == "distinct" and self.l and self.l > 1:
            ok &= distinct_per_group(group, value, n_groups, self.m) >= self.l
        if not self.needs_counts:
            return ok
        g, v, n = pair_counts(group, value, n_groups, self.m)
        result: np.ndarray = ok & self.pairs_ok(g, v, n, n_groups)
        return result

    def pairs_ok(self, g: np.ndarray, v: np.ndarray, n: np.ndarray, n_groups: int) -> np.ndarray:
        ok = np.ones(n_groups, dtype=bool)
        if self.diversity == "entropy" and self.l:
            ok &= entropy_passes(entropy(g, n, n_groups), self.l)
        if self.diversity == "recursive" and self.l:
            assert self.c is not None  # the parameters require c with recursive
            ok &= recursive_passes(*recursive_terms(g, n, n_groups, self.l), self.c)
        if self.t is not None:
            ok &= closeness_passes(emd(self.ground, g, v, n, n_groups, self.counts), self.t)
        if self.beta is not None:
            ok &= likeness_passes(likeness_gain(g, v, n, n_groups, self.counts), self.beta)
        return ok

    def table_problem(self, value: np.ndarray) -> str | None:
        """Why no partition of these rows can meet the models (the whole table fails), or None.
        (t-closeness and beta-likeness always hold for the whole table: it is its own distribution.)"""
        if len(value) == 0 or self.groups_ok(np.zeros(len(value), dtype=np.int64), value, 1)[0]:
            return None
        distinct = len(np.unique(value))
        if self.diversity == "entropy":
            g, _, n = pair_counts(np.zeros(len(value), dtype=np.int64), value, 1, self.m)
            return (
                f"entropy l-diversity with l = {self.l} needs exp(entropy) >= l for the whole table, "
                f"which reaches {float(np.exp(entropy(g, n, 1)[0])):.4g}"
            )
        if self.diversity == "recursive":
            return (
                f"recursive (c, l)-diversity with c = {self.c}, l = {self.l} does not hold for the whole table "
                f"({distinct} distinct sensitive values): no partition of it can meet it"
            )
        return f"l = {self.l} but the table has only {distinct} distinct sensitive values"


@dataclass(frozen=True)
class ModelChoice:
    """What a release asks of its sensitive values (the technique's parameters and the
    dataset's order or hierarchy of the sensitive column)."""

    diversity: str | None = None  # distinct | entropy | recursive (None: no l)
    l: int | None = None
    c: float | None = None
    t: float | None = None
    closeness: str | None = None  # equal | ordered | hierarchical (with t)
    order: list[str] | None = None
    hierarchy: dict[str, list[str]] | None = None
    beta: float | None = None  # basic beta-likeness

    def model(self, values: np.ndarray, rows: np.ndarray) -> SensitiveModel:
        """The model over a table whose distinct sensitive values are `values`, held by `rows`
        rows each: its ground codes and the overall distribution."""
        if self.t is not None:
            ground, code_of = ground_codes(values, self.closeness or "equal", self.order, self.hierarchy)
        else:  # no distance: any coding will do
            ground, code_of = Ground("equal", len(values)), np.arange(len(values), dtype=np.int64)
        counts = np.bincount(code_of, weights=rows, minlength=ground.m).astype(np.int64)
        diversity = self.diversity if self.l else None
        return SensitiveModel(diversity, self.l, self.c, self.t, ground, counts, code_of, self.beta)

"""One branch of the knowledge and one query set that form a tree (a laminar family, issue 31).

When any two sets among a branch's facts, the query and (closed world) the whole population are
nested or disjoint, the sets form a tree. Every person then lies in exactly one *region*: a node
minus its children. A fact's region holds a fixed multiset (the fact's counts minus its
children's); in the closed world so does the root's (the public counts minus the top facts'); in
the open world the people in no fact are free over the domain. The branch's instances are the
products of one permutation per region, so a person can hold exactly the values of their region's
multiset.

A query q of the tree is some whole children of one node F (multiset `base`, fixed) plus a part A
of F's own region R (multiset `pool`, or free); B = R - A. Its answer is base + x, x the multiset
of A, and fixing it splits R into A (holding x) and B (holding pool - x), nothing else changes.
`split_of` finds that structure, or None when the family is not laminar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privpub.tasks.audit.program import Constraint


@dataclass(frozen=True)
class RegionSplit:
    """How one query set splits one branch (see the module docstring).

    label[p] is p's region; support[r] the values region r's people can hold (rows a_id and b_id,
    A and B, depend on the answer: there support is that of the split region R before any
    answer). With a == 0 the answer is fixed (base) and no region is split (a_id = b_id = -1).
    """

    label: np.ndarray  # per person: region id
    support: np.ndarray  # regions x values, bool
    base: np.ndarray  # the query's whole children: their multiset (counts per value)
    pool: np.ndarray | None  # R's multiset; None when R is free (open world, people in no fact)
    a: int  # |A|
    b: int  # |B|
    a_id: int
    b_id: int

    def present(self) -> np.ndarray:
        """Which regions hold at least one person."""
        return np.bincount(self.label, minlength=len(self.support)) > 0

    def possible(self, x: np.ndarray) -> bool:
        """Is x (counts per value) a multiset A can hold?"""
        if (x < 0).any() or int(x.sum()) != self.a:
            return False
        return self.pool is None or bool((x <= self.pool).all())


def split_of(
    n: int, totals: tuple[int, ...] | None, n_values: int, branch: Sequence[Constraint], query: frozenset[int]
) -> RegionSplit | None:
    """The regions of `branch` and the split `query` makes, or None when the facts and the query
    are not laminar (or the branch is inconsistent: then the other routes decide)."""
    nodes: dict[frozenset[int], tuple[int, ...]] = {}
    for fact in branch:
        if not isinstance(fact, Constraint):
            return None
        if not fact.members:  # an empty set's fact (an empty query answered) says nothing
            if any(fact.counts):
                return None
            continue
        if nodes.setdefault(fact.members, fact.counts) != fact.counts:
            return None
    sets = sorted(nodes, key=len, reverse=True)
    k = len(sets)
    root = k
    label = np.full(n, root, dtype=np.int64)  # smallest node holding each person so far
    parent = np.empty(k, dtype=np.int64)
    for i, s in enumerate(sets):  # largest first: a node's members must all sit in one node
        members = np.fromiter(s, dtype=np.int64, count=len(s))
        held = label[members]
        if (held != held[0]).any():
            return None
        parent[i] = held[0]
        label[members] = i
    counts = np.array([nodes[s] for s in sets], dtype=np.int64).reshape(k, n_values)
    region = np.zeros((k + 2, n_values), dtype=np.int64)  # rows: nodes, root, A
    region[:k] = counts
    if totals is not None:
        region[root] = totals
    np.subtract.at(region, parent, counts)  # a node's region: its counts minus its children's
    sizes = np.bincount(label, minlength=k + 2)
    fixed = slice(0, k + 1) if totals is not None else slice(0, k)
    if (region[fixed] < 0).any() or (region[fixed].sum(axis=1) != sizes[fixed]).any():
        return None  # an inconsistent branch: left to the other routes

    q = np.fromiter(query, dtype=np.int64, count=len(query))
    inside = np.bincount(label[q], minlength=k + 1)[: k + 1]
    for i in range(k - 1, -1, -1):  # children after parents (sizes descending): sum up the tree
        inside[parent[i]] += inside[i]
    node_sizes = np.array([len(s) for s in sets], dtype=np.int64)
    meet = inside[:k]
    if ((meet > 0) & (meet < node_sizes) & (meet < len(q))).any():
        return None  # q and a fact overlap without nesting
    holders = np.flatnonzero(meet == len(q))  # the nodes holding q
    support = region > 0
    if totals is None:
        support[root] = True  # free: any value of the domain
    equal = holders[node_sizes[holders] == len(q)]
    if len(equal):  # q is a fact's set: its answer is that fact's
        return RegionSplit(label, support, counts[equal[0]], None, 0, 0, -1, -1)
    f = int(holders[np.argmin(node_sizes[holders])]) if len(holders) else root
    children = (meet == node_sizes) & (parent == f)
    base = counts[children].sum(axis=0)
    a_members = q[label[q] == f]
    label = label.copy()
    if len(a_members) == 0:
        return RegionSplit(label, support, base, None, 0, 0, -1, -1)
    label[a_members] = k + 1
    pool = None if (f == root and totals is None) else region[f]
    support[k + 1] = support[f]
    return RegionSplit(label, support, base, pool, len(a_members), int(sizes[f]) - len(a_members), k + 1, f)

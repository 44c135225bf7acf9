"""The published tables of a serial release.

table   one row per real tuple: gid, the group's generalized QIs, the sensitive value (null where
        suppressed). Rows are sorted by (gid, sensitive value) so their order says nothing about
        which member holds which value.
groups  gid, size (real tuples plus the virtual members counted in the group).

Generalization of a group (its members include its virtual members):
- numeric:      <qi>_lo, <qi>_hi = min and max of the members' values
- ordinal:      <qi> = list of the domain values from the lowest to the highest member's value
- categorical:  <qi> = with a hierarchy, the leaves of the smallest subtree covering the members;
                without one, the distinct values of the members (domain order)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privpub.tasks.core.microdata import QIDomain


def _node_ranges(domain: QIDomain) -> np.ndarray:
    """(lo, hi) leaf-code range of every node of a hierarchy (leaves are contiguous, depth-first)."""
    code = {v: i for i, v in enumerate(domain.values)}
    hierarchy = domain.hierarchy or {}
    memo: dict[str, tuple[int, int]] = {}

    def span(node: str) -> tuple[int, int]:
        if node not in memo:
            kids = hierarchy.get(node)
            if kids:
                parts = [span(k) for k in kids]
                memo[node] = (min(p[0] for p in parts), max(p[1] for p in parts))
            else:
                memo[node] = (code[node], code[node])
        return memo[node]

    return np.array([span(node) for node in hierarchy] or [(0, domain.size - 1)], dtype=np.int64)


def _value_lists(domain: QIDomain, lo: np.ndarray, hi: np.ndarray) -> pa.Array:
    """A list per group: the domain values of codes lo..hi."""
    lengths = hi - lo + 1
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    flat = np.repeat(lo, lengths) + (np.arange(offsets[-1]) - np.repeat(offsets[:-1], lengths))
    values = pa.array([str(v) for v in domain.values], pa.string()).take(pa.array(flat))
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _present_lists(domain: QIDomain, codes: np.ndarray, group: np.ndarray, n_groups: int) -> pa.Array:
    """A list per group: the distinct member values, in domain order."""
    key = np.unique(group.astype(np.int64) * domain.size + codes)
    g, c = np.divmod(key, domain.size)
    offsets = np.concatenate(([0], np.cumsum(np.bincount(g, minlength=n_groups)))).astype(np.int32)
    values = pa.array([str(v) for v in domain.values], pa.string()).take(pa.array(c))
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def generalize(
    domains: list[QIDomain], columns: list[np.ndarray], group: np.ndarray, n_groups: int
) -> dict[str, pa.Array]:
    """Per-group generalized QI columns; `columns` hold raw floats (numeric) or codes per point."""
    used = group >= 0
    g = group[used]
    out: dict[str, pa.Array] = {}
    for domain, col in zip(domains, columns):
        x = col[used]
        if domain.kind == "numeric":
            lo = np.full(n_groups, np.inf)
            hi = np.full(n_groups, -np.inf)
            np.minimum.at(lo, g, x.astype(float))
            np.maximum.at(hi, g, x.astype(float))
            out[f"{domain.name}_lo"] = pa.array(lo)
            out[f"{domain.name}_hi"] = pa.array(hi)
            continue
        x = x.astype(np.int64)
        lo = np.full(n_groups, np.iinfo(np.int64).max)
        hi = np.full(n_groups, -1, dtype=np.int64)
        np.minimum.at(lo, g, x)
        np.maximum.at(hi, g, x)
        if domain.kind == "ordinal":
            out[domain.name] = _value_lists(domain, lo, hi)
        elif domain.hierarchy:
            nodes = _node_ranges(domain)
            covers = (nodes[None, :, 0] <= lo[:, None]) & (nodes[None, :, 1] >= hi[:, None])
            width = np.where(covers, nodes[None, :, 1] - nodes[None, :, 0], np.iinfo(np.int64).max)
            best = nodes[np.argmin(width, axis=1)]
            out[domain.name] = _value_lists(domain, best[:, 0], best[:, 1])
        else:
            out[domain.name] = _present_lists(domain, x, g, n_groups)
    return out


def published_tables(
    gid: np.ndarray,
    sensitive: np.ndarray,
    suppressed: np.ndarray,
    sensitive_name: str,
    per_group: dict[str, pa.Array],
    sizes: np.ndarray,
) -> dict[str, pa.Table]:
    """`table` and `groups` from the real tuples' gid / sensitive value / suppression flag."""
    shown = pa.array(sensitive.tolist(), mask=suppressed, from_pandas=True)
    order = np.asarray(
        pc.sort_indices(
            pa.table({"g": gid, "v": shown}), sort_keys=[("g", "ascending", "at_end"), ("v", "ascending", "at_end")]
        )
    )
    take = pa.array(gid[order])
    columns = {"gid": pa.array(gid[order].astype(np.int64))}
    for name, arr in per_group.items():
        columns[name] = arr.take(take)
    columns[sensitive_name] = shown.take(pa.array(order))
    groups = pa.table(
        {"gid": pa.array(np.arange(len(sizes), dtype=np.int64)), "size": pa.array(sizes.astype(np.int64))}
    )
    return {"table": pa.table(columns), "groups": groups}

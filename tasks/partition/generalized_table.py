"""Build a generalized published table from rows + QI-groups, in Arrow.

Each QI value is replaced by its group's generalization:
- numeric   -> two columns <qi>_lo, <qi>_hi (inclusive range of the group's values)
- date      -> the same, Arrow date32: from the first day of the lowest value's unit to the last
  day of the highest's (schemas/dates.py)
- ordinal   -> list column <qi>: every value of the order between the group's min and max
- categorical -> list column <qi>: the values present in the group, or with a hierarchy the
  leaves under the lowest common ancestor of the values present
Lists are built once per group and then taken per row, so a million rows cost a few Arrow
`take`s rather than a million Python lists. Rows come out in the order given by `row_order`
(a permutation from the release's generator: input order can re-identify).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from privpub.schemas.dates import date32
from privpub.tasks.core.microdata import Microdata, QIDomain
from privpub.tasks.core.threads import beside, map_on_threads
from privpub.tasks.partition.mondrian import take_rows


def group_order(group: np.ndarray, n_groups: int) -> np.ndarray:
    """np.argsort(group, kind="stable"), as least-significant-digit radix passes over 16-bit
    digits: numpy sorts 16-bit keys by radix, wider ones by timsort (many times slower at 1M rows)."""
    if not len(group) or n_groups > 1 << 32 or int(group.min()) < 0:
        return np.argsort(group, kind="stable")
    order = np.argsort((group & 0xFFFF).astype(np.uint16), kind="stable")
    if n_groups > 1 << 16:  # then by the high digit, stably: ties keep the low digit's order
        order = order[np.argsort((group[order] >> 16).astype(np.uint16), kind="stable")]
    return order


class GroupIndex:
    """Rows sorted by group once, so per-group min/max of any column is one reduceat."""

    def __init__(self, group: np.ndarray, n_groups: int):
        self.group, self.n_groups = group, n_groups
        self.order = group_order(group, n_groups)
        sizes = np.bincount(group, minlength=n_groups)
        self.starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))

    def bounds(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        vals = codes[self.order]
        return np.minimum.reduceat(vals, self.starts), np.maximum.reduceat(vals, self.starts)

    def all_bounds(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n_groups, d) per-group min and max of every column of (n, d) codes: the rows
        gathered once, each moved as one item."""
        vals = take_rows(np.ascontiguousarray(codes), self.order)
        return np.minimum.reduceat(vals, self.starts, axis=0), np.maximum.reduceat(vals, self.starts, axis=0)


def _list_array(offsets: np.ndarray, child_codes: np.ndarray, dom: QIDomain) -> pa.ListArray:
    labels = pa.array(np.asarray(dom.values, dtype=object).astype(str))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), labels.take(pa.array(child_codes)))


def _ranges_list(lo: np.ndarray, hi: np.ndarray, dom: QIDomain) -> pa.ListArray:
    lengths = (hi - lo + 1).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    # codes lo, lo+1, ..., hi for every group, without a Python loop
    child = np.arange(offsets[-1]) - np.repeat(offsets[:-1] - lo, lengths)
    return _list_array(offsets, child, dom)


def _present_list(group: np.ndarray, n_groups: int, codes: np.ndarray, dom: QIDomain) -> pa.ListArray:
    key = group.astype(np.int64) * dom.size + codes
    if n_groups * dom.size <= 100_000_000:  # presence bitmap: linear, where np.unique would sort
        seen = np.zeros(n_groups * dom.size, dtype=bool)
        seen[key] = True
        pairs = np.flatnonzero(seen)  # sorted by group, then code
    else:
        pairs = np.unique(key)
    counts = np.bincount(pairs // dom.size, minlength=n_groups)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    return _list_array(offsets, pairs % dom.size, dom)


def lca_leaf_ranges(dom: QIDomain, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Leaf-code range of the lowest common ancestor of leaves lo and hi (DFS leaf order)."""
    hierarchy = dom.hierarchy or {}
    leaf_code = {str(v): i for i, v in enumerate(dom.values)}
    first: dict[str, int] = {}
    last: dict[str, int] = {}

    def span(node: str) -> tuple[int, int]:
        if node in leaf_code:
            return leaf_code[node], leaf_code[node]
        if node not in first:
            spans = [span(c) for c in hierarchy[node]]
            first[node], last[node] = min(s[0] for s in spans), max(s[1] for s in spans)
        return first[node], last[node]

    parent = {c: p for p, kids in hierarchy.items() for c in kids}
    # ancestors of each leaf, deepest first, as (first, last) leaf ranges
    chains: list[list[tuple[int, int]]] = []
    for v in dom.values:
        chain: list[tuple[int, int]] = []
        node: str | None = str(v)
        while node is not None:
            chain.append(span(node))
            node = parent.get(node)
        chains.append(chain)
    depth = max(len(c) for c in chains)
    firsts = np.full((dom.size, depth), 0, dtype=np.int64)
    lasts = np.full((dom.size, depth), dom.size - 1, dtype=np.int64)
    for i, chain in enumerate(chains):
        for j, (a, b) in enumerate(chain):
            firsts[i, j], lasts[i, j] = a, b
    # the first ancestor of lo (deepest first) whose range reaches hi is the LCA
    reach = lasts[lo] >= hi[:, None]
    j = reach.argmax(axis=1)
    return firsts[lo, j], lasts[lo, j]


def generalized_columns(
    data: Microdata, group: np.ndarray, n_groups: int, qi_names: list[str] | None = None
) -> dict[str, pa.Array]:
    """Group-level generalized columns (one entry per group), by published column name."""
    out: dict[str, pa.Array] = {}
    los, his = GroupIndex(group, n_groups).all_bounds(data.codes)
    for j, dom in enumerate(data.domains):
        if qi_names is not None and dom.name not in qi_names:
            continue
        codes = data.codes[:, j]
        lo, hi = los[:, j], his[:, j]
        if dom.unit:  # a date QI: day numbers, published as dates
            out[f"{dom.name}_lo"] = date32(dom.values[lo])
            out[f"{dom.name}_hi"] = date32(dom.upper(dom.values[hi]))
        elif dom.kind == "numeric":
            dtype = data.frame[dom.name].dtype  # validated: a numpy dtype, not a pandas extension one
            integer = isinstance(dtype, np.dtype) and np.issubdtype(dtype, np.integer)
            vals = dom.values.astype(np.int64 if integer else float)
            out[f"{dom.name}_lo"] = pa.array(vals[lo])
            out[f"{dom.name}_hi"] = pa.array(vals[hi])
        elif dom.kind == "ordinal":
            out[dom.name] = _ranges_list(lo, hi, dom)
        elif dom.hierarchy:
            out[dom.name] = _ranges_list(*lca_leaf_ranges(dom, lo, hi), dom)
        else:
            out[dom.name] = _present_list(group, n_groups, codes, dom)
    return out


def generalized_table(
    data: Microdata,
    group: np.ndarray,
    n_groups: int,
    row_order: np.ndarray,
    extra: dict[str, pa.Array] | None = None,
    coded_lists: bool = False,
) -> pa.Table:
    """One row per input row in `row_order`: generalized QIs, then `extra` row-level columns,
    then the sensitive column. coded_lists: a list cell's items held as dictionary codes
    (`list<dictionary<int, string>>`: the same cells, a byte or two per item to take, code and
    write instead of its text; written as `list<string>`: state/store.py `stage_tables`)."""
    s = data.spec.dataset.sensitive
    # the sensitive column taken on a thread while the groups' cells are built (Arrow's take
    # lets go of the interpreter: 0.05-0.1 s of a 1M-row anonymize on the other core)
    with beside(len(row_order), "privpub-take") as submit:
        sensitive = submit(rows_in_order, data.frame[s], row_order)
        per_group = generalized_columns(data, group, n_groups)
        if coded_lists:
            per_group = {name: coded_items(array) for name, array in per_group.items()}
        cols = rows_of_groups(per_group, pa.array(group[row_order]))
        for name, arr in (extra or {}).items():
            cols[name] = arr
        cols[s] = sensitive.result()
    return pa.table(cols)


def coded_items(array: pa.Array) -> pa.Array:
    """A list array's items as dictionary codes (any other array as it is)."""
    if not pa.types.is_list(array.type):
        return array
    if pa.types.is_dictionary(array.type.value_type):
        return array
    if array.offset:  # (a slice: its offsets index its parent's items)
        array = pa.concat_arrays([array])
    coded = array.values.dictionary_encode()
    width = pa.int8() if len(coded.dictionary) <= 127 else pa.int16() if len(coded.dictionary) <= 32767 else pa.int32()
    coded = pa.DictionaryArray.from_arrays(coded.indices.cast(width), coded.dictionary)
    return pa.ListArray.from_arrays(array.offsets, coded, mask=array.is_null() if array.null_count else None)


def rows_of_groups(per_group: dict[str, pa.Array], idx: pa.Array) -> dict[str, pa.Array]:
    """Each group-level column taken to its rows (`idx`: a row's group), the columns on Arrow's
    count of threads: Arrow lets go of the interpreter while it copies, and the list columns'
    takes were most of anonymize (issue 43: 0.4 s of it at 1M rows). The same arrays as one
    after the other."""
    workers = max(1, min(len(per_group), pa.cpu_count()))
    taken = map_on_threads(lambda arr: arr.take(idx), per_group.values(), workers, len(idx), "privpub-take")
    return dict(zip(per_group, taken, strict=True))


def rows_in_order(column: pd.Series, row_order: np.ndarray) -> pa.Array:
    """A column's values in `row_order`, as published. Arrow-backed text is taken in Arrow (no
    Python string per row); anything else goes through numpy as before."""
    if isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow":
        values = pa.array(column)
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        return values.take(pa.array(row_order)).cast(pa.string())
    return pa.array(column.to_numpy()[row_order])

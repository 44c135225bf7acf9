"""Count-query estimates from a generalized table, assuming uniformity inside each range.

As in the Ambiguity paper's Section 1: Q1 (Disease = stroke AND Age >= 45) on the group with
age range [20, 60] and one stroke estimates 1 x (60 - 45) / (60 - 20) = 3/8. A numeric range is
treated as continuous (overlap length / range length, a point range counts fully when inside);
a set-valued QI contributes |set ∩ condition| / |set|.
"""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tasks.evaluate.workload import CountQuery, RangeCond
from tasks.verify.published import _quote


def range_fraction(lo: np.ndarray, hi: np.ndarray, cond: RangeCond) -> np.ndarray:
    lo, hi = lo.astype(float), hi.astype(float)
    width = hi - lo
    overlap = np.clip(np.minimum(hi, cond.hi) - np.maximum(lo, cond.lo), 0, None)
    point_inside = ((lo >= cond.lo) & (lo <= cond.hi)).astype(float)
    safe = np.where(width > 0, width, 1.0)
    return np.where(width > 0, overlap / safe, point_inside)


def set_fraction(lists: pa.ListArray | pa.ChunkedArray, values: frozenset) -> np.ndarray:
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    flat = lists.flatten()
    parent = pc.list_parent_indices(lists).to_numpy()
    hit = pc.is_in(flat, value_set=pa.array(sorted(values), type=flat.type)).to_numpy(zero_copy_only=False)
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(float)
    hits = np.bincount(parent, weights=hit.astype(float), minlength=len(lists))
    return hits / np.where(lengths > 0, lengths, 1.0)


def estimate_from_generalized(table: pa.Table, qi_names: list[str], sensitive: str,
                              workload: list[CountQuery]) -> np.ndarray:
    cols = [c for q in qi_names for c in ((f"{q}_lo", f"{q}_hi") if f"{q}_lo" in table.column_names else (q,))]
    con = duckdb.connect()
    con.register("published", table)
    keys = ", ".join(_quote(c) for c in cols + [sensitive])
    cells = con.sql(f"SELECT {keys}, count(*) AS n FROM published GROUP BY {keys}").to_arrow_table()
    s_vals = pd.Series(cells.column(sensitive).to_numpy(zero_copy_only=False))
    counts = cells.column("n").to_numpy().astype(float)
    # only the cells holding the query's sensitive value can contribute: index them once
    cells_of = {v: np.flatnonzero(m) for v, m in ((v, (s_vals == v).to_numpy()) for v in s_vals.dropna().unique())}
    out = np.zeros(len(workload))
    for i, q in enumerate(workload):
        idx = cells_of.get(q.sensitive_value)
        if idx is None or not len(idx):
            continue
        weight = counts[idx]
        for col, cond in q.conditions:
            if isinstance(cond, RangeCond):
                weight = weight * range_fraction(cells.column(f"{col}_lo").to_numpy()[idx],
                                                 cells.column(f"{col}_hi").to_numpy()[idx], cond)
            else:
                weight = weight * set_fraction(cells.column(col).take(pa.array(idx)), cond.values)
        out[i] = weight.sum()
    return out

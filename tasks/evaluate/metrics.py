"""Utility figures shared by every technique: query error, penalties, group sizes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from privpub.schemas.dates import as_day_numbers
from privpub.tasks.core.microdata import Microdata, QIDomain
from privpub.tasks.evaluate.counting import DistinctLists
from privpub.tasks.evaluate.workload import CountQuery


def nonzero_relative_errors(actual: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    """|act - est| / act (the Ambiguity paper's Section 9.3); queries with act = 0 are skipped."""
    ok = actual > 0
    result: np.ndarray = np.abs(actual[ok] - estimate[ok]) / actual[ok]
    return result


def error_by_selectivity(workload: list[CountQuery], actual: np.ndarray, estimate: np.ndarray) -> dict[str, float]:
    sel = np.array([q.selectivity for q in workload])
    out = {}
    for s in sorted(set(sel.tolist())):
        m = sel == s
        err = nonzero_relative_errors(actual[m], estimate[m])
        out[f"query-error-{round(s * 100)}pct"] = float(err.mean()) if len(err) else float("nan")
    return out


def group_size_stats(sizes: np.ndarray) -> dict[str, float]:
    sizes = np.asarray(sizes, dtype=np.int64)
    return {
        "groups": int(len(sizes)),
        "avg-group-size": float(sizes.mean()) if len(sizes) else 0.0,
        "max-group-size": int(sizes.max()) if len(sizes) else 0,
        "min-group-size": int(sizes.min()) if len(sizes) else 0,
        "discernibility": int((sizes.astype(np.int64) ** 2).sum()),
    }


def cell_widths(table: pa.Table, name: str, dom: QIDomain) -> np.ndarray:
    """Per published row: its `name` cell's width over the QI's span (0: the exact value, 1: the
    whole domain); a range cell from its bounds, a set from its values' codes. dom.span > 0."""
    if f"{name}_lo" in table.column_names:
        lo = as_day_numbers(table.column(f"{name}_lo"))  # dates as day numbers, as their domain
        hi = as_day_numbers(table.column(f"{name}_hi"))
        result: np.ndarray = (hi - lo) / dom.span
        return result
    result = _list_code_span(table, name, dom) / dom.span
    return result


def _list_code_span(table: pa.Table, name: str, dom: QIDomain) -> np.ndarray:
    """Per row: max - min domain code among the values of its list cell (computed once per
    distinct list)."""
    lists = DistinctLists.of(table, name)
    codes = pd.Index(np.asarray(dom.values, dtype=object).astype(str)).get_indexer(lists.items)
    if (codes < 0).any():
        raise KeyError(
            f"published '{name}' holds values outside its domain: {sorted(set(lists.items[codes < 0].tolist()))[:5]}"
        )
    mx = np.full(len(lists.lengths), -1, dtype=np.int64)
    mn = np.full(len(lists.lengths), np.iinfo(np.int64).max, dtype=np.int64)
    np.maximum.at(mx, lists.parent, codes)
    np.minimum.at(mn, lists.parent, codes)
    result: np.ndarray = np.where(mx >= 0, mx - mn, 0)[lists.codes]
    return result


def uncertainty_penalty(table: pa.Table, data: Microdata, qi_names: list[str] | None = None) -> dict[str, float]:
    """Butterfly paper, Definition 1: sum over tuples and QIs of |y - x| / |A|, where [x, y] is
    the published range and |A| the attribute's range in the original table. Set-valued cells
    use the range of their values' codes in the attribute's global order. Also reported per
    tuple per attribute (normalised to [0, 1])."""
    names = qi_names or data.qi_names
    total = 0.0
    per_attr = {}
    for name in names:
        dom = data.domain(name)
        if dom.span == 0:
            per_attr[name] = 0.0
            continue
        per_attr[name] = float(cell_widths(table, name, dom).sum())
        total += per_attr[name]
    n = max(table.num_rows, 1)
    return {
        "uncertainty-penalty": total,
        "uncertainty-penalty-normalized": total / (n * max(len(names), 1)),
        **{f"penalty-{k}": v for k, v in per_attr.items()},
    }

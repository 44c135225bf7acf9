"""pandera schemas of published tables, built from the spec.

A generalized table has, per QI, either <qi>_lo/<qi>_hi (numeric, lo <= hi) or a list column
<qi> whose items are values of the QI's domain, plus the sensitive column, and nothing else:
in particular never the person id.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pyarrow as arrow
import pyarrow.compute as pc

from privpub.schemas.spec import DatasetSpec


def _list_of(allowed: set[str] | None) -> pa.Check:
    """Each cell a non-empty list of domain values; vectorised in Arrow over all the items."""
    value_set = arrow.array(sorted(allowed), arrow.string()) if allowed is not None else None

    def check(series: pd.Series) -> pd.Series:
        cells = arrow.array(series)
        cells = cells.combine_chunks() if isinstance(cells, arrow.ChunkedArray) else cells
        ok = np.diff(np.asarray(cells.offsets)) > 0  # (the offsets of this slice of the lists)
        if cells.null_count:
            ok &= np.asarray(cells.is_valid())
        if value_set is not None:
            items = pc.list_flatten(cells)  # (a null list's items left out)
            outside = _outside(items, value_set)
            if outside is not None:  # the rows holding them (a published table passing has none)
                owner = np.asarray(pc.list_parent_indices(cells))
                ok &= np.bincount(owner[outside], minlength=len(series)) == 0
        return pd.Series(ok, index=series.index)

    return pa.Check(check, element_wise=False, error="a non-empty list of domain values")


def _outside(items: arrow.Array, value_set: arrow.Array) -> np.ndarray | None:
    """Which items are null or not in `value_set`; None when none is. Items held as dictionary
    codes have their values looked up once, and when every value is known and no code is null
    (a generalization's table in memory) no item is looked at (issue 43: 0.35 s at 1M rows)."""
    if arrow.types.is_dictionary(items.type):
        values = pc.cast(items.dictionary, arrow.string())
        known = np.asarray(pc.fill_null(pc.is_in(values, value_set=value_set), False))
        if items.null_count == 0 and known.all():
            return None
        inside = known[np.asarray(items.indices.fill_null(0))] if len(known) else np.zeros(len(items), bool)
        if items.null_count:  # a null code is outside whatever it was filled with
            inside &= np.asarray(items.is_valid())
        outside = ~inside
    else:
        text = pc.cast(items, arrow.string())
        outside = ~np.asarray(pc.fill_null(pc.is_in(text, value_set=value_set), False))
    return outside if outside.any() else None


def _all_dates(column: pd.Series) -> bool:
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        return True
    kind = pd.api.types.infer_dtype(column, skipna=True)
    return kind in ("date", "datetime", "empty")


DATES = pa.Check(_all_dates, element_wise=False, error="dates")


def generalized_table_schema(
    ds: DatasetSpec, extra: dict[str, pa.Column] | None = None, sensitive_nullable: bool = False
) -> pa.DataFrameSchema:
    cols: dict[str, pa.Column] = {}
    checks = []
    for q in ds.qi:
        if q.kind == "date":  # dates (Arrow date32, read as datetime.date or datetime64)
            lo, hi = f"{q.name}_lo", f"{q.name}_hi"
            cols[lo] = pa.Column(nullable=False, checks=DATES)
            cols[hi] = pa.Column(nullable=False, checks=DATES)
            checks.append(pa.Check(lambda df, lo=lo, hi=hi: df[lo] <= df[hi], error=f"{lo} <= {hi}"))
        elif q.kind == "numeric":
            cols[f"{q.name}_lo"] = pa.Column(float, coerce=True, nullable=False)
            cols[f"{q.name}_hi"] = pa.Column(float, coerce=True, nullable=False)
            lo, hi = f"{q.name}_lo", f"{q.name}_hi"
            checks.append(pa.Check(lambda df, lo=lo, hi=hi: df[lo] <= df[hi], error=f"{lo} <= {hi}"))
        else:
            allowed = set(q.order_labels) if q.order_labels else None
            if q.tree:  # (a hierarchy built from the data, "mask", fixes no values here)
                kids = {c for v in q.tree.values() for c in v}
                allowed = {c for c in kids if c not in q.tree}
            cols[q.name] = pa.Column(checks=_list_of(allowed), nullable=False)
    cols.update(extra or {})
    cols[ds.sensitive] = pa.Column(nullable=sensitive_nullable)
    return pa.DataFrameSchema(cols, checks=checks, strict=True, ordered=False)

"""pandera schemas of published tables, built from the spec.

A generalized table has, per QI, either <qi>_lo/<qi>_hi (numeric, lo <= hi) or a list column
<qi> whose items are values of the QI's domain, plus the sensitive column, and nothing else:
in particular never the person id.
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

from privpub.schemas.spec import DatasetSpec


def _list_of(allowed: set[str] | None):
    """Each cell a non-empty list of domain values; vectorised on Arrow-backed lists."""

    def check(series: pd.Series) -> pd.Series:
        ok = series.list.len() > 0
        if allowed is not None:
            flat = series.list.flatten()
            bad = ~flat.astype(str).isin(allowed)
            ok &= ~pd.Series(bad.to_numpy(), index=flat.index).groupby(level=0).any().reindex(
                series.index, fill_value=False
            )
        return ok

    return pa.Check(check, element_wise=False, error="a non-empty list of domain values")


def generalized_table_schema(
    ds: DatasetSpec, extra: dict[str, pa.Column] | None = None, sensitive_nullable: bool = False
) -> pa.DataFrameSchema:
    cols: dict[str, pa.Column] = {}
    checks = []
    for q in ds.qi:
        if q.kind == "numeric":
            cols[f"{q.name}_lo"] = pa.Column(float, coerce=True, nullable=False)
            cols[f"{q.name}_hi"] = pa.Column(float, coerce=True, nullable=False)
            lo, hi = f"{q.name}_lo", f"{q.name}_hi"
            checks.append(pa.Check(lambda df, lo=lo, hi=hi: df[lo] <= df[hi], error=f"{lo} <= {hi}"))
        else:
            allowed = set(q.order) if q.order else None
            if q.hierarchy:
                kids = {c for v in q.hierarchy.values() for c in v}
                allowed = {c for c in kids if c not in q.hierarchy}
            cols[q.name] = pa.Column(checks=_list_of(allowed), nullable=False)
    cols.update(extra or {})
    cols[ds.sensitive] = pa.Column(nullable=sensitive_nullable)
    return pa.DataFrameSchema(cols, checks=checks, strict=True, ordered=False)

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


def check_published(release, spec, technique) -> None:
    """Every published table passes its schema and holds no person id.

    Tables are viewed as Arrow-backed pandas frames, so list columns are checked with vectorised
    Arrow kernels instead of a Python call per cell. A table written as a folder of parts is
    checked part by part (on its cluster's workers when it has one), never whole in memory.
    """
    from privpub.flows.errors import PublishedTableError

    schemas = technique.table_schemas(spec)
    pid = spec.dataset.person_id
    for name, table in release.tables.items():
        schema = schemas.get(name)
        if schema is None:
            raise PublishedTableError(f"technique '{technique.name}' has no schema for table '{name}'")
        if hasattr(table, "parts"):
            from privpub.tasks.cluster.verify import map_parts

            problems = [p for p in map_parts(table, table_problem, schema, pid, name) if p]
        else:
            problems = [table_problem(table, schema, pid, name)]
        if problems and problems[0]:
            raise PublishedTableError(problems[0])


def table_problem(table, schema, pid: str, name: str) -> str | None:
    """What is wrong with one published table (or part), or None."""
    from pandera.errors import SchemaErrors

    if pid in table.column_names:
        return f"published table '{name}' contains the person id column '{pid}'"
    try:
        schema.validate(table.to_pandas(types_mapper=pd.ArrowDtype), lazy=True)
    except SchemaErrors as err:
        return f"published table '{name}' fails its schema: {err.failure_cases.head(5).to_dict('records')}"
    return None

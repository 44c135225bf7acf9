"""How an adversary reads a published generalized table: which columns carry each QI, and the
equivalence classes (rows with identical published QI values)."""
from __future__ import annotations

import duckdb
import pyarrow as pa

from schemas.spec import DatasetSpec


def qi_columns(table: pa.Table, qi_names: list[str]) -> list[str]:
    """The published columns of the given QIs: <qi>_lo/<qi>_hi for ranges, <qi> otherwise."""
    cols: list[str] = []
    for q in qi_names:
        if f"{q}_lo" in table.column_names:
            cols += [f"{q}_lo", f"{q}_hi"]
        elif q in table.column_names:
            cols.append(q)
        else:
            raise KeyError(f"published table has no column for quasi-identifier '{q}'")
    return cols


def _quote(col: str) -> str:
    return '"' + col.replace('"', '""') + '"'


def equivalence_classes(table: pa.Table, columns: list[str], sensitive: str | None = None) -> pa.Table:
    """One row per distinct combination of `columns`: its size and distinct sensitive values,
    largest problems first (smallest size, then fewest distinct values)."""
    con = duckdb.connect()
    con.register("published", table)
    keys = ", ".join(_quote(c) for c in columns)
    distinct = f"count(DISTINCT {_quote(sensitive)})" if sensitive else "NULL"
    sql = (f"SELECT {keys}, count(*) AS size, {distinct} AS distinct_sensitive "
           f"FROM published GROUP BY {keys} ORDER BY size, distinct_sensitive")
    return con.sql(sql).to_arrow_table()


def describe_class(row: dict, columns: list[str]) -> dict:
    """A JSON-friendly description of one equivalence class for the report."""
    out = {}
    for c in columns:
        v = row[c]
        out[c] = list(v) if isinstance(v, (list, tuple)) else v
    out["size"] = row["size"]
    if row.get("distinct_sensitive") is not None:
        out["distinct_sensitive"] = row["distinct_sensitive"]
    return out


def dataset_qi_columns(table: pa.Table, ds: DatasetSpec) -> list[str]:
    return qi_columns(table, ds.qi_names)

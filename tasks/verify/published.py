"""How an adversary reads a published generalized table: which columns carry each QI, and the
equivalence classes (rows with identical published QI values)."""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc



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


# A separator no published value contains (checked), to read a list cell as one string.
_SEP = "\x1f"


def _cell_codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes of a published column: equal cells get equal codes (lists compared whole,
    in their published order)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        items = pc.cast(pc.list_flatten(col), pa.string())
        if pc.any(pc.match_substring(items, _SEP)).as_py():
            raise ValueError("a published list value contains the control character U+001F")
        col = pc.binary_join(pc.cast(col, pa.list_(pa.string())), _SEP)
    codes, _ = pd.factorize(col.to_pandas(), use_na_sentinel=False)
    return codes.astype(np.int64)


def class_ids(table: pa.Table, columns: list[str]) -> tuple[np.ndarray, int]:
    """The equivalence class of every row over `columns`: (class id per row, number of classes).

    Each column is coded to integers, the codes are combined into one key, and the key is
    re-compacted with a hash factorisation before it could overflow: O(n) per column, where a
    SQL GROUP BY over list columns is an order of magnitude slower."""
    if table.num_rows == 0:
        return np.zeros(0, dtype=np.int64), 0
    key = np.zeros(table.num_rows, dtype=np.int64)
    bound = 1
    for c in columns:
        codes = _cell_codes(table.column(c))
        width = int(codes.max()) + 1
        if bound * width >= 2**62:
            key, uniq = pd.factorize(key)
            bound = len(uniq)
        key = key * width + codes
        bound *= width
    key, uniq = pd.factorize(key)
    return key.astype(np.int64), len(uniq)


def class_profile(table: pa.Table, columns: list[str], sensitive: str | None = None) -> dict:
    """Per class: size and (with `sensitive`) distinct non-null sensitive values; plus one row
    index per class for describing it."""
    ids, n = class_ids(table, columns)
    sizes = np.bincount(ids, minlength=n)
    first_row = np.full(n, -1, dtype=np.int64)
    first_row[ids[::-1]] = np.arange(len(ids))[::-1]
    out = {"class": ids, "size": sizes, "first_row": first_row, "distinct": None}
    if sensitive is not None:
        s_codes, s_uniq = pd.factorize(table.column(sensitive).to_pandas())
        ok = s_codes >= 0
        pairs = pd.unique(ids[ok] * max(len(s_uniq), 1) + s_codes[ok])
        out["distinct"] = np.bincount(pairs // max(len(s_uniq), 1), minlength=n)
    return out


def describe_row_class(table: pa.Table, row: int, columns: list[str], size: int,
                       distinct: int | None = None) -> dict:
    """The published QI values of one class (read from one of its rows), for the report."""
    cells = table.select(columns).slice(row, 1).to_pylist()[0]
    out = {c: list(v) if isinstance(v, (list, tuple)) else v for c, v in cells.items()}
    out["size"] = int(size)
    if distinct is not None:
        out["distinct_sensitive"] = int(distinct)
    return out

"""Selecting people with a SQL predicate over the public QI table.

The predicate runs in a private in-memory DuckDB connection that sees only the public population
frame (ids and QIs, never the sensitive column) and has external access switched off, so a
predicate cannot read files or other tables.
"""

from __future__ import annotations

import re

import duckdb
import pandas as pd

from privpub.tasks.audit.knowledge import plain


def select_ids(population: pd.DataFrame, predicate: str, id_column: str) -> list:
    """Ids of the people whose public QI values satisfy `predicate` (a SQL WHERE condition)."""
    if ";" in predicate:
        raise ValueError("the predicate must be a single SQL condition")
    con = duckdb.connect(":memory:")
    try:
        con.register("population", population)
        con.execute("SET enable_external_access = false")
        rows = con.execute(f'SELECT "{id_column}" FROM population WHERE ({predicate})').fetchall()
    except duckdb.Error as err:
        raise ValueError(f"bad predicate: {one_line(err)}") from None
    finally:
        con.close()
    return [plain(r[0]) for r in rows]


def one_line(err: Exception) -> str:
    """DuckDB's first line only (the rest repeats the SQL with a caret), with quoted literals
    masked: a conversion error quotes the cell it could not convert, which may be a person id."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", first)[:300]

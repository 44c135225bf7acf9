"""Selecting people with a SQL predicate over the public QI table.

The predicate runs in a private in-memory DuckDB connection that sees only the public population
frame (ids and QIs, never the sensitive column) and has external access switched off, so a
predicate cannot read files or other tables.
"""
from __future__ import annotations

import duckdb
import pandas as pd

from tasks.audit.knowledge import plain


def select_ids(population: pd.DataFrame, predicate: str, id_column: str) -> list:
    """Ids of the people whose public QI values satisfy `predicate` (a SQL WHERE condition)."""
    if ";" in predicate:
        raise ValueError("the predicate must be a single SQL condition")
    con = duckdb.connect(":memory:")
    try:
        con.register("population", population)
        con.execute("SET enable_external_access = false")
        rows = con.execute(
            f'SELECT "{id_column}" FROM population WHERE ({predicate})').fetchall()
    except duckdb.Error as err:
        raise ValueError(f"bad predicate {predicate!r}: {err}") from None
    finally:
        con.close()
    return [plain(r[0]) for r in rows]

"""Selecting people with a predicate over the public QI table.

A predicate is parsed by sqlglot and accepted only when it is made of the public QI columns,
literals, comparisons, BETWEEN, IN, AND / OR / NOT and arithmetic: no function, subquery, table,
person id or second statement. The SQL that runs is written back from that tree, never the
analyst's text, so a predicate cannot close its parentheses and append a query. It runs in a
private in-memory DuckDB connection that sees only the public population frame, with external
access off; its cost is one pass over that frame. No engine message reaches the analyst: it could
quote a cell.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import sqlglot
from sqlglot import exp

from privpub.tasks.audit.knowledge import plain

# the node types a predicate may be built of (Identifier and Literal are the leaves)
ALLOWED: tuple[type[exp.Expression], ...] = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Paren,
    exp.Tuple,
    exp.And,
    exp.Or,
    exp.Not,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Between,
    exp.In,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Neg,
)
GRAMMAR = "literals, comparisons, BETWEEN, IN, AND / OR / NOT and arithmetic"


def checked_predicate(predicate: str, columns: list[str]) -> str:
    """The predicate as SQL written from its parse tree, or ValueError naming what is not allowed."""
    return parsed_predicate(predicate, columns).sql(dialect="duckdb")


def parsed_predicate(predicate: str, columns: list[str]) -> exp.Expr:
    """The predicate's checked parse tree, or ValueError naming what is not allowed."""
    allowed = f"a predicate is made of the public columns ({', '.join(columns)}), {GRAMMAR}"
    try:
        trees = [t for t in sqlglot.parse(predicate, dialect="duckdb") if t is not None]
    except sqlglot.errors.SqlglotError:
        trees = []
    if len(trees) != 1 or isinstance(trees[0], exp.Block):  # unparsable, empty or several statements
        raise ValueError(f"bad predicate: it is not one condition; {allowed}")
    tree = trees[0]
    for node in tree.walk():
        if not isinstance(node, ALLOWED):
            raise ValueError(f"bad predicate: {node.key.upper()} is not allowed; {allowed}")
        if isinstance(node, exp.Column) and (node.table or node.name not in columns):
            raise ValueError(f"bad predicate: {node.sql(dialect='duckdb')} is not a public column; {allowed}")
    return tree


def column_kinds(population: pd.DataFrame, columns: list[str]) -> str:
    """'age: number, sex: text': what each public column holds, for a type error's message."""

    def kind(dtype) -> str:
        if pd.api.types.is_bool_dtype(dtype):
            return "true/false"
        if pd.api.types.is_numeric_dtype(dtype):
            return "number"
        if pd.api.types.is_datetime64_any_dtype(dtype):
            return "date"
        return "text"

    return ", ".join(f"{c}: {kind(population[c].dtype)}" for c in columns)


def select_ids(population: pd.DataFrame, predicate: str, id_column: str) -> list:
    """Ids of the people whose public QI values satisfy `predicate`."""
    columns = [str(c) for c in population.columns if c != id_column]
    sql = checked_predicate(predicate, columns)
    con = duckdb.connect(":memory:")
    try:
        con.register("population", population)
        con.execute("SET enable_external_access = false")
        rows = con.execute(f'SELECT "{id_column}" FROM population WHERE {sql}').fetchall()
    except duckdb.Error:  # e.g. a text compared with a number: the engine's text may quote a cell
        raise ValueError(
            f"bad predicate: compare each public column with a value of its type ({column_kinds(population, columns)}); "
            f"it cannot be evaluated over the public columns ({', '.join(columns)})"
        ) from None
    finally:
        con.close()
    return [plain(r[0]) for r in rows]

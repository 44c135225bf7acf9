"""Selecting people with a predicate over the public QI table.

A predicate is parsed by sqlglot and accepted only when it is made of the public QI columns,
literals, comparisons, BETWEEN, IN, AND / OR / NOT and arithmetic: no function, subquery, table,
person id or second statement. The SQL that runs is written back from that tree, never the
analyst's text, so a predicate cannot close its parentheses and append a query. It runs in a
private in-memory DuckDB connection that sees only the public population frame, with external
access off; its cost is one pass over that frame. No engine message reaches the analyst: it could
quote a cell.

A predicate is bounded before it is parsed (issue 41): at most MAX_CHARS characters, MAX_TOKENS
tokens and MAX_NESTING levels of parentheses, NOTs and signs, counted on sqlglot's tokens (a loop, no
recursion), because sqlglot's parser and writer recurse once per level and Python's stack would
end in a RecursionError near 60 levels. Each bound is refused with one line, like any bad
predicate (and so logged by the auditor's flows).

An ordinal QI held as an ordered categorical (flows/audit.py holds it so) is compared in its
declared order, not as text: `sev < 'mid'` runs as `sev IN (<the values before 'mid'>)`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

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
# the bounds of a predicate: counts, so a refusal never depends on the machine. 20 levels cost
# sqlglot about 550 of Python's 1000 frames in the worst shape (a NOT before each parenthesis)
MAX_CHARS = 4000
MAX_TOKENS = 1000
MAX_NESTING = 20


# tokens after which a sign is a unary operator (a value ends with any other)
OPERAND_ENDS = {TokenType.NUMBER, TokenType.STRING, TokenType.VAR, TokenType.IDENTIFIER, TokenType.R_PAREN}
SIGNS = {TokenType.DASH, TokenType.PLUS}


def nesting(tokens: list[Token]) -> int:
    """How deep the predicate nests: parentheses plus the NOTs applying at a point (a NOT reaches
    to the next AND / OR of its level) plus a run of unary signs, the depth sqlglot's parser
    recurses to, read from the tokens."""
    depth, nots, signs, deepest = 0, 0, 0, 0
    outer: list[tuple[int, int]] = []
    previous: TokenType | None = None
    for token in tokens:
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            outer.append((depth, nots))
            depth, nots = depth + nots + signs + 1, 0
        elif kind == TokenType.R_PAREN and outer:
            depth, nots = outer.pop()
        elif kind == TokenType.NOT:
            nots += 1
        elif kind in (TokenType.AND, TokenType.OR):
            nots = 0
        signs = signs + 1 if kind in SIGNS and previous not in OPERAND_ENDS else 0
        deepest = max(deepest, depth + nots + signs)
        previous = kind
    return deepest


def check_size(predicate: str) -> None:
    """ValueError with one line when the predicate is longer or nests deeper than the bounds."""
    if len(predicate) > MAX_CHARS:
        raise ValueError(f"bad predicate: it is {len(predicate)} characters long; at most {MAX_CHARS}")
    try:
        tokens = sqlglot.tokenize(predicate, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return  # the parser refuses it with the grammar's line
    if len(tokens) > MAX_TOKENS:
        raise ValueError(f"bad predicate: it has {len(tokens)} tokens; at most {MAX_TOKENS}")
    deep = nesting(tokens)
    if deep > MAX_NESTING:
        raise ValueError(
            f"bad predicate: it nests {deep} levels deep (parentheses, NOTs and signs); at most {MAX_NESTING}"
        )


def checked_predicate(predicate: str, columns: list[str]) -> str:
    """The predicate as SQL written from its parse tree, or ValueError naming what is not allowed."""
    return parsed_predicate(predicate, columns).sql(dialect="duckdb")


def parsed_predicate(predicate: str, columns: list[str]) -> exp.Expr:
    """The predicate's checked parse tree, or ValueError naming what is not allowed."""
    allowed = f"a predicate is made of the public columns ({', '.join(columns)}), {GRAMMAR}"
    check_size(predicate)
    try:
        trees = [t for t in sqlglot.parse(predicate, dialect="duckdb") if t is not None]
    except sqlglot.errors.SqlglotError:
        trees = []
    except RecursionError:  # not reached within the bounds; never shown as a traceback
        raise ValueError(f"bad predicate: it nests too deeply; at most {MAX_NESTING} levels") from None
    if len(trees) != 1 or isinstance(trees[0], exp.Block):  # unparsable, empty or several statements
        raise ValueError(f"bad predicate: it is not one condition; {allowed}")
    tree = trees[0]
    for node in tree.walk():
        if not isinstance(node, ALLOWED):
            raise ValueError(f"bad predicate: {node.key.upper()} is not allowed; {allowed}")
        if isinstance(node, exp.Column) and (node.table or node.name not in columns):
            raise ValueError(f"bad predicate: {node.sql(dialect='duckdb')} is not a public column; {allowed}")
    return tree


# comparisons that read an ordinal QI in its declared order: which ranks each keeps
RANKS: dict[type[exp.Expr], Callable[[np.ndarray, int], np.ndarray]] = {
    exp.LT: lambda ranks, r: ranks < r,
    exp.LTE: lambda ranks, r: ranks <= r,
    exp.GT: lambda ranks, r: ranks > r,
    exp.GTE: lambda ranks, r: ranks >= r,
}
FLIPPED: dict[type[exp.Expr], type[exp.Expr]] = {exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE}


def declared_orders(population: pd.DataFrame) -> dict[str, list[str]]:
    """The ordinal QIs (ordered categoricals) and their orders."""
    return {
        str(c): [str(v) for v in population[c].cat.categories]
        for c in population.columns
        if is_ordered(population[c].dtype)
    }


def is_ordered(dtype: np.dtype[Any] | pd.api.extensions.ExtensionDtype) -> bool:
    return isinstance(dtype, pd.CategoricalDtype) and bool(dtype.ordered)


def rank_in(order: list[str], column: str, node: exp.Expr) -> int:
    """The rank of a literal in an ordinal QI's order, or ValueError."""
    node = node.unnest()
    text = node.this if isinstance(node, exp.Literal) else None
    if text is not None and not node.is_string:  # a number: as the order spells numbers
        number = float(text)
        text = str(int(number)) if number.is_integer() else str(number)
    if text not in order:
        raise ValueError(
            f"bad predicate: compare the ordinal QI {column} with values of its order ({', '.join(order)})"
        )
    return order.index(text)


def in_declared_order(tree: exp.Expr, population: pd.DataFrame) -> exp.Expr:
    """The tree with every comparison and BETWEEN on an ordinal QI rewritten as an IN list of the
    values it keeps in the declared order (FALSE when none)."""
    orders = declared_orders(population)

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Between) and isinstance(node.this.unnest(), exp.Column):
            column = node.this.unnest().name
            if column not in orders:
                return node
            order = orders[column]
            lo, hi = rank_in(order, column, node.args["low"]), rank_in(order, column, node.args["high"])
            kept = order[lo : hi + 1]
        elif type(node) in RANKS:
            kind, side, value = type(node), node.this.unnest(), node.expression
            if not isinstance(side, exp.Column):  # the value on the left
                kind, side, value = FLIPPED[kind], node.expression.unnest(), node.this
            if not isinstance(side, exp.Column) or side.name not in orders:
                if any(isinstance(c, exp.Column) and c.name in orders for c in node.find_all(exp.Column)):
                    raise ValueError("bad predicate: compare an ordinal QI with values of its order")
                return node
            column, order = side.name, orders[side.name]
            ranks = np.arange(len(order))
            kept = [order[i] for i in np.flatnonzero(RANKS[kind](ranks, rank_in(order, column, value)))]
        else:
            return node
        if not kept:
            return exp.false()
        return exp.In(this=exp.column(column), expressions=[exp.Literal.string(v) for v in kept])

    return tree.transform(rewrite) if orders else tree


def column_kinds(population: pd.DataFrame, columns: list[str]) -> str:
    """'age: number, sex: text': what each public column holds, for a type error's message."""

    def kind(dtype: np.dtype[Any] | pd.api.extensions.ExtensionDtype) -> str:
        if pd.api.types.is_bool_dtype(dtype):
            return "true/false"
        if pd.api.types.is_numeric_dtype(dtype):
            return "number"
        if pd.api.types.is_datetime64_any_dtype(dtype):
            return "date"
        return "text"

    return ", ".join(f"{c}: {kind(population[c].dtype)}" for c in columns)


class PublicTable:
    """The public population in a private in-memory DuckDB connection with external access off,
    opened once (a connection and its registration cost about 9 ms, the query under 1 ms)."""

    def __init__(self, population: pd.DataFrame, id_column: str):
        self.population, self.id_column = population, id_column
        self.columns = [str(c) for c in population.columns if c != id_column]
        self.con = duckdb.connect(":memory:")
        self.con.register("population", population)
        self.con.execute("SET enable_external_access = false")

    def select_ids(self, predicate: str) -> list[Hashable]:
        """Ids of the people whose public QI values satisfy `predicate`."""
        sql = in_declared_order(parsed_predicate(predicate, self.columns), self.population).sql(dialect="duckdb")
        try:
            rows = self.con.execute(f'SELECT "{self.id_column}" FROM population WHERE {sql}').fetchall()
        except duckdb.Error:  # e.g. a text compared with a number: the engine's text may quote a cell
            raise ValueError(
                "bad predicate: compare each public column with a value of its type "
                f"({column_kinds(self.population, self.columns)}); it cannot be evaluated over the public "
                f"columns ({', '.join(self.columns)})"
            ) from None
        return [plain(r[0]) for r in rows]

    def close(self) -> None:
        self.con.close()


def select_ids(population: pd.DataFrame, predicate: str, id_column: str) -> list[Hashable]:
    """Ids of the people whose public QI values satisfy `predicate` (one predicate: `PublicTable`
    keeps its connection for many)."""
    table = PublicTable(population, id_column)
    try:
        return table.select_ids(predicate)
    finally:
        table.close()

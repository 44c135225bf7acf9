"""Widening a query outward to the public grid (grid.py).

A predicate that can be snapped is a conjunction (AND) of parts, each on one QI: a comparison
with a number (=, <, <=, >, >=, either side), BETWEEN two numbers, IN a list of numbers, TRUE or
FALSE, or an OR of conjunctions of those on one and the same QI (the form of a snapped predicate
whose bands are not consecutive, so that every snapped predicate can be asked again). Per QI
the parts meet in a union of intervals (or of finite sets of numbers); the snapped query keeps,
per QI, every band that holds a value of that union, so it selects everyone the original selects
and more only where the bands demand it. Anything else (NOT, <>, arithmetic, an OR across QIs,
a text) cannot be snapped and is refused with one line.

For a QI of whole numbers the conditions are read over whole numbers ("age > 34" is "age >= 35"),
so a band holding no whole number of the interval is not added."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlglot import exp

from privpub.tasks.audit.grid import Grid, plain_number
from privpub.tasks.audit.query import parsed_predicate

FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.EQ: exp.EQ,
}
SNAPPABLE = (
    "a conjunction (AND) of comparisons, BETWEEN or IN of one grid column with numbers (OR only within one column)"
)


class SnapError(ValueError):
    """The predicate is not of a form that can be widened to the grid."""


@dataclass
class Condition:
    """What the conjuncts on one QI allow: lo <= x <= hi (each end closed or open) and, when
    given, x in `points`."""

    lo: float = -math.inf
    lo_open: bool = False
    hi: float = math.inf
    hi_open: bool = False
    points: frozenset[float] | None = None

    def above(self, value: float, open_: bool) -> None:
        if value > self.lo or (value == self.lo and open_):
            self.lo, self.lo_open = value, open_

    def below(self, value: float, open_: bool) -> None:
        if value < self.hi or (value == self.hi and open_):
            self.hi, self.hi_open = value, open_

    def within(self, values: set[float]) -> None:
        self.points = frozenset(values) if self.points is None else self.points & frozenset(values)

    def meet(self, other: Condition) -> Condition:
        """Both conditions at once."""
        out = Condition(self.lo, self.lo_open, self.hi, self.hi_open, self.points)
        out.above(other.lo, other.lo_open)
        out.below(other.hi, other.hi_open)
        if other.points is not None:
            out.within(set(other.points))
        return out

    def whole(self) -> None:
        """Read over whole numbers: closed integer ends ("x > 34" is "x >= 35"), integer points."""
        if math.isfinite(self.lo):
            self.lo = float(math.floor(self.lo) + 1 if self.lo_open else math.ceil(self.lo))
        if math.isfinite(self.hi):
            self.hi = float(math.ceil(self.hi) - 1 if self.hi_open else math.floor(self.hi))
        self.lo_open = self.hi_open = False
        if self.points is not None:
            self.points = frozenset(p for p in self.points if float(p).is_integer())

    def holds(self, values: np.ndarray) -> np.ndarray:
        ok = (values > self.lo) if self.lo_open else (values >= self.lo)
        ok &= (values < self.hi) if self.hi_open else (values <= self.hi)
        return ok


def literal_number(node: exp.Expr) -> float | None:
    node = node.unnest()
    if isinstance(node, exp.Neg):
        inner = literal_number(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = float(node.this)
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return None


def flatten(node: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The operands of nested ANDs (or ORs), parentheses removed."""
    node = node.unnest()
    if isinstance(node, kind):
        return flatten(node.args["this"], kind) + flatten(node.args["expression"], kind)
    return [node]


def conjuncts(node: exp.Expr) -> list[exp.Expr]:
    return flatten(node, exp.And)


def column_of(node: exp.Expr) -> str | None:
    node = node.unnest()
    return node.name if isinstance(node, exp.Column) else None


def refusal(part: exp.Expr) -> SnapError:
    return SnapError(f"this query cannot be widened to the grid: {part.sql(dialect='duckdb')} is not {SNAPPABLE}")


def simple(part: exp.Expr, grid: Grid) -> tuple[str, Condition]:
    """One comparison, BETWEEN or IN on one grid column, as (column, condition)."""
    cond = Condition()
    if isinstance(part, exp.Between):
        column, lo, hi = column_of(part.this), literal_number(part.args["low"]), literal_number(part.args["high"])
        if column not in grid.cuts or lo is None or hi is None:
            raise refusal(part)
        cond.above(lo, False)
        cond.below(hi, False)
    elif isinstance(part, exp.In):
        column = column_of(part.this)
        values = [literal_number(e) for e in part.expressions]
        if column not in grid.cuts or not values or any(v is None for v in values) or part.args.get("query"):
            raise refusal(part)
        cond.within({float(v) for v in values if v is not None})
    elif type(part) in FLIP:
        kind: type[exp.Expr] = type(part)
        column, value = column_of(part.this), literal_number(part.expression)
        if column is None:  # the number on the left: read it the other way round
            column, value, kind = column_of(part.expression), literal_number(part.this), FLIP[kind]
        if column not in grid.cuts or value is None:
            raise refusal(part)
        if kind in (exp.GT, exp.GTE, exp.EQ):
            cond.above(value, kind is exp.GT)
        if kind in (exp.LT, exp.LTE, exp.EQ):
            cond.below(value, kind is exp.LT)
    else:
        raise refusal(part)
    assert column is not None
    return column, cond


def one_column(part: exp.Expr, grid: Grid) -> tuple[str, Condition]:
    """A conjunction of simple parts on one column, met into one condition."""
    pieces = [simple(p, grid) for p in conjuncts(part)]
    if len({c for c, _ in pieces}) != 1:
        raise refusal(part)
    cond = Condition()
    for _, piece in pieces:
        cond = cond.meet(piece)
    return pieces[0][0], cond


def conditions(tree: exp.Expr, grid: Grid) -> dict[str, list[Condition]]:
    """Per grid column, the union of conditions the predicate puts on it (SnapError when it cannot
    be snapped); a column without any is absent."""
    out: dict[str, list[Condition]] = {}
    for part in conjuncts(tree):
        if isinstance(part, exp.Boolean):
            if not part.this and grid.columns:  # FALSE: no value of the first column will do
                out[grid.columns[0]] = []
            continue
        if isinstance(part, exp.Or):
            pieces = [one_column(d, grid) for d in flatten(part, exp.Or)]
            if len({c for c, _ in pieces}) != 1:
                raise refusal(part)
            column, union = pieces[0][0], [c for _, c in pieces]
        else:
            column, cond = simple(part, grid)
            union = [cond]
        out[column] = [a.meet(b) for a in out[column] for b in union] if column in out else union
    for column, union in out.items():
        if grid.integer[column]:
            for cond in union:
                cond.whole()
    return out


def touched_bands(grid: Grid, column: str, cond: Condition) -> np.ndarray:
    """bands[i]: band i holds a value (a whole one for an integer QI) that meets `cond`."""
    edges = np.r_[-np.inf, np.asarray(grid.cuts[column], dtype=float), np.inf]
    if cond.points is not None:
        points = np.array(sorted(cond.points), dtype=float)
        touched = np.zeros(len(edges) - 1, dtype=bool)
        touched[grid.bands(column, points[cond.holds(points)])] = True
        return touched
    low, high = edges[:-1], edges[1:]  # band i = [low_i, high_i)
    if grid.integer[column]:  # the band's whole numbers: ceil(low) .. ceil(high) - 1
        first, last = np.ceil(low), np.ceil(high) - 1
        return (np.maximum(first, cond.lo) <= np.minimum(last, cond.hi)) & (first <= last)
    empty = cond.lo > cond.hi or (cond.lo == cond.hi and (cond.lo_open or cond.hi_open))
    upper_ok = (low < cond.hi) if cond.hi_open else (low <= cond.hi)
    return upper_ok & (high > cond.lo) & (not empty)


def band_sql(grid: Grid, column: str, touched: np.ndarray) -> str:
    """The bands as SQL: runs of consecutive bands, each a range, OR-ed."""
    edges = np.r_[-np.inf, np.asarray(grid.cuts[column], dtype=float), np.inf]
    runs, start = [], None
    for i, on in enumerate([*touched.tolist(), False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            runs.append((edges[start], edges[i]))
            start = None
    parts = []
    for lo, hi in runs:
        whole = grid.integer[column] and float(lo).is_integer() and float(hi).is_integer()
        if math.isfinite(lo) and math.isfinite(hi) and whole:
            parts.append(f"{column} BETWEEN {plain_number(lo)} AND {plain_number(hi - 1)}")
        elif math.isfinite(lo) and math.isfinite(hi):
            parts.append(f"{column} >= {plain_number(lo)} AND {column} < {plain_number(hi)}")
        elif math.isfinite(lo):
            parts.append(f"{column} >= {plain_number(lo)}")
        elif math.isfinite(hi):
            parts.append(f"{column} < {plain_number(hi)}")
    if len(parts) == 1:
        return parts[0]
    return "(" + " OR ".join(f"({p})" for p in parts) + ")"


@dataclass(frozen=True)
class Snapped:
    predicate: str  # the grid-aligned predicate (SQL in the analyst's grammar)
    selected: np.ndarray  # boolean per person of the population: the snapped selection


def snap(population: pd.DataFrame, predicate: str, grid: Grid, columns: list[str]) -> Snapped:
    """The query widened outward to the grid. `columns`: the public columns a predicate may name."""
    tree = parsed_predicate(predicate, columns)
    conds = conditions(tree, grid)
    selected = np.ones(len(population), dtype=bool)
    clauses = []
    for column in grid.columns:
        if column not in conds:
            continue
        touched = np.zeros(len(grid.cuts[column]) + 1, dtype=bool)
        for cond in conds[column]:
            touched |= touched_bands(grid, column, cond)
        if not touched.any():
            return Snapped("FALSE", np.zeros(len(population), dtype=bool))
        if touched.all():
            continue
        selected &= touched[grid.bands(column, population[column].to_numpy())]
        clauses.append(band_sql(grid, column, touched))
    return Snapped(" AND ".join(clauses) or "TRUE", selected)

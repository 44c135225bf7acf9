"""Widening a query outward to the public grid (grid.py).

A predicate that can be snapped is a conjunction (AND) of parts, each on one QI: a comparison
with a value (=, <, <=, >, >=, either side), BETWEEN two values, IN a list of values, TRUE or
FALSE, or an OR of conjunctions of those on one and the same QI (the form of a snapped predicate
whose bands are not consecutive, so that every snapped predicate can be asked again). The values
are numbers for a numeric QI, 'YYYY-MM-DD' texts for a date QI (the grammar has no DATE literal),
values of the declared order for an ordinal QI (compared in that order, as query.py reads them),
and values for a categorical QI, which takes = and IN only (its values have no order). Every value
is read as the QI's key (grid.py: number, day number, rank, position). Per QI the parts meet in a
union of intervals (or of finite sets) of keys; the snapped query keeps, per QI, every band that
holds a key of that union, so it selects everyone the original selects and more only where the
bands demand it. Anything else (NOT, <>, arithmetic, an OR across QIs, a value of the wrong kind)
cannot be snapped and is refused with one line. A value a categorical or ordinal QI does not hold
selects nobody with = or IN (as in SQL).

For a QI of whole keys the conditions are read over whole keys ("age > 34" is "age >= 35"), so a
band holding no whole key of the interval is not added; the keys of an ordinal or categorical QI
are moreover kept within its labels. The snapped predicate is written back per kind: ranges of
numbers, ranges of 'YYYY-MM-DD' dates, IN lists of the bands' values."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from sqlglot import exp

from privpub.tasks.audit.grid import LABELLED, Grid, plain_number
from privpub.tasks.audit.query import parsed_predicate

FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.EQ: exp.EQ,
}
SNAPPABLE = (
    "a conjunction (AND) of comparisons, BETWEEN or IN of one grid column with values of its kind "
    "(numbers; 'YYYY-MM-DD' dates; values of an order; = and IN only for a categorical QI; OR only within one column)"
)
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
NOWHERE = math.nan  # the key of a value the QI does not hold: = and IN select nobody with it


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


def literal_key(grid: Grid, column: str, node: exp.Expr) -> float | None:
    """The literal's key on `column` (None when it is not a value of the column's kind; NOWHERE
    for a value an ordinal or categorical QI does not hold)."""
    kind, node = grid.kind(column), node.unnest()
    if kind == "numeric":
        return literal_number(node)
    if kind == "date":
        if not (isinstance(node, exp.Literal) and node.is_string and ISO_DATE.fullmatch(node.this)):
            return None
        try:
            return float(np.datetime64(node.this, "D").astype(np.int64))
        except ValueError:
            return None
    if isinstance(node, exp.Literal) and node.is_string:
        text = node.this
    else:
        number = literal_number(node)
        if number is None:
            return None
        text = str(plain_number(number))
    labels = grid.labels[column]
    return float(labels.index(text)) if text in labels else NOWHERE


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


def key_of(grid: Grid, column: str | None, node: exp.Expr, part: exp.Expr) -> float:
    """The literal's key on a grid column; refused when it is not a value of the column's kind."""
    if column not in grid.cuts:
        raise refusal(part)
    key = literal_key(grid, column, node)
    if key is None:
        raise refusal(part)
    return key


def ordered(grid: Grid, column: str, keys: list[float], part: exp.Expr) -> None:
    """A range needs an order: refused on a categorical QI, or with a value outside an ordinal's order."""
    if grid.kind(column) == "categorical" or any(math.isnan(k) for k in keys):
        raise refusal(part)


def simple(part: exp.Expr, grid: Grid) -> tuple[str, Condition]:
    """One comparison, BETWEEN or IN on one grid column, as (column, condition)."""
    cond = Condition()
    if isinstance(part, exp.Between):
        column = column_of(part.this)
        lo, hi = key_of(grid, column, part.args["low"], part), key_of(grid, column, part.args["high"], part)
        assert column is not None
        ordered(grid, column, [lo, hi], part)
        cond.above(lo, False)
        cond.below(hi, False)
    elif isinstance(part, exp.In):
        column = column_of(part.this)
        if not part.expressions or part.args.get("query"):
            raise refusal(part)
        values = [key_of(grid, column, e, part) for e in part.expressions]
        cond.within({v for v in values if not math.isnan(v)})
    elif type(part) in FLIP:
        kind: type[exp.Expr] = type(part)
        column, value_node = column_of(part.this), part.expression
        if column is None:  # the value on the left: read it the other way round
            column, value_node, kind = column_of(part.expression), part.this, FLIP[kind]
        value = key_of(grid, column, value_node, part)
        assert column is not None
        if kind is exp.EQ and math.isnan(value):  # a value the QI does not hold: nobody
            cond.within(set())
            return column, cond
        if kind is not exp.EQ:
            ordered(grid, column, [value], part)
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
        if grid.kind(column) in LABELLED:  # keys are positions 0 .. len(labels) - 1
            for cond in union:
                cond.above(0.0, False)
                cond.below(float(len(grid.labels[column]) - 1), False)
    return out


def touched_bands(grid: Grid, column: str, cond: Condition) -> np.ndarray:
    """bands[i]: band i holds a value (a whole one for an integer QI) that meets `cond`."""
    edges: npt.NDArray[np.float64] = np.r_[-np.inf, np.asarray(grid.cuts[column], dtype=float), np.inf]
    if cond.points is not None:
        points = np.array(sorted(cond.points), dtype=float)
        touched = np.zeros(len(edges) - 1, dtype=bool)
        touched[grid.band_of(column, points[cond.holds(points)])] = True
        return touched
    low, high = edges[:-1], edges[1:]  # band i = [low_i, high_i)
    if grid.integer[column]:  # the band's whole numbers: ceil(low) .. ceil(high) - 1
        first, last = np.ceil(low), np.ceil(high) - 1
        meets: npt.NDArray[np.bool_] = (np.maximum(first, cond.lo) <= np.minimum(last, cond.hi)) & (first <= last)
        return meets
    empty = cond.lo > cond.hi or (cond.lo == cond.hi and (cond.lo_open or cond.hi_open))
    upper_ok = (low < cond.hi) if cond.hi_open else (low <= cond.hi)
    return upper_ok & (high > cond.lo) & (not empty)


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def iso_date(day: float) -> str:
    return sql_string(str(np.datetime64(int(day), "D")))


def band_sql(grid: Grid, column: str, touched: np.ndarray) -> str:
    """The bands as SQL: an IN list of their values (ordinal, categorical), or runs of consecutive
    bands, each a range (of numbers, or of dates), OR-ed."""
    if grid.kind(column) in LABELLED:
        values = [v for on, band in zip(touched.tolist(), grid.band_labels(column)) if on for v in band]
        return f"{column} IN ({', '.join(sql_string(v) for v in values)})"
    if grid.kind(column) == "date":  # whole days: each run from its first to its last day
        return date_sql(grid, column, touched)
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


def runs(grid: Grid, column: str, touched: np.ndarray) -> list[tuple[float, float]]:
    """The runs of consecutive touched bands, as [lo, hi) edges."""
    edges = np.r_[-np.inf, np.asarray(grid.cuts[column], dtype=float), np.inf]
    on = np.r_[False, touched, False].astype(np.int8)
    starts, stops = np.flatnonzero(np.diff(on) == 1), np.flatnonzero(np.diff(on) == -1)
    return [(float(edges[a]), float(edges[b])) for a, b in zip(starts, stops)]


def date_sql(grid: Grid, column: str, touched: np.ndarray) -> str:
    parts = []
    for lo, hi in runs(grid, column, touched):
        if math.isfinite(lo) and math.isfinite(hi):
            parts.append(f"{column} BETWEEN {iso_date(lo)} AND {iso_date(hi - 1)}")
        elif math.isfinite(lo):
            parts.append(f"{column} >= {iso_date(lo)}")
        else:
            parts.append(f"{column} <= {iso_date(hi - 1)}")
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(f"({p})" for p in parts) + ")"


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
        selected &= touched[grid.bands(column, population[column])]
        clauses.append(band_sql(grid, column, touched))
    return Snapped(" AND ".join(clauses) or "TRUE", selected)

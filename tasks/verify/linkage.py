"""Linkage across several releases of the same rows (the Butterfly paper's Example 1).

An adversary holding several releases matches their rows: two rows can belong to the same person
when every column both releases publish is compatible (exact values equal, a value inside a
published set or range, two sets or ranges overlapping). Each consistent combination is a
candidate joined record whose cells are the intersections. The joint anonymity of a person is the
number of joined records compatible with what the adversary knows of that person; 1 means
re-identified. Quadratic in the table sizes: a check for small tables and tests, not for bulk data.
"""

from __future__ import annotations

from itertools import product
from typing import Any

import pyarrow as pa


def _cells(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as {attribute: set of possible values | (lo, hi) range}."""
    out = []
    for row in table.to_pylist():
        cell: dict[str, Any] = {}
        for col, v in row.items():
            if col.endswith("_lo") and col[:-3] + "_hi" in row:
                cell[col[:-3]] = ("range", v, row[col[:-3] + "_hi"])
            elif col.endswith("_hi") and col[:-3] + "_lo" in row:
                continue
            elif isinstance(v, (list, tuple)):
                cell[col] = ("set", frozenset(v))
            else:
                cell[col] = ("set", frozenset([v]))
        out.append(cell)
    return out


def _meet(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Intersection of two cells, or None when they are incompatible."""
    if a[0] == "range" and b[0] == "range":
        lo, hi = max(a[1], b[1]), min(a[2], b[2])
        return ("range", lo, hi) if lo <= hi else None
    if a[0] == "range" or b[0] == "range":
        rng, st = (a, b) if a[0] == "range" else (b, a)
        inside = frozenset(v for v in st[1] if rng[1] <= v <= rng[2])
        return ("set", inside) if inside else None
    both = a[1] & b[1]
    return ("set", both) if both else None


def _merge(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    joined: dict[str, Any] = {}
    for rec in records:
        for col, cell in rec.items():
            if col in joined:
                cell = _meet(joined[col], cell)
                if cell is None:
                    return None
            joined[col] = cell
    return joined


def joined_records(tables: list[pa.Table]) -> list[dict[str, Any]]:
    """Every consistent combination of one row from each release, as a joined record."""
    rows = [_cells(t) for t in tables]
    out = []
    for combo in product(*rows):
        merged = _merge(list(combo))
        if merged is not None:
            out.append(merged)
    return out


def candidates(tables: list[pa.Table], known: dict[str, Any]) -> list[dict[str, Any]]:
    """Joined records compatible with what the adversary knows of one person."""
    target = {c: ("set", frozenset([v])) for c, v in known.items()}
    return [
        rec
        for rec in joined_records(tables)
        if all(c not in rec or _meet(rec[c], cell) is not None for c, cell in target.items())
    ]


def joint_anonymity(tables: list[pa.Table], people: list[dict[str, Any]]) -> int:
    """Smallest number of candidate joined records over the given people (their known values)."""
    return min(len(candidates(tables, p)) for p in people)

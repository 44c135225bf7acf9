"""A public query grid: bands per QI, built from the public QI table alone (never the secret).

Why: exact auditing is NP-hard in general, and what makes the auditor's decisions expensive is the
granularity of query boundaries (issue 31): with queries aligned to a grid whose cells hold tens
of people, every cell of the knowledge's partition is a union of grid cells and never shrinks to
the one-person cells that cannot be cleared. Queries are widened outward to the grid (snap.py).

A QI's bands are given by increasing cuts c_1 < ... < c_k: band 0 = (-inf, c_1), band i =
[c_i, c_{i+1}), band k = [c_k, +inf). A grid cell is one band per QI.

`auto_grid`: bands at quantiles of the public values, coarsened until every non-empty cell of
the product holds at least `min_cell` people. Start: about n / min_cell cells, the QIs' band
counts b_j = floor((n / min_cell)^(e_j)) with e_j proportional to the log of the QI's number of
distinct values (so d equal QIs get (n / min_cell)^(1/d) each), bands at quantiles; while some non-empty cell is smaller than min_cell, the smallest one (the
first on ties) is merged, along the QI with the most bands (the first on ties), into its
neighbouring band holding fewer people (one cut removed; merging locally keeps the other bands
fine). Every step removes one band, and one band per QI is one cell of n >= min_cell people, so
the loop ends with the guarantee; each step is one vectorised pass (searchsorted + unique) over
the n people, at most (number of initial bands) steps.
`width_grid`: explicit band widths per QI, bands [j w, (j + 1) w) anchored at 0 (no size guarantee).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

DEFAULT_MIN_CELL = 30


@dataclass(frozen=True)
class Grid:
    cuts: dict[str, tuple[float, ...]]  # per QI (in QI order), the increasing band edges
    integer: dict[str, bool]  # the QI holds whole numbers (its comparisons are normalised)
    min_cell: int | None = None  # the size every non-empty cell was built to reach ("auto")

    @property
    def columns(self) -> list[str]:
        return list(self.cuts)

    def bands(self, column: str, values) -> np.ndarray:
        """The band index of each value."""
        return np.searchsorted(np.asarray(self.cuts[column], dtype=float), np.asarray(values, dtype=float), "right")

    def cell_sizes(self, population: pd.DataFrame) -> np.ndarray:
        """How many people each non-empty grid cell holds."""
        return np.unique(cell_codes(population, self), return_counts=True)[1]

    def to_state(self) -> dict:
        return {
            "cuts": {c: [plain_number(x) for x in cuts] for c, cuts in self.cuts.items()},
            "integer": dict(self.integer),
            "min_cell": self.min_cell,
        }

    @classmethod
    def from_state(cls, state: dict) -> Grid:
        return cls({c: tuple(v) for c, v in state["cuts"].items()}, dict(state["integer"]), state.get("min_cell"))


def plain_number(x) -> int | float:
    x = float(x)
    return int(x) if x.is_integer() else x


def numeric_values(population: pd.DataFrame, column: str) -> np.ndarray:
    series = population[column]
    if pd.api.types.is_bool_dtype(series) or not pd.api.types.is_numeric_dtype(series):
        raise ValueError(f"grid: QI {column} is not numeric; a grid needs numeric QIs")
    values = series.to_numpy(dtype=float)
    if not np.isfinite(values).all():
        raise ValueError(f"grid: QI {column} has a missing or non-finite value")
    return values


def is_integer(population: pd.DataFrame, column: str) -> bool:
    return bool(pd.api.types.is_integer_dtype(population[column]))


def cell_codes(population: pd.DataFrame, grid: Grid) -> np.ndarray:
    """One integer per person naming its grid cell (mixed radix over the QIs' band indices)."""
    code = np.zeros(len(population), dtype=np.int64)
    for column in grid.columns:
        code = code * (len(grid.cuts[column]) + 1) + grid.bands(column, population[column].to_numpy())
    return code


def quantile_cuts(sorted_values: np.ndarray, bands: int) -> tuple[float, ...]:
    """At most bands - 1 cuts at the values of rank i n / bands (i = 1 .. bands - 1), each above the
    least value so that no band is empty below it."""
    n = len(sorted_values)
    ranks = (np.arange(1, bands) * n) // bands
    cuts = np.unique(sorted_values[ranks])
    return tuple(float(c) for c in cuts[cuts > sorted_values[0]])


def start_bands(values: dict[str, np.ndarray], cells: float) -> dict[str, int]:
    """Bands per QI to start from: about `cells` cells in all, shared out in proportion to the log
    of each QI's number of distinct values (a QI of 73 ages gets more bands than one of 10 region
    codes: queries draw finer boundaries on it), never more bands than distinct values."""
    distinct = {c: len(np.unique(v)) for c, v in values.items()}
    logs = {c: math.log(k) for c, k in distinct.items()}
    total = sum(logs.values())
    if cells <= 1 or total == 0:
        return {c: 1 for c in values}
    return {c: max(1, min(distinct[c], math.floor(cells ** (logs[c] / total)))) for c in values}


def auto_grid(population: pd.DataFrame, columns: list[str], min_cell: int = DEFAULT_MIN_CELL) -> Grid:
    """Bands at quantiles, coarsened until every non-empty cell holds >= min_cell people (see the
    module's docstring). `population` is the public QI table: no sensitive column is needed."""
    if isinstance(min_cell, bool) or not isinstance(min_cell, int) or min_cell < 1:
        raise ValueError("grid: min_cell must be a positive whole number")
    n = len(population)
    if n < min_cell:
        raise ValueError(f"grid: the table has {n} people, fewer than min_cell = {min_cell}")
    values = {c: np.sort(numeric_values(population, c)) for c in columns}
    cuts = {c: quantile_cuts(values[c], b) for c, b in start_bands(values, n / min_cell).items()}
    integer = {c: is_integer(population, c) for c in columns}
    while True:
        grid = Grid(dict(cuts), integer, min_cell)
        if not columns:
            return grid
        codes, sizes = np.unique(cell_codes(population, grid), return_counts=True)
        if sizes.min() >= min_cell:
            return grid
        # the smallest cell (the first on ties) is merged along the QI with the most bands (the
        # first on ties) into the neighbouring band with fewer people: one cut removed
        widest = max(columns, key=lambda c: len(cuts[c]))
        radix = [len(cuts[c]) + 1 for c in columns]
        band = int(np.unravel_index(codes[np.argmin(sizes)], radix)[columns.index(widest)])
        per_band = np.bincount(grid.bands(widest, values[widest]), minlength=radix[columns.index(widest)])
        below = per_band[band - 1] if band > 0 else np.inf
        above = per_band[band + 1] if band + 1 < len(per_band) else np.inf
        drop = band - 1 if below <= above else band  # cut band - 1 opens this band, cut band closes it
        cuts[widest] = cuts[widest][:drop] + cuts[widest][drop + 1 :]


def width_grid(population: pd.DataFrame, columns: list[str], widths: Mapping[str, float]) -> Grid:
    """Bands [j w, (j + 1) w) per QI, j whole, covering the public values."""
    cuts: dict[str, tuple[float, ...]] = {}
    for c in columns:
        values, w = numeric_values(population, c), float(widths[c])
        first, last = math.floor(values.min() / w) + 1, math.floor(values.max() / w)
        cuts[c] = tuple(float(j * w) for j in range(first, last + 1))
    return Grid(cuts, {c: is_integer(population, c) for c in columns}, None)

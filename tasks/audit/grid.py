"""A public query grid: bands per QI, built from the public QI table alone (never the secret).

Why: exact auditing is NP-hard in general, and what makes the auditor's decisions expensive is the
granularity of query boundaries (issue 31): with queries aligned to a grid whose cells hold tens
of people, every cell of the knowledge's partition is a union of grid cells and never shrinks to
the one-person cells that cannot be cleared. Queries are widened outward to the grid (snap.py).

Every QI is read as a number per person, its *key*: a numeric QI its value, a date QI its day
number (days since 1970-01-01), an ordinal QI the rank of its value in the declared order, a
categorical QI the position of its value in the grid's `labels` (the values listed group after
group). A QI's bands are given by increasing cuts c_1 < ... < c_k on the keys: band 0 =
(-inf, c_1), band i = [c_i, c_{i+1}), band k = [c_k, +inf). So an ordinal band is a run of
consecutive values of the order and a categorical band is one group of values. A grid cell is one
band per QI.

`auto_grid`: bands at quantiles of the public keys (a categorical QI starts with every value of
its hierarchy's level 0, or of the data, alone), coarsened until every non-empty cell of the
product holds at least `min_cell` people. Start: about n / min_cell cells, the band counts of the
numeric, date and ordinal QIs b_j = floor((n / min_cell)^(e_j)) with e_j proportional to the log
of the QI's number of distinct values (so d equal QIs get (n / min_cell)^(1/d) each), bands at
quantiles; while some non-empty cell is smaller than min_cell, the QI with the most bands (the
first on ties) is coarsened by one step around the smallest cell (the first on ties):
  * numeric, date, ordinal: that cell's band is merged into its neighbouring band holding fewer
    people (one cut removed; merging locally keeps the other bands fine);
  * categorical with a hierarchy: one level up (level k groups the values by their k-th ancestor,
    the root standing for itself), repeated until the groups are fewer;
  * categorical without a hierarchy (or at the hierarchy's top level): the cell's group is merged
    with the smallest other group holding people (by count, then by its first value's position).
Every step removes a band, and one band per QI is one cell of n >= min_cell people, so the loop
ends with the guarantee; each step is one vectorised pass (searchsorted, unique) over the n
people, at most (number of initial bands) steps.
`width_grid`: explicit bands per QI (no size guarantee): numbers and dates in bands
[j w, (j + 1) w) anchored at 0 (w in days for a date: day 0 is 1970-01-01), an ordinal QI in runs
of w consecutive values from the first of its order, a categorical QI at a level of its hierarchy
(level 0, every value its own group, without one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, SupportsFloat

import numpy as np
import numpy.typing as npt
import pandas as pd

from privpub.tasks.core.hierarchies import mask_hierarchy

DEFAULT_MIN_CELL = 30
KINDS = ("numeric", "date", "ordinal", "categorical")
LABELLED = ("ordinal", "categorical")  # QIs whose keys are positions in the grid's labels


@dataclass(frozen=True)
class GridQI:
    """What the spec declares about a QI that its bands need (public, no data)."""

    kind: str = "numeric"
    order: tuple[str, ...] = ()  # ordinal: the declared order, as the table spells its values
    tree: Mapping[str, Sequence[str]] | str | None = None  # categorical: {parent: [children]} or "mask"


@dataclass(frozen=True)
class Grid:
    cuts: dict[str, tuple[float, ...]]  # per QI (in QI order), the increasing band edges on its keys
    integer: dict[str, bool]  # the QI's keys are whole numbers (its comparisons are normalised)
    min_cell: int | None = None  # the size every non-empty cell was built to reach ("auto")
    kinds: dict[str, str] = field(default_factory=dict)  # the QIs that are not numeric: their kind
    labels: dict[str, tuple[str, ...]] = field(default_factory=dict)  # ordinal: the order; categorical: groups' values

    @property
    def columns(self) -> list[str]:
        return list(self.cuts)

    def kind(self, column: str) -> str:
        return self.kinds.get(column, "numeric")

    def keys(self, column: str, values: npt.ArrayLike) -> np.ndarray:
        """Each value's key (number, day number, rank or position in the labels)."""
        kind = self.kind(column)
        if kind == "date":
            return day_numbers(values, column).astype(float)
        if kind in LABELLED:
            return positions(self.labels[column], values, column).astype(float)
        return np.asarray(values, dtype=float)

    def band_of(self, column: str, keys: npt.ArrayLike) -> np.ndarray:
        """The band index of each key."""
        return np.searchsorted(np.asarray(self.cuts[column], dtype=float), np.asarray(keys, dtype=float), "right")

    def bands(self, column: str, values: npt.ArrayLike) -> np.ndarray:
        """The band index of each value."""
        return self.band_of(column, self.keys(column, values))

    def band_labels(self, column: str) -> list[tuple[str, ...]]:
        """An ordinal or categorical QI's values, band by band."""
        edges = [0, *(int(c) for c in self.cuts[column]), len(self.labels[column])]
        return [self.labels[column][a:b] for a, b in zip(edges[:-1], edges[1:])]

    def cell_sizes(self, population: pd.DataFrame) -> np.ndarray:
        """How many people each non-empty grid cell holds."""
        return np.unique(cell_codes(population, self), return_counts=True)[1]

    def to_state(self) -> dict[str, Any]:
        """JSON; `kinds` and `labels` only when a QI is not numeric (a numeric grid's state is as before)."""
        state: dict[str, Any] = {
            "cuts": {c: [plain_number(x) for x in cuts] for c, cuts in self.cuts.items()},
            "integer": dict(self.integer),
            "min_cell": self.min_cell,
        }
        if self.kinds:
            state["kinds"] = dict(self.kinds)
            state["labels"] = {c: list(v) for c, v in self.labels.items()}
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Grid:
        return cls(
            {c: tuple(v) for c, v in state["cuts"].items()},
            dict(state["integer"]),
            state.get("min_cell"),
            dict(state.get("kinds", {})),  # older states: numeric QIs only
            {c: tuple(v) for c, v in state.get("labels", {}).items()},
        )


def plain_number(x: SupportsFloat) -> int | float:
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


def day_numbers(values: npt.ArrayLike, column: str) -> np.ndarray:
    """Day numbers of dates (datetime64 or Arrow date values)."""
    series = values if isinstance(values, pd.Series) else pd.Series(values)
    if not pd.api.types.is_datetime64_any_dtype(series.dtype) or series.isna().any():
        raise ValueError(f"grid: QI {column} is a date QI and must hold dates")
    return series.astype("datetime64[s]").to_numpy().astype("datetime64[D]").astype(np.int64)


def positions(labels: Sequence[str], values: npt.ArrayLike, column: str) -> np.ndarray:
    """The position of each value (as text) in `labels`."""
    at = pd.Index(list(labels)).get_indexer(pd.Index(pd.Series(values).astype(str)))
    if (at < 0).any():
        raise ValueError(f"grid: QI {column} holds a value outside its declared values")
    return at


def is_integer(population: pd.DataFrame, column: str) -> bool:
    return bool(pd.api.types.is_integer_dtype(population[column]))


def cell_codes(population: pd.DataFrame, grid: Grid) -> np.ndarray:
    """One integer per person naming its grid cell (mixed radix over the QIs' band indices)."""
    code = np.zeros(len(population), dtype=np.int64)
    for column in grid.columns:
        code = code * (len(grid.cuts[column]) + 1) + grid.bands(column, population[column])
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


# -- categorical QIs: groups of values -----------------------------------------------------------
def resolved_tree(qi: GridQI, values: np.ndarray) -> dict[str, list[str]] | None:
    """The QI's hierarchy as {parent: [children]} ("mask" built from the values present)."""
    if qi.tree == "mask":
        return mask_hierarchy(np.unique(values.astype(str)))
    if not isinstance(qi.tree, Mapping):
        return None
    return {str(p): [str(k) for k in kids] for p, kids in qi.tree.items()}


def tree_leaves(tree: dict[str, list[str]]) -> list[str]:
    return sorted({k for kids in tree.values() for k in kids if k not in tree})


def ancestors(leaves: Sequence[str], tree: dict[str, list[str]], level: int) -> np.ndarray:
    """Each leaf's ancestor `level` steps up (a root stands for itself above it); a loop over the levels."""
    parent = pd.Series({k: p for p, kids in tree.items() for k in kids}, dtype=object)
    node = pd.Series(list(leaves), dtype=object)
    for _ in range(level):
        node = node.map(parent).fillna(node)
    return node.to_numpy()


def top_level(tree: dict[str, list[str]]) -> int:
    """The least level at which every leaf stands at its root (the hierarchy's depth)."""
    parents = {k for kids in tree.values() for k in kids}
    node, level = pd.Series(tree_leaves(tree), dtype=object), 0
    parent = pd.Series({k: p for p, kids in tree.items() for k in kids}, dtype=object)
    while node.isin(parents).any():
        node, level = node.map(parent).fillna(node), level + 1
    return level


def level_groups(leaves: Sequence[str], tree: dict[str, list[str]] | None, level: int) -> np.ndarray:
    """Each value's group id (0, 1, ... in the order of the groups' first values) at a level."""
    if tree is None or level == 0:
        return np.arange(len(leaves))
    return pd.factorize(ancestors(leaves, tree, level))[0]


def labelled_cuts(groups: np.ndarray, base: Sequence[str]) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The values listed group after group, and the cuts (positions) between the groups."""
    order = np.argsort(groups, kind="stable")
    sizes = np.bincount(groups)
    return tuple(np.asarray(base, dtype=object)[order].tolist()), tuple(float(c) for c in np.cumsum(sizes)[:-1])


def categorical_values(
    population: pd.DataFrame, column: str, qi: GridQI
) -> tuple[list[str], dict[str, list[str]] | None]:
    """The QI's values as grid labels (its hierarchy's leaves, or the values present) and its hierarchy."""
    values = population[column].astype(str).to_numpy()
    tree = resolved_tree(qi, values)
    return (tree_leaves(tree) if tree else sorted(set(values.tolist()))), tree


# -- building ------------------------------------------------------------------------------------
def spec_of(qis: Mapping[str, GridQI] | None, column: str) -> GridQI:
    qi = (qis or {}).get(column, GridQI())
    if qi.kind not in KINDS:
        raise ValueError(f"grid: QI {column} has an unknown kind {qi.kind}")
    if qi.kind == "ordinal" and not qi.order:
        raise ValueError(f"grid: ordinal QI {column} needs its order")
    return qi


def labelled_grid(
    cuts: Mapping[str, tuple[float, ...]],
    integer: Mapping[str, bool],
    min_cell: int | None,
    qis: Mapping[str, GridQI],
    labels: Mapping[str, tuple[str, ...]],
) -> Grid:
    kinds = {c: q.kind for c, q in qis.items() if q.kind != "numeric"}
    return Grid(dict(cuts), dict(integer), min_cell, kinds, dict(labels))


def auto_grid(
    population: pd.DataFrame,
    columns: list[str],
    min_cell: int = DEFAULT_MIN_CELL,
    qis: Mapping[str, GridQI] | None = None,
) -> Grid:
    """Bands at quantiles, coarsened until every non-empty cell holds >= min_cell people (see the
    module's docstring). `population` is the public QI table: no sensitive column is needed;
    `qis` declares each QI's kind (numeric when absent)."""
    if isinstance(min_cell, bool) or not isinstance(min_cell, int) or min_cell < 1:
        raise ValueError("grid: min_cell must be a positive whole number")
    n = len(population)
    if n < min_cell:
        raise ValueError(f"grid: the table has {n} people, fewer than min_cell = {min_cell}")
    spec = {c: spec_of(qis, c) for c in columns}
    labels: dict[str, tuple[str, ...]] = {}
    trees: dict[str, dict[str, list[str]] | None] = {}
    base: dict[str, list[str]] = {}
    groups: dict[str, np.ndarray] = {}  # categorical: each base value's group id
    levels: dict[str, int] = {}
    for c in columns:
        if spec[c].kind == "ordinal":
            labels[c] = spec[c].order
        elif spec[c].kind == "categorical":
            base[c], trees[c] = categorical_values(population, c, spec[c])
            levels[c], groups[c] = 0, level_groups(base[c], trees[c], 0)
            labels[c] = tuple(base[c])
    draft = labelled_grid({c: () for c in columns}, {}, min_cell, spec, labels)
    keys = {
        c: draft.keys(c, population[c]) if spec[c].kind != "numeric" else numeric_values(population, c) for c in columns
    }
    ordered = {c: np.sort(keys[c]) for c in columns if spec[c].kind != "categorical"}  # banded at quantiles
    shares = start_bands(ordered, n / min_cell) if ordered else {}
    cuts = {c: quantile_cuts(ordered[c], shares[c]) if c in ordered else () for c in columns}
    integer = {c: spec[c].kind != "numeric" or is_integer(population, c) for c in columns}
    while True:
        for c in groups:
            labels[c], cuts[c] = labelled_cuts(groups[c], base[c])
        grid = labelled_grid(cuts, integer, min_cell, spec, labels)
        if not columns:
            return grid
        codes, sizes = np.unique(cell_codes(population, grid), return_counts=True)
        if sizes.min() >= min_cell:
            banded = [c for c in columns if c in ordered]
            cuts = refined_cuts(grid, population, keys, banded, min_cell)
            return labelled_grid(cuts, integer, min_cell, spec, labels)
        # the smallest cell (the first on ties) is coarsened along the QI with the most bands
        # (the first on ties): one band fewer there
        widest = max(columns, key=lambda c: len(cuts[c]))
        radix = [len(cuts[c]) + 1 for c in columns]
        band = int(np.unravel_index(codes[np.argmin(sizes)], radix)[columns.index(widest)])
        per_band = np.bincount(grid.bands(widest, population[widest]), minlength=radix[columns.index(widest)])
        if widest in groups:
            groups[widest] = coarser_groups(groups[widest], base[widest], trees[widest], levels, widest, band, per_band)
            continue
        below = per_band[band - 1] if band > 0 else np.inf
        above = per_band[band + 1] if band + 1 < len(per_band) else np.inf
        drop = band - 1 if below <= above else band  # cut band - 1 opens this band, cut band closes it
        cuts[widest] = cuts[widest][:drop] + cuts[widest][drop + 1 :]


def refined_cuts(
    grid: Grid, population: pd.DataFrame, keys: Mapping[str, np.ndarray], banded: list[str], min_cell: int
) -> dict[str, tuple[float, ...]]:
    """The grid's numeric, date and ordinal bands cut as finely as the guarantee allows (issue 42:
    the coarsening above may merge a QI's bands far more than needed, e.g. `age = 45` widened to
    `age >= 21`). Repeatedly, the widest band (its span of keys over the QI's range, the widest
    first) is cut where every non-empty cell on both sides keeps >= min_cell people, at the cut
    leaving the narrower side narrowest (so a value that fills its cells alone becomes a band of
    its own); a band no cut can split is final. Cutting only makes the other QIs' cells finer, so
    a band found final stays final: at the end no band can be cut (each is minimal), and a band
    spanning much of its range is one that min_cell forces."""
    cuts = {c: () if c in banded else tuple(grid.cuts[c]) for c in grid.columns}  # banded QIs: cut afresh
    bands = {
        c: np.zeros(len(population), dtype=np.int64) if c in banded else grid.bands(c, population[c]) for c in cuts
    }
    span = {c: float(keys[c].max() - keys[c].min()) or 1.0 for c in banded}
    final: set[tuple[str, float]] = set()  # (QI, a band's least key): bands no cut can split
    while True:
        widest = []
        for c in banded:
            lo = np.full(len(cuts[c]) + 1, np.inf)
            hi = np.full(len(cuts[c]) + 1, -np.inf)
            np.minimum.at(lo, bands[c], keys[c])
            np.maximum.at(hi, bands[c], keys[c])
            widest += [((hi[i] - lo[i]) / span[c], c, i, lo[i]) for i in range(len(lo)) if hi[i] > lo[i]]
        for _, c, i, lowest in sorted(widest, key=lambda w: (-w[0], w[1], w[2])):
            if (c, lowest) in final:
                continue
            cut = band_cut(bands, keys[c], c, i, min_cell)
            if cut is None:
                final.add((c, lowest))
                continue
            cuts[c] = tuple(sorted((*cuts[c], cut)))
            bands[c] = np.searchsorted(np.asarray(cuts[c]), keys[c], "right")
            break
        else:
            return cuts


def band_cut(bands: Mapping[str, np.ndarray], keys: np.ndarray, column: str, band: int, min_cell: int) -> float | None:
    """Where band `band` of `column` can be cut with every non-empty cell (this QI's part x the
    other QIs' bands) on both sides >= min_cell, the narrower side narrowest; None: nowhere."""
    inside = bands[column] == band
    others = np.zeros(int(inside.sum()), dtype=np.int64)
    for c, b in bands.items():
        if c != column:
            others = others * (int(b.max()) + 1) + b[inside]
    values, at = np.unique(keys[inside], return_inverse=True)
    if len(values) < 2:
        return None
    cells, cell = np.unique(others, return_inverse=True)
    counts = np.zeros((len(values), len(cells)), dtype=np.int64)
    np.add.at(counts, (at, cell), 1)
    left = counts.cumsum(axis=0)[:-1]  # row j: the cells below values[j + 1]
    right = counts.sum(axis=0) - left
    fits = (((left == 0) | (left >= min_cell)) & ((right == 0) | (right >= min_cell))).all(axis=1)
    if not fits.any():
        return None
    # the cut whose lower side holds about half of the bands the band could hold (K = the fewest
    # whole min_cells any of its cells holds): half its people, or, for K odd, floor(K / 2) of K
    # parts, so 30 people at min_cell 10 become 10 + 20, then 10 + 10, not 15 + 15
    whole = int((counts.sum(axis=0) // min_cell).min())
    target = counts.sum() * max(1, whole // 2) / max(whole, 2)
    j = np.flatnonzero(fits)
    return float(values[j[np.argmin(np.abs(left[j].sum(axis=1) - target))] + 1])


def coarser_groups(
    groups: np.ndarray,
    base: list[str],
    tree: dict[str, list[str]] | None,
    levels: dict[str, int],
    column: str,
    band: int,
    per_band: np.ndarray,
) -> np.ndarray:
    """One group fewer: a level up the hierarchy (until the groups are fewer), or, without one or
    at its top, `band`'s group merged with the smallest other group holding people (by count,
    then by position). Bands are numbered like the groups, in the order of their first values."""
    count = groups.max() + 1
    while tree is not None and levels[column] < top_level(tree):
        levels[column] += 1
        finer = level_groups(base, tree, levels[column])
        if finer.max() + 1 < count:
            return finer
    others = np.delete(np.arange(count), band)
    rank = np.lexsort((others, per_band[others], per_band[others] == 0))
    merged = np.where(groups == others[rank[0]], band, groups)
    return pd.factorize(merged)[0]


def width_grid(
    population: pd.DataFrame,
    columns: list[str],
    widths: Mapping[str, float],
    qis: Mapping[str, GridQI] | None = None,
) -> Grid:
    """Explicit bands per QI (see the module's docstring): a width for a numeric, date or ordinal
    QI, a hierarchy level for a categorical one."""
    spec = {c: spec_of(qis, c) for c in columns}
    cuts: dict[str, tuple[float, ...]] = {}
    labels: dict[str, tuple[str, ...]] = {}
    for c in columns:
        kind, w = spec[c].kind, widths[c]
        if kind == "categorical":
            base, tree = categorical_values(population, c, spec[c])
            if tree is None and w != 0 or tree is not None and not 0 <= int(w) <= top_level(tree):
                top = 0 if tree is None else top_level(tree)
                raise ValueError(
                    f"grid {c}: the level of a categorical QI's hierarchy must be a whole number from 0 to {top}"
                )
            labels[c], cuts[c] = labelled_cuts(level_groups(base, tree, int(w)), base)
            continue
        if kind == "ordinal":
            labels[c] = spec[c].order
            lowest, highest = 0.0, float(len(spec[c].order) - 1)
        else:
            draft = labelled_grid({c: ()}, {}, None, {c: spec[c]}, {})
            values = draft.keys(c, population[c]) if kind == "date" else numeric_values(population, c)
            lowest, highest = float(values.min()), float(values.max())
        first, last = math.floor(lowest / w) + 1, math.floor(highest / w)
        cuts[c] = tuple(float(j * w) for j in range(first, last + 1))
    integer = {c: spec[c].kind != "numeric" or is_integer(population, c) for c in columns}
    return labelled_grid(cuts, integer, None, spec, labels)

"""The shared utility workload: count queries with QI predicates and one sensitive value.

    SELECT count(*) FROM T WHERE <cond on QI_1> AND ... AND S = v

A condition is either an inclusive numeric range (`lo <= x <= hi`) or a set of allowed values
(ordinal / categorical). Every technique answers the same queries through its own estimator,
so the techniques are comparable in one table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import duckdb
import numpy as np
import pandas as pd

from privpub.tasks.core.microdata import QIDomain


@dataclass(frozen=True)
class RangeCond:
    lo: float
    hi: float  # inclusive

    def sql(self, col: str) -> str:
        return f'"{col}" BETWEEN {self.lo!r} AND {self.hi!r}'


@dataclass(frozen=True)
class SetCond:
    values: frozenset[Any]

    def sql(self, col: str) -> str:
        items = ", ".join("'" + str(v).replace("'", "''") + "'" for v in sorted(self.values, key=str))
        return f'"{col}" IN ({items})'


@dataclass(frozen=True)
class CountQuery:
    conditions: tuple[tuple[str, RangeCond | SetCond], ...]  # (qi name, condition)
    sensitive_value: Any
    selectivity: float = 0.0  # the target band it was drawn for

    def sql_where(self, sensitive_col: str) -> str:
        parts = [cond.sql(col) for col, cond in self.conditions]
        v = self.sensitive_value
        lit = repr(v) if isinstance(v, (int, float)) else "'" + str(v).replace("'", "''") + "'"
        parts.append(f'"{sensitive_col}" = {lit}')
        return " AND ".join(parts)


SELECTIVITIES = (0.01, 0.05, 0.10)


def _condition(
    dom: QIDomain, freq: np.ndarray, coverage: float, rng: np.random.Generator
) -> tuple[RangeCond | SetCond, np.ndarray]:
    """A condition on one QI that selects about `coverage` of the rows (`freq`: the share of rows
    holding each code), and the codes it selects: a boolean array over the domain."""
    picked = _picked_codes(dom, freq, coverage, rng)
    return condition_of(dom, picked), picked


def _picked_codes(
    dom: QIDomain, freq: np.ndarray, coverage: float, rng: np.random.Generator, cdf: np.ndarray | None = None
) -> np.ndarray:
    """The codes _condition selects (its random draws), without building the condition: most
    draws are rejected by their count, so make_workload builds the conditions it keeps only.
    cdf: np.cumsum(freq), when the caller keeps it across draws."""
    picked = np.zeros(dom.size, dtype=bool)
    if dom.kind == "categorical" and not dom.hierarchy:
        # codes in a random order (those no row holds skipped) until their mass reaches the
        # coverage: a cumulative sum adds in order, as a running total would, in one pass
        order = rng.permutation(dom.size)
        order = order[freq[order] != 0]
        reached = np.cumsum(freq[order]) >= coverage
        picked[order[: int(np.argmax(reached)) + 1 if reached.any() else len(order)]] = True
        return picked
    # ordered domain: a contiguous code range holding about `coverage` of the mass
    cdf = np.cumsum(freq) if cdf is None else cdf
    start_q = rng.uniform(0, max(1e-9, 1 - coverage))
    lo = int(np.searchsorted(cdf, start_q, side="right"))
    hi = int(np.searchsorted(cdf, min(1.0, start_q + coverage) - 1e-12))
    lo, hi = min(lo, dom.size - 1), min(max(hi, lo), dom.size - 1)
    picked[lo : hi + 1] = True
    return picked


def condition_of(dom: QIDomain, picked: np.ndarray) -> RangeCond | SetCond:
    """The condition selecting the picked codes: a numeric QI's range (its picked codes are
    contiguous), else the set of their values as text."""
    if dom.kind == "numeric":
        at = np.flatnonzero(picked)
        return RangeCond(float(dom.values[at[0]]), float(dom.values[at[-1]]))
    return SetCond(frozenset(str(v) for v in dom.values[picked]))


def joint_too_large(sizes: Sequence[int], n: int, attrs: list[int]) -> bool:
    """Would the joint histogram of these QIs (of these domain sizes) outgrow a table of n rows
    (then count directly)?"""
    return bool(np.prod([float(sizes[j]) for j in attrs]) > max(4 * n, 1 << 16))


class SizedTable(Protocol):
    """What drawing a workload reads of the rows: how many, and the QI domains."""

    domains: list[QIDomain]

    @property
    def n(self) -> int: ...


class CodedTable(SizedTable, Protocol):
    """Rows held in this process as codes (Microdata, a partition's view): what counts read."""

    codes: np.ndarray  # (n, D)
    sensitive_values: np.ndarray
    sensitive_codes: np.ndarray


class Selections:
    """How many rows a conjunction of per-QI code sets selects, and which rows.

    Counts come from the joint histogram of the QIs involved (built once per set of QIs), so a
    rejected draw costs no pass over the rows; only an accepted query's drawn row is looked for,
    block by block from the nearer end (a quarter of the rows on average)."""

    BLOCK = 1 << 16

    def __init__(self, data: CodedTable) -> None:
        self.n = data.n
        self.sensitive_values, self.sensitive_codes = data.sensitive_values, data.sensitive_codes
        self.sizes = [d.size for d in data.domains]
        # the smallest integer type that holds the codes: cheaper comparisons and gathers
        self.columns = [
            np.ascontiguousarray(data.codes[:, j]).astype(np.uint8 if d.size <= 256 else np.int32)
            for j, d in enumerate(data.domains)
        ]
        self.counts = [np.bincount(c, minlength=s) for c, s in zip(self.columns, self.sizes)]
        self._joint: dict[tuple[int, ...], np.ndarray] = {}
        self._too_large: dict[tuple[int, ...], bool] = {}

    def count(self, attrs: list[int], picks: list[np.ndarray]) -> int:
        if len(attrs) == 1:
            return int(self.counts[attrs[0]][picks[0]].sum())
        if self.too_large(attrs):
            return self.count_rows(attrs, picks)
        return int(self.histogram(attrs)[np.ix_(*picks)].sum())

    def histogram(self, attrs: list[int]) -> np.ndarray:
        """The joint histogram of the QIs `attrs` (sorted), built once. A pair's is summed from a
        triple's, built and kept for the draws of three QIs that come later (issue 43: a pass
        over the rows fewer per pair; the same counts)."""
        key = tuple(attrs)
        if key not in self._joint:
            triple = self._triple_over(attrs) if len(attrs) == 2 else None
            if triple is None:
                self._joint[key] = self.joint(attrs)
            else:
                self._joint[key] = self.histogram(triple).sum(
                    axis=triple.index(next(j for j in triple if j not in attrs))
                )
        return self._joint[key]

    def _triple_over(self, pair: list[int]) -> list[int] | None:
        """A triple of QIs holding `pair` to sum the pair's histogram from: one whose histogram
        is built already, else the pair and the QI of fewest codes (unless that histogram would
        be too large); None: the pair's histogram is built from the rows."""
        others = [j for j in range(len(self.sizes)) if j not in pair]
        for j in others:
            if tuple(sorted([*pair, j])) in self._joint:
                return sorted([*pair, j])
        if not others:
            return None
        third = min(others, key=lambda j: (self.sizes[j], j))
        triple = sorted([*pair, third])
        return None if self.too_large(triple) else triple

    def too_large(self, attrs: list[int]) -> bool:
        key = tuple(attrs)  # asked once a draw: kept
        if key not in self._too_large:
            self._too_large[key] = joint_too_large(self.sizes, self.n, attrs)
        return self._too_large[key]

    def joint(self, attrs: list[int]) -> np.ndarray:
        """The joint histogram of the QIs' codes."""
        dims = [self.sizes[j] for j in attrs]
        flat: np.ndarray = self.columns[attrs[0]].astype(np.int32 if np.prod(dims, dtype=float) < 2**31 else np.int64)
        for j in attrs[1:]:
            flat *= self.sizes[j]
            flat += self.columns[j]
        return np.bincount(flat, minlength=int(np.prod(dims))).reshape(dims)

    def count_rows(self, attrs: list[int], picks: list[np.ndarray]) -> int:
        return int(np.count_nonzero(self._mask(attrs, picks, slice(0, self.n))))

    def _mask(self, attrs: list[int], picks: list[np.ndarray], rows: slice) -> np.ndarray:
        mask = np.ones(rows.stop - rows.start, dtype=bool)
        for j, picked in zip(attrs, picks):
            col = self.columns[j][rows]
            codes = np.flatnonzero(picked)
            if len(codes) == codes[-1] - codes[0] + 1:  # a contiguous range: two comparisons
                mask &= (col >= codes[0]) & (col <= codes[-1])
            elif len(codes) <= 3:  # a few codes: comparisons beat a gather
                mask &= np.logical_or.reduce([col == c for c in codes])
            else:
                mask &= picked[col]
        return mask

    def nth_row(self, attrs: list[int], picks: list[np.ndarray], nth: int, count: int) -> int:
        """The row number of the nth of the `count` selected rows (0-based, in row order),
        reading blocks of rows from the nearer end only until it is found."""
        from_end = nth >= count - nth  # then find the (count - 1 - nth)th from the last row
        left = count - 1 - nth if from_end else nth
        starts = range(0, self.n, self.BLOCK)
        for start in reversed(starts) if from_end else starts:
            mask = self._mask(attrs, picks, slice(start, min(start + self.BLOCK, self.n)))
            found = int(np.count_nonzero(mask))  # counted: a passed block's rows are not listed
            if left < found:
                hits = np.flatnonzero(mask)
                return start + int(hits[found - 1 - left] if from_end else hits[left])
            left -= found
        raise IndexError("fewer selected rows than counted")

    def drawn_values(self, draws: list[tuple[Any, ...]]) -> list[Any]:
        """The sensitive value of each draw's (attrs, picks, nth, count) selected row."""
        codes = [self.sensitive_codes[self.nth_row(*draw)] for draw in draws]
        return [self.sensitive_values[c] for c in codes]


# the old private name, kept only because tests/test_evaluate_pins.py (frozen) patches it
_Selections = Selections


def every_draw_rejected(sel: float, n: int) -> bool:
    """No count of rows falls in [sel / 2, 2 sel] of n: one row is already more than 2 sel (the
    same float comparison as make_workload's; more rows, a larger share), none is less than sel / 2."""
    return 1 / n > sel * 2


def skip_rejected_draws(
    domains: Sequence[QIDomain], rng: np.random.Generator, sel: float, tries: int, most_attrs: int
) -> None:
    """Advance `rng` exactly as `tries` rejected draws of make_workload would (the same calls with
    the same arguments, so the next band draws the same queries), without building conditions
    or counting rows: on a table of fewer than 50 rows the 1% band rejects every draw."""
    for _ in range(tries):
        m = int(rng.integers(1, most_attrs + 1))
        coverage = sel ** (1 / m)
        for j in sorted(rng.choice(len(domains), size=m, replace=False).tolist()):
            if domains[j].kind == "categorical" and not domains[j].hierarchy:
                rng.permutation(domains[j].size)
            else:
                rng.uniform(0, max(1e-9, 1 - coverage))


def make_workload(
    data: SizedTable,
    rng: np.random.Generator,
    per_band: int = 100,
    selectivities: Sequence[float] = SELECTIVITIES,
    max_attrs: int = 3,
    select: Any = None,
) -> list[CountQuery]:
    """Random count queries whose QI predicates select about 1%, 5%, 10% of the rows.

    Each query takes 1..max_attrs random QIs; its sensitive value is drawn from the rows its
    predicate selects, so every query has a non-zero true answer (relative error is defined).
    The values are looked up once every query is drawn (they draw no random numbers), all at
    once: `select` (default: the rows in this process) may be a cluster's partitions
    (tasks/evaluate/parted.py), where a lookup is a round trip.
    """
    queries: list[CountQuery] = []
    n_qi = len(data.domains)
    if data.n == 0:
        return queries
    # no `select`: the rows are in this process (a cluster's partitions come with their own)
    select = select or Selections(cast(CodedTable, data))
    draws: list[tuple[Any, ...]] = []
    freqs = [c / max(data.n, 1) for c in select.counts]
    cdfs = [np.cumsum(f) for f in freqs]  # the ordered domains' draws read them
    for sel in selectivities:
        made, tries = 0, 0
        if every_draw_rejected(sel, data.n):
            skip_rejected_draws(data.domains, rng, sel, per_band * 50, min(max_attrs, n_qi))
            continue
        while made < per_band and tries < per_band * 50:
            tries += 1
            m = int(rng.integers(1, min(max_attrs, n_qi) + 1))
            attrs = sorted(rng.choice(n_qi, size=m, replace=False).tolist())
            picks = [_picked_codes(data.domains[j], freqs[j], sel ** (1 / m), rng, cdfs[j]) for j in attrs]
            count = select.count(attrs, picks)
            actual = count / data.n  # the selected share of rows
            if not (sel / 2 <= actual <= sel * 2):
                continue
            draws.append((attrs, picks, int(rng.integers(count)), count))
            conds = tuple((data.domains[j].name, condition_of(data.domains[j], p)) for j, p in zip(attrs, picks))
            queries.append(CountQuery(conds, None, sel))
            made += 1
    values = select.drawn_values(draws)
    return [
        CountQuery(q.conditions, v.item() if hasattr(v, "item") else v, q.selectivity) for q, v in zip(queries, values)
    ]


def exact_answers(frame: pd.DataFrame, workload: list[CountQuery], sensitive: str) -> np.ndarray:
    """True answers on the original table: one DuckDB scan, one conditional sum per query. The
    SQL reference of counting.count_in_microdata (what evaluate uses), kept for tests and
    experiments that start from a frame."""
    if not workload:
        return np.zeros(0)
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE original AS SELECT * FROM frame")  # scanning a table beats a pandas scan
    # CASE inside one aggregate per query: DuckDB evaluates hundreds of FILTER clauses ~8x slower
    aggs = ", ".join(
        f"coalesce(sum(CASE WHEN {q.sql_where(sensitive)} THEN 1 ELSE 0 END), 0) AS q{i}"
        for i, q in enumerate(workload)
    )
    row = con.execute(f"SELECT {aggs} FROM original").fetchone()
    return np.asarray(row, dtype=float)


class ColumnIndex:
    """Columns of a frame factorized once, so each predicate is one array lookup."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        self._codes: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _factor(self, col: str) -> tuple[np.ndarray, np.ndarray]:
        if col not in self._codes:
            codes, uniques = pd.factorize(self.frame[col], sort=False)
            self._codes[col] = (codes, np.asarray(uniques))
        return self._codes[col]

    def condition_mask(self, col: str, cond: RangeCond | SetCond) -> np.ndarray:
        codes, uniques = self._factor(col)
        if isinstance(cond, RangeCond):
            v = uniques.astype(float)
            hit = (v >= cond.lo) & (v <= cond.hi)
        else:
            hit = np.isin(uniques.astype(str), [str(x) for x in cond.values])
        result: np.ndarray = hit[codes]
        return result

    def mask(self, conditions: Sequence[tuple[str, RangeCond | SetCond]]) -> np.ndarray:
        out = np.ones(len(self.frame), dtype=bool)
        for col, cond in conditions:
            out &= self.condition_mask(col, cond)
        return out

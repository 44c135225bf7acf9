"""The shared utility workload: count queries with QI predicates and one sensitive value.

    SELECT count(*) FROM T WHERE <cond on QI_1> AND ... AND S = v

A condition is either an inclusive numeric range (`lo <= x <= hi`) or a set of allowed values
(ordinal / categorical). Every technique answers the same queries through its own estimator,
so the techniques are comparable in one table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RangeCond:
    lo: float
    hi: float  # inclusive

    def sql(self, col: str) -> str:
        return f'"{col}" BETWEEN {self.lo!r} AND {self.hi!r}'


@dataclass(frozen=True)
class SetCond:
    values: frozenset

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


def _condition(dom, codes: np.ndarray, freq: np.ndarray, coverage: float, rng: np.random.Generator):
    """A condition on one QI that selects about `coverage` of the rows, and its row mask
    (`freq`: the share of rows holding each code)."""
    if dom.kind == "categorical" and not dom.hierarchy:
        chosen, mass = [], 0.0
        for c in rng.permutation(dom.size):
            if freq[c] == 0:
                continue
            chosen.append(c)
            mass += freq[c]
            if mass >= coverage:
                break
        picked = np.zeros(dom.size, dtype=bool)
        picked[chosen] = True
        return SetCond(frozenset(str(v) for v in dom.values[picked])), picked[codes]
    # ordered domain: a contiguous code range holding about `coverage` of the mass
    cdf = np.cumsum(freq)
    start_q = rng.uniform(0, max(1e-9, 1 - coverage))
    lo = int(np.searchsorted(cdf, start_q, side="right"))
    hi = int(np.searchsorted(cdf, min(1.0, start_q + coverage) - 1e-12))
    lo, hi = min(lo, dom.size - 1), min(max(hi, lo), dom.size - 1)
    mask = (codes >= lo) & (codes <= hi)
    if dom.kind == "numeric":
        return RangeCond(float(dom.values[lo]), float(dom.values[hi])), mask
    return SetCond(frozenset(str(v) for v in dom.values[lo:hi + 1])), mask


def make_workload(data, rng: np.random.Generator, per_band: int = 100,
                  selectivities=SELECTIVITIES, max_attrs: int = 3) -> list[CountQuery]:
    """Random count queries whose QI predicates select about 1%, 5%, 10% of the rows.

    Each query takes 1..max_attrs random QIs; its sensitive value is drawn from the rows its
    predicate selects, so every query has a non-zero true answer (relative error is defined).
    """
    queries: list[CountQuery] = []
    n_qi = len(data.domains)
    # contiguous code columns and each code's share of rows, once rather than per attempt
    columns = [np.ascontiguousarray(data.codes[:, j]) for j in range(n_qi)]
    freqs = [np.bincount(c, minlength=d.size) / max(data.n, 1) for c, d in zip(columns, data.domains)]
    for sel in selectivities:
        made, tries = 0, 0
        while made < per_band and tries < per_band * 50:
            tries += 1
            m = int(rng.integers(1, min(max_attrs, n_qi) + 1))
            attrs = rng.choice(n_qi, size=m, replace=False)
            mask = np.ones(data.n, dtype=bool)
            conds = []
            for j in sorted(attrs):
                cond, cmask = _condition(data.domains[j], columns[j], freqs[j], sel ** (1 / m), rng)
                conds.append((data.domains[j].name, cond))
                mask &= cmask
            actual = mask.mean()
            if not (sel / 2 <= actual <= sel * 2):
                continue
            s_codes = data.sensitive_codes[mask]
            v = data.sensitive_values[s_codes[int(rng.integers(len(s_codes)))]]
            v = v.item() if hasattr(v, "item") else v
            queries.append(CountQuery(tuple(conds), v, sel))
            made += 1
    return queries


def exact_answers(frame, workload: list[CountQuery], sensitive: str) -> np.ndarray:
    """True answers on the original table: one DuckDB scan, one conditional sum per query."""
    if not workload:
        return np.zeros(0)
    import duckdb

    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE original AS SELECT * FROM frame")  # scanning a table beats a pandas scan
    # CASE inside one aggregate per query: DuckDB evaluates hundreds of FILTER clauses ~8x slower
    aggs = ", ".join(f"coalesce(sum(CASE WHEN {q.sql_where(sensitive)} THEN 1 ELSE 0 END), 0) AS q{i}"
                     for i, q in enumerate(workload))
    row = con.execute(f"SELECT {aggs} FROM original").fetchone()
    return np.asarray(row, dtype=float)

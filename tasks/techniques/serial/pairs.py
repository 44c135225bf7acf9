"""Where a release reads the committed pairs of its series (the Section 7 aggregate) from.

A release asks two questions, and both sources answer them the same way:

  special(persons, values, p_floor)  the pairs of these persons and values whose p_hi exceeds
                                     p_floor: the only pairs whose required ratio can differ from
                                     the strategy's `first` ratio (Strategy.p_floor), as
                                     (row in persons, code in values, p_hi)
  state(person, value)               the exact stored state (found, links, q, d) of given pairs

`StoredPairs` (tasks/techniques/serial/stored.py) answers with SQL on the state database, so that a release
reads the pairs it can be constrained by and the pairs it names, never the whole series.
`MemoryPairs` answers from an aggregate held in memory (tests, the experiment, a state written
before migration 3).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from privpub.tasks.techniques.serial import statistics as st


class PairSource(Protocol):
    def special(
        self, persons: np.ndarray, values: np.ndarray, p_floor: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def state(self, person: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...


def empty_special() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)


def empty_state(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Nothing stored: not found, no links, q = d = 1 (p = 0)."""
    return (np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.ones(n, dtype=object), np.ones(n, dtype=object))


class MemoryPairs:
    """An aggregate held in memory (stored Arrow form, a pandas aggregate) as a PairSource."""

    def __init__(self, aggregate: Any):
        self.table = st.as_stored(aggregate)
        self._index: pd.MultiIndex | None = None

    def special(
        self, persons: np.ndarray, values: np.ndarray, p_floor: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.table is None or not self.table.num_rows or not len(persons) or not len(values):
            return empty_special()
        view = st.table_requirement_view(self.table, pd.Index(persons), pd.Index(values), np.asarray(values))
        keep = (view["row"] >= 0) & (view["code"] >= 0) & (view["p_hi"] > p_floor)
        return view["row"][keep], view["code"][keep], view["p_hi"][keep]

    def state(self, person: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        out = empty_state(len(person))
        if self.table is None or not self.table.num_rows or not len(person):
            return out
        if self._index is None:
            self._index = pd.MultiIndex.from_arrays(
                [
                    self.table.column("person").to_numpy(zero_copy_only=False),
                    self.table.column("value").to_numpy(zero_copy_only=False),
                ]
            )
        at = self._index.get_indexer(pd.MultiIndex.from_arrays([np.asarray(person), np.asarray(value, dtype=object)]))
        found, links, q, d = out
        found[:] = at >= 0
        hit = pa.array(at[found])
        sub = self.table.select(["links", "q", "d"]).take(hit)
        links[found] = sub.column("links").to_numpy()
        q[found] = st.to_int(st.column_values(sub, "q"))
        d[found] = st.to_int(st.column_values(sub, "d"))
        return found, links, q, d

    def aggregate(self) -> pd.DataFrame | None:
        """The whole stored aggregate as pandas (None when empty)."""
        if self.table is None or not self.table.num_rows:
            return None
        return st.aggregate_from_arrow(self.table)


def as_source(prior: Any) -> PairSource | None:
    """A PairSource from a source, an aggregate (Arrow or pandas), or None."""
    if prior is None or hasattr(prior, "state"):
        source: PairSource | None = prior  # None, or already a source (StoredPairs, MemoryPairs)
        return source
    return MemoryPairs(prior)


def matching(source: PairSource | None, rows: Any) -> pd.DataFrame:
    """The committed pairs that these history rows extend (aggregate-shaped, q and d as ints).
    A release's rows name each (person, value) once."""
    rows = st.as_frame(rows, st.HISTORY_COLUMNS)
    if source is None or not len(rows):
        return st.as_frame(None, st.AGGREGATE_COLUMNS)
    person, value = rows["person"].to_numpy(), rows["value"].to_numpy(dtype=object)
    found, links, q, d = source.state(person, value)
    return st.object_frame(
        {"person": person[found], "value": value[found], "links": links[found], "q": q[found], "d": d[found]}
    )


def requirement_view(
    source: PairSource | None, persons: np.ndarray, values: np.ndarray, protected: np.ndarray, p_floor: float
) -> dict[str, np.ndarray]:
    """The special pairs of the present persons and protected values: row (position in
    `persons`), code (position in `values`), p_hi."""
    row, code, p_hi = empty_special()
    codes = np.asarray(protected, dtype=np.int64)
    if source is not None and len(persons) and len(codes):
        row, code, p_hi = source.special(np.asarray(persons), np.asarray(values, dtype=object)[codes], p_floor)
        code = codes[code]
    return {
        "row": np.asarray(row, dtype=np.int64),
        "code": np.asarray(code, dtype=np.int64),
        "p_hi": np.asarray(p_hi, dtype=np.float64),
    }

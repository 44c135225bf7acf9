"""The statistics file of Section 7, and its per-(person, value) aggregate.

history  one row per (person, sensitive value, release) where the person's group held the value:
         person, value, release, size (|G| counting virtual members), count (n(s)).
         Append-only, small integers: this is what the store persists with each release.
aggregate one row per (person, value): links (releases that linked them), q = prod(size - count),
         d = prod(size) as exact Python ints. p(o, s) = 1 - q/d and the next release's required
         ratio are lookups in it. It can be rebuilt from the history at any time (`aggregate`) or
         carried forward (`update`); `aggregate_to_arrow` stores q, d as decimal strings because
         they outgrow 64 bits after a few releases.
Never published.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

HISTORY_COLUMNS = ["person", "value", "release", "size", "count"]
AGGREGATE_COLUMNS = ["person", "value", "links", "q", "d"]


def as_frame(table: Any, columns: list[str]) -> pd.DataFrame:
    """A pandas frame with exactly `columns` from a pyarrow table / DataFrame / None."""
    if table is None:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    frame = table.to_pandas() if isinstance(table, pa.Table) else pd.DataFrame(table)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"serial statistics lack columns {missing}")
    return frame[columns].reset_index(drop=True)


def group_values(gid: np.ndarray, value_code: np.ndarray, n_values: int) -> tuple[np.ndarray, ...]:
    """Distinct (gid, value code) of the protected tuples with their counts, sorted by gid."""
    held = value_code >= 0
    key = gid[held].astype(np.int64) * (n_values + 1) + value_code[held]
    uniq, cnt = np.unique(key, return_counts=True)
    gv_gid, gv_code = np.divmod(uniq, n_values + 1)
    return gv_gid, gv_code, cnt


def pair_rows(person: np.ndarray, member_gid: np.ndarray, group_size: np.ndarray,
              gv: tuple[np.ndarray, ...], values: np.ndarray, release: int) -> pd.DataFrame:
    """The history rows of one release: every member x every protected value of its group.

    person, member_gid: per real member; group_size: per gid, counting virtual members;
    gv: `group_values`; values: code -> sensitive value.
    """
    gv_gid, gv_code, cnt = gv
    per_group = np.bincount(gv_gid, minlength=len(group_size))
    first = np.concatenate(([0], np.cumsum(per_group)[:-1]))
    reps = per_group[member_gid]
    member = np.repeat(np.arange(len(member_gid)), reps)
    offset = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
    entry = np.repeat(first[member_gid], reps) + offset
    return pd.DataFrame({
        "person": person[member],
        "value": values[gv_code[entry]],
        "release": np.full(len(member), release, dtype=np.int64),
        "size": group_size[member_gid[member]].astype(np.int64),
        "count": cnt[entry].astype(np.int64),
    })


def release_rows(person: np.ndarray, gid: np.ndarray, group_size: np.ndarray,
                 value_code: np.ndarray, values: np.ndarray, release: int) -> pd.DataFrame:
    """History rows from per-tuple person / gid / protected value code (-1 = not protected)."""
    gv = group_values(gid, value_code, len(values))
    return pair_rows(person, gid, group_size, gv, values, release)


def _terms(history: pd.DataFrame) -> pd.DataFrame:
    size = history["size"].to_numpy(dtype=np.int64)
    count = history["count"].to_numpy(dtype=np.int64)
    if len(size) and ((count < 1) | (count > size)).any():
        raise ValueError("serial history holds a row with count outside 1..size")
    return pd.DataFrame({
        "person": history["person"].to_numpy(),
        "value": history["value"].to_numpy(),
        "links": np.ones(len(size), dtype=np.int64),
        "q": (size - count).astype(object),
        "d": size.astype(object),
    })


def combine(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Merge aggregate-shaped frames: links add up, q and d multiply, per (person, value)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return as_frame(None, AGGREGATE_COLUMNS)
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    pcode, pvals = pd.factorize(frame["person"].to_numpy())
    vcode, vvals = pd.factorize(frame["value"].to_numpy())
    key = pcode.astype(np.int64) * max(len(vvals), 1) + vcode
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    links = np.add.reduceat(frame["links"].to_numpy(dtype=np.int64)[order], starts)
    q = np.multiply.reduceat(frame["q"].to_numpy(dtype=object)[order], starts)
    d = np.multiply.reduceat(frame["d"].to_numpy(dtype=object)[order], starts)
    first = order[starts]
    return pd.DataFrame({
        "person": pvals[pcode[first]],
        "value": vvals[vcode[first]],
        "links": links,
        "q": q.astype(object),
        "d": d.astype(object),
    })


def aggregate(history: Any) -> pd.DataFrame:
    """Rebuild the per-pair aggregate from history rows."""
    return combine([_terms(as_frame(history, HISTORY_COLUMNS))])


def update(aggregate_: pd.DataFrame | None, rows: pd.DataFrame) -> pd.DataFrame:
    """The aggregate after one more release's rows."""
    base = as_frame(aggregate_, AGGREGATE_COLUMNS) if aggregate_ is not None else None
    return combine(([base] if base is not None else []) + [_terms(rows)])


def lookup(aggregate_: pd.DataFrame, persons: pd.Index, values: pd.Index) -> dict[str, np.ndarray]:
    """The pairs of the given persons and values: positions in `persons` / `values` plus q, d."""
    if not len(aggregate_):
        empty = np.zeros(0, dtype=np.int64)
        return {"row": empty, "code": empty, "links": empty,
                "q": np.zeros(0, dtype=object), "d": np.zeros(0, dtype=object)}
    row = persons.get_indexer(aggregate_["person"].to_numpy())
    code = values.get_indexer(aggregate_["value"].to_numpy())
    keep = (row >= 0) & (code >= 0)
    return {
        "row": row[keep].astype(np.int64),
        "code": code[keep].astype(np.int64),
        "links": aggregate_["links"].to_numpy(dtype=np.int64)[keep],
        "q": aggregate_["q"].to_numpy(dtype=object)[keep],
        "d": aggregate_["d"].to_numpy(dtype=object)[keep],
    }


def aggregate_to_arrow(aggregate_: pd.DataFrame) -> pa.Table:
    frame = aggregate_.copy()
    frame["q"] = [str(x) for x in frame["q"]]
    frame["d"] = [str(x) for x in frame["d"]]
    return pa.Table.from_pandas(frame[AGGREGATE_COLUMNS], preserve_index=False)


def aggregate_from_arrow(table: Any) -> pd.DataFrame:
    frame = as_frame(table, AGGREGATE_COLUMNS)
    frame["q"] = np.array([int(x) for x in frame["q"]], dtype=object)
    frame["d"] = np.array([int(x) for x in frame["d"]], dtype=object)
    frame["links"] = frame["links"].astype(np.int64)
    return frame


def history_to_arrow(history: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(history[HISTORY_COLUMNS], preserve_index=False)

"""The statistics file of Section 7, and its per-(person, value) aggregate.

history  one row per (person, sensitive value, release) where the person's group held the value:
         person, value, release, size (|G| counting virtual members), count (n(s)).
         Append-only, small integers: this is what the store persists with each release.
aggregate one row per (person, value): links (releases that linked them), q = prod(size - count),
         d = prod(size) as exact Python ints. p(o, s) = 1 - q/d and the next release's required
         ratio are lookups in it. It can be rebuilt from the history at any time (`aggregate`).
stored   the aggregate as the store keeps it (`aggregate_to_arrow`: Arrow, q and d as decimal
         strings because they outgrow 64 bits, plus p_hi, a float upper bound of p).
         `advance` and `table_requirement_view` work on it in memory in O(size of a release): Arrow
         hash probes select the pairs a release names, and only those become Python ints.
         Every other pair is copied as it is (its p cannot change, docs/serial.md). The state
         database keeps it in table serial_pairs (tasks/techniques/serial/stored.py).
Never published.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

HISTORY_COLUMNS = ["person", "value", "release", "size", "count"]
AGGREGATE_COLUMNS = ["person", "value", "links", "q", "d"]
# the stored form adds p_hi, a float64 upper bound of p = 1 - q/d, so that the pairs that can
# matter are found without turning every q and d into Python ints; every decision stays exact
STORED_COLUMNS = AGGREGATE_COLUMNS + ["p_hi"]


def object_frame(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """A frame that keeps object arrays as object (pandas would convert strings to Arrow-backed
    ones, which costs a copy each time the column is read back)."""
    return pd.DataFrame(
        {k: pd.Series(v, dtype=object) if v.dtype == object else v for k, v in columns.items()}, copy=False
    )


def column_values(table: pa.Table, name: str) -> np.ndarray:
    col: np.ndarray = table.column(name).to_numpy(zero_copy_only=False)  # pyarrow is untyped
    return col.astype(object) if col.dtype.kind in "OUS" else col


def as_frame(table: Any, columns: list[str]) -> pd.DataFrame:
    """A pandas frame with exactly `columns` from a pyarrow table / DataFrame / None."""
    if table is None:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    if isinstance(table, pa.Table):
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise ValueError(f"serial statistics lack columns {missing}")
        return object_frame({c: column_values(table, c) for c in columns})
    frame = pd.DataFrame(table)
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


def pair_rows(
    person: np.ndarray,
    member_gid: np.ndarray,
    group_size: np.ndarray,
    gv: tuple[np.ndarray, ...],
    values: np.ndarray,
    release: int,
) -> pd.DataFrame:
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
    return object_frame(
        {
            "person": person[member],
            "value": np.asarray(values, dtype=object)[gv_code[entry]],
            "release": np.full(len(member), release, dtype=np.int64),
            "size": group_size[member_gid[member]].astype(np.int64),
            "count": cnt[entry].astype(np.int64),
        }
    )


def release_rows(
    person: np.ndarray,
    gid: np.ndarray,
    group_size: np.ndarray,
    value_code: np.ndarray,
    values: np.ndarray,
    release: int,
) -> pd.DataFrame:
    """History rows from per-tuple person / gid / protected value code (-1 = not protected)."""
    gv = group_values(gid, value_code, len(values))
    return pair_rows(person, gid, group_size, gv, values, release)


def history_terms(history: pd.DataFrame) -> pd.DataFrame:
    size = history["size"].to_numpy(dtype=np.int64)
    count = history["count"].to_numpy(dtype=np.int64)
    if len(size) and ((count < 1) | (count > size)).any():
        raise ValueError("serial history holds a row with count outside 1..size")
    return object_frame(
        {
            "person": history["person"].to_numpy(),
            "value": history["value"].to_numpy(dtype=object),
            "links": np.ones(len(size), dtype=np.int64),
            "q": (size - count).astype(object),
            "d": size.astype(object),
        }
    )


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
    return object_frame(
        {
            "person": np.asarray(pvals)[pcode[first]],
            "value": np.asarray(vvals, dtype=object)[vcode[first]],
            "links": links,
            "q": q.astype(object),
            "d": d.astype(object),
        }
    )


def aggregate(history: Any) -> pd.DataFrame:
    """Rebuild the per-pair aggregate from history rows."""
    return combine([history_terms(as_frame(history, HISTORY_COLUMNS))])


_to_str = np.frompyfunc(str, 1, 1)
to_int = np.frompyfunc(int, 1, 1)  # decimal text -> exact Python int


def p_upper(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """float64 upper bounds of p = 1 - q/d (q/d is off by at most 4 ulp, 1 - x by one more)."""
    if not len(q):
        return np.zeros(0)
    try:
        with np.errstate(invalid="ignore"):
            ratio = q.astype(np.float64) / d.astype(np.float64)
        if not np.isfinite(ratio).all():
            raise OverflowError
    except OverflowError:  # products beyond 1e308: Python's correctly rounded int division
        ratio = np.frompyfunc(lambda a, b: a / b, 2, 1)(q, d).astype(np.float64)
    return np.minimum(1.0, 1.0 - ratio + 1e-15)


def aggregate_to_arrow(aggregate_: pd.DataFrame) -> pa.Table:
    """The stored form: q and d as decimal strings (they outgrow 64 bits), plus p_hi."""
    frame = as_frame(aggregate_, AGGREGATE_COLUMNS)
    n = len(frame)
    q, d = frame["q"].to_numpy(dtype=object), frame["d"].to_numpy(dtype=object)
    return pa.table(
        {
            "person": pa.array(frame["person"].to_numpy()) if n else pa.array([], pa.null()),
            "value": pa.array(frame["value"].to_numpy(dtype=object)) if n else pa.array([], pa.null()),
            "links": pa.array(frame["links"].to_numpy(dtype=np.int64)),
            "q": pa.array(_to_str(q) if n else [], pa.string()),
            "d": pa.array(_to_str(d) if n else [], pa.string()),
            "p_hi": pa.array(p_upper(q, d), pa.float64()),
        }
    )


def aggregate_from_arrow(table: Any) -> pd.DataFrame:
    frame = as_frame(table, AGGREGATE_COLUMNS)
    frame["q"] = pd.Series(to_int(frame["q"].to_numpy(dtype=object)), dtype=object) if len(frame) else frame["q"]
    frame["d"] = pd.Series(to_int(frame["d"].to_numpy(dtype=object)), dtype=object) if len(frame) else frame["d"]
    frame["links"] = frame["links"].astype(np.int64)
    return frame


def as_stored(aggregate_: Any) -> pa.Table | None:
    """The stored (Arrow) form of an aggregate given as Arrow, a pandas aggregate, or None."""
    if aggregate_ is None:
        return None
    if isinstance(aggregate_, pa.Table):
        if "p_hi" in aggregate_.column_names:
            return aggregate_.select(STORED_COLUMNS)
        aggregate_ = aggregate_from_arrow(aggregate_)  # stored before p_hi existed: once
    return aggregate_to_arrow(aggregate_)


def _codes_in(column: pa.ChunkedArray, keys: Any) -> np.ndarray:
    """Position of each cell of an Arrow column in `keys` (-1 where absent), hashed in C."""
    keys = pa.array(keys) if not isinstance(keys, pa.Array) else keys
    if len(keys) == 0:
        return np.full(len(column), -1, dtype=np.int64)
    if keys.type != column.type:
        keys = keys.cast(column.type)
    codes: npt.NDArray[np.int64] = (
        pc.fill_null(pc.index_in(column, value_set=keys), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    )  # pyarrow is untyped
    return codes


def _person_mask(stored: pa.Table, persons: Any) -> np.ndarray:
    """Rows of the stored aggregate whose person is in `persons` (one hash probe per row, in C)."""
    column = stored.column("person")
    keys = pa.array(pd.unique(np.asarray(persons)))
    if keys.type != column.type:
        keys = keys.cast(column.type)
    mask: np.ndarray = pc.is_in(column, value_set=keys).to_numpy(zero_copy_only=False)  # pyarrow is untyped
    return mask


def _pair_mask(stored: pa.Table, person: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Rows of the stored aggregate whose (person, value) is one of the given pairs."""
    mask = _person_mask(stored, person)
    idx = np.flatnonzero(mask)
    if len(idx):
        sub = stored.select(["person", "value"]).take(pa.array(idx))
        persons, values = pd.Index(pd.unique(np.asarray(person))), pd.Index(pd.unique(np.asarray(value, dtype=object)))
        nv = len(values)
        sv = _codes_in(sub.column("value"), values.to_numpy())
        skey = _codes_in(sub.column("person"), persons.to_numpy()) * nv + sv
        # the rows' keys (O(rows)), in the same codes
        rkey = persons.get_indexer(np.asarray(person)).astype(np.int64) * nv + values.get_indexer(
            np.asarray(value, dtype=object)
        )
        mask[idx[~((sv >= 0) & np.isin(skey, rkey))]] = False
    return mask


def advance(stored: pa.Table | None, rows: pd.DataFrame) -> tuple[pa.Table, pd.DataFrame, pd.DataFrame]:
    """The stored aggregate after one more release's history rows.

    Only the pairs named by `rows` are read, recomputed exactly and written back, so the Python
    work is O(rows); the other pairs are copied by Arrow. Returns (new stored aggregate, those
    pairs before (the ones that existed), the same pairs after)."""
    rows = as_frame(rows, HISTORY_COLUMNS)
    stored = as_stored(stored)
    if stored is None or stored.num_rows == 0:
        before, rest = as_frame(None, AGGREGATE_COLUMNS), None
    else:
        mask = _pair_mask(stored, rows["person"].to_numpy(), rows["value"].to_numpy(dtype=object))
        before = aggregate_from_arrow(stored.filter(pa.array(mask)))
        rest = stored.filter(pa.array(~mask))
    after = combine([before, history_terms(rows)])
    if rest is None or not len(after):
        return (aggregate_to_arrow(after) if rest is None else rest), before, after
    return pa.concat_tables([rest, aggregate_to_arrow(after).cast(rest.schema)]), before, after


def table_requirement_view(
    stored: pa.Table | None, persons: pd.Index, values: pd.Index, protected: np.ndarray
) -> dict[str, Any]:
    """The stored pairs of the present persons and protected values, for the requirement lookup:
    positions in `persons` / `values`, p_hi, and the rows themselves (q, d still as text)."""
    empty = np.zeros(0, dtype=np.int64)
    view: dict[str, Any] = {"row": empty, "code": empty, "p_hi": np.zeros(0), "table": None}
    stored = as_stored(stored)
    if stored is None or stored.num_rows == 0 or not len(persons) or not len(protected):
        return view
    mask = _person_mask(stored, persons.to_numpy())
    column = stored.column("value")
    keys = pa.array(list(protected))
    mask &= pc.is_in(column, value_set=keys if keys.type == column.type else keys.cast(column.type)).to_numpy(
        zero_copy_only=False
    )
    sub = stored.filter(pa.array(mask))
    return {
        "row": _codes_in(sub.column("person"), persons.to_numpy()),
        "code": _codes_in(sub.column("value"), np.asarray(values, dtype=object)),
        "p_hi": sub.column("p_hi").to_numpy(zero_copy_only=False),
        "table": sub,
    }


def same_aggregate(stored: pa.Table | None, rebuilt: pd.DataFrame) -> bool:
    """Whether a stored aggregate holds exactly the pairs, links, q and d of `rebuilt`."""

    def canonical(table: pa.Table) -> pa.Table:
        table = table.select(AGGREGATE_COLUMNS[:3] + ["q", "d"])
        return table.cast(
            pa.schema(
                [
                    table.schema.field("person"),
                    pa.field("value", pa.string()),
                    pa.field("links", pa.int64()),
                    pa.field("q", pa.string()),
                    pa.field("d", pa.string()),
                ]
            )
        ).sort_by([("person", "ascending"), ("value", "ascending")])

    n_stored = 0 if stored is None else stored.num_rows
    if n_stored != len(rebuilt):
        return False
    return n_stored == 0 or canonical(stored).equals(canonical(aggregate_to_arrow(rebuilt)))


def history_to_arrow(history: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(history[HISTORY_COLUMNS], preserve_index=False)


def concat_history(tables: list[pa.Table]) -> pa.Table | None:
    """History rows of several releases as one table (a release without rows has no value type)."""
    tables = [t for t in tables if t is not None and t.num_rows]
    if not tables:
        return None
    return pa.concat_tables([t.cast(tables[0].schema) for t in tables])

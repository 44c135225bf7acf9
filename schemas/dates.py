"""Dates of a `kind = "date"` quasi-identifier: read from the input, held as day numbers, published
as Arrow date32.

A date QI is held as its day number (days since 1970-01-01, int64), truncated to the first day of
its unit (`hierarchy = "month" | "year"`; "day" by default), so the algorithms see numbers. A
published range [lo, hi] runs from the first day of lo's unit to the last day of hi's unit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

_NUMPY_UNIT = {"day": "D", "month": "M", "year": "Y"}


def parse_dates(column: pd.Series) -> pd.Series:
    """The cells as datetime64 (NaT where a cell is empty or not a date). Dates and datetimes are
    taken as they are (a datetime's date is its wall-clock date); text is read as ISO 8601
    (2024-03-01, or with a time); numbers and booleans are not dates (never read as epoch counts)."""
    dtype = column.dtype
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return column.dt.tz_localize(None) if getattr(dtype, "tz", None) is not None else column
    if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        return pd.Series(pd.NaT, index=column.index, dtype="datetime64[ns]")
    if pd.api.types.is_object_dtype(dtype):
        kind = pd.api.types.infer_dtype(column, skipna=True)
        if kind in ("date", "datetime", "datetime64"):
            return pd.to_datetime(column, errors="coerce")
        if kind not in ("string", "empty"):  # a DataFrame's column mixing types (rare, and refused
            # in part): only its text cells may be dates; one type test per cell
            column = column.where(column.map(lambda v: isinstance(v, str)).astype(bool))
    text = column.astype("string")
    # ISO 8601 with the day at least (pandas would read "2020" as 2020-01-01)
    text = text.where(text.str.match(r"\d{4}-\d{2}-\d{2}").fillna(False).astype(bool))
    return pd.to_datetime(text, format="ISO8601", errors="coerce")


def to_days(dates: pd.Series, unit: str = "day") -> np.ndarray:
    """Day numbers of the first day of each date's unit (dates without NaT)."""
    values = np.asarray(dates.to_numpy()).astype(f"datetime64[{_NUMPY_UNIT[unit]}]")  # any resolution
    return values.astype("datetime64[D]").astype(np.int64)


def unit_last_day(days: np.ndarray, unit: str = "day") -> np.ndarray:
    """The last day of the unit each day number starts."""
    if unit == "day":
        return np.asarray(days, dtype=np.int64)
    code = _NUMPY_UNIT[unit]
    start = np.asarray(days, dtype=np.int64).astype("datetime64[D]").astype(f"datetime64[{code}]")
    return (start + np.ones(1, dtype=f"timedelta64[{code}]")).astype("datetime64[D]").astype(np.int64) - 1


def date32(days: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(days, dtype=np.int32), pa.int32()).cast(pa.date32())


def as_day_numbers(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A published range column as numbers: day numbers for a date column, else its values."""
    if pa.types.is_date(column.type) or pa.types.is_timestamp(column.type):
        column = column.cast(pa.date32()).cast(pa.int32())
    numbers: np.ndarray = column.to_numpy(zero_copy_only=False).astype(float)
    return numbers


# The years a date QI may hold: Python's datetime (and so pandas' and pyarrow's readers of a
# published date32 column) reads back years 1 to 9999 only.
FIRST_DAY = np.datetime64("0001-01-01", "D")
LAST_DAY = np.datetime64("9999-12-31", "D")


def date_in_range(dates: pd.Series) -> pd.Series:
    """True where a parsed date (parse_dates) lies in the years 1 to 9999 (False for NaT)."""
    days = np.asarray(dates.to_numpy()).astype("datetime64[D]")
    return pd.Series((days >= FIRST_DAY) & (days <= LAST_DAY), index=dates.index)

"""The input microdata: reading it, and the pandera schema built from the spec.

Errors name the row and the column. Rows are counted from 1 in data order, the header not
counted (row 1 is line 2 of a CSV file).
"""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaErrors

from schemas.spec import ReleaseSpec


class InputError(ValueError):
    """The input cannot be published as it is; the message says where and why."""


def read_input(spec: ReleaseSpec) -> pd.DataFrame:
    ds = spec.dataset
    if ds.table:
        import duckdb

        db, _, table = ds.table.rpartition(":")
        if not db:
            raise InputError("[dataset] table must look like 'file.duckdb:table_name'")
        path = spec.path(db)
        if not path.is_file():
            raise InputError(f"DuckDB file not found: {path}")
        with duckdb.connect(str(path), read_only=True) as con:
            return con.sql(f'SELECT * FROM "{table}"').df()
    path = spec.path(ds.input)
    if not path.is_file():
        raise InputError(f"input file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".csv", ".txt", ".gz"):
            return pd.read_csv(path, skipinitialspace=True)
    except Exception as exc:  # a malformed file: say which file and what the reader said
        raise InputError(f"cannot read {path}: {exc}") from None
    raise InputError(f"{path}: unknown input format '{suffix}' (use .csv or .parquet)")


def _in_set(values: list[str], what: str) -> pa.Check:
    allowed = set(values)
    return pa.Check(lambda s: s.astype(str).isin(allowed), error=f"value not in the {what}")


def input_schema(spec: ReleaseSpec) -> pa.DataFrameSchema:
    ds = spec.dataset
    cols: dict[str, pa.Column] = {
        ds.person_id: pa.Column(nullable=False, unique=True, title="person id"),
        ds.sensitive: pa.Column(nullable=False, title="sensitive attribute"),
    }
    for q in ds.qi:
        if q.kind == "numeric":
            cols[q.name] = pa.Column(float, coerce=True, nullable=False)
        elif q.hierarchy:
            leaves = {c for kids in q.hierarchy.values() for c in kids if c not in q.hierarchy}
            cols[q.name] = pa.Column(nullable=False, checks=_in_set(sorted(leaves), "hierarchy's leaves"))
        elif q.order:
            cols[q.name] = pa.Column(nullable=False, checks=_in_set(q.order, "declared order"))
        else:
            cols[q.name] = pa.Column(nullable=False)
    return pa.DataFrameSchema(cols, strict=False)


def _describe(cases: pd.DataFrame, frame: pd.DataFrame, spec: ReleaseSpec, limit: int = 5) -> str:
    pid = spec.dataset.person_id
    lines = []
    positions = {idx: i + 1 for i, idx in enumerate(frame.index)}
    cases = cases.drop_duplicates(subset=[c for c in ("column", "index", "check") if c in cases])
    for _, c in cases.head(limit).iterrows():
        col, check, value, idx = c.get("column"), str(c.get("check")), c.get("failure_case"), c.get("index")
        where = f"row {positions[idx]}, " if idx in positions else ""
        if check == "not_nullable":
            what = "is empty (null)"
        elif check == "field_uniqueness" or "unique" in check:
            what = f"repeats {pid} {value!r} (person ids must be unique)"
        elif check.startswith("coerce_dtype") or "dtype" in check:
            what = f"value {value!r} is not a number"
        else:
            what = f"value {value!r} fails '{check}'"
        line = f"{where}column '{col}': {what}"
        if line not in lines:
            lines.append(line)
    more = len(cases) - limit
    return "; ".join(lines) + (f"; and {more} more problem(s)" if more > 0 else "")


def validate_input(frame: pd.DataFrame, spec: ReleaseSpec) -> pd.DataFrame:
    """Check the input against the spec; return only the columns the release uses, typed."""
    ds = spec.dataset
    needed = [ds.person_id, *ds.qi_names, ds.sensitive]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(f"input is missing column(s) {', '.join(repr(m) for m in missing)}; "
                         f"it has {', '.join(map(str, frame.columns))}")
    if frame.empty:
        raise InputError("input has no rows")
    frame = frame[needed].reset_index(drop=True)
    try:
        out = input_schema(spec).validate(frame, lazy=True)
    except SchemaErrors as err:
        cases = err.failure_cases
        if "index" in cases.columns:
            cases = cases.sort_values("index", na_position="first", kind="stable")
        raise InputError("input rejected: " + _describe(cases, frame, spec)) from None
    for q in ds.qi:
        if q.kind != "numeric":
            out[q.name] = out[q.name].astype(str).astype(object)
        elif pd.api.types.is_integer_dtype(frame[q.name].dtype):
            out[q.name] = frame[q.name]  # keep integers integral in the published ranges
    return out

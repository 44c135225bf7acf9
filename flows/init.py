"""`privpub init DATA --person-id COL --sensitive COL` and `privpub.init`: read a table, propose a
spec (each column's kind, which columns are quasi-identifiers and why, hierarchies) and write it
as a commented TOML file that `privpub publish` accepts without edits.

What is proposed, per column (one vectorised pass each; docs in the README, "privpub init"):
- the person id (`--person-id`), else `person_id = "@row"`: the row number stands for it;
- not a QI: a column unique per row (identifier-like), free text (long or mostly unique text with
  spaces), a column with one value (it tells nobody apart);
- date: a date/datetime column, or text that is all ISO dates; truncated to the month
  (`hierarchy = "month"`) when it holds more than a year of distinct days;
- ordinal: integers with at most ORDINAL_MAX_VALUES values (order = those values), or text that
  is a known scale (low / medium / high, the Likert agreement scale ...);
- numeric: other numbers; categorical: other text, `hierarchy = "mask"` when the values look
  like codes (postcodes, ICD codes: letters and digits, at most two lengths, digits in them);
- `[dataset] missing = "drop"` when a column the release reads has an empty cell;
- `[technique] generalization, k = 10`, `[output]` beside the spec.
Only counts are written or printed about a column, never its values (an ordinal's order is the
one exception: the spec needs it), and nothing at all about the sensitive column's values.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as arrow
import pyarrow.csv as pcsv

from privpub.schemas.dates import parse_dates
from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.input import PANDAS_NA_VALUES, PARQUET_SUFFIXES, read_duckdb_table
from privpub.schemas.spec import MASK_CHAR, ROW_ID, load_spec

DEFAULT_K = 10
ORDINAL_MAX_VALUES = 10  # integers with at most this many values: an ordinal scale
FREE_TEXT_CHARS = 40  # text this long on average is free text, not a category
MONTHS_FROM_DAYS = 366  # a date with more distinct days than this is truncated to the month
# text scales whose order is known (lower case, low to high)
KNOWN_SCALES = (
    ["low", "medium", "high"],
    ["very low", "low", "medium", "high", "very high"],
    ["never", "rarely", "sometimes", "often", "always"],
    ["strongly disagree", "disagree", "neutral", "agree", "strongly agree"],
    ["poor", "fair", "good", "very good", "excellent"],
    ["none", "mild", "moderate", "severe"],
    ["small", "medium", "large"],
    ["xs", "s", "m", "l", "xl"],
)


@dataclass
class Proposal:
    """A proposed spec: its TOML text and the lines that say what was proposed and why."""

    text: str
    report: list[str] = field(default_factory=list)


@dataclass
class Column:
    """What init decided about one column: a QI entry (kind, its keys) or why it is none."""

    name: str
    why: str
    kind: str | None = None  # None: not a quasi-identifier
    keys: dict = field(default_factory=dict)


def read_source(data: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, str]]:
    """The table and how the spec names it ({"input": path} or {"table": "file.duckdb:t"}).
    A CSV file is read as text (a code such as "01234" keeps its zero; numbers are recognised
    below), as the Arrow reader privpub publishes with reads it."""
    text = str(data)
    db, sep, table = text.rpartition(":")
    if sep and db.lower().endswith((".duckdb", ".db")) and table:
        path = Path(db)
        if not path.is_file():
            raise InputError(f"DuckDB file not found: {path}")
        return read_duckdb_table(path, table), {"table": text}
    path = Path(text)
    if not path.is_file():
        raise InputError(f"input file not found: {path}" if not path.is_dir() else f"{path} is a directory, not a file")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return pd.read_parquet(path), {"input": text}
    if path.suffix.lower() not in (".csv", ".txt"):
        raise InputError(f"{path}: unknown input format '{path.suffix}' (use .csv, .parquet or file.duckdb:table)")
    with open(path, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), [])
    try:
        table_ = pcsv.read_csv(
            path,
            convert_options=pcsv.ConvertOptions(
                column_types={c: arrow.string() for c in header},
                null_values=list(PANDAS_NA_VALUES),
                strings_can_be_null=True,
            ),
        )
    except (arrow.ArrowException, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {type(exc).__name__} (is it a valid CSV file?)") from None
    return table_.to_pandas(), {"input": text}


def _numbers(column: pd.Series) -> pd.Series | None:
    """The column as numbers when every filled cell is one (text read from a CSV file, or a
    numeric dtype), else None. Text with a leading zero ("01234") is a code, not a number."""
    if pd.api.types.is_bool_dtype(column.dtype):
        return None
    if pd.api.types.is_numeric_dtype(column.dtype):
        return column.dropna().astype(float)
    if not (pd.api.types.is_string_dtype(column.dtype) or pd.api.types.is_object_dtype(column.dtype)):
        return None
    text = column.dropna().astype("string").str.strip()
    if text.str.match(r"^[+-]?0\d").any():
        return None
    numbers = pd.to_numeric(text, errors="coerce")
    return numbers.astype(float) if numbers.notna().all() else None


def _dates(column: pd.Series) -> bool:
    """A date column: a date/datetime dtype, or text whose every filled cell is an ISO date (the
    first 100 tried before the whole column)."""
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        return True
    filled = column.dropna()
    if pd.api.types.is_numeric_dtype(column.dtype) or filled.empty:
        return False
    return bool(parse_dates(filled.head(100)).notna().all() and parse_dates(filled).notna().all())


def _known_scale(values: set[str]) -> list[str] | None:
    """The known scale (in its order, as the data spells it) holding exactly these values."""
    lowered = {v.strip().lower(): v for v in values}
    for scale in KNOWN_SCALES:
        if set(lowered) == set(scale):
            return [lowered[s] for s in scale]
    return None


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def propose_column(name: str, column: pd.Series, n: int) -> Column:
    """The proposal for one column (not the person id or the sensitive column)."""
    filled = column.dropna()
    distinct = int(filled.nunique())
    if distinct <= 1:
        return Column(name, "not a QI: one value in every row (it tells nobody apart)")
    if _dates(column):
        days = int(parse_dates(filled).dt.normalize().nunique())
        if days > MONTHS_FROM_DAYS:
            return Column(
                name,
                f"quasi-identifier: a date with {_count(days, 'distinct day')}; published as ranges of whole months",
                "date",
                {"hierarchy": "month"},
            )
        return Column(name, f"quasi-identifier: a date with {_count(days, 'distinct day')}", "date")
    numbers = _numbers(column)
    if numbers is not None:
        if distinct == n:
            return Column(name, "not a QI: numbers unique per row (identifier-like)")
        integral = bool(np.all(np.mod(numbers.to_numpy(), 1) == 0))
        if integral and distinct <= ORDINAL_MAX_VALUES:
            order = [int(v) for v in np.unique(numbers.to_numpy())]
            return Column(
                name,
                f"quasi-identifier: an ordinal scale of {distinct} integers (the order: their numeric order)",
                "ordinal",
                {"order": order},
            )
        return Column(name, f"quasi-identifier: numbers with {_count(distinct, 'value')}", "numeric")
    text = filled.astype("string")
    if distinct == n:
        return Column(name, "not a QI: unique per row (identifier-like)")
    lengths = text.str.len()
    if lengths.mean() > FREE_TEXT_CHARS or (distinct > n / 2 and text.str.contains(" ").mean() > 0.5):
        return Column(name, "not a QI: free text")
    scale = _known_scale(set(text.unique())) if distinct <= 5 else None
    if scale is not None:
        return Column(name, f"quasi-identifier: a known scale of {distinct} values", "ordinal", {"order": scale})
    code_like = (
        distinct > 10
        and lengths.nunique() <= 2
        and lengths.min() >= 3
        and bool(text.str.fullmatch(r"[A-Za-z0-9.\-]+").all())
        and bool(text.str.contains(r"\d").all())
        and not bool(text.str.contains(MASK_CHAR, regex=False).any())
    )
    if code_like:
        return Column(
            name,
            f"quasi-identifier: codes of {'/'.join(map(str, sorted(lengths.unique())))} characters with "
            f"{_count(distinct, 'value')}; generalized by masking their last characters",
            "categorical",
            {"hierarchy": "mask"},
        )
    return Column(name, f"quasi-identifier: categories with {_count(distinct, 'value')}", "categorical")


def _toml(value) -> str:
    """A TOML value: strings as JSON strings (TOML's basic strings escape the same way)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def propose(
    frame: pd.DataFrame, source: dict[str, str], sensitive: str, person_id: str | None, spec_dir: Path, label: str
) -> Proposal:
    """The spec proposed for `frame` (read from `source`) and its report lines."""
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    for role, given in (("sensitive", sensitive), ("person id", person_id)):
        if given is not None and given not in columns:
            raise InputError(
                f"--{role.replace(' ', '-')} {given!r}: no such column; the table has {', '.join(columns)}"
            )
    if person_id == sensitive:
        raise InputError("--person-id and --sensitive must be different columns")
    if frame.empty:
        raise InputError("input has no rows")
    n = len(frame)
    if person_id is not None and frame[person_id].duplicated().any():
        raise InputError(
            f"column '{person_id}' repeats a value: not a person id (leave --person-id out to use the row number)"
        )
    proposals = [propose_column(c, frame[c], n) for c in columns if c not in (sensitive, person_id)]
    qis = [p for p in proposals if p.kind]
    if not qis:
        raise InputError("no column looks like a quasi-identifier; write the spec by hand (README, 'The spec')")
    read = [c for c in (person_id, sensitive, *(p.name for p in qis)) if c is not None]
    empty_rows = int(frame[read].isna().any(axis=1).sum())
    if empty_rows == n:
        raise InputError("every row has an empty cell in a column the release would read")

    where = source.copy()
    if "input" in where and not Path(where["input"]).is_absolute():
        where["input"] = os.path.relpath(Path(where["input"]).resolve(), spec_dir.resolve())
    pid = person_id or ROW_ID
    lines = [
        f"# privpub spec proposed by `privpub init` from {label} ({_count(n, 'row')}, {_count(len(columns), 'column')}).",
        "# Review the proposals below (kinds, quasi-identifiers, hierarchies, k), then: privpub publish <this file>",
        "",
        "[dataset]",
        f"name = {_toml(Path(label.split(':')[0]).stem or 'dataset')}  # the series: its releases are checked together",
        *(
            f"{key} = {_toml(value)}" + ("  # relative to this file" if key == "input" else "")
            for key, value in where.items()
        ),
        f"person_id = {_toml(pid)}"
        + (
            "  # no person id given: the row number (from 1) stands for it; every row is a different person"
            if person_id is None
            else ""
        ),
        f"sensitive = {_toml(sensitive)}  # published as it is; never a quasi-identifier",
    ]
    if empty_rows:
        lines.append(
            f'missing = "drop"  # {_count(empty_rows, "row")} with an empty cell in a column the release reads are '
            'left out (and counted in the report); "category" would keep empty categories as a value'
        )
    lines.append("qi = [")
    for p in qis:
        entry = {"name": p.name, "kind": p.kind, **p.keys}
        lines.append(f"  # {p.why}")
        lines.append("  { " + ", ".join(f"{k} = {_toml(v)}" for k, v in entry.items()) + " },")
    lines.append("]")
    lines += [f"# '{p.name}': {p.why}" for p in proposals if not p.kind]
    lines += [
        "",
        "[technique]",
        'name = "generalization"  # Mondrian generalization: every row shares its published QI values with k - 1 others',
        f"k = {DEFAULT_K}",
        "",
        "[output]",
        'dir = "releases"  # the published releases, beside this file',
        'state = "privpub.duckdb"  # the release history',
        "",
    ]
    report = [
        f"{label}: {_count(n, 'row')}, {_count(len(columns), 'column')}",
        "person id: " + (f"'{person_id}'" if person_id else f"row number ({ROW_ID}): no --person-id given"),
        f"sensitive: '{sensitive}'",
        *(f"  {p.name}: {p.why}" + (f" [{p.kind}]" if p.kind else "") for p in proposals),
    ]
    if empty_rows:
        report.append(f'missing = "drop": {_count(empty_rows, "row")} with an empty cell would be left out')
    report.append(f"technique: generalization, k = {DEFAULT_K}")
    return Proposal("\n".join(lines), report)


def init(
    data: str | os.PathLike,
    *,
    sensitive: str,
    person_id: str | None = None,
    output: str | os.PathLike = "spec.toml",
    force: bool = False,
    report: list[str] | None = None,
) -> Path:
    """Read `data` (CSV, Parquet, or "file.duckdb:table"), propose a spec and write it to
    `output` (refused when it exists, unless `force`); returns the written file's path and adds
    what was proposed and why to `report` (the CLI prints it). The spec is checked as `privpub
    publish` checks it before it is written."""
    out = Path(output)
    if out.exists() and not force:
        raise SpecError(f"{out} exists; choose another -o or pass --force to overwrite it")
    if out.is_dir():
        raise SpecError(f"{out} is a directory, not a spec file")
    frame, source = read_source(data)
    proposal = propose(frame, source, sensitive, person_id, out.parent, Path(str(data)).name)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(proposal.text, encoding="utf-8")
    try:
        load_spec(tmp)  # what publish checks first: a proposal it refuses is a bug here, never written
    except SpecError:
        tmp.unlink()
        raise
    tmp.replace(out)
    if report is not None:
        report += proposal.report
    return out

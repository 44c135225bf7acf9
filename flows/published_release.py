"""A committed release as `privpub.publish` returns it: its id, tables, figures and report.

A `str` whose value is the release id, so code that used the id `privpub.publish` returned
before (print it, compare it, pass it to `privpub verify`) keeps working. Everything else is read
from the state file and the published files when first asked for: published data only (figures,
published tables), never the input's rows.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc

from privpub.state.ledger import LEDGER_COLUMNS, ledger_rows
from privpub.state.store import Store
from privpub.tasks.core.parted_table import PartedTable, read_published

# the figures a notebook shows beside the privacy checks (the report has them all)
KEY_UTILITY = (
    "groups",
    "avg-group-size",
    "suppressed-rows",
    "query-error-1pct",
    "query-error-5pct",
    "query-error-10pct",
    "uncertainty-penalty-normalized",
)


def figure_value(value: Any, text: Any) -> Any:
    """A stored figure: its number where it has one, else its text (an exact fraction, a name)."""
    if value is not None and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return text


def read_table(path: Path) -> pd.DataFrame:
    """A published table as a DataFrame: a Parquet file, or a folder of parts read whole."""

    table = read_published(path)
    return (table.read() if isinstance(table, PartedTable) else table).to_pandas()


class PublishedTables(Mapping[str, pd.DataFrame]):
    """The release's published tables by name, each read on first use."""

    def __init__(self, files: dict[str, Path]):
        self.files = files
        self._read: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self.files:
            raise KeyError(f"no published table {name!r}; the release has {', '.join(self.files)}")
        if name not in self._read:
            self._read[name] = read_table(self.files[name])
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __repr__(self) -> str:
        return f"PublishedTables({', '.join(self.files)})"


class PublishedRelease(str):
    """A committed release: `.id`, `.tables`, `.figures`, `.report`, `.state`, shown as a
    summary in a notebook. Equal to (and hashed as) its id."""

    def __new__(cls, release_id: str, state: str | Path) -> PublishedRelease:
        obj = super().__new__(cls, release_id)
        obj.state = Path(state).resolve()
        return obj

    state: Path

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # pickling needs the state too
        return str(self), str(self.state)

    @property
    def id(self) -> str:
        return str(self)

    @cached_property
    def info(self) -> dict[str, Any]:
        """The release's row in the state file (series, sequence, technique, parameters, seed,
        rows_in, output_dir, ...), its table files and its metrics."""

        return Store(self.state).release(str(self))

    @property
    def folder(self) -> Path:
        return Path(self.info["output_dir"]) / str(self)

    @property
    def report(self) -> Path:
        return self.folder / "report.html"

    @property
    def series(self) -> str:
        return str(self.info["series"])

    @property
    def sequence(self) -> int:
        return int(self.info["sequence"])

    @property
    def technique(self) -> str:
        return str(self.info["technique"])

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.info["parameters"])

    @property
    def several_rows_per_person(self) -> bool:
        """`[dataset] rows_per_person = "many"`: every privacy figure counts people, not rows."""
        return (self.info["spec"].get("dataset") or {}).get("rows_per_person") == "many"

    @cached_property
    def people(self) -> int | None:
        """The people of the published rows (rows_per_person = "many": from the person numbers the
        release keeps privately beside its table, never published); None when a row is a person."""
        if not self.several_rows_per_person:
            return None

        people = Store(self.state).private(str(self)).get("people")
        if people is None:
            return None
        return int(pc.count_distinct(people.column("person")).as_py())

    @cached_property
    def tables(self) -> PublishedTables:
        """Published table name -> DataFrame, each read from its Parquet file(s) on first use."""
        return PublishedTables({t.table_name: self.folder / t.file for t in self.info["tables"].itertuples()})

    @cached_property
    def figures(self) -> pd.DataFrame:
        """Every figure stored with the release (release_metrics): kind (privacy, utility, risk),
        name, value (a number where it is one, else its text), threshold (as stored), passed."""
        m = self.info["metrics"]
        values = [figure_value(v, t) for v, t in zip(m["value"].tolist(), m["text_value"].tolist())]
        out = m[["kind", "name"]].assign(value=pd.Series(values, index=m.index, dtype=object))
        return out.assign(threshold=m["threshold"], passed=m["passed"]).reset_index(drop=True)

    @property
    def ledger(self) -> pd.DataFrame:
        """The privacy-budget ledger of the release's series up to this release (`privpub.ledger`'s
        rows): empty when the release is not differentially private."""
        rows = ledger_rows(Store(self.state).ledger(self.series))
        mine = (
            [r for r in rows if int(str(r["sequence"])) <= self.sequence]
            if self.figures.name.eq("series-epsilon").any()
            else []
        )
        return pd.DataFrame(mine, columns=list(LEDGER_COLUMNS))

    def __repr__(self) -> str:
        return (
            f"<PublishedRelease {str(self)} (series {self.series} #{self.sequence}, {self.technique}; {self.report})>"
        )

    def _repr_html_(self) -> str:
        """A compact summary for notebooks: figures and where things are, no published cell."""
        esc = html.escape
        figures = self.figures
        privacy = figures[figures.kind == "privacy"]
        checks = "".join(
            f"<tr><td>{esc(str(r.name))}</td><td>{esc(_shown(r.value))}</td><td>{esc(_shown(r.threshold))}</td>"
            f"<td><b>{'PASS' if r.passed else 'FAIL'}</b></td></tr>"
            for r in privacy.itertuples()
        )
        other = figures[
            ((figures.kind == "utility") & figures.name.isin(KEY_UTILITY))
            | ((figures.kind == "risk") & ~figures.name.str.startswith("input-"))
        ]
        key = "".join(
            f"<tr><td>{esc(str(r.kind))}</td><td>{esc(str(r.name))}</td><td>{esc(_shown(r.value))}</td></tr>"
            for r in other.itertuples()
        )
        params = ", ".join(f"{k} = {v!r}" for k, v in self.parameters.items())
        tables = ", ".join(f"{t.table_name} ({t.n_rows} rows)" for t in self.info["tables"].itertuples())
        if self.several_rows_per_person:  # the figures below are over people
            people = "" if self.people is None else f" of {self.people} people"
            tables += f"; several rows per person{people}: every privacy figure counts people"
        return (
            f"<div><b>release {esc(str(self))}</b> &mdash; series {esc(self.series)} #{self.sequence}, "
            f"technique {esc(self.technique)} ({esc(params)})<br>tables: {esc(tables)}"
            "<table><tr><th>privacy check</th><th>value</th><th>required</th><th></th></tr>"
            f"{checks}</table>"
            f"<table><tr><th>kind</th><th>figure</th><th>value</th></tr>{key}</table>"
            f'<a href="{esc(self.report.as_uri())}">report</a> ({esc(str(self.report))})</div>'
        )


def _shown(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)

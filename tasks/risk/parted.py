"""Re-identification risk (tasks/risk/__init__.py) of a release whatever the shape of its data: rows in
this process or kept in parts where the run's executor works, a published table whole or a
folder of parts. The figures are the same (tests/test_cluster_release.py compares them).

Rows in parts: each part reports, per (QI combination, sensitive code), its count; the flow adds
them up (memory: one entry per distinct combination, never a row). A folder table: the
verifier's class partials (tasks/verify/parted.py) also give each class's most frequent value,
and per sensitive value its rows and the class where its share is highest (the attribute gain).
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from privpub.tasks.core.executor import Executor
from privpub.tasks.core.microdata import Microdata, QIDomain
from privpub.tasks.core.parted_table import PartedTable, map_parts
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import Release
from privpub.tasks.risk import (
    WORST_CLASSES,
    ValueShares,
    as_input,
    attribute_summary,
    figures_from_classes,
    input_classes,
    input_risk,
    input_shares,
    riskiest_rows,
    table_name,
    table_risk,
    table_shares,
    value_shares,
    worst_classes,
)
from privpub.tasks.verify.parted import cells_of, class_keys, parted_classes
from privpub.tasks.verify.published import release_people


class CodedParts(Protocol):
    """One part's coded rows on a worker (tasks/validate/parted.py CodedPart)."""

    xt: np.ndarray  # (D, n) QI codes
    s: np.ndarray  # (n,) sensitive codes


class RowsInParts(Protocol):
    """The input kept in parts where the run works (tasks/validate/parted.py PartedData, a
    sibling step this one does not import): what the input's figures read of it."""

    in_parts: bool
    domains: list[QIDomain]
    sensitive_values: np.ndarray
    executor: Executor
    parts: list[Any]


def part_class_counts(part: CodedParts, widths: np.ndarray) -> pd.DataFrame:
    """On a worker: (class key, sensitive code, count) of one part's rows; the key is the row's
    QI codes in mixed radix over the domains' sizes."""
    key = np.zeros(part.xt.shape[1], dtype=np.int64)
    for codes, width in zip(part.xt, widths):
        key = key * int(width) + codes
    pairs = pd.DataFrame({"key": key, "s": part.s})
    return pairs.groupby(["key", "s"], sort=False).size().rename("n").reset_index()


def rows_risk(data: Microdata | RowsInParts, threshold: float, population: int | None = None) -> dict[str, float]:
    """The input's figures (`input-` names), wherever its rows are (None-free: {} when its
    classes cannot be keyed in 63 bits); against a population of that size when given."""
    return _rows(data, threshold, population, gains=False)[0]


def rows_figures(
    data: Microdata | RowsInParts, threshold: float, population: int | None = None
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """rows_risk with the attribute-gain figures (`input-attribute-gain-max`, ...), and the
    input's attribute_summary."""
    return _rows(data, threshold, population, gains=True)


def _rows(
    data: Microdata | RowsInParts, threshold: float, population: int | None, gains: bool
) -> tuple[dict[str, float], dict[str, Any] | None]:
    if not data.in_parts:
        rows = cast(Microdata, data)
        classes = input_classes(rows)  # once for both: a hash of a million keys
        figures = input_risk(rows, threshold, population, classes)
        if not gains:
            return figures, None
        gain, summary = input_shares(rows, classes)
        return {**figures, **gain}, summary
    data = cast(RowsInParts, data)
    widths = np.array([max(d.size, 1) for d in data.domains], dtype=np.int64)
    if float(np.prod(widths.astype(float))) >= 2**62:
        return {}, None  # too many QI combinations to key exactly: not computed (docs/risk.md)
    ex = data.executor
    counts = pd.concat(ex.gather([ex.submit(part_class_counts, p, widths) for p in data.parts]), ignore_index=True)
    pairs = counts.groupby(["key", "s"], sort=False)["n"].sum().reset_index()
    per_class = pairs.groupby("key", sort=False)["n"].agg(["sum", "max"])
    size, most = per_class["sum"].to_numpy(), per_class["max"].to_numpy()
    figures = figures_from_classes(size, most, threshold, population)
    if not gains:
        return as_input(figures), None
    # one entry per (class, value) that occurs: the shares from them, a row a person
    group = pd.factorize(pairs["key"])[0]
    n_groups = int(group.max()) + 1 if len(group) else 0
    shares = value_shares(group, pairs["s"].to_numpy(), n_groups, len(data.sensitive_values), pairs["n"].to_numpy())
    summary = attribute_summary(shares, data.sensitive_values)
    return as_input({**figures, **shares.figures()}), summary


def release_risk(
    technique: Technique, release: Release, threshold: float, population: int | None = None
) -> dict[str, float]:
    """A release's figures, from the tables the technique names (docs/risk.md); against a
    population of that size when given (the release's records, as published, its sample)."""
    return release_figures(technique, release, threshold, population)[0]


def release_figures(
    technique: Technique, release: Release, threshold: float, population: int | None = None
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """release_risk with the attribute_summary of the release (None: no table shows the
    sensitive values by group)."""
    gain, summary = release_attribute(technique, release)
    return {**_identity_risk(technique, release, threshold, population), **gain}, summary


def release_attribute(technique: Technique, release: Release) -> tuple[dict[str, float], dict[str, Any] | None]:
    """The attribute-gain figures and attribute_summary of a release, from the table the
    technique names (Technique.attribute_table, else its risk table when that shows the
    sensitive column). Under several rows per person, `release.private["people"]` (each row of
    the risk table's person number) makes them count distinct people."""
    sensitive = technique.spec.dataset.sensitive
    risk_view = technique.risk_table(release)
    view = technique.attribute_table(release)
    if view is None:
        if risk_view is None or sensitive not in risk_view[0].column_names:
            return {}, None
        view = (*risk_view, None)
    table, columns, count = view
    if isinstance(table, PartedTable):  # a folder of parts: the verifier's class partials
        return parted_shares(table, columns, sensitive)
    people = release.private.get("people")
    person = None if people is None else people.column("person").to_numpy()
    if count is not None and person is not None:  # people per group counted in the risk table
        by_record = risk_view[0] if risk_view is not None else None
        holds = by_record is not None and all(c in by_record.column_names for c in columns)
        return table_shares(table, columns, sensitive, count, people_table=(by_record, person) if holds else None)
    return table_shares(table, columns, sensitive, count, person)


def parted_shares(
    parted: PartedTable, columns: list[str], sensitive: str
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """table_shares of a folder of parts: per sensitive value, its rows and its best class in each
    hash bucket of classes, added up (a class is in one bucket); a row is a person."""
    classes = parted_classes(parted, columns, sensitive)
    frame = classes.values.to_pandas()
    total = int(classes.size.sum())
    frame["share"] = frame["holding"] / frame["size"]
    rows = frame.groupby("s", sort=True)["n"].sum()
    best = frame.sort_values(["s", "share", "key"], ascending=[True, False, True]).groupby("s", sort=True).head(1)
    m = len(rows)
    shares = ValueShares(
        holders=rows.to_numpy().astype(np.int64),
        group=np.arange(m, dtype=np.int64),  # each value's best class, named by its key below
        holding=best["holding"].to_numpy().astype(np.int64),
        size=best["size"].to_numpy().astype(np.int64),
        total=total,
        people=False,
    )
    keys = best["key"].tolist()
    summary = attribute_summary(shares, rows.index.to_numpy(), lambda i: cells_of(keys[i], parted.schema, columns))
    return shares.figures(), summary


def _identity_risk(
    technique: Technique, release: Release, threshold: float, population: int | None
) -> dict[str, float]:
    """FIGURES (and the population's) of the risk table, attribute-risk-max from the technique
    when it gives it."""
    figures: dict[str, float] = {}
    view = technique.risk_table(release)
    if view is not None:
        table, columns = view
        sensitive = technique.spec.dataset.sensitive
        if isinstance(table, PartedTable):  # a folder of parts: the verifier's class partials
            classes = parted_classes(table, columns, sensitive)
            figures = figures_from_classes(classes.size, classes.most, threshold, population)
        else:
            has_s = sensitive in table.column_names
            person = release_people(release)  # rows_per_person = "many": over people
            figures = table_risk(table, columns, sensitive if has_s else None, threshold, population, person)
    attribute = technique.attribute_risk(release)
    if attribute is not None:
        figures["attribute-risk-max"] = attribute
    return figures


def release_riskiest(technique: Technique, release: Release, limit: int = 10) -> dict[str, Any] | None:
    """Where the highest prosecutor risk is in the table the technique names (tasks/risk/__init__.py
    riskiest_rows), one Arrow table or a folder of parts; None without such a table."""
    view = technique.risk_table(release)
    if view is None or not isinstance(view[0], PartedTable):
        return riskiest_rows(technique, release, limit)  # one Arrow table (or none)
    table, columns = view
    sensitive = technique.spec.dataset.sensitive
    where = parted_riskiest(table, columns, sensitive if sensitive in table.column_names else None, limit)
    return None if where is None else {**where, "table": table_name(release, table)}


def rows_of_keys(table: pa.Table, columns: list[str], keys: pa.Array, limit: int) -> tuple[int, list[int]]:
    """On a worker: how many rows of one part belong to the classes `keys`, and the first
    `limit` of their positions in the part."""
    hit = pc.is_in(class_keys(table, columns), value_set=keys).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(hit)
    return len(rows), rows[:limit].tolist()


def parted_riskiest(
    parted: PartedTable, columns: list[str], sensitive: str | None, limit: int
) -> dict[str, Any] | None:
    """riskiest_rows of a folder of parts: the classes from the verifier's partials, then one
    pass over the parts for the positions of the smallest classes' rows (part offsets added)."""
    if parted.num_rows == 0:
        return None
    classes = parted_classes(parted, columns, sensitive)
    cand = classes.riskiest
    size = cand.column("size").to_numpy()
    most = cand.column("most").to_numpy()
    smallest = int(size.min())
    per_part = map_parts(parted, rows_of_keys, columns, cand.column("key").filter(pa.array(size == smallest)), limit)
    offsets = np.cumsum([0] + [pq.ParquetFile(p).metadata.num_rows for p in parted.parts])
    rows = [int(offsets[i]) + r for i, (_, found) in enumerate(per_part) for r in found][:limit]
    order = np.lexsort((-(most / size), size))[:WORST_CLASSES]
    keys = cand.column("key").take(pa.array(order)).to_pylist()
    cells = [cells_of(key, parted.schema, columns) for key in keys]
    return {
        "class_size": smallest,
        "records": int(sum(count for count, _ in per_part)),
        "rows": rows,
        "classes": worst_classes(cells, size[order], most[order] if sensitive else None),
    }

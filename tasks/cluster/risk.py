"""Re-identification risk (tasks/risk.py) of a release whatever the shape of its data: rows in
this process or kept in parts where the run's executor works, a published table whole or a
folder of parts. The figures are the same (tests/test_cluster_release.py compares them).

Rows in parts: each part reports, per (QI combination, sensitive code), its count; the flow adds
them up (memory: one entry per distinct combination, never a row). A folder table: the
verifier's class partials (tasks/cluster/verify.py) also give each class's most frequent value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from privpub.tasks.cluster.verify import cells_of, class_keys, parted_classes
from privpub.tasks.core.parted_table import PartedTable, map_parts
from privpub.tasks.risk import (
    WORST_CLASSES,
    as_input,
    figures_from_classes,
    input_risk,
    riskiest_rows,
    table_risk,
    worst_classes,
)
from privpub.tasks.verify.published import release_people


def part_class_counts(part, widths: np.ndarray) -> pd.DataFrame:
    """On a worker: (class key, sensitive code, count) of one part's rows; the key is the row's
    QI codes in mixed radix over the domains' sizes."""
    key = np.zeros(part.xt.shape[1], dtype=np.int64)
    for codes, width in zip(part.xt, widths):
        key = key * int(width) + codes
    pairs = pd.DataFrame({"key": key, "s": part.s})
    return pairs.groupby(["key", "s"], sort=False).size().rename("n").reset_index()


def rows_risk(data, threshold: float, population: int | None = None) -> dict[str, float]:
    """The input's figures (`input-` names), wherever its rows are (None-free: {} when its
    classes cannot be keyed in 63 bits); against a population of that size when given."""
    if not data.in_parts:
        return input_risk(data, threshold, population)
    widths = np.array([max(d.size, 1) for d in data.domains], dtype=np.int64)
    if float(np.prod(widths.astype(float))) >= 2**62:
        return {}  # too many QI combinations to key exactly: not computed (docs/risk.md)
    ex = data.executor
    counts = pd.concat(ex.gather([ex.submit(part_class_counts, p, widths) for p in data.parts]), ignore_index=True)
    pairs = counts.groupby(["key", "s"], sort=False)["n"].sum().reset_index()
    per_class = pairs.groupby("key", sort=False)["n"].agg(["sum", "max"])
    size, most = per_class["sum"].to_numpy(), per_class["max"].to_numpy()
    return as_input(figures_from_classes(size, most, threshold, population))


def release_risk(technique, release, threshold: float, population: int | None = None) -> dict[str, float]:
    """A release's figures, from the tables the technique names (docs/risk.md); against a
    population of that size when given (the release's records, as published, its sample)."""
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


def release_riskiest(technique, release, limit: int = 10) -> dict | None:
    """Where the highest prosecutor risk is in the table the technique names (tasks/risk.py
    riskiest_rows), one Arrow table or a folder of parts; None without such a table."""
    view = technique.risk_table(release)
    if view is None or not isinstance(view[0], PartedTable):
        return riskiest_rows(technique, release, limit)  # one Arrow table (or none)
    table, columns = view
    sensitive = technique.spec.dataset.sensitive
    return parted_riskiest(table, columns, sensitive if sensitive in table.column_names else None, limit)


def rows_of_keys(table: pa.Table, columns: list[str], keys: pa.Array, limit: int) -> tuple[int, list[int]]:
    """On a worker: how many rows of one part belong to the classes `keys`, and the first
    `limit` of their positions in the part."""
    hit = pc.is_in(class_keys(table, columns), value_set=keys).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(hit)
    return len(rows), rows[:limit].tolist()


def parted_riskiest(parted: PartedTable, columns: list[str], sensitive: str | None, limit: int) -> dict | None:
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

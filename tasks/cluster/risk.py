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

from privpub.tasks.cluster.verify import parted_classes
from privpub.tasks.core.parted_table import PartedTable
from privpub.tasks.risk import as_input, figures_from_classes, input_risk, table_risk


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
            figures = table_risk(table, columns, sensitive if has_s else None, threshold, population)
    attribute = technique.attribute_risk(release)
    if attribute is not None:
        figures["attribute-risk-max"] = attribute
    return figures

"""Count-query estimates from a generalized table, assuming uniformity inside each range.

As in the Ambiguity paper's Section 1: Q1 (Disease = stroke AND Age >= 45) on the group with
age range [20, 60] and one stroke estimates 1 x (60 - 45) / (60 - 20) = 3/8. A numeric range is
treated as continuous (overlap length / range length, a point range counts fully when inside);
a set-valued QI contributes |set ∩ condition| / |set|. Each row contributes the product of its
shares; rows are read through counting.QueryAnswers (grouped by sensitive value once).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privpub.schemas.dates import as_day_numbers
from privpub.tasks.evaluate.counting import (
    Coded,
    DistinctLists,
    QueryAnswers,
    Ranges,
    arrow_codes,
    arrow_plain_column,
    range_fraction,
)
from privpub.tasks.evaluate.workload import CountQuery

__all__ = ["estimate_from_generalized", "range_fraction"]


def generalized_column(table: pa.Table, qi: str) -> Ranges | Coded:
    """How a QI's published cells answer a condition: a [lo, hi] range, a set, or a plain value."""
    if f"{qi}_lo" in table.column_names:
        return Ranges(as_day_numbers(table.column(f"{qi}_lo")), as_day_numbers(table.column(f"{qi}_hi")))
    if pa.types.is_list(table.schema.field(qi).type) or pa.types.is_large_list(table.schema.field(qi).type):
        return DistinctLists.of(table, qi).column()
    return arrow_plain_column(table.column(qi))


def estimate_from_generalized(
    table: pa.Table, qi_names: list[str], sensitive: str, workload: list[CountQuery]
) -> np.ndarray:
    if not workload:
        return np.zeros(0)
    used = {name for q in workload for name, _ in q.conditions}
    columns = {q: generalized_column(table, q) for q in qi_names if q in used}
    s_codes, s_values = arrow_codes(table.column(sensitive))
    return QueryAnswers(columns, s_codes, s_values.tolist()).answers(workload)

"""MuCo's case in the contract battery (tasks/core/contract.py, privpub.testing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privpub.tasks.core.contract import Contract, Tables


def shift_age(tables: Tables, private: Mapping[str, Any]) -> Tables:
    """The first record's age moved outside what its group's random output table can produce."""
    table = tables["table"]
    age = table.column("age")
    at = table.schema.get_field_index("age")
    moved = pc.if_else(pa.array(np.arange(table.num_rows) == 0), pc.add(pc.max(age), 100), age)
    return {**tables, "table": table.set_column(at, "age", moved.cast(age.type))}


CONTRACTS = {
    # chunk_rows is MuCo's own (part of the result): small, so its anonymize step runs in chunks
    "muco": Contract(
        params={"delta": "1/6", "l": 3, "chunk_rows": 60},
        required=("delta",),
        tamper=shift_age,
        series_figure="series-composition-l",
    ),
}

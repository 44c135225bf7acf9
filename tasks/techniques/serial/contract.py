"""Serial's case in the contract battery (tasks/core/contract.py, privpub.testing): it guards its
series itself (values change, absent people are virtual members), so its series figure is its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import pyarrow as pa

from privpub.tasks.core.contract import Contract, Tables


def duplicate_value(tables: Tables, private: Mapping[str, Any]) -> Tables:
    """A protected (transient) value shown once more in the group where that costs most: one
    row of the group takes the value, which then exceeds 1/l of the group."""
    table = tables["table"]
    rows = pd.DataFrame({"gid": table.column("gid").to_numpy(), "v": table.column("occupation").to_pylist()})
    held = rows.groupby(["gid", "v"]).gid.transform("size") / rows.groupby("gid").gid.transform("size")
    source: int = held.where(rows.v.isin(private["transient"])).idxmax()  # type: ignore[assignment]
    target = rows.index[(rows.gid == rows.gid[source]) & (rows.v != rows.v[source])][0]
    values = rows.v.to_list()
    values[target] = values[source]
    at = table.schema.get_field_index("occupation")
    return {**tables, "table": table.set_column(at, "occupation", pa.array(values, table.schema.field(at).type))}


CONTRACTS = {
    "serial": Contract(
        params={"l": 2, "strategy": "constant-ratio", "releases": 1, "transient": 0.2},
        required=("l",),
        tamper=duplicate_value,
        series_figure="serial-global",
    ),
}

"""dp-synthetic's case in the contract battery (tasks/core/contract.py, privpub.testing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from privpub.tasks.core.contract import Contract, Tables


def halve_sigma(tables: Tables, private: Mapping[str, Any]) -> Tables:
    """The first measurement's recorded noise scale halved: it would have spent four times its rho."""
    table = tables["mechanism"]
    sigma = np.array(table.column("sigma").to_numpy(zero_copy_only=False), copy=True)
    sigma[0] /= 2
    at = table.schema.get_field_index("sigma")
    return {**tables, "mechanism": table.set_column(at, "sigma", pa.array(sigma, pa.float64()))}


CONTRACTS = {
    "dp-synthetic": Contract(
        params={"epsilon": 1.0, "delta": 1e-6, "bounds": {"age": [17, 95]}, "categories": "from-data"},
        required=("epsilon",),
        tamper=halve_sigma,
        series_figure="series-epsilon",  # the budget ledger's total after the second release
        # a series of releases needs a budget for more than one (without one: one release's epsilon)
        extra={"series": {"budget": {"epsilon": 10.0}}},
    ),
}

"""Generalization's case in the contract battery (tasks/core/contract.py, privpub.testing)."""

from __future__ import annotations

from privpub.tasks.core.contract import Contract, narrow_interval

CONTRACTS = {
    "generalization": Contract(
        params={"k": 5, "l": 3},
        required=("k",),
        tamper=narrow_interval("age"),
        series_figure="series-composition-l",
        linkable=True,
    ),
}

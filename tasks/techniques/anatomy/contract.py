"""Anatomy's case in the contract battery (tasks/core/contract.py, privpub.testing)."""

from __future__ import annotations

from privpub.tasks.core.contract import Contract, raise_count

CONTRACTS = {
    "anatomy": Contract(params={"l": 3}, required=("l",), tamper=raise_count(), series_figure="series-composition-l"),
}

"""Ambiguity's and PriView's cases in the contract battery (tasks/core/contract.py, privpub.testing)."""

from __future__ import annotations

from privpub.tasks.core.contract import Contract, raise_count

_CASE = Contract(
    params={"alpha": 0.25, "beta": 0.1},
    required=("alpha", "beta"),
    tamper=raise_count(),
    series_figure="series-composition-l",
)
CONTRACTS = {"ambiguity": _CASE, "priview": _CASE}

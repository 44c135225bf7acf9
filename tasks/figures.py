"""What each utility figure measures, which way is better, and when it is poor: the words a
compliance officer reads beside the numbers (report.html, the Prefect summary)."""

from __future__ import annotations

import re
from typing import Any

LOWER, HIGHER, NEUTRAL = "lower is better", "higher is better", "context"

_FIGURES: dict[str, tuple[str, str]] = {
    "queries": ("count queries in the shared workload (the same for every technique on this data)", NEUTRAL),
    "groups": ("QI-groups published: people an adversary cannot tell apart share one", NEUTRAL),
    "avg_group_size": ("average rows per QI-group", LOWER),
    "min_group_size": ("smallest QI-group (at least k when k-anonymity is asked for)", NEUTRAL),
    "max_group_size": ("largest QI-group: large groups blur the data most", LOWER),
    "discernibility": ("sum of squared group sizes (Bayardo-Agrawal): the total blur", LOWER),
    "suppressed_rows": ("input rows left out of the release", LOWER),
    "dropped_rows": ('input rows with an empty cell, left out before any work ([dataset] missing = "drop")', LOWER),
    "uncertainty_penalty": ("total generalization width over all cells (Butterfly Definition 1)", LOWER),
    "uncertainty_penalty_normalized": ("generalization width per cell, 0 = exact values, 1 = whole domain", LOWER),
    "uncertainty_penalty_common": ("generalization width on attributes shared by several QIDs", LOWER),
    "uncertainty_penalty_distinct": ("generalization width on attributes of one QID only", LOWER),
    "iloss": ("information loss of the perturbed QI values (MuCo ILoss)", LOWER),
}


def describe(name: str) -> tuple[str, str]:
    """(what the figure measures, which direction is better)."""
    m = re.fullmatch(r"query_error_(\d+)pct", name)
    if m:
        return (
            f"mean relative error of count queries selecting about {m.group(1)}% of the rows (0 = exact answers)",
            LOWER,
        )
    if name.startswith("penalty_"):
        return (f"generalization width on {name.removeprefix('penalty_')} (part of the uncertainty penalty)", LOWER)
    return _FIGURES.get(name, ("technique-specific figure", NEUTRAL))


def poor_figures(utility: dict[str, Any], rows_in: int | None = None) -> list[str]:
    """Warning lines for figures that make the release of little use."""
    out = []
    for name, value in utility.items():
        m = re.fullmatch(r"query_error_(\d+)pct", name)
        if m and isinstance(value, (int, float)) and value > 1:
            out.append(
                f"count queries at {m.group(1)}% selectivity are off by {value:.2f} times their "
                "true answer on average (above 1: analysts will get little from them)"
            )
    penalty = utility.get("uncertainty_penalty_normalized")
    if isinstance(penalty, (int, float)) and penalty > 0.5:
        out.append(f"cells are generalized over {penalty:.0%} of their domain on average")
    suppressed = utility.get("suppressed_rows")
    if rows_in and isinstance(suppressed, (int, float)) and suppressed > 0.05 * rows_in:
        out.append(f"{int(suppressed):,} of {rows_in:,} input rows ({suppressed / rows_in:.0%}) were left out")
    return out


def worst_rows(worst: dict[str, Any]) -> list[tuple[str, str]]:
    """A verifier's worst case as (field, value) rows a person can read (no raw JSON)."""
    rows = []
    for key, value in worst.items():
        if isinstance(value, dict):
            text = ", ".join(f"{k} = {v}" for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            text = ", ".join(map(str, value[:12])) + (f", ... ({len(value)} in all)" if len(value) > 12 else "")
        else:
            text = str(value)
        rows.append((key.replace("_", " "), text))
    return rows

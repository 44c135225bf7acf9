"""Figure names in one convention (issue 44): hyphens. The utility figures were written with
underscores before (`query_error_1pct`); states written then keep those names in their rows (the
hash chain covers them, so they are never rewritten) and every reader maps them here on reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# the utility figures' old names (fixed ones; query_error_<N>pct and penalty_<column> by rule)
_OLD_UTILITY = (
    "avg_group_size",
    "max_group_size",
    "min_group_size",
    "suppressed_rows",
    "dropped_rows",
    "uncertainty_penalty",
    "uncertainty_penalty_normalized",
    "uncertainty_penalty_common",
    "uncertainty_penalty_distinct",
)
RENAMED: dict[str, str] = {old: old.replace("_", "-") for old in _OLD_UTILITY}
_QUERY_ERROR = re.compile(r"query_error_(\d+)pct")


def current_name(name: str) -> str:
    """A utility figure's name as written now: an old (underscore) name mapped, any other kept.
    `penalty_<column>` keeps the column's own spelling (a column may hold underscores)."""
    if name in RENAMED:
        return RENAMED[name]
    m = _QUERY_ERROR.fullmatch(name)
    if m:
        return f"query-error-{m.group(1)}pct"
    if name.startswith("penalty_"):
        return "penalty-" + name.removeprefix("penalty_")
    return name


def current_names(figures: Mapping[str, Any]) -> dict[str, Any]:
    """A utility figures dict with old names mapped ."""
    return {current_name(k): v for k, v in figures.items()}


def old_names(names: Iterable[str]) -> list[str]:
    """The names that may hold the given current names in an old state: each name and its old
    spelling (for a reader that filters stored rows by name)."""
    out: list[str] = []
    for name in names:
        out.append(name)
        out += [old for old, new in RENAMED.items() if new == name]
        m = re.fullmatch(r"query-error-(\d+)pct", name)
        if m:
            out.append(f"query_error_{m.group(1)}pct")
        if name.startswith("penalty-"):
            out.append("penalty_" + name.removeprefix("penalty-"))
    return out


__all__ = ["RENAMED", "current_name", "current_names", "old_names"]

"""k-anonymity and distinct l-diversity, computed from a published table alone (and, when a
person may have several rows, the release's private people table: docs/models.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.verify.published import class_profile, describe_row_class


def k_and_l(
    table: pa.Table,
    qi_cols: list[str],
    sensitive: str,
    k: int | None,
    l: int | None,
    person: np.ndarray | None = None,
) -> list[PrivacyResult]:
    """Both figures from one pass over the equivalence classes."""
    if table.num_rows == 0:
        return [k_anonymity(table, qi_cols, k), l_diversity(table, qi_cols, sensitive, l)]
    prof = class_profile(table, qi_cols, sensitive, person)
    return [k_anonymity(table, qi_cols, k, prof, person), l_diversity(table, qi_cols, sensitive, l, prof)]


def k_anonymity(
    table: pa.Table,
    qi_cols: list[str],
    k: int | None,
    prof: dict[str, Any] | None = None,
    person: np.ndarray | None = None,
) -> PrivacyResult:
    """Smallest equivalence class over the published QI columns; with `person` (each row's
    person number), the fewest distinct people in a class."""
    if table.num_rows == 0:
        return PrivacyResult("k-anonymity", 0, k, False, {"reason": "empty table"})
    if prof is None or (person is not None and prof.get("people") is None):
        prof = class_profile(table, qi_cols, None, person)
    if person is not None:
        return _people_k(table, qi_cols, k, prof)
    worst = int(prof["size"].argmin())
    reached = int(prof["size"][worst])
    return PrivacyResult(
        "k-anonymity",
        reached,
        k,
        k is None or reached >= k,
        {"class": describe_row_class(table, prof["first_row"][worst], qi_cols, reached), "classes": len(prof["size"])},
    )


def _people_k(table: pa.Table, qi_cols: list[str], k: int | None, prof: dict[str, Any]) -> PrivacyResult:
    """k over people: an adversary who knows one or all of a person's records finds the
    person's class and cannot tell its people apart. A person whose rows lie in several classes
    breaks the model (each class would narrow them down on its own), whatever the figure."""
    people = prof["people"]
    worst = int(people.argmin())
    reached = int(people[worst])
    detail = {
        "class": describe_row_class(table, prof["first_row"][worst], qi_cols, prof["size"][worst], people=reached),
        "classes": len(people),
        "measures": "people",
    }
    if prof["spread"]:
        detail["people_in_several_classes"] = prof["spread"]
    return PrivacyResult("k-anonymity", reached, k, (k is None or reached >= k) and not prof["spread"], detail)


def l_diversity(
    table: pa.Table, qi_cols: list[str], sensitive: str, l: int | None, prof: dict[str, Any] | None = None
) -> PrivacyResult:
    """Fewest distinct sensitive values in an equivalence class (distinct l-diversity; the same
    over people as over rows)."""
    if table.num_rows == 0:
        return PrivacyResult("l-diversity", 0, l, False, {"reason": "empty table"})
    if prof is None or prof["distinct"] is None:
        prof = class_profile(table, qi_cols, sensitive)
    worst = int(prof["distinct"].argmin())
    reached = int(prof["distinct"][worst])
    people = None if prof.get("people") is None else int(prof["people"][worst])
    return PrivacyResult(
        "l-diversity",
        reached,
        l,
        l is None or reached >= l,
        {"class": describe_row_class(table, prof["first_row"][worst], qi_cols, prof["size"][worst], reached, people)},
    )

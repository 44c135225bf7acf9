"""k-anonymity and distinct l-diversity, computed from a published table alone."""

from __future__ import annotations

import pyarrow as pa

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.verify.published import class_profile, describe_row_class


def k_and_l(table: pa.Table, qi_cols: list[str], sensitive: str, k: int | None, l: int | None) -> list[PrivacyResult]:
    """Both figures from one pass over the equivalence classes."""
    if table.num_rows == 0:
        return [k_anonymity(table, qi_cols, k), l_diversity(table, qi_cols, sensitive, l)]
    prof = class_profile(table, qi_cols, sensitive)
    return [k_anonymity(table, qi_cols, k, prof), l_diversity(table, qi_cols, sensitive, l, prof)]


def k_anonymity(table: pa.Table, qi_cols: list[str], k: int | None, prof: dict | None = None) -> PrivacyResult:
    """Smallest equivalence class over the published QI columns."""
    if table.num_rows == 0:
        return PrivacyResult("k-anonymity", 0, k, False, {"reason": "empty table"})
    prof = prof or class_profile(table, qi_cols)
    worst = int(prof["size"].argmin())
    reached = int(prof["size"][worst])
    return PrivacyResult(
        "k-anonymity",
        reached,
        k,
        k is None or reached >= k,
        {"class": describe_row_class(table, prof["first_row"][worst], qi_cols, reached), "classes": len(prof["size"])},
    )


def l_diversity(
    table: pa.Table, qi_cols: list[str], sensitive: str, l: int | None, prof: dict | None = None
) -> PrivacyResult:
    """Fewest distinct sensitive values in an equivalence class (distinct l-diversity)."""
    if table.num_rows == 0:
        return PrivacyResult("l-diversity", 0, l, False, {"reason": "empty table"})
    if prof is None or prof["distinct"] is None:
        prof = class_profile(table, qi_cols, sensitive)
    worst = int(prof["distinct"].argmin())
    reached = int(prof["distinct"][worst])
    return PrivacyResult(
        "l-diversity",
        reached,
        l,
        l is None or reached >= l,
        {"class": describe_row_class(table, prof["first_row"][worst], qi_cols, prof["size"][worst], reached)},
    )

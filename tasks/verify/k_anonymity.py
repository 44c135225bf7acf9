"""k-anonymity and distinct l-diversity, computed from a published table alone."""
from __future__ import annotations

import pyarrow as pa

from tasks.anonymize.base import PrivacyResult
from tasks.verify.published import describe_class, equivalence_classes


def class_sizes(table: pa.Table, qi_cols: list[str], sensitive: str | None = None) -> pa.Table:
    return equivalence_classes(table, qi_cols, sensitive)


def k_anonymity(table: pa.Table, qi_cols: list[str], k: int | None) -> PrivacyResult:
    """Smallest equivalence class over the published QI columns."""
    classes = equivalence_classes(table, qi_cols)
    if classes.num_rows == 0:
        return PrivacyResult("k-anonymity", 0, k, False, {"reason": "empty table"})
    worst = classes.slice(0, 1).to_pylist()[0]
    reached = int(worst["size"])
    return PrivacyResult("k-anonymity", reached, k, k is None or reached >= k,
                         {"class": describe_class(worst, qi_cols), "classes": classes.num_rows})


def l_diversity(table: pa.Table, qi_cols: list[str], sensitive: str, l: int | None) -> PrivacyResult:
    """Fewest distinct sensitive values in an equivalence class (distinct l-diversity)."""
    classes = equivalence_classes(table, qi_cols, sensitive)
    if classes.num_rows == 0:
        return PrivacyResult("l-diversity", 0, l, False, {"reason": "empty table"})
    counts = classes.column("distinct_sensitive").to_numpy()
    i = int(counts.argmin())
    worst = classes.slice(i, 1).to_pylist()[0]
    reached = int(counts[i])
    return PrivacyResult("l-diversity", reached, l, l is None or reached >= l,
                         {"class": describe_class(worst, qi_cols)})

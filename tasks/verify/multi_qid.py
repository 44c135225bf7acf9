"""k-anonymity for several quasi-identifiers (Butterfly paper, Section 2.2), from a published
table alone: each recipient links on its own QID, so the table is grouped by that QID's
published columns; with the two-level framework (Section 5.2) colluding recipients link on the
union QID, which must then be k'-anonymous."""
from __future__ import annotations

import pyarrow as pa

from tasks.anonymize.base import PrivacyResult
from tasks.verify.k_anonymity import k_anonymity
from tasks.verify.published import qi_columns


def multi_qid_anonymity(table: pa.Table, qids: list[list[str]], k: int, k_prime: int | None = None,
                        union: list[str] | None = None) -> list[PrivacyResult]:
    """One k-anonymity result per QID (model 'k-anonymity QID<i>'), plus k' on the union."""
    results = []
    for i, qid in enumerate(qids, start=1):
        res = k_anonymity(table, qi_columns(table, qid), k)
        res.model = f"k-anonymity QID{i}"
        res.worst = {"qid": list(qid), **res.worst}
        results.append(res)
    if k_prime is not None:
        names = union or sorted({c for q in qids for c in q})
        res = k_anonymity(table, qi_columns(table, names), k_prime)
        res.model = "k'-anonymity union QID"
        res.worst = {"qid": list(names), **res.worst}
        results.append(res)
    return results

"""k-anonymity for several quasi-identifiers (Butterfly paper, Section 2.2), from a published
table alone: each recipient links on its own QID, so the table is grouped by that QID's
published columns; with the two-level framework (Section 5.2) colluding recipients link on the
union QID, which must then be k'-anonymous.

The classes are counted in runs of rows (tasks/verify/class_chunks.py): `multi_qid_plan` cuts
the table, `class_partials` counts one run (a verify chunk, anywhere), `multi_qid_results` adds
the runs up. `multi_qid_anonymity` does all three in this process.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.verify.class_chunks import ClassChunk, class_chunks, class_partials, k_anonymity_of, merge_partials
from privpub.tasks.verify.published import qi_columns


@dataclass
class MultiQIDChecks:
    """What is checked: per QID (and the union with k') its name, published columns and k."""

    models: list[str]
    qids: list[list[str]]
    columns: list[list[str]]
    thresholds: list[int]


def multi_qid_checks(
    table: pa.Table, qids: list[list[str]], k: int, k_prime: int | None = None, union: list[str] | None = None
) -> MultiQIDChecks:
    checks = MultiQIDChecks([], [], [], [])
    for i, qid in enumerate(qids, start=1):
        checks.models.append(f"k-anonymity QID{i}")
        checks.qids.append(list(qid))
        checks.columns.append(qi_columns(table, qid))
        checks.thresholds.append(k)
    if k_prime is not None:
        names = union or sorted({c for q in qids for c in q})
        checks.models.append("k'-anonymity union QID")
        checks.qids.append(list(names))
        checks.columns.append(qi_columns(table, names))
        checks.thresholds.append(k_prime)
    return checks


def multi_qid_plan(table: pa.Table, checks: MultiQIDChecks, chunk_rows: int) -> list[ClassChunk]:
    return class_chunks(table, checks.columns, chunk_rows)


def multi_qid_results(checks: MultiQIDChecks, results: list[list[pa.Table]]) -> list[PrivacyResult]:
    """One k-anonymity result per QID (model 'k-anonymity QID<i>'), plus k' on the union, from
    every chunk's partials (in any order)."""
    out = []
    for i, (model, qid, columns) in enumerate(zip(checks.models, checks.qids, checks.columns)):
        merged = merge_partials([r[i] for r in results], columns)
        res = k_anonymity_of(merged, columns, checks.thresholds[i])
        out.append(replace(res, model=model, worst={"qid": qid, **res.worst}))
    return out


def multi_qid_anonymity(
    table: pa.Table,
    qids: list[list[str]],
    k: int,
    k_prime: int | None = None,
    union: list[str] | None = None,
    chunk_rows: int | None = None,
) -> list[PrivacyResult]:
    """Every chunk in this process (one chunk unless chunk_rows is given)."""
    checks = multi_qid_checks(table, qids, k, k_prime, union)
    chunks = multi_qid_plan(table, checks, chunk_rows or max(table.num_rows, 1))
    return multi_qid_results(checks, [class_partials(c) for c in chunks])

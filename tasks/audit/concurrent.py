"""Concurrent queries (Section 5.2, Algorithm 5).

Queries that arrive together have no inherent order, and the order matters (Table 12: checking q2
before q1 answers both). Two orders are offered:

- "simulatable" (default): rounds over the batch in its given order. In every round each pending
  query is checked against the current knowledge; an l-safe query is decided by Algorithm 2 (answer
  or positive denial, which updates G), an unsafe one waits for the next round. Rounds repeat while
  the knowledge changes; queries still unsafe at the end get a negative denial. This is Algorithm 5's
  loop "check ND again after A and PD updated G", with every choice made from public information,
  so an adversary can replay it on every instance.
- "optimal": the thesis's literal step 2: try the orders of the batch against the real table and
  keep one answering the most queries. The choice of order reads the secret table, so it is *not*
  simulatable; docs/auditing.md shows a population where it narrows a person below l (see
  tests/audit/test_concurrent.py). Kept only to reproduce the thesis.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Hashable, Iterable, Sequence

from privpub.tasks.audit import reasons
from privpub.tasks.audit.auditor import Auditor, Decision
from privpub.tasks.audit.knowledge import Knowledge, plain, sort_values

Query = tuple[str, Iterable[Hashable]]  # (query id, selected ids)
Batch = list[tuple[str, tuple[Hashable, ...]]]  # the queries, their ids sorted


def ask_batch(auditor: Auditor, queries: Sequence[Query], order: str = "simulatable") -> list[Decision]:
    """Decide a batch of concurrent queries; decisions come back in the batch's order."""
    batch = [(qid, tuple(sort_values({plain(i) for i in ids}))) for qid, ids in queries]
    auditor.begin_request()  # the batch's checks share one request ceiling
    if order == "simulatable":
        decided = _rounds(auditor, batch)
    elif order == "optimal":
        decided = _best_order(auditor, batch)
    else:
        raise ValueError("order must be 'simulatable' or 'optimal'")
    return [decided[qid] for qid, _ in batch]


def _rounds(auditor: Auditor, batch: Batch) -> dict[str, Decision]:
    pending = list(batch)
    decided: dict[str, Decision] = {}
    last_reason: dict[str, Decision] = {}
    progress = True
    while progress and pending:
        progress = False
        for qid, ids in list(pending):
            sets = [auditor.universe.members(ids)]
            checked = auditor.check(qid, sets)  # the budget and the after_denial policy
            if isinstance(checked, Decision):
                last_reason[qid] = checked
                continue
            report, stats = checked
            if not report.is_safe_query(auditor.l):
                last_reason[qid] = Decision(
                    qid,
                    "negative-denial",
                    **stats,
                    reason=reasons.batch_negative(auditor.l),
                )
                continue
            decided[qid] = auditor._consult(qid, ids, sets, report, stats)
            pending.remove((qid, ids))
            progress = progress or decided[qid].response == "answer" or not report.everything
    for qid, _ in pending:
        decided[qid] = last_reason[qid]
    return decided


def _best_order(auditor: Auditor, batch: Batch) -> dict[str, Decision]:
    best: tuple[int, dict[str, Decision], Knowledge] | None = None
    for perm in itertools.permutations(batch):
        trial = copy.copy(auditor)
        trial.strategy = "simulatable"
        decisions = {qid: trial.ask(ids, qid) for qid, ids in perm}
        answered = sum(d.response == "answer" for d in decisions.values())
        if best is None or answered > best[0]:
            best = (answered, decisions, trial.knowledge)
    assert best is not None  # permutations() yields at least the empty order
    auditor.knowledge = best[2]
    return best[1]

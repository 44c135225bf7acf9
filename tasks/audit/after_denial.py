"""What a positive denial may leave behind (issue 31): the `after_denial` policy.

Route 4 (witness.py) proves floor(Delta) >= l without listing Delta's answers. If the real answer
then turns out unsafe, the positive denial sets G := Delta, and with policy "implicit" (the
behaviour before issue 31) Delta is stored unlisted (`knowledge.Denial`): every later decision
must list it first, under its own budget, which at scale never fits, so every later query is
budget-denied (the stall).

With policy "list", a query that only route 4 proved l-safe is decided only once its Delta is
also listed by the exact listing routes (1-3 or 5), under an allowance of its own (as many units
of work as the decision's budget, counted separately). Listed, the decision goes on as for routes
2-3 (a positive denial stores explicit branches); not listed, the query is denied before the
secret is read. Both the listing and its outcome are functions of (G, q, l) and the allowance
alone, so the choice to read stays simulatable; the listing is exact, so every decision that
reads is the one brute force's Algorithm 2 takes.
"""

from __future__ import annotations

from privpub.tasks.audit.decide import DeltaReport, compute_delta
from privpub.tasks.audit.knowledge import Knowledge
from privpub.tasks.audit.program import Work

POLICIES = ("list", "implicit")
# the spec's default ([audit] after_denial), by whether the table has a grid: without one a
# route-4 positive denial stalls later queries ("list" answers 3x more on the analyst's history);
# with one no positive denial occurred on the benches and "list" only denies more (wide: 12 of
# 200 against 7) (docs/auditing.md, "After a positive denial (issue 31)")
DEFAULT_POLICY = {False: "list", True: "implicit"}
LEGACY_POLICY = "implicit"  # a state saved without the key was decided this way


def must_list(policy: str, report: DeltaReport, l: int) -> bool:
    """Is this l-safe query's Delta to be listed before the read? Only an unlisted (route 4) Delta
    under policy "list"; an explicit or empty Delta needs nothing more."""
    return policy == "list" and report.implicit and report.is_safe_query(l)


def delta_within_allowance(g: Knowledge, sets: list[frozenset[int]], l: int, allowance: Work) -> DeltaReport:
    """Delta(q, G, l) with its unsafe answers listed (routes 1-3 or 5, never route 4), under
    `allowance`; BudgetExceeded when it does not fit (the caller denies before reading)."""
    return compute_delta(g, sets, l, allowance, need=l, witness=False)

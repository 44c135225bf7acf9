"""The series' privacy budget (issue 45 item 2, docs/dp.md "The budget ledger"): before any work,
a differentially private release is checked against what its series spent already, under basic
sequential composition (the epsilons add up, and the deltas); refused in one line when it would
take the total above `[series] budget`. The figures it then records, `epsilon` / `delta` (this
release's spend, unless its technique records them) and `series-epsilon` / `series-delta` (the
series' total after it, against the budget), are the ledger (state/ledger.py reads it back).

A series is DP or syntactic, never both: a syntactic release of the same people reveals what no
epsilon bounds, so the series' guarantee would no longer be a DP guarantee."""

from __future__ import annotations

import math
from decimal import Decimal

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import PrivacyBudget, ReleaseSpec
from privpub.state.ledger import ACCOUNTING, LEDGER_FIGURES, Spend, amount, exact, ledger_rows
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import PrivacyResult

NAMED_RELEASES = 3  # a refusal names at most this many releases, then counts the rest


def release_spend(technique: Technique) -> tuple[Decimal, Decimal] | None:
    """The technique's (epsilon, delta) from its parameters (None: not DP), checked in domain."""
    spend = technique.privacy_spend()
    if spend is None:
        return None
    epsilon, delta = spend.get("epsilon"), spend.get("delta", 0.0)
    if not (isinstance(epsilon, int | float) and 0 < epsilon < math.inf):
        raise ValueError(f"technique {technique.name}: privacy_spend() epsilon must be a finite number above 0")
    if not (isinstance(delta, int | float) and 0 <= delta < 1):
        raise ValueError(f"technique {technique.name}: privacy_spend() delta must be a number from 0, below 1")
    return exact(float(epsilon)), exact(float(delta))


def budget_settings(spec: ReleaseSpec, technique: Technique) -> PrivacyBudget | None:
    """[series] budget read with the technique (refused before any work): a budget for a
    technique that spends none is a mistake in the spec."""
    budget = spec.series.budget
    if budget is not None and release_spend(technique) is None:
        raise SpecError(
            f"[series] budget: technique '{technique.name}' is not differentially private and spends no "
            "privacy budget; remove [series] budget or choose a DP technique"
        )
    return budget


def _named(releases: list[Spend]) -> str:
    ids = [s.release_id for s in releases[:NAMED_RELEASES]]
    more = len(releases) - len(ids)
    return ", ".join(ids) + (f" and {more} more" if more else "")


def mixing_refusal(series: str, technique: Technique, releases: list[Spend], dp: bool) -> str | None:
    """Why this release cannot join its series (None: it can): DP and syntactic releases of the
    same people are never mixed in one series."""
    other = [s for s in releases if s.dp != dp]
    if not other:
        return None
    if dp:
        return (
            f"series '{series}' has syntactic releases ({_named(other)}): a differentially private release "
            "cannot join it, since what those releases reveal of the same people is bounded by no epsilon, so the "
            "series would have no DP guarantee; publish it as a new series ([dataset] name)"
        )
    return (
        f"series '{series}' is differentially private (its budget spent by {_named(other)}): a syntactic release "
        f"(technique {technique.name}) of the same people is not covered by the DP budget, so the series' "
        "guarantee would no longer be a DP guarantee; publish it as a new series ([dataset] name)"
    )


def _delta_budget(budget: PrivacyBudget) -> Decimal | None:
    """The series' delta limit: None for a budget of epsilon alone (its deltas are summed and shown)."""
    return None if budget.delta is None else exact(budget.delta)


def over_budget(
    series: str, spend: tuple[Decimal, Decimal], budget: PrivacyBudget | None, dp_releases: list[Spend]
) -> tuple[str | None, list[PrivacyResult]]:
    """(the refusal, None when within the budget; the ledger figures this release records)."""
    eps, delta = spend
    defaulted = budget is None  # a series without a budget may spend one release's own epsilon
    b_eps, b_delta = (eps, delta) if budget is None else (exact(budget.epsilon), _delta_budget(budget))
    spent_e = sum((s.spent()[0] for s in dp_releases), Decimal(0))
    spent_d = sum((s.spent()[1] for s in dp_releases), Decimal(0))
    total_e, total_d = spent_e + eps, spent_d + delta
    uses_delta = bool(b_delta or total_d)
    if total_e > b_eps or (b_delta is not None and total_d > b_delta):
        return _refusal(series, spend, (spent_e, spent_d), (b_eps, b_delta), dp_releases, defaulted, uses_delta), []
    detail = {
        "accounting": ACCOUNTING,
        "spent_before": str(spent_e),
        "releases_before": len(dp_releases),
        "budget": str(b_eps),
        "remaining": str(b_eps - total_e),
        "budget_defaulted": defaulted,
    }
    figures = [
        PrivacyResult("epsilon", str(eps), None, True, {"accounting": ACCOUNTING}),
        PrivacyResult("delta", str(delta), None, True, {"accounting": ACCOUNTING}),
        PrivacyResult("series-epsilon", str(total_e), str(b_eps), True, detail),
        PrivacyResult(
            "series-delta",
            str(total_d),
            None if b_delta is None else str(b_delta),  # no threshold: a budget of epsilon alone
            True,
            {
                **detail,
                "spent_before": str(spent_d),
                "budget": "not limited" if b_delta is None else str(b_delta),
                "remaining": "not limited" if b_delta is None else str(b_delta - total_d),
            },
        ),
    ]
    return None, figures


def _refusal(
    series: str,
    spend: tuple[Decimal, Decimal],
    spent: tuple[Decimal, Decimal],
    budget: tuple[Decimal, Decimal | None],
    dp_releases: list[Spend],
    defaulted: bool,
    uses_delta: bool,
) -> str:
    """The one line: what this release would spend, what was spent and by which releases, what
    remains, and what the budget is."""

    def pair(e: Decimal, d: Decimal | None) -> str:
        delta = "not limited" if d is None else amount(d)
        return f"epsilon = {amount(e)}" + (f", delta = {delta}" if uses_delta else "")

    by = (
        f"by {len(dp_releases)} release(s) ({', '.join(f'{s.release_id}: {amount(s.spent()[0])}' for s in dp_releases[:NAMED_RELEASES])}"
        + (f" and {len(dp_releases) - NAMED_RELEASES} more" if len(dp_releases) > NAMED_RELEASES else "")
        + ")"
        if dp_releases
        else "by no release yet"
    )
    remains = (
        max(budget[0] - spent[0], Decimal(0)),
        None if budget[1] is None else max(budget[1] - spent[1], Decimal(0)),
    )
    whence = (
        " ([series] budget is not set: a series without one may spend one release's own epsilon; set "
        "[series] budget = { epsilon = ... } to the series' total)"
        if defaulted
        else ""
    )
    return (
        f"privacy budget of series '{series}' exceeded: this release would spend {pair(*spend)}; "
        f"spent {pair(*spent)} {by}; remaining {pair(*remains)} of the budget {pair(*budget)}{whence}; "
        "not published (basic sequential composition: the spends add up)"
    )


def ledger_check(
    spec: ReleaseSpec, technique: Technique, releases: list[Spend]
) -> tuple[str | None, list[PrivacyResult]]:
    """This release against its series' ledger (`releases`: every release of the series, in
    order): (the refusal or None, the ledger figures to record; none for a syntactic release)."""
    series = spec.dataset.name
    spend = release_spend(technique)
    refusal = mixing_refusal(series, technique, releases, spend is not None)
    if refusal is not None or spend is None:
        return refusal, []
    return over_budget(series, spend, budget_settings(spec, technique), [s for s in releases if s.dp])


def ledger_with(
    series: str, earlier: list[Spend], release_id: str, sequence: int, privacy: list[PrivacyResult]
) -> list[dict[str, object]]:
    """The series' ledger rows up to this release (the report's, written before the commit makes
    it readable from the state): the earlier releases' and this one's, if it is DP."""
    figures = {r.model: r for r in privacy if r.model in LEDGER_FIGURES}
    if "series-epsilon" not in figures:
        return []

    def text(name: str, threshold: bool = False) -> str | None:
        r = figures.get(name)
        return None if r is None else str(r.threshold if threshold else r.value)

    this = Spend(
        release_id,
        sequence,
        text("epsilon"),
        text("delta"),
        text("series-epsilon"),
        text("series-delta"),
        text("series-epsilon", True),
        text("series-delta", True),
    )
    return ledger_rows({series: [*earlier, this]})

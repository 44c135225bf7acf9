"""The privacy-budget ledger of a series (issue 45, docs/dp.md "The budget ledger"): what each
differentially private release spent and the series' total after it, read from the release's
privacy figures (`epsilon`, `delta`, `series-epsilon`, `series-delta`), which the history chain
covers like every figure (state/chain.py): the ledger has no table of its own to edit apart.

Amounts are exact decimals: a figure's text is the shortest decimal of its float, and sums of
decimals do not drift (0.1 + 0.2 is 0.3), so a total equal to the budget is inside it.
`privacy_ledger` (migration 11) is the same rows as a view for SQL readers of a snapshot."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import duckdb

ACCOUNTING = "basic sequential composition: the epsilons of the series' releases add up, and so do the deltas"
LEDGER_FIGURES = ("epsilon", "delta", "series-epsilon", "series-delta")  # as SPENDS_SQL names them


def exact(value: object) -> Decimal:
    """A spend as an exact decimal: a float by its shortest repr (2.5, 1e-06), text as written."""
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(str(value))


def amount(value: Decimal | float) -> str:
    """An amount as a message prints it: at most 15 significant digits, no trailing zeros."""
    return f"{float(value):.15g}"


@dataclass(frozen=True)
class Spend:
    """One release of a series in the ledger: its figures' exact text (None: not recorded)."""

    release_id: str
    sequence: int
    epsilon: str | None
    delta: str | None
    series_epsilon: str | None
    series_delta: str | None
    budget_epsilon: str | None  # the threshold series-epsilon was checked against
    budget_delta: str | None

    @property
    def dp(self) -> bool:
        """A differentially private release (it spent budget); else a syntactic one."""
        return self.epsilon is not None or self.series_epsilon is not None

    def spent(self) -> tuple[Decimal, Decimal]:
        """(epsilon, delta) this release spent; a missing delta is 0."""
        return exact(self.epsilon or "0"), exact(self.delta or "0")


SPENDS_SQL = """
SELECT r.release_id, r.sequence,
       max(m.text_value) FILTER (WHERE m.name = 'epsilon'),
       max(m.text_value) FILTER (WHERE m.name = 'delta'),
       max(m.text_value) FILTER (WHERE m.name = 'series-epsilon'),
       max(m.text_value) FILTER (WHERE m.name = 'series-delta'),
       max(m.threshold) FILTER (WHERE m.name = 'series-epsilon'),
       max(m.threshold) FILTER (WHERE m.name = 'series-delta'),
       r.series
FROM release_rows r
LEFT JOIN release_metrics m
       ON m.release_id = r.release_id AND m.kind = 'privacy'
       AND m.name IN ('epsilon', 'delta', 'series-epsilon', 'series-delta')
{where}
GROUP BY r.release_id, r.sequence, r.series
ORDER BY r.series, r.sequence
"""


def spends(con: duckdb.DuckDBPyConnection, series: str | None = None) -> dict[str, list[Spend]]:
    """Every release of `series` (None: of every series), DP or not, in sequence order, by series."""
    out: dict[str, list[Spend]] = {}
    # no bound parameter without a series: binding one loads pandas (`privpub history` stays light)
    sql = SPENDS_SQL.format(where="" if series is None else "WHERE r.series = ?")
    for row in con.execute(sql, [] if series is None else [series]).fetchall():
        out.setdefault(row[-1], []).append(Spend(*row[:-1]))
    return out


# the ledger's columns (ledger_rows' keys), as history and privpub.ledger show them
LEDGER_COLUMNS = (
    "series", "sequence", "release_id", "epsilon", "delta", "series_epsilon", "series_delta",
    "budget_epsilon", "budget_delta", "remaining_epsilon",
)  # fmt: skip


def ledger_rows(by_series: dict[str, list[Spend]]) -> list[dict[str, object]]:
    """The ledger as rows (history, report, Python API): per DP release its spend, the series'
    total after it as recorded, the budget it was checked against and what remained."""
    rows: list[dict[str, object]] = []
    for series, releases in by_series.items():
        for s in releases:
            if not s.dp:
                continue
            total = _decimal(s.series_epsilon)
            budget = _decimal(s.budget_epsilon)
            rows.append(
                {
                    "series": series,
                    "sequence": s.sequence,
                    "release_id": s.release_id,
                    "epsilon": _ledger_float(s.epsilon),
                    "delta": _ledger_float(s.delta or "0"),
                    "series_epsilon": _ledger_float(s.series_epsilon),
                    "series_delta": _ledger_float(s.series_delta),
                    "budget_epsilon": _ledger_float(s.budget_epsilon),
                    "budget_delta": _ledger_float(s.budget_delta),
                    "remaining_epsilon": None if total is None or budget is None else float(budget - total),
                }
            )
    return rows


def _decimal(text: str | None) -> Decimal | None:
    try:
        return None if text is None else exact(text)
    except InvalidOperation:
        return None


def _ledger_float(text: str | None) -> float | None:
    value = _decimal(text)
    return None if value is None else float(value)


def ledger_problems(by_series: dict[str, list[Spend]]) -> list[str]:
    """verify's check of the ledger against its releases: each DP release's recorded series
    total equals the running sum of the spends up to it, within the budget it was checked
    against, and no series mixes DP and syntactic releases. One line per finding, naming the
    release (never a value of a person)."""
    problems: list[str] = []
    for series, releases in by_series.items():
        if not any(s.dp for s in releases):
            continue
        problems += _series_problems(series, releases)
    return problems


def _series_problems(series: str, releases: Iterable[Spend]) -> list[str]:
    problems: list[str] = []
    total_e, total_d = Decimal(0), Decimal(0)
    for s in releases:
        where = f"ledger of series '{series}', release {s.release_id}"
        if not s.dp:
            problems.append(f"{where}: a syntactic release in a differentially private series")
            continue
        if None in (s.epsilon, s.series_epsilon, s.budget_epsilon):
            problems.append(f"{where}: a ledger figure is missing (epsilon, series-epsilon or its budget)")
            continue
        try:
            e, d = s.spent()
            total_e, total_d = total_e + e, total_d + d
            recorded_e, budget_e = exact(s.series_epsilon), exact(s.budget_epsilon)
            recorded_d = exact(s.series_delta or "0")
            budget_d = None if s.budget_delta is None else exact(s.budget_delta)  # None: epsilon alone
        except InvalidOperation:
            problems.append(f"{where}: a ledger figure is not a number")
            continue
        if recorded_e != total_e or recorded_d != total_d:
            problems.append(
                f"{where}: series-epsilon / series-delta recorded ({amount(recorded_e)}, {amount(recorded_d)}) "
                f"differ from the sum of the releases' spends ({amount(total_e)}, {amount(total_d)})"
            )
        if total_e > budget_e or (budget_d is not None and total_d > budget_d):
            problems.append(f"{where}: the series total is above the budget it was published under")
    return problems

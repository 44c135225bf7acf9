"""`privpub explore SPEC --optimize FIGURE`: the best passing setting of the grid by one utility
figure, and the Pareto front of that figure against the release's risk (issue 44, item 3).

    privpub explore SPEC --optimize gen-iloss --set k=5..50 --set suppress=0,0.01,0.05
    privpub.explore(frame, spec, {"k": range(5, 51)}, optimize="gen-iloss") -> Optimum

The strategy is exhaustive: explore computes every setting of the grid (at most MAX_SETTINGS),
and the choice is made from those rows. No monotonicity is assumed: Mondrian's partition for a
larger k is not a coarsening of a smaller k's, so neither a figure nor a `[risk]` limit's verdict
is monotone in k (a larger k can publish a smaller class than k + 1 does), and skipping settings
on that assumption could miss the optimum. Candidates: the settings that pass every privacy check
and every `[risk]` limit (explore's `passed`). Best: the lowest figure where lower is better
(tasks/report/figures.py says which), the highest where higher is; ties go to the lower risk
figure, then to the setting first in the grid's order. Nothing here reads or writes the state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from privpub.flows.attempts import for_caller
from privpub.schemas.errors import SpecError
from privpub.tasks.evaluate.quality import NOT_APPLICABLE, QUALITY_FIGURES
from privpub.tasks.report.figures import HIGHER, LOWER, figure_words

STRATEGY = "exhaustive"
# the risk a setting is judged by on the front: the worst re-identification risk of the release
# (the explore page's risk axis), else, for a technique without a table of records (Anatomy),
# the worst attribute disclosure
RISK_FIGURES = ("prosecutor-risk-max", "attribute-risk-max")
FRONT_SHOWN = 12  # front points the command's text names (--json and the page hold them all)
_EXAMPLES = (*QUALITY_FIGURES, "discernibility", "query-error-1pct", "uncertainty-penalty-normalized")


def direction(figure: str) -> Literal["lower", "higher"]:
    """Which way a figure is better, or a one-line refusal for a name with no direction."""
    better = figure_words(figure).better if isinstance(figure, str) else None
    if better == LOWER:
        return "lower"
    if better == HIGHER:
        return "higher"
    given = for_caller(f"--optimize {figure}", f"optimize={figure!r}")
    raise SpecError(
        f"{given}: not a utility figure with a better direction; choose one of {', '.join(_EXAMPLES)}, "
        "classification-accuracy (with [evaluate] target), iloss (muco), ..."
    )


def check_applies(figure: str, figures: Mapping[str, Any], technique: str) -> None:
    """A computed setting's figures hold the figure as a number: else the figure does not apply
    to the technique (its note), or the release does not compute it; refused in one line."""
    if not figures:  # a setting refused before its figures (k above the table): nothing to judge
        return
    given = for_caller(f"--optimize {figure}", f"optimize={figure!r}")
    value = figures.get(figure)
    if isinstance(value, str) and value.startswith(NOT_APPLICABLE):
        raise SpecError(f"{given}: {value} (technique {technique}); optimize another figure")
    if value is None or as_float(value) is None and not _is_nan(value):
        raise SpecError(f"{given}: technique {technique}'s releases have no such figure; optimize another figure")


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def as_float(value: Any) -> float | None:
    """A figure as a finite float, or None (text, a note, NaN, infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class FrontPoint:
    """A setting on the Pareto front: no passing setting is at least as good on both the utility
    figure and the risk figure and better on one."""

    setting: dict[str, Any]
    utility: float
    risk: float
    chosen: bool


@dataclass(frozen=True)
class Optimum:
    """What `privpub.explore(..., optimize=FIGURE)` returns.

    figure, better : the figure optimized and which way is better ("lower" / "higher").
    setting : the chosen setting ({"k": 12, "suppress": 0.01}: pass it as ``privpub.publish(...,
        set=optimum.setting, overrides={"output": {"seed": optimum.seed}})``), None when no
        setting passes every check and limit.
    figures : every figure of the chosen setting (as ``release.figures`` names them).
    risk_figure : the risk on the front's other axis (None: the releases carry neither).
    front : the Pareto front of the figure against the risk over the passing settings, by risk
        (lowest first); the chosen setting is on it (``chosen``) whenever it has a risk figure.
    rows : one row per setting, as ``privpub.explore`` returns without ``optimize``.
    seed, strategy, settings, passed : the seed every setting used, "exhaustive", how many
        settings were computed and how many pass.
    """

    figure: str
    better: Literal["lower", "higher"]
    setting: dict[str, Any] | None
    figures: dict[str, Any]
    risk_figure: str | None
    front: list[FrontPoint]
    rows: pd.DataFrame = field(repr=False)
    seed: int
    strategy: str
    settings: int
    passed: int


@dataclass(frozen=True)
class Choice:
    """The choice made from explore's rows (index into them; None: none passes)."""

    figure: str
    better: Literal["lower", "higher"]
    best: int | None
    risk_figure: str | None
    front: list[int]  # row indexes, by risk then utility
    passed: int


def risk_figure_of(rows: Sequence[Any]) -> str | None:
    """The first of RISK_FIGURES every passing row has as a number (else any row has)."""
    passing = [r for r in rows if r.passed] or list(rows)
    for name in RISK_FIGURES:
        if passing and all(as_float(r.figures.get(name)) is not None for r in passing):
            return name
    return None


def choose(rows: Sequence[Any], figure: str) -> Choice:
    """The best passing row by `figure` (ties: lower risk, then grid order) and the Pareto front
    of the passing rows with both figures finite. `rows`: explore's Row objects (setting, passed,
    figures) in grid order."""
    better = direction(figure)
    sign = 1.0 if better == "lower" else -1.0  # a loss: lower is better on both axes
    risk = risk_figure_of(rows)
    scored = []
    for i, r in enumerate(rows):
        u = as_float(r.figures.get(figure))
        if r.passed and u is not None:
            rv = as_float(r.figures.get(risk)) if risk else None
            scored.append((sign * u, math.inf if rv is None else rv, i))
    best = min(scored)[2] if scored else None  # (loss, risk, grid position): the ties rule
    points = [(u, rv, i) for u, rv, i in scored if math.isfinite(rv)]
    kept = [
        (rv, u, i) for u, rv, i in points if not any(a <= u and b <= rv and (a < u or b < rv) for a, b, _ in points)
    ]
    front = [i for _, _, i in sorted(kept)]  # by risk, then the figure, then grid order
    return Choice(figure, better, best, risk, front, sum(bool(r.passed) for r in rows))


def front_points(rows: Sequence[Any], choice: Choice) -> list[FrontPoint]:
    return [
        FrontPoint(
            dict(rows[i].setting),
            float(rows[i].figures[choice.figure]),
            float(rows[i].figures[choice.risk_figure]),
            i == choice.best,
        )
        for i in choice.front
    ]


def setting_text(value: Any) -> str:
    """A setting's value as `--set` reads it back to the same value (settings.parse_value)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def set_words(setting: Mapping[str, Any]) -> list[str]:
    """`--set NAME=VALUE` words of a setting, for publish."""
    out: list[str] = []
    for name, value in setting.items():
        out += ["--set", f"{name}={setting_text(value)}"]
    return out


def choice_lines(rows: Sequence[Any], choice: Choice, publish_command: str | None) -> list[str]:
    """The command's lines after the table: the choice, the front, the publish command."""
    words = f"{choice.figure} ({choice.better} is better)"
    head = f"optimize {words}, {STRATEGY} search: {choice.passed} of {len(rows)} settings pass every check and limit"
    if choice.best is None:
        return [head, "no setting passes: nothing to choose (see why each is refused above)"]
    best = rows[choice.best]
    risk = f", {choice.risk_figure} {_num(best.figures[choice.risk_figure])}" if choice.risk_figure else ""
    lines = [head, f"chosen: {_words(best.setting)}: {choice.figure} {_num(best.figures[choice.figure])}{risk}"]
    if choice.risk_figure:
        pts = "; ".join(
            f"{_words(rows[i].setting)} ({_num(rows[i].figures[choice.figure])}, "
            f"{_num(rows[i].figures[choice.risk_figure])})"
            for i in choice.front[:FRONT_SHOWN]
        )
        more = len(choice.front) - FRONT_SHOWN
        pts += f"; and {more} more (--json, the page)" if more > 0 else ""
        lines.append(f"Pareto front ({choice.figure}, {choice.risk_figure}), lowest risk first: {pts}")
    if publish_command:
        lines.append(f"publish it: {publish_command}")
    return lines


def _words(setting: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={setting_text(v)}" for k, v in setting.items())


def _num(value: Any) -> str:
    return f"{float(value):.6g}"


def choice_json(rows: Sequence[Any], choice: Choice, publish_command: str | None) -> dict[str, Any]:
    """The choice as one JSON object (the last line of `--json`)."""
    best = None if choice.best is None else rows[choice.best]
    return {
        "optimize": choice.figure,
        "better": choice.better,
        "strategy": STRATEGY,
        "settings": len(rows),
        "passed": choice.passed,
        "chosen": None if best is None else best.setting,
        "risk_figure": choice.risk_figure,
        "front": [
            {"setting": p.setting, choice.figure: p.utility, str(choice.risk_figure): p.risk, "chosen": p.chosen}
            for p in front_points(rows, choice)
        ],
        "publish": publish_command if best is not None else None,
    }


def page_marks(rows: Sequence[Any], choice: Choice) -> dict[str, Any]:
    """What the explore page plots for the choice (tasks/report/explore_page.py)."""
    return {
        "figure": choice.figure,
        "better": choice.better,
        "risk": choice.risk_figure,
        "chosen": None if choice.best is None else rows[choice.best].setting,
        "front": [rows[i].setting for i in choice.front],
    }

"""The report's series section: the same figures over every release of the series (this one
last), which releases the series check combined and what its counts mean, and each figure's
trend as a plot (docs/report.md)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.report.figures import as_number, figure_words, fmt, label, plural
from privpub.tasks.report.plots import plot_figure, trend_chart

# the utility figures the report follows over a series (beside every privacy figure)
SERIES_FIGURES = ["query-error-1pct", "uncertainty-penalty-normalized", "suppressed-rows"]


# the last series_figures frame pivoted and its pivot: a report asks for it three times (the
# table, the words, the trends), and pivot_table costs a fresh process tens of ms each time
_LAST_WIDE: list[tuple[pd.DataFrame, pd.DataFrame]] = []


def series_wide(meta: dict[str, Any]) -> pd.DataFrame | None:
    """The series' figures, one row per release (this one last), one column per figure."""
    frame = meta.get("series_figures")
    if frame is None or len(frame) == 0:
        return None
    if _LAST_WIDE and _LAST_WIDE[0][0] is frame:  # the frame held here: its id cannot be reused
        return _LAST_WIDE[0][1].copy()
    wide = frame.pivot_table(index=["sequence", "release_id"], columns="name", values="value", aggfunc="first")
    result: pd.DataFrame = wide.reset_index().sort_values("sequence")
    _LAST_WIDE[:] = [(frame, result)]
    return result.copy()


def series_cell(value: Any) -> str:
    """A series figure as shown: empty where it does not apply (never "nan")."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    text = {"True": "yes", "False": "no"}.get(str(value), str(value))
    return text if "/" in text or as_number(text) is None else fmt(as_number(text))


def series_rows(meta: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The same figures over the series' releases: one row per figure (its label), one column per
    release (this one last), so many figures stay readable at any page width."""
    wide = series_wide(meta)
    if wide is None:
        return [], []
    names = [c for c in wide.columns if c not in ("sequence", "release_id")]
    head = ["figure", *(f"#{r.sequence} {r.release_id}" for r in wide.itertuples())]
    return head, [[_series_label(n), *(series_cell(v) for v in wide[n])] for n in names]


def _series_label(name: str) -> str:
    """A figure by its label, as in the privacy and utility tables."""
    return label(name)


def series_words(meta: dict[str, Any], privacy: list[PrivacyResult]) -> str:
    """Which releases the series check combined and what its returning / below counts mean."""
    wide = series_wide(meta)
    seq = meta.get("sequence")
    composed = next((r for r in privacy if r.model.startswith("series-composition")), None)
    serial = next((r for r in privacy if r.model == "serial-global"), None)
    listed = []
    if wide is not None:
        earlier = wide[wide["sequence"] <= seq] if isinstance(seq, int) else wide
        n = (composed.worst.get("releases") if composed is not None else None) or len(earlier)
        listed = [f"#{r.sequence} ({r.release_id})" for r in earlier.tail(int(n)).itertuples()]
    out = []
    if composed is not None:
        w = composed.worst
        out.append(
            f"The series check ({label(composed.model)}) combined "
            + plural(int(len(listed) or w.get("releases") or 0), "release")
            + (f": {', '.join(listed)}" if listed else "")
            + ". It plays an adversary who holds every release of the series and combines what each says about "
            f"a person. Returning people are those of this release who were also in an earlier release "
            f"({fmt(w.get('returning'))} of {fmt(w.get('people'))}); below counts the people left with fewer "
            f"than {fmt(composed.threshold)} {w.get('measures', 'candidates')} once the releases are combined "
            f"({fmt(w.get('below'))} here)."
        )
    elif serial is not None:
        out.append(
            f"The serial guarantee ({label('serial-global')}) covers every release of the series"
            + (f": {', '.join(listed)}" if listed else "")
            + "; its figure is the highest probability of linking a person to a sensitive value across them."
        )
    elif listed:
        out.append(f"The releases of the series: {', '.join(listed)}.")
    out.append(
        "The table shows each figure for every release of the series (this one last); an empty cell: the "
        "figure does not apply to that release (the series check starts with the second release)."
    )
    return " ".join(out)


# figures of the series not worth a trend plot: consistency checks (yes / no, or a tolerance)
_NOT_TRENDED = {"random output tables are distributions", "QIT and ST agree on group sizes", "serial-statistics"}
MAX_TRENDS = 6


def trend_plots(meta: dict[str, Any], privacy: list[PrivacyResult]) -> list[str]:
    """Each series figure over the series' releases (a privacy figure first), when the series
    has two releases or more."""
    out: list[str] = []
    wide = series_wide(meta)
    if wide is not None and len(wide) >= 2:
        thresholds = {r.model: as_number(r.threshold) for r in privacy}
        names = [c for c in wide.columns if c not in ("sequence", "release_id", *_NOT_TRENDED)]
        # privacy figures with a required value first, then the utility ones, then the informational
        names.sort(key=lambda n: 0 if thresholds.get(n) is not None else 2 if n in thresholds else 1)
        for name in names[:MAX_TRENDS]:
            values = [as_number(v) for v in wide[name]]
            points = [(int(s), v) for s, v in zip(wide["sequence"], values) if v is not None]
            if len(points) < 2:
                continue
            words = figure_words(name) if name not in thresholds else None
            svg = trend_chart(
                f"{label(name)} over the series",
                [s for s, _ in points],
                [v for _, v in points],
                (words.unit if words and words.unit else "value") if words else "figure (as in the privacy table)",
                thresholds.get(name),
            )
            out.append(
                plot_figure(
                    svg,
                    f"{label(name)} in each release of the series (x: the release's number"
                    + ("; dashed: the required value" if thresholds.get(name) is not None else "")
                    + ").",
                )
            )
    return out

"""The page `privpub explore` writes: utility against risk, one point per setting, and the table.

Inline SVG scatter plots drawn directly, as report.py draws its bars (no plotting library). The
page holds the settings, their figures and verdicts only: no person id, no cell value, no row.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from privpub.tasks.report.figures import fmt

_W, _H, _LEFT, _BOTTOM, _TOP, _RIGHT = 480, 300, 64, 44, 26, 90

# (utility figure, risk figure) pairs plotted when the rows have them: lower is better on both
PAIRS = (
    ("query_error_1pct", "prosecutor-risk-max"),
    ("uncertainty_penalty_normalized", "records-at-risk"),
    ("query_error_1pct", "attribute-risk-max"),
)
# the utility and risk figures a reader compares settings by (the command's table shows these)
KEY_FIGURES = (
    "groups",
    "query_error_1pct",
    "uncertainty_penalty_normalized",
    "suppressed_rows",
    "prosecutor-risk-max",
    "records-at-risk",
    "attribute-risk-max",
)
# the figures the page's table shows first, when present (the rest follow in the rows' order)
FIRST = ("k-anonymity", "l-diversity", "series-composition-k", "series-composition-l", *KEY_FIGURES)


def setting_label(setting: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in setting.items())


def _finite_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _ticks(lo: float, hi: float) -> tuple[float, float]:
    """The axis range: the values' range, widened a little (a single value gets room too)."""
    if hi <= lo:
        pad = abs(lo) * 0.1 or 0.1
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.08
    return lo - pad, hi + pad


def svg_scatter(title: str, points: list[tuple[float, float, str, bool]], xlabel: str, ylabel: str) -> str:
    """A scatter plot as an SVG element: (x, y, label, passed) per point, each labelled and with
    a tooltip; a setting that would be refused is a hollow red circle."""
    esc = html.escape
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    x0, x1 = _ticks(min(p[0] for p in points), max(p[0] for p in points))
    y0, y1 = _ticks(min(p[1] for p in points), max(p[1] for p in points))
    axis_y = _TOP + height
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
        f'aria-label="{esc(title)}" font-family="sans-serif" font-size="11">',
        f'<text x="{_W / 2:.0f}" y="16" text-anchor="middle" font-size="13">{esc(title)}</text>',
        f'<line x1="{_LEFT}" y1="{axis_y}" x2="{_LEFT + width}" y2="{axis_y}" stroke="#444"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{axis_y}" stroke="#444"/>',
        f'<text x="{_LEFT}" y="{axis_y + 14}" text-anchor="middle">{esc(fmt(x0, 3))}</text>',
        f'<text x="{_LEFT + width}" y="{axis_y + 14}" text-anchor="middle">{esc(fmt(x1, 3))}</text>',
        f'<text x="{_LEFT - 4}" y="{axis_y}" text-anchor="end">{esc(fmt(y0, 3))}</text>',
        f'<text x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end">{esc(fmt(y1, 3))}</text>',
        f'<text x="{_LEFT + width / 2:.0f}" y="{_H - 6}" text-anchor="middle">{esc(xlabel)}</text>',
        f'<text transform="translate(14 {_TOP + height / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"{esc(ylabel)}</text>",
    ]
    for x, y, name, passed in points:
        cx = _LEFT + width * (x - x0) / (x1 - x0)
        cy = _TOP + height - height * (y - y0) / (y1 - y0)
        style = 'fill="#4472c4"' if passed else 'fill="none" stroke="#c00000" stroke-width="2"'
        verdict = "passes" if passed else "refused"
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" {style}><title>{esc(name)} ({verdict}): '
            f"{esc(xlabel)} {esc(fmt(x))}, {esc(ylabel)} {esc(fmt(y))}</title></circle>"
            f'<text x="{cx + 7:.1f}" y="{cy + 4:.1f}">{esc(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def trade_off_plots(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(caption, SVG) per utility / risk pair that at least one setting has both figures of."""
    out = []
    for utility, risk in PAIRS:
        points = []
        for r in rows:
            x, y = _finite_or_none(r["figures"].get(utility)), _finite_or_none(r["figures"].get(risk))
            if x is not None and y is not None:
                points.append((x, y, setting_label(r["setting"]), bool(r["passed"])))
        if points:
            caption = f"{utility} against {risk} (lower is better on both)"
            out.append((caption, svg_scatter(f"{risk} vs {utility}", points, utility, risk)))
    return out


def figure_names(rows: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(r["figures"]))
    return [n for n in FIRST if n in seen] + [n for n in seen if n not in FIRST]


def once(rows: list[dict[str, Any]], name: str, prefix: str = "") -> list[str]:
    """A text field of the rows (a reason, a note) once when every setting has the same, else per
    setting that has one."""
    texts = [r.get(name) for r in rows]
    if len(rows) > 1 and texts[0] and len(set(texts)) == 1:
        return [f"every setting: {prefix}{texts[0]}"]
    return [f"{setting_label(r['setting'])}: {prefix}{text}" for r, text in zip(rows, texts) if text]


def write_explore_page(path: Path, series: str, seed: int, rows: list[dict[str, Any]]) -> Path:
    """rows: the JSON rows of `privpub explore` (setting, passed, figures, series_composition,
    series_composition_note, reason, seconds)."""
    esc = html.escape
    names = figure_names(rows)
    head = "".join(f"<th>{esc(n)}</th>" for n in ["setting", "result", "series composition", *names, "seconds"])
    body = []
    for r in rows:
        ok = "<td class=ok>PASS</td>" if r["passed"] else "<td class=bad>FAIL</td>"
        composed = {None: "", True: "passes", False: "fails"}[r["series_composition"]]
        composed = "does not apply" if r.get("series_composition_note") else composed
        cells = "".join(f"<td>{esc(fmt(r['figures'].get(n, '')))}</td>" for n in names)
        body.append(
            f"<tr><td>{esc(setting_label(r['setting']))}</td>{ok}<td>{composed}</td>{cells}"
            f"<td>{r['seconds']:.2f}</td></tr>"
        )
    reasons = "".join(f"<li>{esc(line)}</li>" for line in once(rows, "reason"))
    notes = "".join(f"<li>{esc(line)}</li>" for line in once(rows, "series_composition_note"))
    plots = "".join(f"<figure>{svg}<figcaption>{esc(t)}</figcaption></figure>" for t, svg in trade_off_plots(rows))
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>privpub explore: {esc(series)}</title>
<style>body{{font-family:sans-serif;max-width:72em;margin:2em auto;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}
.ok{{color:#080;font-weight:bold}}.bad{{color:#b00;font-weight:bold}}figure{{display:inline-block}}</style>
</head><body>
<h1>Explore: series {esc(series)}</h1>
<p>A dry run: nothing was published. Every setting was computed from the same input with seed {seed};
<code>privpub publish --seed {seed}</code> with a setting publishes the release whose figures are shown.
A filled point passes every check; a hollow red one would be refused.</p>
{plots}
<h2>Settings</h2>
<table><tr>{head}</tr>{"".join(body)}</table>
{f"<h2>Why refused</h2><ul>{reasons}</ul>" if reasons else ""}
{f"<h2>Series composition</h2><ul>{notes}</ul>" if notes else ""}
</body></html>"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path

"""The page `privpub explore` writes: utility against risk, one point per setting, and the table.

Inline SVG scatter plots drawn directly, as report.py draws its bars (no plotting library). The
page holds the settings, their figures and verdicts only: no person id, no cell value, no row.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from typing import Any

from privpub.tasks.report.figures import fmt, label, readable

# the plot's size in its own units; the page scales it to the column it gets (two side by side
# from about 1,150 px, one per row below)
_W, _H, _LEFT, _BOTTOM, _TOP, _RIGHT = 560, 380, 70, 48, 40, 24
_CHAR_PX = 6.5  # width of one character at font-size 11: a point's label box, to keep labels apart

# (utility figure, risk figure) pairs plotted when the rows have them: lower is better on both
PAIRS = (
    ("query-error-1pct", "prosecutor-risk-max"),
    ("uncertainty-penalty-normalized", "records-at-risk"),
    ("query-error-1pct", "attribute-risk-max"),
    ("query-error-1pct", "epsilon"),  # a differentially private release: utility against the budget it spends
)
# the utility and risk figures a reader compares settings by (the command's table shows these)
KEY_FIGURES = (
    "groups",
    "query-error-1pct",
    "uncertainty-penalty-normalized",
    "suppressed-rows",
    "prosecutor-risk-max",
    "records-at-risk",
    "attribute-risk-max",
)
# the figures the page's table shows first, when present (the rest follow in the rows' order)
FIRST = ("k-anonymity", "l-diversity", "series-composition-k", "series-composition-l", *KEY_FIGURES)
# the settings table's figures: the privacy checks the settings are judged by and the key figures;
# every other figure is in the page's second table, one row per figure
MAIN = FIRST


def setting_label(setting: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in setting.items())


def _finite_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def axis_range(lo: float, hi: float) -> tuple[float, float]:
    """The axis range: the values' range widened a little; one value (every setting the same) gets
    a small range around it (0 to 1 around 0); never below 0 when no value is."""
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        x0, x1 = lo - pad, hi + pad
    else:
        pad = (hi - lo) * 0.08
        x0, x1 = lo - pad, hi + pad
    return (max(x0, 0.0) if lo >= 0 else x0), x1


def nice_ticks(lo: float, hi: float, most: int = 5) -> list[float]:
    """Round tick values inside [lo, hi] (a step of 1, 2 or 5 times a power of 10), at most `most`."""
    raw = (hi - lo) / max(most - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = [round((first + i) * step, 12) for i in range(most + 1)]
    return [t for t in ticks if lo - 1e-12 <= t <= hi + 1e-12][:most]


def front(points: list[tuple[float, float]]) -> list[bool]:
    """Which points no other point beats on both figures (lower is better on both): the
    settings worth a label; the others are listed in the table only."""
    out = []
    for i, (x, y) in enumerate(points):
        dominated = any((a <= x and b <= y) and (a < x or b < y) for j, (a, b) in enumerate(points) if j != i)
        out.append(not dominated)
    return out


def _place_labels(spots: list[tuple[float, float, str]], plot: tuple[float, float, float, float]) -> list[str]:
    """SVG text for each (x, y, text): right of its point, else left, above or below; a label
    that would touch one already placed or leave the plot is left out (the tooltip and the
    table still name the point)."""
    left, top, right, bottom = plot
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for x, y, text in spots:
        w, h = len(text) * _CHAR_PX, 12.0
        for dx, dy, anchor in ((8, 4, "start"), (-8, 4, "end"), (0, -9, "middle"), (0, 17, "middle")):
            x0 = x + dx - (w if anchor == "end" else w / 2 if anchor == "middle" else 0)
            box = (x0, y + dy - h + 2, x0 + w, y + dy + 2)
            inside = box[0] >= left - 40 and box[2] <= right + _RIGHT and box[1] >= top - 6 and box[3] <= bottom
            if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                placed.append(box)
                out.append(
                    f'<text class="point-label" x="{x + dx:.1f}" y="{y + dy:.1f}" text-anchor="{anchor}">'
                    f"{html.escape(text)}</text>"
                )
                break
    return out


def _title(title: str) -> str:
    """The plot's title, on two lines (at " against ") when one would not fit its width."""
    first, sep, second = title.partition(" against ")
    if len(title) * 7.2 <= _W - 20 or not sep:
        return f'<text class="title" x="{_W / 2:.0f}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>'
    return (
        f'<text class="title" x="{_W / 2:.0f}" y="13" text-anchor="middle" font-size="13">{html.escape(first)}'
        f'<tspan x="{_W / 2:.0f}" dy="15">against {html.escape(second)}</tspan></text>'
    )


def svg_scatter(
    title: str,
    points: list[tuple[float, float, str, bool]],
    xlabel: str,
    ylabel: str,
    marked: tuple[list[bool], int | None] | None = None,
) -> str:
    """A scatter plot as an SVG element: (x, y, label, passed) per point, each with a tooltip; a
    setting that would be refused is a hollow red circle. Only the settings on the front (none
    better on both figures) are labelled, and only where the label does not touch another.
    `marked`: the front given (--optimize: over the passing settings, its own direction), joined
    by a line, and the chosen point's index, ringed and labelled "chosen"."""
    esc = html.escape
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    x0, x1 = axis_range(min(p[0] for p in points), max(p[0] for p in points))
    y0, y1 = axis_range(min(p[1] for p in points), max(p[1] for p in points))
    axis_y = _TOP + height
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        f'aria-label="{esc(title)}" font-family="sans-serif" font-size="11">',
        _title(title),
        f'<line x1="{_LEFT}" y1="{axis_y}" x2="{_LEFT + width}" y2="{axis_y}" stroke="#444"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{axis_y}" stroke="#444"/>',
        f'<text class="x-label" x="{_LEFT + width / 2:.0f}" y="{_H - 6}" text-anchor="middle">{esc(xlabel)}</text>',
        f'<text class="y-label" transform="translate(14 {_TOP + height / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"{esc(ylabel)}</text>",
    ]
    for t in nice_ticks(x0, x1):
        cx = _LEFT + width * (t - x0) / (x1 - x0)
        parts.append(
            f'<line x1="{cx:.1f}" y1="{axis_y}" x2="{cx:.1f}" y2="{axis_y + 4}" stroke="#444"/>'
            f'<text class="tick" x="{cx:.1f}" y="{axis_y + 16}" text-anchor="middle">{esc(readable(t, 3))}</text>'
        )
    for t in nice_ticks(y0, y1):
        cy = _TOP + height - height * (t - y0) / (y1 - y0)
        parts.append(
            f'<line x1="{_LEFT - 4}" y1="{cy:.1f}" x2="{_LEFT}" y2="{cy:.1f}" stroke="#444"/>'
            f'<text class="tick" x="{_LEFT - 6}" y="{cy + 4:.1f}" text-anchor="end">{esc(readable(t, 3))}</text>'
        )
    on_front, chosen = marked if marked is not None else (front([(x, y) for x, y, _, _ in points]), None)
    spots = []

    def at(x: float, y: float) -> tuple[float, float]:
        return _LEFT + width * (x - x0) / (x1 - x0), _TOP + height - height * (y - y0) / (y1 - y0)

    if marked is not None:  # the front as a line, by risk
        line = sorted(at(x, y) for (x, y, _, _), on in zip(points, on_front) if on)
        if len(line) > 1:
            coords = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in line)
            parts.append(
                f'<polyline class="front" points="{coords}" fill="none" stroke="#4472c4" stroke-dasharray="4 3"/>'
            )
    for i, ((x, y, name, passed), labelled) in enumerate(zip(points, on_front)):
        cx, cy = at(x, y)
        if i == chosen:
            parts.append(
                f'<circle class="chosen" cx="{cx:.1f}" cy="{cy:.1f}" r="10" fill="none" stroke="#e07b00" stroke-width="3"/>'
            )
            name = f"chosen: {name}"
        style = 'fill="#4472c4"' if passed else 'fill="none" stroke="#c00000" stroke-width="2"'
        verdict = "passes" if passed else "refused"
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" {style}><title>{esc(name)} ({verdict}): '
            f"{esc(xlabel)} {esc(fmt(x))}, {esc(ylabel)} {esc(fmt(y))}</title></circle>"
        )
        if labelled:
            spots.append((cx, cy, name))
    parts += _place_labels(spots, (_LEFT, _TOP, _LEFT + width, axis_y))
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
            caption = (
                f"{label(utility).capitalize()} against {label(risk)}: lower is better on both, so the best "
                "settings lie towards the bottom left. Labelled: the settings no other setting beats on both "
                "(the table lists every setting)."
            )
            out.append(
                (caption, svg_scatter(f"{label(risk)} against {label(utility)}", points, label(utility), label(risk)))
            )
    return out


def optimum_plot(rows: list[dict[str, Any]], marks: dict[str, Any]) -> list[tuple[str, str]]:
    """(caption, SVG) of --optimize: the figure against the risk, the Pareto front over the
    passing settings joined, the chosen setting ringed; none when no setting has both figures."""
    figure, risk = marks["figure"], marks["risk"]
    if risk is None:
        return []
    points: list[tuple[float, float, str, bool]] = []
    on_front: list[bool] = []
    chosen: int | None = None
    for r in rows:
        x, y = _finite_or_none(r["figures"].get(figure)), _finite_or_none(r["figures"].get(risk))
        if x is None or y is None:
            continue
        if r["setting"] == marks["chosen"]:
            chosen = len(points)
        on_front.append(bool(r["passed"]) and r["setting"] in marks["front"])
        points.append((x, y, setting_label(r["setting"]), bool(r["passed"])))
    if not points:
        return []
    caption = (
        f"The setting chosen by {label(figure)} ({marks['better']} is better), ringed, among the settings that pass "
        f"every check and limit; the dashed line joins the Pareto front (no passing setting is better on both "
        f"{label(figure)} and {label(risk)}, lower risk being better)."
    )
    title = f"{label(risk)} against {label(figure)} (optimized)"
    return [(caption, svg_scatter(title, points, label(figure), label(risk), (on_front, chosen)))]


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


def _cell(value: Any) -> str:
    """A figure in the page's tables: rounded for reading (the JSON rows keep it exact)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return readable(value)
    return fmt(value)


def plain_names(text: str, names: list[str]) -> str:
    """A message with the figures' stored names replaced by their labels (a refusal's reason)."""
    for name in sorted(names, key=len, reverse=True):
        if label(name) != name:
            text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", label(name), text)
    return text


_STYLE = """body{font-family:sans-serif;max-width:80em;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;max-width:100%}td,th{border:1px solid #ccc;padding:4px 6px;text-align:left;
vertical-align:top;overflow-wrap:break-word}th{font-weight:600;font-size:92%}td.setting,td.ok,td.bad{white-space:nowrap}
.ok{color:#080;font-weight:bold}.bad{color:#b00;font-weight:bold}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots figure{flex:1 1 520px;max-width:700px;margin:0}
.plots svg{width:100%;height:auto}figcaption{font-size:90%;color:#444}
.wide{overflow-x:auto;max-width:100%}"""


def write_explore_page(
    path: Path, series: str, seed: int, rows: list[dict[str, Any]], marks: dict[str, Any] | None = None
) -> Path:
    """rows: the JSON rows of `privpub explore` (setting, passed, figures, series_composition,
    series_composition_note, reason, seconds). The page fits a 1,300 px window: the plots wrap,
    the settings table holds the key figures, every other figure is a row of a second table.
    marks: --optimize's choice (figure, better, risk, chosen setting, front settings), plotted first."""
    esc = html.escape
    names = figure_names(rows)
    main = [n for n in names if n in MAIN]
    rest = [n for n in names if n not in MAIN]
    head = (
        "".join(f"<th>{esc(n)}</th>" for n in ["setting", "result", "series check"])
        + "".join(f"<th title='{esc(n)}'>{esc(label(n))}</th>" for n in main)
        + "<th>seconds</th>"
    )
    body = []
    for r in rows:
        ok = "<td class=ok>PASS</td>" if r["passed"] else "<td class=bad>FAIL</td>"
        composed = {None: "", True: "passes", False: "fails"}[r["series_composition"]]
        composed = "does not apply" if r.get("series_composition_note") else composed
        cells = "".join(f"<td>{esc(_cell(r['figures'].get(n, '')))}</td>" for n in main)
        body.append(
            f"<tr><td class=setting>{esc(setting_label(r['setting']))}</td>{ok}<td>{composed}</td>{cells}"
            f"<td>{esc(readable(r['seconds'], 3))}</td></tr>"
        )
    others = "".join(
        f"<tr><td title='{esc(n)}'>{esc(label(n))}</td>"
        + "".join(f"<td>{esc(_cell(r['figures'].get(n, '')))}</td>" for r in rows)
        + "</tr>"
        for n in rest
    )
    settings_head = "".join(f"<th>{esc(setting_label(r['setting']))}</th>" for r in rows)
    reasons = "".join(f"<li>{esc(plain_names(line, names))}</li>" for line in once(rows, "reason"))
    notes = "".join(f"<li>{esc(plain_names(line, names))}</li>" for line in once(rows, "series_composition_note"))
    shown = (optimum_plot(rows, marks) if marks else []) + trade_off_plots(rows)
    plots = "".join(f"<figure>{svg}<figcaption>{esc(t)}</figcaption></figure>" for t, svg in shown)
    chosen = _chosen_words(marks, seed) if marks else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>privpub explore: {esc(series)}</title>
<style>{_STYLE}</style>
</head><body>
<h1>Explore: series {esc(series)}</h1>
<p>A dry run: nothing was published. Every setting was computed from the same input with seed {seed};
<code>privpub publish SPEC --set NAME=VALUE --seed {seed}</code> (the setting's values) publishes the release whose figures are shown.
A filled point passes every check; a hollow red one would be refused.</p>
{chosen}
{f'<div class="plots">{plots}</div>' if plots else ""}
<h2>Settings</h2>
<div class="wide"><table class="settings"><tr>{head}</tr>{"".join(body)}</table></div>
{f'<h2>Every other figure</h2><div class="wide"><table class="figures"><tr><th>figure</th>{settings_head}</tr>{others}</table></div>' if others else ""}
{f"<h2>Why refused</h2><ul>{reasons}</ul>" if reasons else ""}
{f"<h2>Series composition</h2><ul>{notes}</ul>" if notes else ""}
</body></html>"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path


def _chosen_words(marks: dict[str, Any], seed: int) -> str:
    """The paragraph naming --optimize's choice."""
    if marks["chosen"] is None:
        return f"<p class=optimum>Optimized by {html.escape(label(marks['figure']))}: no setting passes every check and limit.</p>"
    sets = " ".join(f"--set {k}={v}" for k, v in marks["chosen"].items())
    return (
        f"<p class=optimum>Optimized by {html.escape(label(marks['figure']))} ({marks['better']} is better, "
        f"every setting computed): <b>{html.escape(setting_label(marks['chosen']))}</b>; "
        f"<code>privpub publish SPEC {html.escape(sets)} --seed {seed}</code> publishes it.</p>"
    )

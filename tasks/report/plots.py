"""The report's plots as small inline SVG written directly (no plotting library is imported, so
a plot costs microseconds at any table size): bars, a trend line, paired before / after bars.

Every plot is `<figure class="plot"><svg>...</svg><figcaption>...</figcaption></figure>` with
`<text class="title">`, `<text class="x-label">` and `<text class="y-label">` in the SVG; tick
labels are thinned out so that they never overlap (their width estimated from their length)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

from privpub.tasks.report.figures import fmt

_W, _H, _LEFT, _BOTTOM, _TOP, _RIGHT = 460, 250, 60, 46, 30, 14
CHAR_PX = 6.5  # width of one character at font-size 11 (sans-serif), generous: ticks never touch
MAX_UNIT_BINS = 30  # up to this many different sizes, one bar per size
TARGET_BINS = 20  # otherwise about this many bars of a round integer width
_esc = html.escape


def integer_bins(sizes: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Histogram bins for group sizes: integer edges, every size in exactly one bin
    [edge_i, edge_i+1), one bin per size when there are few, else a round width (1, 2, 5, 10,
    20, ...); labels "10" (width 1) or "10–14" (both ends included)."""
    values = np.asarray(sizes, dtype=np.int64)
    if not len(values):
        return np.zeros(1, np.int64), np.zeros(0, np.int64), []
    lo, hi = int(values.min()), int(values.max())
    width = 1
    if hi - lo + 1 > MAX_UNIT_BINS:
        wanted = math.ceil((hi - lo + 1) / TARGET_BINS)
        width = min(step * 10**p for p in range(len(str(wanted)) + 1) for step in (1, 2, 5) if step * 10**p >= wanted)
    start = (lo // width) * width
    n = (hi - start) // width + 1
    edges = start + width * np.arange(n + 1, dtype=np.int64)
    counts = np.bincount((values - start) // width, minlength=n)
    labels = [str(e) if width == 1 else f"{e}–{e + width - 1}" for e in edges[:-1].tolist()]
    return edges, counts, labels


LOG_STEPS = (1, 1.5, 2, 3, 5, 7)  # the edges of group-size bins on a log axis, per power of 10


def group_size_bins(sizes: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str], bool]:
    """Bins for the group-size histogram: one per size when there are few (integer_bins), else on
    a log axis (edges 10, 15, 20, 30, 50, 70, 100, ...) so that the many small groups and the few
    large ones of the tail each get bars; the last element says which."""
    values = np.asarray(sizes, dtype=np.int64)
    if not len(values) or int(values.max()) - int(values.min()) + 1 <= MAX_UNIT_BINS:
        return (*integer_bins(values), False)
    lo, hi = int(values.min()), int(values.max())
    steps = sorted({int(round(s * 10**p)) for p in range(len(str(hi)) + 1) for s in LOG_STEPS})
    edges = np.array([lo, *(e for e in steps if lo < e <= hi), hi + 1], dtype=np.int64)
    counts = np.histogram(values, bins=edges)[0] if len(edges) > 2 else np.array([len(values)])
    # np.histogram closes the last bin; every edge is an integer and the last is hi + 1, so each
    # bin is [edge_i, edge_i+1) of whole sizes
    labels = [str(a) if b - a == 1 else f"{a}–{b - 1}" for a, b in zip(edges[:-1].tolist(), edges[1:].tolist())]
    return edges, counts, labels, True


def tick_step(labels: Sequence[str], space: float) -> int:
    """Show every n-th tick label so that labels `space` pixels apart never overlap."""
    widest = max((len(s) for s in labels), default=1) * CHAR_PX + 8
    return max(1, math.ceil(widest / max(space, 1e-9)))


def _svg_head(title: str, xlabel: str, ylabel: str, left: int = _LEFT) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
        f'role="img" aria-label="{_esc(title)}" font-family="sans-serif" font-size="11">',
        f'<text class="title" x="{_W / 2:.0f}" y="16" text-anchor="middle" font-size="13">{_esc(title)}</text>',
        f'<text class="x-label" x="{left + (_W - left - _RIGHT) / 2:.0f}" y="{_H - 6}" text-anchor="middle">'
        f"{_esc(xlabel)}</text>",
        f'<text class="y-label" transform="translate(14 {_TOP + (_H - _TOP - _BOTTOM) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{_esc(ylabel)}</text>',
    ]


def _axes(left: int, top_label: str) -> list[str]:
    width, height = _W - left - _RIGHT, _H - _TOP - _BOTTOM
    axis_y = _TOP + height
    return [
        f'<line x1="{left}" y1="{axis_y}" x2="{left + width}" y2="{axis_y}" stroke="#444"/>',
        f'<line x1="{left}" y1="{_TOP}" x2="{left}" y2="{axis_y}" stroke="#444"/>',
        f'<text x="{left - 4}" y="{_TOP + 4}" text-anchor="end">{_esc(top_label)}</text>',
        f'<text x="{left - 4}" y="{axis_y}" text-anchor="end">0</text>',
    ]


def bar_chart(
    title: str, labels: list[str], values: list[float], xlabel: str, ylabel: str, color: str, log: bool = False
) -> str:
    """One bar per value, each with a tooltip (label: value); `log`: heights on a log scale of
    1 + value, so that a bar of 1 stays visible beside one of thousands."""
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    top = max(max(values, default=0.0), 0.0) or 1.0
    scale = (lambda v: math.log1p(max(v, 0.0)) / math.log1p(top)) if log else (lambda v: max(v, 0.0) / top)
    step = width / max(len(values), 1)
    every = tick_step(labels, step)
    parts = _svg_head(title, xlabel, ylabel)
    for i, (label, value) in enumerate(zip(labels, values)):
        h = height * scale(value)
        x = _LEFT + i * step
        parts.append(
            f'<rect x="{x + 0.5:.1f}" y="{_TOP + height - h:.1f}" width="{max(step - 1, 1):.1f}" '
            f'height="{h:.1f}" fill="{color}"><title>{_esc(label)}: {_esc(fmt(value))}</title></rect>'
        )
        if i % every == 0:
            parts.append(
                f'<text class="tick" x="{x + step / 2:.1f}" y="{_TOP + height + 14}" text-anchor="middle">'
                f"{_esc(label)}</text>"
            )
    return "".join(parts + _axes(_LEFT, fmt(top)) + ["</svg>"])


def trend_chart(
    title: str, sequences: list[int], values: list[float], ylabel: str, threshold: float | None = None
) -> str:
    """A figure over the series' releases (x: release #), with its required value dashed."""
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    top = max([*values, threshold or 0.0, 0.0]) or 1.0
    step = width / max(len(values), 1)
    labels = [f"#{s}" for s in sequences]
    every = tick_step(labels, step)
    parts = _svg_head(title, "release in the series (#)", ylabel)
    points = [(_LEFT + (i + 0.5) * step, _TOP + height - height * max(v, 0.0) / top) for i, v in enumerate(values)]
    parts.append(
        '<polyline fill="none" stroke="#4472c4" stroke-width="2" points="'
        + " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        + '"/>'
    )
    for i, ((x, y), label, value) in enumerate(zip(points, labels, values)):
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#4472c4"><title>{_esc(label)}: {_esc(fmt(value))}</title>'
            "</circle>"
        )
        if i % every == 0:
            parts.append(
                f'<text class="tick" x="{x:.1f}" y="{_TOP + height + 14}" text-anchor="middle">{_esc(label)}</text>'
            )
    if threshold is not None:
        y = _TOP + height - height * max(threshold, 0.0) / top
        parts.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + width}" y2="{y:.1f}" stroke="#b00" stroke-dasharray="5 4"/>'
            f'<text x="{_LEFT + width}" y="{y - 4:.1f}" text-anchor="end" fill="#b00">required {_esc(fmt(threshold))}'
            "</text>"
        )
    return "".join(parts + _axes(_LEFT, fmt(top)) + ["</svg>"])


def before_after_chart(title: str, names: list[str], before: list[float], after: list[float]) -> str:
    """Paired horizontal bars on a 0-1 axis, one pair per figure: the input's (grey) above the
    release's (blue)."""
    left = min(int(max((len(n) for n in names), default=8) * CHAR_PX) + 12, 220)
    width, height = _W - left - _RIGHT, _H - _TOP - _BOTTOM
    row = height / max(len(names), 1)
    bar = max(min(row / 2 - 2, 14), 2)
    parts = _svg_head(title, "share or probability (0-1)", "risk figure", left)
    for i, (name, b, a) in enumerate(zip(names, before, after)):
        y = _TOP + i * row + (row - 2 * bar) / 2
        for j, (value, color, who) in enumerate(((b, "#a5a5a5", "input"), (a, "#4472c4", "release"))):
            w = width * min(max(value, 0.0), 1.0)
            parts.append(
                f'<rect x="{left}" y="{y + j * bar:.1f}" width="{w:.1f}" height="{bar:.1f}" fill="{color}">'
                f"<title>{_esc(name)}, {who}: {_esc(fmt(value))}</title></rect>"
            )
        parts.append(f'<text class="tick" x="{left - 4}" y="{y + bar + 4:.1f}" text-anchor="end">{_esc(name)}</text>')
    axis_y = _TOP + height
    parts += [
        f'<line x1="{left}" y1="{axis_y}" x2="{left + width}" y2="{axis_y}" stroke="#444"/>',
        f'<line x1="{left}" y1="{_TOP}" x2="{left}" y2="{axis_y}" stroke="#444"/>',
        f'<text x="{left}" y="{axis_y + 14}" text-anchor="middle">0</text>',
        f'<text x="{left + width}" y="{axis_y + 14}" text-anchor="end">1</text>',
        f'<rect x="{left + width - 120}" y="{_TOP - 12}" width="10" height="8" fill="#a5a5a5"/>'
        f'<text x="{left + width - 106}" y="{_TOP - 4}">input</text>'
        f'<rect x="{left + width - 66}" y="{_TOP - 12}" width="10" height="8" fill="#4472c4"/>'
        f'<text x="{left + width - 52}" y="{_TOP - 4}">release</text>',
        "</svg>",
    ]
    return "".join(parts)


def plot_figure(svg: str, caption: str) -> str:
    """A plot as the report places it: the SVG and its one-line caption."""
    return f'<figure class="plot">{svg}<figcaption>{_esc(caption)}</figcaption></figure>'

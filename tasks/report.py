"""Step 7: a report a person can read: an HTML page with the privacy checks, the utility figures
and two plots (group sizes, query error by selectivity), plus a markdown summary for Prefect.

The plots are small inline SVG bar charts written directly: no plotting library is imported, so
a report costs milliseconds at any table size (it reads only the group sizes and a few figures).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np

from privpub.schemas.spec import ROW_ID
from privpub.tasks.figures import describe, poor_figures, worst_rows

_W, _H, _LEFT, _BOTTOM, _TOP, _RIGHT = 440, 230, 56, 44, 26, 12


def _svg_bars(
    title: str, labels: list[str], values: list[float], xlabel: str, ylabel: str, color: str, tick_every: int = 1
) -> str:
    """A bar chart as an SVG element: one bar per value, each with a tooltip (label: value)."""
    esc = html.escape
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    top = max(max(values, default=0.0), 0.0) or 1.0
    step = width / max(len(values), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
        f'aria-label="{esc(title)}" font-family="sans-serif" font-size="11">',
        f'<text x="{_W / 2:.0f}" y="16" text-anchor="middle" font-size="13">{esc(title)}</text>',
    ]
    for i, (label, value) in enumerate(zip(labels, values)):
        h = height * max(value, 0.0) / top
        x = _LEFT + i * step
        parts.append(
            f'<rect x="{x + 0.5:.1f}" y="{_TOP + height - h:.1f}" width="{max(step - 1, 1):.1f}" '
            f'height="{h:.1f}" fill="{color}"><title>{esc(label)}: {esc(fmt(value))}</title></rect>'
        )
        if i % tick_every == 0 or i == len(values) - 1:
            parts.append(
                f'<text x="{x + step / 2:.1f}" y="{_TOP + height + 14}" text-anchor="middle">{esc(label)}</text>'
            )
    axis_y = _TOP + height
    parts += [
        f'<line x1="{_LEFT}" y1="{axis_y}" x2="{_LEFT + width}" y2="{axis_y}" stroke="#444"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{axis_y}" stroke="#444"/>',
        f'<text x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end">{esc(fmt(top))}</text>',
        f'<text x="{_LEFT - 4}" y="{axis_y}" text-anchor="end">0</text>',
        f'<text x="{_LEFT + width / 2:.0f}" y="{_H - 6}" text-anchor="middle">{esc(xlabel)}</text>',
        f'<text transform="translate(14 {_TOP + height / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"{esc(ylabel)}</text>",
        "</svg>",
    ]
    return "".join(parts)


def _plots(sizes: np.ndarray | None, utility: dict[str, Any]) -> list[tuple[str, str]]:
    """(caption, inline SVG) per plot: the group-size histogram and the query error by band."""
    out = []
    if sizes is not None and len(sizes):
        sizes = np.asarray(sizes)
        bins = min(40, max(5, len(np.unique(sizes))))
        counts, edges = np.histogram(sizes, bins=bins)
        labels = [f"{edges[i]:.4g}" for i in range(len(counts))]
        out.append(
            (
                "Group sizes",
                _svg_bars(
                    "Group sizes",
                    labels,
                    counts.astype(float).tolist(),
                    "QI-group size (rows, bin start)",
                    "groups",
                    "#4472c4",
                    tick_every=max(1, len(counts) // 6),
                ),
            )
        )
    errs = dict(sorted(_query_errors(utility).items(), key=lambda kv: _pct(kv[0])))
    if errs:
        labels = [k.removeprefix("query_error_").replace("pct", "%") for k in errs]
        out.append(
            (
                "Query error",
                _svg_bars(
                    "Count-query error",
                    labels,
                    [float(v) for v in errs.values()],
                    "query selectivity",
                    "mean relative error",
                    "#ed7d31",
                ),
            )
        )
    return out


def fmt(value: Any, digits: int = 4) -> str:
    """A figure with `digits` significant digits (3.75e-05, not 0.0000); integers as they are."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.{digits}g}"
    return str(value)


def _pct(key: str) -> int:
    return int(key.removeprefix("query_error_").removesuffix("pct"))


def _query_errors(utility: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in utility.items() if k.startswith("query_error_")}


RISK_LABELS = {
    "prosecutor-risk-max": "highest prosecutor risk (1 / smallest class)",
    "prosecutor-risk-avg": "mean prosecutor risk over records",
    "records-at-risk": "share of records above the risk threshold",
    "sample-uniques": "share of records unique on their QIs",
    "attribute-risk-max": "highest share of one sensitive value in a class",
    "journalist-risk-max": "highest journalist risk (expected 1 / size of the class in the population)",
    "marketer-risk": "expected share of records a marketer links to the right person",
    "population-uniques": "estimated share of the population unique on its QIs",
}


# the population-uniqueness models (tasks/population_models.py, which this module does not
# import: it loads scipy) by the names their figures carry, `population-uniques-<model>`
MODEL_NAMES = {"zayatz": "Zayatz (1991)", "pitman": "Pitman (Hoshino 2001)"}


def population_note(risk: dict[str, Any]) -> str:
    """Which population-uniqueness model gave the figures and at which sampling fraction, or that
    the population figures need a population ("" without any risk figure)."""
    if not risk:
        return ""
    parts = []
    for prefix, what in (("input-", "input"), ("", "release")):
        models = [MODEL_NAMES[m] for m in MODEL_NAMES if f"{prefix}population-uniques-{m}" in risk]
        if models:
            parts.append(f"{what}: {models[0]} model, sampling fraction {fmt(risk[f'{prefix}sample-fraction'], 4)}")
    if not parts:
        return (
            "journalist-risk-max, marketer-risk, population-uniques: not computed "
            "([risk] population or sample_fraction gives the population they need)"
        )
    return "population uniqueness (Dankar et al.'s rule): " + "; ".join(parts)


def risk_rows(risk: dict[str, Any], note: str | None = None) -> list[tuple[str, str, str, str]]:
    """(figure, input, release, what it measures) for every risk figure, before -> after; a
    release figure the technique does not compute reads "does not apply" when the technique
    says why (`note`: its QIs are published unchanged or perturbed), else "not computed"."""
    missing = "does not apply (see below)" if note else "not computed"
    rows = []
    for name, label in RISK_LABELS.items():
        before, after = risk.get(f"input-{name}"), risk.get(name)
        if before is None and after is None:
            continue
        rows.append(
            (
                name,
                "n/a" if before is None else fmt(before, 4),
                missing if after is None else fmt(after, 4),
                label,
            )
        )
    return rows


def risk_denominator(meta: dict[str, Any], utility: dict[str, Any]) -> str | None:
    """When rows were suppressed, whose risk the release figures are: the published records only
    (docs/risk.md). None when every input row is published or no release figure is computed."""
    suppressed = int(utility.get("suppressed_rows") or 0)
    rows_in = meta.get("rows_in")
    computed = any(name in (meta.get("risk") or {}) for name in RISK_LABELS)
    if not suppressed or rows_in is None or not computed:
        return None
    return (
        f"release figures over the {int(rows_in) - suppressed:,} published records; "
        f"{suppressed:,} suppressed records are not published and not in their denominator"
    )


def _riskiest(where: dict | None, esc) -> str:
    """Where the highest prosecutor risk is in the published table, by row position, and the
    riskiest classes by their published cells."""
    if not where:
        return ""
    rows = ", ".join(str(r) for r in where["rows"])
    more = f" (the first {len(where['rows'])} of {where['records']})" if where["records"] > len(where["rows"]) else ""
    html = (
        f"<p>Highest risk: {esc(str(where['records']))} published records in classes of "
        f"{esc(str(where['class_size']))}; their row positions (from 0){esc(more)}: {esc(rows)}</p>"
    )
    classes = where.get("classes") or []
    if classes:
        columns = list(classes[0]["cells"])
        shares = "attribute_risk" in classes[0]
        head = "".join(f"<th>{esc(c)}</th>" for c in columns) + "<th>records</th>"
        head += "<th>share of its most frequent sensitive value</th>" if shares else ""
        body = ""
        for c in classes:
            cells = "".join(f"<td>{esc(_cell(c['cells'][name]))}</td>" for name in columns)
            share = f"<td>{fmt(c['attribute_risk'], 3)}</td>" if shares else ""
            body += f"<tr>{cells}<td>{c['size']}</td>{share}</tr>"
        html += (
            "<p>The riskiest classes (smallest first, then the most predictable sensitive value), "
            f"as published:</p><table><tr>{head}</tr>{body}</table>"
        )
    return html


def _cell(value: Any) -> str:
    """A published cell as the table shows it: a list as {a, b}, a number as it is."""
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(map(str, value)) + "}"
    return fmt(value)


def input_notes(meta: dict[str, Any], utility: dict[str, Any]) -> list[str]:
    """What the release did to its input before any work: rows dropped for an empty cell
    (`[dataset] missing = "drop"`), the row number taken as the person id (`person_id = "@row"`)."""
    notes = []
    if "dropped_rows" in utility:
        notes.append(
            f"dropped rows: {int(utility['dropped_rows']):,} (an empty cell in the person id, a quasi-identifier "
            'or the sensitive column; [dataset] missing = "drop"); not published and not in the figures'
        )
    person_id = meta.get("person_id") or ((meta.get("spec") or {}).get("dataset") or {}).get("person_id")
    if person_id == ROW_ID:
        notes.append(f"person id: row number ({ROW_ID}): every row is taken as a different person")
    return notes


def summary_lines(meta: dict[str, Any], privacy: list, utility: dict[str, Any]) -> list[str]:
    lines = [
        f"release {meta['release_id']} (series {meta['series']}, #{meta['sequence']}, "
        f"technique {meta['technique']}, seed {meta['seed']})",
        f"rows in: {meta['rows_in']}",
    ]
    if "groups" in utility:
        lines.append(
            f"groups: {utility['groups']} (avg size {utility['avg_group_size']:.2f}, max {utility['max_group_size']})"
        )
    for r in privacy:
        need = f" (required {r.threshold})" if r.threshold is not None else ""
        lines.append(f"{r.model}: {r.value}{need} {'PASS' if r.passed else 'FAIL'}")
    errs = [
        f"{k.removeprefix('query_error_').replace('pct', '%')}: {fmt(v, 3)}"
        for k, v in sorted(_query_errors(utility).items(), key=lambda kv: _pct(kv[0]))
    ]
    if errs:
        lines.append("mean relative query error by selectivity: " + ", ".join(errs))
    if "uncertainty_penalty_normalized" in utility:
        lines.append(f"uncertainty penalty (per tuple per QI): {fmt(utility['uncertainty_penalty_normalized'])}")
    if utility.get("suppressed_rows"):
        lines.append(f"suppressed rows: {utility['suppressed_rows']}")
    lines += input_notes(meta, utility)
    rows = risk_rows(meta.get("risk") or {}, meta.get("risk_note"))
    if rows:
        shown = ", ".join(f"{n} {a} -> {b.removesuffix(' (see below)')}" for n, a, b, _ in rows)
        lines.append("re-identification risk, input -> release: " + shown)
        lines.append(population_note(meta.get("risk") or {}))
        denominator = risk_denominator(meta, utility)
        if denominator:
            lines.append(denominator)
    return lines


_PROVENANCE = (
    ("actor", "started by"),
    ("trigger", "trigger"),
    ("deployment", "deployment"),
    ("scheduled_for", "scheduled slot"),
    ("flow_run_id", "Prefect flow run"),
    ("spec_path", "spec"),
    ("input_fingerprint", "input sha256"),
)


def _provenance(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """Who and what made the release, and the hashes that tie the report to its files."""
    rows = [(label, str(meta[key])) for key, label in _PROVENANCE if meta.get(key)]
    rows += [(f"sha256 of {name}", digest) for name, digest in sorted((meta.get("hashes") or {}).items())]
    return rows


def _series_rows(meta: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The same figures over the series' releases (this one last): header and rows."""
    frame = meta.get("series_figures")
    if frame is None or len(frame) == 0:
        return [], []
    wide = frame.pivot_table(
        index=["sequence", "release_id"], columns="name", values="value", aggfunc="first"
    ).reset_index()
    names = [c for c in wide.columns if c not in ("sequence", "release_id")]
    rows = [[str(r["sequence"]), str(r["release_id"]), *[_short(r[n]) for n in names]] for _, r in wide.iterrows()]
    return ["#", "release", *names], rows


def _short(value: Any) -> str:
    try:
        return fmt(float(value)) if "/" not in str(value) else str(value)
    except (TypeError, ValueError):
        return "" if value is None else str(value)


def markdown_summary(meta: dict[str, Any], privacy: list, utility: dict[str, Any]) -> str:
    rows = "\n".join(f"| {r.model} | {r.value} | {r.threshold} | {'pass' if r.passed else 'FAIL'} |" for r in privacy)
    util = "\n".join(f"| {k} | {fmt(v)} | {describe(k)[0]} ({describe(k)[1]}) |" for k, v in utility.items())
    warnings = "".join(f"\n> **Warning:** {w}\n" for w in poor_figures(utility, meta.get("rows_in")))
    prov = "\n".join(f"| {k} | {v} |" for k, v in _provenance(meta))
    head, series = _series_rows(meta)
    series_md = (
        (
            "\n## In its series\n\n| "
            + " | ".join(head)
            + " |\n|"
            + "---|" * len(head)
            + "\n"
            + "\n".join("| " + " | ".join(r) + " |" for r in series)
            + "\n"
        )
        if series
        else ""
    )
    return (
        f"# Release {meta['release_id']}\n\n"
        + "\n".join(f"- {l}" for l in summary_lines(meta, privacy, utility))
        + f"\n{warnings}\n## Privacy\n\n| model | reached | required | result |\n|---|---|---|---|\n{rows}\n"
        + f"\n## Utility\n\n| figure | value | what it measures |\n|---|---|---|\n{util}\n"
        + series_md
        + (f"\n## Provenance\n\n| | |\n|---|---|\n{prov}\n" if prov else "")
    )


def write_html_report(
    path: Path, meta: dict[str, Any], privacy: list, utility: dict[str, Any], sizes: np.ndarray | None
) -> Path:
    esc = html.escape

    def worst(r) -> str:
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v[:300])}</td></tr>" for k, v in worst_rows(r.worst))
        return f"<table class=worst>{rows}</table>" if rows else ""

    priv_rows = "".join(
        f"<tr><td>{esc(r.model)}</td><td>{esc(str(r.value))}</td><td>{esc(str(r.threshold))}</td>"
        f"<td class={'ok' if r.passed else 'bad'}>{'&#10004; pass' if r.passed else '&#10008; FAIL'}</td>"
        f"<td>{worst(r)}</td></tr>"
        for r in privacy
    )
    util_rows = "".join(
        f"<tr><td>{esc(k)}</td><td>{esc(fmt(v))}</td><td>{esc(describe(k)[0])}</td><td>{esc(describe(k)[1])}</td></tr>"
        for k, v in utility.items()
    )
    warnings = "".join(f"<p class=warn>Warning: {esc(w)}</p>" for w in poor_figures(utility, meta.get("rows_in")))
    # a failed figure in a published release: one the spec chose to tolerate ([series] composition = "warn")
    warnings += "".join(
        (
            f"<p class=warn>Warning: {esc(r.model)} reached {esc(str(r.value))}, required {esc(str(r.threshold))}: "
            f"{esc(str(r.worst.get('below', '')))} people fall below it when every release of the series is "
            'combined; published because the spec says composition = "warn"</p>'
        )
        for r in privacy
        if not r.passed
    )
    prov = "".join(f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>" for k, v in _provenance(meta))
    head, series = _series_rows(meta)
    series_html = (
        (
            "<h2>In its series</h2><table class=series><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in head)
            + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in series)
            + "</table>"
        )
        if series
        else ""
    )
    note = meta.get("risk_note")
    risk = risk_rows(meta.get("risk") or {}, note)
    risk_html = (
        "<h2>Re-identification risk (before: the input's QIs as they are; after: the published table)</h2>"
        "<table><tr><th>figure</th><th>input</th><th>release</th><th>what it measures</th></tr>"
        + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in risk)
        + "</table>"
        + (f"<p class=note><b>What {esc(meta['technique'])} reduces:</b> {esc(note)}</p>" if note else "")
        + f"<p>{esc(population_note(meta.get('risk') or {}))}</p>"
        + (f"<p>{esc(denominator)}.</p>" if (denominator := risk_denominator(meta, utility)) else "")
        + _riskiest(meta.get("riskiest"), esc)
        if risk
        else ""
    )
    files = "".join(f"<li><code>{esc(f)}</code></li>" for f in meta.get("files", []))
    plots = "".join(f"<figure>{svg}<figcaption>{esc(t)}</figcaption></figure>" for t, svg in _plots(sizes, utility))
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>privpub release {esc(meta["release_id"])}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}
.ok{{color:#080;font-weight:bold}}.bad{{color:#b00;font-weight:bold}}figure{{display:inline-block}}
.warn{{background:#fff3cd;border:1px solid #e0c060;padding:6px}}table.worst td,table.worst th{{border:0;padding:1px 6px;font-size:90%}}</style>
</head><body>
<h1>Release {esc(meta["release_id"])}</h1>
<p>Series <b>{esc(meta["series"])}</b>, release #{meta["sequence"]}, technique <b>{esc(meta["technique"])}</b>,
parameters <code>{esc(json.dumps(meta.get("parameters", {}), default=str))}</code>, seed {meta["seed"]},
{meta["rows_in"]} input rows, committed {esc(str(meta.get("created_at", "")))}.</p>
{"".join(f"<p>{esc(n[0].upper() + n[1:])}.</p>" for n in input_notes(meta, utility))}
{warnings}
<h2>Privacy (computed from the published tables only)</h2>
<table><tr><th>model</th><th>reached</th><th>required</th><th>result</th><th>worst case</th></tr>{priv_rows}</table>
<h2>Utility</h2><table><tr><th>figure</th><th>value</th><th>what it measures</th><th>better</th></tr>{util_rows}</table>
{risk_html}
{series_html}
{plots}
<h2>Published files</h2><ul>{files}</ul>
<h2>Provenance</h2><table>{prov}</table>
</body></html>"""
    path.write_text(page)
    return path

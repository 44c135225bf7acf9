"""Step 7: a report a person can read (docs/report.md): an HTML page opening with a verdict in
plain words (tasks/report/verdict.py), the privacy checks with what each guarantees and its worst
case, the utility figures with units and verdicts (tasks/report/figures.py), the risk before and after,
the release's series, and plots (tasks/report/plots.py: inline SVG, no plotting library); plus a
markdown summary with the same words for Prefect.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privpub.schemas.figure_names import current_names
from privpub.schemas.spec import ROW_ID
from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.report.figures import (
    as_number,
    cell_text,
    figure_words,
    fmt,
    guarantee,
    input_rows,
    label,
    merged_cells,
    plural,
    poor_figures,
    readable,
    value_list,
    verdict,
    worst_cells,
    worst_rows,
)
from privpub.tasks.report.plots import bar_chart, before_after_chart, group_size_bins, plot_figure
from privpub.tasks.report.series import series_rows, series_words, trend_plots
from privpub.tasks.report.verdict import alarm_text, attribute_alarm, percent, verdict_paragraph

__all__ = [
    "artifact_verdict",
    "figure_rows",
    "fmt",
    "label",
    "markdown_summary",
    "readable",
    "summary_lines",
    "write_html_report",
]


def _pct(key: str) -> int:
    return int(key.removeprefix("query-error-").removesuffix("pct"))


def _query_errors(utility: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in utility.items() if k.startswith("query-error-")}


RISK_LABELS = {
    "prosecutor-risk-max": "highest chance of picking out a person's record, 1 / the smallest class (the "
    "'prosecutor' risk: the adversary knows the person is in the table)",
    "prosecutor-risk-avg": "the same chance averaged over the records",
    "records-at-risk": "share of records whose chance is above the risk threshold",
    "sample-uniques": "share of records unique on their QIs",
    "attribute-risk-max": "highest share of one sensitive value in a class",
    "attribute-gain-max": "largest gain of a sensitive value's share in a group over its share of all, (p_g - p) / p",
    "attribute-difference-max": "largest rise of a sensitive value's share in a group over its share of all, p_g - p",
    "journalist-risk-max": "highest chance of picking out a person when the adversary does not know whether they "
    "are in the table: 1 / the class's expected size in the population (the 'journalist' risk)",
    "marketer-risk": "expected share of records an adversary linking every record at once gets right (the "
    "'marketer' risk)",
    "population-uniques": "estimated share of the population unique on its QIs",
}


VALUES_SHOWN = 12  # the attribute disclosure table lists the values with the largest gain, this many

# shares and probabilities (0-1) plotted before -> after; a gain is a ratio, unbounded
PLOTTED = [name for name in RISK_LABELS if name != "attribute-gain-max"]


def attribute_table(meta: dict[str, Any]) -> tuple[list[str], list[list[str]], str]:
    """The values with the largest gain as the report lists them: (header, rows, a sentence on
    the worst group's published cells) from the release's attribute summary (the input's
    figures are in the risk table); ([], [], "") without a summary."""
    summary = (meta.get("attribute") or {}).get("release")
    if not summary:
        return [], [], ""
    unit = summary["counts"]
    head = ["value", f"share of all {unit}", "highest share in one group", "gain (p_g - p) / p"]
    shown = summary["values"][:VALUES_SHOWN]
    rows = [[fmt(v["value"]), percent(v["share"]), percent(v["highest"]), fmt(v["gain"])] for v in shown]
    if summary["values_held"] > len(rows):
        rows.append([f"{summary['values_held'] - len(rows):,} more values, smaller gains", "", "", ""])
    group = summary["worst"].get("group")
    where = (
        "The worst group, as published: "
        + ", ".join(f"{name} = {cell_text(value)}" for name, value in merged_cells(group))
        + f" ({summary['worst']['group_size']:,} {unit})."
        if group
        else ""
    )
    return head, rows, where


# the population-uniqueness models (tasks/population_models.py, which this module does not
# import: it loads scipy) by the names their figures carry, `population-uniques-<model>`
MODEL_NAMES = {"zayatz": "the first model", "pitman": "the second model"}
MODEL_WORDS = {
    "zayatz": "the first model takes the population's classes to be sized as the table's (Zayatz, 1991)",
    "pitman": "the second fits how class sizes spread over the population (Pitman's model, as Hoshino, 2001, applies it)",
}


def population_note(risk: dict[str, Any]) -> str:
    """Which population-uniqueness model gave the figures and at which sampling fraction, each
    model in a sentence, or that the population figures need a population ("" without any risk
    figure)."""
    if not risk:
        return ""
    parts, used = [], []
    for prefix, what in (("input-", "input"), ("", "release")):
        models = [m for m in MODEL_NAMES if f"{prefix}population-uniques-{m}" in risk]
        if models:
            share = fmt(risk[f"{prefix}sample-fraction"], 4)
            parts.append(f"for the {what}, {MODEL_NAMES[models[0]]}, the table holding {share} of the population")
            used += [m for m in models[:1] if m not in used]
    if not parts:
        return (
            f"{label('journalist-risk-max')}, {label('marketer-risk')} and {label('population-uniques')}: not computed "
            "([risk] population or sample_fraction gives the population they need)"
        )
    words = "; ".join(MODEL_WORDS[m] for m in MODEL_NAMES if m in used)
    return (
        "How many people are unique in the whole population is estimated from how many classes of each size the "
        f"table has, by a statistical model: {'; '.join(parts)}. {words[0].upper()}{words[1:]}. A small share of the "
        "population is best served by the second model, a larger one by the first: the choice Dankar and others "
        "recommend (2012)"
    )


def risk_rows(risk: dict[str, Any], note: str | None = None) -> list[tuple[str, str, str, str]]:
    """(figure, input, release, what it measures) for every risk figure, before -> after; a
    release figure the technique does not compute reads "does not apply" when the technique
    says why (`note`: its QIs are published unchanged or perturbed), else "not computed"."""
    missing = "does not apply (see below)" if note else "not computed"
    rows = []
    for name, what in RISK_LABELS.items():
        before, after = risk.get(f"input-{name}"), risk.get(name)
        if before is None and after is None:
            continue
        rows.append(
            (
                name,
                "n/a" if before is None else fmt(before, 4),
                missing if after is None else fmt(after, 4),
                what,
            )
        )
    return rows


def risk_denominator(meta: dict[str, Any], utility: dict[str, Any]) -> str | None:
    """When rows were suppressed, whose risk the release figures are: the published records only
    (docs/risk.md). None when every input row is published or no release figure is computed."""
    utility = current_names(utility)  # an old state's names read as now
    suppressed = int(utility.get("suppressed-rows") or 0)
    rows_in = meta.get("rows_in")
    computed = any(name in (meta.get("risk") or {}) for name in RISK_LABELS)
    if not suppressed or rows_in is None or not computed:
        return None
    return (
        f"release figures over the {int(rows_in) - suppressed:,} published records; "
        f"{suppressed:,} suppressed records are not published and not in their denominator"
    )


def _riskiest(where: dict[str, Any] | None, esc: Callable[[str], str]) -> str:
    """Where the highest prosecutor risk is in the published table, by row position, and the
    riskiest classes by their published cells."""
    if not where:
        return ""
    rows = ", ".join(str(r) for r in where["rows"])
    more = f" (the first {len(where['rows'])} of {where['records']})" if where["records"] > len(where["rows"]) else ""
    table = where.get("table", "table")  # the published table the risk figures read (its row positions count there)
    people = where.get("unit") == "people"  # rows_per_person = "many": classes counted in people
    html = (
        f"<p>Highest risk: {esc(str(where['records']))} published records in classes of "
        f"{esc(str(where['class_size']))}{' people' if people else ''}; their row positions in {table}.parquet "
        f"(counting from 0){esc(more)}: {esc(rows)}</p>"
    )
    classes = where.get("classes") or []
    if classes:
        columns = [name for name, _ in merged_cells(classes[0]["cells"])]
        shares = "attribute_risk" in classes[0]
        head = "".join(f"<th>{esc(c)}</th>" for c in columns) + f"<th>{'people' if people else 'records'}</th>"
        head += "<th>share of its most frequent sensitive value</th>" if shares else ""
        body = ""
        for c in classes:
            cells = "".join(f"<td>{esc(cell_text(v))}</td>" for _, v in merged_cells(c["cells"]))
            share = f"<td>{fmt(c['attribute_risk'], 3)}</td>" if shares else ""
            body += f"<tr>{cells}<td>{c['size']}</td>{share}</tr>"
        html += (
            "<p>The riskiest classes (smallest first, then the most predictable sensitive value), "
            f"as published:</p><table class=classes><tr>{head}</tr>{body}</table>"
        )
    return html


def _attribute_html(meta: dict[str, Any], esc: Callable[[str], str]) -> str:
    """The values with the largest gain over their share of all (attribute_table)."""
    head, rows, where = attribute_table(meta)
    if not rows:
        return ""
    red = " class=alarm" if attribute_alarm(meta) else ""
    return (
        f"<h3{red}>Attribute disclosure: each sensitive value's share of all, and in the group where it is "
        "most frequent (largest gain first)</h3><table class=attribute><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        + "</table>"
        + (f"<p>{esc(where)}</p>" if where else "")
    )


def input_notes(meta: dict[str, Any], utility: dict[str, Any]) -> list[str]:
    """What the release did to its input before any work: rows dropped for an empty cell
    (`[dataset] missing = "drop"`), the row number taken as the person id (`person_id = "@row"`)."""
    utility = current_names(utility)  # an old state's names read as now
    notes = []
    if "dropped-rows" in utility:
        dropped, read = int(utility["dropped-rows"]), input_rows(meta.get("rows_in"), utility)
        # the share is of the rows read, the dropped ones included (rows_in counts the kept ones only)
        share = f"{dropped / read:.1%} of the {read:,} input rows; " if read else ""
        notes.append(
            f"dropped rows: {dropped:,} (an empty cell in the person id, a quasi-identifier "
            f'or the sensitive column; [dataset] missing = "drop"): {share}not published and not in the figures'
        )
    person_id = meta.get("person_id") or ((meta.get("spec") or {}).get("dataset") or {}).get("person_id")
    if person_id == ROW_ID:
        notes.append(f"person id: row number ({ROW_ID}): every row is taken as a different person")
    if meta.get("people_in"):  # rows_per_person = "many" (docs/models.md, "Several rows per person")
        notes.append(
            f'several rows per person ([dataset] rows_per_person = "many"): the input\'s {fmt(meta["rows_in"])} rows '
            f"hold {fmt(meta['people_in'])} people; all of a person's rows are in one group, and the privacy and risk "
            "figures count people, not rows"
        )
    if "held-out-people" in utility:  # [evaluate] target (docs/utility.md, "Classification accuracy")
        people, rows = int(utility["held-out-people"]), int(utility.get("held-out-rows") or 0)
        notes.append(
            f"held out: {plural(people, 'person', 'people')} ({plural(rows, 'row')}) drawn from the input before "
            "anonymizing were withheld from publication and from every figure but the classification accuracy "
            "([evaluate] target), which tests on them"
        )
    return notes


def _rows_in_words(meta: dict[str, Any], utility: dict[str, Any]) -> str:
    """The input's rows as read, and with [dataset] missing = "drop" how many of them the release
    kept (meta rows_in counts the kept rows only)."""
    kept = meta.get("rows_in")
    if "dropped-rows" not in utility or input_rows(kept, utility) is None:
        return fmt(kept)
    return f"{input_rows(kept, utility)} ({kept} kept, {int(utility['dropped-rows'])} dropped for an empty cell)"


def summary_lines(meta: dict[str, Any], privacy: list[PrivacyResult], utility: dict[str, Any]) -> list[str]:
    utility = current_names(utility)  # an old state's names read as now
    lines = [
        f"release {meta['release_id']} (series {meta['series']}, #{meta['sequence']}, "
        f"technique {meta['technique']}, seed {meta['seed']})",
        f"rows in: {_rows_in_words(meta, utility)}",
    ]
    if {"groups", "avg-group-size", "max-group-size"} <= set(utility):
        lines.append(
            f"groups: {fmt(utility['groups'])} (avg size {readable(utility['avg-group-size'])}, "
            f"max {fmt(utility['max-group-size'])})"
        )
    for r in privacy:
        need = f" (required {r.threshold})" if r.threshold is not None else ""
        unit = " people" if r.model == "k-anonymity" and meta.get("people_in") else ""  # rows_per_person = "many"
        lines.append(f"{r.model}: {fmt(r.value)}{unit}{need} {'PASS' if r.passed else 'FAIL'}")
    errs = [
        f"{k.removeprefix('query-error-').replace('pct', '%')}: {fmt(v, 3)}"
        for k, v in sorted(_query_errors(utility).items(), key=lambda kv: _pct(kv[0]))
    ]
    if errs:
        lines.append("mean relative query error by selectivity: " + ", ".join(errs))
    if "uncertainty-penalty-normalized" in utility:
        lines.append(f"uncertainty penalty (per tuple per QI): {fmt(utility['uncertainty-penalty-normalized'])}")
    if utility.get("suppressed-rows"):
        lines.append(f"suppressed rows: {utility['suppressed-rows']}")
    lines += input_notes(meta, utility)
    alarm = alarm_text(meta, privacy)
    if alarm:
        lines.append("warning: " + alarm)
    rows = risk_rows(meta.get("risk") or {}, meta.get("risk_note"))
    if rows:
        shown = ", ".join(f"{n} {a} -> {b.removesuffix(' (see below)')}" for n, a, b, _ in rows)
        lines.append("re-identification risk, input -> release: " + shown)
        lines.append(population_note(meta.get("risk") or {}))
        denominator = risk_denominator(meta, utility)
        if denominator:
            lines.append(denominator)
    return lines


def figure_rows(privacy: list[PrivacyResult], utility: dict[str, Any]) -> list[dict[str, str]]:
    """The `release-figures` artifact's table (a run in process or recorded over HTTP alike)."""
    utility = current_names(utility)  # an old state's names read as now
    rows = [
        {
            "kind": "privacy",
            "figure": r.model,
            "value": str(r.value),
            "required": str(r.threshold),
            "result": "pass" if r.passed else "FAIL",
        }
        for r in privacy
    ]
    return rows + [
        {"kind": "utility", "figure": k, "value": fmt(v), "required": "", "result": ""} for k, v in utility.items()
    ]


def artifact_verdict(meta: dict[str, Any], privacy: list[PrivacyResult], utility: dict[str, Any]) -> str:
    """The verdict above the report's link in the Prefect UI (markdown): the release id, one line
    on what was published and whether every check passed, pass / fail per check."""
    utility = current_names(utility)  # an old state's names read as now
    failed = [r for r in privacy if not r.passed]
    rows_in = meta.get("rows_in")
    published = int(rows_in) - int(utility.get("suppressed-rows") or 0) if isinstance(rows_in, int) else None
    what = f"{plural(published, 'row')} published" if published is not None else "published"
    verdict = (
        f"every privacy check passed ({plural(len(privacy), 'check')})"
        if not failed
        else f"{len(failed)} of {plural(len(privacy), 'privacy check')} failed"
    )
    checks = "\n".join(
        f"| {_md(label(r.model))} | {_md(fmt(r.value))} | {_md(fmt(r.threshold))} | {'pass' if r.passed else 'FAIL'} |"
        for r in privacy
    )
    return (
        f"**Release {meta['release_id']}** (series {meta['series']}, #{meta['sequence']}, {meta['technique']}): "
        f"{what}; {verdict}.\n\n| check | reached | required | result |\n|---|---|---|---|\n{checks}\n\n"
        f"Folder: `{Path(meta['report']).parent if meta.get('report') else ''}`"
    )


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


def parameter_text(params: dict[str, Any]) -> str:
    """The technique's parameters as a person reads them: k = 5, qids = {a, b}; {c, d}."""
    out = []
    for key, value in params.items():
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, (list, tuple)) for v in value):
            text = "; ".join(value_list(v) for v in value)
        elif isinstance(value, (list, tuple)):
            text = value_list(value)
        elif isinstance(value, dict):
            text = cell_text(value)
        else:
            text = fmt(value)
        out.append(f"{key} = {text}")
    return ", ".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def utility_table(utility: dict[str, Any], meta: dict[str, Any]) -> list[tuple[str, str, str, str, str, str, str]]:
    """(label, identifier, value, unit, verdict, what it measures, better) per utility figure."""
    utility = current_names(utility)  # an old state's names read as now
    kept = meta.get("rows_in") if isinstance(meta.get("rows_in"), int) else None
    published = kept - int(utility.get("suppressed-rows") or 0) if kept else None
    read = input_rows(kept, utility)  # shares of the input: of the rows read, the dropped ones included
    out = []
    for name, value in utility.items():
        w = figure_words(name)
        number = isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))
        number = number and math.isfinite(float(value))  # NaN: an empty cell (fmt)
        plain = value is None or isinstance(value, (bool, float, np.number))
        shown = readable(value) if number else fmt(value) if plain else str(value)
        out.append((w.label, name, shown, w.unit, verdict(name, value, read, published), w.what, w.better))
    return out


def markdown_summary(meta: dict[str, Any], privacy: list[PrivacyResult], utility: dict[str, Any]) -> str:
    utility = current_names(utility)  # an old state's names read as now

    def worst_md(r: PrivacyResult) -> str:
        return "; ".join(f"{k}: {v}" for k, v in worst_rows(r.worst, r.model))

    rows = "\n".join(
        f"| {_md(r.model)} | {_md(fmt(r.value))} | {_md(fmt(r.threshold))} | {'pass' if r.passed else 'FAIL'} "
        f"| {_md(guarantee(r.model, r.threshold, r.worst))} | {_md(worst_md(r))} |"
        for r in privacy
    )
    util = "\n".join(
        f"| {_md(label)} (`{name}`) | {_md(value)} | {_md(unit)} | {_md(verdict_)} | {_md(what)} ({better}) |"
        for label, name, value, unit, verdict_, what, better in utility_table(utility, meta)
    )
    warnings = "".join(
        f"\n> **Warning:** {w}\n" for w in poor_figures(utility, input_rows(meta.get("rows_in"), utility))
    )
    alarm = alarm_text(meta, privacy)
    alarm_md = f"\n> **Warning:** {_md(alarm)}\n" if alarm else ""
    prov = "\n".join(f"| {k} | {_md(v)} |" for k, v in _provenance(meta))
    head, series = series_rows(meta)
    series_md = (
        (
            f"\n## In its series\n\n{series_words(meta, privacy)}\n\n| "
            + " | ".join(head)
            + " |\n|"
            + "---|" * len(head)
            + "\n"
            + "\n".join("| " + " | ".join(_md(c) for c in r) + " |" for r in series)
            + "\n"
        )
        if series
        else ""
    )
    return (
        f"# Release {meta['release_id']}\n\n{verdict_paragraph(meta, privacy, utility)}\n{alarm_md}\n"
        + "\n".join(f"- {l}" for l in summary_lines(meta, privacy, utility))
        + f"\n{warnings}\n## Privacy\n\n| model | reached | required | result | what it guarantees | worst case |\n"
        + f"|---|---|---|---|---|---|\n{rows}\n"
        + "\n## Utility\n\n| figure | value | unit | verdict | what it measures |\n|---|---|---|---|---|\n"
        + f"{util}\n"
        + _ledger_md(meta)
        + series_md
        + (f"\n## Provenance\n\n| | |\n|---|---|\n{prov}\n" if prov else "")
    )


def _plots(
    meta: dict[str, Any], privacy: list[PrivacyResult], sizes: np.ndarray | None, utility: dict[str, Any]
) -> list[str]:
    """Each plot as a <figure class="plot">: group sizes, query error, risk before -> after, and
    the series' figures over its releases."""
    out = []
    if sizes is not None and len(sizes):
        edges, counts, labels, log = group_size_bins(np.asarray(sizes))
        svg = bar_chart(
            "Group sizes",
            labels,
            counts.astype(float).tolist(),
            "QI-group size (rows)" + (", bins widening along a log scale" if log else ""),
            "groups (log scale)" if log else "groups",
            "#4472c4",
            log=log,
        )
        bins = (
            "bins that widen as sizes grow, heights on a log scale so that single large groups show"
            if log
            else ("one bar per size")
        )
        out.append(
            plot_figure(
                svg,
                f"How many QI-groups have each size ({bins}; {plural(len(sizes), 'group')}): the bar furthest left "
                "holds the groups easiest to single out, the right end the largest groups.",
            )
        )
    errs = dict(sorted(_query_errors(utility).items(), key=lambda kv: _pct(kv[0])))
    if errs:
        labels = [k.removeprefix("query-error-").replace("pct", "%") for k in errs]
        svg = bar_chart(
            "Count-query error",
            labels,
            [float(v) for v in errs.values()],
            "query selectivity (% of rows selected)",
            "mean relative error (0 = exact)",
            "#ed7d31",
        )
        out.append(
            plot_figure(
                svg,
                "Mean relative error of count queries by how many rows they select: under 0.05 good, "
                "under 0.2 fair, otherwise poor.",
            )
        )
    risk = meta.get("risk") or {}
    pairs = [
        (name, as_number(risk.get(f"input-{name}")), as_number(risk.get(name)))
        for name in PLOTTED
        if as_number(risk.get(f"input-{name}")) is not None and as_number(risk.get(name)) is not None
    ]
    if pairs:
        svg = before_after_chart(
            "Re-identification risk: input → release",
            [label(n) for n, _, _ in pairs],
            [float(b or 0.0) for _, b, _ in pairs],
            [float(a or 0.0) for _, _, a in pairs],
        )
        out.append(
            plot_figure(
                svg, "Grey: the input's quasi-identifiers as they are; blue: the published table (lower is safer)."
            )
        )
    return out + trend_plots(meta, privacy)


_STYLE = """body{font-family:sans-serif;max-width:76em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;max-width:100%}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top;overflow-wrap:break-word;hyphens:none}table.cells th{white-space:nowrap}
td.guarantee{min-width:16em}table.worst th{min-width:8em}
.ok{color:#080;font-weight:bold;white-space:nowrap}.bad{color:#b00;font-weight:bold;white-space:nowrap}
figure.plot{display:inline-block;margin:0.5em 1em 1em 0;max-width:100%}figure.plot svg{max-width:100%;height:auto}
figcaption{font-size:90%;color:#444;max-width:460px}
#verdict p{font-size:110%;line-height:1.45;background:#f3f6fb;border-left:4px solid #4472c4;padding:8px 12px}
.warn{background:#fff3cd;border:1px solid #e0c060;padding:6px}.alarm{color:#b00;font-weight:bold;border-color:#b00}
table.worst{width:100%}table.worst td,table.worst th{border:0;padding:1px 6px;font-size:90%}
table.cells td,table.cells th{border:0;padding:0 4px;font-size:95%}
code.id{font-size:80%;color:#666}td.verdict-poor{color:#b00}td.verdict-fair{color:#a60}td.verdict-good{color:#080}"""


def _worst_html(r: PrivacyResult) -> str:
    """A figure's worst case as a small table of its cells."""
    esc = html.escape
    rows = ""
    for field, text in worst_cells(r.worst, r.model):
        if isinstance(text, str):
            rows += f"<tr><th>{esc(field)}</th><td>{esc(text)}</td></tr>"
        else:
            inner = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in text)
            rows += f"<tr><th>{esc(field)}</th><td><table class=cells>{inner}</table></td></tr>"
    return f"<table class=worst>{rows}</table>" if rows else ""


def _privacy_rows(privacy: list[PrivacyResult]) -> str:
    esc = html.escape
    return "".join(
        f"<tr><td title='{esc(r.model)}'>{esc(label(r.model))}</td><td{_exact(r.value)}>{esc(fmt(r.value))}</td>"
        f"<td>{esc(fmt(r.threshold))}</td>"
        f"<td class={'ok' if r.passed else 'bad'}>{'&#10004; pass' if r.passed else '&#10008; FAIL'}</td>"
        f"<td class=guarantee>{esc(guarantee(r.model, r.threshold, r.worst))}</td><td>{_worst_html(r)}</td></tr>"
        for r in privacy
    )


def _exact(value: Any) -> str:
    """The exact figure as the cell's tooltip, where the text shows it rounded."""
    exact = isinstance(value, (float, np.floating)) and math.isfinite(value)
    return f' title="{html.escape(str(value))}"' if exact else ""


def _utility_rows(utility: dict[str, Any], meta: dict[str, Any]) -> str:
    esc = html.escape
    return "".join(
        f"<tr><td title='{esc(name)}'>{esc(label)}</td><td{_exact(utility.get(name))}>{esc(value)}</td>"
        f"<td>{esc(unit)}</td>"
        f"<td class=verdict-{esc(verdict_.split(' ')[0] or 'none')}>{esc(verdict_)}</td><td>{esc(what)}</td>"
        f"<td>{esc(better)}</td></tr>"
        for label, name, value, unit, verdict_, what, better in utility_table(utility, meta)
    )


def _warnings_html(meta: dict[str, Any], privacy: list[PrivacyResult], utility: dict[str, Any]) -> str:
    esc = html.escape
    warnings = "".join(
        f"<p class=warn>Warning: {esc(w)}</p>" for w in poor_figures(utility, input_rows(meta.get("rows_in"), utility))
    )
    # a failed figure in a published release: one the spec chose to tolerate ([series] composition = "warn")
    warnings += "".join(
        (
            f"<p class=warn>Warning: {esc(label(r.model))} reached {esc(fmt(r.value))}, required "
            f"{esc(fmt(r.threshold))}: "
            f"{esc(fmt(r.worst.get('below', '')))} people fall below it when every release of the series is "
            'combined; published because the spec says composition = "warn"</p>'
        )
        for r in privacy
        if not r.passed
    )
    return warnings


def _series_html(meta: dict[str, Any], privacy: list[PrivacyResult]) -> str:
    esc = html.escape
    head, series = series_rows(meta)
    return (
        (
            f"<h2>In its series</h2><p>{esc(series_words(meta, privacy))}</p><table class=series><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in head)
            + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in series)
            + "</table>"
        )
        if series
        else ""
    )


LEDGER_HEAD = ("release", "epsilon spent", "delta spent", "series total epsilon", "budget", "remaining")


def ledger_table(meta: dict[str, Any]) -> tuple[str, list[list[str]]]:
    """The series' privacy-budget ledger up to this release (meta["ledger"]: state/ledger.py
    ledger_rows): its sentence and one row per DP release; no rows for a syntactic release."""
    rows = meta.get("ledger") or []
    if not rows:
        return "", []
    last = rows[-1]
    words = (
        f"A differentially private series spends a privacy budget: under basic sequential composition the "
        f"epsilons of its releases add up. With this release series {meta['series']} has spent epsilon = "
        f"{fmt(last['series_epsilon'])} of its budget {fmt(last['budget_epsilon'])}; "
        f"{fmt(last['remaining_epsilon'])} remains for later releases."
    )
    body = [
        [
            f"#{r['sequence']} {r['release_id']}",
            fmt(r["epsilon"]),
            fmt(r["delta"]),
            fmt(r["series_epsilon"]),
            fmt(r["budget_epsilon"]),
            fmt(r["remaining_epsilon"]),
        ]
        for r in rows
    ]
    return words, body


def _ledger_html(meta: dict[str, Any]) -> str:
    esc = html.escape
    words, rows = ledger_table(meta)
    if not rows:
        return ""
    return (
        f"<h2>Privacy budget</h2><p>{esc(words)}</p><table class=ledger><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in LEDGER_HEAD)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        + "</table>"
    )


def _ledger_md(meta: dict[str, Any]) -> str:
    words, rows = ledger_table(meta)
    if not rows:
        return ""
    return (
        f"\n## Privacy budget\n\n{words}\n\n| "
        + " | ".join(LEDGER_HEAD)
        + " |\n|"
        + "---|" * len(LEDGER_HEAD)
        + "\n"
        + "\n".join("| " + " | ".join(_md(c) for c in r) + " |" for r in rows)
        + "\n"
    )


def _risk_html(meta: dict[str, Any], utility: dict[str, Any]) -> str:
    esc = html.escape
    note = meta.get("risk_note")
    risk = risk_rows(meta.get("risk") or {}, note)
    return (
        "<h2>Re-identification risk (before: the input's QIs as they are; after: the published table)</h2>"
        "<table><tr><th>figure</th><th>input</th><th>release</th><th>what it measures</th></tr>"
        + "".join(
            f"<tr><td title='{esc(name)}'>{esc(label(name))}</td>"
            + "".join(f"<td>{esc(c)}</td>" for c in rest)
            + "</tr>"
            for name, *rest in risk
        )
        + "</table>"
        + (f"<p class=note><b>What {esc(meta['technique'])} reduces:</b> {esc(note)}</p>" if note else "")
        + f"<p>{esc(population_note(meta.get('risk') or {}))}</p>"
        + (f"<p>{esc(denominator)}.</p>" if (denominator := risk_denominator(meta, utility)) else "")
        + _riskiest(meta.get("riskiest"), esc)
        + _attribute_html(meta, esc)
        if risk
        else ""
    )


def write_html_report(
    path: Path, meta: dict[str, Any], privacy: list[PrivacyResult], utility: dict[str, Any], sizes: np.ndarray | None
) -> Path:
    utility = current_names(utility)  # an old state's names read as now
    esc = html.escape
    prov = "".join(f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>" for k, v in _provenance(meta))
    alarm = alarm_text(meta, privacy)
    # red, right under the verdict: a disclosure above the limits (report_verdict.attribute_alarm)
    alarm_html = f"<p class='warn alarm'>Warning: {esc(alarm)}</p>" if alarm else ""
    files = "".join(f"<li><code>{esc(f)}</code></li>" for f in meta.get("files", []))
    plots = "".join(_plots(meta, privacy, sizes, utility))
    created = f", committed {esc(str(meta['created_at']))}" if meta.get("created_at") else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>privpub release {esc(meta["release_id"])}</title>
<style>{_STYLE}</style>
</head><body>
<h1>Release {esc(meta["release_id"])}</h1>
<section id="verdict"><p>{esc(verdict_paragraph(meta, privacy, utility))}</p></section>
{alarm_html}
<p>Series <b>{esc(meta["series"])}</b>, release #{meta["sequence"]}, technique <b>{esc(meta["technique"])}</b>,
parameters <code>{esc(parameter_text(meta.get("parameters") or {}))}</code>, seed {esc(fmt(meta["seed"]))},
{esc(_rows_in_words(meta, utility))} input rows{created}.</p>
{"".join(f"<p>{esc(n[0].upper() + n[1:])}.</p>" for n in input_notes(meta, utility))}
{_warnings_html(meta, privacy, utility)}
<h2>Privacy (computed from the published tables only)</h2>
<table class=privacy><tr><th>model</th><th>reached</th><th>required</th><th>result</th><th>what it guarantees</th>
<th>worst case</th></tr>{_privacy_rows(privacy)}</table>
<h2>Utility</h2><table class=utility><tr><th>figure</th><th>value</th><th>unit</th><th>verdict</th>
<th>what it measures</th><th>better</th></tr>{_utility_rows(utility, meta)}</table>
{_risk_html(meta, utility)}
{_ledger_html(meta)}
{_series_html(meta, privacy)}
{"<h2>Plots</h2>" + plots if plots else ""}
<h2>Published files</h2><ul>{files}</ul>
<h2>Provenance</h2><table>{prov}</table>
</body></html>"""
    path.write_text(page)
    return path

"""The report: figures printed with the precision they need, plots as inline SVG drawn without
a plotting library, and nothing heavy imported by tasks.report."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from privpub.tasks.report.page import fmt, markdown_summary, summary_lines, write_html_report

META = {
    "release_id": "census-0001-abc",
    "series": "census",
    "sequence": 1,
    "technique": "generalization",
    "seed": 3,
    "rows_in": 1000,
    "parameters": {"k": 10},
    "files": ["table.parquet"],
}
PRIVACY = [SimpleNamespace(model="k-anonymity", value=10, threshold=10, passed=True, worst={"size": 10})]


def test_small_figures_keep_their_significant_digits():
    assert fmt(3.75e-05) == "3.75 × 10^-5"
    assert fmt(np.float64(3.75e-05)) == "3.75 × 10^-5"
    assert fmt(0.043040028) == "0.04304"
    assert fmt(344320.23) == "344,300"
    assert fmt(12) == "12" and fmt(0.1234, 3) == "0.123"
    lines = summary_lines(
        META,
        PRIVACY,
        {"uncertainty_penalty_normalized": 3.75e-05, "query_error_1pct": 0.000412, "query_error_10pct": 0.25},
    )
    text = "\n".join(lines)
    assert "uncertainty penalty (per tuple per QI): 3.75 × 10^-5" in text
    assert "0.0000" not in text
    assert "1%: 0.000412" in text and "10%: 0.25" in text
    assert "3.75 × 10^-5" in markdown_summary(META, PRIVACY, {"uncertainty_penalty_normalized": 3.75e-05})


def test_html_report_draws_both_plots_as_inline_svg(tmp_path):
    sizes = np.array([10] * 50 + [11] * 30 + [14] * 5 + [30])
    utility = {"query_error_5pct": 0.2, "query_error_1pct": 0.5, "query_error_10pct": 0.1, "groups": 86}
    page = write_html_report(tmp_path / "report.html", META, PRIVACY, utility, sizes).read_text()
    svgs = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert len(svgs) == 2 and "<img" not in page
    hist, errors = svgs
    bars = re.findall(r'<rect [^>]*height="([0-9.]+)"[^>]*><title>([^<]*)</title>', hist)
    counts = np.bincount(sizes - 10)  # sizes 10..30 span 21 integers: one bar per size
    assert [t.split(": ")[0] for _, t in bars] == [str(s) for s in range(10, 31)]
    assert [t.split(": ")[1] for _, t in bars] == [str(c) for c in counts]
    heights = np.array([float(h) for h, _ in bars])
    assert heights.argmax() == 0 and np.allclose(heights / heights.max(), counts / counts.max(), atol=0.01)
    # bands in selectivity order, the 1% band (largest error) the tallest bar
    err_bars = re.findall(r'<rect [^>]*height="([0-9.]+)"[^>]*><title>([^<]*)</title>', errors)
    assert [t for _, t in err_bars] == ["1%: 0.5", "5%: 0.2", "10%: 0.1"]
    assert float(err_bars[0][0]) > float(err_bars[1][0]) > float(err_bars[2][0]) > 0


def test_report_without_groups_or_errors_has_no_plot(tmp_path):
    page = write_html_report(tmp_path / "r.html", META, PRIVACY, {"iloss": 0.1}, None).read_text()
    assert "<svg" not in page and "0.1" in page


def test_report_module_imports_no_plotting_library(tmp_path):
    code = (
        "import sys, numpy as np; from pathlib import Path; import privpub.tasks.report.page as r; "
        f"r.write_html_report(Path({str(tmp_path / 'x.html')!r}), {META!r}, [], "
        "{'query_error_1pct': 0.3}, np.array([5, 6, 7])); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'prefect', 'scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- issue 30: the report in plain words -------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from privpub.tasks.report.figures import verdict, worst_cells  # noqa: E402
from privpub.tasks.report.plots import integer_bins  # noqa: E402


def _label_range(label: str) -> tuple[int, int]:
    lo, _, hi = label.partition("–")
    return int(lo), int(hi or lo)


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=300))
def test_group_size_bins_are_integers_counting_every_size_once(sizes):
    edges, counts, labels = integer_bins(np.array(sizes))
    assert edges.dtype.kind == "i" and np.all(np.diff(edges) == edges[1] - edges[0]) and edges[1] > edges[0]
    assert counts.sum() == len(sizes) and len(counts) == len(labels) == len(edges) - 1 <= 30
    # each size in exactly one bin [edge_i, edge_i+1), whose label names that range, both ends included
    for size in set(sizes):
        inside = [i for i in range(len(counts)) if edges[i] <= size < edges[i + 1]]
        assert len(inside) == 1 and counts[inside[0]] == sizes.count(size) + sum(
            sizes.count(s) for s in set(sizes) - {size} if edges[inside[0]] <= s < edges[inside[0] + 1]
        )
    ranges = [_label_range(lab) for lab in labels]
    assert all(lo <= hi for lo, hi in ranges) and all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
    assert [lo for lo, _ in ranges] == edges[:-1].tolist() and [hi + 1 for _, hi in ranges] == edges[1:].tolist()
    assert all("." not in lab for lab in labels)


def test_wide_sizes_get_round_bins_and_ticks_that_do_not_overlap(tmp_path):
    sizes = np.array([5] * 40 + [19] * 3 + [250])
    edges, counts, labels = integer_bins(sizes)
    assert edges[1] - edges[0] == 20 and labels[0] == "0–19" and counts[0] == 43 and counts[-1] == 1
    page = write_html_report(tmp_path / "r.html", META, PRIVACY, {}, sizes).read_text()
    ticks = [(float(x), t) for x, t in re.findall(r'<text class="tick" x="([0-9.]+)"[^>]*>([^<]*)</text>', page)]
    for (x1, a), (x2, b) in zip(ticks, ticks[1:]):  # centres further apart than half of both labels
        assert x2 - x1 >= (len(a) + len(b)) / 2 * 6.5, (a, b)


def test_verdict_bands():
    assert verdict("query_error_1pct", 0.049).startswith("good") and verdict("query_error_1pct", 0.05).startswith(
        "fair"
    )
    assert verdict("query_error_1pct", 0.199).startswith("fair") and verdict("query_error_1pct", 0.2).startswith("poor")
    assert verdict("uncertainty_penalty_normalized", 0.099).startswith("good")
    assert verdict("uncertainty_penalty_normalized", 0.3).startswith("poor")
    assert verdict("suppressed_rows", 9, rows_in=1000).startswith("good")
    assert verdict("suppressed_rows", 10, rows_in=1000).startswith("fair")
    assert verdict("suppressed_rows", 50, rows_in=1000).startswith("poor")
    assert verdict("suppressed_rows", 5) == "" and verdict("groups", 3) == "" and verdict("iloss", float("nan")) == ""
    assert verdict("penalty_age", 9.0, published_rows=100).startswith("good")
    assert verdict("penalty_age", 10.0, published_rows=100).startswith("fair")


def test_worst_case_cells_are_readable_and_whole():
    long = [f"value-{i}" for i in range(40)]
    rows = dict(
        worst_cells(
            {"class": {"age_lo": 30, "age_hi": 39, "sex": ["f"], "job": long, "size": 5}, "row": 3, "x": None},
            "k-anonymity",
        )
    )
    cells = dict(rows["the class (as published)"])
    assert cells["age"] == "[30, 39]" and cells["sex"] == "{f}" and cells["rows in the class"] == "5"
    assert cells["job"] == "40 values: value-0, value-1, value-2, value-3, value-4, value-5, ..."
    assert "row" not in " ".join(rows) and "x" not in rows  # a bare row number, a missing value: left out
    composed = dict(worst_cells({"row": 3, "below": 0}, "series-composition-l"))
    assert any("input row (counting from 1" in k for k in composed)


def test_report_with_a_minimal_meta_opens_with_a_verdict_and_says_nothing_missing(tmp_path):
    priv = [
        *PRIVACY,
        SimpleNamespace(model="identity disclosure (P_match=0.5)", value=0.1, threshold=None, passed=True, worst={}),
    ]
    page = write_html_report(tmp_path / "r.html", META, priv, {"iloss": float("nan"), "groups": 3}, None).read_text()
    verdict_p = re.search(r'<h1>Release census-0001-abc</h1>\s*<section id="verdict"><p>([^<]+)</p></section>', page)
    assert verdict_p and "Every privacy check passed (2 checks)" in verdict_p.group(1)
    text = re.sub(r"<[^>]+>", " ", page)
    assert not re.search(r"\bnan\b|\bNaN\b|\bNone\b|\['", text)


def test_the_markdown_summary_opens_with_the_verdict():
    md = markdown_summary({**META, "quasi_identifiers": ["age", "sex"], "sensitive": "job"}, PRIVACY, {"groups": 3})
    first = md.split("\n\n")[1]
    assert first.startswith("Release census-0001-abc publishes 1,000 rows") and "age and sex" in first
    assert "what it guarantees" in md and "at least 10 rows" in md


# --- issue 39 item 4: shares of the input and the verdict's rows under [dataset] missing = "drop" ---------------

# the GSS-like table of the issue: 61,697 rows read, 23,917 dropped for an empty cell, 37,780 kept
# (meta rows_in counts the kept rows), 80 of those suppressed
GSS = {**META, "rows_in": 37_780, "input_name": "gss_wages.parquet"}
GSS_UTILITY = {"dropped_rows": 23_917, "suppressed_rows": 80}


def _utility_verdicts(meta, utility) -> dict[str, str]:
    from privpub.tasks.report.page import utility_table

    return {name: verdict_ for _, name, _, _, verdict_, _, _ in utility_table(utility, meta)}


def test_the_dropped_share_is_of_the_rows_read_not_of_the_rows_kept():
    verdicts = _utility_verdicts(GSS, GSS_UTILITY)
    assert verdicts["dropped-rows"] == "poor (38.8% of the input rows; 5% or more)"  # 23,917 / 61,697, not / 37,780
    assert verdicts["suppressed-rows"] == "good (0.1% of the input rows; under 1%)"  # 80 / 61,697
    lines = summary_lines(GSS, [], GSS_UTILITY)
    assert "rows in: 61697 (37780 kept, 23917 dropped for an empty cell)" in lines
    (note,) = [line for line in lines if line.startswith("dropped rows: ")]
    assert "38.8% of the 61,697 input rows" in note and "63.3%" not in "\n".join(lines)
    # the bands' edges where the two denominators disagree: 10 of 1,005 read is under 1%, 10 of 995 kept is not;
    # 50 of 1,002 read is under 5%, 50 of 952 kept is not
    for kept, dropped, band in ((995, 10, "good"), (995, 11, "fair"), (952, 50, "fair"), (950, 50, "poor")):
        shown = _utility_verdicts({**META, "rows_in": kept}, {"dropped_rows": dropped})["dropped-rows"]
        assert shown.startswith(f"{band} ({dropped / (kept + dropped):.1%} of the input rows"), (kept, dropped, shown)
    # without "drop" nothing changes: the rows in are the rows read
    assert _utility_verdicts(META, {"suppressed_rows": 10})["suppressed-rows"].startswith("fair (1.0% ")
    assert "rows in: 1000" in summary_lines(META, [], {"suppressed_rows": 10})


def test_the_verdict_speaks_of_the_input_rows_and_says_why_rows_were_left_out(tmp_path):
    from privpub.tasks.report.verdict import verdict_paragraph

    words = "publishes 37,700 of the 61,697 rows of gss_wages.parquet (23,917 left out for empty cells, 80 suppressed)"
    assert words in verdict_paragraph(GSS, PRIVACY, GSS_UTILITY)
    assert words in markdown_summary(GSS, PRIVACY, GSS_UTILITY).split("\n\n")[1]
    page = write_html_report(tmp_path / "r.html", GSS, PRIVACY, GSS_UTILITY, None).read_text()
    assert words in page and "61697 (37780 kept, 23917 dropped for an empty cell) input rows" in page
    assert "of its 37,780" not in page
    only_dropped = verdict_paragraph(GSS, PRIVACY, {"dropped_rows": 23_917})
    assert "publishes 37,780 of the 61,697 rows of gss_wages.parquet (23,917 left out for empty cells)," in only_dropped
    only_suppressed = verdict_paragraph({**GSS, "rows_in": 61_697}, PRIVACY, {"suppressed_rows": 80})
    assert "publishes 61,617 of the 61,697 rows of gss_wages.parquet (80 suppressed)," in only_suppressed
    assert "publishes 61,697 rows of gss_wages.parquet," in verdict_paragraph({**GSS, "rows_in": 61_697}, PRIVACY, {})


# --- attribute disclosure in the verdict (issue 39): the worst case in words, which model guards
# the sensitive column, and never "every check passed" beside a disclosure nothing guards ----------


def _attribute_meta(gain: float, difference: float, counts: str = "rows", **extra) -> dict:
    worst = {
        "value": "positive",
        "share": 0.03,
        "group_share": 0.62,
        "holding": 31,
        "group_size": 50,
        "gain": gain,
        "difference": difference,
        "group": {"clinic_lo": 7, "clinic_hi": 7},
    }
    summary = {"counts": counts, "total": 1000, "values_held": 2, "values": [], "worst": worst}
    return {
        **META,
        "quasi_identifiers": ["clinic"],
        "sensitive": "result",
        "risk": {"attribute-gain-max": gain, "attribute-difference-max": difference, "input-attribute-gain-max": 19.0},
        "attribute": {"release": summary, "input": None},
        **extra,
    }


def _verdict_and_alarm(tmp_path, meta: dict, privacy: list) -> tuple[str, str | None]:
    page = write_html_report(tmp_path / "r.html", meta, privacy, {"groups": 3}, None).read_text()
    verdict_p = re.search(r'<h1>Release census-0001-abc</h1>\s*<section id="verdict"><p>([^<]+)</p></section>', page)
    assert verdict_p
    alarm = re.search(r"</section>\s*<p class='warn alarm'>Warning: ([^<]+)</p>", page)
    return html.unescape(verdict_p.group(1)), None if alarm is None else html.unescape(alarm.group(1))


def test_an_unguarded_attribute_disclosure_is_named_in_red_and_no_check_passes_beside_it(tmp_path):
    words, alarm = _verdict_and_alarm(tmp_path, _attribute_meta(19.67, 0.59), PRIVACY)
    assert "in the worst group, 62% have result = positive, against 3% of all rows" in words
    assert "No privacy model of this release bounds what can be learned of result" in words
    assert "Every privacy check passed" not in words
    assert "Not every check passed: 1 of 1 privacy checks passed, but none of them guards result" in words
    assert alarm and "relative gain 19.67, above 1" in alarm and "no privacy model of this release guards" in alarm
    md = markdown_summary(_attribute_meta(19.67, 0.59), PRIVACY, {})
    assert "\n> **Warning:** attribute disclosure: in the worst group, 62% have result = positive" in md
    assert "Every privacy check passed" not in md


def test_a_guarded_column_names_its_model_and_may_pass_every_check(tmp_path):
    l_div = SimpleNamespace(model="l-diversity", value=3, threshold=3, passed=True, worst={})
    words, alarm = _verdict_and_alarm(tmp_path, _attribute_meta(19.67, 0.59), [*PRIVACY, l_div])
    assert "What can be learned of result is bounded by l-diversity (3)." in words
    assert "Every privacy check passed (2 checks)." in words
    assert alarm and "no privacy model" not in alarm  # still red: the figures are above the limits
    # an l of 1 guards nothing
    l_one = SimpleNamespace(model="l-diversity", value=1, threshold=1, passed=True, worst={})
    words, _ = _verdict_and_alarm(tmp_path, _attribute_meta(19.67, 0.59), [*PRIVACY, l_one])
    assert "No privacy model" in words and "Every privacy check passed" not in words


@pytest.mark.parametrize(
    "gain, difference, limits, red",
    [
        (1.0, 0.2, {}, False),  # exactly double: not above the default
        (1.0001, 0.2, {}, True),
        (5.0, 0.05, {}, False),  # five points: not above the default
        (5.0, 0.0501, {}, True),
        (5.0, 0.2, {"max_gain": 5.0}, False),  # the spec's limits replace the defaults
        (5.0, 0.2, {"max_gain": 4.0, "max_difference": 0.25}, False),
        (5.0, 0.2, {"max_gain": 4.0, "max_difference": 0.15}, True),
    ],
)
def test_the_attribute_warning_is_red_above_both_limits_only(tmp_path, gain, difference, limits, red):
    words, alarm = _verdict_and_alarm(tmp_path, _attribute_meta(gain, difference, risk_limits=limits), PRIVACY)
    assert (alarm is not None) is red
    assert ("Every privacy check passed" in words) is (not red)
    assert "in the worst group, 62% have result = positive" in words


def test_a_release_counting_people_says_people(tmp_path):
    words, alarm = _verdict_and_alarm(tmp_path, _attribute_meta(19.67, 0.59, counts="people"), PRIVACY)
    assert "against 3% of all people (31 of the group's 50 people" in words and "of all people" in str(alarm)

"""The report: figures printed with the precision they need, plots as inline SVG drawn without
a plotting library, and nothing heavy imported by tasks.report."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np

from privpub.tasks.report import fmt, markdown_summary, summary_lines, write_html_report

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
    assert fmt(3.75e-05) == "3.75e-05"
    assert fmt(np.float64(3.75e-05)) == "3.75e-05"
    assert fmt(0.043040028) == "0.04304"
    assert fmt(344320.23) == "3.443e+05"
    assert fmt(12) == "12" and fmt(0.1234, 3) == "0.123"
    lines = summary_lines(
        META,
        PRIVACY,
        {"uncertainty_penalty_normalized": 3.75e-05, "query_error_1pct": 0.000412, "query_error_10pct": 0.25},
    )
    text = "\n".join(lines)
    assert "uncertainty penalty (per tuple per QI): 3.75e-05" in text
    assert "0.0000" not in text
    assert "1%: 0.000412" in text and "10%: 0.25" in text
    assert "3.75e-05" in markdown_summary(META, PRIVACY, {"uncertainty_penalty_normalized": 3.75e-05})


def test_html_report_draws_both_plots_as_inline_svg(tmp_path):
    sizes = np.array([10] * 50 + [11] * 30 + [14] * 5 + [30])
    utility = {"query_error_5pct": 0.2, "query_error_1pct": 0.5, "query_error_10pct": 0.1, "groups": 86}
    page = write_html_report(tmp_path / "report.html", META, PRIVACY, utility, sizes).read_text()
    svgs = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert len(svgs) == 2 and "<img" not in page
    hist, errors = svgs
    bars = re.findall(r'<rect [^>]*height="([0-9.]+)"[^>]*><title>([^<]*)</title>', hist)
    counts, _ = np.histogram(sizes, bins=5)  # 4 distinct sizes: the 5-bin minimum
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
        "import sys, numpy as np; from pathlib import Path; import tasks.report as r; "
        f"r.write_html_report(Path({str(tmp_path / 'x.html')!r}), {META!r}, [], "
        "{'query_error_1pct': 0.3}, np.array([5, 6, 7])); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'prefect', 'scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

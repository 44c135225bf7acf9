"""What a compliance officer reads (issue 42, item 4), in a real browser and in the functions
behind it: explore's page and a release's report at a 1,300 px window have no horizontal scroll,
no raw metric name (a stored figure name such as query_error_1pct) and no number with more than 4
significant digits in their visible text; the rounding function; a label for every figure any
technique stores; the plots' axes, labels and bins; the series check's advice per check.

Its own small publish of the census demo table (not the service scenario). Chromium is driven as
tests/test_browser.py drives it (`launch_chromium`)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import privpub
from privpub.schemas.errors import PrivacyRefused
from privpub.state.store import Store
from privpub.tasks.compose import remedies
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.report.explore_page import axis_range, front, plain_names, svg_scatter
from privpub.tasks.report.figures import known_label, label, plural, readable
from privpub.tasks.report.plots import group_size_bins
from tests.test_browser import ARTIFACTS, launch_chromium

# --- the rounding function ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (0.0, "0"),
        (-0.0, "0"),
        (1.234, "1.234"),  # 4 significant digits: as it is
        (1.2345, "1.234"),  # 5: rounded (half to even at the 5th digit, as Python's format does)
        (1.23456, "1.235"),
        (3.9662438290106814, "3.966"),  # the figures
        (0.19995467324573973, "0.2"),
        (19394.0, "19,390"),  # not 1.939e+04
        (9999, "9,999"),  # an integer of 4 digits: exact, separated
        (99995, "100,000"),  # 5 digits: rounded up to the next power of 10
        (123456, "123,500"),
        (1234567, "1,235,000"),
        (-19394.0, "-19,390"),
        (-0.0123456, "-0.01235"),
        (0.000037512, "3.751 × 10^-5"),  # a row of zeros is hard to count
        (0.000123456, "0.0001235"),
        (1e-7, "1 × 10^-7"),
        (150.0, "150"),  # an integer-valued float: no ".0"
        (1000, "1,000"),
        (0.5, "0.5"),
    ],
)
def test_readable_rounds_to_four_significant_digits(value, shown):
    assert readable(value) == shown


@pytest.mark.parametrize("value", [1.2345678, 98765.4321, 0.000123456, -4567.891, 123456789])
def test_readable_never_shows_more_than_four_significant_digits(value):
    text = readable(value)
    assert significant_digits(text) <= 4, text
    assert "e" not in text and abs(float(text.replace(",", "")) - value) <= abs(value) * 5e-4


def test_plurals():
    assert plural(1, "check") == "1 check" and plural(2, "check") == "2 checks" and plural(0, "check") == "0 checks"
    assert plural(1234, "group") == "1,234 groups"


# --- visible text ----------------------------------------------------------------------------------

# what the visible text may hold that is not a figure: release ids (series-0001-abc123), hashes,
# run ids (UUIDs), dates and times, years, file paths. Each recognised explicitly, then removed.
NOT_FIGURES = [
    re.compile(r"\b[\w-]+-\d{4}-[0-9a-f]{6}\b"),  # a release id: <series>-<sequence>-<6 hex>
    re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),  # a UUID
    re.compile(r"\b(?=[0-9]*[a-f])[0-9a-f]{16,}\b"),  # a hash (sha256 of a file, of the input): a letter in it
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[+-]\d{2}:?\d{2}|Z)?)?"),  # date, time
    re.compile(r"(?:file://)?/[^\s,;)]*"),  # a path (the published files, the spec)
    re.compile(r"\b(?:19|20)\d{2}\b"),  # a year (a citation)
]
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def significant_digits(number: str) -> int:
    """Significant digits of a number as written: 19,390 -> 4, 0.00375 -> 3, 1.230 -> 4."""
    text = number.lstrip("-").replace(",", "")
    if "." in text:
        return len(text.replace(".", "").lstrip("0"))
    return len(text.lstrip("0").rstrip("0")) or 1


def long_numbers(text: str) -> list[str]:
    """The numbers of `text` with more than 4 significant digits, ids, hashes, dates, years and
    paths left out."""
    for pattern in NOT_FIGURES:
        text = pattern.sub(" ", text)
    return [m.group(0) for m in NUMBER.finditer(text) if significant_digits(m.group(0)) > 4]


def test_long_numbers_finds_what_it_must_and_leaves_ids_alone():
    assert long_numbers("error 3.9662438290106814 and 0.19995 and 19394 rows") == [
        "3.9662438290106814",
        "0.19995",
        "19394",
    ]
    assert long_numbers("19,390 rows, 0.2, 1,000, 3.966, -0.01235, 100,000") == []
    assert long_numbers("release census-0001-50593d, 2026-11-28 13:50:09.123+00:00, Zayatz 1991") == []
    assert long_numbers("sha256 4f0e3c2a1b9d8e7f6a5b4c3d2e1f0a9b /tmp/pytest-123/x-45678/report.html") == []
    assert long_numbers("a hash 4f0e3c2a1b9 is short: 12345") == ["12345"]


def raw_names(text: str, names: set[str]) -> list[str]:
    """The stored figure names in `text` that are identifiers (an _ or a - in them: a plain word
    such as groups reads as itself) with a label of their own (k-anonymity is its label;
    query_error_1pct and prosecutor-risk-max are not), as whole words."""
    raw = {n for n in names if label(n) != n and re.search(r"[_-]", n)}
    return sorted(n for n in raw if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text))


def test_raw_names_finds_names_and_leaves_labels_alone():
    names = {"query_error_1pct", "prosecutor-risk-max", "k-anonymity", "groups"}
    assert raw_names("query_error_1pct; input-prosecutor-risk-max", names) == ["query_error_1pct"]
    assert raw_names("k-anonymity, QI-groups and groups", names) == []
    assert raw_names("highest re-identification risk", names) == []


# --- the browser ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A small release of the census demo (risk figures against a population) and an explore page
    over ten settings, two of them refused."""
    home = tmp_path_factory.mktemp("readable")
    frame = census(600, seed=3)
    frame.to_csv(home / "census.csv", index=False)
    spec = census_spec(str(home / "census.csv"), k=5, l=3, seed=7, output_dir=str(home / "out"))
    spec["output"]["state"] = str(home / "s.duckdb")
    spec["risk"] = {"sample_fraction": 0.05}
    release = privpub.publish(home / "census.csv", spec)
    explored = privpub.explore(spec, {"k": [3, 5, 8, 12, 20], "l": [2, 9]}, html=home / "explore.html")
    return release, explored


@pytest.fixture(scope="module")
def browser():
    with launch_chromium() as chromium:
        yield chromium


SCROLLS = "() => [document.documentElement.scrollWidth, window.innerWidth]"


def _read(browser, path: Path, shot: str) -> str:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    try:
        page.goto(path.as_uri())
        page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
        scroll, window = page.evaluate(SCROLLS)
        assert scroll <= window, f"{path.name} is {scroll} px wide in a {window} px window"
        return str(page.evaluate("() => document.body.innerText"))
    finally:
        page.close()


def test_the_report_fits_and_reads_as_words_and_rounded_figures(browser, published):
    release, _ = published
    text = _read(browser, release.report, "readable-report.png")
    names = set(release.figures.name)
    assert raw_names(text, names) == []
    assert long_numbers(text) == []
    assert "checks)" in text and "(1 checks)" not in text
    # the exact values stay in the state's figures (the rounded text is what the page shows)
    exact = release.figures.set_index("name").value
    assert exact["uncertainty-penalty-normalized"] != float(readable(exact["uncertainty-penalty-normalized"]))
    for name in ("Bayardo-Agrawal", "Butterfly Definition 1", "Dankar et al.'s rule", "Zayatz (1991)"):
        assert name not in text


def test_the_explore_page_fits_and_reads_as_words_and_rounded_figures(browser, published):
    _, explored = published
    page = Path(explored.attrs["page"])
    text = _read(browser, page, "readable-explore.png")
    names = set(explored.columns)  # one column per figure of any setting, beside the setting's own
    assert {"query-error-1pct", "prosecutor-risk-max"} <= names
    assert raw_names(text, names) == []
    assert long_numbers(text) == []
    assert "FAIL" in text and "PASS" in text  # l = 9 is refused: its reason is on the page, in words
    assert '<text class="point-label"' in page.read_text()


# --- a label for every figure any technique stores -------------------------------------------------


def test_every_figure_of_every_technique_has_a_label(tmp_path):
    from privpub.testing import planted_census
    from tests.test_contract import CASES, spec_dict

    frame = planted_census()
    frame.to_csv(tmp_path / "census.csv", index=False)
    missing, seen = {}, set()
    for name in sorted(CASES):
        spec = spec_dict(name)
        spec["dataset"]["input"] = str(tmp_path / "census.csv")
        spec["output"] = {"dir": str(tmp_path / name), "state": str(tmp_path / f"{name}.duckdb")}
        release = privpub.publish(tmp_path / "census.csv", spec)
        seen |= set(release.figures.name)
        unknown = [n for n in release.figures.name if known_label(n) is None]
        if unknown:
            missing[name] = unknown
        for n in release.figures.name:
            assert "_" not in label(n) and not label(n).endswith(("-max", "-avg")), (name, n, label(n))
    assert missing == {}
    assert {"k-anonymity", "query-error-1pct", "prosecutor-risk-max", "input-prosecutor-risk-max"} <= seen
    assert len(seen) > 40  # every technique's own figures, not one release's
    # the figures of a series' later releases (the battery publishes first releases)
    for name in ("series-composition-k", "series-composition-l", "serial-statistics"):
        assert known_label(name) and "-" not in known_label(name).replace("k-anon", ""), name


# --- the plots ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lo", "hi", "want"),
    [
        (0.0, 0.0, (0.0, 1.0)),  # every value 0: 0 to 1, never -0.1 to 0.1
        (0.2, 0.2, (0.18, 0.22)),  # a constant: a small range around it
        (-2.0, -2.0, (-2.2, -1.8)),  # a negative constant may go below itself
        (0.0, 1.0, (0.0, 1.08)),  # non-negative values: the axis starts at 0, not at -0.08
        (-1.0, 1.0, (-1.16, 1.16)),
    ],
)
def test_axis_ranges(lo, hi, want):
    assert axis_range(lo, hi) == pytest.approx(want)


def test_only_the_front_is_labelled_and_labels_do_not_overlap():
    assert front([(0, 1), (1, 0), (1, 1), (0.5, 0.5)]) == [True, True, False, True]
    # twenty settings on a line of the front, close together: labels left out rather than overlapping
    points = [(i / 1000, 1 - i / 1000, f"k={i} l=2", True) for i in range(19)] + [(1.0, 0.0, "k=99 l=2", True)]
    svg = svg_scatter("t", points, "x", "y")
    boxes = []
    for x, y, anchor, text in re.findall(
        r'class="point-label" x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)">([^<]+)<', svg
    ):
        w = len(text) * 6.5
        x0 = float(x) - (w if anchor == "end" else w / 2 if anchor == "middle" else 0)
        boxes.append((x0, float(y) - 10, x0 + w, float(y) + 2))
    assert 1 <= len(boxes) < 20
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)


def test_the_group_size_histogram_shows_the_tail():
    sizes = np.array([5] * 400 + [6] * 300 + [7] * 200 + [12] * 20 + [60] * 3 + [4000])
    edges, counts, labels, log = group_size_bins(sizes)
    assert log and counts.sum() == len(sizes) and counts[-1] == 1  # the single large group has its own bar
    assert counts[0] == 400 + 300 + 200 + 0 or counts[0] >= 400  # the small groups are on the left
    assert len(labels) <= 25 and labels[-1].endswith("4000")
    # every size in exactly one bin [edge_i, edge_i+1)
    assert (np.diff(edges) > 0).all() and edges[0] == 5 and edges[-1] == 4001
    few = np.array([5, 5, 6, 9])
    assert group_size_bins(few)[3] is False  # few sizes: one bar per size, as before


def test_refusal_reasons_on_the_page_use_labels():
    text = "release refused, privacy check failed: series-composition-l reached 2, required 3"
    assert plain_names(text, ["series-composition-l"]) == (
        "release refused, privacy check failed: l over the whole series reached 2, required 3"
    )


# --- the series check's advice, per check ----------------------------------------------------------


def test_each_series_check_gets_its_own_advice():
    k = remedies.breach_note([(1, "s-0001-abcdef", 2)], 2, 5, 0, "series-composition-k")
    l_ = remedies.breach_note([(1, "s-0001-abcdef", 2)], 2, 3, 0, "series-composition-l")
    assert "a lower [series] l" in l_ and "a lower [series] l" not in k and "transient list (" not in k
    assert "keep_groups = true" in k and "new series name" in k
    assert "a lower [series] l" not in remedies.change_remedies("series-composition-k")
    assert "a lower [series] l" in remedies.change_remedies("series-composition-l")


def test_a_publish_refused_by_the_series_k_check_does_not_advise_l(tmp_path):
    pool = census(1500, seed=1).assign(pid=[f"person-{i:05d}" for i in range(1500)])
    spec = census_spec(
        "unused", k=10, l=None, seed=7, output_dir=str(tmp_path / "out"), state=str(tmp_path / "s.duckdb")
    )
    del spec["dataset"]["input"]
    privpub.publish(pool.sample(frac=0.9, random_state=0), spec)
    with pytest.raises(PrivacyRefused) as err:
        privpub.publish(pool.sample(frac=0.9, random_state=1), spec)
    message = str(err.value)
    assert "series-composition-k" in message
    assert "[series] l" not in message.split("what the steward can do")[1].replace("[series] l do not", "")
    assert "keep_groups = true" in message
    assert Store(tmp_path / "s.duckdb").audit_log().outcome.iloc[-1] == "refused"


# --- the UI's release-report artifact: the verdict above the link ----------------------------------


def test_the_release_report_artifact_shows_the_verdict(monkeypatch, published):
    from privpub.flows import publish as publish_mod
    from privpub.tasks.core.types import PrivacyResult

    release, _ = published
    made: dict[str, dict] = {}
    for fn in ("create_markdown_artifact", "create_link_artifact", "create_table_artifact"):
        monkeypatch.setattr(publish_mod, fn, lambda _fn=fn, **kw: made.__setitem__(_fn, kw))
    meta = {
        "release_id": release.id,
        "series": "census",
        "sequence": 1,
        "technique": "generalization",
        "rows_in": 600,
        "seed": 7,
        "report": str(release.report),
    }
    privacy = [
        PrivacyResult("k-anonymity", 5, 5, True, {}),
        PrivacyResult("series-composition-l", 2, 3, False, {}),
    ]
    publish_mod._artifacts(meta, privacy, {"suppressed_rows": 1, "uncertainty_penalty_normalized": 0.123456})
    link = made["create_link_artifact"]
    assert link["key"] == "release-report" and link["link_text"] == f"report of {release.id}"
    text = link["description"]
    assert f"**Release {release.id}**" in text and "599 rows published; 1 of 2 privacy checks failed." in text
    assert "| k-anonymity | 5 | 5 | pass |" in text and "| l over the whole series | 2 | 3 | FAIL |" in text
    assert str(release.report.parent) in text  # the folder, as the artifact showed before
    one = publish_mod.report_mod.artifact_verdict(meta, privacy[:1], {})
    assert "600 rows published; every privacy check passed (1 check)." in one

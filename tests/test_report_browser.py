"""The release report as a compliance officer reads it, in a real browser (issue 30): headless
Chromium (Debian's /usr/bin/chromium, driven by playwright; `make test` installs it) at 1300 px
opens the report.html of a generalization, an Anatomy, a MuCo and a serial release and of a
series' second release, each published by the CLI as a fresh process. Screenshots go to
artifacts/browser/ (git-ignored)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from privpub.tasks.demo_data import census
from tests.helpers import census_spec_toml, child_pythonpath
from tests.test_browser import ARTIFACTS, launch_chromium

ROOT = Path(__file__).resolve().parents[1]
QIS = ["age", "sex", "education", "marital", "race", "workclass", "country", "salary"]
SERIES = "\n[series]\nkeep_groups = true\n"
# name -> (input file, technique, k, l, lines added to [technique], what follows the spec)
RELEASES = {
    "generalization": ("census.csv", "generalization", 5, 3, "", ""),
    "anatomy": ("census.csv", "anatomy", None, 3, "", ""),
    "muco": ("census.csv", "muco", None, 3, 'delta = "1/6"', ""),
    "series-1": ("census.csv", "generalization", 6, 3, "", SERIES),
    "series-2": ("census-2.csv", "generalization", 6, 3, "", SERIES),
}


def _publish(folder: Path, home: Path, spec: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT), PRIVPUB_HOME=str(home / "no-service"), PREFECT_HOME=str(home / "prefect")
    )
    done = subprocess.run(
        [sys.executable, "-m", "privpub.flows.cli", "publish", str(spec), "--quiet"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """name -> report.html of each release in RELEASES (the series' two in one folder, in order)."""
    home = tmp_path_factory.mktemp("reports")
    frame = census(600, seed=3)
    out = {}
    for name, (input_name, technique, k, l, extra, after) in RELEASES.items():
        folder = home / name.split("-")[0]
        folder.mkdir(exist_ok=True)
        frame.to_csv(folder / "census.csv", index=False)
        # next month: a tenth of the people a year older
        frame.assign(age=frame.age + (frame.index < 60)).to_csv(folder / "census-2.csv", index=False)
        spec = folder / f"{name}.toml"
        spec.write_text(census_spec_toml(input_name, k=k, l=l, technique=technique, extra=extra) + after)
        release_id = _publish(folder, home, spec)
        out[name] = folder / "releases" / release_id / "report.html"
    return out


@pytest.fixture(scope="module")
def browser():
    with launch_chromium() as chromium:
        yield chromium


# every cell whose text is wider than its column, every table wider than the page
OVERFLOWS = """() => {
  const out = [];
  for (const cell of document.querySelectorAll('td, th')) {
    if (cell.scrollWidth > cell.clientWidth + 1) out.push('cell: ' + cell.innerText.slice(0, 60));
  }
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) out.push('page scrolls sideways: ' + page.scrollWidth);
  return out;
}"""


def _balanced(text: str) -> bool:
    """No value cut mid-way: every bracket the text opens it closes, in order."""
    stack, pairs = [], {")": "(", "]": "[", "}": "{"}
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack


@pytest.mark.parametrize("name", list(RELEASES))
def test_report_reads_without_help(browser, reports, name):
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.set_default_timeout(10_000)
    page.goto(reports[name].as_uri())
    page.screenshot(path=str(ARTIFACTS / f"report-{name}.png"), full_page=True)

    # the verdict opens the report and names every quasi-identifier and the sensitive column
    verdict = page.locator("#verdict p").first.inner_text()
    assert page.locator("h1 + #verdict, h1 ~ #verdict").count() == 1
    for column in [*QIS, "occupation"]:
        assert column in verdict, (column, verdict)
    assert re.search(r"\bevery (privacy )?check passed\b", verdict, re.I), verdict

    body = page.inner_text("body")
    assert not re.search(r"\b(nan|NaN|None)\b", body), re.findall(r".{40}\b(?:nan|NaN|None)\b.{20}", body)
    assert "['" not in body and "')" not in body  # no Python list printed as text

    cells = page.locator("td").all_inner_texts()
    cut = [c for c in cells if not _balanced(c)]
    assert not cut, cut[:5]
    assert page.evaluate(OVERFLOWS) == []

    plots = page.locator("figure.plot")
    assert plots.count() >= 1
    for i in range(plots.count()):
        plot = plots.nth(i)
        for part in ("text.title", "text.x-label", "text.y-label"):
            label = plot.locator(f"svg {part}").first
            assert label.is_visible() and (label.text_content() or "").strip(), (name, i, part)
        assert plot.locator("figcaption").inner_text().strip()
    page.close()


def test_second_release_of_a_series_shows_its_place(browser, reports):
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.set_default_timeout(10_000)
    page.goto(reports["series-2"].as_uri())
    first_id, second_id = reports["series-1"].parent.name, reports["series-2"].parent.name
    series = page.locator("xpath=//h2[contains(., 'In its series')]/following::table[1]")
    text = series.inner_text()
    assert first_id in text and second_id in text  # the releases combined, named
    section = page.locator("xpath=//h2[contains(., 'In its series')]/following-sibling::*").all_inner_texts()
    words = " ".join(section).lower()
    assert "returning" in words and "below" in words  # the figures explained in words
    # the trend over the series' releases is a plot with one mark per release
    trend = page.locator("figure.plot", has_text="series")
    assert trend.count() >= 1
    page.screenshot(path=str(ARTIFACTS / "report-series-2.png"), full_page=True)
    page.close()

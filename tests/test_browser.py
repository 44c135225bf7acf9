"""What a person sees, in a real browser: headless Chromium (Debian's package, /usr/bin/chromium,
driven by playwright without a browser download) opens the Prefect UI's page of the UI-triggered
run of tests/service_scenario.py and the report.html of its release. Screenshots go to
artifacts/browser/ (git-ignored). `make test` installs Chromium when it is missing; without it
these tests fail (never skip), naming what to install."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service_scenario import restart_if_stopped

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "browser"
# no sandbox as root; no background connections (the machine's network is closed to them)
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def launch_chromium() -> Iterator:
    """Debian's Chromium, headless, under playwright; a failure (not a skip) when it is absent, so
    a CI run cannot pass without the browser tests having run."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is not installed: `make test` (or `make chromium`) installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser_page():
    with launch_chromium() as browser:
        yield browser.new_page(viewport={"width": 1400, "height": 1000})


def test_ui_run_page_and_release_report(browser_page, request):
    service = restart_if_stopped(request.getfixturevalue("privpub_service"))
    run = service.runs["override"]
    release_id = run.name  # the run is renamed after its release
    page = browser_page

    page.goto(f"{service.record['url']}/runs/flow-run/{run.id}")
    # the log names the release and its folder; the header shows the run's name and its state
    page.get_by_text(f"committed release {release_id}").first.wait_for(timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "flow-run.png"), full_page=True)
    header = page.locator("h1, .page-heading, header").first.inner_text()
    body = page.inner_text("body")
    assert release_id in header or release_id in body.split("Logs")[0]
    assert "Completed" in body.split("Logs")[0]
    assert "monthly-census" in body

    report = service.home / "data" / "releases" / release_id / "report.html"
    page.goto(report.as_uri())
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    assert release_id in page.title() and page.get_by_text(release_id).first.is_visible()
    privacy = page.locator("xpath=//h2[contains(., 'Privacy')]/following::table[1]")
    assert privacy.is_visible()
    headers = [h.strip().lower() for h in privacy.locator("xpath=./tbody/tr[1]/th | ./tr[1]/th").all_inner_texts()]
    result = headers.index("result")
    # the table's own rows (each worst case is a small table nested in its row)
    rows = privacy.locator("xpath=./tbody/tr[td] | ./tr[td]")
    cells = [rows.nth(i).locator("xpath=./td") for i in range(rows.count())]
    marks = [c.nth(result).inner_text().strip() for c in cells]
    models = [c.first.inner_text().strip() for c in cells]
    assert models == ["k-anonymity", "l-diversity"]  # the demo spec's k and l, as the person reads them
    assert all(m.endswith("pass") for m in marks), marks
    series = page.locator("xpath=//h2[contains(., 'In its series')]/following::table[1]")
    assert series.is_visible() and release_id in series.inner_text()  # its place in the series


def test_the_report_opens_from_the_runs_artifacts_in_the_ui(browser_page, request):
    """Issue 30: from the run's page in the Prefect UI, its Artifacts tab, to the report the
    release service serves over HTTP (not a file path on the server)."""
    service = restart_if_stopped(request.getfixturevalue("privpub_service"))
    run = service.runs["reader"]  # the series' second release
    release_id = run.name
    page = browser_page
    page.set_default_timeout(60_000)
    page.goto(f"{service.record['url']}/runs/flow-run/{run.id}")
    page.get_by_text("Artifacts", exact=True).first.click()
    page.get_by_text("release-report").first.wait_for()
    page.screenshot(path=str(ARTIFACTS / "flow-run-artifacts.png"), full_page=True)
    page.get_by_text("release-report").first.click()  # the artifact's page shows its link
    link = page.get_by_role("link", name=f"report of {release_id}").first
    # issue 42: the verdict above the link (page.artifact_verdict), not only a link and a path
    page.get_by_text("every privacy check passed").first.wait_for()
    assert page.get_by_text(f"Release {release_id}").first.is_visible()
    href = link.get_attribute("href")
    assert href == f"{service.record['reports_url']}/reports/{release_id}"
    page.goto(href)
    page.screenshot(path=str(ARTIFACTS / "served-report.png"), full_page=True)
    assert release_id in page.title()
    verdict = page.locator("#verdict p").first.inner_text()
    assert "occupation" in verdict and "age" in verdict
    series = page.locator("xpath=//h2[contains(., 'In its series')]/following::table[1]").inner_text()
    assert release_id in series and service.runs["override"].name in series  # both releases combined
    assert "nan" not in page.inner_text("body").split()


def test_a_refused_run_reads_as_its_reason_in_the_ui(browser_page, request):
    """Issue 30: a UI run with a misspelled override is named after its one-line reason, ends
    Failed, and its log holds that line and no engine traceback."""
    service = restart_if_stopped(request.getfixturevalue("privpub_service"))
    run = service.runs["misspelled"]
    page = browser_page
    page.set_default_timeout(60_000)
    page.goto(f"{service.record['url']}/runs/flow-run/{run.id}")
    page.get_by_text("Finished in state Failed").first.wait_for()
    page.screenshot(path=str(ARTIFACTS / "flow-run-refused.png"), full_page=True)
    body = page.inner_text("body")
    assert "refused: [technique] kk: unknown key; did you mean k?" in body and "Failed" in body
    assert "Traceback" not in body and 'File "' not in body
    page.goto(f"{service.record['url']}/runs")
    page.get_by_text("refused: [technique] kk: unknown key; did you mean k?").first.wait_for()

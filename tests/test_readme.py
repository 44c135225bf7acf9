"""README.md is read by a newcomer in five minutes, and its links and the docs pages' links lead
somewhere (issue 42): at most 150 lines, every relative link to an existing file and heading, every
docs page reachable from the README, and its commands runnable as pasted into a fresh shell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.promises import ROOT, masked

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every markdown link outside code (a link shown as code leads nowhere)."""
    text = masked(page.read_text())  # a link's text may run over two lines of a paragraph
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(text)]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lowercased, punctuation dropped, spaces to `-`,
    a repeated one suffixed -1, -2, ..."""
    counts: dict[str, int] = {}
    found: set[str] = set()
    text = page.read_text()
    for line, blanked in zip(text.splitlines(), masked(text).splitlines()):
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading and blanked.startswith("#"):  # not a `#` line of a code block
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def test_the_readme_is_at_most_150_lines():
    assert len(README.read_text().splitlines()) <= 150


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading(page):
    broken = []
    for number, target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            broken.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{where}: no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    page = tmp_path / "a.md"
    page.write_text(
        "# A `[x]` title (1)\n\n## Twice\n\n## Twice\n\n"
        "[ok](#a-x-title-1) [ok](#twice-1) [no](#twice-2) [no](b.md) `[code](b.md)`\n\n```\n[code](c.md)\n```\n"
        "[over two\nlines](d.md)\n"
    )
    assert [t for _, t in links(page)] == ["#a-x-title-1", "#twice-1", "#twice-2", "b.md", "d.md"]
    assert {"a-x-title-1", "twice", "twice-1"} <= anchors(page) and "twice-2" not in anchors(page)


def test_the_readme_links_every_docs_page():
    linked = {(ROOT / target.partition("#")[0]).resolve() for _, target in links(README) if target.startswith("docs/")}
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


def test_the_readme_says_first_how_to_call_privpub_and_every_example_works_in_a_fresh_shell():
    text = README.read_text()
    opening = text[: text.index("## The two commands")]
    for words in ("make setup", "make run", ".venv/bin/privpub", "source .venv/bin/activate"):
        assert words in opening, words
    assert "make run" in text and "make test" in text
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    called = [c for c in commands if re.match(r"(\S*/)?privpub\b", c)]
    assert called and all(c.startswith(".venv/bin/privpub ") for c in called), called

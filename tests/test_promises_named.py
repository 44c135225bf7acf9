"""Every promise README.md and docs/*.md mark (`<!-- promise: ID -->`) is named by a test's docstring
(`Promise: ID.`): tests/promises.py, run here so that a new promise without a test fails CI."""

from __future__ import annotations

import subprocess
import sys

from tests.promises import ROOT, problems


def test_every_readme_promise_is_named_by_a_test():
    found, promises = problems()
    assert not found, "\n".join(found)
    assert len(promises) >= 5 and all(p.tests and p.sentence for p in promises.values())


def test_the_check_finds_a_promise_without_a_test_and_a_test_naming_no_promise(tmp_path):
    readme, tests = tmp_path / "README.md", tmp_path / "tests"
    tests.mkdir()
    readme.write_text("Kept. <!-- promise: kept -->\nNever tested. <!-- promise: untested -->\n")
    (tests / "test_x.py").write_text(
        'def test_a():\n    """Promise: kept."""\n\n\ndef test_b():\n    """Promise: gone."""\n\n\n'
        'def helper():\n    """Promise: untested."""\n'  # not a test: names nothing
    )
    found, promises = problems(readme, tests)
    assert promises["kept"].tests == ["tests/test_x.py::test_a"]
    assert len(found) == 2
    assert "README.md:2: promise 'untested' has no test naming it: Never tested." in found
    assert "tests/test_x.py::test_b names promise 'gone', which README.md does not mark" in found


def test_the_script_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "tests.promises"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "named by a test" in done.stdout


def test_the_check_reads_the_docs_pages_too_and_ids_are_unique_across_them(tmp_path):
    readme, tests, docs = tmp_path / "README.md", tmp_path / "tests", tmp_path / "docs"
    tests.mkdir()
    docs.mkdir()
    readme.write_text("Intro.\nKept. <!-- promise: kept -->\n")
    (docs / "a.md").write_text(
        "# A\n\nIn a page. <!-- promise: paged -->\nAgain. <!-- promise: kept -->\n"
        "Shown as code: `<!-- promise: shown -->`, and\n\n```\n<!-- promise: fenced -->\n```\n"
        "A span over `two\nlines <!-- promise: spanned -->` marks nothing.\n"
    )
    (docs / "b.md").write_text("Untested, line 3.\n\nHere. <!-- promise: untested -->\n")
    (tests / "test_x.py").write_text('def test_a():\n    """Promise: kept.\n\n    Promise: paged."""\n')
    found, promises = problems(readme, tests)
    assert set(promises) == {"kept", "paged", "untested"}  # nothing in code blocks or spans
    assert (promises["paged"].where, promises["paged"].sentence) == ("docs/a.md:3", "In a page.")
    assert promises["kept"].where == "README.md:2" and promises["paged"].tests == ["tests/test_x.py::test_a"]
    assert sorted(found) == [
        "docs/b.md:3: promise 'untested' has no test naming it: Here.",
        "promise 'kept' is marked twice: README.md:2 and docs/a.md:4",
    ]
    (tests / "test_y.py").write_text('def test_b():\n    """Promise: gone."""\n')
    found, _ = problems(readme, tests)
    assert "tests/test_y.py::test_b names promise 'gone', which README.md and docs/*.md do not mark" in found


def test_the_listing_names_each_promise_s_file_and_line():
    done = subprocess.run([sys.executable, "-m", "tests.promises", "--list"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "repeat-protection (docs/cli.md:" in done.stdout and "(README.md:" in done.stdout

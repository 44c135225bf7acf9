"""Every promise README.md marks (`<!-- promise: ID -->`) is named by a test's docstring
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

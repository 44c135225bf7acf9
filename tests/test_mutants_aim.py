"""Every mutant of `make mutants` (tests/mutation/run_mutants.py) still aims at code that exists:
its file is there, the text it loosens occurs there (as often as the mutant needs) and the test
files that guard it exist. The runner itself is slow and on demand; this keeps a refactor that
moves a check from silently turning its mutant into an error (issue 40: re-aim in the runner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation.run_mutants import MUTANTS

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mutant_finds_its_text_and_its_tests(mutant):
    path = ROOT / mutant.path
    assert path.is_file(), f"{mutant.name}: {mutant.path} is gone"
    found = path.read_text().count(mutant.old)
    assert found >= mutant.occurrence, f"{mutant.name}: {mutant.old!r} occurs {found} time(s) in {mutant.path}"
    assert mutant.old != mutant.new
    for test in mutant.tests:
        assert (ROOT / test.split("::")[0]).is_file(), f"{mutant.name}: guarding test {test} is gone"


def test_the_runner_keeps_at_least_the_mutants_it_had():
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names)) and len(names) >= 86

"""Every promise the README marks has a test that names it (issue 46; docs/testing.md, "Promises").

A promise is marked in README.md by an HTML comment right after its sentence (invisible on the
rendered page):

    ... is refused with one line ... <!-- promise: repeat-protection -->

A test names it in its docstring: a line `Promise: repeat-protection.` in a `test_*` function of
tests/**/test_*.py. This script lists the README's promises that no test names, the ids named
by tests that the README no longer marks, and ids marked twice; exit status 1 if any.

    python -m tests.promises              # the check (tests/test_promises_named.py runs it)
    python -m tests.promises --list       # every promise, its sentence and the tests naming it
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!--\s*promise:\s*([a-z0-9-]+)\s*-->")
NAMED = re.compile(r"\bpromise:\s*([a-z0-9-]+)", re.IGNORECASE)


@dataclass
class Promise:
    id: str
    line: int
    sentence: str
    tests: list[str] = field(default_factory=list)


def readme_promises(readme: Path) -> tuple[dict[str, Promise], list[str]]:
    """The marked promises ({id: Promise}, the sentence: the marked line's text before the mark)
    and the ids marked more than once."""
    found: dict[str, Promise] = {}
    twice: list[str] = []
    for number, line in enumerate(readme.read_text().splitlines(), start=1):
        for match in MARK.finditer(line):
            pid = match.group(1)
            if pid in found:
                twice.append(pid)
            sentence = MARK.sub("", line[: match.start()]).strip()
            found.setdefault(pid, Promise(pid, number, sentence))
    return found, twice


def naming_tests(tests: Path) -> dict[str, list[str]]:
    """{promise id: ["file::test_function", ...]} from the docstrings of the test functions."""
    named: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                for pid in NAMED.findall(ast.get_docstring(node) or ""):
                    named.setdefault(pid.lower(), []).append(f"{path.relative_to(tests.parent)}::{node.name}")
    return named


def problems(readme: Path = ROOT / "README.md", tests: Path = ROOT / "tests") -> tuple[list[str], dict[str, Promise]]:
    """(one line per problem, the promises with the tests naming each)."""
    promises, twice = readme_promises(readme)
    named = naming_tests(tests)
    out = [f"README.md marks promise '{pid}' twice" for pid in twice]
    for pid, promise in promises.items():
        promise.tests = named.get(pid, [])
        if not promise.tests:
            out.append(f"README.md:{promise.line}: promise '{pid}' has no test naming it: {promise.sentence[-120:]}")
    for pid, where in sorted(named.items()):
        if pid not in promises:
            out.append(f"{where[0]} names promise '{pid}', which README.md does not mark")
    return out, promises


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every promise and the tests that name it")
    args = ap.parse_args(argv)
    found, promises = problems()
    if args.list:
        for p in promises.values():
            print(f"{p.id} (README.md:{p.line}): {p.sentence}")
            for t in p.tests:
                print(f"    {t}")
    for line in found:
        print(line, file=sys.stderr)
    print(f"{len(promises)} promises, {len(promises) - sum(not p.tests for p in promises.values())} named by a test")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

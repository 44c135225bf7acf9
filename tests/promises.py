"""Every promise README.md and docs/*.md mark has a test that names it (issue 46; docs/testing.md,
"Promises").

A promise is marked in README.md or a docs/*.md page by an HTML comment right after its sentence
(invisible on the rendered page):

    ... is refused with one line ... <!-- promise: repeat-protection -->

A test names it in its docstring: a line `Promise: repeat-protection.` in a `test_*` function of
tests/**/test_*.py. This script lists the promises that no test names (file:line), the ids named
by tests that no page marks, and ids marked twice (ids are unique across README.md and every
docs page); exit status 1 if any.

    python -m tests.promises              # the check (tests/test_promises_named.py runs it)
    python -m tests.promises --list       # every promise, its file:line, sentence and the tests naming it
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
# a fenced block (``` or ~~~ to the same fence); an inline code span, never across a blank line
FENCED = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))*`")
NAMED = re.compile(r"\bpromise:\s*([a-z0-9-]+)", re.IGNORECASE)


@dataclass
class Promise:
    id: str
    line: int
    sentence: str
    tests: list[str] = field(default_factory=list)
    file: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def masked(text: str) -> str:
    """`text` with its code blocks and inline code spans (which may run over lines of a paragraph)
    blanked, newlines and positions kept: a mark shown as code (docs/testing.md's example) marks
    nothing."""
    keep_lines = lambda m: "".join(c if c == "\n" else "x" for c in m.group(0))  # noqa: E731
    return CODE_SPAN.sub(keep_lines, FENCED.sub(keep_lines, text))


def readme_promises(readme: Path, name: str = "README.md") -> tuple[dict[str, Promise], list[str]]:
    """The promises one page marks ({id: Promise}, the sentence: the marked line's text before the
    mark) and the ids it marks more than once."""
    found: dict[str, Promise] = {}
    twice: list[str] = []
    text = readme.read_text()
    for number, (line, blanked) in enumerate(zip(text.splitlines(), masked(text).splitlines()), start=1):
        for match in MARK.finditer(blanked):
            pid = match.group(1)
            if pid in found:
                twice.append(pid)
            sentence = MARK.sub("", line[: match.start()]).strip()
            found.setdefault(pid, Promise(pid, number, sentence, file=name))
    return found, twice


def pages(readme: Path) -> list[tuple[Path, str]]:
    """README.md, then every docs/*.md beside it (by name), each with the name problems print."""
    docs = sorted((readme.parent / "docs").glob("*.md"))
    return [(readme, readme.name)] + [(page, f"docs/{page.name}") for page in docs]


def marked_promises(readme: Path) -> tuple[dict[str, Promise], list[str]]:
    """The promises of README.md and docs/*.md, and one line per id marked more than once (anywhere)."""
    found: dict[str, Promise] = {}
    twice: list[str] = []
    for page, name in pages(readme):
        promises, repeated = readme_promises(page, name)
        twice += [f"{name} marks promise '{pid}' twice" for pid in repeated]
        for pid, promise in promises.items():
            if pid in found:
                twice.append(f"promise '{pid}' is marked twice: {found[pid].where} and {promise.where}")
            else:
                found[pid] = promise
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
    """(one line per problem, the promises with the tests naming each). The promises are those
    of `readme` and of the docs/*.md pages beside it."""
    promises, out = marked_promises(readme)
    named = naming_tests(tests)
    for pid, promise in promises.items():
        promise.tests = named.get(pid, [])
        if not promise.tests:
            out.append(f"{promise.where}: promise '{pid}' has no test naming it: {promise.sentence[-120:]}")
    marking = " and ".join(["README.md"] + (["docs/*.md"] if len(pages(readme)) > 1 else []))
    for pid, where in sorted(named.items()):
        if pid not in promises:
            out.append(
                f"{where[0]} names promise '{pid}', which {marking} {'do' if ' and ' in marking else 'does'} not mark"
            )
    return out, promises


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every promise and the tests that name it")
    args = ap.parse_args(argv)
    found, promises = problems()
    if args.list:
        for p in promises.values():
            print(f"{p.id} ({p.where}): {p.sentence}")
            for t in p.tests:
                print(f"    {t}")
    for line in found:
        print(line, file=sys.stderr)
    print(f"{len(promises)} promises, {len(promises) - sum(not p.tests for p in promises.values())} named by a test")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

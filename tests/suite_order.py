"""The order in which `make test`'s workers take the test files (pytest-xdist, `--dist loadfile
--no-loadscope-reorder`): the longest files first, so that the two workers finish together
(longest-processing-time order; docs/testing.md "Suite speed").

xdist's own order (the files with the most tests first) started the few-test, minutes-long oracle
files last, and the wall time was that of the worker that drew them. Here the files listed below
come first, longest first, then the others, the most tests first. A file still runs whole in one
worker, its tests in their order. Only in an xdist worker: a run without -n keeps pytest's order.

Refresh the seconds from a run's `--durations=0` output:
    .venv/bin/python -m tests.suite_order < durations.txt
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter, defaultdict

import pytest

# Seconds per file (setup, call and teardown of its tests, `--durations=0`), measured on the
# 2-core machine under load (docs/testing.md "Suite speed"): only the order matters.
SECONDS = {
    "tests/test_service_e2e.py": 300,
}


def order(items: list[pytest.Item]) -> None:
    """Sort the tests by their file's seconds, then by its number of tests, longest first (a
    stable sort: a file's tests keep their order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = {id(item): item.nodeid.split("::")[0] for item in items}
    tests = Counter(path.values())
    items.sort(key=lambda item: (-SECONDS.get(path[id(item)], 0), -tests[path[id(item)]], path[id(item)]))


def seconds_per_file(durations: str) -> dict[str, float]:
    """Sum pytest's `--durations=0` lines ("12.34s call tests/x.py::test[a]") per file."""
    total: dict[str, float] = defaultdict(float)
    for secs, nodeid in re.findall(r"^\s*([\d.]+)s\s+(?:setup|call|teardown)\s+(\S+)", durations, flags=re.M):
        total[nodeid.split("::")[0]] += float(secs)
    return dict(sorted(total.items(), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    for path, secs in seconds_per_file(sys.stdin.read()).items():
        print(f'    "{path}": {secs:.0f},')

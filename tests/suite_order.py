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

# Seconds per file (setup, call and teardown of its tests) under `make test`, estimated from CI's
# 30-40 slowest tests (2026-11-28 runs, loaded: lower bounds) and the files measured in
# docs/testing.md "Suite speed" (session 19: the files whose sweeps it shrank, scaled by the
# measured ratio); only the order matters. A browser or service_e2e file includes the
# session scenario (tests/service_scenario.py, about a minute) in the worker that starts it first.
SECONDS = {
    "tests/test_hardening.py": 180,
    "tests/test_audit_cli.py": 130,
    "tests/test_browser.py": 120,
    "tests/test_service_e2e.py": 110,
    "tests/test_series_composition.py": 75,
    "tests/test_composition_oracle.py": 70,
    "tests/test_cluster_release.py": 60,
    "tests/test_thresholds.py": 60,
    "tests/test_series_remedies.py": 50,
    "tests/test_commit_recovery.py": 50,
    "tests/audit/test_after_denial.py": 32,
    "tests/test_chunked_verify.py": 30,
    "tests/test_composition_people.py": 30,
    "tests/test_pseudonyms.py": 30,
    "tests/test_serial_incremental.py": 20,
}


# Each worker that uses tests/service_scenario.py's session service runs the scenario once. The
# browser's file goes first and service_e2e's third: xdist sends a worker its next file when it has
# 2 tests left, so the worker on the browser's 3 tests takes service_e2e while the other is still
# on the second (a long file of many tests): one worker runs both files and the scenario once, the
# browser's tests before service_e2e's stop tests. Another xdist may split them: both still pass
# (restart_if_stopped), the scenario then runs twice.
SCENARIO_FILES = ("tests/test_browser.py", "tests/test_service_e2e.py")


def file_order(tests: Counter) -> list[str]:
    """The files longest first (SECONDS, then the most tests), the scenario's files first and third."""
    files = sorted(tests, key=lambda f: (-SECONDS.get(f, 0), -tests[f], f))
    browser, service = SCENARIO_FILES
    if browser in files and service in files and len(files) >= 3:
        files.remove(browser)
        files.remove(service)
        files[:1] = [browser, files[0], service]
    return files


def order(items: list[pytest.Item]) -> None:
    """Sort the tests by file_order (a stable sort: a file's tests keep their order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = {id(item): item.nodeid.split("::")[0] for item in items}
    rank = {f: i for i, f in enumerate(file_order(Counter(path.values())))}
    items.sort(key=lambda item: rank[path[id(item)]])


def seconds_per_file(durations: str) -> dict[str, float]:
    """Sum pytest's `--durations=0` lines ("12.34s call tests/x.py::test[a]") per file."""
    total: dict[str, float] = defaultdict(float)
    for secs, nodeid in re.findall(r"^\s*([\d.]+)s\s+(?:setup|call|teardown)\s+(\S+)", durations, flags=re.M):
        total[nodeid.split("::")[0]] += float(secs)
    return dict(sorted(total.items(), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    for path, secs in seconds_per_file(sys.stdin.read()).items():
        print(f'    "{path}": {secs:.0f},')

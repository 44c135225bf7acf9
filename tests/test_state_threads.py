"""A command that makes a release opens the state's DuckDB with one thread fewer than the
machine's cores (state/attached.py `leave_a_core`): its evaluation runs beside the commit's writes
(issue 43, session 25: 0.33 s at 1M on two cores). Other commands keep DuckDB's default."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# main() as the process's entry, with the machine's cores as given; then each kept state
# database's thread setting
SCRIPT = """
import os, sys
cores = int(sys.argv[1])
os.cpu_count = lambda: cores
from privpub.flows import cli
from privpub.state import attached
sys.argv = ["privpub", *sys.argv[2:]]
cli.main()
print(sorted({h.base.execute("SELECT current_setting('threads')").fetchone()[0] for h in attached._HOSTS.values()}))
"""


def threads_after(cores: int, *args: str) -> str:
    ran = subprocess.run([sys.executable, "-c", SCRIPT, str(cores), *args], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("threads")
    assert threads_after(os.cpu_count() or 1, "demo", "--dir", str(folder), "--quiet")
    return folder


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 3)])
def test_a_release_leaves_a_core_to_its_own_threads(demo, cores, threads):
    assert threads_after(cores, "demo", "--dir", str(demo), "--quiet") == f"[{threads}]"


def test_other_commands_keep_duckdbs_default(demo):
    default = threads_after(4, "history", "--state", str(demo / "privpub.duckdb"))
    assert default == f"[{os.cpu_count()}]"  # DuckDB counts the cores itself

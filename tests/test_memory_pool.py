"""The `privpub` command picks Arrow's system memory pool (issue 43 item 3: mimalloc kept freed
pages, 100-150 MiB more at the 1M publish's peak; docs/benchmarks.md), unless the operator named one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# main() as the process's entry (no argv), then the pool Arrow uses afterwards
SCRIPT = """
import sys
from privpub.flows import cli
sys.argv = ["privpub", "history", "--state", sys.argv[1]]
cli.main()
import pyarrow
print(pyarrow.default_memory_pool().backend_name)
"""


def pool_after_main(tmp_path, preset: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if preset is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = preset
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "absent.duckdb")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def test_the_command_uses_the_system_pool(tmp_path):
    assert pool_after_main(tmp_path, None) == "system"


@pytest.mark.parametrize("named", ["mimalloc", "system"])
def test_the_operators_pool_is_kept(tmp_path, named):
    assert pool_after_main(tmp_path, named) == named

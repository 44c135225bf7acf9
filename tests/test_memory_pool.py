"""The `privpub` command picks Arrow's system memory pool (issue 43 item 3: mimalloc kept freed
pages, 100-150 MiB more at the 1M publish's peak; docs/benchmarks.md), unless the operator named one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from privpub.flows.cli import MALLOC_SETTINGS as MALLOC_VARIABLES

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


ARENA = """
import os, sys
from privpub.flows import cli
print(cli.one_malloc_arena())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_the_command_keeps_one_malloc_arena_unless_the_operator_chose(tmp_path):
    """Steps beside each other share glibc's one arena (issue 43: 100-150 MiB less at the 1M
    publish's peak); MALLOC_ARENA_MAX set by the operator is left to glibc."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    ran = subprocess.run([sys.executable, "-c", ARENA], env=env, capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "True"
    ran = subprocess.run(
        [sys.executable, "-c", ARENA], env={**env, "MALLOC_ARENA_MAX": "4"}, capture_output=True, text=True, check=True
    )
    assert ran.stdout.strip() == "False"


# where glibc puts a 64 MiB block after main() ran as the process's entry for one command
HEAP = """
import ctypes, sys
from privpub.flows import cli
sys.argv = ["privpub", sys.argv[1], sys.argv[2]]
try:
    cli.main()
except SystemExit:
    pass
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
at = libc.malloc(64 << 20)
for line in open("/proc/self/maps"):
    span, *rest = line.split()
    lo, hi = (int(x, 16) for x in span.split("-"))
    if lo <= at < hi:
        print("heap" if rest[-1] == "[heap]" else "own mapping")
"""


def block_after(tmp_path, command: str, env: dict[str, str]) -> str:
    spec = tmp_path / "absent.toml"  # refused in one line: main returns, the settings stay
    ran = subprocess.run([sys.executable, "-c", HEAP, command, str(spec)], env=env, capture_output=True, text=True)
    return ran.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_publish_keeps_its_arrays_on_the_heap_unless_the_operator_chose(tmp_path):
    """Issue 43: `privpub publish` and `serial` have glibc serve arrays up to a GiB from its heap
    and keep what is freed there (fewer page faults); any other command, and an operator who set
    a malloc variable, keep glibc's own policy (a 64 MiB block in a mapping of its own)."""
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_VARIABLES}
    assert block_after(tmp_path, "publish", env) == "heap"
    assert block_after(tmp_path, "serial", env) == "heap"
    assert block_after(tmp_path, "history", env) == "own mapping"
    for name in MALLOC_VARIABLES:
        value = "glibc.malloc.check=0" if name == "GLIBC_TUNABLES" else "131072"
        assert block_after(tmp_path, "publish", {**env, name: value}) == "own mapping", name


PLUGINS = """
import os, sys
from privpub.flows import cli
sys.argv = ["privpub", "history", "--state", sys.argv[1]]
cli.main()
import importlib.metadata
scans = []
real = importlib.metadata.entry_points
importlib.metadata.entry_points = lambda **kw: scans.append(kw) or real(**kw)
import pandera.pandas  # pydantic and typeguard, imported by the command's validation
from privpub.schemas.spec import load_spec  # a pydantic model built
print(os.environ.get("PYDANTIC_DISABLE_PLUGINS"), os.environ.get("TYPEGUARD_DISABLE_PLUGIN_AUTOLOAD"), len(scans))
"""


def test_the_command_skips_the_plugin_scans_of_pydantic_and_typeguard_unless_the_operator_chose(tmp_path):
    """Issue 43 item 4: pydantic and typeguard each scan every installed package's entry points
    for plugins privpub does not use; the command turns both scans off (10-20 ms), and keeps
    what an operator set."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYDANTIC_DISABLE_PLUGINS", "TYPEGUARD_DISABLE_PLUGIN_AUTOLOAD")
    }

    def run(extra: dict[str, str]) -> str:
        ran = subprocess.run(
            [sys.executable, "-c", PLUGINS, str(tmp_path / "absent.duckdb")],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
        )
        return ran.stdout.strip().splitlines()[-1]

    assert run({}) == "__all__ 1 0"
    assert run({"PYDANTIC_DISABLE_PLUGINS": "logfire"}).startswith("logfire 1 ")

"""The one place privpub imports a module on first use.

`privpub --help` and `privpub history` must not pay for Prefect, Dask, the techniques or the
report (tests/test_cli.py), and a release without a Prefect server must not import Prefect at
all (tests/test_drivers.py). So the CLI's command table names each command's function as a
"module:function" string, and the Prefect flows are reached the same way only when a server is
configured; every other import is at the top of its module (tests/test_code_shape.py).

The other imports inside functions are of optional dependencies, listed here, each at a point
that runs only when the feature is used: Prefect (a server's flow runs, the run's logger and
attribution once a flow loaded it), Dask's `distributed` (`[run] task_runner = "dask"`) and
httpx (Prefect's HTTP client, to wait for a server starting); and of scipy where only an optional
feature needs it: the population models ([risk] population, tasks/population_models.py), which
would otherwise add half a second to every release's start-up (docs/benchmarks.md); and of
scikit-learn ([evaluate] target) and OpenDP (dp-synthetic's accounting), for the same reason.
"""

from __future__ import annotations

import importlib
from typing import Any

# top-level packages a function may import when it runs (tests/test_code_shape.py)
OPTIONAL_DEPENDENCIES: frozenset[str] = frozenset({"prefect", "distributed", "httpx", "scipy", "sklearn", "opendp"})


def load_lazily(target: str) -> Any:
    """The attribute `target` names ("package.module:attribute"), its module imported now."""
    module, sep, attribute = target.partition(":")
    if not sep or not attribute:
        raise ValueError(f"{target!r}: expected 'module:attribute'")
    return getattr(importlib.import_module(module), attribute)

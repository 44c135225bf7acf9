"""Fault injection for the crash-safety tests.

PRIVPUB_PAUSE_AT=<stage> makes the process announce the stage (it creates the file named by
PRIVPUB_PAUSE_FLAG) and sleep there, so a test can SIGKILL it at a known point.
PRIVPUB_FAIL_AT=<stage> raises an error there instead. Unset, this costs two environment lookups.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


class InjectedFailure(RuntimeError):
    """Raised at PRIVPUB_FAIL_AT: an unexpected error at a known point."""


def failpoint(stage: str) -> None:
    if os.environ.get("PRIVPUB_FAIL_AT") == stage:
        raise InjectedFailure(f"injected failure at {stage}")
    if os.environ.get("PRIVPUB_PAUSE_AT") != stage:
        return
    flag = os.environ.get("PRIVPUB_PAUSE_FLAG")
    if flag:
        Path(flag).write_text(stage)
    time.sleep(float(os.environ.get("PRIVPUB_PAUSE_SECONDS", "600")))

"""Which driver runs a release, chosen once per command (flows/pipeline.py has the pipeline).

A Prefect server configured (PREFECT_API_URL in the environment, in the active Prefect profile,
or in the settings of a Prefect already loaded in this process) or this home's `privpub server`
running: the release is a flow run of it (flows/publish.py), visible in its UI. Otherwise the
steps run as plain calls in this process: no server is started, Prefect is not even imported.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def profile_api_url() -> str | None:
    """PREFECT_API_URL of the active Prefect profile (read as Prefect would, without importing it)."""
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    try:
        profiles = tomllib.loads((home / "profiles.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    url = profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL")
    return str(url) if url else None


def prefect_configured() -> str | None:
    """The Prefect API a run would report to, or None when there is none."""
    url = os.environ.get("PREFECT_API_URL")
    if url:
        return url
    if "prefect.settings" in sys.modules:  # a caller inside Prefect (a flow, a test harness)
        from prefect.settings import PREFECT_API_URL  # lazy: only when Prefect is already loaded

        if PREFECT_API_URL.value():
            return str(PREFECT_API_URL.value())
    url = profile_api_url()
    if url:
        return url
    from privpub.flows.service import running_service  # lazy: `--help` imports nothing

    return running_service()


def publish_release(
    spec_path: str,
    overrides: dict | None = None,
    actor: str | None = None,
    progress: Callable[[str], None] | None = None,
    allow_repeat: bool = False,
    frame: pd.DataFrame | None = None,
) -> str:
    """Publish the next release of the spec's series; returns its id (`privpub.publish`, in
    flows/api.py, is built on it).

    With a Prefect server configured or running, as a flow run of it (flows/publish.py);
    otherwise in this process with no server. The release is the same either way. `progress`
    receives one line per step (e.g. `print`; None: silent). `frame`: the input rows, for a spec
    whose [dataset] input is "<DataFrame>"; such a release always runs in this process (a flow
    run's parameters and task inputs are the server's to keep, and rows must never get there).
    Raises SpecError, InputError, PrivacyRefused, ... with a one-line message; every attempt
    leaves its row in the audit log."""
    from privpub.schemas.spec import resolve_spec  # lazy: `import privpub` stays cheap
    from privpub.tasks.techniques.registry import get_technique

    get_technique(resolve_spec(spec_path, None, overrides))  # a bad spec fails before the attempt
    if frame is None and prefect_configured():
        from privpub.flows.publish import publish  # lazy: Prefect only when used

        return publish(spec_path, overrides, actor, allow_repeat=allow_repeat)
    from privpub.flows.pipeline import Driver, attempt  # lazy: as above
    from privpub.schemas.input import frame_input

    with frame_input(frame) if frame is not None else contextlib.nullcontext():
        return attempt(spec_path, overrides, actor, driver=Driver(progress), allow_repeat=allow_repeat)

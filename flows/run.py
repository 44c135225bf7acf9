"""Which driver runs a release, chosen once per command (flows/pipeline.py has the pipeline;
flows/api.py `publish_release` asks here).

A Prefect server configured (PREFECT_API_URL in the environment, in the active Prefect profile,
or in the settings of a Prefect already loaded in this process) or this home's `privpub server`
running: the release is a flow run of it (flows/publish.py), visible in its UI. Otherwise the
steps run as plain calls in this process: no server is started, Prefect is not even imported.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from privpub.flows.service import running_service


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
    return running_service()

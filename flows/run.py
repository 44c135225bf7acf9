"""Which driver runs a release, chosen once per command (flows/pipeline.py has the pipeline;
flows/api.py `publish_release` asks here).

A release runs in this process, as plain calls (no server started, Prefect not even imported),
whether or not a server runs, unless the run asks to be recorded on one (issue 42): `--server`
(publish, serial) or `[run] server = true`. Then it is a flow run (flows/publish.py), visible in
the UI, of the Prefect server configured (PREFECT_API_URL in the environment, in the active
Prefect profile, or in the settings of a Prefect already loaded in this process), else of this
home's `privpub server`; with neither the run is refused before any work. Runs the service's
deployments start (UI, schedule) are flow runs of it whatever their spec says.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from privpub.flows.lazy import load_lazily
from privpub.schemas.command import command_name
from privpub.schemas.errors import CliError

NO_SERVER = (
    "--server / [run] server = true: no Prefect server to record the run on "
    "(start one with `{command} server start`, or set PREFECT_API_URL)"
)


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
    return load_lazily("privpub.flows.service:running_service")()  # its HTTP client only when asked


def recording_server(asked: bool) -> str | None:
    """The Prefect API a release reports to: None (in this process) unless `asked` (`--server`,
    `[run] server = true`); asked, the configured API or the running service, else refused."""
    if not asked:
        return None
    url = prefect_configured()
    if url is None:
        raise CliError(NO_SERVER.format(command=command_name()))
    return url

"""Serve the privpub deployments: `publish/monthly-census` and `serial/monthly-serial`.

Normally started by `privpub server start` (flows/service.py), which sets PREFECT_API_URL and
PRIVPUB_HOME; by hand: `PREFECT_API_URL=... python -m deployments.serve`. serve() registers the
deployments and executes their runs itself, so no work pool or worker is needed. Parameters are
editable per run in the UI ("Custom run").

Settings, in one place: `<home>/service.toml` (home = PRIVPUB_HOME, default ~/.privpub), e.g.

    spec = "census.toml"          # the monthly publish's spec (relative paths: from the home folder)
    serial_spec = "serial.toml"   # the serial series' spec
    cron = "0 2 1 * *"            # both schedules (default: 02:00 on the 1st of every month)
    timezone = "Europe/Vienna"    # the cron's time zone (IANA name; default "UTC")

Each key can be overridden by the environment: PRIVPUB_SPEC, PRIVPUB_SERIAL_SPEC, PRIVPUB_CRON,
PRIVPUB_TIMEZONE. A spec left unset is the demo's, made in `<home>/demo/` when absent. A spec's
[run] task_runner = "dask" sends a technique's chunk tasks to a local Dask cluster (the flow reads
it at run time; see flows/publish.py::_map_chunks).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from privpub.flows.service import service_home

DEFAULT_CRON = "0 2 1 * *"
SETTINGS = {
    "spec": "PRIVPUB_SPEC",
    "serial_spec": "PRIVPUB_SERIAL_SPEC",
    "cron": "PRIVPUB_CRON",
    "timezone": "PRIVPUB_TIMEZONE",
}


def service_settings(home: Path | None = None) -> dict:
    """service.toml's keys, each overridden by its environment variable; unknown keys refused
    (a misspelled `timezon` must not silently schedule in UTC)."""
    from privpub.schemas.spec import SpecError, check_known_keys

    home = home or service_home()
    path = home / "service.toml"
    data = tomllib.loads(path.read_text()) if path.is_file() else {}
    check_known_keys(f"{path}:", data, list(SETTINGS))
    settings: dict[str, Any] = {key: os.environ.get(env) or data.get(key) for key, env in SETTINGS.items()}
    settings["cron"] = settings["cron"] or DEFAULT_CRON
    settings["timezone"] = settings["timezone"] or "UTC"
    try:
        ZoneInfo(settings["timezone"])
    except (ValueError, ZoneInfoNotFoundError):
        raise SpecError(
            f'{path}: timezone {settings["timezone"]!r} is not a time zone name (an IANA name such as "Europe/Vienna")'
        ) from None
    for key in ("spec", "serial_spec"):
        if settings[key]:
            settings[key] = str((home / Path(settings[key]).expanduser()).resolve())
    return settings


def deployments(home: Path | None = None):
    from prefect.schedules import Cron

    from privpub.flows.demo import prepare_demo, prepare_serial_demo
    from privpub.flows.publish import publish_flow
    from privpub.flows.serial import serial_flow

    home = home or service_home()
    settings = service_settings(home)
    spec = settings["spec"] or str(prepare_demo(home / "demo"))
    serial_spec = settings["serial_spec"] or str(prepare_serial_demo(home / "demo"))
    defaults: dict[str, Any] = {"overrides": {}, "actor": None, "new_release": False}
    return [
        publish_flow.to_deployment(
            name="monthly-census",
            schedule=Cron(settings["cron"], timezone=settings["timezone"]),
            parameters={"spec_path": spec, **defaults},
            description="Publish the next release of the series in spec_path (monthly).",
            tags=["privpub", "release"],
        ),
        serial_flow.to_deployment(
            name="monthly-serial",
            schedule=Cron(settings["cron"], timezone=settings["timezone"]),
            parameters={"spec_path": serial_spec, **defaults},
            description="Publish the next release of a serial series under the global guarantee.",
            tags=["privpub", "serial"],
        ),
    ]


if __name__ == "__main__":
    from prefect import serve

    serve(*deployments(), pause_on_shutdown=False)

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

from pathlib import Path
from typing import Any

from prefect.schedules import Cron

from privpub.flows.demo import prepare_demo, prepare_serial_demo
from privpub.flows.publish import publish_flow
from privpub.flows.serial import serial_flow
from privpub.flows.service import service_home, service_settings


def deployments(home: Path | None = None):
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

"""Serve the privpub deployments: `python -m deployments.serve` (with PREFECT_API_URL pointing at a
running `prefect server start`). serve() registers the deployments and executes their runs itself,
so no work pool or worker is needed. Parameters are editable per run in the UI ("Custom run").

    PRIVPUB_SPEC   the spec file the monthly publish uses (default: demo/census.toml, made if absent);
                   its [run] task_runner = "dask" sends a technique's chunk tasks to a local Dask
                   cluster (the flow reads it at run time; see flows/publish.py::_map_chunks)
    PRIVPUB_CRON   its schedule (default: 02:00 on the 1st of every month)
    PRIVPUB_SERIAL_SPEC  the serial series' spec (default: demo/serial.toml, made if absent)
"""
from __future__ import annotations

import os
from pathlib import Path

from prefect import serve

from flows.demo import prepare_demo, prepare_serial_demo
from flows.publish import publish_flow
from flows.serial import serial_flow


def deployments():
    spec = os.environ.get("PRIVPUB_SPEC") or str(prepare_demo(Path("demo")))
    cron = os.environ.get("PRIVPUB_CRON", "0 2 1 * *")
    return [publish_flow.to_deployment(
        name="monthly-census", cron=cron,
        parameters={"spec_path": str(Path(spec).resolve()), "overrides": {}, "actor": None,
                    "new_release": False},
        description="Publish the next release of the series in spec_path (monthly).",
        tags=["privpub", "release"]),
        serial_flow.to_deployment(
            name="monthly-serial", cron=cron,
            parameters={"spec_path": str(Path(os.environ.get("PRIVPUB_SERIAL_SPEC")
                                              or prepare_serial_demo(Path("demo"))).resolve()),
                        "overrides": {}, "actor": None, "new_release": False},
            description="Publish the next release of a serial series under the global guarantee.",
            tags=["privpub", "serial"])]


if __name__ == "__main__":
    serve(*deployments(), pause_on_shutdown=False)

"""The monthly deployment: a cron schedule and editable parameters for the publish flow."""
from __future__ import annotations

from deployments.serve import deployments


def test_monthly_publish_deployment(tmp_path, monkeypatch):
    spec = tmp_path / "spec.toml"
    spec.write_text("")
    monkeypatch.setenv("PRIVPUB_SPEC", str(spec))
    monkeypatch.setenv("PRIVPUB_SERIAL_SPEC", str(spec))
    dep, serial = deployments()
    assert serial.name == "monthly-serial" and [s.schedule.cron for s in serial.schedules] == ["0 2 1 * *"]
    assert dep.name == "monthly-census"
    crons = [s.schedule.cron for s in dep.schedules]
    assert crons == ["0 2 1 * *"]
    assert dep.parameters["spec_path"] == str(spec.resolve())
    # the UI's "Custom run" form is built from the flow's typed parameters
    from prefect.utilities.callables import parameter_schema

    from flows.publish import publish_flow

    props = parameter_schema(publish_flow).model_dump()["properties"]
    assert {"spec_path", "overrides", "actor"} <= set(props)
    assert props["spec_path"]["type"] == "string"


def test_serial_demo_spec_is_a_serial_series(tmp_path):
    from flows.demo import prepare_serial_demo
    from schemas.spec import load_spec

    spec = load_spec(prepare_serial_demo(tmp_path, rows=200))
    assert spec.technique.name == "serial" and spec.dataset.name == "census-serial"
    assert spec.technique.params["l"] == 4 and spec.output.state == "privpub.duckdb"

"""The monthly deployment: a cron schedule and editable parameters for the publish flow."""
from __future__ import annotations

from deployments.serve import deployments


def test_monthly_publish_deployment(tmp_path, monkeypatch):
    spec = tmp_path / "spec.toml"
    spec.write_text("")
    monkeypatch.setenv("PRIVPUB_SPEC", str(spec))
    (dep,) = deployments()
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

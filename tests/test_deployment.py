"""The monthly deployment: a cron schedule and editable parameters for the publish flow."""

from __future__ import annotations

from privpub.deployments.serve import deployments


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

    from privpub.flows.publish import publish_flow

    props = parameter_schema(publish_flow).model_dump()["properties"]
    assert {"spec_path", "overrides", "actor"} <= set(props)
    assert props["spec_path"]["type"] == "string"


def test_serial_demo_spec_is_a_serial_series(tmp_path):
    from privpub.flows.demo import prepare_serial_demo
    from privpub.schemas.spec import load_spec

    spec = load_spec(prepare_serial_demo(tmp_path, rows=200))
    assert spec.technique.name == "serial" and spec.dataset.name == "census-serial"
    assert spec.technique.params["l"] == 4 and spec.output.state == "privpub.duckdb"


def test_service_settings_come_from_service_toml_with_env_overrides(tmp_path, monkeypatch):
    from privpub.flows.service import service_settings

    for env in ("PRIVPUB_SPEC", "PRIVPUB_SERIAL_SPEC", "PRIVPUB_CRON", "PRIVPUB_TIMEZONE"):
        monkeypatch.delenv(env, raising=False)
    assert service_settings(tmp_path) == {"spec": None, "serial_spec": None, "cron": "0 2 1 * *", "timezone": "UTC"}
    (tmp_path / "service.toml").write_text('spec = "specs/a.toml"\ncron = "0 3 * * *"\ntimezone = "Europe/Vienna"\n')
    got = service_settings(tmp_path)
    assert got["spec"] == str(tmp_path.resolve() / "specs" / "a.toml")  # relative to the home folder
    assert (got["cron"], got["timezone"]) == ("0 3 * * *", "Europe/Vienna")
    monkeypatch.setenv("PRIVPUB_CRON", "0 4 1 * *")
    monkeypatch.setenv("PRIVPUB_TIMEZONE", "America/New_York")
    assert service_settings(tmp_path)["cron"] == "0 4 1 * *"
    assert service_settings(tmp_path)["timezone"] == "America/New_York"


def test_a_misspelled_service_setting_is_refused(tmp_path):
    import pytest

    from privpub.flows.service import service_settings
    from privpub.schemas.errors import SpecError

    (tmp_path / "service.toml").write_text('timezon = "Europe/Vienna"\n')
    with pytest.raises(SpecError, match="timezon: unknown key; did you mean timezone"):
        service_settings(tmp_path)
    (tmp_path / "service.toml").write_text('timezone = "Europe/Vienn"\n')
    with pytest.raises(SpecError, match="'Europe/Vienn' is not a time zone name"):
        service_settings(tmp_path)


def test_the_schedule_runs_in_the_configured_timezone(tmp_path, monkeypatch):
    spec = tmp_path / "spec.toml"
    spec.write_text("")
    monkeypatch.setenv("PRIVPUB_SPEC", str(spec))
    monkeypatch.setenv("PRIVPUB_SERIAL_SPEC", str(spec))
    monkeypatch.setenv("PRIVPUB_TIMEZONE", "Europe/Vienna")
    for dep in deployments(tmp_path):
        assert [s.schedule.timezone for s in dep.schedules] == ["Europe/Vienna"]
    monkeypatch.delenv("PRIVPUB_TIMEZONE")
    assert [s.schedule.timezone for s in deployments(tmp_path)[0].schedules] == ["UTC"]


def test_every_deployment_parameter_has_help_text(tmp_path, monkeypatch):
    """The UI's Custom run form shows a description under each parameter: Prefect reads them from
    the flows' Google-style "Args:" docstrings into the deployment's parameter schema."""
    spec = tmp_path / "spec.toml"
    spec.write_text("")
    monkeypatch.setenv("PRIVPUB_SPEC", str(spec))
    monkeypatch.setenv("PRIVPUB_SERIAL_SPEC", str(spec))
    for dep in deployments(tmp_path):
        props = dep._parameter_openapi_schema.model_dump()["properties"]
        assert set(props) == {"spec_path", "overrides", "actor", "new_release", "allow_repeat"}, dep.name
        for name, prop in props.items():
            description = prop.get("description") or ""
            assert description.strip() and "\n" not in description.strip(), (dep.name, name)
    publish = deployments(tmp_path)[0]._parameter_openapi_schema.model_dump()["properties"]
    assert '{"technique": {"k": 20}}' in publish["overrides"]["description"]

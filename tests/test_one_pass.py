"""One pass through a publish (issue 40): the spec is resolved and checked once, into the run's
plan (flows/pipeline.py RunPlan), and nothing between the CLI's or the API's entry and the commit
resolves it again. Counted here by wrapping schemas.spec.resolve_spec wherever a module looked it
up, in one CLI publish (in process, with and without a Prefect server) and one privpub.publish."""

from __future__ import annotations

import sys

import pytest

import privpub
from privpub.flows import pipeline, run
from privpub.flows.cli import main
from privpub.schemas import spec as spec_module
from privpub.schemas.errors import SpecError
from privpub.state.store import Store
from privpub.tasks.demo_data import census, census_spec
from tests.helpers import write_spec


def _load_the_modules_a_publish_runs_through() -> None:
    """Loaded before counting: a module first imported while resolve_spec is wrapped would keep
    the wrapper for good."""
    import privpub.flows.api  # noqa: F401
    import privpub.flows.cli_release  # noqa: F401
    import privpub.flows.publish  # noqa: F401


@pytest.fixture
def resolutions(monkeypatch) -> list[tuple]:
    """Every call of resolve_spec from now on, by whichever module's name for it."""
    _load_the_modules_a_publish_runs_through()
    original = spec_module.resolve_spec
    calls: list[tuple] = []

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("privpub") and getattr(module, "resolve_spec", None) is original:
            monkeypatch.setattr(module, "resolve_spec", counted)
    return calls


@pytest.fixture
def no_server(monkeypatch):
    monkeypatch.setattr(run, "prefect_configured", lambda: None)


def test_one_cli_publish_resolves_its_spec_once(census_dir, no_server, resolutions, capsys):
    spec = write_spec(census_dir, k=5, l=None, seed=3)
    resolutions.clear()
    assert main(["publish", str(spec), "--quiet"]) == 0
    release_id = capsys.readouterr().out.strip()
    assert len(resolutions) == 1, resolutions
    assert Store(census_dir / "privpub.duckdb").history().release_id.tolist() == [release_id]


def test_one_cli_publish_with_overrides_resolves_once_and_the_overrides_reach_the_release(
    census_dir, no_server, resolutions, capsys
):
    spec = write_spec(census_dir, k=5, l=None, seed=None)
    assert main(["publish", str(spec), "--quiet", "--seed", "11", "--workers", "2"]) == 0
    assert len(resolutions) == 1
    release_id = capsys.readouterr().out.strip()
    assert Store(census_dir / "privpub.duckdb").release(release_id)["seed"] == 11


def test_privpub_publish_of_a_frame_resolves_its_spec_once(tmp_path, monkeypatch, no_server, resolutions):
    monkeypatch.chdir(tmp_path)
    spec = census_spec("unused", k=5, l=None, seed=7)
    del spec["dataset"]["input"]
    resolutions.clear()
    release = privpub.publish(census(600, seed=3), spec)
    assert len(resolutions) == 1, resolutions
    assert len(release.tables["table"]) == 600
    stored = Store(release.state).release(release)["spec"]
    assert stored["output"]["state"] == str(tmp_path / "privpub.duckdb")  # paths stored absolute, as before


def test_privpub_publish_of_a_spec_file_resolves_it_once(census_dir, no_server, resolutions):
    spec = write_spec(census_dir, k=5, l=None, seed=4)
    release = privpub.publish(str(spec))
    assert len(resolutions) == 1
    assert release.state == census_dir / "privpub.duckdb"


def test_a_cli_serial_publish_resolves_once(census_dir, no_server, resolutions, capsys):
    """serial asks the spec's technique whether it keeps a history: from the plan, not a second
    resolution; its refusal still leaves the attempt's audit row."""
    spec = write_spec(census_dir, k=5, l=None, seed=3)
    assert main(["serial", str(spec), "--quiet"]) == 1
    assert "privpub serial needs a technique that publishes series" in capsys.readouterr().err
    assert len(resolutions) == 1
    log = Store(census_dir / "privpub.duckdb").audit_log()
    assert log.outcome.tolist() == ["failed"] and '"trigger": "cli"' in log.detail.iloc[-1]


def test_a_bad_spec_is_refused_by_the_one_resolution(census_dir, no_server, resolutions, capsys):
    spec = write_spec(census_dir, k=5, l=None, seed=3)
    spec.write_text(spec.read_text().replace("[technique]", "[technique]\nkk = 3"))
    assert main(["publish", str(spec)]) == 1
    assert "kk: unknown key; did you mean k?" in capsys.readouterr().err
    assert len(resolutions) == 1
    with pytest.raises(SpecError, match="kk: unknown key"):
        privpub.publish(str(spec))
    assert len(resolutions) == 2


def test_the_plan_is_what_the_run_uses(census_dir, no_server):
    """A plan handed to an attempt is not resolved again: a plan whose spec differs from the file
    publishes the plan's spec (here: another seed)."""
    spec = write_spec(census_dir, k=5, l=None, seed=3)
    plan = pipeline.plan_run(str(spec), {"output": {"seed": 21}})
    release_id = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None), plan=plan)
    assert Store(census_dir / "privpub.duckdb").release(release_id)["seed"] == 21


def test_a_cli_publish_through_a_prefect_server_resolves_once(prefect_server, census_dir, resolutions, capsys):
    """With a server the release is a flow run in this process: the flow takes the CLI's plan."""
    spec = write_spec(census_dir, k=5, l=None, seed=5)
    resolutions.clear()
    assert main(["publish", str(spec), "--quiet", "--server"]) == 0  # asked for (issue 42)
    release_id = capsys.readouterr().out.strip()
    assert len(resolutions) == 1, resolutions
    rel = Store(census_dir / "privpub.duckdb").release(release_id)
    assert rel["flow_run_id"] is not None and rel["trigger"] == "cli"

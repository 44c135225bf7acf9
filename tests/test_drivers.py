"""One pipeline, two drivers (issue 27): with no Prefect server configured the CLI runs the
release in its own process, with plain calls (flows/pipeline.Driver): no server process, no
Prefect import, no network. With a server, each step is a Prefect task of a flow run
(flows/publish.PrefectDriver). Both publish the same tables, byte for byte (the hash pins of
tests/test_release_hashes.py), the same figures, and the same audit rows, failed attempts too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from privpub.flows import pipeline
from privpub.flows.publish import publish_flow
from privpub.flows.serial import serial_flow
from privpub.schemas.errors import InputError
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import child_pythonpath, write_spec
from tests.test_butterfly_pipeline import spec_toml as multi_qid_spec
from tests.test_release_hashes import EXPECTED, content_sha256
from tests.test_serial_pipeline import SERIAL
from tests.test_techniques_pipeline import PARAMS

ROOT = Path(__file__).resolve().parents[1]


def _spec(folder: Path, name: str) -> Path:
    """The spec test_release_hashes publishes for `name`, on census_dir's input."""
    if name in ("butterfly", "union-qid"):
        spec = folder / "spec.toml"
        spec.write_text(multi_qid_spec(name, 6, "k_prime = 2" if name == "butterfly" else ""))
        return spec
    if name == "serial":
        return write_spec(folder, technique="serial", k=None, l=2, seed=1, extra=SERIAL)
    return write_spec(folder, technique=name, seed=8, **PARAMS[name])


def _tables(folder: Path, release_id: str) -> dict[str, str]:
    files = Store(folder / "privpub.duckdb").release(release_id)["tables"].file
    return {f.removesuffix(".parquet"): content_sha256(folder / "releases" / release_id / f) for f in files}


def _figures(folder: Path, release_id: str) -> list[tuple]:
    m = Store(folder / "privpub.duckdb").release(release_id)["metrics"]
    return sorted((r.kind, r.name, r.text_value, str(r.threshold), str(r.passed)) for r in m.itertuples())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_in_process_driver_publishes_the_pinned_tables(census_dir, name):
    """Without a server the release publishes the tables pinned for the Prefect driver, byte for byte.

    Promise: drivers-publish-the-same-tables."""
    release_id = pipeline.attempt(str(_spec(census_dir, name)), None, None, driver=pipeline.Driver(None))
    assert _tables(census_dir, release_id) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_both_drivers_store_the_same_figures(prefect_server, tmp_path, name):
    """Both drivers store the same figures.

    Promise: drivers-publish-the-same-tables."""
    folders = {}
    for how in ("plain", "prefect"):
        folder = folders[how] = tmp_path / how
        folder.mkdir()
        census(600, seed=3).to_csv(folder / "census.csv", index=False)
        spec = str(_spec(folder, name))
        if how == "plain":
            release_id = pipeline.attempt(spec, None, None, driver=pipeline.Driver(None))
        else:
            release_id = (serial_flow if name == "serial" else publish_flow)(spec_path=spec)
        folders[how] = (folder, release_id)
    (a, rid_a), (b, rid_b) = folders["plain"], folders["prefect"]
    assert _tables(a, rid_a) == _tables(b, rid_b)
    assert _figures(a, rid_a) == _figures(b, rid_b)


def _failed_rows(folder: Path) -> list[tuple]:
    log = Store(folder / "privpub.duckdb").audit_log()
    return [(r.action, r.outcome, json.loads(r.detail)["message"]) for r in log.itertuples() if r.outcome == "failed"]


def test_a_failed_attempt_is_logged_the_same_by_both_drivers(prefect_server, tmp_path):
    rows = {}
    for how in ("plain", "prefect"):
        folder = tmp_path / how
        folder.mkdir()
        frame = census(300, seed=1).astype({"race": object})
        frame.loc[7, "race"] = None  # a missing QI value: refused with its row and column
        frame.to_csv(folder / "census.csv", index=False)
        spec = str(write_spec(folder, seed=2))
        if how == "plain":
            with pytest.raises(InputError, match="row 8"):
                pipeline.attempt(spec, None, None, driver=pipeline.Driver(None))
        else:
            state = publish_flow(spec_path=spec, return_state=True)
            assert state.is_failed() and "row 8" in state.message
        rows[how] = _failed_rows(folder)
    assert rows["plain"] == rows["prefect"] and len(rows["plain"]) == 1


# Run inside a fresh interpreter: records every socket connection and every child process, then
# runs the CLI as `privpub publish SPEC --quiet` would.
PROBE = r"""
import json, socket, subprocess, sys
seen = {"connect": [], "popen": []}
real_connect, real_popen = socket.socket.connect, subprocess.Popen.__init__
def connect(self, address):
    seen["connect"].append(repr(address))
    return real_connect(self, address)
def popen(self, *args, **kwargs):
    seen["popen"].append(repr(args[:1]))
    return real_popen(self, *args, **kwargs)
socket.socket.connect, subprocess.Popen.__init__ = connect, popen
from privpub.flows.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
seen["prefect"] = sorted(m for m in sys.modules if m == "prefect" or m.startswith("prefect."))[:3]
print(json.dumps(seen), file=sys.stderr)
sys.exit(code)
"""


def _without_a_server(folder: Path, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """argv run in a fresh interpreter with no Prefect API anywhere: not in the environment, no
    profile (an empty PREFECT_HOME), no privpub service (an empty PRIVPUB_HOME)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT),
        PRIVPUB_HOME=str(tmp_path / "no-service"),
        PREFECT_HOME=str(tmp_path / "prefect"),
    )
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=folder, timeout=120)


def test_publish_without_a_server_starts_no_process_and_opens_no_connection(census_dir, tmp_path):
    spec = write_spec(census_dir, seed=4)
    res = _without_a_server(census_dir, tmp_path, "-c", PROBE, "publish", str(spec), "--quiet")
    assert res.returncode == 0, res.stderr
    release_id = res.stdout.strip()
    assert res.stdout == release_id + "\n" and release_id.startswith("census-0001-")  # --quiet: the id only
    *other, seen_line = res.stderr.strip().splitlines()
    assert other == []  # nothing else on the terminal
    seen = json.loads(seen_line)
    assert seen == {"connect": [], "popen": [], "prefect": []}
    log = Store(census_dir / "privpub.duckdb").audit_log()
    assert log.outcome.tolist() == ["committed"] and json.loads(log.detail.iloc[0])["trigger"] == "cli"


def test_without_a_server_progress_is_one_line_per_step_and_no_link(census_dir, tmp_path):
    spec = write_spec(census_dir, seed=5)
    res = _without_a_server(census_dir, tmp_path, "-m", "privpub.flows.cli", "publish", str(spec))
    assert res.returncode == 0, res.stderr
    lines = res.stderr.strip().splitlines()
    assert all(line.startswith("[privpub] ") for line in lines), lines
    assert any(line.startswith("[privpub] partition done in") for line in lines)
    assert "http" not in res.stderr + res.stdout and "INFO" not in res.stderr


def test_a_prefect_profile_with_an_api_url_is_a_configured_server(tmp_path, monkeypatch):
    from privpub.flows.run import profile_api_url

    (tmp_path / "profiles.toml").write_text(
        'active = "work"\n[profiles.work]\nPREFECT_API_URL = "http://10.0.0.5:4200/api"\n[profiles.ephemeral]\n'
    )
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    assert profile_api_url() == "http://10.0.0.5:4200/api"
    monkeypatch.setenv("PREFECT_PROFILE", "ephemeral")
    assert profile_api_url() is None


def test_privpub_publish_from_python_runs_in_process_without_a_server(census_dir, tmp_path):
    spec = write_spec(census_dir, seed=6)
    code = (
        "import sys, privpub; lines = []\n"
        f"rid = privpub.publish({str(spec)!r}, progress=lines.append)\n"
        "print(rid, len(lines) > 3, 'prefect' in sys.modules)"
    )
    res = _without_a_server(census_dir, tmp_path, "-c", code)
    assert res.returncode == 0, res.stderr
    rid, got_lines, prefect_loaded = res.stdout.split()
    assert rid.startswith("census-0001-") and got_lines == "True" and prefect_loaded == "False"
    assert res.stderr == ""  # progress went to the callback only
    assert Store(census_dir / "privpub.duckdb").history().release_id.tolist() == [rid]


def test_the_plain_driver_retries_a_transient_error_and_not_a_missing_file(monkeypatch):
    """The retry policy of the Prefect tasks (flows/publish.py `transient`), in plain calls."""
    monkeypatch.setitem(pipeline.RETRY_DELAYS, "stage-files", [0, 0])
    calls = []

    def flaky(fail_with):
        calls.append(fail_with)
        if len(calls) <= 2:
            raise fail_with
        return "staged"

    driver = pipeline.Driver(None)
    assert driver.run("stage-files", flaky, OSError(5, "Input/output error")) == "staged" and len(calls) == 3
    calls.clear()

    def always(fail_with):
        calls.append(fail_with)
        raise fail_with

    with pytest.raises(OSError, match="again"):  # two retries, then the third failure is raised
        driver.run("stage-files", always, OSError(5, "again"))
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(FileNotFoundError):
        driver.run("stage-files", flaky, FileNotFoundError(2, "gone"))
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(OSError):
        driver.run("partition", flaky, OSError(5, "not an I/O step"))  # no retries there
    assert len(calls) == 1


def test_with_a_server_the_terminal_shows_privpub_lines_and_verbose_adds_prefect_s(prefect_server, census_dir):
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PYTHONPATH": child_pythonpath(ROOT)}
    cli = [sys.executable, "-m", "privpub.flows.cli", "publish"]
    outputs = {}
    for seed, flags in ((11, []), (12, ["--quiet"]), (13, ["--verbose"])):
        spec = write_spec(census_dir, seed=seed)
        # three releases of the same input (issue 29: --allow-repeat)
        res = subprocess.run(
            # --server: a server records the run only when asked (issue 42)
            [*cli, str(spec), "--allow-repeat", "--server", *flags],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
        )
        assert res.returncode == 0, res.stderr
        outputs[tuple(flags)] = res
    plain = outputs[()].stderr.strip().splitlines()
    assert plain and all(line.startswith("[privpub] ") for line in plain), plain
    assert "View at" not in outputs[()].stderr + outputs[()].stdout
    quiet = outputs[("--quiet",)]
    assert quiet.stderr == "" and len(quiet.stdout.split()) == 1
    assert "Finished in state" in outputs[("--verbose",)].stderr  # Prefect's own lines

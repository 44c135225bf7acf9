"""Issue 42, item 1: every command privpub prints as advice runs when pasted into a fresh shell in
the checkout whose PATH lacks the venv (schemas/command.py `command_name`): collected from fresh
`python -m privpub.flows.cli` processes, each run through `bash -c` from the checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from privpub.schemas import command
from tests.helpers import child_pythonpath

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def _env(tmp_path: Path) -> dict[str, str]:
    """A fresh shell's environment: PATH without this venv, no Prefect API, no service."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "VIRTUAL_ENV"}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != VENV_BIN.resolve()]
    env.update(
        PATH=os.pathsep.join(path),
        PYTHONPATH=child_pythonpath(ROOT),
        PRIVPUB_HOME=str(tmp_path / "no-service"),
        PREFECT_HOME=str(tmp_path / "prefect"),
    )
    return env


def privpub(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "privpub.flows.cli", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=ROOT,
        timeout=180,
    )


def pasted(tmp_path: Path, line: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", line],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=ROOT,
        timeout=180,
    )


def after(marker: str, text: str, end: str = "$") -> str:
    found = re.search(re.escape(marker) + r"(.+?)" + end, text, re.MULTILINE)
    assert found, (marker, text)
    return found[1].strip()


def test_every_advice_line_runs_when_pasted(census_dir, tmp_path):
    on_path = shutil.which("privpub", path=_env(tmp_path)["PATH"])
    assert on_path is None or not Path(on_path).samefile(VENV_BIN / "privpub")  # the shell cannot find ours
    spec = tmp_path / "spec.toml"
    init = privpub(tmp_path, "init", str(census_dir / "census.csv"), "--sensitive", "occupation", "-o", str(spec))
    assert init.returncode == 0, init.stderr
    commands = {"init": after("review it, then: ", init.stdout)}

    serial = privpub(tmp_path, "serial", str(spec))  # refused: a one-off technique
    assert serial.returncode == 1
    commands["refusal"] = after("for a one-off release: ", serial.stderr)

    server = privpub(tmp_path, "publish", str(spec), "--server")  # refused: no server
    assert server.returncode == 1
    commands["server start"] = after("start one with `", server.stderr, "`")

    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / "server.json").write_text(json.dumps({"api_url": "http://127.0.0.1:1/api", "url": "x"}))
    status = privpub(tmp_path, "server", "status", "--home", str(tmp_path / "stale"))
    commands["server stop"] = after("; `", status.stdout, "`")

    name = commands["init"].split(" publish ")[0]
    assert not name.startswith("privpub")  # not on this PATH: bare `privpub` would be "command not found"
    assert all(c.startswith(f"{name} ") for c in commands.values()), commands

    published = pasted(tmp_path, commands["init"])  # the first release of init's spec
    assert published.returncode == 0, published.stderr
    commands["history"] = after("(", published.stdout.split("  history: ")[1], r"\)$")
    commands["manifest"] = after("keep a copy outside: ", published.stdout, r"\)$")

    for what, line in commands.items():
        if what == "init":
            continue
        # `server start` would start a service: its arguments are parsed, nothing started
        done = pasted(tmp_path, f"{line} --help" if what == "server start" else line)
        assert done.returncode != 127 and "command not found" not in done.stderr, (what, line, done.stderr)
        if what == "refusal":  # init's spec published once already: the expected repeat refusal
            assert done.returncode == 1 and "the input is unchanged since release #1" in done.stderr, done.stderr
        else:
            assert done.returncode == 0, (what, line, done.stdout, done.stderr)
    assert not (tmp_path / "stale" / "server.json").exists()  # the pasted stop cleared the stale record


def test_the_name_is_privpub_only_when_the_path_resolves_to_this_install(tmp_path, monkeypatch):
    script = VENV_BIN / "privpub"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(VENV_BIN))
    assert command.command_name() == "privpub"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command.command_name() == str(script)  # outside the checkout: absolute
    monkeypatch.chdir(script.parents[2])  # the folder holding the venv
    assert command.command_name() == os.path.join(script.parent.parent.name, "bin", "privpub")
    assert command.advice("history", "--state", "a b.duckdb").endswith(" history --state 'a b.duckdb'")

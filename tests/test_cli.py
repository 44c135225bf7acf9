"""`privpub` as a user runs it: subprocesses against the session's Prefect server.

Crash safety: a publish killed with SIGKILL during anonymization and again inside the commit
transaction leaves no visible release and no release files; the next run publishes normally.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import child_pythonpath, write_spec

PRIVPUB = [sys.executable, "-m", "privpub.flows.cli"]
ROOT = Path(__file__).resolve().parents[1]


def _env(api_url: str, **extra) -> dict:
    env = {**os.environ, "PREFECT_API_URL": api_url, **extra}
    env["PYTHONPATH"] = child_pythonpath(ROOT)
    return env


def run(args, api_url, timeout=240, **extra):
    # a publish reports to a server only when asked (issue 42): these tests are of that path
    args = [*args, "--server"] if args[0] in ("publish", "serial") else args
    return subprocess.run(
        PRIVPUB + args, capture_output=True, text=True, timeout=timeout, env=_env(api_url, **extra), cwd=ROOT
    )


def release_dirs(folder: Path) -> list[str]:
    out = folder / "releases"
    return sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) if out.exists() else []


def history_rows(folder: Path) -> int:
    state = folder / "privpub.duckdb"
    if not state.exists():
        return 0
    with duckdb.connect(str(state), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return con.execute("SELECT count(*) FROM releases").fetchone()[0] if "releases" in tables else 0


def test_publish_history_verify(prefect_server, census_dir):
    """publish, history, verify through the CLI; a byte appended to the table fails verify.

    Promise: verify-detects-a-changed-published-file."""
    spec = write_spec(census_dir, seed=21)
    res = run(["publish", str(spec)], prefect_server)
    assert res.returncode == 0, res.stderr
    release_id = res.stdout.splitlines()[0].strip()
    assert release_id.startswith("census-0001-")
    assert any(
        l.strip().startswith("k-anonymity:") and l.strip().endswith("(required 5) PASS")
        for l in res.stdout.splitlines()
    ), res.stdout
    hist = run(["history", "--state", str(census_dir / "privpub.duckdb")], prefect_server)
    assert hist.returncode == 0 and release_id in hist.stdout
    ver = run(["verify", release_id, "--state", str(census_dir / "privpub.duckdb")], prefect_server)
    assert ver.returncode == 0, ver.stdout + ver.stderr
    assert "PASS k-anonymity" in ver.stdout and "PASS l-diversity" in ver.stdout
    # tampering with a published file is caught by the re-verification
    table = census_dir / "releases" / release_id / "table.parquet"
    table.write_bytes(table.read_bytes() + b"x")
    ver = run(["verify", release_id, "--state", str(census_dir / "privpub.duckdb")], prefect_server)
    assert ver.returncode == 1 and "sha256 mismatch" in ver.stdout


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda f: f.drop(columns=["race"]), "missing column(s) 'race'"),
        (lambda f: f.assign(sex=f.sex.where(f.index != 4, None)), "row 5, column 'sex': is empty"),
        (
            lambda f: f.astype({"age": object}).assign(age=lambda d: d.age.where(d.index != 2, "old")),
            "row 3, column 'age': not a number",
        ),
        (lambda f: f.assign(pid=f.pid.where(f.index != 8, 1)), "row 9, column 'pid': repeats the person id of row 1"),
        (None, "k = 5000 is larger than the table"),
    ],
)
def test_bad_input_one_message_nothing_written(prefect_server, census_dir, mutate, message):
    import pandas as pd

    frame = pd.read_csv(census_dir / "census.csv")
    if mutate is not None:
        mutate(frame).to_csv(census_dir / "census.csv", index=False)
    spec = write_spec(census_dir, k=5000 if mutate is None else 5)
    res = run(["publish", str(spec)], prefect_server)
    assert res.returncode == 1
    errors = [l for l in res.stderr.splitlines() if l.startswith("privpub: error:")]
    assert len(errors) == 1 and message in errors[0], res.stderr
    assert not (census_dir / "releases").exists()
    with duckdb.connect(str(census_dir / "privpub.duckdb"), read_only=True) as con:  # the attempt only
        assert con.execute("SELECT count(*) FROM release_rows").fetchone()[0] == 0
        assert con.execute("SELECT outcome FROM audit_log").fetchall() == [("failed",)]


@pytest.mark.parametrize("stage", ["anonymize", "commit"])
def test_sigkill_leaves_no_release_and_next_run_publishes(prefect_server, census_dir, stage):
    """kill -9 during anonymize or commit: no release, and the next run publishes.

    Promise: no-half-release-after-kill."""
    spec = write_spec(census_dir, seed=None)
    if stage == "commit":  # a first release, so the kill happens in a store with history
        assert run(["publish", str(spec)], prefect_server).returncode == 0
    before_dirs, before_rows = release_dirs(census_dir), history_rows(census_dir)
    flag = census_dir / "paused"
    proc = subprocess.Popen(
        PRIVPUB + ["publish", str(spec), "--allow-repeat", "--server"],  # the same input as the first release
        cwd=ROOT,
        start_new_session=True,
        env=_env(prefect_server, PRIVPUB_PAUSE_AT=stage, PRIVPUB_PAUSE_FLAG=str(flag)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 240
    while not flag.exists():
        assert proc.poll() is None, "publish ended before reaching the pause point"
        assert time.time() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert release_dirs(census_dir) == before_dirs
    assert history_rows(census_dir) == before_rows
    staging = census_dir / "releases" / ".staging"
    if stage == "commit":
        assert staging.exists()  # the killed run's files are still hidden in staging
    res = run(["publish", str(spec), "--allow-repeat"], prefect_server)
    assert res.returncode == 0, res.stderr
    assert history_rows(census_dir) == before_rows + 1
    assert len(release_dirs(census_dir)) == len(before_dirs) + 1
    assert not staging.exists()  # rolled back by the next writer


def test_two_publishes_at_once_both_end_cleanly(prefect_server, census_dir):
    spec = write_spec(census_dir, seed=None)
    procs = [
        subprocess.Popen(
            PRIVPUB + ["publish", str(spec), "--quiet", "--server"],  # on the server, asked (issue 42)
            cwd=ROOT,
            env=_env(prefect_server),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    for code, (_out, err) in zip(codes, outs):
        assert code == 0 or "privpub: error:" in err, err
    assert 0 in codes
    with duckdb.connect(str(census_dir / "privpub.duckdb"), read_only=True) as con:
        seqs = [r[0] for r in con.execute("SELECT sequence FROM releases ORDER BY sequence").fetchall()]
    assert seqs == list(range(1, codes.count(0) + 1))
    assert len(release_dirs(census_dir)) == codes.count(0)


def test_help_and_history_do_not_import_prefect(tmp_path):
    """Start-up cost: commands that run no flow import no Prefect (nor scipy, matplotlib, dask)."""
    code = (
        "import sys, contextlib, io\n"
        "from flows.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        "        main(sys.argv[1:])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'scipy', 'matplotlib', 'dask', 'distributed'}))"
    )
    for args in (["--help"], ["history", "--state", str(tmp_path / "none.duckdb")]):
        res = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": child_pythonpath(ROOT)},
            timeout=120,
        )
        assert res.stdout.strip().splitlines()[-1] == "[]", (args, res.stdout, res.stderr)


def test_the_flow_reuses_the_input_the_cli_checked(prefect_server, census_dir):
    """One read and one validation per CLI publish: the flow takes what the CLI checked."""
    spec = write_spec(census_dir, seed=4)
    res = run(["publish", str(spec)], prefect_server)
    assert res.returncode == 0, res.stderr
    assert "600 valid rows (read and validated before the run started)" in res.stderr
    assert "load input done" not in res.stderr


@pytest.mark.parametrize(
    ("technique", "message"),
    [
        ('name = "serial"\nl = 0', "[technique] l must be an integer >= 2, got 0"),
        ('name = "generalization"\nk = 2', "privpub serial needs a technique that publishes series"),
    ],
)
def test_a_refused_serial_attempt_leaves_its_audit_row(prefect_server, tmp_path, technique, message):
    """Issue 25, item 8: `privpub serial` refused bad specs before logging anything."""
    census(60, seed=2).to_csv(tmp_path / "census.csv", index=False)
    spec = write_spec(tmp_path, k=None, l=None)
    spec.write_text(spec.read_text().replace('[technique]\nname = "generalization"', "[technique]\n" + technique))
    out = run(["serial", str(spec), "--as", "steward"], prefect_server)
    assert out.returncode != 0 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    log = Store(tmp_path / "privpub.duckdb").audit_log()
    assert log.outcome.tolist() == ["failed"] and log.actor.tolist() == ["steward"]
    assert message in log.detail[0]
    assert release_dirs(tmp_path) == []

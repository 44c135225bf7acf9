"""Issue 41, item 3, for the reliability probe: an auditor decision that runs for minutes beside
a publish, `history`, `trail` and a reader; the request ceiling; predicates nested 60 and 100
deep and a very long one. Each case a fresh `privpub` process, as in probe_reliability.

    .venv/bin/python -m tests.benchmarks.probe_r4_auditor
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb

from tests.benchmarks.probe_reliability import PRIVPUB, Outcome, _env, audit_rows, cli, judge, needles, run_alone
from tests.helpers import census_spec_toml
from tests.test_hardening import good_frame

QUICK = ["age < 30", "age BETWEEN 30 AND 50", "sex = 'female'"]
SLOW = "age BETWEEN 25 AND 34 AND sex = 'male' OR age = 45"  # after QUICK: tens of thousands of units
PREDICATES = [
    ("60 parentheses", "(" * 60 + "age > 30" + ")" * 60),
    ("100 NOTs", "NOT " * 100 + "age > 30"),
    ("NOT ( 40 deep", "NOT (" * 40 + "age > 30" + ")" * 40),
    ("900 unary minus", "age > " + "- " * 900 + "1"),
    ("a very long predicate (60k characters)", " OR ".join(f"age = {i % 90}" for i in range(5000))),
]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup(root: Path, name: str, quick: list[str]):
    """A census table of 300 registered with the auditor (budget 1,000,000) and `quick` asked."""
    folder = root / name
    folder.mkdir()
    frame = good_frame(300)
    frame.to_csv(folder / "census.csv", index=False)
    spec = census_spec_toml(seed=11).replace(
        "[output]", "[audit]\nl = 2\nbudget = 1000000\nrequest_budget = 1000000\n\n[output]"
    )
    (folder / "spec.toml").write_text(spec)
    assert cli(folder, "audit", "init", "spec.toml").returncode == 0
    for where in quick:
        assert cli(folder, "audit", "ask", "--where", where).returncode == 0
    return folder, frame


def lock_case(folder: Path, planted: list[str]) -> Outcome:
    """The slow decision started; once it is 5 s of CPU into its work, a publish, `history`,
    `trail` and a read-only reader, each allowed 10 s of lock wait, must all complete while it
    still runs. Clean: all did; unlogged: the publish left no audit row."""
    asking = subprocess.Popen(
        [*PRIVPUB, "audit", "ask", "--where", SLOW],
        cwd=folder,
        env=_env(folder) | {"PRIVPUB_LOCK_WAIT": "10"},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while cpu_seconds(asking.pid) < 5 and asking.poll() is None:
            time.sleep(0.2)
        rows = len(audit_rows(folder))
        started = time.monotonic()
        env = _env(folder) | {"PRIVPUB_LOCK_WAIT": "10"}
        done = [
            subprocess.run([*PRIVPUB, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
            for args in (["publish", "spec.toml", "--quiet"], ["history"], ["trail"])
        ]
        try:
            with duckdb.connect(str(folder / "privpub.duckdb"), read_only=True) as con:
                reader = con.execute("SELECT count(*) FROM release_rows").fetchone()[0] == 1
        except duckdb.Error:
            reader = False
        took = time.monotonic() - started
        running = asking.poll() is None
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have ended: then not "still running"
            os.killpg(asking.pid, signal.SIGKILL)  # the process this probe started
        asking.communicate()
    text = "".join(d.stdout + d.stderr for d in done)
    return Outcome(
        "auditor-r4",
        f"slow decision (budget 1,000,000) + publish, history, trail, reader: {took:.1f} s, decision still running",
        all(d.returncode == 0 for d in done) and reader and running,
        "Traceback" in text,
        False,
        any(n in text for n in planted),
        len(audit_rows(folder)) <= rows,
    )


def ceiling_case(folder: Path, planted: list[str]) -> Outcome:
    """The same slow query under a request ceiling of 300 units: a budget denial naming the
    ceiling, exit 0, one audit-query row."""
    assert cli(folder, "audit", "set", "census", "--request-budget", "300").returncode == 0
    rows = len(audit_rows(folder))
    done = cli(folder, "audit", "ask", "--where", SLOW)
    out = json.loads(done.stdout) if done.returncode == 0 else {}
    clean = out.get("budget_hit") is True and "request budget of 300 work units" in out.get("reason", "")
    return Outcome(
        "auditor-r4",
        "the slow query under request_budget = 300: denied by the ceiling",
        clean,
        "Traceback" in done.stderr,
        "ids" in out,
        any(n in done.stdout + done.stderr for n in planted),
        len(audit_rows(folder)) != rows + 1,
    )


def probe(root: Path) -> list[Outcome]:
    folder, frame = setup(root, "auditor-r4-lock", QUICK)
    planted = needles(frame)
    out = [lock_case(folder, planted), ceiling_case(folder, planted)]
    folder, frame = setup(root, "auditor-r4-predicates", [])  # no release: judge scans release folders
    for name, predicate in PREDICATES:
        rows = len(audit_rows(folder))
        done = cli(folder, "audit", "ask", "--where", predicate)
        outcome = judge("auditor-r4", name, folder, done, rows, set(), planted, publish=False)
        outcome.unlogged = len(audit_rows(folder)) != rows + 1
        out.append(outcome)
    return out


if __name__ == "__main__":
    run_alone(probe)

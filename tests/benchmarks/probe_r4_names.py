"""Issue 41, items 1 and 2, as reliability-probe cases (tests/benchmarks/probe_reliability.py
judges them): series names that are not names, each a fresh `privpub publish`; and each failure
point between a release's COMMIT and its rename, followed by a publish of another series and
`privpub verify` of every release.

    .venv/bin/python -m tests.benchmarks.probe_r4_names
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import duckdb

from tests.benchmarks.probe_reliability import PRIVPUB, Outcome, _env, audit_rows, cli, judge, needles, run_alone
from tests.helpers import census_spec_toml
from tests.test_hardening import good_frame

NAMES = [
    ("a series name leading out of [output] dir", "../../../../{target}/PWNED"),
    ("a series name with a slash", "a/b"),
    ("a series name of 1,000 characters", "c" * 1000),
    ("a series name with a NUL", "cen\\u0000sus"),  # as TOML writes it
]


def _spec(folder: Path, series: str) -> str:
    path = folder / f"spec-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(census_spec_toml(seed=11).replace('name = "census"', f'name = "{series}"'))
    return path.name


def probe_names(root: Path) -> list[Outcome]:
    out = []
    for case, name in NAMES:
        folder = root / f"name-{uuid.uuid4().hex[:8]}"
        target = root / f"target-{uuid.uuid4().hex[:8]}"  # where the traversal would land
        folder.mkdir()
        target.mkdir()
        frame = good_frame()
        frame.to_csv(folder / "census.csv", index=False)
        up = "../" * (len(folder.parts) + 1)
        spec = _spec(folder, name.replace("../../../../{target}", up + str(target.relative_to("/"))))
        done = cli(folder, "publish", spec, "--quiet")
        outcome = judge("series name", case, folder, done, 0, set(), needles(frame), publish=True)
        outcome.published = outcome.published or any(target.iterdir())
        out.append(outcome)
    return out


def _committed(folder: Path) -> list[str]:
    with duckdb.connect(str(folder / "privpub.duckdb"), read_only=True) as con:
        return [r[0] for r in con.execute("SELECT release_id FROM release_rows ORDER BY created_at").fetchall()]


def _killed_at(folder: Path, stage: str, spec: str) -> subprocess.CompletedProcess:
    flag = folder / "paused.flag"
    env = {**_env(folder), "PRIVPUB_PAUSE_AT": stage, "PRIVPUB_PAUSE_FLAG": str(flag)}
    proc = subprocess.Popen([*PRIVPUB, "publish", spec, "--quiet"], cwd=folder, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 240
    while proc.poll() is None and not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


# (case, how the first publish is stopped): a failure injected or a SIGKILL at a stage
AFTER_COMMIT = [
    ("a failure just after the COMMIT", "fail", "after-commit"),
    ("the rename failing", "fail", "rename"),
    ("killed just before the rename", "kill", "rename"),
    ("killed just after the rename", "kill", "renamed"),
]


def probe_after_commit(root: Path) -> list[Outcome]:
    """Clean: the first publish says the truth (exit 0 and its id, or killed), the next publish of
    another series exits 0, and every committed release verifies."""
    out = []
    for case, how, stage in AFTER_COMMIT:
        folder = root / f"commit-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        frame = good_frame()
        frame.to_csv(folder / "census.csv", index=False)
        spec = _spec(folder, "census")
        if how == "fail":
            first = subprocess.run([*PRIVPUB, "publish", spec, "--quiet"], cwd=folder, text=True,
                                   capture_output=True, env={**_env(folder), "PRIVPUB_FAIL_AT": stage})  # fmt: skip
            truthful = first.returncode == 0 and "is committed" in first.stderr and "nothing was" not in first.stderr
        else:
            first, truthful = _killed_at(folder, stage, spec), True
        after = cli(folder, "publish", _spec(folder, "other"), "--quiet")
        rows = len(audit_rows(folder))  # two attempts: one row each (verify logs its own)
        ids = _committed(folder)
        verified = all(cli(folder, "verify", rid).returncode == 0 for rid in ids)
        text = first.stdout + first.stderr + after.stdout + after.stderr
        out.append(
            Outcome(
                "after the commit",
                case,
                truthful and after.returncode == 0 and verified and len(ids) == 2,
                "Traceback" in text,
                False,
                any(n in text for n in needles(frame)),
                rows < 2,
                internal="internal error" in text,
                duplicates=rows > 2,
            )
        )
    return out


def probe(root: Path) -> list[Outcome]:
    return probe_names(root) + probe_after_commit(root)


if __name__ == "__main__":
    run_alone(probe)

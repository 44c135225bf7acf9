"""Issue 41's probe, items 8 and 9 (the trail complete, a tamper-evident history): each case a
fresh `privpub` (or Python) process, judged as tests/benchmarks/probe_reliability.py judges.

    .venv/bin/python -m tests.benchmarks.probe_r4_chain

- api: a spec typo through `privpub.publish` (a dict spec, a fresh Python process): refused
  cleanly, and unlogged when no audit row (nor journal line) appeared.
- state: `[output] state` = /dev/null, or the input table: refused in one line, journaled.
- kill: SIGKILL just after the COMMIT (failpoints `after-commit`, `published`), then the next
  publish: "refused cleanly" = the next publish committed and the killed attempt has exactly one
  trail row (`committed`, no `interrupted` beside it); unlogged = none.
- tamper: an edit of the state or a manifest, then `privpub verify --history` and `privpub verify`
  of the other release (of the release whose manifest was edited): "refused cleanly" = both exit 1 with a FAIL line naming the table and
  the release id or row id; unlogged = the edit went unnoticed (either exit 0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Callable
from pathlib import Path

import duckdb

from tests.benchmarks.probe_reliability import PRIVPUB, Outcome, _env, audit_rows, cli, judge, needles, run_alone
from tests.helpers import census_spec_toml
from tests.test_hardening import good_frame

ROOT = Path(__file__).resolve().parents[2]

API_TYPOS: list[tuple[str, Callable[[dict], None]]] = [
    ("k as a string", lambda s: s["technique"].update(k="5")),
    ("k = 0", lambda s: s["technique"].update(k=0)),
    ("an unknown technique key", lambda s: s["technique"].update(kk=2)),
    ("an unknown technique", lambda s: s["technique"].update(name="generalisation")),
    ("an unknown dataset key", lambda s: s["dataset"].update(nmae="x")),
    ("an unknown section", lambda s: s.update(datasett={"x": 1})),
    ("a negative seed", lambda s: s["output"].update(seed=-1)),
    ("a QI of an unknown kind", lambda s: s["dataset"]["qi"][0].update(kind="number")),
    ("an unknown task runner", lambda s: s.update(run={"task_runner": "ray"})),
    ("a [risk] limit above 1", lambda s: s.update(risk={"max_prosecutor": 2.0})),
]

API_SCRIPT = """
import json, sys
import pandas as pd
import privpub
try:
    privpub.publish(pd.read_csv("census.csv"), json.load(open("spec.json")))
except Exception as exc:
    print(f"privpub: error: {exc}", file=sys.stderr)
    sys.exit(1)
"""


def _folder(root: Path, kind: str) -> tuple[Path, list[str]]:
    folder = root / f"{kind}-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    frame = good_frame()
    frame.to_csv(folder / "census.csv", index=False)
    return folder, needles(frame)


def probe_api(root: Path) -> list[Outcome]:
    out = []
    for name, edit in API_TYPOS:
        folder, planted = _folder(root, "api")
        sections = tomllib.loads(census_spec_toml(seed=11))
        edit(sections)
        (folder / "spec.json").write_text(json.dumps(sections))
        done = subprocess.run(
            [sys.executable, "-c", API_SCRIPT], cwd=folder, env=_env(folder), capture_output=True, text=True
        )
        out.append(judge("api", name, folder, done, 0, set(), planted, publish=True))
    return out


def probe_states(root: Path) -> list[Outcome]:
    out = []
    for name, state in (("state = /dev/null", "/dev/null"), ("state = the input table", "census.csv")):
        folder, planted = _folder(root, "state")
        (folder / "spec.toml").write_text(
            census_spec_toml(seed=11).replace('state = "privpub.duckdb"', f'state = "{state}"')
        )
        done = cli(folder, "publish", "spec.toml", "--quiet")
        out.append(judge("state", name, folder, done, 0, set(), planted, publish=True))
    return out


def probe_kills(root: Path) -> list[Outcome]:
    out = []
    for stage in ("after-commit", "published"):
        folder, planted = _folder(root, "kill")
        (folder / "spec.toml").write_text(census_spec_toml(seed=None))
        flag = folder / "paused"
        proc = subprocess.Popen(
            [*PRIVPUB, "publish", "spec.toml", "--quiet"],
            cwd=folder,
            env={**_env(folder), "PRIVPUB_PAUSE_AT": stage, "PRIVPUB_PAUSE_FLAG": str(flag)},
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 240
        while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        after = cli(folder, "publish", "spec.toml", "--allow-repeat", "--quiet")
        outcomes = [r[5] for r in audit_rows(folder)]  # (id, logged_at, actor, action, target, outcome, ...)
        killed = outcomes[:-1]  # the next publish's own row is the last
        out.append(
            Outcome(
                "kill",
                f"SIGKILL at {stage} (just after the COMMIT)",
                after.returncode == 0 and killed == ["committed"],
                "Traceback" in after.stderr,
                False,
                any(n in after.stdout + after.stderr for n in planted),
                not killed,
                internal="internal error" in after.stderr,
                duplicates=len(killed) > 1,
            )
        )
    return out


def _released(root: Path) -> tuple[Path, list[str], list[str]]:
    folder, planted = _folder(root, "tamper")
    (folder / "spec.toml").write_text(census_spec_toml(seed=5))
    ids = [cli(folder, "publish", "spec.toml", "--quiet").stdout.split()[0]]
    ids.append(cli(folder, "publish", "spec.toml", "--quiet", "--seed", "6", "--allow-repeat").stdout.split()[0])
    return folder, ids, planted


def _edit_manifest(folder: Path, rid: str) -> None:
    path = folder / "releases" / rid / "manifest.json"
    body = json.loads(path.read_text())
    body["seed"] += 1
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")


# (case, edit of the folder's state or files, words the FAIL line must hold; $R = the first release)
TAMPERS: list[tuple[str, str | Callable[[Path, str], None], list[str]]] = [
    ("a release row's seed", "UPDATE release_rows SET seed = 4242 WHERE release_id = $R", ["release_rows", "$R"]),
    (
        "a release row's parameters",
        'UPDATE release_rows SET parameters = \'{"k": 2, "l": 3}\' WHERE release_id = $R',
        ["release_rows", "$R"],
    ),
    (
        "a stored k-anonymity figure",
        "UPDATE release_metrics SET text_value = '50', value = 50 WHERE release_id = $R AND name = 'k-anonymity'",
        ["release_metrics", "k-anonymity", "$R"],
    ),
    ("an audit_log row deleted", "DELETE FROM audit_log WHERE id = 1", ["audit_log", "row id 1"]),
    ("a release row deleted", "DELETE FROM release_rows WHERE release_id = $R", ["release_rows", "$R", "deleted"]),
    ("a manifest edited", _edit_manifest, ["manifest.json", "$R"]),
]


def probe_tampering(root: Path) -> list[Outcome]:
    out = []
    for name, edit, words in TAMPERS:
        folder, ids, planted = _released(root)
        if callable(edit):
            edit(folder, ids[0])
        else:
            with duckdb.connect(str(folder / "privpub.duckdb")) as con:
                con.execute(edit.replace("$R", f"'{ids[0]}'"))
        wanted = [w.replace("$R", ids[0]) for w in words]
        # `verify` of the other release (the chains are checked whole); a manifest: its own release's
        mine = ids[0] if callable(edit) else ids[1]
        runs = [cli(folder, "verify", "--history"), cli(folder, "verify", mine)]
        named = all(any(all(w in line for w in wanted) for line in r.stdout.splitlines()) for r in runs)
        text = "".join(r.stdout + r.stderr for r in runs)
        out.append(
            Outcome(
                "tamper",
                name,
                all(r.returncode == 1 for r in runs) and named,
                "Traceback" in text,
                False,
                any(n in text for n in planted),
                False,
                internal="internal error" in text,
                tamper_missed=any(r.returncode == 0 for r in runs) or not named,
            )
        )
    return out


def probe(root: Path) -> list[Outcome]:
    return probe_api(root) + probe_states(root) + probe_kills(root) + probe_tampering(root)


if __name__ == "__main__":
    run_alone(probe)

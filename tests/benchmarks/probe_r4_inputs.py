"""Issue 41 items 4-7 for the reliability probe: the inputs of tests/test_hardening_round4.py
through `privpub publish`, and the other commands' cases (init, explore, a FIFO spec, a
truncated state file), each a fresh `privpub` process judged as the probe judges its own.

    .venv/bin/python -m tests.benchmarks.probe_r4_inputs
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from tests.benchmarks.probe_reliability import Outcome, audit_rows, cli, judge, needles, release_dirs, run_alone
from tests.helpers import census_spec_toml
from tests.test_hardening import good_frame
from tests.test_hardening_round4 import CASES, _headerless


def _folder(root: Path, kind: str) -> Path:
    folder = root / f"{kind}-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    return folder


def probe_inputs(root: Path) -> list[Outcome]:
    out = []
    for name, mutate, _ in CASES:
        folder = _folder(root, "r4")
        frame = good_frame()
        spec = mutate(folder, frame)
        rows, dirs = len(audit_rows(folder)), release_dirs(folder)
        done = cli(folder, "publish", str(spec), "--quiet")
        out.append(judge("input r4", name, folder, done, rows, dirs, needles(frame), publish=True))
    return out


def probe_commands(root: Path) -> list[Outcome]:
    out = []
    folder = _folder(root, "r4cmd")
    frame = good_frame()
    _headerless(folder, frame)
    (folder / "spec.toml").write_text(census_spec_toml(seed=1))  # a seed: explore's only line is the error
    first_row = (folder / "census.csv").read_text().splitlines()[0].split(",")
    planted = needles(frame) + [c for c in first_row if len(c) > 3]  # the header-less row's cells
    (folder / "serial.toml").write_text(census_spec_toml(seed=1, technique="serial", k=None))
    (folder / "dask.toml").write_text(
        census_spec_toml(seed=1).replace("[output]", '[run]\ntask_runner = "dask"\n[output]')
    )
    good = _folder(root, "r4good")
    good_frame().to_csv(good / "census.csv", index=False)
    (good / "spec.toml").write_text(census_spec_toml(seed=1))
    (good / "dask.toml").write_text(
        census_spec_toml(seed=1).replace("[output]", '[run]\ntask_runner = "dask"\n[output]')
    )
    (good / "pages").mkdir()
    os.mkfifo(good / "fifo.toml")
    uses = [
        ("serial on a header-less CSV", folder, ["serial", "serial.toml"], True),
        ("explore on a header-less CSV", folder, ["explore", "spec.toml", "--set", "k=5"], False),
        ("init on a header-less CSV", folder, ["init", "census.csv", "--sensitive", "occupation", "-o", "n.toml"], False),
        ("explore with task_runner = dask", good, ["explore", "dask.toml", "--set", "k=5"], False),
        ("explore --html on a folder", good, ["explore", "spec.toml", "--set", "k=5", "--html", "pages"], False),
        ("init -o the input --force", good, ["init", "census.csv", "--sensitive", "occupation", "-o", "census.csv", "--force"], False),
        ("a spec that is a FIFO", good, ["publish", "fifo.toml"], False),
    ]  # fmt: skip
    for name, where, args, publish in uses:
        rows, dirs = len(audit_rows(where)), release_dirs(where)
        done = cli(where, *args, timeout=120)
        out.append(judge("command r4", name, where, done, rows, dirs, planted, publish=publish))
    # a state file truncated to two thirds: every command names it in one line
    state_dir = _folder(root, "r4state")
    good_frame().to_csv(state_dir / "census.csv", index=False)
    (state_dir / "spec.toml").write_text(census_spec_toml(seed=1))
    release = cli(state_dir, "publish", "spec.toml", "--quiet").stdout.strip()
    state = state_dir / "privpub.duckdb"
    whole = state.read_bytes()
    state.write_bytes(whole[: len(whole) * 2 // 3])
    for args in (["history"], ["trail"], ["verify", release], ["snapshot", "copy.duckdb"]):
        done = cli(state_dir, *args)
        out.append(
            judge("state r4", f"{args[0]} on a truncated state", state_dir, done, 0, {release}, [], publish=False)
        )
    return out


def probe(root: Path) -> list[Outcome]:
    return probe_inputs(root) + probe_commands(root)


if __name__ == "__main__":
    run_alone(probe)

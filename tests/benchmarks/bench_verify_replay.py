"""`privpub verify`'s series composition replay at scale (tasks/compose/rebuild.py): wall, CPU and
peak RSS as fresh processes, the whole `privpub verify` and the replay alone.

The series: `--releases` monthly releases of `--rows` census rows (generalization k = 10, l = 3,
composition = "warn"), each month keeping 90% of the month before (drawn with default_rng(0))
and adding 10% new people, published with the CLI into FOLDER (once: an existing FOLDER is
reused). Then, for each code folder given (`--code`, default this checkout; e.g. an export of
main, `git archive main | tar -x -C /tmp/main`), `privpub verify` of the newest release and the
replay alone; for this checkout also at each `--batch` (the replay's people per batch).

Run (holding the timing lock):
  flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_verify_replay \
      /tmp/replay-series --rows 3000000 --releases 4 --code /tmp/main --code . --batch 250000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from privpub.tasks.demo_data import census
from tests.helpers import census_spec_toml

REPLAY = """
import sys
from privpub.state.store import Store
from privpub.tasks.compose.rebuild import replay
batch = {"batch_people": int(sys.argv[3])} if len(sys.argv) > 3 else {}
print(replay(Store(sys.argv[1]), "census", int(sys.argv[2]), True, 3, **batch))
"""


def build(folder: Path, rows: int, releases: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fresh = rows // 10
    pool = census(rows + fresh * (releases - 1), seed=1)
    rng = np.random.default_rng(0)
    present = np.arange(rows)
    for month in range(1, releases + 1):
        if month > 1:
            stay = np.sort(rng.choice(present, rows - fresh, replace=False))
            present = np.concatenate([stay, rows + fresh * (month - 2) + np.arange(fresh)])
        pool.iloc[present].to_csv(folder / f"m{month}.csv", index=False)
        spec = folder / f"s{month}.toml"
        spec.write_text(
            census_spec_toml(input_name=f"m{month}.csv", k=10, l=3, seed=7, extra='[series]\ncomposition = "warn"')
        )
        subprocess.run(
            [str(Path(sys.executable).parent / "privpub"), "publish", spec.name],
            cwd=folder,
            check=True,
            stdout=subprocess.DEVNULL,
        )


def timed(command: list[str], code: Path, cwd: Path) -> str:
    """`/usr/bin/time` of a fresh process running `code`'s modules: its last output line and figures."""
    env = {**os.environ, "PYTHONPATH": str(code.resolve())}
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e s wall, %U s user, %M KB peak RSS", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode not in (0, 1):  # 1: verify found a figure below its threshold (composition = "warn")
        raise RuntimeError(out.stderr)
    said = [line for line in out.stdout.splitlines() if "series-composition" in line or line.startswith("(")]
    return f"{said[-1] if said else ''} | {out.stderr.strip().splitlines()[-1]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--releases", type=int, default=4)
    ap.add_argument("--code", type=Path, action="append", help="a checkout whose code runs (repeatable)")
    ap.add_argument("--batch", type=int, action="append", default=[], help="people per batch (repeatable)")
    args = ap.parse_args()
    state = args.folder.resolve() / "privpub.duckdb"
    if not state.exists():
        build(args.folder, args.rows, args.releases)
    history = subprocess.run(
        [str(Path(sys.executable).parent / "privpub"), "history", "--state", str(state)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    release = [w for w in history.split() if w.startswith("census-")][-1]
    sequence = int(release.split("-")[1])
    here = Path(__file__).resolve().parents[2]
    for code in args.code or [here]:
        print(
            f"{code}: privpub verify {release}:",
            timed(
                [sys.executable, "-m", "privpub.flows.cli", "verify", release, "--state", str(state)], code, args.folder
            ),
        )
        for batch in [None, *(args.batch if code.resolve() == here else [])]:
            extra = [] if batch is None else [str(batch)]
            print(
                f"{code}: replay alone, batch {batch or 'default'}:",
                timed([sys.executable, "-c", REPLAY, str(state), str(sequence), *extra], code, args.folder),
            )


if __name__ == "__main__":
    main()

"""`privpub explore` against one `privpub publish` (issue 29, item 1; not run by CI):

    flock /tmp/privpub-bench.lock make bench-explore
    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_explore [--rows 1000000] [--pairs 3]

The gen-1m case of tests/benchmarks/bench_e2e.py (tasks.demo_data.census, 1,000,000 rows x 8
QIs, generalization l = 3, CSV input, seed 1): `privpub explore --set k=5,10,20,40` against
`privpub publish` of k = 10, each a fresh process with no Prefect server, paired (publish,
explore, publish, explore, ...) so both see the same machine load, every run in a fresh folder
with its own state file. Target: explore's median wall time <= 2x publish's (one read, one
validation, one workload shared by the four settings). Printed: every run, the medians and the
ratio, and the per-step lines of the last explore.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from tests.benchmarks.bench_e2e import PRIVPUB, measured, prepare, write_toml
from tests.benchmarks.bench_spine import print_table

GRID = "k=5,10,20,40"
TARGET = 2.0


def one_run(spec: dict, work: Path, env: dict, argv: list[str]) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    try:
        spec_path = write_toml(run_dir / "spec.toml", spec)
        return measured([str(PRIVPUB), argv[0], str(spec_path), *argv[1:]], env, run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "PRIVPUB_HOME"}
    work = Path(tempfile.mkdtemp(prefix="bench-explore-"))
    env["PRIVPUB_HOME"] = str(work / "no-service")  # no privpub service: both run in process
    env["PREFECT_HOME"] = str(work / "prefect")  # no Prefect profile
    try:
        prep = prepare("gen-1m", work, argparse.Namespace(rows_1m=args.rows))
        spec = prep["spec"]
        spec["technique"] = {**spec["technique"], "k": 10}
        runs: dict[str, list[dict]] = {"publish": [], "explore": []}
        for _ in range(args.pairs):
            runs["publish"].append(one_run(spec, work, env, ["publish", "--quiet"]))
            runs["explore"].append(one_run(spec, work, env, ["explore", "--set", GRID]))
        rows = []
        for name, done in runs.items():
            rows.append(
                [
                    name,
                    " ".join(f"{r['wall_s']:.2f}" for r in done),
                    f"{statistics.median(r['wall_s'] for r in done):.2f}",
                    f"{statistics.median(r['cpu_s'] for r in done):.2f}",
                    f"{max(r['tree_rss'] for r in done) / 2**20:.0f}",
                ]
            )
        ratio = statistics.median(r["wall_s"] for r in runs["explore"]) / statistics.median(
            r["wall_s"] for r in runs["publish"]
        )
        print_table(
            f"explore --set {GRID} vs publish k=10, {args.rows:,} rows ({args.pairs} pairs)",
            ["command", "wall s (each run)", "median wall s", "median CPU s", "peak RSS MiB"],
            rows,
        )
        print(f"\nexplore / publish: {ratio:.2f}x (target <= {TARGET:.1f}x): {'met' if ratio <= TARGET else 'MISSED'}")
        last = runs["explore"][-1]
        print("\nlast explore:")
        for t, line in last["lines"]:
            print(f"  {t:6.2f} s  {line}")
        print(last["stdout"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

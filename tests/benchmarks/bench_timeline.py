"""Two privpub executables alternated on one case, each run's progress lines stamped as they
arrive, nothing sampled beside the run (not run by CI; issue 43):

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_timeline \
        --a /work/wt-base/bench-user/bin/privpub --b bench-user/bin/privpub [--case gen-1m] [--pairs 10]

bench_paired measures peak memory with psutil every 50 ms, a Python process busy beside the
run on a two-core machine; this one only reads the run's stderr, so its times are the run's own.
Printed per side: the median moment (seconds from the start) each step ended, and every run's
exit. A B A B ...: both see the same machine load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tests.benchmarks.bench_e2e import prepare, write_toml

# progress lines (flows/pipeline.py `progress`) and the moment each marks
MARKS = {
    "input read and validated": "input",
    "partition done": "partition",
    "anonymize done": "anonymize",
    "verify done": "verify",
    "risk done": "risk",
    "quality models done": "quality",
    "commit done": "commit",
}


def start_publish(privpub: str, spec: dict, run_dir: Path, env: dict) -> subprocess.Popen:
    """`privpub publish` of `spec` started in `run_dir`, its progress lines on a pipe (stderr)."""
    spec_path = write_toml(run_dir / "spec.toml", spec)
    return subprocess.Popen(
        [privpub, "publish", str(spec_path)],
        cwd=run_dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def timeline(privpub: str, spec: dict, work: Path, env: dict) -> dict[str, float]:
    """One publish in a fresh folder: when each marked step ended, and the exit (seconds)."""
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    try:
        t0 = time.perf_counter()
        proc = start_publish(privpub, spec, run_dir, env)
        seen: dict[str, float] = {}
        assert proc.stderr is not None
        for line in proc.stderr:
            at = time.perf_counter() - t0
            for words, mark in MARKS.items():
                if words in line:
                    seen.setdefault(mark, at)
        if proc.wait() != 0:
            raise SystemExit(f"{privpub} publish failed (exit {proc.returncode})")
        seen["exit"] = time.perf_counter() - t0
        return seen
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="privpub executable A")
    ap.add_argument("--b", required=True, help="privpub executable B")
    ap.add_argument("--case", default="gen-1m", help="a publishing case of bench_e2e")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--rows-1m", type=int, default=1_000_000)
    ap.add_argument("--rows-250k", type=int, default=250_000)
    ap.add_argument("--rows-muco", type=int, default=40_152)
    args = ap.parse_args()
    sides = {"A": str(Path(args.a).resolve()), "B": str(Path(args.b).resolve())}
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PRIVPUB_HOME")}
    work = Path(tempfile.mkdtemp(prefix="bench-timeline-"))
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    try:
        spec = prepare(args.case, work, args)["spec"]
        for _ in range(args.pairs):
            for side, privpub in sides.items():
                runs[side].append(timeline(privpub, spec, work, env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.case}, {args.pairs} pairs; load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for side, privpub in sides.items():
        marks = [m for m in [*MARKS.values(), "exit"] if all(m in r for r in runs[side])]
        medians = ", ".join(f"{m} {statistics.median(r[m] for r in runs[side]):.2f}" for m in marks)
        exits = " / ".join(f"{r['exit']:.2f}" for r in runs[side])
        print(f"{side} = {privpub}\n  median end of: {medians}\n  exit of every run: {exits}")


if __name__ == "__main__":
    main()

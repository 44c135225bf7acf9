"""How many cores a publish keeps busy between its progress lines (not run by CI; issue 43):

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_cores \
        --privpub bench-user/bin/privpub [--case gen-1m] [--runs 3]

One fresh `privpub publish` per run. Its CPU time (user + system, all its threads, from
/proc/<pid>/stat) is read every 20 ms while its progress lines are stamped as they arrive;
printed per run: each stretch between two marked lines with its length and the cores it kept
busy (CPU seconds over wall seconds), then the run's wall time, CPU time and the floor that CPU
time sets on this machine (CPU seconds over its cores: no arrangement of the same work ends
sooner). Linux only. Reading /proc costs the reader a few microseconds each 20 ms: nothing
beside the run is busy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from tests.benchmarks.bench_e2e import prepare
from tests.benchmarks.bench_timeline import MARKS, start_publish

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
EVERY = 0.02  # seconds between two reads of the run's CPU time


def cpu_seconds(pid: int) -> float | None:
    """The process's user + system CPU time so far (all its threads), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)


def one_run(
    privpub: str, spec: dict, work: Path, env: dict
) -> tuple[list[tuple[float, float]], list[tuple[float, str]]]:
    """One publish: its (seconds from the start, CPU seconds) readings and (seconds, mark) lines."""
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    try:
        t0 = time.perf_counter()
        proc = start_publish(privpub, spec, run_dir, env)
        marks: list[tuple[float, str]] = []

        def read_lines() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                at = time.perf_counter() - t0
                marks.extend((at, mark) for words, mark in MARKS.items() if words in line)

        reader = threading.Thread(target=read_lines)
        reader.start()
        readings = [(0.0, 0.0)]
        while proc.poll() is None:
            used = cpu_seconds(proc.pid)
            if used is not None:
                readings.append((time.perf_counter() - t0, used))
            time.sleep(EVERY)
        reader.join()
        if proc.returncode != 0:
            raise SystemExit(f"{privpub} publish failed (exit {proc.returncode})")
        # the last reading: the CPU time the kernel reports for the ended child (its threads too)
        end = time.perf_counter() - t0
        return readings + [(end, readings[-1][1])], marks + [(end, "exit")]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def cpu_at(readings: list[tuple[float, float]], at: float) -> float:
    """The CPU seconds used by `at` (the reading just before it)."""
    before = [cpu for t, cpu in readings if t <= at]
    return before[-1] if before else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--privpub", required=True, help="the privpub executable")
    ap.add_argument("--case", default="gen-1m", help="a publishing case of bench_e2e")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows-1m", type=int, default=1_000_000)
    ap.add_argument("--rows-250k", type=int, default=250_000)
    ap.add_argument("--rows-muco", type=int, default=40_152)
    args = ap.parse_args()
    privpub = str(Path(args.privpub).resolve())
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PRIVPUB_HOME")}
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="bench-cores-"))
    try:
        spec = prepare(args.case, work, args)["spec"]
        for i in range(args.runs):
            readings, marks = one_run(privpub, spec, work, env)
            print(f"run {i + 1} ({args.case}, {cores} cores):")
            start, label = 0.0, "start"
            for at, mark in marks:
                if at - start < 0.01:  # two lines at once: one stretch
                    continue
                used = cpu_at(readings, at) - cpu_at(readings, start)
                print(f"  {label:>9} -> {mark:<9} {start:5.2f}-{at:5.2f} s  {used / (at - start):4.2f} cores")
                start, label = at, mark
            wall, cpu = marks[-1][0], readings[-1][1]
            print(
                f"  wall {wall:.2f} s, CPU {cpu:.2f} s (user + system), {cpu / wall:.2f} cores on average; "
                f"the CPU time over {cores} cores: {cpu / cores:.2f} s"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

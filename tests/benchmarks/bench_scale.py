"""Scale benchmark (not run by CI): `make bench-scale`, or

    .venv/bin/python -m tests.benchmarks.bench_scale [--rows 20000000] [--files 40]
        [--small-rows 1000000] [--workers 2] [--worker-memory 4GiB] [--chunk-rows 1000000]
        [--cases big,small-cluster,small-memory] [--work /tmp/privpub-bench-scale]

`privpub publish` as a fresh process on a synthetic census (tasks.demo_data: 8 QIs, sensitive
occupation, generalization k = 10), input as Parquet files (--files of them):
- big: --rows rows on a Dask LocalCluster this script starts (--workers processes, one thread
  each, each limited to --worker-memory with spilling off), reached by [run] address;
- small-cluster: --small-rows rows, the same cluster;
- small-memory: --small-rows rows in one Parquet file, in memory (the reference);
- series (not by default): two monthly releases of --series-rows rows on the cluster, the second
  with 10% of the people replaced, so its series composition check combines the two.
Targets (issue 15): big completes; the flow process's peak RSS < 2 GiB; big's wall time per
million rows <= 2x small-memory's.

Printed per case: wall time, rows/s, each stage's time (the flow's "... done in X s" lines), the
peak RSS and CPU time (user + system, the steadier figure on a shared machine) of every process
(the privpub process, its children such as the temporary Prefect server, the cluster's
scheduler and workers; sampled every 0.2 s with psutil; a process's CPU time is counted from
the case's start, up to the last sample).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
PRIVPUB = ROOT / ".venv" / "bin" / "privpub"
GiB = 1024**3
STAGE = re.compile(r"([A-Za-z][\w ,-]*?) done in ([\d.]+) s")


def make_data(folder: Path, rows: int, files: int) -> None:
    """`files` Parquet files of a synthetic census, person ids unique over all of them."""
    from privpub.tasks.demo_data import census

    marker = folder / f".complete-{rows}-{files}"
    if marker.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.parquet"):
        old.unlink()
    bounds = [rows * i // files for i in range(files + 1)]
    for i in range(files):
        frame = census(bounds[i + 1] - bounds[i], seed=1000 + i)
        frame["pid"] += bounds[i]
        frame.to_parquet(folder / f"part-{i:03d}.parquet", index=False)
    marker.touch()


def write_spec(folder: Path, input_path: Path, run: str) -> Path:
    from tests.helpers import census_spec_toml

    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "spec.toml"
    spec.write_text(census_spec_toml(str(input_path), k=10, l=None, seed=1) + "\n" + run + "\n")
    for leftover in ("privpub.duckdb", "privpub.duckdb.wal"):
        (folder / leftover).unlink(missing_ok=True)
    return spec


def make_next_month(source: Path, folder: Path, rows: int, turnover: float) -> None:
    """The next release's input: each file of `source` without a `turnover` share of its people
    (drawn at random) and with as many newcomers (ids above every earlier one); the people who
    return keep their rows, so their values are unchanged (permanent)."""
    import numpy as np
    import pandas as pd

    from privpub.tasks.demo_data import census

    marker = folder / f".complete-{rows}-{turnover}"
    if marker.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    next_id = rows + 1  # census ids run from 1 to rows
    for path in sorted(source.glob("*.parquet")):
        frame = pd.read_parquet(path)
        leave = int(len(frame) * turnover)
        kept = frame.drop(frame.index[rng.choice(len(frame), leave, replace=False)])
        new = census(leave, seed=int(rng.integers(2**31)))
        new["pid"] = np.arange(next_id, next_id + leave)
        next_id += leave
        pd.concat([kept, new], ignore_index=True).to_parquet(folder / path.name, index=False)
    marker.touch()


class PeakRSS(threading.Thread):
    """Peak RSS of every process under the tracked roots (and the roots themselves)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.roots: dict[int, str] = {}
        self.alone: set[int] = set()  # tracked without their children
        self.peak: dict[tuple[int, str], int] = {}
        self.cpu: dict[tuple[int, str], float] = {}  # user + system seconds at the last sample
        self.stop = threading.Event()

    def track(self, pid: int, label: str, children: bool = True) -> None:
        self.roots[pid] = label
        if not children:
            self.alone.add(pid)

    def run(self) -> None:
        while not self.stop.is_set():
            for pid, label in list(self.roots.items()):
                try:
                    root = psutil.Process(pid)
                    procs = [(root, label)]
                    if pid not in self.alone:
                        procs += [(c, f"{label}/{c.name()}") for c in root.children(recursive=True)]
                except psutil.Error:
                    continue
                for proc, name in procs:
                    try:
                        rss = proc.memory_info().rss
                        times = proc.cpu_times()
                    except psutil.Error:
                        continue
                    key = (proc.pid, name)
                    self.peak[key] = max(self.peak.get(key, 0), rss)
                    self.cpu[key] = times.user + times.system
            time.sleep(0.2)


def start_cluster(workers: int, memory: str):
    import dask
    from distributed import Client, LocalCluster

    # spilling off: the workers hold secret rows (privpub refuses a cluster that would spill)
    with dask.config.set({"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        )
    return cluster, Client(cluster, set_as_default=False)


def run_case(name: str, spec: Path, rows: int, sampler: PeakRSS, cluster_pids: dict[int, str]) -> dict:
    sampler.roots = {}
    time.sleep(0.5)  # the sampler's pass over the previous case's processes ends
    sampler.peak.clear()
    for pid, label in cluster_pids.items():
        sampler.track(pid, label, children=False)
    time.sleep(0.5)
    cpu_before = dict(sampler.cpu)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(PRIVPUB), "publish", str(spec)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    sampler.track(proc.pid, "privpub")
    stages: dict[str, float] = {}
    tail: list[str] = []
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-15:]
        m = STAGE.search(line)
        if m:
            stages[m.group(1).strip()] = float(m.group(2))
    rc = proc.wait()
    wall = time.perf_counter() - t0
    if rc != 0:
        print(f"{name}: privpub exited {rc}:\n" + "\n".join(tail), file=sys.stderr)
    flow_peak = max((v for (pid, label), v in sampler.peak.items() if label == "privpub"), default=0)
    time.sleep(0.5)
    cpu = {key: seconds - cpu_before.get(key, 0.0) for key, seconds in sampler.cpu.items() if key in sampler.peak}
    return {
        "case": name,
        "rows": rows,
        "rc": rc,
        "wall": wall,
        "stages": stages,
        "peaks": dict(sampler.peak),
        "flow_peak": flow_peak,
        "cpu": cpu,
    }


def report(results: list[dict]) -> None:
    print("\n== privpub bench-scale ==")
    print(f"load average: {os.getloadavg()}")
    for r in results:
        print(
            f"\n{r['case']}: {r['rows']:,} rows, exit {r['rc']}, wall {r['wall']:.1f} s, "
            f"{r['rows'] / r['wall']:,.0f} rows/s, {r['wall'] / (r['rows'] / 1e6):.2f} s per million rows"
        )
        for stage, seconds in r["stages"].items():
            print(f"  stage {stage:<45} {seconds:8.2f} s")
        for (pid, label), rss in sorted(r["peaks"].items(), key=lambda kv: -kv[1]):
            cpu = r["cpu"].get((pid, label), float("nan"))
            print(f"  peak RSS {label:<40} pid {pid:<8} {rss / GiB:6.2f} GiB   CPU {cpu:8.1f} s")
        print(f"  CPU time, all processes: {sum(r['cpu'].values()):.1f} s")
        print(f"  flow process peak RSS {r['flow_peak'] / GiB:.2f} GiB (target < 2 GiB)")
    by = {r["case"]: r for r in results}
    if "big" in by and "small-memory" in by:
        big = by["big"]["wall"] / (by["big"]["rows"] / 1e6)
        small = by["small-memory"]["wall"] / (by["small-memory"]["rows"] / 1e6)
        print(
            f"\nbig: {big:.2f} s per million rows; in memory at {by['small-memory']['rows']:,}: "
            f"{small:.2f} s per million rows; ratio {big / small:.2f} (target <= 2)"
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--small-rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="4GiB")
    ap.add_argument("--chunk-rows", type=int, default=1_000_000)
    ap.add_argument(
        "--cases",
        default="small-memory,small-cluster,big",
        help="also: series (two monthly releases of --series-rows on the cluster)",
    )
    ap.add_argument("--series-rows", type=int, default=4_000_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/privpub-bench-scale"))
    args = ap.parse_args(argv)
    cases = args.cases.split(",")
    work = args.work
    sampler = PeakRSS()
    sampler.start()
    results = []
    small_dir = work / f"data-{args.small_rows}-{args.files}"
    if "small-memory" in cases:
        make_data(work / f"data-{args.small_rows}-1", args.small_rows, 1)
        spec = write_spec(work / "small-memory", work / f"data-{args.small_rows}-1" / "part-000.parquet", "")
        results.append(run_case("small-memory", spec, args.small_rows, sampler, {}))
    if {"small-cluster", "big", "series"} & set(cases):
        cluster, client = start_cluster(args.workers, args.worker_memory)
        try:
            # the nannies live in this process; each worker is a spawned child of it
            pids = {
                p.pid: "cluster worker" if "spawn_main" in " ".join(p.cmdline()) else f"cluster/{p.name()}"
                for p in psutil.Process().children(recursive=True)
            }
            pids[os.getpid()] = "bench process (scheduler)"
            run = (
                f'[run]\ntask_runner = "dask"\naddress = "{cluster.scheduler_address}"\nchunk_rows = {args.chunk_rows}'
            )
            if "small-cluster" in cases:
                make_data(small_dir, args.small_rows, args.files)
                spec = write_spec(work / "small-cluster", small_dir, run)
                results.append(run_case("small-cluster", spec, args.small_rows, sampler, pids))
            if "big" in cases:
                big_dir = work / f"data-{args.rows}-{args.files}"
                t0 = time.perf_counter()
                make_data(big_dir, args.rows, args.files)
                print(f"data ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                spec = write_spec(work / "big", big_dir, run)
                results.append(run_case("big", spec, args.rows, sampler, pids))
            if "series" in cases:  # two monthly releases: the second runs the composition check
                first_dir = work / f"data-{args.series_rows}-{args.files}"
                make_data(first_dir, args.series_rows, args.files)
                second_dir = work / f"data-{args.series_rows}-{args.files}-month2"
                make_next_month(first_dir, second_dir, args.series_rows, 0.1)
                spec = write_spec(work / "series", first_dir, run + '\n[series]\ncomposition = "warn"')
                results.append(run_case("series-month1", spec, args.series_rows, sampler, pids))
                month2 = spec.with_name("spec2.toml")
                month2.write_text(
                    spec.read_text().replace(str(first_dir), str(second_dir)).replace("seed = 1", "seed = 2")
                )
                results.append(run_case("series-month2", month2, args.series_rows, sampler, pids))
        finally:
            client.close()
            cluster.close()
    sampler.stop.set()
    report(results)
    return 0 if all(r["rc"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

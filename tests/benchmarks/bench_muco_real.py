"""MuCo through `privpub publish` on real-shaped tables, paired before/after (issue 43 item 2).

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_muco_real \\
        --before /work/main/.venv --after .venv --pairs 5

Three inputs, delta = 1/5, l = 10 (the issue's MuCo settings):
- `census2000`: Wooldridge's CENSUS2000 (tests/benchmarks/real_tables.py, 29,501 rows; QIs state,
  educ, exper; sensitive weekly_income, 1,703 distinct values), from its cached wheel.
- `ipums-shaped`: generated like the MuCo reference's IPUMS extract (which is not on this machine):
  40,152 rows, QIs RELATE, SEX, AGE, MARST, RACE, EDUC, UHRSWORK, sensitive INCWAGE with 851
  distinct wages, lognormal and heaped on round thousands.
- `gss_wages`: the GSS wage file (tests/benchmarks/real_tables.py, 37,612 respondents; QIs age,
  degree, children, gender, marital status, work status, occupation group; sensitive realrinc, 601
  distinct whole-dollar incomes, heaped on bracket midpoints): the real table closest to the
  reference's IPUMS extract that a wheel on the package index holds. Target (issue 43 item 2): <= 4 s.

Each run is a fresh process of the venv's python calling `privpub publish` (flows.cli.main), its
stderr lines stamped with the process CPU time so that every phase gets wall and CPU seconds (the
machine is shared: CPU is the steadier figure). Before and after alternate, pair by pair; the
medians (by wall) of each side are printed with their phases, the load, and the sha256 of the
published table of every run, which must be the same on both sides (the optimisation changes no
output).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tests.benchmarks.bench_e2e import write_toml
from tests.benchmarks.real_tables import census2000, census2000_qi, gss_wages, gss_wages_qi

# stamps every "[privpub] ..." line on stderr with the process CPU seconds, then runs the CLI
LAUNCHER = """
import sys, time
class Stamped:
    def __init__(self, f): self.f = f
    def write(self, t):
        if t.startswith("[privpub]") and not t.endswith("\\n"):
            t += f" [cpu {time.process_time():.3f}]"
        return self.f.write(t)
    def __getattr__(self, name): return getattr(self.f, name)
sys.stderr = Stamped(sys.stderr)
from privpub.flows.cli import main
sys.exit(main(sys.argv[1:]))
"""
STAMP = re.compile(r"^\[privpub\] (?P<what>.+?) done in (?P<s>[0-9.]+) s.*\[cpu (?P<cpu>[0-9.]+)\]$")
INPUT = re.compile(r"^\[privpub\] input read and validated in (?P<s>[0-9.]+) s.*\[cpu (?P<cpu>[0-9.]+)\]$")
PHASES = ("partition", "anonymize", "verify", "evaluate", "risk", "write files", "report", "commit")


def ipums_shaped(n: int = 40_152, seed: int = 43) -> pd.DataFrame:
    """A table shaped like the MuCo reference's IPUMS extract: 7 QIs, 851 distinct skewed wages."""
    rng = np.random.default_rng(seed)
    wages = np.unique(np.round(np.exp(rng.normal(10.3, 0.8, 20_000)) / 100) * 100)
    wages = np.unique(np.concatenate([np.arange(1000, 101_000, 1000), rng.choice(wages, 900, replace=False)]))[:851]
    weight = np.exp(-0.5 * ((np.log(wages) - 10.3) / 0.8) ** 2 + 2.0 * (wages % 5000 == 0))  # heaped
    pick = rng.choice(len(wages), n, p=weight / weight.sum())
    pick[: len(wages)] = np.arange(len(wages))  # every wage present
    rng.shuffle(pick)
    return pd.DataFrame(
        {
            "pid": np.arange(1, n + 1),
            "RELATE": rng.choice(np.arange(1, 14), n, p=np.array([45, 25, 15, 2, 2, 2, 1, 1, 1, 1, 1, 2, 2]) / 100),
            "SEX": rng.choice([1, 2], n),
            "AGE": np.clip(rng.normal(42, 13, n).round(), 16, 90).astype(int),
            "MARST": rng.choice(np.arange(1, 7), n, p=[0.5, 0.02, 0.03, 0.1, 0.05, 0.3]),
            "RACE": rng.choice(np.arange(1, 10), n, p=[0.75, 0.1, 0.01, 0.01, 0.05, 0.01, 0.04, 0.02, 0.01]),
            "EDUC": rng.choice(np.arange(12), n, p=np.array([1, 1, 1, 2, 2, 3, 30, 8, 12, 5, 20, 15]) / 100),
            "UHRSWORK": np.clip(rng.normal(40, 10, n).round(), 1, 99).astype(int),
            "INCWAGE": wages[pick].astype(np.int64),
        }
    )


IPUMS_QI = [
    {"name": "RELATE", "kind": "categorical"},
    {"name": "SEX", "kind": "categorical"},
    {"name": "AGE", "kind": "numeric"},
    {"name": "MARST", "kind": "categorical"},
    {"name": "RACE", "kind": "categorical"},
    {"name": "EDUC", "kind": "numeric"},
    {"name": "UHRSWORK", "kind": "numeric"},
]


def prepare(case: str, work: Path) -> dict:
    if case == "census2000":
        frame, qi, sensitive = census2000(), census2000_qi(), "weekly_income"
    elif case == "gss_wages":
        frame, qi, sensitive = gss_wages(), gss_wages_qi(), "realrinc"
    elif case == "ipums-shaped":
        frame, qi, sensitive = ipums_shaped(), IPUMS_QI, "INCWAGE"
    else:
        raise SystemExit(f"unknown case {case!r}: census2000, ipums-shaped, gss_wages")
    path = work / f"{case}.csv"
    frame.to_csv(path, index=False)
    print(f"{case}: {len(frame):,} rows, {len(qi)} QIs, {frame[sensitive].nunique():,} distinct {sensitive}")
    return {
        "dataset": {"name": "bench", "input": str(path), "person_id": "pid", "sensitive": sensitive, "qi": qi},
        "technique": {"name": "muco", "delta": "1/5", "l": 10},
        "output": {"dir": "releases", "state": "privpub.duckdb", "seed": 1},
    }


def run_once(venv: Path, spec: dict, work: Path) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    write_toml(folder / "spec.toml", spec)
    cmd = [str(venv / "bin" / "python"), "-c", LAUNCHER, "publish", "spec.toml"]
    with open(folder / "out.txt", "w+") as fout, open(folder / "err.txt", "w+") as ferr:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=folder, stdout=fout, stderr=ferr)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU and peak RSS
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    out, err = (folder / "out.txt").read_text(), (folder / "err.txt").read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"{venv}: exited {proc.returncode}\n{err[-2000:]}")
    release = out.splitlines()[0].strip()
    table = folder / "releases" / release / "table.parquet"
    cpu, rss = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
    res = {"wall": wall, "cpu": cpu, "rss_mib": rss, "phases": phases(err), "sha": content_sha(table)}
    shutil.rmtree(folder, ignore_errors=True)
    return res


def phases(stderr: str) -> dict[str, tuple[float, float]]:
    """(wall, cpu) of every phase: 'start' (imports and the spec, up to reading the input), the steps."""
    out: dict[str, tuple[float, float]] = {}
    last_cpu = 0.0
    for line in stderr.splitlines():
        m = INPUT.match(line)
        if m:
            cpu = float(m["cpu"])
            out["start+load"] = (float("nan"), cpu)
            last_cpu = cpu
            continue
        m = STAMP.match(line)
        if m and m["what"] in PHASES:
            cpu = float(m["cpu"])
            # the report is inside the commit: its CPU is counted in both
            out[m["what"]] = (float(m["s"]), cpu - last_cpu)
            if m["what"] != "report":
                last_cpu = cpu
    return out


def content_sha(path: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path).combine_chunks().replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()[:16]


def median_run(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["wall"])[(len(runs) - 1) // 2]


def show(case: str, side: str, runs: list[dict]) -> None:
    mid = median_run(runs)
    walls = " / ".join(f"{r['wall']:.2f}" for r in runs)
    cpus = sorted(r["cpu"] for r in runs)
    print(
        f"  {side:<6} wall median {mid['wall']:.2f} s ({walls}); cpu median {cpus[(len(cpus) - 1) // 2]:.2f} s; "
        f"peak RSS {max(r['rss_mib'] for r in runs):.0f} MiB; table sha256 {sorted({r['sha'] for r in runs})}"
    )
    print("         phases of the median run (wall / cpu s): " + ", ".join(
        f"{k} {'-' if w != w else f'{w:.2f}'} / {c:.2f}" for k, (w, c) in mid["phases"].items()
    ))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True, help="the venv of the tree before (e.g. main's)")
    ap.add_argument("--after", type=Path, default=Path(".venv"))
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--cases", default="census2000,ipums-shaped,gss_wages")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="privpub-bench-muco-real-"))
    try:
        for case in args.cases.split(","):
            spec = prepare(case, work)
            runs: dict[str, list[dict]] = {"before": [], "after": []}
            print(f"{case}: load before {os.getloadavg()}")
            for _ in range(args.pairs):
                for side, venv in (("before", args.before), ("after", args.after)):
                    runs[side].append(run_once(venv.absolute(), spec, work))
            print(f"{case}: load after {os.getloadavg()}")
            for side in ("before", "after"):
                show(case, side, runs[side])
            same = {r["sha"] for r in runs["before"]} == {r["sha"] for r in runs["after"]}
            print(f"  published tables identical before/after: {same}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

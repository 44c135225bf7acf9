"""Benchmark of serial publishing (not run by CI).

20 releases of about 100,000 tuples. Each release starts from the previous snapshot, lets 20% of
the people leave and 20% come in (new or returning people from a fixed pool, so the table stays
near 100,000 while the history keeps growing), and gives 20% of the tuples a new sensitive value
drawn from the overall distribution (the paper's protocol, Section 8). Protected (transient)
values: the 10% least frequent, as in the paper.

Per release it times everything a serial release does: validation into Microdata, the requirement
lookup and grouping (partition), the published tables (anonymize), the global and localized checks
over the whole history (verify) and the statistics update.

    .venv/bin/python tests/benchmarks/bench_serial.py [--strategy geometric] [--registration]
        [--rebuild] [--releases 20] [--tuples 100000] [--l 4]

--rebuild passes the raw history rows instead of the carried aggregate, so the per-pair aggregate
is rebuilt from the whole history in partition and again in verify (what a store that only keeps
the history rows would cost).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from schemas.spec import spec_from_dict  # noqa: E402
from tasks.anonymize.serial import SerialTechnique  # noqa: E402
from tasks.microdata import Microdata  # noqa: E402
from tasks.serial import statistics as stats  # noqa: E402


def make_pool(rng: np.random.Generator, people: int, n_values: int):
    qi = pd.DataFrame({
        "pid": np.arange(people),
        "age": rng.integers(0, 100, people),
        "zip": rng.integers(0, 1000, people),
        "sex": rng.choice(["F", "M"], people),
    })
    weights = 1.0 / np.arange(1, n_values + 1) ** 1.1  # Zipf-like, as disease frequencies are
    weights /= weights.sum()
    values = np.array([f"d{i:03d}" for i in range(n_values)], dtype=object)
    return qi, values, weights


def next_snapshot(rng, snapshot, pool, values, weights, churn=0.2, change=0.2):
    n = len(snapshot)
    stay = snapshot.iloc[rng.permutation(n)[int(churn * n):]]
    absent = np.setdiff1d(pool["pid"].to_numpy(), stay["pid"].to_numpy())
    newcomers = pool.iloc[rng.choice(absent, n - len(stay), replace=False)].copy()
    newcomers["dis"] = rng.choice(values, len(newcomers), p=weights)
    frame = pd.concat([stay, newcomers], ignore_index=True)
    flip = rng.random(len(frame)) < change
    frame.loc[flip, "dis"] = rng.choice(values, int(flip.sum()), p=weights)
    return frame


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", type=int, default=20)
    ap.add_argument("--tuples", type=int, default=100_000)
    ap.add_argument("--people", type=int, default=150_000)
    ap.add_argument("--values", type=int, default=500)
    ap.add_argument("--l", type=int, default=4)
    ap.add_argument("--strategy", default="constant-ratio")
    ap.add_argument("--registration", action="store_true")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    pool, values, weights = make_pool(rng, args.people, args.values)
    transient = sorted(values[np.argsort(weights)[: args.values // 10]])  # 10% least frequent
    spec = spec_from_dict({
        "dataset": {"name": "bench", "input": "bench.csv", "person_id": "pid", "sensitive": "dis",
                    "qi": [{"name": "age", "kind": "numeric"}, {"name": "zip", "kind": "numeric"},
                           {"name": "sex", "kind": "categorical"}]},
        "technique": {"name": "serial", "l": args.l, "strategy": args.strategy, "releases": 20,
                      "factor": 2, "transient": transient},
    })
    tech = SerialTechnique(spec)
    registration = pool if args.registration else None

    snapshot = pool.iloc[rng.choice(args.people, args.tuples, replace=False)].copy()
    snapshot["dis"] = rng.choice(values, len(snapshot), p=weights)
    aggregate, history = None, []
    header = ("rel", "tuples", "groups", "avg", "max", "supp", "virtual", "pairs", "hist_rows",
              "t_data", "t_part", "t_anon", "t_verify", "t_stats", "total", "worst_p")
    print(" ".join(f"{h:>9}" for h in header))
    for r in range(1, args.releases + 1):
        if r > 1:
            snapshot = next_snapshot(rng, snapshot, pool, values, weights)
        hist = pd.concat(history, ignore_index=True) if (args.rebuild and history) else None
        source = ({"serial_stats": hist} if args.rebuild else {"serial_aggregate": aggregate})
        t0 = time.perf_counter()
        data = Microdata.from_frame(spec, snapshot.reset_index(drop=True))
        data.extra = {**source, "serial_release": r, "registration": registration}
        t1 = time.perf_counter()
        part = tech.partition(data, rng)
        t2 = time.perf_counter()
        release = tech.anonymize(data, part, rng)
        t3 = time.perf_counter()
        results = {x.model: x for x in tech.verify(release, {**source, "registration": registration})}
        t4 = time.perf_counter()
        rows = release.private["serial_stats"].to_pandas()
        if args.rebuild:
            history.append(rows)
        else:
            aggregate = stats.update(aggregate, rows)
        t5 = time.perf_counter()
        assert all(x.passed for x in results.values()), results
        n_hist = sum(len(h) for h in history) if args.rebuild else 0
        pairs = results["serial-global"].worst.get("pairs", 0)
        worst = float(eval(results["serial-global"].value.replace("/", "/1/")) if "/" in
                      results["serial-global"].value else 0)
        info = release.info
        row = (r, len(snapshot), info["groups"], f"{info['avg_group_size']:.1f}", info["max_group_size"],
               info["suppressed"], info["virtual_members"], pairs, n_hist,
               f"{t1 - t0:.2f}", f"{t2 - t1:.2f}", f"{t3 - t2:.2f}", f"{t4 - t3:.2f}", f"{t5 - t4:.2f}",
               f"{t5 - t0:.2f}", f"{worst:.4f}")
        print(" ".join(f"{x!s:>9}" for x in row), flush=True)


if __name__ == "__main__":
    main()

"""Benchmark of serial publishing (not run by CI).

20 releases of about 100,000 tuples. Each release starts from the previous snapshot, lets 20% of
the people leave and 20% come in (new or returning people from a fixed pool, so the table stays
near 100,000 while the history keeps growing), and gives 20% of the tuples a new sensitive value
drawn from the overall distribution (the paper's protocol, Section 8). Protected (transient)
values: the 10% least frequent, as in the paper.

Per release it times everything a serial release does: validation into Microdata, the requirement
lookup and grouping (partition), the published tables and the statistics update (anonymize: the
new stored aggregate and series summary), the global and localized checks over the whole series
(verify: incremental, the pairs of the release's people plus the carried summary), and writing the
private statistics as the commit does (Parquet bytes). Each release is fed what the store would
give the next one: the previous release's `serial_aggregate` and `serial_summary`.

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_serial
        [--strategy geometric] [--registration] [--full | --rebuild] [--releases 20]
        [--tuples 100000] [--l 4]

--full    verify each release as `privpub verify` does: rebuild the aggregate from every history
          row and recheck every pair (publishing still uses the carried aggregate).
--rebuild pass only the raw history rows, so partition, anonymize and verify all rebuild the
          aggregate from the whole history (what a store keeping only history rows would cost).
rows is the release's own history rows (members x protected values of their groups: the work a
release must do), pairs the distinct (person, value) pairs of the whole series.
The last lines give seconds per release r1 -> rN, the max, the least-squares slope of seconds per
release over releases 2..N, rN/r2, and total wall and CPU seconds.
"""
from __future__ import annotations

import argparse
import io
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

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
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--rebuild", action="store_true")
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
    carried: dict = {}
    history = None
    header = ("rel", "tuples", "groups", "avg", "max", "supp", "virtual", "rows", "pairs", "hist_rows",
              "t_data", "t_part", "t_anon", "t_verify", "t_store", "total", "cpu", "worst_p")
    print(" ".join(f"{h:>9}" for h in header))
    totals, cpus, stores = [], [], []
    for r in range(1, args.releases + 1):
        if r > 1:
            snapshot = next_snapshot(rng, snapshot, pool, values, weights)
        source = {"serial_stats": history} if args.rebuild else dict(carried)
        check_source = {"serial_stats": history} if (args.rebuild or args.full) else dict(carried)
        c0, t0 = time.process_time(), time.perf_counter()
        data = Microdata.from_frame(spec, snapshot.reset_index(drop=True))
        data.extra = {**source, "serial_release": r, "registration": registration}
        t1 = time.perf_counter()
        part = tech.partition(data, rng)
        t2 = time.perf_counter()
        release = tech.anonymize(data, part, rng)
        t3 = time.perf_counter()
        results = {x.model: x for x in tech.verify(release, {**check_source, "registration": registration})}
        t4 = time.perf_counter()
        stored = store_bytes(release.private)  # what the commit writes into release_private
        t5, c5 = time.perf_counter(), time.process_time()
        assert all(x.passed for x in results.values()), results
        carried = {"serial_aggregate": release.private["serial_aggregate"],
                   "serial_summary": release.private["serial_summary"]}
        if args.rebuild or args.full:
            history = stats.concat_history([history, release.private["serial_stats"]])
        n_hist = 0 if history is None else history.num_rows
        pairs = results["serial-global"].worst.get("pairs", 0)
        worst = float(Fraction(results["serial-global"].value))
        info = release.info
        totals.append(t5 - t0)
        cpus.append(c5 - c0)
        stores.append(t5 - t4)
        row = (r, len(snapshot), info["groups"], f"{info['avg_group_size']:.1f}", info["max_group_size"],
               info["suppressed"], info["virtual_members"], release.private["serial_stats"].num_rows,
               pairs, n_hist,
               f"{t1 - t0:.2f}", f"{t2 - t1:.2f}", f"{t3 - t2:.2f}", f"{t4 - t3:.2f}", f"{t5 - t4:.2f}",
               f"{t5 - t0:.2f}", f"{c5 - c0:.2f}", f"{worst:.4f}")
        print(" ".join(f"{x!s:>9}" for x in row), f"{stored / 1e6:.1f}MB", flush=True)
    for name, t in (("wall", np.asarray(totals)), ("CPU", np.asarray(cpus)),
                    ("wall without t_store", np.asarray(totals) - np.asarray(stores))):
        rel = np.arange(1, len(t) + 1)
        slope = float(np.polyfit(rel[1:], t[1:], 1)[0]) if len(t) > 2 else float("nan")
        print(f"{name}: s/release r1 -> r{len(t)}: {t[0]:.2f} -> {t[-1]:.2f}; max {t.max():.2f}; "
              f"slope over r2..r{len(t)}: {slope * 1000:+.0f} ms/release; r{len(t)}/r2: "
              f"{t[-1] / t[min(1, len(t) - 1)]:.2f}; total {t.sum():.1f} s")


def store_bytes(private: dict) -> int:
    """Serialise the private metadata as Store.commit_release does (Arrow tables as Parquet)."""
    n = 0
    for obj in private.values():
        if isinstance(obj, pa.Table):
            buf = io.BytesIO()
            pq.write_table(obj, buf)
            n += buf.tell()
    return n


if __name__ == "__main__":
    main()

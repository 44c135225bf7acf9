"""Benchmark of serial publishing (not run by CI).

20 releases of about 100,000 tuples. Each release starts from the previous snapshot, lets 20% of
the people leave and 20% come in (new or returning people from a fixed pool, so the table stays
near 100,000 while the history keeps growing), and gives 20% of the tuples a new sensitive value
drawn from the overall distribution (the paper's protocol, Section 8). Protected (transient)
values: the 10% least frequent, as in the paper.

Per release it times everything a serial release does: validation into Microdata, the requirement
lookup and grouping (partition), the published tables and the statistics update (anonymize: the
pairs the release names and the series summary), the global and localized checks over the whole
series (verify: incremental, the pairs of the release's people plus the stored summary), and the
commit into a real state database (t_store: staging the published Parquet files, then one
transaction with the release, its private metadata and the upsert of its pairs into serial_pairs).
Each release reads its history as `privpub serial` does: `prior_context` on that store (the
summary row, then the pairs of the present people through a join in DuckDB).

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_serial
        [--strategy geometric] [--registration] [--full | --rebuild] [--releases 20]
        [--tuples 100000] [--l 4]

--full    verify each release as `privpub verify` does: rebuild the aggregate from every history
          row and recheck every pair (publishing still uses the carried aggregate).
--rebuild pass only the raw history rows, so partition, anonymize and verify all rebuild the
          aggregate from the whole history (what a store keeping only history rows would cost);
          the commit then stores no statistics.
t_store includes t_pairs (the commit hook: keys for new people and values, delete + insert of the
named pairs in serial_pairs, the summary row) and t_close (from after the hook: COMMIT, the audit
row, closing the connection, which checkpoints, and renaming the staged folder).
rows is the release's own history rows (members x protected values of their groups: the work a
release must do), pairs the distinct (person, value) pairs of the whole series.
The last lines give seconds per release r1 -> rN, the max, the least-squares slope of seconds per
release over releases 2..N, rN/r2, and total wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from privpub.schemas.spec import spec_from_dict  # noqa: E402
from privpub.state.store import Store, stage_tables  # noqa: E402
from privpub.tasks.core.microdata import Microdata  # noqa: E402
from privpub.tasks.techniques.serial import statistics as stats  # noqa: E402
from privpub.tasks.techniques.serial.technique import SerialTechnique  # noqa: E402


def make_pool(rng: np.random.Generator, people: int, n_values: int):
    qi = pd.DataFrame(
        {
            "pid": np.arange(people),
            "age": rng.integers(0, 100, people),
            "zip": rng.integers(0, 1000, people),
            "sex": rng.choice(["F", "M"], people),
        }
    )
    weights = 1.0 / np.arange(1, n_values + 1) ** 1.1  # Zipf-like, as disease frequencies are
    weights /= weights.sum()
    values = np.array([f"d{i:03d}" for i in range(n_values)], dtype=object)
    return qi, values, weights


def next_snapshot(rng, snapshot, pool, values, weights, churn=0.2, change=0.2):
    n = len(snapshot)
    stay = snapshot.iloc[rng.permutation(n)[int(churn * n) :]]
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
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "bench",
                "input": "bench.csv",
                "person_id": "pid",
                "sensitive": "dis",
                "qi": [
                    {"name": "age", "kind": "numeric"},
                    {"name": "zip", "kind": "numeric"},
                    {"name": "sex", "kind": "categorical"},
                ],
            },
            "technique": {
                "name": "serial",
                "l": args.l,
                "strategy": args.strategy,
                "releases": 20,
                "factor": 2,
                "transient": transient,
            },
        }
    )
    tech = SerialTechnique(spec)
    registration = pool if args.registration else None

    snapshot = pool.iloc[rng.choice(args.people, args.tuples, replace=False)].copy()
    snapshot["dis"] = rng.choice(values, len(snapshot), p=weights)
    workdir = Path(tempfile.mkdtemp(prefix="bench-serial-"))
    store = Store(workdir / "state.duckdb")
    history = None
    header = (
        "rel",
        "tuples",
        "groups",
        "avg",
        "max",
        "supp",
        "virtual",
        "rows",
        "pairs",
        "hist_rows",
        "t_data",
        "t_part",
        "t_anon",
        "t_verify",
        "t_store",
        "t_pairs",
        "t_close",
        "total",
        "cpu",
        "worst_p",
    )
    print(" ".join(f"{h:>9}" for h in header))
    totals, cpus, stores, parts = [], [], [], {}
    for r in range(1, args.releases + 1):
        if r > 1:
            snapshot = next_snapshot(rng, snapshot, pool, values, weights)
        c0, t0 = time.process_time(), time.perf_counter()
        data = Microdata.from_frame(spec, snapshot.reset_index(drop=True))
        ctx = {"serial_stats": history, "serial_release": r} if args.rebuild else tech.prior_context(store, spec)
        check_source = {"serial_stats": history} if (args.rebuild or args.full) else ctx
        data.extra = {**ctx, "registration": registration}
        t1 = time.perf_counter()
        part = tech.partition(data, rng)
        t2 = time.perf_counter()
        release = tech.anonymize(data, part, rng)
        t3 = time.perf_counter()
        results = {x.model: x for x in tech.verify(release, {**check_source, "registration": registration})}
        t4 = time.perf_counter()
        assert all(x.passed for x in results.values()), results
        if args.rebuild:
            release.private.pop("serial_aggregate")
        own_rows = release.private["serial_stats"]
        if args.rebuild or args.full:
            history = stats.concat_history([history, own_rows])
        hook, marks = tech.commit_hook(release), {}

        def timed_hook(con, release_id, sequence, hook=hook, marks=marks):
            marks["hook"] = time.perf_counter()
            if hook is not None:
                hook(con, release_id, sequence)
            marks["after"] = time.perf_counter()

        staged = stage_tables(workdir / "out", release.tables)
        store.commit_release(
            staged=staged,
            series="bench",
            technique="serial",
            parameters={},
            spec={},
            seed=args.seed,
            input_fingerprint=str(r),
            release_key=str(r),
            rows_in=data.n,
            privacy=list(results.values()),
            utility={},
            private=release.private,
            info=release.info,
            actor="bench",
            flow_run_id=None,
            started_at=datetime.now(),
            based_on_sequence=r - 1,
            on_commit=timed_hook,
        )
        t5, c5 = time.perf_counter(), time.process_time()
        n_hist = 0 if history is None else history.num_rows
        pairs = results["serial-global"].worst.get("pairs", 0)
        worst = float(Fraction(results["serial-global"].value))
        info = release.info
        totals.append(t5 - t0)
        cpus.append(c5 - c0)
        stores.append(t5 - t4)
        for name, t in (
            ("t_part", t2 - t1),
            ("t_anon", t3 - t2),
            ("t_verify", t4 - t3),
            ("t_pairs", marks["after"] - marks["hook"]),
            ("t_close", t5 - marks["after"]),
        ):
            parts.setdefault(name, []).append(t)
        row = (
            r,
            len(snapshot),
            info["groups"],
            f"{info['avg_group_size']:.1f}",
            info["max_group_size"],
            info["suppressed"],
            info["virtual_members"],
            own_rows.num_rows,
            pairs,
            n_hist,
            f"{t1 - t0:.2f}",
            f"{t2 - t1:.2f}",
            f"{t3 - t2:.2f}",
            f"{t4 - t3:.2f}",
            f"{t5 - t4:.2f}",
            f"{marks['after'] - marks['hook']:.2f}",
            f"{t5 - marks['after']:.2f}",
            f"{t5 - t0:.2f}",
            f"{c5 - c0:.2f}",
            f"{worst:.4f}",
        )
        size = (workdir / "state.duckdb").stat().st_size
        print(" ".join(f"{x!s:>9}" for x in row), f"state {size / 1e6:.0f}MB", flush=True)
    for name, t in (
        ("wall", np.asarray(totals)),
        ("CPU", np.asarray(cpus)),
        ("wall without t_store", np.asarray(totals) - np.asarray(stores)),
    ):
        rel = np.arange(1, len(t) + 1)
        slope = float(np.polyfit(rel[1:], t[1:], 1)[0]) if len(t) > 2 else float("nan")
        print(
            f"{name}: s/release r1 -> r{len(t)}: {t[0]:.2f} -> {t[-1]:.2f}; max {t.max():.2f}; "
            f"slope over r2..r{len(t)}: {slope * 1000:+.0f} ms/release; r{len(t)}/r2: "
            f"{t[-1] / t[min(1, len(t) - 1)]:.2f}; total {t.sum():.1f} s"
        )
    if len(totals) > 2:
        rel = np.arange(2, len(totals) + 1)
        print(
            "slope over r2..rN per part (ms/release): "
            + ", ".join(
                f"{name} {float(np.polyfit(rel, np.asarray(t[1:]), 1)[0]) * 1000:+.0f}" for name, t in parts.items()
            )
        )
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark of the l-uncertainty auditor (not run by CI).

Workload "narrow" (default): 1,000 people (age 18-90, a region code 0-9), 20 distinct sensitive
values with uneven counts, 200 random range queries over age (30% also over region), l = 2.
Workload "wide": 5,000 people, 50 values, every query a box over both QIs, l = 3.
Workload "intervals": the narrow one with every query a range over age only (issue 16's blocked
note: the one shape where an exact LP test of pinning might exist).
Prints decisions per second, the share answered / denied / budget-denied and latency
percentiles.

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_audit \
        [--workload narrow|wide|intervals] [--budget N] [--l L] [--queries Q]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from privpub.tasks.audit import DEFAULT_BUDGET, Auditor


def make_population(rng: np.random.Generator, n: int, n_values: int):
    people = pd.DataFrame(
        {
            "pid": [f"p{i:04d}" for i in range(n)],
            "age": rng.integers(18, 91, n),
            "region": rng.integers(0, 10, n),
        }
    )
    weights = rng.dirichlet(np.full(n_values, 2.0))
    secret = rng.choice([f"d{k:02d}" for k in range(n_values)], size=n, p=weights)
    return people, dict(zip(people["pid"], secret))


WORKLOADS = {  # people, values, l, share of queries that also select a region range
    "narrow": (1000, 20, 2, 0.3),
    "wide": (5000, 50, 3, 1.0),
    "intervals": (1000, 20, 2, 0.0),
}


def make_queries(rng: np.random.Generator, k: int, with_region: float = 0.3) -> list[str]:
    out = []
    for _ in range(k):
        lo = int(rng.integers(18, 91))
        hi = int(min(90, lo + rng.integers(0, 25)))
        q = f"age BETWEEN {lo} AND {hi}"
        if rng.random() < with_region:
            a = int(rng.integers(0, 10))
            q += f" AND region BETWEEN {a} AND {int(min(9, a + rng.integers(0, 5)))}"
        out.append(q)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="narrow")
    ap.add_argument("--people", type=int, help="default: the workload's")
    ap.add_argument("--values", type=int, help="default: the workload's")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--l", type=int, help="default: the workload's")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="units of work per decision")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    people_n, values_n, l, with_region = WORKLOADS[args.workload]
    args.people = args.people or people_n
    args.values = args.values or values_n
    args.l = args.l or l

    rng = np.random.default_rng(args.seed)
    people, secret = make_population(rng, args.people, args.values)
    auditor = Auditor(
        people,
        list(secret.values()),
        args.l,
        lambda ids: [secret[i] for i in ids],
        id_column="pid",
        budget=args.budget,
    )
    latencies, kinds = [], []
    start, cpu_start = time.perf_counter(), time.process_time()
    for predicate in make_queries(rng, args.queries, with_region):
        t0 = time.perf_counter()
        d = auditor.ask_where(predicate)
        latencies.append(time.perf_counter() - t0)
        kinds.append("budget-denied" if d.budget_hit else d.response)
        if args.verbose:
            print(
                f"{len(kinds):4d} {latencies[-1]:7.3f}s {kinds[-1]:16s} work={d.work:5d} {predicate}"
                f"  [{d.reason[:60]}]",
                flush=True,
            )
    total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    lat = np.array(latencies)
    print(
        f"workload={args.workload} people={args.people} values={args.values} queries={args.queries} l={args.l} "
        f"budget={args.budget} units of work/decision"
    )
    print(f"wall={total:.1f}s cpu={cpu:.1f}s")
    print(
        f"decisions/s={len(lat) / total:.2f}  p50={np.percentile(lat, 50):.3f}s  "
        f"p95={np.percentile(lat, 95):.3f}s  max={lat.max():.3f}s"
    )
    for kind in ["answer", "negative-denial", "positive-denial", "budget-denied"]:
        print(f"  {kind:16s} {kinds.count(kind) / len(kinds):6.1%}")
    if auditor.knowledge.denial is not None:  # a positive denial by route 4, not yet listed
        print("knowledge implicit (Delta of a positive denial, listed by the next decision)")
    else:
        print(
            f"knowledge branches={len(auditor.knowledge.branches)} "
            f"facts={sum(len(b) for b in auditor.knowledge.branches)}"
        )


if __name__ == "__main__":
    main()

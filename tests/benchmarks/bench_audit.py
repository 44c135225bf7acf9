"""Benchmark of the l-uncertainty auditor (not run by CI).

Workload "narrow" (default): 1,000 people (age 18-90, a region code 0-9), 20 distinct sensitive
values with uneven counts, 200 random range queries over age (30% also over region), l = 2.
Workload "wide": 5,000 people, 50 values, every query a box over both QIs, l = 3.
Workload "intervals": the narrow one with every query a range over age only (issue 16's blocked
note: the one shape where an exact LP test of pinning might exist).
Workload "nested" (issue 31): the narrow population, every query a node of one fixed tree (age
bands of 40, 20, 10, 5 and 1 years aligned to multiples of their width, and a 1-year band split
into regions 0-4 / 5-9), l = 2: decided by the nested path (tasks/audit/nested.py). With
--no-nested the same queries go to the solver routes; with --compare each query is also decided
by the solver routes on the nested run's knowledge (within the budget) and the verdicts compared.
Prints the share answered / denied / budget-denied and latency percentiles; with `--grid auto`
the queries are snapped to a public grid (every cell >= --min-cell people, issue 31) and the
same queries are also decided unsnapped beside it (unless --no-baseline), with the median
widening (extra people per snapped query; relative to the asked selection for answered ones).
`--after-denial list|implicit|both` (issue 31): the auditor's policy after a route-4 positive
denial (both: every run once per policy); each run also prints how many queries were budget-denied
after its first positive denial that read the table ("stalled"), and how many were denied because
their Delta could not be listed ("unlisted").

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_audit \
        [--workload narrow|wide|intervals] [--budget N] [--l L] [--queries Q]
        [--grid auto [--min-cell N] [--no-baseline | --baseline-queries N]]
        [--after-denial list|implicit|both] [--no-nested] [--compare]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from privpub.tasks.audit import DEFAULT_BUDGET, Auditor, nested, reasons
from privpub.tasks.audit.after_denial import DEFAULT_POLICY, POLICIES
from privpub.tasks.audit.decide import answer_is_unsafe, compute_delta
from privpub.tasks.audit.grid import DEFAULT_MIN_CELL, auto_grid
from privpub.tasks.audit.program import BudgetExceeded, Work


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
    "nested": (1000, 20, 2, 0.0),
}
BANDS = (40, 20, 10, 5, 1)  # the nested workload's tree: age bands, then regions within a year


def make_tree_queries(rng: np.random.Generator, k: int) -> list[str]:
    """Nodes of one tree: a level (an age band width, or a year split by region), then a node of it."""
    out = []
    for _ in range(k):
        level = int(rng.integers(0, len(BANDS) + 1))
        width = BANDS[min(level, len(BANDS) - 1)]
        lo = int(rng.integers(18, 91)) // width * width
        q = f"age BETWEEN {max(lo, 18)} AND {min(lo + width - 1, 90)}"
        if level == len(BANDS):
            q += " AND region BETWEEN 0 AND 4" if rng.random() < 0.5 else " AND region BETWEEN 5 AND 9"
        out.append(q)
    return out


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


def run(args, people, secret, queries, grid, after_denial: str) -> dict:
    """Decide the queries in order on a fresh auditor; figures of the run."""
    auditor = Auditor(
        people,
        list(secret.values()),
        args.l,
        lambda ids: [secret[i] for i in ids],
        id_column="pid",
        budget=args.budget,
        grid=grid,
        after_denial=after_denial,
    )
    latencies, kinds, widened, relative, routes, deciding = [], [], [], [], [], []
    unlisted, positives = 0, []
    start, cpu_start = time.perf_counter(), time.process_time()
    for predicate in queries:
        t0 = time.perf_counter()
        selection = auditor.select(predicate)  # what ask_where does, with the decision timed apart
        t1 = time.perf_counter()
        d = selection.annotate(auditor.ask(selection.ids))
        latencies.append(time.perf_counter() - t0)
        deciding.append(time.perf_counter() - t1)
        kinds.append("budget-denied" if d.budget_hit else d.response)
        positives.append(d.response == "positive-denial" and POSITIVE in d.reason and UNREAD not in d.reason)
        unlisted += d.budget_hit and "the answers that would have to be refused" in d.reason  # after a grid's prefix
        routes.append(d.route)
        if grid is not None:
            asked = len(d.ids) - d.widened if d.response == "answer" else None
            widened.append(d.widened)
            if asked:
                relative.append(d.widened / asked)
        if args.verbose:
            print(
                f"{len(kinds):4d} {latencies[-1]:7.3f}s {kinds[-1]:16s} work={d.work:5d} +{d.widened:4d} {predicate}"
                f"  [{d.reason[:60]}]",
                flush=True,
            )
    lat = np.array(latencies)
    # the first positive denial that read the table and changed G (route 1's, decided unread,
    # leave G as it was)
    first = next((i for i, read in enumerate(positives) if read), len(kinds))
    return {
        "stalled": kinds[first:].count("budget-denied"),
        "unlisted": unlisted,
        "wall": time.perf_counter() - start,
        "cpu": time.process_time() - cpu_start,
        "p50": float(np.percentile(lat, 50)),
        "p95": float(np.percentile(lat, 95)),
        "max": float(lat.max()),
        "shares": {k: kinds.count(k) / len(kinds) for k in KINDS},
        "widened": float(np.median(widened)) if widened else None,
        "relative": float(np.median(relative)) if relative else None,
        "implicit": auditor.knowledge.denial is not None,
        "nested": routes.count("nested"),
        "decide p95": float(np.percentile(deciding, 95)),
        "responses": kinds,
    }


def compare(args, people, secret, queries) -> None:
    """Decide the queries with the nested path; before each, also ask the solver routes on the
    same knowledge (within the budget) and compare their verdicts: l-safe or not and, when safe,
    whether the real answer is unsafe."""
    auditor = Auditor(
        people, list(secret.values()), args.l, lambda ids: [secret[i] for i in ids], id_column="pid", budget=args.budget
    )
    decided = agreed = budget_hit = 0
    slow = []
    for predicate in queries:
        sets = [auditor.universe.members(auditor.select(predicate).ids)]
        mine = nested.nested_delta(auditor.knowledge, sets, args.l)
        t0 = time.perf_counter()
        try:
            theirs = compute_delta(auditor.knowledge, sets, args.l, Work(args.budget), need=args.l)
        except BudgetExceeded:
            budget_hit += 1
        else:
            decided += 1
            if mine is not None and verdict(auditor, sets, mine) == verdict(auditor, sets, theirs):
                agreed += 1
        slow.append(time.perf_counter() - t0)
        auditor.ask_where(predicate)
    print(
        f"solver routes on the nested run's knowledge: decided {decided} of {len(queries)} within the budget, "
        f"agreeing with the nested path on {agreed} of {decided}; budget-denied {budget_hit}; "
        f"their p95 {np.percentile(slow, 95):.3f}s"
    )


def verdict(auditor, sets, report) -> tuple:
    """(l-safe, the real answer unsafe) for a DeltaReport; the secret is read as Algorithm 2 would."""
    if not report.is_safe_query(auditor.l):
        return (False, None)
    if report.everything:
        return (True, True)
    real = auditor._read_secret(sets)
    unsafe = answer_is_unsafe(auditor.knowledge, sets, real, auditor.l)[0] if report.implicit else real in report.unsafe
    return (True, unsafe)


KINDS = ["answer", "negative-denial", "positive-denial", "budget-denied"]
POSITIVE = reasons.positive(2)[:40]  # a positive denial (any l) ...
UNREAD = reasons.structural(2)[len(reasons.POSITIVE) :][:40]  # ... but not route 1's, decided unread


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="narrow")
    ap.add_argument("--people", type=int, help="default: the workload's")
    ap.add_argument("--values", type=int, help="default: the workload's")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--l", type=int, help="default: the workload's")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="units of work per decision")
    ap.add_argument("--grid", choices=["none", "auto"], default="none", help="auto: snap queries to a public grid")
    ap.add_argument("--min-cell", type=int, default=DEFAULT_MIN_CELL, help="people per grid cell (--grid auto)")
    ap.add_argument("--no-baseline", action="store_true", help="--grid auto: skip the unsnapped run beside it")
    ap.add_argument(
        "--baseline-queries", type=int, help="--grid auto: the unsnapped run on the first N queries only (it is slow)"
    )
    ap.add_argument(
        "--after-denial",
        choices=[*POLICIES, "both"],
        help="policy after a positive denial (default: the spec's, by whether there is a grid)",
    )
    ap.add_argument("--no-nested", action="store_true", help="switch the nested path off (the solver routes only)")
    ap.add_argument("--compare", action="store_true", help="--workload nested: compare with the solver routes")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    people_n, values_n, l, with_region = WORKLOADS[args.workload]
    args.people = args.people or people_n
    args.values = args.values or values_n
    args.l = args.l or l

    rng = np.random.default_rng(args.seed)
    people, secret = make_population(rng, args.people, args.values)
    queries = (
        make_tree_queries(rng, args.queries)
        if args.workload == "nested"
        else make_queries(rng, args.queries, with_region)
    )
    nested.ENABLED = not args.no_nested
    print(
        f"workload={args.workload} people={args.people} values={args.values} queries={args.queries} l={args.l} "
        f"budget={args.budget} units of work/decision"
    )
    if args.grid == "auto":
        grid = auto_grid(people[["age", "region"]], ["age", "region"], args.min_cell)
        sizes = grid.cell_sizes(people)
        bands = " x ".join(f"{c} {len(cuts) + 1}" for c, cuts in grid.cuts.items())
        print(
            f"grid auto min_cell={args.min_cell}: {bands} bands, {len(sizes)} non-empty cells, "
            f"smallest {sizes.min()}, median {np.median(sizes):g}"
        )
    print(
        f"{'run':28s} {'answered':>9s} {'negative':>9s} {'positive':>9s} {'budget-d.':>9s} "
        f"{'p50':>7s} {'p95':>7s} {'max':>7s} {'wall':>7s} {'cpu':>7s} {'stalled':>7s} {'unlisted':>8s}  "
        "median widening",
        flush=True,
    )
    default = DEFAULT_POLICY[args.grid == "auto"]
    for policy in list(POLICIES) if args.after_denial == "both" else [args.after_denial or default]:
        if args.grid == "auto":
            report(f"grid auto, {policy} ({len(queries)})", run(args, people, secret, queries, grid, policy))
        if args.grid == "none" or not args.no_baseline:
            first = queries[: args.baseline_queries] if args.grid == "auto" and args.baseline_queries else queries
            report(f"unsnapped, {policy} ({len(first)})", run(args, people, secret, first, None, policy))
    if args.compare:
        compare(args, people, secret, queries)


def report(name: str, r: dict) -> None:
    """One run's row: shares, latency, how many budget denials followed the first positive
    denial ("stalled") and how many denials were for a Delta that could not be listed."""
    sh = r["shares"]
    widening = (
        "-"
        if r["widened"] is None
        else f"{r['widened']:g} people" + ("" if r["relative"] is None else f" ({r['relative']:.0%} of answered)")
    )
    print(
        f"{name:28s} {sh['answer']:9.1%} {sh['negative-denial']:9.1%} {sh['positive-denial']:9.1%} "
        f"{sh['budget-denied']:9.1%} {r['p50']:6.3f}s {r['p95']:6.3f}s {r['max']:6.3f}s "
        f"{r['wall']:6.1f}s {r['cpu']:6.1f}s {r['stalled']:7d} {r['unlisted']:8d}  {widening}"
        + ("  (knowledge implicit at the end)" if r["implicit"] else "")
        + f"  nested path: {r['nested']}, p95 of the decision alone (no selection) {r['decide p95']:.4f}s",
        flush=True,
    )


if __name__ == "__main__":
    main()

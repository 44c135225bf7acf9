"""Ambiguity at the paper's scale (not run by CI).

    .venv/bin/python -m tests.benchmarks.bench_ambiguity [sizes...]

Synthetic census rows (tasks/demo_data.census: 8 QIs, occupation sensitive), alpha = 0.25,
beta = 0.1. Each size runs in a fresh process so peak RSS is that size's own. Wall and CPU time cover
partition + published tables + verification; targets: 500K rows under 60 s and 3 GiB, and
near-linear growth.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import numpy as np

SIZES = [100_000, 200_000, 300_000, 400_000, 500_000]


def one(n: int) -> dict:
    from privpub.schemas.spec import spec_from_dict
    from privpub.tasks.core.microdata import Microdata
    from privpub.tasks.demo_data import CENSUS_QI, census
    from privpub.tasks.techniques.registry import get_technique

    frame = census(n, seed=1)
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "bench",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "occupation",
                "qi": CENSUS_QI,
            },
            "technique": {"name": "ambiguity", "alpha": 0.25, "beta": 0.1},
        }
    )
    data = Microdata.from_frame(spec, frame)
    tech = get_technique(spec)
    rng = np.random.default_rng(0)
    c0 = time.process_time()
    t0 = time.perf_counter()
    part = tech.partition(data, rng)
    t1 = time.perf_counter()
    release = tech.anonymize(data, part, rng)
    t2 = time.perf_counter()
    results = tech.verify(release, {})
    t3 = time.perf_counter()
    cpu = time.process_time() - c0  # robust to other load on the machine, unlike wall time
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    return {
        "rows": n,
        "partition_s": round(t1 - t0, 2),
        "tables_s": round(t2 - t1, 2),
        "verify_s": round(t3 - t2, 2),
        "total_s": round(t3 - t0, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_gib": round(peak, 3),
        "groups": part.n_groups,
        "suppressed": release.info["suppressed"],
        "presence": results[0].value,
        "association": results[1].value,
        "passed": all(r.passed for r in results),
    }


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--one":
        print(json.dumps(one(int(argv[1]))))
        return
    sizes = [int(a) for a in argv] or SIZES
    rows = []
    for n in sizes:
        out = subprocess.run(
            [sys.executable, "-m", "tests.benchmarks.bench_ambiguity", "--one", str(n)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    print(
        "\n| rows | partition s | tables s | verify s | wall s | CPU s | CPU s per 100K | peak RSS GiB "
        "| groups | suppressed | presence | association |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['rows']:,} | {r['partition_s']} | {r['tables_s']} | {r['verify_s']} | {r['total_s']} | "
            f"{r['cpu_s']} | {r['cpu_s'] / r['rows'] * 1e5:.2f} | {r['peak_rss_gib']} | {r['groups']:,} | "
            f"{r['suppressed']} | {r['presence']} | {r['association']} |"
        )
    last = rows[-1]
    print(
        f"\n{last['rows'] / base['rows']:.0f}x rows -> {last['cpu_s'] / base['cpu_s']:.2f}x CPU time, "
        f"{last['total_s'] / base['total_s']:.2f}x wall time"
    )


if __name__ == "__main__":
    main(sys.argv[1:])

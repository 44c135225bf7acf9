"""What the series composition check adds to a publish (issue 17): 12 monthly releases of 1M
census rows with 10% turnover, the check's three steps timed at every release (core-only: the
rest of the publish is what bench_e2e measures).

  read     the summaries of this month's people from the state file (before any work)
  check    the composition with this month's groups (the figures)
  commit   the summaries written inside the release's commit transaction

Target: the three together at most 10 s a release, flat in the number of earlier releases.
Run: `make bench-compose` (BENCH_ARGS="--rows 1000000 --releases 12 --turnover 0.1").
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.compose.check import SeriesCheck
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.techniques.registry import get_technique


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--releases", type=int, default=12)
    ap.add_argument("--turnover", type=float, default=0.1)
    ap.add_argument("--keep-groups", action="store_true", help="publish with [series] keep_groups = true")
    args = ap.parse_args()

    n, r = args.rows, args.releases
    fresh = int(n * args.turnover)
    pool = census(n + fresh * (r - 1), seed=1)  # everyone who is ever in the series
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "census",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "occupation",
                "qi": CENSUS_QI,
            },
            "technique": {"name": "generalization", "k": 10, "l": 3},
            "series": {"composition": "warn", "keep_groups": args.keep_groups},
        }
    )
    technique = get_technique(spec)
    rng = np.random.default_rng(0)
    present = np.arange(n)
    folder = Path(tempfile.mkdtemp(prefix="bench-compose-"))
    store = Store(folder / "privpub.duckdb")
    print(f"{n:,} rows a release, {r} releases, {args.turnover:.0%} turnover, keep_groups={args.keep_groups}")
    print("release | read s | check s | commit s | added s | below l | fewest values | people stored")
    for month in range(1, r + 1):
        if month > 1:  # 10% leave, as many arrive
            stay = np.sort(rng.choice(present, n - fresh, replace=False))
            present = np.concatenate([stay, np.arange(n + fresh * (month - 2), n + fresh * (month - 1))])
        data = Microdata.from_frame(spec, pool.iloc[present].reset_index(drop=True))
        part = mondrian_partition(data, 10, 3)
        check = SeriesCheck(spec, technique)
        t0 = time.perf_counter()
        check.prepare(store, data)
        t1 = time.perf_counter()
        if args.keep_groups:
            part = check.keep_groups(data, part)
        results = check.check(data, part.group, part.n_groups)
        t2 = time.perf_counter()
        hook = check.commit_hook()
        with store.write() as con:
            con.execute("BEGIN TRANSACTION")
            hook(con, f"census-{month:04d}", month)
            con.execute("COMMIT")
        t3 = time.perf_counter()
        stored = store.query(lambda con: con.execute("SELECT count(*) FROM compose_people").fetchone()[0])
        below = results[0].worst["below"] if results else 0
        fewest = results[0].value if results else "-"
        print(
            f"{month:7d} | {t1 - t0:6.2f} | {t2 - t1:7.2f} | {t3 - t2:8.2f} | {t3 - t0:7.2f} | "
            f"{below:7d} | {fewest!s:>13} | {stored:,}",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"peak RSS of the process {peak:.2f} GiB; state file {(folder / 'privpub.duckdb').stat().st_size / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    main()

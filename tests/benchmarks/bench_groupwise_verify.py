"""Ambiguity / PriView verification in one step, in chunks in this process, and in chunks on a
LocalCluster of 2 worker processes (not run by CI; hold the bench lock):

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_groupwise_verify [rows] [chunk_rows]

Synthetic census rows (8 QIs), alpha = 0.25, beta = 0.1. Prints wall and CPU seconds of each way,
the number of chunks, each worker's peak RSS, and checks that the three give the same results.
"""

from __future__ import annotations

import resource
import sys
import time


def timed(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(rows: int, chunk_rows: int) -> None:
    from distributed import Client, LocalCluster

    from privpub.tasks.core.technique import VERIFY
    from privpub.tasks.demo_data import CENSUS_QI, census
    from tests.helpers import release_of, technique_and_data

    frame = census(rows, seed=1)
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as local,
        Client(local, set_as_default=False) as client,
    ):
        for name in ("ambiguity", "priview"):
            tech, data = technique_and_data(frame, CENSUS_QI, "occupation", name, alpha=0.25, beta=0.1)
            _, release = release_of(tech, data)
            published = sum(t.num_rows for t in tech.verified_tables(release).values())
            tech.spec.run.chunk_rows = published
            one, one_wall, one_cpu = timed(lambda: tech.verify(release, {}))
            tech.spec.run.chunk_rows = chunk_rows
            local_run, local_wall, local_cpu = timed(lambda: tech.verify(release, {}))

            def on_cluster():
                plan = VERIFY.plan(tech, release, {})
                results = client.gather(client.map(plan.run, plan.chunks, pure=False))
                return plan, plan.combine(results)

            (plan, dask_run), dask_wall, dask_cpu = timed(on_cluster)
            rss = client.run(peak_rss_mib)
            assert one == local_run == dask_run
            print(
                f"{name}: {rows} rows, {published} published rows, {len(plan.chunks)} chunks of "
                f"<= ~{chunk_rows} rows; one step {one_wall:.2f} s (CPU {one_cpu:.2f}); chunks in "
                f"process {local_wall:.2f} s (CPU {local_cpu:.2f}); chunks on 2 workers {dask_wall:.2f} s "
                f"(flow CPU {dask_cpu:.2f}); worker peak RSS MiB "
                f"{', '.join(f'{v:.0f}' for v in rss.values())}; figures "
                f"{[r.value for r in one]} equal: True",
                flush=True,
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000, int(sys.argv[2]) if len(sys.argv) > 2 else 50_000)

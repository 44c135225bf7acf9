"""What verifying in chunks costs in the flow process (issue 15; not run by CI): a union-qid and
an anatomy release of `--rows` census rows verified by the one-pass references of
tests/test_chunked_verify.py (the verifiers before they were split) and by `verify` in one chunk
and in `--chunks` chunks, one after the other in this process (so the figure is the chunks' total
work plus the combine, not a cluster's wall time); the fastest of 3 runs each. Every run's
results equal the one-pass ones.

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_chunked_verify
"""

from __future__ import annotations

import argparse
import time

from privpub.tasks.core.types import Release
from privpub.tasks.demo_data import census
from tests.helpers import census_spec_toml
from tests.test_butterfly_pipeline import spec_toml as multi_qid_toml
from tests.test_chunked_verify import _release, _spec, one_pass_anatomy, one_pass_multi_qid


def timed(fn, repeat: int = 3):
    """The result and the fastest of `repeat` runs (wall, cpu): the first run warms imports up."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return out, *best


def fresh(release: Release) -> Release:
    """The same tables as new objects (no copy): no run reuses the column codes another computed
    (tasks/verify/published.py keeps them per table object)."""
    return Release({name: t.select(t.column_names) for name, t in release.tables.items()}, release.private)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--chunks", type=int, default=8)
    args = ap.parse_args()
    frame = census(args.rows, seed=1)
    cases = {
        "union-qid k=50": (
            multi_qid_toml("union-qid", 50),
            lambda t, r: one_pass_multi_qid(r.tables["table"], t.params.qids, t.params.k, t.params.k_prime, t.union),
        ),
        "anatomy l=3": (
            census_spec_toml(technique="anatomy", k=None, l=3),
            lambda t, r: one_pass_anatomy(r, "occupation", 3),
        ),
    }
    print(
        f"{args.rows} rows\n| release | one pass s (cpu) | 1 chunk s (cpu) | {args.chunks} chunks s (cpu) |\n|---|---|---|---|"
    )
    for name, (toml, reference) in cases.items():
        tech, release = _release(toml, frame)
        expected, w0, c0 = timed(lambda: reference(tech, fresh(release)))
        cells = [f"{w0:.2f} ({c0:.2f})"]
        for rows in (args.rows, -(-args.rows // args.chunks)):
            tech.spec = _spec(toml, rows)
            got, w, c = timed(lambda: tech.verify(fresh(release), {}))
            assert got == expected, name
            cells.append(f"{w:.2f} ({c:.2f})")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""The quality models' cost (tasks/evaluate/quality.py, issue 44; not run by CI):

    .venv/bin/python -m tests.benchmarks.bench_quality [--rows 20000 250000] [--repeat 3] [--publish]

The generalization release of the demo census (8 QIs, k = 5, no l, seed 1) is built once per size;
then each model (gen-iloss, non-uniform-entropy, aecs, precision, kl-divergence) runs --repeat
times on it (each reading the published cells itself) and the best wall time of each is printed,
with the best of quality_figures (the cells read once for all) plus the technique's quality_view:
the time the quality models add to the evaluate step of every publish. With --publish, `privpub publish` of the same
spec is timed as a fresh process (no Prefect server) for the share the models take of it, with its
evaluate step as the flow prints it; --python names the interpreter publishing (e.g. the main
tree's .venv/bin/python: the evaluate step without the quality models, for a before/after).
Target: the models' sum at most ~10% of the publish's wall time.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.evaluate import quality
from privpub.tasks.techniques.registry import get_technique
from tests.benchmarks.bench_e2e import write_toml


def models(view, data):
    return {
        "gen-iloss": lambda: quality.gen_iloss(view, data),
        "non-uniform-entropy": lambda: quality.non_uniform_entropy(view, data),
        "aecs": lambda: quality.aecs(view, data),
        "precision": lambda: quality.precision(view, data),
        "kl-divergence": lambda: quality.kl_divergence(view, data),
        "all": lambda: quality.quality_figures(view, data),
    }


def publish_seconds(rows: int, python: str) -> tuple[float, float, float]:
    """`privpub publish` of the census spec at k = 5, a fresh process as a user runs it: its wall
    time, its evaluate step's and its quality models' (as the flow prints them; nan: none)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        census(rows, seed=1).to_parquet(path / "census.parquet")
        spec = census_spec(
            str(path / "census.parquet"),
            k=5,
            l=None,
            output_dir=str(path / "out"),
            state=str(path / "s.duckdb"),
            seed=1,
        )
        write_toml(path / "spec.toml", spec)
        start = time.perf_counter()
        done = subprocess.run(
            [python, "-m", "privpub.flows.cli", "publish", str(path / "spec.toml")],
            check=True,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        said = done.stdout + done.stderr
        step, models = (re.search(rf"{label} done in ([0-9.]+) s", said) for label in ("evaluate", "quality models"))
        return wall, *(float(m.group(1)) if m else float("nan") for m in (step, models))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[20_000, 250_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--publish", action="store_true")
    ap.add_argument("--python", default=sys.executable, help="the interpreter publishing (another tree's venv)")
    args = ap.parse_args()
    for rows in args.rows:
        spec = spec_from_dict(census_spec("census.parquet", k=5, l=None))
        tech = get_technique(spec)
        data = Microdata.from_frame(spec, census(rows, seed=1))
        rng = np.random.default_rng(1)
        release = tech.anonymize(data, tech.partition(data, rng), rng)
        start = time.perf_counter()
        view = tech.quality_view(release)
        view_s = time.perf_counter() - start
        best: dict[str, float] = {}
        for name, run in models(view, data).items():
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
            best[name] = min(times)
        total = best.pop("all") + view_s
        best["view"] = view_s
        line = (
            f"{rows:,} rows, {release.tables['table'].num_rows:,} published: models {total:.3f} s ("
            + ", ".join(f"{k} {v:.3f}" for k, v in best.items())
            + ")"
        )
        if args.publish:
            wall, step, spent = publish_seconds(rows, args.python)
            line += (
                f"; publish {wall:.2f} s (evaluate {step:.2f} s, quality models {spent:.2f} s = "
                f"{100 * spent / wall:.1f}%), models here {100 * total / wall:.1f}%"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()

"""Two checkouts of privpub side by side (not run by CI): the same `privpub publish` / `privpub
verify` as fresh processes, alternating A B A B ..., so both see the same machine load.

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_paired \
        --a /work/wt-before --b . [--cases gen-250k,gen-1m,muco,demo] [--pairs 5]

Each checkout runs its own `.venv/bin/privpub` (its own code; `--venv bench-user`: each one's
user install, `make bench-user/.installed` run in it first, no dev tools); inputs and specs are prepared
once (tests/benchmarks/bench_e2e.py `prepare`), every run gets a fresh output folder and state.
`verify` times `privpub verify` of the release the case's first run published. Printed: median
wall time, median CPU time (user + system) and peak RSS of the process tree, and B / A; with
`--detail` (issue 43) also every run's wall and CPU time, the load average before each pair, and
the phases of each side's median publish (bench_e2e `breakdown`, from its progress lines);
`--no-verify` times the publishes only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from tests.benchmarks.bench_e2e import breakdown, measured, prepare, summarised, write_toml
from tests.benchmarks.bench_spine import print_table

VENV = [".venv"]  # the environment each checkout's privpub runs from (--venv)


def _privpub(root: Path) -> str:
    return str(root / VENV[0] / "bin" / "privpub")


def run_case(root: Path, spec: dict, work: Path, env: dict) -> tuple[dict, Path]:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    spec_path = write_toml(run_dir / "spec.toml", spec)
    return measured([_privpub(root), "publish", str(spec_path)], env, run_dir), run_dir


def verify_case(root: Path, run_dir: Path, env: dict) -> dict:
    state = run_dir / "privpub.duckdb"
    release = next(p.name for p in (run_dir / "releases").iterdir() if not p.name.startswith("."))
    return measured([_privpub(root), "verify", release, "--state", str(state)], env, run_dir)


def show_detail(case: str, roots: dict[str, Path], runs: dict[tuple[str, str], list[dict]], steps: tuple) -> None:
    """Every run's wall and CPU seconds, the spread, and the phases of each side's median publish."""
    for step in steps:
        for side in roots:
            got = runs[(side, step)]
            walls = " / ".join(f"{r['wall_s']:.2f}" for r in got)
            cpus = " / ".join(f"{r['cpu_s']:.2f}" for r in got)
            print(f"{case} {step} {side}: wall {walls}; cpu {cpus}", flush=True)
    for side in roots:
        print(
            f"{case} publish {side} phases (median run): {breakdown(summarised(runs[(side, 'publish')]))}", flush=True
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", type=Path, required=True, help="checkout A (its .venv must be set up)")
    ap.add_argument("--b", type=Path, default=Path("."), help="checkout B")
    ap.add_argument("--cases", default="gen-250k,gen-1m,muco,demo")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--rows-1m", type=int, default=1_000_000)
    ap.add_argument("--rows-250k", type=int, default=250_000)
    ap.add_argument("--rows-muco", type=int, default=40_152)
    ap.add_argument("--detail", action="store_true", help="every run, the load, the median publish's phases")
    ap.add_argument("--no-verify", action="store_true", help="time the publishes only")
    ap.add_argument("--venv", default=".venv", help="each checkout's environment folder (bench-user: a user's install)")
    args = ap.parse_args()
    VENV[0] = args.venv
    roots = {"A": args.a.resolve(), "B": args.b.resolve()}
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PRIVPUB_HOME")}
    work = Path(tempfile.mkdtemp(prefix="bench-paired-"))
    rows = []
    try:
        for case in args.cases.split(","):
            spec = prepare(case, work, args)["spec"]
            runs: dict[tuple[str, str], list[dict]] = {}
            steps = ("publish",) if args.no_verify else ("publish", "verify")
            for pair in range(args.pairs):
                if args.detail:
                    print(f"{case} pair {pair + 1}: load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
                for side, root in roots.items():
                    res, run_dir = run_case(root, spec, work, env)  # measured() raises on a failed run
                    runs.setdefault((side, "publish"), []).append(res)
                    if not args.no_verify:
                        runs.setdefault((side, "verify"), []).append(verify_case(root, run_dir, env))
                    shutil.rmtree(run_dir, ignore_errors=True)
            if args.detail:
                show_detail(case, roots, runs, steps)
            for step in steps:
                med = {side: statistics.median(r["wall_s"] for r in runs[(side, step)]) for side in roots}
                cpu = {side: statistics.median(r["cpu_s"] for r in runs[(side, step)]) for side in roots}
                rss = {side: max(r["tree_rss"] for r in runs[(side, step)]) for side in roots}
                rows.append(
                    [
                        f"{case} {step}",
                        f"{med['A']:.2f}",
                        f"{med['B']:.2f}",
                        f"{med['B'] / med['A']:.3f}",
                        f"{cpu['A']:.2f}",
                        f"{cpu['B']:.2f}",
                        f"{rss['A'] / 2**20:.0f}",
                        f"{rss['B'] / 2**20:.0f}",
                    ]
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(
        f"A = {roots['A']}, B = {roots['B']} ({args.venv}); {args.pairs} pairs, medians; load {os.getloadavg()}",
        ["case", "wall A s", "wall B s", "B/A", "cpu A s", "cpu B s", "RSS A MiB", "RSS B MiB"],
        rows,
    )


if __name__ == "__main__":
    main()

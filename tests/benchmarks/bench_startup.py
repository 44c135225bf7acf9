"""Start-up of the light commands and the demo (issue 43, item 4): fresh processes, as a user runs them.

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_startup [--base COMMIT] [--runs 5]

Times `privpub --help`, `privpub history --state S` (a state holding one demo release),
`privpub verify --history --state S` and `privpub demo` (a new folder each run: the sample written, then published) in fresh
interpreters, each run's wall time and CPU time (user + system of the child); prints the median
and the range of `--runs` runs, with the load average before each command's runs. With
`--base`, the same commands run on that commit's code too (`git archive` into a temporary
folder), alternating base and this checkout run by run so that a change of load falls on both;
both run through a tree of links on PYTHONPATH (tests/import_root.py) with this venv's
interpreter and packages, so only privpub's code differs. `--only demo` times the named commands
only; `--no-hypothesis` hides the dev venv's hypothesis from privpub, as a user's install lacks it
(pandera imports it at its first validation). Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.import_root import link_tree

ROOT = Path(__file__).resolve().parents[2]
# what the `privpub` console script runs (pyproject.toml [project.scripts])
CLI = ["-c", "import sys; from privpub.flows.cli import main; sys.exit(main())"]
# --no-hypothesis: as a user's install, which has no hypothesis (a dev dependency); pandera imports
# it, when it can, at its first validation (0.13 s of CPU)
CLI_NO_HYPOTHESIS = [
    "-c",
    "import sys; sys.modules['hypothesis'] = None; from privpub.flows.cli import main; sys.exit(main())",
]


def checkout(commit: str, where: Path) -> Path:
    """`commit`'s tree written into `where` (no worktree: nothing in the repository changes)."""
    where.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def environment(code: Path, links: Path, home: Path) -> dict[str, str]:
    """PYTHONPATH finding `code`'s privpub first; no Prefect API anywhere (a release runs in process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PRIVPUB_STATE"))}
    env.update(
        PYTHONPATH=str(link_tree(code, links)),
        PRIVPUB_HOME=str(home / "no-service"),
        PREFECT_HOME=str(home / "prefect"),
    )
    return env


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh process running `privpub args`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cli = CLI_NO_HYPOTHESIS if env.get("PRIVPUB_BENCH_NO_HYPOTHESIS") else CLI
    res = subprocess.run([sys.executable, *cli, *args], env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"privpub {' '.join(args)} failed: {res.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def summary(name: str, label: str, runs: list[tuple[float, float]], load: float) -> str:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return (
        f"{name:<10} {label:<8} wall median {statistics.median(walls):6.2f} s "
        f"(range {min(walls):.2f}-{max(walls):.2f})  CPU median {statistics.median(cpus):5.2f} s "
        f"(range {min(cpus):.2f}-{max(cpus):.2f})  load before {load:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="also time this commit's code (e.g. main's merge base)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-hypothesis", action="store_true", help="hide hypothesis, as a user's install lacks it")
    ap.add_argument("--only", help="time only these commands (comma-separated: --help,history,verify-h,demo)")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="privpub-startup-") as tmp_name:
        tmp = Path(tmp_name)
        codes = {"head": ROOT} | ({"base": checkout(opts.base, tmp / "base-code")} if opts.base else {})
        envs = {label: environment(code, tmp / f"links-{label}", tmp) for label, code in codes.items()}
        if opts.no_hypothesis:
            for env in envs.values():
                env["PRIVPUB_BENCH_NO_HYPOTHESIS"] = "1"
        timed(["demo", "--dir", str(tmp / "state"), "--quiet"], envs["head"], tmp)  # the state history reads
        state = str(tmp / "state" / "privpub.duckdb")
        for label in codes:  # untimed: each checkout's bytecode compiled, the disk cache warm
            timed(["demo", "--dir", str(tmp / f"warm-{label}"), "--rows", "200", "--quiet"], envs[label], tmp)
            timed(["history", "--state", state], envs[label], tmp)
        commands = {
            "--help": lambda run: ["--help"],
            "history": lambda run: ["history", "--state", state],
            "verify-h": lambda run: ["verify", "--history", "--state", state],
            "demo": lambda run: ["demo", "--dir", str(tmp / f"demo-{run}"), "--quiet"],
        }
        if opts.only:
            commands = {name: make for name, make in commands.items() if name in opts.only.split(",")}
        print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
        for name, make_args in commands.items():
            load = os.getloadavg()[0]
            runs: dict[str, list[tuple[float, float]]] = {label: [] for label in codes}
            for run in range(opts.runs):
                for label in sorted(codes):  # base, then head, run by run
                    runs[label].append(timed(make_args(f"{label}-{run}"), envs[label], tmp))
            for label in sorted(codes):
                print(summary(name, label, runs[label], load), flush=True)


if __name__ == "__main__":
    main()

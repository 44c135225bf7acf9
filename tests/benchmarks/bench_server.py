"""What a running `privpub server` costs a CLI publish (issue 42, item 2; not run by CI):

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_server [--pairs 5]

One service is started in a home of its own (`privpub server start`), then each round runs, as
fresh processes of this checkout's `.venv/bin/privpub`, in a rotating order so all see the same
load: `publish` with no server in sight (PRIVPUB_HOME an empty folder), `publish` with the
service running (its home; no flag: in process, issue 42) and `publish --server` (a flow run of
the service). Each run publishes the demo input (tests/benchmarks/bench_e2e.py `prepare`) into a
fresh output folder and state. Printed: the medians of wall time, CPU and peak RSS, and each
case's difference from the in-process one; the requirement: `--server` at most +0.5 s, no flag
with the server running the same as in process. `uptime` is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
from pathlib import Path

from tests.benchmarks.bench_e2e import measured, prepare, write_toml

ROOT = Path(__file__).resolve().parents[2]
PRIVPUB = str(ROOT / ".venv" / "bin" / "privpub")
CASES = ("in process, no server", "server running, no flag", "server running, --server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def one_run(case: str, spec: dict, work: Path, envs: dict[str, dict]) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    spec_path = write_toml(run_dir / "spec.toml", spec)
    flags = ["--server"] if case.endswith("--server") else []
    return measured([PRIVPUB, "publish", str(spec_path), "--quiet", *flags], envs[case], run_dir)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5, help="rounds (each runs every case once)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-server-"))
    home, nobody = work / "service-home", work / "no-service"
    nobody.mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PRIVPUB_HOME")}
    envs = {
        CASES[0]: {**base, "PRIVPUB_HOME": str(nobody), "PREFECT_HOME": str(work / "prefect-none")},
        CASES[1]: {**base, "PRIVPUB_HOME": str(home)},
        CASES[2]: {**base, "PRIVPUB_HOME": str(home)},
    }
    print(f"before: {uptime()}")
    started = subprocess.run(
        [PRIVPUB, "server", "start", "--port", str(free_port()), "--home", str(home)], capture_output=True, text=True
    )
    assert started.returncode == 0, started.stderr
    runs: dict[str, list[dict]] = {case: [] for case in CASES}
    try:
        spec = prepare("demo", work, args)["spec"]
        spec.setdefault("series", {})["composition"] = "warn"  # the same people again and again
        for i in range(args.pairs):
            order = CASES[i % 3 :] + CASES[: i % 3]  # rotating: no case always first
            for case in order:
                runs[case].append(one_run(case, spec, work, envs))
    finally:
        subprocess.run([PRIVPUB, "server", "stop", "--home", str(home)], capture_output=True, text=True)
        print(f"after:  {uptime()}")
        shutil.rmtree(work, ignore_errors=True)
    base_wall = statistics.median(r["wall_s"] for r in runs[CASES[0]])
    print(f"\n{'case':28} {'wall s (median)':>16} {'vs in process':>14} {'CPU s':>7} {'peak RSS MB':>12}  walls")
    for case in CASES:
        walls = [r["wall_s"] for r in runs[case]]
        wall = statistics.median(walls)
        cpu = statistics.median(r.get("cpu_s", float("nan")) for r in runs[case])
        rss = statistics.median(r["tree_rss"] / 1e6 for r in runs[case])
        print(
            f"{case:28} {wall:16.2f} {wall - base_wall:+14.2f} {cpu:7.2f} {rss:12.0f}  "
            + " ".join(f"{w:.2f}" for w in walls)
        )


if __name__ == "__main__":
    main()

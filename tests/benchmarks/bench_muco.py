"""MuCo benchmark and the paper's Section 5 experiment (not run by CI).

    .venv/bin/python -m tests.benchmarks.bench_muco                    # 40,152 rows, delta 1/6, l 10
    .venv/bin/python -m tests.benchmarks.bench_muco --rows 1000000     # time and memory at scale
    .venv/bin/python -m tests.benchmarks.bench_muco --experiment       # ILoss, disclosure, SUM error
    .venv/bin/python -m tests.benchmarks.bench_muco --rows 1000000 --task-runner dask --workers 2
                                 # the whole publish flow (validate ... commit, report) on a runner

--task-runner runs the Prefect publish flow end to end (a temporary Prefect server, a temporary
state database) with MuCo's chunks mapped on that runner, and reports wall time, CPU of the flow
process and of every child process (Dask workers, the Prefect server, sampled with psutil), and
peak memory. Without it the technique's steps are timed in this process, without Prefect.

Data: tasks.demo_data.census with 7 QIs (age, sex, education, marital, race, workclass, country)
and a numeric sensitive `income` derived from its salary class (the paper's SUM(salary)).
Timings are wall clock and process CPU (the machine is shared: CPU time is the steadier figure).
The Mondrian baseline of the experiment is computed here from the same partitioner: each QI cell
generalized to its group's range (numeric, ordinal) or value set (categorical), as the
`generalization` technique publishes it.
"""

from __future__ import annotations

import argparse
import resource
import time
from fractions import Fraction

import numpy as np
import pandas as pd

from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.techniques.anatomy.technique import Anatomy
from privpub.tasks.techniques.muco import delta_probability as dp
from privpub.tasks.techniques.muco.technique import exact_sums, iloss, random_sum_queries, sum_relative_errors
from privpub.tasks.techniques.registry import get_technique

QI_NAMES = ("age", "sex", "education", "marital", "race", "workclass", "country")


def census_income(n: int, seed: int = 0) -> pd.DataFrame:
    frame = census(n, seed)
    rng = np.random.default_rng(seed + 1)
    cls = frame["salary"].str[4:].astype(int).to_numpy()
    frame["income"] = (np.round(np.exp(8.6 + 0.06 * cls + rng.normal(0, 0.35, n)) / 100) * 100).astype(np.int64)
    return frame.drop(columns=["salary", "occupation"])


def make_spec(technique: dict):
    qi = [q for q in CENSUS_QI if q["name"] in QI_NAMES]
    return spec_from_dict(
        {
            "dataset": {"name": "census", "input": "census.csv", "person_id": "pid", "sensitive": "income", "qi": qi},
            "technique": technique,
        }
    )


class Clock:
    def __init__(self):
        self.rows: list[tuple[str, float, float]] = []

    def __call__(self, label, fn, *args):
        w, c = time.perf_counter(), time.process_time()
        out = fn(*args)
        self.rows.append((label, time.perf_counter() - w, time.process_time() - c))
        return out

    def report(self):
        for label, w, c in self.rows:
            print(f"  {label:<28} wall {w:7.2f} s   cpu {c:7.2f} s")
        print(f"  {'total':<28} wall {sum(r[1] for r in self.rows):7.2f} s   cpu {sum(r[2] for r in self.rows):7.2f} s")


def bench(rows: int, delta: str, l: int, disclosure: bool) -> None:
    frame = census_income(rows)
    spec = make_spec({"name": "muco", "delta": delta, "l": l})
    clock = Clock()
    rng = np.random.default_rng(2024)
    data = clock("validate (Microdata)", Microdata.from_frame, spec, frame)
    tech = get_technique(spec)
    part = clock("partition (Mondrian)", tech.partition, data, rng)
    release = clock("anonymize", tech.anonymize, data, part, rng)
    results = clock("verify (Def. 3, Cor. 3.2)", tech.verify, release, {})
    if disclosure:
        results += clock("disclosure (Section 5.1)", tech.verify, release, {"data": data})[3:]
    print(f"MuCo, {rows:,} rows, {len(QI_NAMES)} QIs, delta = {delta}, l = {l}")
    clock.report()
    print(f"  anonymize split: {release.info['seconds']}")
    print(
        f"  groups {release.info['groups']} (sizes {release.info['min_group']}..{release.info['max_group']}), "
        f"randomized unchanged {release.info['randomized_unchanged']}, unchangeable {release.info['unchangeable']}"
    )
    print(
        f"  stored table entries {release.private['output_tables'].num_rows:,}; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    for r in results:
        print(f"  {'PASS' if r.passed else 'FAIL'} {r.model}: {r.value}")


# --- Mondrian baseline measured on the generalized cells ------------------------------------


def group_boxes(data: Microdata, group: np.ndarray, n_groups: int):
    """Per QI: (lo, hi) codes per group, or for categorical QIs a (groups x values) presence matrix."""
    boxes = []
    for a, dom in enumerate(data.domains):
        c = data.codes[:, a]
        if dom.kind == "categorical":
            present = np.zeros((n_groups, dom.size), dtype=bool)
            present[group, c] = True
            boxes.append(present)
        else:
            lo = np.full(n_groups, dom.size)
            hi = np.full(n_groups, -1)
            np.minimum.at(lo, group, c)
            np.maximum.at(hi, group, c)
            boxes.append((lo, hi))
    return boxes


def mondrian_iloss(data, boxes, group) -> float:
    per = []
    for dom, box in zip(data.domains, boxes):
        if dom.kind == "categorical":
            width = (box.sum(axis=1) - 1) / max(dom.size - 1, 1)
        else:
            width = dom.width(box[0], box[1]) / dom.span if dom.span > 0 else np.zeros(len(box[0]))
        per.append(width[group])
    return float(np.mean(np.column_stack(per)))


def mondrian_sums(data, boxes, group, n_groups, queries) -> np.ndarray:
    s = data.frame["income"].to_numpy(dtype=float)
    gsum = np.bincount(group, weights=s, minlength=n_groups)
    out = []
    for q in queries:
        frac = np.ones(n_groups)
        for name, cond in q.conditions:
            a = data.qi_names.index(name)
            dom, box = data.domains[a], boxes[a]
            if dom.kind == "numeric":
                lo, hi = dom.values[box[0]].astype(float), dom.values[box[1]].astype(float)
                width = hi - lo
                overlap = np.clip(np.minimum(hi, cond.hi) - np.maximum(lo, cond.lo), 0, None)
                inside = ((lo >= cond.lo) & (lo <= cond.hi)).astype(float)
                frac *= np.where(width > 0, overlap / np.where(width > 0, width, 1), inside)
            else:
                hit = np.isin(dom.values.astype(str), list(cond.values))
                if dom.kind == "categorical":
                    members = box
                else:
                    codes = np.arange(dom.size)
                    members = (codes[None, :] >= box[0][:, None]) & (codes[None, :] <= box[1][:, None])
                frac *= (members & hit[None, :]).sum(axis=1) / members.sum(axis=1)
        out.append(float((gsum * frac).sum()))
    return np.array(out)


def mondrian_disclosure(data, boxes, group, n_groups, rng, targets=2000, p_matches=dp.P_MATCH):
    """Same measure as dp.disclosure, on generalized cells (a target matches a group whose cell
    contains its value), exact over the attribute subsets, for a random sample of targets."""
    t = rng.choice(data.n, size=min(targets, data.n), replace=False)
    size = np.bincount(group, minlength=n_groups).astype(float)
    s_codes = data.sensitive_codes
    same_s = np.zeros((len(t), n_groups))
    for i, r in enumerate(t):
        same_s[i] = np.bincount(group[s_codes == s_codes[r]], minlength=n_groups)
    member = []
    for a, (dom, box) in enumerate(zip(data.domains, boxes)):
        v = data.codes[t, a]
        member.append(
            box[:, v].T
            if dom.kind == "categorical"
            else (box[0][None, :] <= v[:, None]) & (v[:, None] <= box[1][None, :])
        )
    d = len(member)
    sums = {s: [0.0, 0.0] for s in range(1, d + 1)}

    def visit(start, prod, depth):
        for a in range(start, d):
            p = member[a] if prod is None else prod & member[a]
            count = p @ size
            sums[depth + 1][0] += float(np.mean(1.0 / count))  # own group always matches
            sums[depth + 1][1] += float(np.mean((p * same_s).sum(axis=1) / count))
            visit(a + 1, p, depth + 1)

    visit(0, None, 0)
    out = {}
    for pm in p_matches:
        w = dp.subset_weights(pm, d)
        out[pm] = (sum(w[s] * sums[s][0] for s in w), sum(w[s] * sums[s][1] for s in w))
    return out


def experiment(rows: int, l: int, deltas: list[str], n_queries: int) -> None:
    frame = census_income(rows)
    rng = np.random.default_rng(7)
    base = Microdata.from_frame(make_spec({"name": "muco", "delta": "1/6", "l": l}), frame)
    queries = random_sum_queries(base, rng, n=n_queries)
    exact = exact_sums(base, queries)
    lines = [
        "| technique | ILoss | SUM rel. error mean | SUM rel. error var | "
        + " | ".join(f"id/attr P={p}" for p in dp.P_MATCH)
        + " |",
        "|---" * (4 + len(dp.P_MATCH)) + "|",
    ]

    def row(name, il, err, disc):
        cells = (
            " | ".join(f"{disc[p][0]:.4f} / {disc[p][1]:.4f}" for p in dp.P_MATCH)
            if disc
            else " | ".join("-" for _ in dp.P_MATCH)
        )
        il_txt = f"{il:.4f}" if il is not None else "0 (QIs exact)"
        lines.append(f"| {name} | {il_txt} | {err.mean():.4f} | {err.var():.4f} | {cells} |")
        print(lines[-1], flush=True)

    for delta in deltas:
        spec = make_spec({"name": "muco", "delta": delta, "l": l})
        data = Microdata.from_frame(spec, frame)
        tech = get_technique(spec)
        g = np.random.default_rng(11)
        part = tech.partition(data, g)
        rel = tech.anonymize(data, part, g)
        res = {r.model: r.value for r in tech.verify(rel, {"data": data})}
        disc = {
            p: (res[f"identity disclosure (P_match={p})"], res[f"attribute disclosure (P_match={p})"])
            for p in dp.P_MATCH
        }
        row(f"MuCo delta={delta}", iloss(rel, data), sum_relative_errors(tech.estimate_sums(rel, queries), exact), disc)

    part = mondrian_partition(base, l, l)
    boxes = group_boxes(base, part.group, part.n_groups)
    est = mondrian_sums(base, boxes, part.group, part.n_groups, queries)
    disc = mondrian_disclosure(base, boxes, part.group, part.n_groups, np.random.default_rng(3))
    row(f"Mondrian l={l}", mondrian_iloss(base, boxes, part.group), sum_relative_errors(est, exact), disc)

    aspec = make_spec({"name": "anatomy", "l": l})
    adata = Microdata.from_frame(aspec, frame)
    anat = Anatomy(aspec)
    g = np.random.default_rng(5)
    arel = anat.anonymize(adata, anat.partition(adata, g), g)
    row(f"Anatomy l={l}", None, sum_relative_errors(anat.estimate_sums(arel, queries), exact), None)
    print("\n".join(lines))


# --- the publish flow end to end, on a task runner --------------------------------------------


def _toml(value) -> str:
    """Just enough TOML for a spec: strings, numbers, lists, inline tables."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"


def write_flow_spec(folder, technique: dict, run: dict) -> str:
    spec = make_spec(technique)
    sections = {
        "dataset": {
            "name": "census",
            "input": "census.parquet",
            "person_id": "pid",
            "sensitive": "income",
            "qi": [q.model_dump(exclude_none=True) for q in spec.dataset.qi],
        },
        "technique": technique,
        "output": {"dir": "releases", "state": "privpub.duckdb", "seed": 2024},
        "run": run,
    }
    text = "\n".join(
        f"[{name}]\n" + "\n".join(f"{k} = {_toml(v)}" for k, v in body.items()) + "\n"
        for name, body in sections.items()
    )
    path = folder / "spec.toml"
    path.write_text(text)
    return str(path)


class ProcessTreeMeter:
    """CPU seconds and peak RSS of this process's children, sampled in a thread (a Dask worker
    exits with its cluster, so its last sample stands for its total)."""

    def __init__(self, every: float = 0.25):
        import threading

        import psutil

        self.me = psutil.Process()
        self.every = every
        self.cpu: dict[int, tuple[str, float]] = {}
        self.peak_rss: dict[str, int] = {}  # peak of the summed RSS of each kind of child
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _kind(self, proc) -> str:
        try:
            cmd = " ".join(proc.cmdline())
        except Exception:
            return "other"
        if "spawn_main" in cmd:  # multiprocessing's spawn: the Dask worker processes
            return "dask worker"
        return "prefect server" if "prefect" in cmd or "uvicorn" in cmd else "other"

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self):
        rss: dict[str, int] = {}
        for proc in self.me.children(recursive=True):
            try:
                t = proc.cpu_times()
                kind = self.cpu.get(proc.pid, (None, 0))[0] or self._kind(proc)
                rss[kind] = rss.get(kind, 0) + proc.memory_info().rss
                self.cpu[proc.pid] = (kind, t.user + t.system)
            except Exception:  # the process ended between listing and reading
                pass
        for kind, value in rss.items():
            self.peak_rss[kind] = max(self.peak_rss.get(kind, 0), value)

    def __enter__(self):
        self.start_cpu = dict(self.cpu_now())
        self._thread.start()
        return self

    def cpu_now(self):
        for proc in self.me.children(recursive=True):
            try:
                t = proc.cpu_times()
                yield proc.pid, t.user + t.system
            except Exception:
                pass

    def __exit__(self, *exc):
        self.sample()
        self._stop.set()
        self._thread.join()

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, (kind, cpu) in self.cpu.items():
            out[kind] = out.get(kind, 0.0) + cpu - self.start_cpu.get(pid, 0.0)
        return out


def flow_bench(rows: int, delta: str, l: int, task_runner: str, workers: int | None, chunk_rows: int | None) -> None:
    import os
    import tempfile
    from pathlib import Path

    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PY_KEY_VALUE_DISABLE_BEARTYPE", "true")
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "false")
    from prefect.testing.utilities import prefect_test_harness

    from privpub.flows.publish import publish
    from privpub.state.store import Store

    folder = Path(tempfile.mkdtemp(prefix="privpub-bench-flow-"))
    census_income(rows).to_parquet(folder / "census.parquet", index=False)
    technique = {"name": "muco", "delta": delta, "l": l}
    if chunk_rows:
        technique["chunk_rows"] = chunk_rows
    run = {"task_runner": task_runner, **({"workers": workers} if workers else {})}
    spec = write_flow_spec(folder, technique, run)
    with prefect_test_harness(server_startup_timeout=120):
        with ProcessTreeMeter() as meter:
            w, c = time.perf_counter(), time.process_time()
            release_id = publish(spec)
            wall, cpu = time.perf_counter() - w, time.process_time() - c
    info = Store(folder / "privpub.duckdb").release(release_id)
    kinds = meter.by_kind()
    print(
        f"MuCo publish flow, {rows:,} rows, {len(QI_NAMES)} QIs, delta = {delta}, l = {l}, "
        f"task runner {task_runner} (workers {workers or ('2' if task_runner == 'dask' else 'default')})"
    )
    print(
        f"  release {release_id} ({info['status']}); published sha256 "
        + ", ".join(f"{t.table_name} {t.sha256[:16]}" for t in info["tables"].itertuples())
    )
    print(
        f"  wall {wall:7.2f} s   cpu flow process {cpu:7.2f} s   "
        + "   ".join(f"cpu {k} {v:.2f} s" for k, v in sorted(kinds.items()))
    )
    print(f"  cpu flow + workers {cpu + kinds.get('dask worker', 0.0):.2f} s")
    print(
        f"  peak RSS flow process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
        "children (sampled, summed per kind): "
        + ", ".join(f"{k} {v / 2**20:.0f} MB" for k, v in sorted(meter.peak_rss.items()))
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=40_152)
    ap.add_argument("--delta", default="1/6")
    ap.add_argument("--l", type=int, default=10)
    ap.add_argument("--no-disclosure", action="store_true")
    ap.add_argument("--experiment", action="store_true")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument(
        "--task-runner",
        choices=["inprocess", "dask"],
        help="run the whole publish flow, mapping MuCo's chunks on this task runner",
    )
    ap.add_argument("--workers", type=int, help="Dask worker processes / threads of the runner")
    ap.add_argument("--chunk-rows", type=int, help="[technique] chunk_rows (default: MuCo's)")
    args = ap.parse_args()
    if args.task_runner:
        flow_bench(args.rows, args.delta, args.l, args.task_runner, args.workers, args.chunk_rows)
    elif args.experiment:
        experiment(args.rows, args.l, ["1/5", "1/6", "1/7", "1/8", "1/10"], args.queries)
    else:
        Fraction(args.delta)
        bench(args.rows, args.delta, args.l, not args.no_disclosure)


if __name__ == "__main__":
    main()

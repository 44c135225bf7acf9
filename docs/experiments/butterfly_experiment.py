"""Issue 6's experiments (Butterfly paper, Section 6) on the synthetic census.

Data: tasks.demo_data.census with the paper's nine attributes as QIs (birthplace -> country,
gender -> sex). The paper's table has no sensitive attribute; the spine needs one, so a random
column `s` (no privacy role) is added. QIDs as in Section 6.4 unless the experiment varies them:

    S1 = {age, occupation, country, sex, marital, education}
    S2 = {sex, marital, education, salary, workclass, race}

Methods: union-qid (Mondrian on S1 u S2, Section 2.2), butterfly one-level, butterfly two-level
with k' = 2 (the paper's setting for Figs. 5-12). Per run: seconds (wall and process CPU) of
partition + anonymize (butterfly includes its own union-QID Mondrian step) + the multi-QID
verifier on the published table; Definition 1's loss from the published table, split into the
attributes of two or more QIDs (common) and the others (distinct); the share of rows in
butterflies; Fig. 6's bound successes b/a.

    .venv/bin/python -m docs.experiments.butterfly_experiment --experiment size --rows 100000 200000
    .venv/bin/python -m docs.experiments.butterfly_experiment --experiment k --rows 100000
    .venv/bin/python -m docs.experiments.butterfly_experiment --experiment diversity --rows 100000
    .venv/bin/python -m docs.experiments.butterfly_experiment --experiment common --rows 100000
    .venv/bin/python -m docs.experiments.butterfly_experiment --experiment workload --rows 100000

Timed runs: wrap in `flock /tmp/privpub-bench.lock` (one or two sizes per call keeps the lock
short). Every call merges its records into docs/experiments/butterfly_results.json (same
experiment, rows, setting and method: replaced) and rewrites butterfly_results.md from it.
tests/benchmarks/bench_butterfly.py (the 300,000-row time target) uses `run` from here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from privpub.schemas.spec import spec_from_dict  # noqa: E402
from privpub.tasks.core.microdata import Microdata  # noqa: E402
from privpub.tasks.demo_data import CENSUS_QI, census  # noqa: E402
from privpub.tasks.evaluate.metrics import error_by_selectivity  # noqa: E402
from privpub.tasks.evaluate.workload import exact_answers, make_workload  # noqa: E402
from privpub.tasks.techniques.butterfly.technique import Butterfly, UnionQID  # noqa: E402

HERE = Path(__file__).resolve().parent
QI = CENSUS_QI + [{"name": "occupation", "kind": "categorical"}]
S1 = ["age", "occupation", "country", "sex", "marital", "education"]
S2 = ["sex", "marital", "education", "salary", "workclass", "race"]
METHODS = [("union-qid", None), ("butterfly", None), ("butterfly", 2)]


def frame_of(n: int, seed: int = 0):
    frame = census(n, seed)
    frame["s"] = np.random.default_rng(seed + 1).integers(0, 10, n).astype(str)
    return frame


def run(frame, name: str, qids, k: int, k_prime: int | None = None, seed: int = 0, workload: bool = False) -> dict:
    """One release, timed (partition + anonymize + verify), with its loss from the published table
    (and with `workload`, the shared count workload's mean relative error per selectivity, untimed)."""
    params = {"name": name, "k": k, "qids": qids, **({"k_prime": k_prime} if k_prime else {})}
    spec = spec_from_dict(
        {
            "dataset": {"name": "census", "input": "census.csv", "person_id": "pid", "sensitive": "s", "qi": QI},
            "technique": params,
        }
    )
    # the classes directly: the registry would import every plug-in, including ones being written
    tech = {"butterfly": Butterfly, "union-qid": UnionQID}[name](spec)
    data = Microdata.from_frame(spec, frame)
    w, c = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(seed)
    part = tech.partition(data, rng)
    release = tech.anonymize(data, part, rng)
    results = tech.verify(release, {})
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    util = tech.utility(release, data)
    errors = {}
    if workload:  # the same 300 queries for every method (the workload's seed is fixed)
        queries = make_workload(data, np.random.default_rng(0))
        errors = error_by_selectivity(
            queries, exact_answers(frame, queries, "s"), tech.estimate_counts(release, queries)
        )
    return {
        "errors": errors,
        "method": name,
        "k": k,
        "k_prime": k_prime,
        "qids": qids,
        "rows": len(frame),
        "wall": wall,
        "cpu": cpu,
        "verified": all(r.passed for r in results),
        "privacy": {r.model: r.value for r in results},
        "loss": util["uncertainty_penalty"],
        "common": util["uncertainty_penalty_common"],
        "distinct": util["uncertainty_penalty_distinct"],
        "in_butterflies": part.info.get("rows_in_butterflies", 0) / len(frame),
        "success": [part.info.get("bound_successes", 0), part.info.get("bound_hits", 0)],
    }


def settings(experiment: str, k: int):
    """(setting label, qids, k) of each point of an experiment."""
    if experiment == "size":  # Figs. 10 and 12
        return [("", [S1, S2], k)]
    if experiment == "workload":  # the shared count workload (not in the paper) at three k
        return [(f"k = {kk}", [S1, S2], kk) for kk in (20, 50, 100)]
    if experiment == "k":  # Figs. 9 and 11
        return [(f"k = {kk}", [S1, S2], kk) for kk in (20, 40, 60, 80, 100)]
    if experiment == "diversity":  # Fig. 7: education common, 1..4 distinct attributes per QID
        add1, add2 = ["age", "occupation", "country", "marital"], ["salary", "workclass", "race", "sex"]
        return [(f"{d} distinct", [["education"] + add1[:d], ["education"] + add2[:d]], k) for d in range(1, 5)]
    if experiment == "common":  # Fig. 8: education, marital, sex added in that order to both QIDs
        common = ["education", "marital", "sex"]
        return [
            (
                f"{d} common",
                [common[:d] + ["age", "occupation", "country"], common[:d] + ["salary", "workclass", "race"]],
                k,
            )
            for d in range(1, 4)
        ]
    raise ValueError(experiment)


def method_label(r: dict) -> str:
    return (
        "union-qid" if r["method"] == "union-qid" else (f"butterfly k'={r['k_prime']}" if r["k_prime"] else "butterfly")
    )


def merge(records: list[dict], path: Path) -> list[dict]:
    old = json.loads(path.read_text()) if path.exists() else []
    key = lambda r: (r["experiment"], r["rows"], r["setting"], method_label(r))  # noqa: E731
    new_keys = {key(r) for r in records}
    out = [r for r in old if key(r) not in new_keys] + records
    out.sort(key=lambda r: (r["experiment"], r["rows"], r["setting"], method_label(r)))
    path.write_text(json.dumps(out, indent=1))
    return out


def markdown(records: list[dict]) -> str:
    titles = {
        "size": "Figs. 10 and 12: data size (k = 50)",
        "k": "Figs. 9 and 11: k",
        "diversity": "Fig. 7: diversity of QIDs (education common)",
        "common": "Fig. 8: number of common attributes",
    }
    lines = ["# Butterfly experiments (generated by docs/experiments/butterfly_experiment.py)", ""]
    work = [r for r in records if r["experiment"] == "workload"]
    if work:
        lines += [
            "## Shared count workload: mean relative error per selectivity (100 queries each)",
            "",
            "| rows | setting | method | loss | 1% | 5% | 10% |",
            "|---:|---|---|---:|---:|---:|---:|",
        ]
        order = {"union-qid": 0, "butterfly": 1, "butterfly k'=2": 2}
        for r in sorted(work, key=lambda r: (r["rows"], r["k"], order.get(method_label(r), 9))):
            e = r["errors"]
            lines.append(
                f"| {r['rows']:,} | {r['setting']} | {method_label(r)} | {r['loss']:,.0f} | "
                f"{e['query_error_1pct']:.3f} | {e['query_error_5pct']:.3f} | {e['query_error_10pct']:.3f} |"
            )
        lines.append("")
    for exp in ("size", "k", "diversity", "common"):
        rows = [r for r in records if r["experiment"] == exp]
        if not rows:
            continue
        lines += [
            f"## {titles[exp]}",
            "",
            "| rows | setting | method | wall s | cpu s | loss | common | distinct | loss / row "
            "| vs union | rows in butterflies | successes b/a | verified |",
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        union = {(r["rows"], r["setting"]): r["loss"] for r in rows if r["method"] == "union-qid"}
        order = {"union-qid": 0, "butterfly": 1, "butterfly k'=2": 2}
        for r in sorted(rows, key=lambda r: (r["rows"], r["k"], r["setting"], order.get(method_label(r), 9))):
            base = union.get((r["rows"], r["setting"]))
            rel = f"{r['loss'] / base - 1:+.0%}" if base and r["method"] != "union-qid" else "-"
            succ = f"{r['success'][0]}/{r['success'][1]}" if r["method"] == "butterfly" else "-"
            lines.append(
                f"| {r['rows']:,} | {r['setting'] or '-'} | {method_label(r)} | {r['wall']:.1f} | "
                f"{r['cpu']:.1f} | {r['loss']:,.0f} | {r['common']:,.0f} | {r['distinct']:,.0f} | "
                f"{r['loss'] / r['rows']:.3f} | {rel} | {r['in_butterflies']:.0%} | {succ} | "
                f"{'yes' if r['verified'] else 'NO'} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experiment", choices=["size", "k", "diversity", "common", "workload"])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000])
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--out", default=str(HERE / "butterfly_results"))
    ap.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    args = ap.parse_args()
    out = Path(args.out)
    if args.render:
        out.with_suffix(".md").write_text(markdown(json.loads(out.with_suffix(".json").read_text())))
        return
    if args.experiment is None:
        ap.error("--experiment is required (or --render)")
    records = []
    for n in args.rows:
        frame = frame_of(n)
        for label, qids, k in settings(args.experiment, args.k):
            for name, k_prime in METHODS:
                r = run(frame, name, qids, k, k_prime, workload=args.experiment == "workload")
                r.update(experiment=args.experiment, setting=label)
                records.append(r)
                print(
                    f"{n:>7} {label:>12} {method_label(r):>15} wall {r['wall']:6.1f} cpu {r['cpu']:6.1f} "
                    f"loss {r['loss']:12,.0f} ({r['common']:,.0f} / {r['distinct']:,.0f}) "
                    f"verified {r['verified']}",
                    flush=True,
                )
    everything = merge(records, out.with_suffix(".json"))
    out.with_suffix(".md").write_text(markdown(everything))


if __name__ == "__main__":
    main()

"""Butterfly benchmark and the paper's Section 6 experiments (not run by CI).

    .venv/bin/python -m tests.benchmarks.bench_butterfly                   # 300,000 rows, k = 50
    .venv/bin/python -m tests.benchmarks.bench_butterfly --rows 100000 --k-prime 2
    .venv/bin/python -m tests.benchmarks.bench_butterfly --experiment k    # Fig. 9: k = 20..100
    .venv/bin/python -m tests.benchmarks.bench_butterfly --experiment diversity   # Fig. 7
    .venv/bin/python -m tests.benchmarks.bench_butterfly --experiment common      # Fig. 8

Data: tasks.demo_data.census with the paper's nine attributes as QIs (birthplace -> country,
gender -> sex). The paper's table has no sensitive attribute; the spine needs one, so a random
column `s` (no privacy role) is added. Timed per method: partition + anonymize (for butterfly
this includes its own union-QID Mondrian step) + verification from the published table.
Wall clock and process CPU are both shown (the machine is shared: CPU time is steadier).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from schemas.spec import spec_from_dict
from tasks.anonymize.base import get_technique
from tasks.demo_data import CENSUS_QI, census
from tasks.microdata import Microdata

QI = CENSUS_QI + [{"name": "occupation", "kind": "categorical"}]
S1 = ["age", "occupation", "country", "sex", "marital", "education"]
S2 = ["sex", "marital", "education", "salary", "workclass", "race"]


def frame_of(n: int, seed: int = 0):
    frame = census(n, seed)
    frame["s"] = np.random.default_rng(seed + 1).integers(0, 10, n).astype(str)
    return frame


def run(frame, name: str, qids, k: int, k_prime: int | None = None, seed: int = 0) -> dict:
    params = {"name": name, "k": k, "qids": qids, **({"k_prime": k_prime} if k_prime else {})}
    spec = spec_from_dict({"dataset": {"name": "census", "input": "census.csv", "person_id": "pid",
                                       "sensitive": "s", "qi": QI}, "technique": params})
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, frame)
    w, c = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(seed)
    part = tech.partition(data, rng)
    release = tech.anonymize(data, part, rng)
    t_anon = time.perf_counter() - w
    results = tech.verify(release, {})
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    util = tech.utility(release, data)
    return {"method": name, "k": k, "k_prime": k_prime, "wall": wall, "cpu": cpu, "anon": t_anon,
            "verified": all(r.passed for r in results),
            "privacy": {r.model: r.value for r in results},
            "loss": util["uncertainty_penalty"], "common": util["uncertainty_penalty_common"],
            "distinct": util["uncertainty_penalty_distinct"],
            "in_butterflies": part.info.get("points_in_butterflies", 0) / len(frame),
            "success": (part.info.get("bound_successes", 0), part.info.get("bound_hits", 0))}


def line(r: dict) -> str:
    hits = f"{r['success'][0]}/{r['success'][1]}" if r["method"] == "butterfly" else "-"
    return (f"| {r['method']} | {r['k']} | {r['k_prime'] or '-'} | {r['wall']:.1f} | {r['cpu']:.1f} | "
            f"{r['loss']:.0f} | {r['common']:.0f} | {r['distinct']:.0f} | {r['in_butterflies']:.0%} | "
            f"{hits} | {r['verified']} |")


HEADER = ("| method | k | k' | wall s | cpu s | loss | common | distinct | rows in butterflies | "
          "bound successes | verified |\n|---|---|---|---|---|---|---|---|---|---|---|")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--k-prime", type=int, default=None)
    ap.add_argument("--experiment", choices=["k", "diversity", "common"], default=None)
    args = ap.parse_args()
    frame = frame_of(args.rows)
    print(f"{args.rows} rows")
    print(HEADER)
    if args.experiment is None:
        union = run(frame, "union-qid", [S1, S2], args.k)
        bf = run(frame, "butterfly", [S1, S2], args.k, args.k_prime)
        print(line(union))
        print(line(bf))
        print(f"\nbutterfly / union-qid time: {bf['wall'] / union['wall']:.1f}x wall, "
              f"{bf['cpu'] / union['cpu']:.1f}x cpu (target < 90 s and <= 3x)")
        return
    k_prime = args.k_prime
    if args.experiment == "k":  # Fig. 9
        for k in (20, 40, 60, 80, 100):
            for name in ("union-qid", "butterfly"):
                print(line(run(frame, name, [S1, S2], k, k_prime if name == "butterfly" else None)))
    elif args.experiment == "diversity":  # Fig. 7: Education common, 1..4 distinct attributes each
        add1, add2 = ["age", "occupation", "country", "marital"], ["salary", "workclass", "race", "sex"]
        for d in range(1, 5):
            qids = [["education"] + add1[:d], ["education"] + add2[:d]]
            print(f"| distinct attributes per QID: {d} |")
            for name in ("union-qid", "butterfly"):
                print(line(run(frame, name, qids, args.k, k_prime if name == "butterfly" else None)))
    else:  # Fig. 8: 1..3 common attributes
        common = ["education", "marital", "sex"]
        for d in range(1, 4):
            qids = [common[:d] + ["age", "occupation", "country"],
                    common[:d] + ["salary", "workclass", "race"]]
            print(f"| common attributes: {d} |")
            for name in ("union-qid", "butterfly"):
                print(line(run(frame, name, qids, args.k, k_prime if name == "butterfly" else None)))


if __name__ == "__main__":
    main()

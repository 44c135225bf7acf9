"""Butterfly time target (issue 6; not run by CI): 300,000 rows, the paper's S1/S2, k = 50:
under 90 s including the union-QID step and verification, and within 3x the union-QID
method's own time, in wall and in CPU seconds.

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_butterfly
    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_butterfly --k-prime 2

Union-qid and butterfly run back to back on the same data, alternating, `--repeat` times; each
method's fastest run counts (the machine is shared). Data, timing (partition + anonymize +
verify) and loss: `run` of docs/experiments/butterfly_experiment.py, which also holds the
Section 6 experiments. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys

from docs.experiments.butterfly_experiment import S1, S2, frame_of, run

HEADER = (
    "| method | k | k' | wall s | cpu s | loss | common | distinct | rows in butterflies | "
    "bound successes | verified |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def line(r: dict) -> str:
    hits = f"{r['success'][0]}/{r['success'][1]}" if r["method"] == "butterfly" else "-"
    return (
        f"| {r['method']} | {r['k']} | {r['k_prime'] or '-'} | {r['wall']:.1f} | {r['cpu']:.1f} | "
        f"{r['loss']:.0f} | {r['common']:.0f} | {r['distinct']:.0f} | {r['in_butterflies']:.0%} | "
        f"{hits} | {r['verified']} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--k-prime", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    frame = frame_of(args.rows)
    runs = {"union-qid": [], "butterfly": []}
    for _ in range(args.repeat):
        runs["union-qid"].append(run(frame, "union-qid", [S1, S2], args.k))
        runs["butterfly"].append(run(frame, "butterfly", [S1, S2], args.k, args.k_prime))
    print(f"{args.rows} rows, {args.repeat} alternating runs each (all shown)\n{HEADER}")
    for r in runs["union-qid"] + runs["butterfly"]:
        print(line(r))
    best = {m: {t: min(r[t] for r in rs) for t in ("wall", "cpu")} for m, rs in runs.items()}
    ratio = {t: best["butterfly"][t] / best["union-qid"][t] for t in ("wall", "cpu")}
    ok = (
        best["butterfly"]["wall"] < 90
        and max(ratio.values()) <= 3
        and all(r["verified"] for rs in runs.values() for r in rs)
    )
    print(
        f"\nfastest: union-qid {best['union-qid']['wall']:.2f} s wall / {best['union-qid']['cpu']:.2f} s cpu, "
        f"butterfly {best['butterfly']['wall']:.2f} / {best['butterfly']['cpu']:.2f}"
    )
    print(
        f"butterfly / union-qid: {ratio['wall']:.2f}x wall, {ratio['cpu']:.2f}x cpu "
        f"(target < 90 s and <= 3x): {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

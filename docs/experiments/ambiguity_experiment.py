"""Issue 3's utility experiment: generalization (Mondrian) vs Ambiguity vs PriView.

Synthetic census (tasks/demo_data.census), occupation sensitive, 8 QIs, alpha = 0.25, and for
beta in {0.1, 0.05, 0.025}:

* generalization: Mondrian with k = l = ceil(1/beta) (distinct l-diversity),
* ambiguity and priview with (alpha, beta),

all answering the *same* workload (make_workload with a fixed seed on the same Microdata, exact
answers by DuckDB), and reports the mean relative error per selectivity band (1 %, 5 %, 10 %).
Also reported: the median estimate/actual ratio (bias), groups, suppressed rows, and whether the
technique's own verifier passes the release.

    .venv/bin/python -m docs.experiments.ambiguity_experiment [--rows 100000] [--per-band 200]
        [--betas 0.1 0.05 0.025] [--seed 1] [--workload-seed 0]

Prints a markdown table (the one in docs/ambiguity.md, section "Experiment") and writes it with
the raw figures to docs/experiments/ambiguity_results.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
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
from privpub.tasks.techniques.ambiguity.priview import PriView  # noqa: E402
from privpub.tasks.techniques.ambiguity.technique import Ambiguity  # noqa: E402
from privpub.tasks.techniques.generalization.technique import Generalization  # noqa: E402

HERE = Path(__file__).resolve().parent


def technique(name: str, **params):
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "census",
                "input": "census.csv",
                "person_id": "pid",
                "sensitive": "occupation",
                "qi": CENSUS_QI,
            },
            "technique": {"name": name, **params},
        }
    )
    # the classes directly: the registry imports every plug-in, including ones being written
    return spec, {"generalization": Generalization, "ambiguity": Ambiguity, "priview": PriView}[name](spec)


def run_one(name: str, params: dict, frame, workload, actual, seed: int) -> dict:
    spec, tech = technique(name, **params)
    data = Microdata.from_frame(spec, frame)
    gen = np.random.default_rng(seed)
    t0 = time.perf_counter()
    part = tech.partition(data, gen)
    release = tech.anonymize(data, part, gen)
    t1 = time.perf_counter()
    results = tech.verify(release, {})
    t2 = time.perf_counter()
    estimate = np.asarray(tech.estimate_counts(release, workload), dtype=float)
    t3 = time.perf_counter()
    errors = error_by_selectivity(workload, actual, estimate)
    ok = actual > 0
    sizes = tech.group_sizes(release)
    out = {
        "technique": name,
        "params": {k: str(v) for k, v in params.items()},
        **errors,
        "mean_error": float(np.mean(np.abs(actual[ok] - estimate[ok]) / actual[ok])),
        "median_ratio": float(np.median(estimate[ok] / actual[ok])),
        "groups": int(len(sizes)) if sizes is not None else None,
        "avg_group": float(np.mean(sizes)) if sizes is not None else None,
        "suppressed": int(release.info.get("suppressed", 0)),
        "verified": all(r.passed for r in results),
        "checks": {r.model: str(r.value) for r in results},
        "seconds_release": round(t1 - t0, 2),
        "seconds_verify": round(t2 - t1, 2),
        "seconds_estimate": round(t3 - t2, 2),
    }
    if name == "priview":
        st = release.tables["ST"]
        out["st_qi"] = [c for c in st.column_names if c not in ("gid", "occupation", "count")][0]
    return out


def table(rows: list[dict]) -> str:
    head = (
        "| beta | technique | 1 % | 5 % | 10 % | all | median est/actual | groups | avg group "
        "| suppressed | verified |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    lines = [head]
    for r in rows:
        name = r["technique"]
        if name == "generalization":
            name = f"generalization (k = l = {r['params']['k']})"
        if name == "priview":
            name = f"priview (ST: {r['st_qi']})"
        lines.append(
            f"| {r['beta']} | {name} | {r['query_error_1pct']:.3f} | {r['query_error_5pct']:.3f} "
            f"| {r['query_error_10pct']:.3f} | {r['mean_error']:.3f} | {r['median_ratio']:.2f} "
            f"| {r['groups']:,} | {r['avg_group']:.1f} | {r['suppressed']} "
            f"| {'yes' if r['verified'] else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--per-band", type=int, default=200)
    ap.add_argument("--betas", type=float, nargs="+", default=[0.1, 0.05, 0.025])
    ap.add_argument("--alpha", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1, help="data seed")
    ap.add_argument("--workload-seed", type=int, default=0)
    ap.add_argument("--techniques", nargs="+", default=["generalization", "ambiguity", "priview"])
    ap.add_argument("--out", default=str(HERE / "ambiguity_results"))
    args = ap.parse_args()

    frame = census(args.rows, seed=args.seed)
    spec, _ = technique("generalization", k=2)
    data = Microdata.from_frame(spec, frame)
    workload = make_workload(data, np.random.default_rng(args.workload_seed), per_band=args.per_band)
    actual = exact_answers(data.frame, workload, "occupation")
    print(f"{args.rows} rows, {len(workload)} queries", flush=True)

    rows = []
    for beta in args.betas:
        d = math.ceil(1 / beta - 1e-9)
        configs = {
            "generalization": {"k": d, "l": d},
            "ambiguity": {"alpha": args.alpha, "beta": beta},
            "priview": {"alpha": args.alpha, "beta": beta},
        }
        for name in args.techniques:
            r = run_one(name, configs[name], frame, workload, actual, seed=args.seed)
            r["beta"] = beta
            rows.append(r)
            print(json.dumps(r), flush=True)
    md = table(rows)
    print(md)
    Path(args.out + ".md").write_text(md + "\n")
    Path(args.out + ".json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

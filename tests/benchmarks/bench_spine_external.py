"""The reference libraries' side of bench_spine.py; runs in the isolated benchmark environment.

pycanon and anonypyx pin (or pull in) numpy / pandas / scipy versions that differ from the
project's, so they live in bench-env/ (built by `make bench` from requirements-bench.txt) and this
script is the only code that imports them. It imports nothing from the project: the benchmark
(under the project's .venv) hands it Parquet files and reads back Parquet files plus one JSON line
on stdout.

    bench-env/bin/python tests/benchmarks/bench_spine_external.py anonypyx \
        --input in.parquet --output out.parquet --qi age,sex,... --categorical sex,... \
        --sensitive occupation --k 10 --l 3 --repeat 2
    bench-env/bin/python tests/benchmarks/bench_spine_external.py pycanon \
        --input published.parquet --qi age,sex,... --sensitive occupation --repeat 2

anonypyx: `Anonymiser(df, k=, l=, feature_columns=, sensitive_column=)` with its default
algorithm "Mondrian" and the "machine-readable" generalisation (numeric QIs -> <qi>_min/<qi>_max,
category-dtype QIs -> one boolean column <qi>_<value> per value, plus `count` per group and
sensitive value). Partitioning and generalisation are timed separately, as `anonymise()` runs them.

pycanon: `pycanon.anonymity.k_anonymity(df, qi)` and `l_diversity(df, qi, [sensitive])` on the
published table with one string column per QI.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _clock(fn, *args):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w, time.process_time() - c


def run_anonypyx(args) -> dict:
    import pandas as pd
    from anonypyx import Anonymiser

    qi = args.qi.split(",")
    categorical = [c for c in args.categorical.split(",") if c]
    df = pd.read_parquet(args.input, columns=qi + [args.sensitive])
    for c in categorical:
        df[c] = df[c].astype("category")
    runs = []
    best = None
    for _ in range(args.repeat):
        anon = Anonymiser(
            df,
            k=args.k,
            l=args.l,
            feature_columns=qi,
            sensitive_column=args.sensitive,
            algorithm="Mondrian",
            generalisation_strategy="machine-readable",
        )
        parts, pw, pc = _clock(anon.algorithm.partition, anon.parameters)

        def generalise():
            schema = anon.generalisation_strategy_type.create_for_data(anon.df, anon.quasi_identifiers)
            return schema.generalise(anon.df, parts)

        out, gw, gc = _clock(generalise)
        run = {
            "partition_s": pw,
            "partition_cpu_s": pc,
            "generalise_s": gw,
            "generalise_cpu_s": gc,
            "groups": len(parts),
            "output_rows": len(out),
        }
        runs.append(run)
        if best is None or pw + gw < best[0]:
            best = (pw + gw, out)
    best[1].to_parquet(args.output, index=False)
    import anonypyx

    return {"tool": "anonypyx", "version": _version("anonypyx"), "runs": runs, "module": anonypyx.__file__}


def run_pycanon(args) -> dict:
    import pandas as pd
    from pycanon import anonymity
    from pycanon.anonymity.utils import aux_anonymity

    qi = args.qi.split(",")
    df = pd.read_parquet(args.input, columns=qi + [args.sensitive])
    runs = []
    for _ in range(args.repeat):
        k, kw, kc = _clock(anonymity.k_anonymity, df, qi)
        l, lw, lc = _clock(anonymity.l_diversity, df, qi, [args.sensitive])
        runs.append({"k": int(k), "l": int(l), "k_s": kw, "k_cpu_s": kc, "l_s": lw, "l_cpu_s": lc})
    classes = len(aux_anonymity.get_equiv_class(df, qi))  # untimed: a cross-check of the grouping
    return {"tool": "pycanon", "version": _version("pycanon"), "runs": runs, "classes": classes}


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", choices=["anonypyx", "pycanon"])
    ap.add_argument("--input", required=True)
    ap.add_argument("--output")
    ap.add_argument("--qi", required=True, help="comma-separated QI columns")
    ap.add_argument("--categorical", default="", help="QIs anonypyx treats as categorical")
    ap.add_argument("--sensitive", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--l", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    result = run_anonypyx(args) if args.tool == "anonypyx" else run_pycanon(args)
    import numpy
    import pandas

    result["numpy"], result["pandas"] = numpy.__version__, pandas.__version__
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()

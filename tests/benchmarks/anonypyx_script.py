"""A bare anonypyx script, as a user would write it (run by bench_e2e.py in bench-env):

    bench-env/bin/python tests/benchmarks/anonypyx_script.py INPUT.csv OUTPUT.parquet --qi a,b,c
        --categorical b,c --sensitive s --k 10

Reads the CSV, marks the categorical QIs, runs anonypyx's Mondrian with k, writes the result.
Nothing is validated, verified, evaluated or recorded: the whole process is the reference time.
"""

import argparse

import pandas as pd
from anonypyx import Anonymiser

ap = argparse.ArgumentParser()
ap.add_argument("input")
ap.add_argument("output")
ap.add_argument("--qi", required=True)
ap.add_argument("--categorical", default="")
ap.add_argument("--sensitive", required=True)
ap.add_argument("--k", type=int, required=True)
args = ap.parse_args()
qi = args.qi.split(",")
frame = pd.read_csv(args.input, usecols=qi + [args.sensitive])
for column in filter(None, args.categorical.split(",")):
    frame[column] = frame[column].astype("category")
anonymiser = Anonymiser(
    frame,
    k=args.k,
    feature_columns=qi,
    sensitive_column=args.sensitive,
    algorithm="Mondrian",
    generalisation_strategy="machine-readable",
)
anonymiser.anonymise().to_parquet(args.output, index=False)

"""What `[technique] suppress` buys (issue 28): generalization with and without suppression on a
CPS-like and a census-like table, for k in {5, 10, 20}; utility and risk figures side by side.

    make bench-suppress                                   # 60,000 rows per table
    .venv/bin/python -m tests.benchmarks.bench_suppress --rows 20000 --ks 5,10 --shares 0,0.01

Each release is a whole publish in this process (tasks' pipeline with the plain driver: read,
validate, partition, anonymize, verify, evaluate, risk, commit, report) into a temporary folder;
the figures are the ones it stores (`release_metrics`), plus three read from the published table:
- `NCP charged`: the uncertainty penalty per cell counting each suppressed row's cells as whole
  domains (1 each), over all input rows: what a user loses, published or not;
- `p99 row NCP` / `max row NCP`: the mean cell width of the 99th-percentile and the widest
  published row (the tail that suppression targets).
`time s` is the publish's wall time (shared machine: run under flock /tmp/privpub-bench.lock).

Tables (synthetic, deterministic):
- CPS-like (`cps` below): age, sex, race, education (ordinal, 16), marital status (7),
  occupation category (22), weekly hours (numeric, a long-hours tail); sensitive: hourly
  earnings, lognormal, in cents (nearly every value distinct).
- census-like: tasks.demo_data.census with its 8 QIs (CENSUS_QI); sensitive: occupation.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from privpub.flows import pipeline
from privpub.schemas.spec import load_spec
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.evaluate.metrics import cell_widths

CPS_EDUCATION = [
    "none",
    "1st-4th",
    "5th-6th",
    "7th-8th",
    "9th",
    "10th",
    "11th",
    "12th-no-diploma",
    "hs-grad",
    "some-college",
    "assoc-voc",
    "assoc-acdm",
    "bachelors",
    "masters",
    "prof-school",
    "doctorate",
]
CPS_MARITAL = [
    "never-married",
    "married-civ-spouse",
    "married-af-spouse",
    "married-spouse-absent",
    "separated",
    "divorced",
    "widowed",
]
CPS_RACE = ["white", "black", "asian", "native-american", "pacific-islander", "multiple"]
CPS_OCCUPATION = [f"occ-{i:02d}" for i in range(1, 23)]
CPS_QI: list[dict[str, Any]] = [
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "race", "kind": "categorical"},
    {"name": "education", "kind": "ordinal", "order": CPS_EDUCATION},
    {"name": "marital", "kind": "categorical"},
    {"name": "occupation", "kind": "categorical"},
    {"name": "hours", "kind": "numeric"},
]


def cps(n: int, seed: int = 0) -> pd.DataFrame:
    """CPS-like rows: skewed age, race and occupation marginals; education raises occupation and
    earnings; most work 40 hours, 2% a long week (60-99 hours)."""
    rng = np.random.default_rng(seed)
    age = np.clip(np.round(16 + rng.gamma(3.2, 8.0, n)), 16, 85).astype(np.int64)
    sex = rng.choice(2, n, p=[0.47, 0.53])
    race = rng.choice(len(CPS_RACE), n, p=[0.77, 0.12, 0.065, 0.012, 0.003, 0.03])
    edu = np.clip(np.round(rng.normal(9.6, 2.2, n) + (age > 25) * 0.6), 0, len(CPS_EDUCATION) - 1).astype(np.int64)
    married = rng.random(n) < np.clip((age - 20) / 25, 0, 0.6)
    marital = np.where(married, 1, rng.choice([0, 2, 3, 4, 5, 6], n, p=[0.55, 0.01, 0.04, 0.08, 0.22, 0.10]))
    marital = np.where((age > 70) & (rng.random(n) < 0.35), 6, marital)
    occupation = np.clip(np.round(edu * 1.2 + rng.normal(0, 4, n)), 0, len(CPS_OCCUPATION) - 1).astype(np.int64)
    hours = np.where(rng.random(n) < 0.55, 40, np.round(rng.normal(38, 11, n)))
    hours = np.clip(np.where(rng.random(n) < 0.02, rng.integers(60, 100, n), hours), 1, 99).astype(np.int64)
    mu = 2.4 + 0.07 * edu + 0.01 * np.minimum(age - 16, 35) + 0.12 * (sex == 1)
    return pd.DataFrame(
        {
            "pid": np.arange(1, n + 1, dtype=np.int64),
            "age": age,
            "sex": np.array(["female", "male"], dtype=object)[sex],
            "race": np.array(CPS_RACE, dtype=object)[race],
            "education": np.array(CPS_EDUCATION, dtype=object)[edu],
            "marital": np.array(CPS_MARITAL, dtype=object)[marital],
            "occupation": np.array(CPS_OCCUPATION, dtype=object)[occupation],
            "hours": hours,
            "hourly_wage": np.round(np.exp(mu + rng.normal(0, 0.55, n)), 2),
        }
    )


TABLES = {
    "CPS-like": (cps, CPS_QI, "hourly_wage"),
    "census-like": (lambda n, seed: census(n, seed=seed), CENSUS_QI, "occupation"),
}
COLUMNS = [
    ("k", None),
    ("suppress", None),
    ("suppressed rows", "suppressed-rows"),
    ("NCP published", "uncertainty-penalty-normalized"),
    ("NCP charged", None),
    ("p99 row NCP", None),
    ("max row NCP", None),
    ("discernibility", "discernibility"),
    ("query err 1%", "query-error-1pct"),
    ("5%", "query-error-5pct"),
    ("10%", "query-error-10pct"),
    ("prosecutor max", "prosecutor-risk-max"),
    ("prosecutor avg", "prosecutor-risk-avg"),
    ("records at risk", "records-at-risk"),
    ("attribute max", "attribute-risk-max"),
    ("time s", None),
]


def spec_text(csv: Path, qi: list[dict], sensitive: str, k: int, share: float) -> str:
    def entry(q: dict) -> str:
        order = ", order = [" + ", ".join(f'"{v}"' for v in q["order"]) + "]" if "order" in q else ""
        return f'{{ name = "{q["name"]}", kind = "{q["kind"]}"{order} }}'

    suppress = f"suppress = {share}\n" if share else ""
    return (
        f'[dataset]\nname = "bench"\ninput = "{csv}"\nperson_id = "pid"\nsensitive = "{sensitive}"\n'
        f"qi = [{', '.join(entry(q) for q in qi)}]\n\n"
        f'[technique]\nname = "generalization"\nk = {k}\n{suppress}\n'
        '[output]\ndir = "releases"\nstate = "privpub.duckdb"\nseed = 1\n'
    )


def row_widths(table, data: Microdata) -> np.ndarray:
    """Per published row: the mean width of its QI cells (its share of the uncertainty penalty)."""
    total = np.zeros(table.num_rows)
    for dom in data.domains:
        if dom.span > 0:
            total += cell_widths(table, dom.name, dom)
    return total / len(data.domains)


def one_release(work: Path, frame: pd.DataFrame, qi: list[dict], sensitive: str, k: int, share: float) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"k{k}-", dir=work))
    csv = work / "input.csv"
    spec_path = folder / "spec.toml"
    spec_path.write_text(spec_text(csv, qi, sensitive, k, share))
    t0 = time.perf_counter()
    release_id = pipeline.attempt(str(spec_path), None, None, driver=pipeline.Driver(None))
    seconds = time.perf_counter() - t0
    rel = Store(folder / "privpub.duckdb").release(release_id)
    figures = {r.name: r.value for r in rel["metrics"].itertuples()}
    (file,) = rel["tables"].file
    table = pq.read_table(folder / "releases" / release_id / file)
    data = Microdata.from_frame(load_spec(spec_path), frame)
    widths = row_widths(table, data)
    suppressed = int(figures["suppressed-rows"])
    charged = (widths.sum() + suppressed) / data.n  # a suppressed row: every cell the whole domain
    return {
        **figures,
        "k": k,
        "suppress": share,
        "NCP charged": charged,
        "p99 row NCP": float(np.quantile(widths, 0.99)),
        "max row NCP": float(widths.max()),
        "time s": seconds,
    }


def cell(value: Any) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4g}"
    if isinstance(value, float):
        return f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--ks", default="5,10,20")
    ap.add_argument("--shares", default="0,0.01")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ks = [int(x) for x in args.ks.split(",")]
    shares = [float(x) for x in args.shares.split(",")]
    print(f"rows {args.rows:,} per table, generalization, seed 1, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-suppress-") as tmp:  # warm-up: imports, first publish
        cps(1000, 0).to_csv(Path(tmp) / "input.csv", index=False)
        one_release(Path(tmp), cps(1000, 0), CPS_QI, "hourly_wage", 5, 0.01)
    for name, (make, qi, sensitive) in TABLES.items():
        frame = make(args.rows, args.seed)
        with tempfile.TemporaryDirectory(prefix="bench-suppress-") as tmp:
            work = Path(tmp)
            frame.to_csv(work / "input.csv", index=False)
            rows = [one_release(work, frame, qi, sensitive, k, share) for k in ks for share in shares]
        print(f"\n### {name} ({args.rows:,} rows, {len(qi)} QIs, sensitive {sensitive})\n")
        print("| " + " | ".join(c for c, _ in COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
        for r in rows:
            print("| " + " | ".join(cell(r[key or c]) for c, key in COLUMNS) + " |")


if __name__ == "__main__":
    main()

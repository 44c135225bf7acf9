"""dp-synthetic beside generalization (issue 45): the census-like table (tasks.demo_data.census,
its 8 QIs, sensitive occupation) or the CPS-like one (tests/benchmarks/bench_suppress.py `cps`:
age, sex, race, education, marital, hours; sensitive occupation) at epsilon 1 and 4 and Mondrian
k = 10, on the same workload (the same input and seed draw the same count queries).

    flock /tmp/privpub-bench.lock /usr/bin/time -f "%e s wall %U+%S s cpu %M KiB" \
        .venv/bin/python -m tests.benchmarks.bench_dp --rows 250000 [--table cps]

Per release: the workload's mean relative error by selectivity (1%, 5%, 10%), the publish's wall
and CPU time (the whole pipeline: read, validate, anonymize, verify, evaluate, risk, commit,
report) and, for dp-synthetic, the mechanism alone (MST: measure, select, sample) timed apart.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import privpub
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.techniques.registry import get_technique
from tests.benchmarks.bench_suppress import CPS_QI, cps

DP = {"name": "dp-synthetic", "bounds": {"age": [17, 95]}, "bin_count": 16, "categories": "from-data"}
# per table: the rows, its QIs (the CPS table's occupation is the sensitive column here) and the
# public bounds of its numeric QIs
TABLES: dict[str, tuple[Any, list[dict[str, Any]], dict[str, list[int]]]] = {
    "census": (census, CENSUS_QI, {"age": [17, 95]}),
    "cps": (cps, [q for q in CPS_QI if q["name"] != "occupation"], {"age": [16, 86], "hours": [1, 100]}),
}
DONE = re.compile(r"(\S[^;]*?) done in ([0-9.]+) s")
SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("dp-synthetic epsilon 1", {**DP, "epsilon": 1.0}),
    ("dp-synthetic epsilon 4", {**DP, "epsilon": 4.0}),
    ("generalization k 10", {"name": "generalization", "k": 10}),
]


def spec(folder: Path, technique: dict[str, Any], table: str = "census") -> dict[str, Any]:
    dataset = {"name": table, "person_id": "pid", "sensitive": "occupation", "qi": TABLES[table][1]}
    if technique["name"] == "dp-synthetic":
        technique = {**technique, "bounds": TABLES[table][2]}
    return {
        "dataset": dataset,
        "technique": technique,
        "output": {"dir": str(folder / "rel"), "state": str(folder / "s.duckdb"), "seed": 7},
    }


def run(rows: int, table: str = "census") -> None:
    frame = TABLES[table][0](rows, seed=1)
    frame["pid"] = np.arange(rows)
    print(f"{table}-like, {rows:,} rows, seed 7")
    steps: list[str] = []
    print("| release | error 1% | error 5% | error 10% | publish wall s | publish cpu s | mechanism wall s |")
    print("|---|---|---|---|---|---|---|")
    for name, technique in SETTINGS:
        with tempfile.TemporaryDirectory() as tmp:
            s = spec(Path(tmp), technique, table)
            wall, cpu = time.perf_counter(), time.process_time()
            lines: list[str] = []
            release = privpub.publish(frame, s, progress=lines.append)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            f = release.figures.set_index("name").value
            mechanism = ""
            if technique["name"] == "dp-synthetic":
                with_input = {**s, "dataset": {**s["dataset"], "input": "x.csv"}}
                tech = get_technique(spec_from_dict(with_input))
                data = Microdata.from_frame(tech.spec, frame)
                start = time.perf_counter()
                tech.anonymize(data, tech.partition(data, np.random.default_rng(7)), np.random.default_rng(7))
                mechanism = f"{time.perf_counter() - start:.2f}"
            errors = [f"{float(f[f'query-error-{p}pct']):.3f}" for p in (1, 5, 10)]
            print(f"| {name} | {' | '.join(errors)} | {wall:.1f} | {cpu:.1f} | {mechanism} |")
            steps.append(f"{name}: " + "; ".join(slowest(lines)))
    print("\nthe slowest steps of each publish (its progress lines):")
    print("\n".join(steps))


def slowest(lines: list[str], most: int = 4) -> list[str]:
    """The `most` progress lines "<step> done in <s> s" with the largest times."""
    timed = [(float(m.group(2)), m.group(1)) for m in map(DONE.search, lines) if m]
    return [f"{step} {seconds:.1f} s" for seconds, step in sorted(timed, reverse=True)[:most]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--table", choices=sorted(TABLES), default="census")
    args = parser.parse_args()
    run(args.rows, args.table)


if __name__ == "__main__":
    main()

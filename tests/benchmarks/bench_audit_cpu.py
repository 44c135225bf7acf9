"""CPU time of the auditor's work units on the demo census table (issue 42; not run by CI).

Why: the auditor's limits are counts of work (solves + solver nodes), so decisions do not depend
on the machine; `[audit] request_budget`'s default (DEFAULT_REQUEST_BUDGET) and the reasons'
"~1 s of CPU" (program.UNITS_PER_CPU_SECOND) are calibrated from this measurement. A census table
(tasks/demo_data.py, all eight QIs, no grid, l = 2) is asked the three quick queries of
tests/audit/test_lock_bound.py, then its free predicate SLOW under a request budget of R units
(the check's budget out of the way): time.process_time() around the decision gives units per CPU
second. The load (os.getloadavg) is printed with each row: CPU time is less sensitive to it than
wall time, not immune (shared caches).

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_audit_cpu \
        [--rows 300 1000 5000] [--request-budget 160 600]
"""

from __future__ import annotations

import argparse
import os
import time

from privpub.tasks.audit import Auditor, secret_from_mapping
from privpub.tasks.audit.auditor import DEFAULT_REQUEST_BUDGET
from privpub.tasks.audit.program import UNITS_PER_CPU_SECOND
from privpub.tasks.demo_data import CENSUS_QI, census
from tests.audit.test_lock_bound import QUICK, SLOW


def measure(rows: int, request_budget: int) -> dict:
    frame = census(rows, seed=4)
    qis = [q["name"] for q in CENSUS_QI]
    secret = dict(zip(frame.pid, frame.occupation))
    auditor = Auditor(
        frame[["pid", *qis]],
        frame.occupation.tolist(),
        2,
        secret_from_mapping(secret),
        id_column="pid",
        budget=1_000_000,
        request_budget=request_budget,
        after_denial="list",
    )
    for where in QUICK:
        auditor.ask_where(where)
    ids = auditor.select(SLOW).ids
    cpu, wall = time.process_time(), time.perf_counter()
    decision = auditor.ask(ids)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "rows": rows,
        "request_budget": request_budget,
        "response": "budget-denied" if decision.budget_hit else decision.response,
        "work": decision.work,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "units_per_cpu_s": round(decision.work / cpu) if cpu else None,
        "load_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[300, 1000, 5000])
    ap.add_argument("--request-budget", type=int, nargs="+", default=[DEFAULT_REQUEST_BUDGET, 600])
    args = ap.parse_args()
    print(f"DEFAULT_REQUEST_BUDGET = {DEFAULT_REQUEST_BUDGET}, UNITS_PER_CPU_SECOND = {UNITS_PER_CPU_SECOND}")
    for rows in args.rows:
        for budget in args.request_budget:
            print(measure(rows, budget), flush=True)


if __name__ == "__main__":
    main()

"""What the auditor bench would give if pinning proofs were free (measurement only, UNSOUND).

Issue 16's wall is the question "can some answer pin this group?" (docs/auditing.md, "Issue 16,
fifth pass"). This script runs `bench_audit` with that question answered "no" for every group that
is not derived from the query, which is NOT what the real auditor may do (some such groups can be
pinned): its decisions are not exact, and it exists only to show what else stands in the way once
pinning costs nothing.

    --oracle cleared   every such group counts as proved never pinned, after the MILP that asks
                       whether it can hold one value at all (what a perfect, free exchange proof
                       would give the code as it is)
    --oracle skipped   such groups are skipped before that MILP (no solve for them at all)

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_audit_oracle \
        --oracle skipped [bench_audit's options, e.g. --verbose --queries 60]
"""

from __future__ import annotations

import inspect
import sys

from privpub.tasks.audit import decide
from tests.benchmarks import bench_audit


def skip_non_derived_groups() -> None:
    """Rebuild decide.narrowable_groups with non-derived groups skipped before their MILP."""
    src = inspect.getsource(decide.narrowable_groups)
    old = "            if prog.can_be_narrow(work, c, l - 1):\n"
    if src.count(old) != 1:
        raise SystemExit("decide.narrowable_groups changed: update this script")
    src = src.replace(old, "            if not derived[c]:\n                continue\n" + old)
    exec(compile(src, decide.__file__, "exec"), decide.__dict__)


def main() -> None:
    if "--oracle" not in sys.argv:
        raise SystemExit("--oracle cleared|skipped is required")
    at = sys.argv.index("--oracle")
    mode = sys.argv[at + 1]
    del sys.argv[at : at + 2]
    if mode == "cleared":
        decide.never_pinned = lambda *args: True
        decide.fact_structure = lambda *args: ()
    elif mode == "skipped":
        skip_non_derived_groups()
    else:
        raise SystemExit("--oracle cleared|skipped")
    print(f"UNSOUND oracle '{mode}': decisions are not exact (measurement only)")
    bench_audit.main()


if __name__ == "__main__":
    main()

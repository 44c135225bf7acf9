"""The quality models in process at 1M rows (issue 43, round 2; not run by CI).

    cd FOLDER && TREE/.venv/bin/python TREE/tests/benchmarks/bench_quality_inprocess.py capture spec.toml OUT
    .venv/bin/python -m tests.benchmarks.bench_quality_inprocess time PICKLE [--profile]

`capture` publishes spec.toml (in a fresh folder holding it) up to the quality models
and pickles the (QualityView, Microdata) they read, then stops. `time` loads the pickle in a fresh
process, codes the table's list columns and QI classes as the verifier has by then in a publish
(the caches quality_figures reads), and times one `quality_figures` call: CPU (user + system),
minor page faults and the peak RSS it adds over the loaded data, with the five figures' repr.
"""

from __future__ import annotations

import os
import pickle
import resource
import sys
import time


def capture_quality_inputs(spec: str, out: str) -> None:
    import privpub.flows.pipeline as pipeline
    from privpub.flows.cli import main as cli_main

    def _keep(technique, release, data):  # noqa: ANN001, ANN202 (the pipeline's own signature)
        with open(out, "wb") as f:
            pickle.dump((technique.quality_view(release), data), f, protocol=5)
        os._exit(0)

    pipeline._quality = _keep
    sys.argv = ["privpub", "publish", spec]
    cli_main()


def time_quality_models(path: str, profile: bool) -> None:
    import pyarrow as pa

    with open(path, "rb") as f:
        view, data = pickle.load(f)
    from privpub.tasks.evaluate.quality import quality_figures
    from privpub.tasks.verify.published import class_ids, column_codes, qi_columns

    for name in view.table.column_names:  # what verify coded already in a publish
        if pa.types.is_list(view.table.schema.field(name).type):
            column_codes(view.table, name)
    class_ids(view.table, qi_columns(view.table, [d.name for d in data.domains]))
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile(time.process_time)
        out = prof.runcall(quality_figures, view, data)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    else:
        out = quality_figures(view, data)
    after = resource.getrusage(resource.RUSAGE_SELF)
    print({k: repr(v) for k, v in out.items()})
    print(
        f"cpu {after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime:.3f} s "
        f"(user {after.ru_utime - before.ru_utime:.3f}, sys {after.ru_stime - before.ru_stime:.3f}), "
        f"wall {time.perf_counter() - started:.3f} s, minor faults {after.ru_minflt - before.ru_minflt}, "
        f"peak RSS +{(after.ru_maxrss - before.ru_maxrss) / 1024:.0f} MiB over {before.ru_maxrss / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["capture"] and len(sys.argv) == 4:
        capture_quality_inputs(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["time"] and len(sys.argv) in (3, 4):
        time_quality_models(sys.argv[2], sys.argv[3:] == ["--profile"])
    else:
        sys.exit(__doc__)

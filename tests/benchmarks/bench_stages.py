"""CPU seconds of the read, validate, verify, evaluate (without the quality models) and risk
stages of one release, in this process (issue 43, session 20).

    .venv/bin/python -m tests.benchmarks.bench_stages SPEC CACHE.pkl

The partition and the published tables are made once and kept in CACHE.pkl, so two checkouts
(each run with its own .venv) time their stages on the same release: run them in turn, several
times, under `flock /tmp/privpub-bench.lock`. Prints one line of CPU seconds (process time: every
thread) and a digest of the privacy, utility and risk figures, equal when the figures are.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import time
from pathlib import Path

import numpy as np

from privpub.flows import pipeline
from privpub.schemas.spec import load_spec
from privpub.tasks.core.types import VerifyContext
from privpub.tasks.evaluate import evaluate
from privpub.tasks.risk import risk_settings
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.validate import load_input, validate
from privpub.tasks.verify.published import check_published


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    parser.add_argument("cache", help="a pickle of (partition, release), made on the first run")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    technique = get_technique(spec)
    cpu = time.process_time
    out = {}
    start = cpu()
    frame, _ = load_input(spec)
    out["read"] = cpu() - start
    start = cpu()
    data = validate(frame, spec, technique)
    out["validate"] = cpu() - start
    cache = Path(args.cache)
    if cache.exists():
        _, release = pickle.loads(cache.read_bytes())
    else:
        rng = np.random.default_rng(1)
        part = technique.partition(data, rng)
        release = technique.anonymize(data, part, rng)
        cache.write_bytes(pickle.dumps((part, release)))
    start = cpu()
    check_published(release, spec, technique)
    privacy = technique.verify(release, VerifyContext(data, {}))
    out["verify"] = cpu() - start
    start = cpu()
    utility = evaluate(technique, release, data, spec.evaluate.workload_seed)
    out["evaluate"] = cpu() - start
    start = cpu()
    risk = pipeline.risk_step(technique, release, data, risk_settings(spec))  # the plain driver: no lines
    out["risk"] = cpu() - start
    print(" ".join(f"{k} {v:.3f}" for k, v in out.items()), f"| sum {sum(out.values()):.3f}")
    print("digest", hashlib.sha256(repr((privacy, utility, risk)).encode()).hexdigest()[:16])


if __name__ == "__main__":
    main()

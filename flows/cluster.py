"""Where Dask work runs: a LocalCluster started by privpub, or an existing cluster ([run] address).

Secret rows travel only between the flow process and the workers. A worker may spill what it
holds to its scratch disk under memory pressure only when [run] allow_spill says so: a local
cluster then gets no memory limit at all (nothing to spill against), and an existing cluster is
checked at connection time and refused if its workers would spill.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial

from privpub.schemas.errors import ClusterError, InputError
from privpub.schemas.input import PARQUET_SUFFIXES, input_files
from privpub.schemas.spec import RunSpec
from privpub.tasks.core.executor import DaskExecutor, Executor
from privpub.tasks.validate import input_fingerprint
from privpub.tasks.validate.parted import load_on_cluster

# Dask's memory thresholds that write a worker's data to disk (fractions of its memory limit)
SPILL_KEYS = ("distributed.worker.memory.target", "distributed.worker.memory.spill")


def local_cluster_kwargs(run: RunSpec) -> dict:
    """A LocalCluster of `workers` processes, one thread each (the work is CPU-bound numpy). No
    memory limit unless spilling is allowed, hence no spilling of secret rows; no dashboard (the
    scheduler's health endpoint still listens, so it gets a free loopback port rather than the
    shared default 8787)."""
    return {
        "n_workers": run.workers or 2,
        "threads_per_worker": 1,
        "processes": True,
        "memory_limit": "auto" if run.allow_spill else 0,
        "dashboard_address": None,
        "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"},
    }


class DaskTaskRunner(DaskExecutor):
    """The run's executor for [run] task_runner = "dask": on the existing cluster at [run]
    address, else on a LocalCluster of its own, started at the first work sent. A technique's
    chunks and the rows read in parts (cluster_input) share it; it closes when the run ends."""

    def __init__(self, run: RunSpec):
        if run.address:
            with dask_client(run):  # refuses, before the run starts, a cluster that would spill
                pass
        super().__init__(partial(dask_client, run))


def dask_task_runner(run: RunSpec) -> DaskTaskRunner:
    return DaskTaskRunner(run)


def _worker_spills(dask_worker) -> bool:
    """Runs on each worker: would it write data to its scratch disk under memory pressure?"""
    manager = getattr(dask_worker, "memory_manager", None)
    if manager is None or not manager.memory_limit:
        return False
    return bool(manager.memory_target_fraction) or bool(manager.memory_spill_fraction)


def check_no_spill(client, run: RunSpec) -> None:
    if run.allow_spill:
        return
    spilling = sorted(addr for addr, spills in client.run(_worker_spills).items() if spills)
    if spilling:
        raise ClusterError(
            f"{len(spilling)} Dask worker(s) (e.g. {spilling[0]}) may spill data to disk under memory "
            "pressure, and privpub's chunks hold secret rows: start the workers with "
            f"{SPILL_KEYS[0]} and {SPILL_KEYS[1]} set to false (or --memory-limit 0), or set "
            "[run] allow_spill = true"
        )


@contextlib.contextmanager
def dask_client(run: RunSpec) -> Iterator:
    """A distributed Client for the run: the existing cluster at [run] address (checked not to
    spill unless allowed), else a LocalCluster closed on exit."""
    from distributed import Client, LocalCluster  # lazy: Dask is optional

    if run.address:
        try:
            client = Client(run.address, timeout="20s", set_as_default=False)
        except OSError as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {run.address}: {type(exc).__name__}") from None
        try:
            check_no_spill(client, run)
            yield client
        finally:
            client.close()
        return
    with LocalCluster(**local_cluster_kwargs(run)) as cluster, Client(cluster, set_as_default=False) as client:
        yield client


def uses_cluster(spec, technique) -> bool:
    """Does this release read its input and partition on a Dask cluster? ([run] task_runner =
    "dask", a technique that can (Technique.capabilities.distributed), Parquet input: a file, folder or glob.
    A CSV file or a DuckDB table is read in the flow process as before.)"""
    if spec.run.task_runner != "dask" or not technique.capabilities.distributed or not spec.dataset.input:
        return False
    try:
        files = input_files(spec)
    except (InputError, OSError):
        return False  # the in-memory path reports it
    return all(f.suffix.lower() in PARQUET_SUFFIXES for f in files)


def cluster_input(spec, technique, executor: Executor):
    """Read, validate and code the input where the run's executor works (its Dask workers): the
    input's fingerprint and the PartedData, whose parts stay there until the executor closes."""
    data = load_on_cluster(spec, executor)
    try:
        technique.check_data(data)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return input_fingerprint(spec), data

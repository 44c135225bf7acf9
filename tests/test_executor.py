"""The executors of tasks/core/executor.py: results in item order, a piece's exception raised
again in the caller, and the same results in process, on threads and on Dask worker processes."""

from __future__ import annotations

import time

import pytest

from privpub.flows.cluster import DaskTaskRunner
from privpub.schemas.spec import RunSpec
from privpub.tasks.core.executor import Executor, ThreadExecutor


def slow_square(x: int) -> int:
    time.sleep(0.01 * (5 - x % 5))  # later items finish first
    return x * x


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("chunk 3 failed")
    return x


@pytest.fixture(scope="module", params=["inprocess", "threads", "dask"])
def executor(request):
    made = {
        "inprocess": Executor,
        "threads": lambda: ThreadExecutor(3),
        "dask": lambda: DaskTaskRunner(RunSpec(task_runner="dask", workers=2)),
    }[request.param]
    with made() as ex:
        yield ex


def test_maps_in_item_order(executor):
    items = list(range(12))
    assert executor.map(slow_square, items) == [x * x for x in items]
    assert executor.map(slow_square, []) == []


def test_a_chunk_exception_reaches_the_caller(executor):
    with pytest.raises(ValueError, match="chunk 3 failed"):
        executor.map(fail_on_three, list(range(6)))
    assert executor.map(fail_on_three, [1, 2]) == [1, 2]  # still usable afterwards


def test_every_executor_gives_the_same_results():
    items = list(range(20))
    with ThreadExecutor() as threads, DaskTaskRunner(RunSpec(task_runner="dask", workers=2)) as dask:
        assert Executor().map(slow_square, items) == threads.map(slow_square, items) == dask.map(slow_square, items)

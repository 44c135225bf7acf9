"""The executors of tasks/core/executor.py: results in item order, a piece's exception raised
again in the caller, and the same results in process, on threads and on Dask worker processes."""

from __future__ import annotations

import operator
import time

import pytest

from privpub.flows.cluster import DaskTaskRunner
from privpub.schemas.spec import RunSpec
from privpub.tasks.core.executor import DaskExecutor, Executor, ThreadExecutor, as_executor


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


def add(a: int, b: int) -> int:
    return a + b


def pair(x: int) -> tuple[int, int]:
    return x, x * 10


def test_work_sent_to_handles_keeps_its_data_where_it_is(executor):
    """submit over handles, scatter, gather and as_completed: the Dask path of generalization
    writes its steps with these, and every executor gives the same values."""
    made = [executor.submit(pair, x) for x in range(5)]
    firsts = [executor.submit(operator.getitem, h, 0) for h in made]
    offset = executor.scatter(100, broadcast=True)
    shifted = [executor.submit(add, h, offset) for h in firsts]
    assert executor.gather(shifted) == [100, 101, 102, 103, 104]
    seen = {}
    for position, value in executor.as_completed([executor.submit(slow_square, x) for x in range(6)]):
        seen[position] = value
    assert seen == {x: x * x for x in range(6)}
    assert executor.gather([executor.submit(operator.getitem, executor.scatter((7, 8)), 1)]) == [8]
    assert len(executor.on_every_worker(add, 1, 2)) >= 1 and set(executor.on_every_worker(add, 1, 2)) == {3}


def test_a_submitted_exception_reaches_the_caller(executor):
    with pytest.raises(ValueError, match="chunk 3 failed"):
        executor.gather([executor.submit(fail_on_three, x) for x in range(5)])


def test_as_executor_takes_an_executor_none_or_a_client():
    ex = Executor()
    assert as_executor(ex) is ex and type(as_executor(None)) is Executor
    with DaskTaskRunner(RunSpec(task_runner="dask", workers=1)) as dask:
        wrapped = as_executor(dask.client)
        assert isinstance(wrapped, DaskExecutor) and wrapped.gather([wrapped.submit(add, 2, 3)]) == [5]
        wrapped.close()  # the caller's client stays open
        assert dask.gather([dask.submit(add, 1, 1)]) == [2]

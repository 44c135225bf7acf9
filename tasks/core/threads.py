"""Helper threads only for work large enough to pay for them (issue 43 item 4, the demo).

A step that starts helper threads hands the interpreter (the GIL) between them at every call
into numpy, Arrow or DuckDB, and on two cores each hand-over wakes a thread on the other core.
For a large table the threads save far more than that (a 1M-row publish keeps both cores busy);
for a small one they cost more than they save: the demo's publish (5,000 rows) made its main
thread wait for the interpreter about 2,300 times in 0.3 s with its threads, about 130 times
without them, and ended 70-80 ms sooner without (docs/benchmarks.md, session 26).

So a process that makes one release and ends (the CLI's entry, `keep_small_work_in_one_thread`)
runs the work of fewer than FEW_ROWS rows in the thread that asks for it; every other caller (a
long-lived server, a test, the Python API) keeps its threads whatever the size. Either way the
same calls run on the same data: only the thread differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

FEW_ROWS = 20_000  # the demo's 5,000 rows gained 80 ms; 20,000 rows 13 ms; 50,000 none
ROW_BYTES = 64  # an input file's rows counted from its size (the demo's CSV: 76 bytes a row)

# work of fewer rows than this runs in the asking thread: 0 (none) unless the process's entry asks
_ONE_THREAD_BELOW = [0]


def keep_small_work_in_one_thread() -> None:
    """From now on, in this process, work of fewer than FEW_ROWS rows runs in the thread that
    asks for it. For the process's entry of a command that makes one release and ends."""
    _ONE_THREAD_BELOW[0] = FEW_ROWS


def worth_threads(rows: int) -> bool:
    """Whether work over `rows` rows is given helper threads."""
    return rows >= _ONE_THREAD_BELOW[0]


def rows_in_bytes(size: int) -> int:
    """The rows an input file of `size` bytes is taken to hold, for `worth_threads`: a file of
    narrow rows may hold more, and then hashes in a millisecond or two in the asking thread."""
    return size // ROW_BYTES


def map_on_threads(fn: Callable[[_T], _R], items: Iterable[_T], workers: int, rows: int, name: str) -> list[_R]:
    """[fn(item) for item in items], on `workers` threads named `name` when `rows` rows are
    worth them, in this thread otherwise; results in the items' order either way."""
    if not worth_threads(rows):
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name) as pool:
        return list(pool.map(fn, items))


@contextmanager
def beside(rows: int, name: str) -> Iterator[Callable[..., Future[Any]]]:
    """A `submit(fn, *args)` whose call runs on a thread of its own (named `name`) while the
    caller goes on, when `rows` rows are worth it; else at once, in this thread (its result or
    error then waits in the future). The block ends once the call has."""
    if not worth_threads(rows):
        yield done
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=name) as pool:
        yield pool.submit


def done(fn: Callable[..., _R], *args: Any) -> Future[_R]:
    """fn(*args) called now; its result, or its error, in a finished future."""
    future: Future[_R] = Future()
    future.set_running_or_notify_cancel()
    try:
        future.set_result(fn(*args))
    except Exception as exc:  # raised again where the result is taken, as from a thread
        future.set_exception(exc)
    return future

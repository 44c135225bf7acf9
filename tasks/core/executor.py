"""Where a step's chunks run: one executor per run, chosen from the spec's [run] section.

Every executor maps a picklable function over picklable items and returns the results in item
order, whichever piece finished first; a piece's exception is raised again in the caller. The
output of a step must not depend on the executor (tests/test_executor.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from typing import Any


class Executor:
    """In this process, one item after the other; the base of the others."""

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        return [fn(item) for item in items]

    def close(self) -> None:
        """Release workers, threads or connections (none here)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ThreadExecutor(Executor):
    """Threads of this process (numpy and Arrow release the GIL in the heavy parts)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="privpub-chunk")
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class DaskExecutor(Executor):
    """Processes of a Dask cluster. `connect` opens the cluster's distributed Client (and closes
    it, and a cluster it started, on exit); it is called at the first map, so a run whose steps
    map nothing starts no cluster."""

    def __init__(self, connect: Callable[[], AbstractContextManager[Any]]):
        self._connect = connect
        self._stack: ExitStack | None = None
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._stack = ExitStack()
            self._client = self._stack.enter_context(self._connect())
        return self._client

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        # pure=False: two equal chunks are still two pieces of work (and never a cached result)
        return list(self.client.gather(self.client.map(fn, items, pure=False)))

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self._client = None

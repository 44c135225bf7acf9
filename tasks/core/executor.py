"""Where a step's work runs: one executor per run, chosen from the spec's [run] section.

Two ways to use it, the same for every executor:
- `map(fn, items)`: fn over independent chunks, results in item order (a technique's chunks);
- `submit`, `gather`, `scatter`, `as_completed`: work on data that stays where it was made (the
  Dask path of generalization keeps each input partition on a worker and sends the work to it).
  A handle is what `submit` and `scatter` return: a Dask future, or here, in this process, the
  value itself, so the same code runs in process, in tests, and on a cluster.
A piece's exception is raised again in the caller. The output of a step must not depend on the
executor (tests/test_executor.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Any


class Executor:
    """In this process, one item after the other; the base of the others. Handles are values."""

    def map(self, fn: Callable[..., Any], items: list[Any]) -> list[Any]:
        return [fn(item) for item in items]

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) where the work runs; args may be handles of this executor."""
        return fn(*args)

    def gather(self, handles: list[Any]) -> list[Any]:
        return list(handles)

    def scatter(self, value: Any, broadcast: bool = False) -> Any:
        """`value` placed where the work runs (on every worker with broadcast), as a handle."""
        return value

    def as_completed(self, handles: list[Any]) -> Iterator[tuple[int, Any]]:
        """(position in `handles`, value) pairs in the order the work finishes."""
        yield from enumerate(handles)

    def release(self, handle: Any) -> None:
        """Forget a handle's value where it is kept (nothing to do here)."""

    def on_every_worker(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """fn(*args) once on every worker (here: this process)."""
        return [fn(*args)]

    def close(self) -> None:
        """Release workers, threads or connections (none here)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ThreadExecutor(Executor):
    """Threads of this process for `map` (numpy and Arrow release the GIL in the heavy parts)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None

    def map(self, fn: Callable[..., Any], items: list[Any]) -> list[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="privpub-chunk")
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class DaskExecutor(Executor):
    """Processes of a Dask cluster. `connect` opens the cluster's distributed Client (and closes
    it, and a cluster it started, on exit); it is called at the first use, so a run that sends
    no work starts no cluster."""

    def __init__(self, connect: Callable[[], AbstractContextManager[Any]]):
        self._connect = connect
        self._stack: ExitStack | None = None
        self._client: Any = None

    @classmethod
    def of_client(cls, client: Any) -> DaskExecutor:
        """An executor on a distributed Client the caller opened (and closes)."""
        return cls(lambda: nullcontext(client))

    @property
    def client(self) -> Any:
        if self._client is None:
            self._stack = ExitStack()
            self._client = self._stack.enter_context(self._connect())
        return self._client

    def map(self, fn: Callable[..., Any], items: list[Any]) -> list[Any]:
        # pure=False: two equal chunks are still two pieces of work (and never a cached result)
        return list(self.client.gather(self.client.map(fn, items, pure=False)))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def gather(self, handles: list[Any]) -> list[Any]:
        return list(self.client.gather(list(handles)))

    def scatter(self, value: Any, broadcast: bool = False) -> Any:
        if broadcast:
            return self.client.scatter(value, broadcast=True)
        return self.client.scatter(value, hash=False)

    def as_completed(self, handles: list[Any]) -> Iterator[tuple[int, Any]]:
        from distributed import as_completed  # lazy: Dask is optional

        position = {future: i for i, future in enumerate(handles)}
        for future in as_completed(list(handles), loop=self.client.loop):  # type: ignore[no-untyped-call]
            yield position[future], future.result()

    def release(self, handle: Any) -> None:
        handle.release()

    def on_every_worker(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        return list(self.client.run(fn, *args).values())

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self._client = None


def as_executor(where: Any) -> Executor:
    """An executor from what a caller holds: an executor, None (this process), or a distributed
    Client it opened itself."""
    if where is None:
        return Executor()
    if isinstance(where, Executor):
        return where
    return DaskExecutor.of_client(where)

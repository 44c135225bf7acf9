"""Steps of one publish that run beside its main line (issue 43: a million rows in 4 s on two
cores). Writing the published files, evaluating utility, drawing the evaluation's workload and
the series composition check read what is final already and write nothing the main line reads,
so the plain driver starts each on a thread of its own and takes its result where the main line
needs it; numpy, Arrow and DuckDB let go of the interpreter while they work, so the two cores
both work.

Every step started is waited for before the run ends, refused or failed included: no thread
outlives its run, and what a step made that nobody took (staged files) is handed back to be
discarded. A step's error is raised where its result is taken, or, when nobody takes it, by
nothing: the run has failed or been refused already for its own reason.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from privpub.tasks.core.threads import done


class StepFuture(Future):
    """A step's future whose result (or error) is given once its thread has ended too."""

    thread: threading.Thread | None = None

    def result(self, timeout: float | None = None) -> Any:
        try:
            return super().result(timeout)
        finally:
            self._join()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            return super().exception(timeout)
        finally:
            self._join()

    def _join(self) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()


def on_a_thread(call: Callable[[], Any]) -> Future:
    """`call()` started on a new thread, in a copy of this context (the run's driver, its
    progress lines and the attempt's audit token follow it)."""
    context = contextvars.copy_context()
    future = StepFuture()
    future.set_running_or_notify_cancel()

    def body() -> None:
        try:
            future.set_result(context.run(call))
        except BaseException as exc:  # raised again where the result is taken
            future.set_exception(exc)

    future.thread = threading.Thread(target=body, name="privpub-beside", daemon=True)
    future.thread.start()
    return future


def done_now(call: Callable[[], Any]) -> Future:
    """`call()` run now, its result (or error) in a finished future: a step "beside" under a
    driver that runs steps one after the other (tasks/core/threads.py `done`)."""
    return done(call)


class Beside:
    """The steps a run started beside its main line, by name."""

    def __init__(self) -> None:
        self._started: dict[str, Future] = {}

    def start(self, name: str, future: Future) -> None:
        assert name not in self._started, f"step {name} started twice"
        self._started[name] = future

    def started(self, name: str) -> bool:
        return name in self._started

    def take(self, name: str) -> Any:
        """The step's result (waited for), or its error raised here; the step is the taker's now."""
        return self._started.pop(name).result()

    def close(self, unclaimed: Callable[[str, Any], None]) -> None:
        """Wait for every step nobody took; `unclaimed(name, result)` for each that succeeded."""
        while self._started:
            name, future = self._started.popitem()
            if future.exception() is None:
                unclaimed(name, future.result())

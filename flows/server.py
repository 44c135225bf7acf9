"""Which Prefect API a privpub command talks to (the one server story).

1. PREFECT_API_URL is set: that server (e.g. `prefect server start`, or the service's).
2. Otherwise the privpub service (`privpub server start`) when its home folder's server.json
   names a server that answers its health check. A release asks for a server only with
   `--server` / `[run] server = true` (flows/run.py `recording_server`): else it runs in process.
3. Otherwise a temporary server of the command's own: uvicorn serving Prefect's API on a free
   loopback port, started as early as possible (its start-up overlaps reading and validating
   the input) and bound to the command's life by the kernel: the child asks for SIGKILL when its
   parent dies (PR_SET_PDEATHSIG), so no kill of privpub, not even SIGKILL, leaves it running.

Prefect's own ephemeral server is not used: it is a plain child process that outlives a killed
parent (issue 12: ten kills left ten servers of about 220 MB each).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path

from privpub.flows.run import profile_api_url
from privpub.flows.service import running_service

# The child sets its parent-death signal, checks its parent is still the one that started it
# (it may have died before prctl), then becomes uvicorn. PDEATHSIG survives execve.
_LAUNCH = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "os.getppid() == int(sys.argv[1]) or os._exit(1)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TemporaryServer:
    """A Prefect API server that lives exactly as long as this process (or until stop())."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        # the server's output, in a file with no name: nothing is left on disk when this process
        # is killed (read back only when the server fails to start)
        self._log = tempfile.TemporaryFile(prefix="privpub-prefect-", suffix=".log")
        # where Prefect is installed, without importing it: the server starts before this
        # process pays for its own imports
        spec = find_spec("prefect")
        assert spec is not None and spec.origin is not None  # a dependency of privpub
        prefect_dir = Path(spec.origin).parent

        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        home = Path(env.get("PREFECT_HOME", Path.home() / ".prefect"))
        home.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(home, 0o700)  # its database records flow runs: owner-only
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCH,
                str(os.getpid()),
                "-m",
                "uvicorn",
                "--app-dir",
                str(prefect_dir.parent),
                "--factory",
                "prefect.server.api.server:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "error",
                "--lifespan",
                "on",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )

    def wait_ready(self, timeout: float | None = None) -> str:
        import httpx  # lazy: the server starts before this process pays for Prefect's imports

        timeout = timeout or float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", 90))
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/health").status_code == 200:
                        return self.url
                time.sleep(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.seek(0)
        tail = self._log.read().decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        self.stop()
        raise RuntimeError(
            f"the temporary Prefect server did not start ({tail[0][:200]}); set PREFECT_API_URL to use a running server"
        )

    def stop(self) -> None:
        # SIGKILL, not a graceful stop: nothing of this server is kept (every request of the run
        # has been answered, and its SQLite database survives a kill, as after PR_SET_PDEATHSIG),
        # and uvicorn's lifespan shutdown would add about 0.3 s to every command
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@contextlib.contextmanager
def prefect_api() -> Iterator[Callable[[], str]]:
    """Yields `ready()`, which blocks until the API is up and returns its URL. Start this before
    slow local work (reading the input) and call ready() when Prefect is first needed."""
    url = os.environ.get("PREFECT_API_URL") or profile_api_url()  # Prefect reads either itself
    if url:
        yield lambda: url
        return
    service = running_service()
    if service:
        with _api_settings(service):
            try:
                yield lambda: service
            finally:
                _drain_prefect_logs()
        return
    server = TemporaryServer()
    state: dict = {}

    def ready() -> str:
        if "settings" not in state:
            from prefect.settings import PREFECT_API_URL, temporary_settings  # lazy: as httpx above

            server.wait_ready()
            state["settings"] = temporary_settings(updates={PREFECT_API_URL: server.url})
            state["settings"].__enter__()
        return server.url

    try:
        yield ready
    finally:
        if "settings" in state:
            _drain_prefect_logs()
            state["settings"].__exit__(None, None, None)
        server.stop()


@contextlib.contextmanager
def _api_settings(url: str) -> Iterator[None]:
    from prefect.settings import PREFECT_API_URL, temporary_settings  # lazy: as httpx above

    with temporary_settings(updates={PREFECT_API_URL: url}):
        yield


def _drain_prefect_logs() -> None:
    """Send buffered run logs and events to the server before it stops (else they are lost and
    Prefect's exit handlers wait on a server that is gone)."""
    with contextlib.suppress(Exception):
        from prefect.logging.handlers import APILogWorker  # lazy: only when Prefect is loaded

        APILogWorker.drain_all(timeout=5)
    with contextlib.suppress(Exception):
        from prefect.events.worker import EventsWorker  # lazy: only when Prefect is loaded

        EventsWorker.drain_all(timeout=5)

"""`privpub server start|stop|status`: the release service as one command.

start: a Prefect server (`prefect server start --host 127.0.0.1 --port N`, its UI calling the same
port), the served deployments (deployments/serve.py) and the report server (flows/report_server.py,
on port N+1 when free, else any free port), each detached in a session of its own so they outlive
the terminal. Everything lives in the home folder (--home, else PRIVPUB_HOME, else ~/.privpub),
never in the working directory:

    <home>/service.toml    deployment settings (spec, serial_spec, cron, timezone; deployments/serve.py)
    <home>/server.json     what is running: pids, port, URLs (written by start, removed by stop)
    <home>/prefect/        PREFECT_HOME: the server's database of flow runs and logs
    <home>/reports/        <release_id>.html: a link to each report committed while the service ran
    <home>/demo/           the demo data and specs, their state file and releases (when no spec is set)
    <home>/logs/           the server's, serve's and the report server's output

stop: serve first, then the server (a server stopped first leaves serve's shutdown hanging), then
the report server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from privpub.schemas.command import advice
from privpub.schemas.errors import CliError, SpecError
from privpub.schemas.spec import check_known_keys

DEFAULT_PORT = 4200
# which runs the service records (issue 42): a CLI publish runs in its own process unless asked
REPORTS_HERE = (
    "runs recorded here: the deployments' (UI, schedule) always; a CLI publish or serial only "
    "with --server or [run] server = true (else it runs in its own process)"
)
DEPLOYMENTS = ("publish/monthly-census", "serial/monthly-serial")
SERVICE_TOML = """# privpub service settings (read by deployments/serve.py when `privpub server start` runs).
# Relative paths are taken from this folder. Each key can be overridden by an environment
# variable: PRIVPUB_SPEC, PRIVPUB_SERIAL_SPEC, PRIVPUB_CRON, PRIVPUB_TIMEZONE.
# spec = "census.toml"          # the monthly publish's spec (default: the demo, made in demo/)
# serial_spec = "serial.toml"   # the serial series' spec (default: the serial demo)
cron = "0 2 1 * *"              # 02:00 on the 1st of every month
timezone = "UTC"                # the cron's time zone, an IANA name such as "Europe/Vienna"
"""


def service_home(home: str | os.PathLike | None = None) -> Path:
    """The service's folder: `home`, else PRIVPUB_HOME, else ~/.privpub."""
    return Path(home or os.environ.get("PRIVPUB_HOME") or Path.home() / ".privpub").expanduser().resolve()


DEFAULT_CRON = "0 2 1 * *"
SETTINGS = {
    "spec": "PRIVPUB_SPEC",
    "serial_spec": "PRIVPUB_SERIAL_SPEC",
    "cron": "PRIVPUB_CRON",
    "timezone": "PRIVPUB_TIMEZONE",
}


def service_settings(home: Path | None = None) -> dict:
    """service.toml's keys, each overridden by its environment variable; unknown keys refused
    (a misspelled `timezon` must not silently schedule in UTC)."""
    home = home or service_home()
    path = home / "service.toml"
    data = tomllib.loads(path.read_text()) if path.is_file() else {}
    check_known_keys(f"{path}:", data, list(SETTINGS))
    settings = {key: os.environ.get(env) or data.get(key) for key, env in SETTINGS.items()}
    settings["cron"] = settings["cron"] or DEFAULT_CRON
    settings["timezone"] = settings["timezone"] or "UTC"
    try:
        ZoneInfo(str(settings["timezone"]))
    except (ValueError, ZoneInfoNotFoundError):
        raise SpecError(
            f'{path}: timezone {settings["timezone"]!r} is not a time zone name (an IANA name such as "Europe/Vienna")'
        ) from None
    for key in ("spec", "serial_spec"):
        if settings[key]:
            settings[key] = str((home / Path(str(settings[key])).expanduser()).resolve())
    return settings


def healthy(api_url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def read_record(home: Path) -> dict | None:
    try:
        return json.loads((home / "server.json").read_text())
    except (OSError, ValueError):
        return None


def service_reports_url(api_url: str, home: Path | None = None) -> str | None:
    """The report server's URL when `api_url` is this home's running service (a flow run of the
    service, or a CLI run that uses it), else None (another server: reports stay file:// links)."""
    record = read_record(home or service_home())
    if record and record.get("api_url") == api_url.rstrip("/") and record.get("reports_url"):
        return record["reports_url"]
    return None


def running_service(home: Path | None = None) -> str | None:
    """The API URL of this home's service when it answers its health check, else None."""
    record = read_record(home or service_home())
    if record and record.get("api_url") and healthy(record["api_url"]):
        return record["api_url"]
    return None


# --- processes --------------------------------------------------------------------------------


def _start_time(pid: int) -> str | None:
    """The kernel's start time of a process (field 22 of /proc/PID/stat): with the pid it names
    the process, so a recycled pid is never signalled."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def carries_home(pid: int, home: Path) -> bool:
    try:
        return f"PRIVPUB_HOME={home}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _stop_group(pid: int, started: str | None, home: Path, name: str, grace: float = 20.0) -> None:
    """SIGTERM to the process group a detached process leads, SIGKILL after `grace` seconds.
    A leader that is not the one recorded (gone, or its pid reused) leaves the group to be
    stopped only if its members carry this home folder in their environment."""
    if _start_time(pid) != started or started is None:
        if not any(carries_home(member, home) for member in group_members(pid)):
            return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not group_members(pid):
                return
            time.sleep(0.2)
        if sig == signal.SIGTERM:
            print(f"privpub: {name} did not stop within {grace:.0f} s; killing it", file=sys.stderr)


def _port_free(port: int) -> bool:
    """Nobody listens on the port. SO_REUSEADDR as the servers set it: the closed connections a
    stopped service leaves in TIME_WAIT must not hold its port for a minute after `server stop`."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _reports_port(port: int) -> int:
    """The report server's port: the one after the UI's when free, else any free one."""
    if port < 65535 and _port_free(port + 1):
        return port + 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    """The report server is up: it answers (with 404 for a path that names no report)."""
    try:
        with urllib.request.urlopen(f"{url}/reports/", timeout=1.0):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _prefect_command() -> list[str]:
    beside = Path(sys.executable).with_name("prefect")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("prefect")
    if not found:
        raise CliError("the prefect command is not installed (run `make setup`)")
    return [found]


def _environment(home: Path, port: int) -> dict[str, str]:
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT__")}
    env.update(
        {
            "PRIVPUB_HOME": str(home),
            "PREFECT_HOME": str(home / "prefect"),
            "PREFECT_API_URL": api,
            "PREFECT_UI_API_URL": api,  # the UI calls this port, not 4200
            "PREFECT_SERVER_API_HOST": "127.0.0.1",
            "PREFECT_SERVER_API_PORT": str(port),
            "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PY_KEY_VALUE_DISABLE_BEARTYPE": "true",
            "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "false",
        }
    )
    return env


def _spawn(command: list[str], env: dict, home: Path, log_name: str) -> subprocess.Popen:
    log = open(home / "logs" / log_name, "ab")  # noqa: SIM115 (the child keeps it)
    with log:
        return subprocess.Popen(
            command,
            env=env,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"


def _deployments_ready(api: str) -> bool:
    """Both deployments registered and polled by serve (status READY)."""
    for name in DEPLOYMENTS:
        try:
            with urllib.request.urlopen(f"{api}/deployments/name/{name}", timeout=2) as response:
                if json.loads(response.read()).get("status") != "READY":
                    return False
        except (OSError, ValueError):
            return False
    return True


# --- the commands ----------------------------------------------------------------------------


def start(home: Path, port: int, timeout: float = 180.0) -> int:
    record = read_record(home)
    if record and healthy(record["api_url"]):
        print(f"privpub service already running: UI {record['url']} (home {home})")
        if record.get("reports_url"):
            print(f"  reports: {record['reports_url']}/reports/<release id>")
        print(f"  {REPORTS_HERE}")
        return 0
    if record:  # a stale record: whatever is left of it goes first
        stop(home, quiet=True)
    for folder in (home, home / "logs", home / "prefect"):
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)  # flow runs, logs and state: owner-only
    if not (home / "service.toml").exists():
        (home / "service.toml").write_text(SERVICE_TOML)
    service_settings(home)  # a bad service.toml fails here, with one line, before anything starts
    if not _port_free(port):
        raise CliError(f"port {port} on 127.0.0.1 is in use; choose another with --port")
    env = _environment(home, port)
    api, url = env["PREFECT_API_URL"], f"http://127.0.0.1:{port}"
    server = _spawn(
        [*_prefect_command(), "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, home, "server.log"
    )
    record = {
        "port": port,
        "url": url,
        "api_url": api,
        "home": str(home),
        "server_pid": server.pid,
        "server_started": _start_time(server.pid),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _write_record(home, record)
    deadline = time.monotonic() + timeout
    _wait(lambda: healthy(api), server, deadline, home, "the Prefect server", "server.log")
    reports_port = _reports_port(port)
    reports = _spawn(
        [sys.executable, "-m", "privpub.flows.report_server", "--home", str(home), "--port", str(reports_port)],
        env,
        home,
        "reports.log",
    )
    reports_url = f"http://127.0.0.1:{reports_port}"
    record.update(reports_url=reports_url, reports_pid=reports.pid, reports_started=_start_time(reports.pid))
    _write_record(home, record)
    _wait(lambda: _answers(reports_url), reports, deadline, home, "the report server", "reports.log")
    serve = _spawn([sys.executable, "-m", "privpub.deployments.serve"], env, home, "serve.log")
    record.update(serve_pid=serve.pid, serve_started=_start_time(serve.pid))
    _write_record(home, record)
    _wait(lambda: _deployments_ready(api), serve, deadline, home, "serving the deployments", "serve.log")
    print(f"privpub service running: UI {url}")
    print(f"  reports: {reports_url}/reports/<release id>")
    print(f"  deployments: {', '.join(DEPLOYMENTS)}; settings {home / 'service.toml'}")
    print(f"  {REPORTS_HERE}")
    print(f"  home {home}; logs {home / 'logs'}; stop with `{advice('server', 'stop', '--home', home)}`")
    return 0


def _write_record(home: Path, record: dict) -> None:
    path = home / "server.json"
    path.with_suffix(".tmp").write_text(json.dumps(record, indent=2) + "\n")
    path.with_suffix(".tmp").replace(path)


def _wait(ready, proc: subprocess.Popen, deadline: float, home: Path, what: str, log: str) -> None:
    while time.monotonic() < deadline:
        if ready():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    stop(home, quiet=True)
    state = "exited" if proc.poll() is not None else "timed out"
    raise CliError(f"{what} {state} ({_tail(home / 'logs' / log)}); see {home / 'logs' / log}")


def stop(home: Path, quiet: bool = False) -> int:
    record = read_record(home)
    if record is None:
        if not quiet:
            print(f"privpub service not running (no {home / 'server.json'})")
        return 0
    # serve first: with the server gone, serve's shutdown hangs on its API calls
    for key, name in (("serve", "serve"), ("server", "the Prefect server"), ("reports", "the report server")):
        if record.get(f"{key}_pid"):
            _stop_group(record[f"{key}_pid"], record.get(f"{key}_started"), home, name)
    (home / "server.json").unlink(missing_ok=True)
    if not quiet:
        print(f"privpub service stopped (home {home})")
    return 0


def status(home: Path) -> int:
    record = read_record(home)
    if record is None:
        print(f"privpub service not running (no {home / 'server.json'})")
        return 1
    if not healthy(record["api_url"]):
        print(
            f"privpub service not answering at {record['url']} (home {home}); "
            f"`{advice('server', 'stop', '--home', home)}` clears what is left"
        )
        return 1
    serving = "deployments served" if _deployments_ready(record["api_url"]) else "deployments NOT served"
    print(f"privpub service running: UI {record['url']}, API {record['api_url']}; {serving}")
    if record.get("reports_url"):
        print(f"  reports: {record['reports_url']}/reports/<release id>")
    print(
        f"  home {home}; server pid {record.get('server_pid')}, serve pid {record.get('serve_pid')}, "
        f"report server pid {record.get('reports_pid')}, since {record.get('started_at')}"
    )
    return 0


def command(args) -> int:
    home = service_home(getattr(args, "home", None))
    if args.server_command == "start":
        return start(home, args.port)
    if args.server_command == "stop":
        return stop(home)
    return status(home)

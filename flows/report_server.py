"""The release service's report server: each release's report.html over HTTP, read-only.

`privpub server start` runs it beside the Prefect server (flows/service.py), so the link in a
flow run's "release-report" artifact opens in the browser that shows the UI (a file:// link
does not). It serves one route, `GET /reports/<release_id>`, and nothing else: no listing, no
other file, every other path 404.

It never opens the DuckDB state (a read-only connection blocks writers). It finds reports
through a registry in the service home: after each commit made while the service runs, the
flow links `<home>/reports/<release_id>.html` to the release's report.html (`register_report`),
so a report rewritten by `privpub report` is served as rewritten.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# what a release id looks like (state/store.py: "<series>-<sequence>-<token>"); anything else is
# never looked up, so no path reaches the file system but "<home>/reports/<id>.html"
RELEASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}-[0-9]{4,}-[0-9a-f]{6}")
ROUTE = re.compile(r"/reports/(?P<release_id>[^/?#]+)")
REPORT_FILE = "report.html"


def registry(home: Path) -> Path:
    return home / "reports"


def register_report(home: Path, release_id: str, report: Path) -> Path | None:
    """Link `<home>/reports/<release_id>.html` to `report` (created beside, then os.replace: a
    reader sees the old link or the new one). None when the id is not one the server serves."""
    if not RELEASE_ID.fullmatch(release_id):
        return None
    folder = registry(home)
    folder.mkdir(mode=0o700, exist_ok=True)
    link = folder / f"{release_id}.html"
    temporary = folder / f".{release_id}.{os.getpid()}.tmp"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(Path(report).resolve())
    os.replace(temporary, link)
    return link


def registered_report(home: Path, release_id: str) -> Path | None:
    """The report file a release id names, or None: an id of the wrong shape, no link, or a link
    to anything but an existing file called report.html."""
    if not RELEASE_ID.fullmatch(release_id):
        return None
    target = (registry(home) / f"{release_id}.html").resolve()
    return target if target.name == REPORT_FILE and target.is_file() else None


class ReportHandler(BaseHTTPRequestHandler):
    home: Path  # set on the subclass made by make_server
    server_version = "privpub-reports"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        route = ROUTE.fullmatch(self.path)
        report = registered_report(self.home, route["release_id"]) if route else None
        if report is None:
            self.send_error(HTTPStatus.NOT_FOUND, "no such report")
            return
        try:
            handle = report.open("rb")
        except OSError:
            self.send_error(HTTPStatus.NOT_FOUND, "no such report")
            return
        with handle:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(os.fstat(handle.fileno()).st_size))
            self.send_header("Cache-Control", "no-cache")  # `privpub report` may rewrite it
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            shutil.copyfileobj(handle, self.wfile)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's signature)
        pass  # no access log: the service's logs hold what the flow runs say


def make_server(home: Path, port: int) -> ThreadingHTTPServer:
    """The report server of `home` bound to 127.0.0.1:`port` (0: any free port)."""
    handler = type("Handler", (ReportHandler,), {"home": Path(home).resolve()})
    return ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve_reports(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="serve the release service's reports (read-only)")
    parser.add_argument("--home", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    with make_server(Path(args.home), args.port) as server:
        server.serve_forever()


if __name__ == "__main__":
    serve_reports()

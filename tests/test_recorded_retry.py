"""A recorded run's REST calls are sent again when a loaded Prefect server answers 5xx or 429
(flows/recorded.py ServerApi): a CI run once failed a `publish --server` on one such answer."""

from __future__ import annotations

import json
import threading
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from privpub.flows import recorded


def _server(statuses: list[int]):
    """A local server answering each request with the next status of `statuses` (the last one
    repeated), a JSON body on 200; the request paths it saw."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(self.path)
            status = statuses[min(len(seen) - 1, len(statuses) - 1)]
            body = json.dumps({"id": "run-1"}).encode() if status == 200 else b"locked"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture(autouse=True)
def _no_pauses(monkeypatch):
    monkeypatch.setattr(recorded, "PAUSES", (0.0, 0.0))


@pytest.mark.parametrize("status", [503, 500, 429])
def test_a_busy_answer_is_sent_again_until_it_succeeds(status):
    server, seen = _server([status, status, 200])
    try:
        answer = recorded.ServerApi(f"http://127.0.0.1:{server.server_port}/api").call("POST", "/flows/", {"name": "x"})
    finally:
        server.shutdown()
    assert answer == {"id": "run-1"}
    assert seen == ["/api/flows/"] * 3


def test_a_server_busy_at_every_attempt_fails_after_the_last_one():
    server, seen = _server([503])
    try:
        with pytest.raises(urllib.error.HTTPError):
            recorded.ServerApi(f"http://127.0.0.1:{server.server_port}/api").call("POST", "/flows/", {})
    finally:
        server.shutdown()
    assert len(seen) == recorded.ATTEMPTS == 3


@pytest.mark.parametrize("status", [400, 404, 422])
def test_a_refusal_is_not_sent_again(status):
    server, seen = _server([status, 200])
    try:
        with pytest.raises(urllib.error.HTTPError):
            recorded.ServerApi(f"http://127.0.0.1:{server.server_port}/api").call("POST", "/flow_runs/", {})
    finally:
        server.shutdown()
    assert seen == ["/api/flow_runs/"]

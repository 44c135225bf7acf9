"""The release service's report server (flows/report_server.py): reports only, read-only."""

from __future__ import annotations

import http.client
import threading

import pytest

from privpub.flows.report_server import RELEASE_ID, make_server, register_report, registered_report

RELEASE = "census-0003-a1b2c3"


@pytest.fixture
def served(tmp_path):
    """A service home with one registered report, its server on a free port, and a GET."""
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "releases" / RELEASE
    folder.mkdir(parents=True)
    (folder / "report.html").write_text(f"<html><title>{RELEASE}</title></html>")
    (folder / "table.parquet").write_bytes(b"PAR1 not a report")
    (tmp_path / "secret.txt").write_text("not to be served")
    assert register_report(home, RELEASE, folder / "report.html") == home / "reports" / f"{RELEASE}.html"
    server = make_server(home, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def get(path: str, method: str = "GET") -> tuple[int, str, str]:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        connection.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        body = response.read().decode(errors="replace")
        connection.close()
        return response.status, response.getheader("Content-Type") or "", body

    yield home, folder, get
    server.shutdown()
    server.server_close()


def test_serves_a_registered_report_as_html(served):
    home, folder, get = served
    status, kind, body = get(f"/reports/{RELEASE}")
    assert status == 200 and kind == "text/html; charset=utf-8"
    assert body == (folder / "report.html").read_text() and RELEASE in body


def test_a_rewritten_report_is_served_as_rewritten(served):
    """`privpub report` replaces report.html; the link follows the path, not the old file."""
    home, folder, get = served
    (folder / "report.new").write_text("<html>rewritten</html>")
    (folder / "report.new").replace(folder / "report.html")
    assert get(f"/reports/{RELEASE}")[2] == "<html>rewritten</html>"


@pytest.mark.parametrize(
    "path",
    [
        "/reports/census-0004-a1b2c3",  # the right shape, never registered
        "/reports/../secret.txt",
        "/reports/..%2fsecret.txt",
        "/reports/%2e%2e/secret.txt",
        f"/reports/{RELEASE}/../{RELEASE}",
        f"/reports/{RELEASE}/table.parquet",
        f"/reports/{RELEASE}.html",
        f"/reports/{RELEASE}?download=1",
        "/reports/",
        "/reports",
        "/",
        "/secret.txt",
        f"/{RELEASE}",
        f"/reports/{RELEASE}/",
        f"/reports/{RELEASE}%00",
    ],
)
def test_anything_else_is_not_found(served, path):
    _, _, get = served
    status, _, body = get(path)
    assert status == 404
    assert RELEASE not in body.replace(path, "")  # neither listed nor leaked


def test_never_lists_the_registry(served):
    home, _, get = served
    for path in ("/reports/", "/reports", "/reports/.", "/reports/.."):
        status, _, body = get(path)
        assert status == 404 and f"{RELEASE}.html" not in body


def test_only_get_is_answered(served):
    _, _, get = served
    assert get(f"/reports/{RELEASE}", method="POST")[0] == 501
    assert get(f"/reports/{RELEASE}", method="PUT")[0] == 501


def test_a_link_to_anything_but_a_report_is_not_served(served, tmp_path):
    """Only a file called report.html is served, whatever a link in the registry names."""
    home, folder, get = served
    (home / "reports" / "census-0009-ffffff.html").symlink_to(tmp_path / "secret.txt")
    (home / "reports" / "census-0010-ffffff.html").symlink_to(folder)
    assert get("/reports/census-0009-ffffff")[0] == 404
    assert get("/reports/census-0010-ffffff")[0] == 404
    assert registered_report(home, "census-0009-ffffff") is None


def test_register_refuses_an_id_it_would_not_serve(tmp_path):
    report = tmp_path / "report.html"
    report.write_text("x")
    bad_ids = ("../census-0001-abcdef", "census/../../x-0001-abcdef", "census 0001", ".census-0001-abcdef", "")
    for bad in bad_ids:
        assert register_report(tmp_path, bad, report) is None
    assert not (tmp_path / "reports").exists()
    assert register_report(tmp_path, "census-v2.1-0001-abcdef", report) is not None


def test_registering_again_replaces_the_link(tmp_path):
    old, new = tmp_path / "a" / "report.html", tmp_path / "b" / "report.html"
    for path in (old, new):
        path.parent.mkdir()
        path.write_text(str(path))
    register_report(tmp_path, RELEASE, old)
    link = register_report(tmp_path, RELEASE, new)
    assert link is not None and link.resolve() == new.resolve()
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [f"{RELEASE}.html"]  # no temporary left


@pytest.mark.parametrize(
    "release_id, ok",
    [
        ("census-0001-abcdef", True),
        ("census-serial-12345-0a1b2c", True),
        ("census-0001-abcdeg", False),  # not hex
        ("census-001-abcdef", False),  # sequences have four digits at least
        ("census-0001-abcdef0", False),
        ("-0001-abcdef", False),
        ("census-0001-abcdef/", False),
        ("census/../../x-0001-abcdef", False),  # a path, not an id
        ("census\\..\\x-0001-abcdef", False),
        ("census-0001-abcdef\n", False),
    ],
)
def test_release_id_shape(release_id, ok):
    assert (RELEASE_ID.fullmatch(release_id) is not None) is ok

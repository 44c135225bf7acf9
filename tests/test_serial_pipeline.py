"""Serial releases through the flow, the store and `privpub serial` / `privpub verify`."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from privpub.flows.reverify import reverify
from privpub.flows.serial import serial_flow
from privpub.schemas.errors import StaleHistory
from privpub.state.store import Store, stage_tables
from privpub.tasks.demo_data import census
from tests.helpers import write_spec
from tests.test_cli import run

SERIAL = 'strategy = "constant-ratio"\nreleases = 5\ntransient = 0.2'


def snapshot(folder, frame):
    frame.to_csv(folder / "census.csv", index=False)


def evolve(frame, seed):
    """The paper's protocol in small: 20% new people, 20% changed sensitive values."""
    rng = np.random.default_rng(seed)
    new = census(len(frame) // 5, seed=seed)
    new["pid"] = new["pid"] + frame["pid"].max()
    out = frame.copy()
    change = rng.choice(len(out), size=len(out) // 5, replace=False)
    out.loc[change, "occupation"] = rng.choice(out["occupation"].to_numpy(), size=len(change))
    return __import__("pandas").concat([out, new], ignore_index=True)


def test_two_serial_releases_keep_the_global_guarantee(prefect_server, tmp_path):
    frame = census(500, seed=4)
    snapshot(tmp_path, frame)
    spec = write_spec(tmp_path, technique="serial", k=None, l=2, seed=1, extra=SERIAL)
    spec.write_text(spec.read_text().replace("k = 2\n", ""))
    first = serial_flow(spec_path=str(spec))
    snapshot(tmp_path, evolve(frame, 5))
    second = serial_flow(spec_path=str(spec))
    store = Store(tmp_path / "privpub.duckdb")
    assert store.history().release_id.tolist() == [first, second]
    assert store.private(second)["release"] == 2
    for rid in (first, second):
        ok, lines = reverify(tmp_path / "privpub.duckdb", rid)
        assert ok, lines
        worst = [l for l in lines if "serial-global" in l]
        assert worst, lines
        value = Fraction(worst[0].split(": ")[1].split(" ")[0])
        assert value <= Fraction(1, 2)


def test_commit_refuses_a_release_computed_from_stale_history(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    kwargs = dict(
        series="s",
        technique="serial",
        parameters={},
        spec={},
        seed=1,
        input_fingerprint="f",
        rows_in=1,
        privacy=[],
        utility={},
        private={},
        info={},
        actor="t",
        flow_run_id=None,
        started_at=__import__("datetime").datetime(2026, 1, 1),
    )
    staged = stage_tables(tmp_path / "out", {"table": pa.table({"x": [1]})})
    store.commit_release(staged=staged, release_key="a", based_on_sequence=0, **kwargs)
    staged = stage_tables(tmp_path / "out", {"table": pa.table({"x": [2]})})
    with pytest.raises(StaleHistory, match="run it again"):
        store.commit_release(staged=staged, release_key="b", based_on_sequence=0, **kwargs)
    assert len(store.history()) == 1
    assert not (tmp_path / "out" / ".staging").exists()


def test_cli_serial_refuses_without_publishing(prefect_server, tmp_path):
    snapshot(tmp_path, census(300, seed=6))
    extra = 'strategy = "constant-ratio"\nreleases = 20\nsuppress = false\nmax_group_size = 10'
    spec = write_spec(tmp_path, technique="serial", k=None, l=4, seed=1, extra=extra)
    res = run(["serial", str(spec)], prefect_server)
    assert res.returncode == 1
    assert "privpub: error: the global guarantee cannot be met" in res.stderr
    assert not (tmp_path / "releases").exists() or not any(
        p for p in (tmp_path / "releases").iterdir() if not p.name.startswith(".")
    )


def test_cli_serial_rejects_a_one_off_technique(prefect_server, census_dir):
    res = run(["serial", str(write_spec(census_dir))], prefect_server)
    assert res.returncode == 1 and "privpub serial needs a technique that publishes series" in res.stderr


def test_no_person_id_in_a_serial_release_its_report_or_its_figures(prefect_server, tmp_path):
    """Issue 25, item 1: the serial-global worst pair was printed with its person id in every
    serial report.html and in release_metrics.detail. Planted ids that cannot occur by chance are
    looked for in every file of both release folders, in `privpub verify`'s lines and in the
    published figures of the history."""
    import uuid

    frame = census(500, seed=4)
    later = evolve(frame, 5)
    ids = {pid: f"person-{uuid.uuid4().hex}" for pid in later["pid"]}
    spec = write_spec(tmp_path, technique="serial", k=None, l=2, seed=1, extra=SERIAL)
    spec.write_text(spec.read_text().replace("k = 2\n", ""))
    releases = []
    for snap in (frame, later):
        snapshot(tmp_path, snap.assign(pid=snap["pid"].map(ids)))
        releases.append(serial_flow(spec_path=str(spec)))
    needles = [pid.encode() for pid in ids.values()]
    scanned = 0
    for rid in releases:
        for path in (tmp_path / "releases" / rid).rglob("*"):
            if path.is_file():
                scanned += 1
                assert not [n for n in needles if n in path.read_bytes()], f"{path} names a person"
        ok, lines = reverify(tmp_path / "privpub.duckdb", rid)
        assert ok and [l for l in lines if "serial-global" in l], lines
        assert not [n for n in needles if n in "\n".join(lines).encode()]
    assert scanned >= 4  # tables and a report per release
    store = Store(tmp_path / "privpub.duckdb")
    details = store.query(lambda con: con.execute("SELECT detail FROM release_metrics").fetchall())
    assert details and not [n for n in needles if n in repr(details).encode()]

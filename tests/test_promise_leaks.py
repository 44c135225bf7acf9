"""No person id and no pseudonym in anything published (issue 46, item 1): for every technique,
two releases of a series from an input of planted person ids; every file of every release
folder (bytes, and each Parquet table's cells as text), report.html and the published figures
(release_metrics, what `privpub verify` prints) are scanned for the ids and for the release's
own pseudonyms, derived here as state/pseudonyms.py documents them: the first 32 hex characters
of SHA-256(hex(key) || the id's text), the key read from `<state>.key`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import privpub
from privpub.testing import planted_census
from tests.test_contract import NAMES, ROWS, spec_dict, toml


def two_releases(folder: Path, name: str) -> tuple[list[str], list[str]]:
    """Two releases of technique `name`; (their ids, the needles: person ids and pseudonyms)."""
    frame = planted_census(ROWS, seed=5)
    frame.to_csv(folder / "census.csv", index=False)
    spec = spec_dict(name, series={"composition": "warn"})
    spec["output"].pop("seed")
    text = "\n".join(f"[{s}]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in body.items()) for s, body in spec.items())
    (folder / "spec.toml").write_text(text)
    ids = [str(privpub.publish(str(folder / "spec.toml"), allow_repeat=True)) for _ in range(2)]
    key_file = folder / "privpub.duckdb.key"  # made when the first person was stored
    # a technique that stores no person (dp-synthetic: its series is a budget) makes no key
    key = key_file.read_bytes() if key_file.exists() or name != "dp-synthetic" else None
    pseudonyms = [hashlib.sha256((key.hex() + str(pid)).encode()).hexdigest()[:32] for pid in frame.pid] if key else []
    return ids, [*map(str, frame.pid), *pseudonyms]


def published_texts(folder: Path, ids: list[str]) -> dict[str, str]:
    """Every published place as text: each file's bytes, each Parquet table's cells, the figures."""
    places: dict[str, str] = {}
    for path in sorted((folder / "releases").rglob("*")):
        if path.is_file():
            places[str(path.relative_to(folder))] = path.read_bytes().decode("latin-1")
            if path.suffix == ".parquet":
                places[f"{path.name} cells"] = repr(pq.read_table(path).to_pylist())
    with duckdb.connect(str(folder / "privpub.duckdb"), read_only=True) as con:
        places["release_metrics"] = repr(con.execute("SELECT * FROM release_metrics").fetchall())
    for release in ids:
        places[f"verify {release}"] = "\n".join(privpub.verify(release, folder / "privpub.duckdb").attrs["lines"])
    assert sum(p.endswith("report.html") for p in places) == 2 and any(".parquet" in p for p in places)
    return places


@pytest.mark.parametrize("name", NAMES)
def test_no_person_id_or_pseudonym_in_any_published_file_or_report(tmp_path, name):
    """Promise: nothing-published-names-a-person."""
    ids, needles = two_releases(tmp_path, name)
    found = {where: [n for n in needles if n in text][:2] for where, text in published_texts(tmp_path, ids).items()}
    assert not {where: hits for where, hits in found.items() if hits}


def test_the_serial_guarantees_worst_case_is_named_by_value_and_links_only(tmp_path):
    """Promise: nothing-published-names-a-person. The serial global guarantee's worst pair is a
    person's: the report, the figures and verify say its value, links and p, never whose."""
    ids, needles = two_releases(tmp_path, "serial")
    pseudonyms = set(needles[ROWS:])
    with duckdb.connect(str(tmp_path / "privpub.duckdb"), read_only=True) as con:
        details = [
            r[0] for r in con.execute("SELECT detail FROM release_metrics WHERE name = 'serial-global'").fetchall()
        ]
    assert len(details) == 2 and all('"links"' in d and '"value"' in d for d in details)
    assert not any(p in d for d in details for p in pseudonyms)
    for release in ids:
        report = (tmp_path / "releases" / release / "report.html").read_text()
        assert "serial-global" in report and not any(p in report for p in pseudonyms)

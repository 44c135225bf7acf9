"""File fingerprints cover every byte of a large file (issue 46, item 1): a change beyond the
first megabyte of a multi-megabyte published table (inside a Parquet column chunk) makes
`privpub verify` fail, and one deep inside a large input CSV is a new input to repeat protection
and to the same-seed re-run. The reference is hashlib over the whole file, read here."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import privpub
from privpub.schemas.errors import PrivacyRefused
from privpub.state.store import published_sha256, sha256_file, sha256_files
from privpub.tasks.demo_data import census
from tests.helpers import write_spec

MIB = 1 << 20


def test_a_file_fingerprint_covers_a_byte_beyond_the_first_megabyte(tmp_path):
    """Promise: fingerprints-cover-every-byte. sha256_file, sha256_files and published_sha256 of
    a 3 MiB file against hashlib over its bytes, before and after one byte at 2.5 MiB changes."""
    path = tmp_path / "big.bin"
    data = bytearray(np.random.default_rng(0).bytes(3 * MIB))
    path.write_bytes(data)
    before = (sha256_file(path), sha256_files([path], tmp_path), published_sha256(path))
    assert before[0] == before[2] == hashlib.sha256(data).hexdigest()
    data[5 * MIB // 2] ^= 1
    path.write_bytes(data)
    after = (sha256_file(path), sha256_files([path], tmp_path), published_sha256(path))
    assert after[0] == hashlib.sha256(data).hexdigest()
    assert all(a != b for a, b in zip(after, before))


def large_release(folder: Path) -> tuple[str, Path]:
    """An Anatomy release whose ST.parquet is a few MiB: 8,000 distinct sensitive codes of 250
    random hex characters each (incompressible), so most of its value column lies past 1 MiB."""
    n = 8000
    rng = np.random.default_rng(1)
    frame = census(n, seed=5)[["pid", "age", "sex"]]
    frame["code"] = [rng.bytes(125).hex() for _ in range(n)]
    frame.to_csv(folder / "big.csv", index=False)
    spec = {
        "dataset": {
            "name": "big",
            "input": "big.csv",
            "person_id": "pid",
            "sensitive": "code",
            "qi": [{"name": "age", "kind": "numeric"}, {"name": "sex", "kind": "categorical"}],
        },
        "technique": {"name": "anatomy", "l": 2},
        "output": {"dir": str(folder / "releases"), "state": str(folder / "privpub.duckdb"), "seed": 1},
    }
    release = privpub.publish(folder / "big.csv", spec)
    return str(release), folder / "releases" / str(release) / "ST.parquet"


def flip_inside_a_value(path: Path) -> int:
    """One hex character of a published code changed in place, past 1 MiB and inside the value
    column's chunk (a snappy literal: the file still reads, one cell differs). Its offset."""
    raw = bytearray(path.read_bytes())
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index("code"))
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    end = start + chunk.total_compressed_size
    codes = pq.read_table(path).column("code").to_pylist()
    for value in codes[::50]:  # a code can also stand in a page header's min / max: try the next
        at = raw.find(value.encode(), MIB)
        if not start + 1000 < at < end - 1000:
            continue
        pos, tampered = at + 60, bytearray(raw)
        tampered[pos] = ord("a") if raw[pos] != ord("a") else ord("b")
        path.write_bytes(tampered)
        if sum(x != y for x, y in zip(pq.read_table(path).column("code").to_pylist(), codes)) == 1:
            return pos
    raise AssertionError("no published code found whole past 1 MiB")


def test_verify_fails_on_a_value_changed_deep_inside_a_large_published_table(tmp_path):
    """Promise: fingerprints-cover-every-byte. `privpub verify` compares each published file's
    sha256 with the committed one: a cell changed at 1 MiB+ of a 2 MB Parquet file fails it."""
    release, st = large_release(tmp_path)
    assert st.stat().st_size > 3 * MIB // 2
    state = tmp_path / "privpub.duckdb"
    assert privpub.verify(release, state).attrs["ok"]
    pos = flip_inside_a_value(st)
    assert MIB < pos < st.stat().st_size - MIB // 4
    checked = privpub.verify(release, state)
    assert not checked.attrs["ok"]
    assert any(
        "ST.parquet differs from what was committed (sha256 mismatch)" in line for line in checked.attrs["lines"]
    )


def test_a_change_deep_inside_a_large_input_is_a_new_input(tmp_path):
    """Promise: fingerprints-cover-every-byte. A 2.4 MiB CSV (a long column the release does not
    read): its last row's age changed is a new input, so the same seed publishes anew (not the
    earlier release) and a seedless publish of the new file is no repeat of the old one."""
    frame = census(120, seed=3)
    frame["note"] = [np.random.default_rng(i).bytes(10_000).hex() for i in range(len(frame))]
    csv = tmp_path / "census.csv"
    frame.to_csv(csv, index=False)
    assert csv.stat().st_size > 2 * MIB
    spec = write_spec(tmp_path, k=5, l=None, seed=7, extra='\n[series]\ncomposition = "warn"\n')
    first = privpub.publish(str(spec))
    assert privpub.publish(str(spec)) == first  # the same input and seed: that release
    old = csv.read_bytes()
    frame.loc[len(frame) - 1, "age"] = int(frame.loc[len(frame) - 1, "age"]) + 1
    frame.to_csv(csv, index=False)
    new = csv.read_bytes()
    first_change = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
    assert first_change > 2 * MIB and len(new) == len(old)  # one digit of the last line
    second = privpub.publish(str(spec))
    assert second != first
    # a seedless release of the same changed input is a repeat of the second, not of the first
    spec.write_text(spec.read_text().replace("seed = 7\n", ""))
    with pytest.raises(PrivacyRefused, match=rf"release #2 \({second}\)"):
        privpub.publish(str(spec))

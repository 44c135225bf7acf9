"""Input and output shapes for clusters: a folder or glob of Parquet files as the input (its
fingerprint over names and bytes), [run] address, and published tables written as folders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privpub.schemas.errors import InputError, PublishedTableError, SpecError
from privpub.schemas.input import input_files, read_input
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import published_sha256, sha256_file, sha256_files, stage_tables
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.parted_table import PartedTable, part_name, read_published
from privpub.tasks.core.types import Release
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.validate import input_fingerprint
from privpub.tasks.verify.published import check_published


def _spec(folder, input_name: str, run: dict | None = None):
    return spec_from_dict({**census_spec(input_name, k=5), **({"run": run} if run else {})}, base_dir=folder)


def _write_parts(folder, frame: pd.DataFrame, n: int) -> list:
    folder.mkdir(exist_ok=True)
    step = -(-len(frame) // n)
    for i in range(n):
        frame.iloc[i * step : (i + 1) * step].to_parquet(folder / f"part-{i:03d}.parquet", index=False)
    return sorted(folder.glob("*.parquet"))


@pytest.fixture
def frame():
    return census(300, seed=3)


def test_a_folder_of_parquet_files_reads_as_their_rows_in_name_order(tmp_path, frame):
    _write_parts(tmp_path / "data", frame, 4)
    (tmp_path / "data" / "notes.txt").write_text("not data")
    got = read_input(_spec(tmp_path, "data"))
    pd.testing.assert_frame_equal(got, frame.reset_index(drop=True))


def test_a_glob_reads_the_files_it_matches(tmp_path, frame):
    _write_parts(tmp_path / "data", frame, 3)
    spec = _spec(tmp_path, "data/part-00[01].parquet")
    assert [p.name for p in input_files(spec)] == ["part-000.parquet", "part-001.parquet"]
    assert len(read_input(spec)) == 200


def test_folders_without_parquet_and_empty_globs_are_refused(tmp_path, frame):
    (tmp_path / "csvs").mkdir()
    frame.to_csv(tmp_path / "csvs" / "census.csv", index=False)
    with pytest.raises(InputError, match="is a directory, not a file"):
        read_input(_spec(tmp_path, "csvs"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="is a directory, not a file"):
        read_input(_spec(tmp_path, "empty"))
    with pytest.raises(InputError, match="matches no file"):
        read_input(_spec(tmp_path, "nowhere/*.parquet"))
    with pytest.raises(InputError, match="not a Parquet file"):
        read_input(_spec(tmp_path, "csvs/*"))


def test_folder_fingerprint_covers_names_and_bytes_not_listing_order(tmp_path, frame):
    files = _write_parts(tmp_path / "data", frame, 3)
    spec = _spec(tmp_path, "data")
    first = input_fingerprint(spec)
    assert first == sha256_files(list(reversed(files)), tmp_path / "data")
    assert input_fingerprint(_spec(tmp_path, "data/*.parquet")) == first  # same files, same names
    files[1].rename(tmp_path / "data" / "part-009.parquet")
    renamed = input_fingerprint(spec)
    assert renamed != first
    frame.iloc[:5].to_parquet(tmp_path / "data" / "part-009.parquet", index=False)
    assert input_fingerprint(spec) not in (first, renamed)
    # a single file keeps the plain sha256 of its bytes (release keys of earlier releases hold)
    frame.to_parquet(tmp_path / "one.parquet", index=False)
    assert input_fingerprint(_spec(tmp_path, "one.parquet")) == sha256_file(tmp_path / "one.parquet")


def test_run_address_is_checked_strictly(tmp_path):
    ok = _spec(tmp_path, "x.csv", {"task_runner": "dask", "address": "tcp://scheduler.example:8786"})
    assert ok.run.address == "tcp://scheduler.example:8786" and not ok.run.allow_spill
    for bad, message in [
        ({"address": "tcp://h:8786"}, "needs task_runner"),
        ({"task_runner": "dask", "address": "http://h:8786"}, "address"),
        ({"task_runner": "dask", "address": "tcp://h"}, "address"),
        ({"task_runner": "dask", "address": "tcp://h:1", "workers": 2}, "workers"),
        ({"task_runner": "dask", "adress": "tcp://h:1"}, "did you mean address"),
        ({"task_runner": "dask", "chunk_rows": 0}, "chunk_rows"),
    ]:
        with pytest.raises(SpecError, match=message):
            _spec(tmp_path, "x.csv", bad)


def _parted(folder, frame: pd.DataFrame, n: int) -> PartedTable:
    folder.mkdir()
    step = -(-len(frame) // n)
    for i in range(n):
        pq.write_table(
            pa.Table.from_pandas(frame.iloc[i * step : (i + 1) * step], preserve_index=False), folder / part_name(i)
        )
    return PartedTable(folder)


def test_a_folder_table_is_staged_hashed_and_read_back(tmp_path):
    table = pd.DataFrame({"a": range(10), "b": list("abcdefghij")})
    parted = _parted(tmp_path / "draft", table, 3)
    staged = stage_tables(tmp_path / "out", {"table": parted, "small": pa.table({"x": [1]})})
    try:
        meta = staged.files["table"]
        assert meta["file"] == "table" and meta["n_rows"] == 10
        folder = staged.path / "table"
        assert meta["sha256"] == published_sha256(folder) == sha256_files(sorted(folder.iterdir()), folder)
        back = read_published(folder)
        assert isinstance(back, PartedTable)
        pd.testing.assert_frame_equal(back.read().to_pandas(), table)
        assert read_published(staged.path / "small.parquet").num_rows == 1
    finally:
        staged.discard()


def test_schema_check_reads_every_part_of_a_folder_table(tmp_path):
    spec = spec_from_dict(census_spec("x.csv", k=5))
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, census(200, seed=2))
    rng = np.random.default_rng(0)
    published = tech.anonymize(data, tech.partition(data, rng), rng).tables["table"].to_pandas()
    parted = _parted(tmp_path / "t", published, 3)
    check_published(Release({"table": parted}), spec, tech)  # passes, part by part
    results = tech.verify(Release({"table": parted}), {})
    assert [r.model for r in results] == ["k-anonymity", "l-diversity"]
    assert all(r.passed for r in results) and results[0].value >= 5
    leaky = published.iloc[:4].assign(pid=["a", "b", "c", "d"])
    pq.write_table(pa.Table.from_pandas(leaky, preserve_index=False), tmp_path / "t" / part_name(3))
    with pytest.raises(PublishedTableError, match="person id"):
        check_published(Release({"table": parted}), spec, tech)


def test_only_parquet_input_of_a_distributed_technique_goes_to_the_cluster(tmp_path, frame):
    from privpub.flows.cluster import uses_cluster

    _write_parts(tmp_path / "data", frame, 2)
    frame.to_csv(tmp_path / "census.csv", index=False)
    dask = {"task_runner": "dask"}
    for input_name, run, _technique, expected in [
        ("data", dask, "generalization", True),
        ("data/*.parquet", dask, "generalization", True),
        ("census.csv", dask, "generalization", False),
        ("data", None, "generalization", False),
        ("missing", dask, "generalization", False),
    ]:
        spec = _spec(tmp_path, input_name, run)
        assert uses_cluster(spec, get_technique(spec)) is expected, input_name
    muco = spec_from_dict(
        {**census_spec("data", k=None, l=3, technique={"name": "muco", "l": 3, "delta": "1/4"}), "run": dask},
        base_dir=tmp_path,
    )
    assert uses_cluster(muco, get_technique(muco)) is False

"""Releases on a Dask cluster (issue 15): partitioned Parquet input read by the workers, the top
of Mondrian's tree from per-partition histograms, subtrees finished on single workers. The
release equals the in-memory release of the same input and seed; the verifier reads the folder
table; secret rows reach neither Prefect's storage nor the workers' scratch folders."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privpub.flows.publish import publish_flow
from privpub.flows.reverify import reverify
from privpub.schemas.errors import InputError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.parted_table import PartedTable, read_published
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.validate.parted import load_on_cluster


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as local,
        Client(local, set_as_default=False) as client,
    ):
        yield local, client


def _write_parts(folder: Path, frame: pd.DataFrame, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, piece in enumerate(np.array_split(np.arange(len(frame)), n)):
        frame.iloc[piece].to_parquet(folder / f"part-{i:03d}.parquet", index=False)


def _spec(folder: Path, k: int, l: int | None, run: dict, **qi_override):
    d = census_spec("data", k=k, l=l)
    d["run"] = run
    d["output"] = {"dir": "releases", "state": "privpub.duckdb", "seed": 7}
    return spec_from_dict(d, base_dir=folder)


def canonical(table) -> pd.DataFrame:
    """Published rows as a sorted frame (list cells joined), so row order does not matter."""
    df = table.to_pandas() if hasattr(table, "to_pandas") else table
    df = df.copy()
    for c in df.columns:
        if len(df) and isinstance(df[c].iloc[0], (list, np.ndarray)):
            df[c] = df[c].map(lambda v: "|".join(map(str, v)))
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def _tied(n: int, seed: int) -> pd.DataFrame:
    """Few distinct values per QI, so many medians fall on long runs of ties."""
    frame = census(n, seed=seed)
    rng = np.random.default_rng(seed)
    frame["age"] = rng.choice([30, 40, 40, 40, 50], size=n)
    frame["sex"] = rng.choice(["F", "M"], size=n, p=[0.8, 0.2])
    return frame


@pytest.mark.parametrize("seed, k, l, chunk_rows", [(1, 5, None, 300), (2, 4, 3, 250), (3, 10, 2, 900), (4, 3, 4, 100)])
def test_distributed_release_equals_the_in_memory_release(cluster, tmp_path, seed, k, l, chunk_rows):
    """The same groups, boxes and rows on the cluster as in memory.

    Promise: cluster-release-equals-in-memory."""
    _, client = cluster
    frame = _tied(2000, seed)
    _write_parts(tmp_path / "data", frame, 5)
    spec = _spec(tmp_path, k, l, {"task_runner": "dask", "chunk_rows": chunk_rows})
    tech = get_technique(spec)
    data = load_on_cluster(spec, client)
    memory = Microdata.from_frame(spec, validate_input(frame, spec))
    rng = np.random.default_rng(seed)
    cpart = tech.partition(data, rng)
    assert cpart.levels >= 1 and (cpart.ready_sizes <= chunk_rows).any()
    release = tech.anonymize(data, cpart, rng)
    table = release.tables["table"]
    assert isinstance(table, PartedTable) and len(table.parts) == len(cpart.ready)
    in_memory = tech.anonymize(memory, tech.partition(memory, rng), rng)
    pd.testing.assert_frame_equal(canonical(table.read()), canonical(in_memory.tables["table"]))
    assert release.info["groups"] == in_memory.info["groups"]
    ours = tech.verify(release, {})
    theirs = tech.verify(in_memory, {})
    assert [(r.model, r.value, r.passed) for r in ours] == [(r.model, r.value, r.passed) for r in theirs]


def test_values_codes_are_global_across_partitions(cluster, tmp_path):
    """A value present in one file only still gets its place in the whole table's domain."""
    _, client = cluster
    frame = census(600, seed=8)
    frame.loc[:299, "age"] = frame.loc[:299, "age"] + 100  # the first file's ages only
    _write_parts(tmp_path / "data", frame, 2)
    spec = _spec(tmp_path, 5, None, {"task_runner": "dask"})
    got = load_on_cluster(spec, client).collect()
    want = Microdata.from_frame(spec, validate_input(frame, spec))
    assert (got.codes == want.codes).all() and (got.sensitive_codes == want.sensitive_codes).all()
    for a, b in zip(got.domains, want.domains):
        assert list(a.values) == list(b.values)


def test_bad_rows_and_repeated_ids_across_files_are_refused(cluster, tmp_path):
    _, client = cluster
    frame = census(400, seed=2)
    frame.loc[350, "pid"] = frame.loc[10, "pid"]  # files 0 and 1 share a person
    _write_parts(tmp_path / "data", frame, 2)
    spec = _spec(tmp_path, 5, None, {"task_runner": "dask"})
    with pytest.raises(
        InputError,
        match=r"part-001.parquet row 151, column person id: repeats the person id of "
        r"part-000.parquet row 11",
    ):
        load_on_cluster(spec, client)
    frame = census(400, seed=2)
    frame["age"] = frame["age"].astype(float)
    frame.loc[250, "age"] = None
    _write_parts(tmp_path / "bad" / "data", frame, 2)
    with pytest.raises(InputError, match=r"part-001.parquet: input rejected: row 51, column 'age': is empty"):
        load_on_cluster(_spec(tmp_path / "bad", 5, None, {"task_runner": "dask"}), client)


@pytest.fixture
def secret_parts(tmp_path):
    frame = census(1500, seed=12)
    frame["pid"] = [f"person-{uuid.uuid4().hex}" for _ in range(len(frame))]
    _write_parts(tmp_path / "data", frame, 4)
    return tmp_path, frame


def _write_spec(folder: Path, run: str) -> Path:
    from tests.helpers import census_spec_toml

    path = folder / "spec.toml"
    path.write_text(census_spec_toml("data", k=5, l=2, seed=5) + "\n[run]\n" + run + "\n")
    return path


def test_publish_on_a_cluster_equals_in_memory_and_verifies_from_the_folder(
    prefect_server, cluster, secret_parts, prefect_results_dir
):
    """A whole publish on the cluster equals the in-memory one and verifies from its folder of parts.

    Promise: cluster-release-equals-in-memory."""
    local, client = cluster
    folder, frame = secret_parts
    spec_path = _write_spec(folder, f'task_runner = "dask"\naddress = "{local.scheduler_address}"\nchunk_rows = 400')
    release_id = publish_flow(spec_path=str(spec_path))
    store = Store(folder / "privpub.duckdb")
    rel = store.release(release_id)
    out = folder / "releases" / release_id
    table = read_published(out / "table")
    assert isinstance(table, PartedTable) and len(table.parts) > 1
    assert rel["tables"].file.tolist() == ["table"]
    ok, lines = reverify(folder / "privpub.duckdb", release_id)
    assert ok, lines
    assert any(line.startswith("PASS k-anonymity") for line in lines)

    # the same input and seed in memory: same rows, same privacy and utility figures
    (folder / "memory").mkdir()
    frame.to_parquet(folder / "memory" / "census.parquet", index=False)
    from tests.helpers import census_spec_toml

    (folder / "memory" / "spec.toml").write_text(census_spec_toml("census.parquet", k=5, l=2, seed=5))
    memory_id = publish_flow(spec_path=str(folder / "memory" / "spec.toml"))
    memory_table = pd.read_parquet(folder / "memory" / "releases" / memory_id / "table.parquet")
    pd.testing.assert_frame_equal(canonical(table.read()), canonical(memory_table))
    figures = {(r.kind, r.name): r.value for r in rel["metrics"].itertuples()}
    memory_figures = {
        (r.kind, r.name): r.value
        for r in Store(folder / "memory" / "privpub.duckdb").release(memory_id)["metrics"].itertuples()
    }
    assert figures.keys() == memory_figures.keys()
    from privpub.tasks.evaluate.quality import QUALITY_FIGURES

    notes = {r.name: r.text_value for r in rel["metrics"].itertuples() if r.name in QUALITY_FIGURES}
    for key, value in memory_figures.items():
        if key[1] in QUALITY_FIGURES:  # issue 44's models are computed in memory only (docs/utility.md)
            assert pd.isna(figures[key]) and notes[key[1]].startswith("does not apply: "), key
            continue
        assert figures[key] == pytest.approx(value, rel=1e-9, nan_ok=True), key

    # secret rows: not in Prefect's storage, the releases, or the workers' scratch folders
    scratch = [Path(p) for p in client.run(lambda dask_worker: dask_worker.local_directory).values()]
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    needles = [pid.encode() for pid in frame.pid]
    rows = frame.drop(columns=["pid"]).astype(str).agg(",".join, axis=1)
    needles += [r.encode() for r in rows.head(50)]
    scanned = 0
    for root in [prefect_results_dir, home / "storage", folder / "releases", *scratch]:
        for path in (p for p in root.rglob("*") if p.is_file()) if root.exists() else ():
            blob = path.read_bytes()
            scanned += 1
            assert not [n for n in needles if n in blob], f"{path} contains input rows / person ids"
    assert scanned >= 3


def test_a_spilling_cluster_is_refused_unless_allowed(cluster):
    import dask
    from distributed import Client, LocalCluster

    from privpub.flows.cluster import check_no_spill, dask_task_runner
    from privpub.schemas.errors import ClusterError
    from privpub.schemas.spec import RunSpec

    _, quiet = cluster
    check_no_spill(quiet, RunSpec(task_runner="dask"))  # memory_limit 0: nothing to spill against
    with (
        dask.config.set({"distributed.worker.memory.spill": 0.7}),
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            memory_limit="1GiB",
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as local,
        Client(local, set_as_default=False) as client,
    ):
        with pytest.raises(ClusterError, match="may spill data to disk"):
            check_no_spill(client, RunSpec(task_runner="dask"))
        check_no_spill(client, RunSpec(task_runner="dask", allow_spill=True))
        # the chunk runner of a technique that maps chunks (MuCo) is checked the same way
        with pytest.raises(ClusterError, match="may spill data to disk"):
            dask_task_runner(RunSpec(task_runner="dask", address=local.scheduler_address))
        assert (
            dask_task_runner(RunSpec(task_runner="dask", address=local.scheduler_address, allow_spill=True)) is not None
        )


def test_privpub_starts_a_local_cluster_that_cannot_spill():
    from privpub.flows.cluster import check_no_spill, dask_client
    from privpub.schemas.spec import RunSpec

    run = RunSpec(task_runner="dask", workers=1)
    with dask_client(run) as client:
        assert len(client.scheduler_info()["workers"]) == 1
        check_no_spill(client, run)


@pytest.mark.parametrize("on_cluster", [False, True])
def test_classes_spanning_parts_are_counted_whole(cluster, tmp_path, on_cluster):
    """Rows of one class in several parts (shuffled before splitting): the part-wise figures
    equal class_profile's on the whole table, just inside and just outside k and l."""
    from privpub.tasks.verify.k_anonymity import k_and_l
    from privpub.tasks.verify.parted import parted_class_sizes, parted_k_and_l
    from privpub.tasks.verify.published import class_profile, qi_columns

    spec = spec_from_dict(census_spec("x.csv", k=4, l=2))
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, census(900, seed=6))
    rng = np.random.default_rng(2)
    whole = tech.anonymize(data, tech.partition(data, rng), rng).tables["table"]
    whole = whole.take(np.random.default_rng(3).permutation(whole.num_rows))
    folder = tmp_path / "t"
    folder.mkdir()
    import pyarrow.parquet as pq

    from privpub.tasks.core.parted_table import part_name

    for i, piece in enumerate(np.array_split(np.arange(whole.num_rows), 4)):
        pq.write_table(whole.take(piece), folder / part_name(i))
    parted = PartedTable(folder, client=cluster[1] if on_cluster else None)
    cols = qi_columns(whole, spec.dataset.qi_names)
    prof = class_profile(whole, cols, "occupation")
    k_min, l_min = int(prof["size"].min()), int(prof["distinct"].min())
    for k, l in [(k_min, l_min), (k_min + 1, l_min + 1)]:
        ours = parted_k_and_l(parted, cols, "occupation", k, l)
        ref = k_and_l(whole, cols, "occupation", k, l)
        assert [(r.value, r.passed) for r in ours] == [(r.value, r.passed) for r in ref]
        assert ours[0].worst["classes"] == ref[0].worst["classes"]
    assert ours[0].passed is False and ours[1].passed is False
    assert sorted(parted_class_sizes(parted, cols)) == sorted(prof["size"])


def test_the_cli_publishes_a_folder_input_on_a_cluster_it_starts(prefect_server, tmp_path, capsys):
    from privpub.flows.cli import main as cli_main

    frame = census(1200, seed=14)
    _write_parts(tmp_path / "data", frame, 3)
    spec_path = _write_spec(tmp_path, "chunk_rows = 500")
    assert cli_main(["publish", str(spec_path), "--task-runner", "dask", "--workers", "2"]) == 0
    release_id = Store(tmp_path / "privpub.duckdb").history().release_id.iloc[-1]
    assert release_id in capsys.readouterr().out
    table = read_published(tmp_path / "releases" / release_id / "table")
    assert isinstance(table, PartedTable) and table.num_rows == 1200
    assert cli_main(["verify", release_id, "--state", str(tmp_path / "privpub.duckdb")]) == 0


def _people_figures(state: Path) -> dict:
    """Per stored person: (candidate values, fewest transient values) of its summary."""

    def fetch(con):
        return con.execute(
            "SELECT p.person, (SELECT count(*) FROM compose_sets s WHERE s.sid = p.sid AND s.set_id = p.set_id), "
            "i.min_t, i.min_tc FROM compose_people p JOIN compose_set_info i "
            "ON i.sid = p.sid AND i.set_id = p.set_id"
        ).fetchall()

    return {person: rest for person, *rest in Store(state).query(fetch)}


def test_series_composition_on_a_cluster_equals_the_in_memory_check(prefect_server, cluster, tmp_path, monkeypatch):
    """Two monthly releases of a series on the cluster: the composition figures (the fewest
    candidate values, how many fall below l, people, returning) and every stored person's
    summary equal those of the same series published in memory; `privpub verify` replays the
    cluster release; a returning person whose value changed is refused by file and row, nothing
    is published and no staged summary is left behind."""
    from privpub.tasks.compose import parted as compose_cluster

    monkeypatch.setattr(compose_cluster, "BATCH_PEOPLE", 250)  # batches of a few nodes (chunk_rows 300)
    # one pseudonym key for both states, so their people (stored as pseudonyms) compare by name
    monkeypatch.setenv("PRIVPUB_PSEUDONYM_KEY_FILE", str(tmp_path / "shared.key"))
    local, _ = cluster
    month1 = census(1200, seed=21)
    month1["pid"] = [f"p{i:05d}" for i in range(len(month1))]
    rng = np.random.default_rng(3)
    stay = month1.iloc[np.sort(rng.choice(len(month1), 1000, replace=False))]
    newcomers = census(200, seed=22)
    newcomers["pid"] = [f"q{i:05d}" for i in range(len(newcomers))]
    month2 = pd.concat([stay, newcomers], ignore_index=True)
    from tests.helpers import census_spec_toml

    def spec_for(root: Path, data: str, seed: int, run: str) -> Path:
        path = root / f"spec-{seed}.toml"
        path.write_text(census_spec_toml(data, k=4, l=2, seed=seed) + run + '\n[series]\ncomposition = "warn"\n')
        return path

    on_cluster = f'\n[run]\ntask_runner = "dask"\naddress = "{local.scheduler_address}"\nchunk_rows = 300\n'
    ids = {}
    for how, run in (("cluster", on_cluster), ("memory", "")):
        root = tmp_path / how
        for month, frame in ((1, month1), (2, month2)):
            _write_parts(root / f"m{month}", frame, 3)
            ids[how, month] = publish_flow(spec_path=str(spec_for(root, f"m{month}", month, run)))
    figure = {}
    for how in ("cluster", "memory"):
        m = Store(tmp_path / how / "privpub.duckdb").release(ids[how, 2])["metrics"]
        row = m[m.name == "series-composition-l"].iloc[0]
        worst = json.loads(row.detail) if isinstance(row.detail, str) else row.detail
        figure[how] = (
            row.text_value,
            bool(row.passed),
            *(worst[k] for k in ("below", "people", "returning", "releases")),
        )
    assert figure["cluster"] == figure["memory"]
    assert figure["cluster"][4] == 1000 and figure["cluster"][3] == 1200  # returning, people
    assert figure["cluster"][2] > 0, "the data should narrow somebody, or the comparison proves little"
    assert _people_figures(tmp_path / "cluster" / "privpub.duckdb") == _people_figures(
        tmp_path / "memory" / "privpub.duckdb"
    )
    ok, lines = reverify(tmp_path / "cluster" / "privpub.duckdb", ids["cluster", 2])
    assert any(
        line.startswith("PASS series-composition-l") or line.startswith("FAIL series-composition-l") for line in lines
    ) and not any("the publish stored" in line for line in lines), lines

    changed = month2.copy()
    holder = changed.index[changed.pid == stay.pid.iloc[0]][0]
    values = sorted(month1.occupation.unique())
    changed.loc[holder, "occupation"] = next(v for v in values if v != changed.loc[holder, "occupation"])
    root = tmp_path / "cluster"
    _write_parts(root / "m3", changed, 3)
    store = Store(root / "privpub.duckdb")
    before = store.history().release_id.tolist()
    with pytest.raises(Exception, match=r"part-000.parquet: row 1, column 'occupation': the value differs"):
        publish_flow(spec_path=str(spec_for(root, "m3", 3, on_cluster)))
    assert store.history().release_id.tolist() == before
    assert not list((root / "releases").rglob("_compose_*")), "staged summaries (person ids) left behind"


def test_keep_groups_is_refused_on_a_cluster_before_any_work(prefect_server, cluster, secret_parts):
    local, _ = cluster
    folder, _ = secret_parts
    run = f'task_runner = "dask"\naddress = "{local.scheduler_address}"\nchunk_rows = 400'
    spec_path = _write_spec(folder, run)
    spec_path.write_text(spec_path.read_text() + "\n[series]\nkeep_groups = true\n")
    with pytest.raises(Exception, match="keep_groups does not run on a Dask cluster"):
        publish_flow(spec_path=str(spec_path))
    store = Store(folder / "privpub.duckdb")
    assert store.history().empty
    assert store.audit_log().outcome.iloc[-1] == "failed"  # the attempt is on the trail


def test_composition_batches_are_runs_of_whole_nodes():
    from privpub.tasks.compose.parted import batches

    assert batches(np.array([3, 2, 5, 1, 1]), 5) == [(0, 2), (2, 3), (3, 5)]
    assert batches(np.array([7, 1]), 5) == [(0, 1), (1, 2)]  # a node above the limit is a batch alone
    assert batches(np.array([], dtype=np.int64), 5) == []

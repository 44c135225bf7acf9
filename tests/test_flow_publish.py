"""The publish flow end to end under a Prefect test server."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pandas as pd
import pytest

from privpub.flows.publish import publish_flow
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import write_spec


@pytest.fixture
def secret_census(tmp_path):
    """Person ids that cannot occur by chance anywhere else."""
    frame = census(500, seed=9)
    frame["pid"] = [f"person-{uuid.uuid4().hex}" for _ in range(len(frame))]
    frame.to_csv(tmp_path / "census.csv", index=False)
    return tmp_path, frame


def _files_under(*roots: Path):
    for root in roots:
        if root.exists():
            for p in root.rglob("*"):
                if p.is_file():
                    yield p


def test_two_runs_make_two_releases_of_one_series(prefect_server, secret_census):
    folder, _ = secret_census
    spec = write_spec(folder, seed=None)
    first = publish_flow(spec_path=str(spec))
    second = publish_flow(spec_path=str(spec), allow_repeat=True)  # the same input again
    hist = Store(folder / "privpub.duckdb").history()
    assert hist.release_id.tolist() == [first, second]
    assert hist.series.tolist() == ["census", "census"] and hist.sequence.tolist() == [1, 2]
    assert (folder / "releases" / first / "table.parquet").is_file()
    assert (folder / "releases" / second / "report.html").is_file()


def test_same_seed_and_input_is_recognised(prefect_server, secret_census):
    folder, _ = secret_census
    spec = write_spec(folder, seed=5)
    first = publish_flow(spec_path=str(spec))
    assert publish_flow(spec_path=str(spec)) == first
    assert len(Store(folder / "privpub.duckdb").history()) == 1


def test_secret_rows_never_reach_prefect_storage_or_the_output(prefect_server, secret_census, prefect_results_dir):
    folder, frame = secret_census
    release = publish_flow(spec_path=str(write_spec(folder, seed=3)))
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    needles = [pid.encode() for pid in frame.pid]
    rows = frame.drop(columns=["pid"]).astype(str).agg(",".join, axis=1)
    needles += [r.encode() for r in rows.head(50)]
    scanned = 0
    for path in _files_under(prefect_results_dir, home / "storage", folder / "releases"):
        blob = path.read_bytes()
        scanned += 1
        leaked = [n for n in needles if n in blob]
        assert not leaked, f"{path} contains input rows / person ids"
    assert scanned >= 2  # at least the published table and the report were scanned
    published = pd.read_parquet(folder / "releases" / release / "table.parquet")
    assert "pid" not in published.columns


def test_report_shows_provenance_series_and_what_figures_mean(prefect_server, secret_census):
    """report.html links back to its run (flow run id, trigger, actor, spec, input and file
    hashes), explains each figure and shows the release's place in its series."""
    folder, frame = secret_census
    spec = write_spec(folder, seed=None)
    first = publish_flow(spec_path=str(spec), actor="steward")
    second = publish_flow(spec_path=str(spec), actor="steward", allow_repeat=True)
    store = Store(folder / "privpub.duckdb")
    rel = store.release(second)
    page = (folder / "releases" / second / "report.html").read_text()
    for text in (
        "Provenance",
        "started by",
        "steward",
        "Prefect flow run",
        rel["flow_run_id"],
        rel["input_fingerprint"],
        str(spec),
        "what it measures",
        "lower is better",
        "In its series",
        first,
        second,
    ):
        assert text in page, text
    for t in rel["tables"].itertuples():
        assert f"sha256 of {t.file}" in page and t.sha256 in page
    assert not any(pid in page for pid in frame.pid)


@pytest.mark.parametrize(
    "name, generated",
    [
        ("colossal-hoatzin", True),  # Prefect's generate_slug(2)
        ("gamma-aquarii", True),  # the UI's Custom run form
        ("omega517-canis-majoris-nebula", True),
        ("beta3-ceti", True),
        ("census check by hand", False),
        ("census-0001-abcdef", False),  # already a release's name
        ("refused: [technique] kk: unknown key; did you mean k?", True),  # an earlier attempt's
        ("January-census", False),
        ("monthly-census-2026", False),
        ("alpha", False),
    ],
)
def test_generated_run_names_are_told_from_typed_ones(name, generated):
    from privpub.flows.publish import generated_name

    assert generated_name(name) is generated


def test_generated_name_matches_what_prefect_makes():
    from prefect.utilities.names import generate_slug

    from privpub.flows.publish import generated_name

    assert all(generated_name(generate_slug(2)) for _ in range(2000))


def test_refused_name_is_shortened_at_a_word_boundary():
    from privpub.flows.publish import NAME_LIMIT, refused_name

    short = "[technique] kk: unknown key; did you mean k?"
    assert refused_name(short) == f"refused: {short}"
    exact = "x" * (NAME_LIMIT - len("refused: "))
    assert refused_name(exact) == f"refused: {exact}"  # just inside the limit: whole
    over = exact + "y"
    assert len(refused_name(over)) <= NAME_LIMIT and refused_name(over).endswith("...")  # just outside
    long = "privacy refused: k-anonymity 3 below the required 5 " + "and the series composition check " * 5
    name = refused_name(long)
    assert len(name) <= NAME_LIMIT and name.endswith("...")
    body = name[len("refused: ") : -3]
    assert long.startswith(body) and long[len(body)] == " "  # cut between two words


def test_a_refused_flow_run_is_named_and_tagged(prefect_server, census_dir):
    from prefect.client.orchestration import get_client

    from privpub.flows.serial import serial_flow

    spec = write_spec(census_dir, seed=1)
    state = publish_flow(spec_path=str(spec), overrides={"technique": {"kk": 7}}, return_state=True)
    message = "[technique] kk: unknown key; did you mean k?"
    assert state.is_failed() and state.message == message
    typed = publish_flow.with_options(flow_run_name="census check by hand")
    state_typed = typed(spec_path=str(spec), overrides={"technique": {"kk": 7}}, return_state=True)
    state_serial = serial_flow(spec_path=str(spec), overrides={"technique": {"kk": 7}}, return_state=True)
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
        run_typed = client.read_flow_run(state_typed.state_details.flow_run_id)
        run_serial = client.read_flow_run(state_serial.state_details.flow_run_id)
    assert run.name == f"refused: {message}" and "refused" in run.tags
    assert run_typed.name == "census check by hand" and "refused" in run_typed.tags
    assert run_serial.name == f"refused: {message}" and "refused" in run_serial.tags


def test_a_committed_run_keeps_a_typed_name_and_is_tagged_with_its_release(prefect_server, census_dir):
    from prefect.client.orchestration import get_client

    spec = write_spec(census_dir, seed=None)
    generated = publish_flow(spec_path=str(spec), return_state=True)
    typed = publish_flow.with_options(flow_run_name="census check by hand")(
        spec_path=str(spec), allow_repeat=True, new_release=True, return_state=True
    )
    with get_client(sync_client=True) as client:
        first = client.read_flow_run(generated.state_details.flow_run_id)
        second = client.read_flow_run(typed.state_details.flow_run_id)
    assert first.name == generated.result() and f"release:{first.name}" in first.tags
    assert second.name == "census check by hand" and f"release:{typed.result()}" in second.tags
    assert typed.result() != generated.result()


def test_a_retried_refusal_that_commits_is_renamed_after_its_release(prefect_server):
    """The UI's Retry of a refused run (its spec fixed meanwhile): the release replaces the
    earlier attempt's "refused: ..." name and "refused" tag; a typed name is still kept."""
    from prefect import flow
    from prefect.client.orchestration import get_client

    from privpub.flows.publish import label_flow_run

    @flow(name="label-test")
    def nothing():
        return None

    with get_client(sync_client=True) as client:
        ids = []
        for name in ("refused: [technique] kk: unknown key; did you mean k?", "census check by hand"):
            run = client.create_flow_run(nothing, name=name, tags=["privpub", "refused"])
            label_flow_run(str(run.id), "census-0002-abcdef", "release:census-0002-abcdef")
            ids.append(run.id)
        renamed, typed = (client.read_flow_run(i) for i in ids)
    assert renamed.name == "census-0002-abcdef" and renamed.tags == ["privpub", "release:census-0002-abcdef"]
    assert typed.name == "census check by hand" and typed.tags == ["privpub", "release:census-0002-abcdef"]

"""Ambiguity's and PriView's verify (alpha-presence, beta-association) runs as chunks of group
ids through the technique's hooks: every PrivacyResult (exact figure, verdict, counts and the
worst group's details) is the one-step check's, whatever the chunk size, the order the chunks
ran in, the published tables' row order, or the runner (Prefect's threads, a Dask LocalCluster
of 2 worker processes)."""

from __future__ import annotations

import json
import pickle
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.flows import publish as publish_mod
from privpub.flows.publish import publish
from privpub.schemas.spec import load_spec, spec_from_dict
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import VERIFY
from privpub.tasks.core.types import Release
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.techniques.ambiguity.association import ambiguity_association, priview_association
from privpub.tasks.techniques.ambiguity.group_chunks import split_by_groups
from privpub.tasks.techniques.ambiguity.presence import ambiguity_presence, priview_presence
from privpub.tasks.techniques.registry import get_technique
from tests.helpers import release_of, technique_and_data, write_spec

ROWS = 2000
PARAMS = {"alpha": 0.25, "beta": 0.1}


def one_step(tech, release: Release):
    """The figures of the whole tables in one pass of the verifier functions."""
    s, alpha, beta = tech.spec.dataset.sensitive, tech.params.alpha, tech.params.beta
    if tech.name == "ambiguity":
        ats = {q: release.tables[f"AT_{q}"] for q in tech.spec.dataset.qi_names}
        return [
            ambiguity_presence(ats, release.tables["ST"], alpha),
            ambiguity_association(release.tables["ST"], s, beta),
        ]
    at, st_t = release.tables["AT"], release.tables["ST"]
    st_qi = next(c for c in st_t.column_names if c not in ("gid", s, "count"))
    return [priview_presence(at, st_t, st_qi, s, alpha), priview_association(at, st_t, st_qi, s, beta)]


def shuffled(release: Release, seed: int) -> Release:
    """The same tables, rows in another order (the verifier must not depend on it)."""
    rng = np.random.default_rng(seed)
    return Release({name: t.take(rng.permutation(t.num_rows)) for name, t in release.tables.items()})


def chunked(tech, release: Release, chunk_rows: int, seed: int):
    """The flow's path: plan, the chunks in a random order, combine."""
    tech.spec.run.chunk_rows = chunk_rows
    plan = VERIFY.plan(tech, release, {}) or tech.split_verify(release, {})  # None: one chunk
    order = np.random.default_rng(seed).permutation(len(plan.chunks))
    results = [plan.run(plan.chunks[i]) for i in order]
    return plan, plan.combine(results), results


@pytest.fixture(scope="module", params=["ambiguity", "priview"])
def census_release(request):
    tech, data = technique_and_data(census(ROWS, seed=5), CENSUS_QI, "occupation", request.param, **PARAMS)
    _, release = release_of(tech, data, seed=3)
    return tech, shuffled(release, 1)


@pytest.mark.parametrize("chunk_rows", [1, 40, 900])
@pytest.mark.parametrize("strict", [False, True])
def test_any_chunk_size_and_order_gives_the_one_step_figures(census_release, chunk_rows, strict):
    tech, release = census_release
    # strict: thresholds below what the release meets, so failing counts add up over chunks
    alpha, beta = (Fraction(1, 1000), Fraction(1, 40)) if strict else (Fraction(1, 4), Fraction(1, 10))
    tech.params = tech.params.model_copy(update={"alpha": alpha, "beta": beta})
    expected = one_step(tech, release)
    assert [r.passed for r in expected] == [not strict, not strict]
    plan, privacy, results = chunked(tech, release, chunk_rows, seed=chunk_rows)
    assert len(plan.chunks) > 1
    assert privacy == expected
    assert tech.verify(release, {}) == expected  # privpub verify goes through the same chunks
    if strict:
        assert all(r.worst[key] > 1 for r, key in zip(expected, ("failing_groups", "failing_rows")))
    # the worst association is reached in several chunks: the tie is settled as in one step
    assert sum(r[1].value == Fraction(expected[1].value) for r in results) > 1


def test_chunks_hold_whole_group_ranges_of_about_chunk_rows(census_release):
    tech, release = census_release
    tables = tech.verified_tables(release)
    chunks = split_by_groups(tables, 300)
    total = sum(t.num_rows for t in tables.values())
    assert sum(t.num_rows for c in chunks for t in c.tables.values()) == total
    gid_ranges = []
    for c in chunks:
        gids = np.concatenate([t.column("gid").to_numpy() for t in c.tables.values()])
        gid_ranges.append((gids.min(), gids.max()))
        for name, t in c.tables.items():  # rows keep their table order and know their place in it
            assert np.all(np.diff(c.rows[name]) > 0)
            assert t.equals(tables[name].take(c.rows[name]))
        again = pickle.loads(pickle.dumps(c, protocol=5))  # as sent to a worker (Arrow IPC)
        assert all(again.tables[n].equals(t) and np.array_equal(again.rows[n], c.rows[n]) for n, t in c.tables.items())
        largest = max(np.bincount(gids))
        assert sum(t.num_rows for t in c.tables.values()) < 300 + largest
    assert all(hi < lo for (_, hi), (lo, _) in zip(gid_ranges, gid_ranges[1:]))


def test_a_release_of_at_most_chunk_rows_is_checked_in_one_step(census_release):
    tech, release = census_release
    tech.params = tech.params.model_copy(update={"alpha": Fraction(1, 4), "beta": Fraction(1, 10)})
    tech.spec.run.chunk_rows = sum(t.num_rows for t in release.tables.values())
    assert VERIFY.plan(tech, release, {}) is None
    assert len(tech.split_verify(release, {}).chunks) == 1
    assert tech.verify(release, {}) == one_step(tech, release)


# --- adversarial tables: groups missing from a table, repeated rows, the counting fallbacks ----


def _technique(name: str, qi: list[str], alpha: Fraction, beta: Fraction):
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "S",
                "qi": [{"name": q, "kind": "categorical"} for q in qi],
            },
            "technique": {"name": name, "alpha": str(alpha), "beta": str(beta)},
        }
    )
    return get_technique(spec)


@st.composite
def tiny_release(draw, name: str):
    """Several groups (gids with gaps), each a few rows; AT and ST drawn independently, so
    groups may repeat AT rows, carry ST counts > 1 or be missing from one table."""
    gids = draw(st.lists(st.integers(0, 30), min_size=1, max_size=6, unique=True))
    value = st.sampled_from("xyz")
    if name == "ambiguity":
        at = {q: Counter() for q in ("q0", "q1")}
        units = Counter()
        for g in gids:
            for q in at:
                for v in draw(st.sets(value, min_size=0 if g % 7 == 0 else 1, max_size=3)):
                    at[q][(v, g)] = 1
            for s in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=4)):
                units[(g, s)] += 1
        tables = {
            f"AT_{q}": pa.table(
                {q: pa.array([v for v, _ in c], pa.string()), "gid": pa.array([g for _, g in c], pa.int64())}
            )
            for q, c in at.items()
        }
        tables["ST"] = pa.table(
            {"gid": [g for g, _ in units], "S": [s for _, s in units], "count": list(units.values())}
        )
        return tables
    at_rows, units = [], Counter()
    for g in gids:
        size = draw(st.integers(1, 5))
        at_rows += [(a, g) for a in draw(st.lists(value, min_size=size, max_size=size))]
        for q, s in draw(st.lists(st.tuples(st.integers(0, 2), st.sampled_from("abc")), min_size=size, max_size=size)):
            units[(g, q, s)] += 1
    return {
        "AT": pa.table({"a": [a for a, _ in at_rows], "gid": [g for _, g in at_rows]}),
        "ST": pa.table(
            {
                "gid": [g for g, _, _ in units],
                "q": [q for _, q, _ in units],
                "S": [s for _, _, s in units],
                "count": list(units.values()),
            }
        ),
    }


@pytest.mark.parametrize("name, qi", [("ambiguity", ["q0", "q1"]), ("priview", ["a", "q"])])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_adversarial_tables_chunked_equal_one_step(name, qi, data):
    tables = data.draw(tiny_release(name))
    alpha = data.draw(st.sampled_from([Fraction(1, 3), Fraction(1, 2), Fraction(1)]))
    tech = _technique(name, qi, alpha, alpha)
    release = shuffled(Release(tables), data.draw(st.integers(0, 2**16)))
    expected = one_step(tech, release)
    _, privacy, _ = chunked(tech, release, data.draw(st.integers(1, 12)), data.draw(st.integers(0, 2**16)))
    assert privacy == expected
    assert tech.verify(release, {}) == expected


# --- on a Dask cluster and through the flow ------------------------------------------------------


def test_chunks_on_a_local_cluster_of_two_workers(census_release):
    from distributed import Client, LocalCluster

    tech, release = census_release
    tech.params = tech.params.model_copy(update={"alpha": Fraction(1, 4), "beta": Fraction(1, 10)})
    tech.spec.run.chunk_rows = 500
    plan = VERIFY.plan(tech, release, {})
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
        futures = client.map(plan.run, plan.chunks, pure=False)
        results = client.gather(futures)
        ran_on = {w for who in client.who_has(futures).values() for w in who}
    assert len(ran_on) == 2
    assert plan.combine(results) == one_step(tech, release)


@pytest.mark.parametrize("name, runner", [("ambiguity", "inprocess"), ("priview", "dask")])
def test_flow_maps_verify_chunks_and_stores_the_one_step_figures(prefect_server, tmp_path, monkeypatch, name, runner):
    mapped = []
    real_map = publish_mod._map_chunks

    def spy(technique, chunks, run, chunk_task=None):
        mapped.append((chunk_task.name, len(chunks)))
        return real_map(technique, chunks, run, chunk_task)

    monkeypatch.setattr(publish_mod, "_map_chunks", spy)
    census(ROWS, seed=5).to_csv(tmp_path / "census.csv", index=False)
    write_spec(tmp_path, technique=name, k=None, l=None, seed=4, extra="alpha = 0.25\nbeta = 0.1")
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(spec_path.read_text() + f'\n[run]\ntask_runner = "{runner}"\nworkers = 2\nchunk_rows = 700\n')
    release_id = publish(str(spec_path))
    assert [m for m, _ in mapped] == ["verify-chunk"] and mapped[0][1] > 1

    spec = load_spec(spec_path)
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, pd.read_csv(tmp_path / "census.csv"))
    rng = np.random.default_rng(np.random.SeedSequence(4).spawn(2)[0])
    expected = one_step(tech, tech.anonymize(data, tech.partition(data, rng), rng))
    metrics = Store(tmp_path / "privpub.duckdb").release(release_id)["metrics"]
    stored = {m.name: m for m in metrics.itertuples() if m.kind == "privacy"}
    for r in expected:
        assert (stored[r.model].text_value, bool(stored[r.model].passed)) == (r.value, r.passed)
        assert json.loads(stored[r.model].detail) == json.loads(json.dumps(r.worst, default=str))

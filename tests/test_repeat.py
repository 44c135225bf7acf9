"""Repeat protection (issue 29, item 6): the series' next release from the input and parameters
of its last one is refused with one line and an audit row, unless the seed is the same (that
release is returned) or the steward allows the repeat; a changed input or parameter publishes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import privpub
from privpub.flows import pipeline
from privpub.schemas.errors import PrivacyRefused
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import child_pythonpath, write_spec
from tests.test_drivers import ROOT, _without_a_server


def test_an_unchanged_input_is_refused_then_published_when_allowed(census_dir):
    spec = write_spec(census_dir, k=5, l=None, seed=None)
    first = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    with pytest.raises(PrivacyRefused, match=r"the input is unchanged since release #1 \(" + first):
        pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    log = Store(census_dir / "privpub.duckdb").audit_log()
    assert log.outcome.tolist()[-1] == "refused" and first in log.detail.iloc[-1]
    assert len(Store(census_dir / "privpub.duckdb").history(None)) == 1
    second = privpub.publish(str(spec), allow_repeat=True)
    assert second != first and len(Store(census_dir / "privpub.duckdb").history(None)) == 2


def test_the_same_seed_returns_the_release_and_a_change_publishes(census_dir):
    # the composition of releases with other parameters is not what this test is about
    spec = write_spec(census_dir, k=5, l=None, seed=4, extra='\n[series]\ncomposition = "warn"\n')
    first = pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None))
    assert pipeline.attempt(str(spec), None, None, driver=pipeline.Driver(None)) == first
    other = pipeline.attempt(
        str(spec), {"technique": {"k": 6}, "output": {"seed": 5}}, None, driver=pipeline.Driver(None)
    )
    assert other != first  # other parameters: not a repeat
    census(600, seed=3).iloc[:590].to_csv(census_dir / "census.csv", index=False)  # ten people left
    assert pipeline.attempt(str(spec), {"output": {"seed": 6}}, None, driver=pipeline.Driver(None)) not in (
        first,
        other,
    )


def test_a_randomized_technique_says_why_through_the_cli(census_dir, tmp_path):
    spec = write_spec(census_dir, technique="anatomy", k=None, l=3, seed=None)

    def cli(*flags):
        return _without_a_server(
            census_dir, tmp_path, "-m", "privpub.flows.cli", "publish", str(spec), "--quiet", *flags
        )

    assert cli().returncode == 0
    res = cli()
    assert res.returncode != 0 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr  # one line
    line = res.stderr.strip()
    assert "the input is unchanged since release #1" in line and "anatomy is randomized" in line
    assert "--allow-repeat" in line
    # allowed, the repeat reaches the series check, which shows why it was refused: the two
    # random groupings of the same people combined leave some with one possible value
    res = cli("--allow-repeat")
    assert res.returncode == 1 and "unchanged" not in res.stderr
    assert "series-composition-l reached 1" in res.stderr


def test_concurrent_publishes_of_one_series_run_one_after_the_other(census_dir, tmp_path):
    """Issue 25, item 5: eight publishes of one series started together all commit, #1..#8 in
    turn (before, those overtaken failed with "was committed while this one was computed").

    Promise: concurrent-publishes-one-after-another."""
    spec = write_spec(census_dir, k=5, l=None, seed=None, extra='\n[series]\ncomposition = "warn"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT), PRIVPUB_HOME=str(tmp_path / "no-service"), PREFECT_HOME=str(tmp_path / "p")
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "privpub.flows.cli", "publish", str(spec), "--quiet", "--allow-repeat"],
            cwd=census_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in outs]
    history = Store(census_dir / "privpub.duckdb").history()
    assert history.sequence.tolist() == list(range(1, 9))
    assert sorted(history.release_id) == sorted(out.strip() for out, _ in outs)
    assert not list(census_dir.glob("*.series-*.lock")) or all(
        "census" not in p.name for p in census_dir.glob("*.series-*.lock")
    )  # the lock file is named by a hash, not the series

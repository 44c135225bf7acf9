"""Shared fixtures. Prefect runs against one temporary server for the whole session, with result
storage pointed at a temporary folder so the secret-data test can scan it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PY_KEY_VALUE_DISABLE_BEARTYPE", "true")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
# a running `privpub server start` on this machine must not serve the tests' CLI runs
os.environ["PRIVPUB_HOME"] = tempfile.mkdtemp(prefix="privpub-home-")
_RESULTS = Path(tempfile.mkdtemp(prefix="privpub-prefect-results-"))
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_RESULTS)
os.environ["PREFECT_LOCAL_STORAGE_PATH"] = str(_RESULTS)

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from tests import suite_order  # noqa: E402
from tests.service_scenario import privpub_service  # noqa: E402,F401  (e2e and browser tests)

# `make test` (and so CI) draws the same examples every run: a property test's draws depend on
# the test alone, so a green main stays green and a failure reproduces. A search for new failing
# cases is a run of its own: `make test-explore` (PRIVPUB_HYPOTHESIS=explore: fresh draws, more
# of them; a failure it finds is kept as an @example).
settings.register_profile(
    "privpub",
    deadline=None,
    max_examples=60,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", settings.get_profile("privpub"), derandomize=False, max_examples=200)
settings.load_profile("explore" if os.environ.get("PRIVPUB_HYPOTHESIS") == "explore" else "privpub")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: a full-size sweep; `make test` runs a smaller variant, `make test-slow` this (docs/testing.md)",
    )


def pytest_collection_modifyitems(config, items):
    """`make test` (pytest-xdist): the longest test files first (tests/suite_order.py)."""
    suite_order.order(items)


@pytest.fixture(scope="session")
def prefect_server():
    """A temporary Prefect API for flow tests; yields its URL for subprocesses too."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield PREFECT_API_URL.value()


@pytest.fixture(scope="session")
def prefect_results_dir() -> Path:
    return _RESULTS


@pytest.fixture
def census_dir(tmp_path):
    """A small census CSV and a spec file writing into tmp_path."""
    from privpub.tasks.demo_data import census

    census(600, seed=3).to_csv(tmp_path / "census.csv", index=False)
    return tmp_path

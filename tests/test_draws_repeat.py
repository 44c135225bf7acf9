"""`make test` (so CI) draws the same property-test examples every run (tests/conftest.py): a
failure reproduces and a green main stays green; `make test-explore` draws fresh ones."""

from __future__ import annotations

import os
import subprocess
import sys

DRAWS = """
import tests.conftest
from hypothesis import given, strategies as st
seen = []
@given(st.integers(0, 10**9))
def draw(x):
    seen.append(x)
draw()
print(seen[:20])
"""


def _draws(explore: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PRIVPUB_HYPOTHESIS"}
    if explore:
        env["PRIVPUB_HYPOTHESIS"] = "explore"
    done = subprocess.run([sys.executable, "-c", DRAWS], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_the_suite_draws_the_same_examples_in_every_process():
    assert _draws(explore=False) == _draws(explore=False)


def test_explore_draws_fresh_examples():
    assert _draws(explore=True) != _draws(explore=True)

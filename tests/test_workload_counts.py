"""The workload's counts (tasks/evaluate/workload.py `Selections`): a pair's histogram summed
from a triple's (issue 43) counts exactly the rows a direct pass over them counts, whichever
histogram is asked for first, and the workload drawn is query for query the one drawn with
every histogram built from the rows."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.evaluate import workload as wl
from tests.helpers import technique_and_data


@pytest.fixture(scope="module")
def data():
    return technique_and_data(census(3000, seed=5), CENSUS_QI, "occupation", "generalization", k=1)[1]


def direct_count(data, attrs: list[int], picks: list[np.ndarray]) -> int:
    """The definition: rows whose code on each QI of `attrs` is one of its picked codes."""
    hit = np.ones(data.n, dtype=bool)
    for j, picked in zip(attrs, picks):
        hit &= picked[data.codes[:, j]]
    return int(hit.sum())


@pytest.mark.parametrize("order", ["pairs first", "triples first", "shuffled"])
def test_every_pair_and_triple_counts_the_rows_it_selects(data, order):
    rng = np.random.default_rng(len(order))
    d = len(data.domains)
    combos = [list(c) for m in (2, 3) for c in itertools.combinations(range(d), m)]
    if order == "triples first":
        combos.reverse()
    elif order == "shuffled":
        combos = [combos[i] for i in rng.permutation(len(combos))]
    select = wl.Selections(data)
    summed = 0
    for attrs in combos:
        summed += len(attrs) == 2 and select._triple_over(attrs) is not None
        for _ in range(3):
            picks = [rng.random(data.domains[j].size) < rng.uniform(0.1, 0.9) for j in attrs]
            assert select.count(attrs, picks) == direct_count(data, attrs, picks), attrs
    assert summed > 0  # some pairs were summed from a triple
    for attrs in combos:  # and every histogram kept is the rows' own
        assert np.array_equal(select.histogram(attrs), select.joint(attrs)), attrs


def test_the_workload_is_the_one_drawn_with_every_histogram_from_the_rows(data, monkeypatch):
    def queries() -> list[tuple]:
        rng = np.random.default_rng(3)
        made = wl.make_workload(data, rng, per_band=40)
        return [(q.selectivity, q.sql_where("occupation")) for q in made]

    summed = queries()
    monkeypatch.setattr(wl.Selections, "_triple_over", lambda self, pair: None)
    assert summed == queries() and len(summed) == 120

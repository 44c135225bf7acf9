"""make_workload's shortcut for a band no draw can meet (a table of fewer than 50 rows has no
count within [0.5%, 2%] of its rows): it advances the generator as the rejected draws would,
so the workload is query for query the one drawn without it, and the generator ends in the
same state. Larger tables never take it (tests/test_evaluate_pins.py pins their workload)."""

from __future__ import annotations

import numpy as np
import pytest

from privpub.tasks.demo_data import CENSUS_QI, RACE, census
from privpub.tasks.evaluate import workload as wl
from tests.helpers import technique_and_data

# a categorical QI with a hierarchy takes the ordered path of _condition
HIERARCHY_QI = [
    *[q for q in CENSUS_QI if q["name"] != "race"],
    {"name": "race", "kind": "categorical", "hierarchy": {"any": ["race-1", "other"], "other": RACE[1:]}},
]


def drawn(data, seed: int, per_band: int, shortcut: bool, monkeypatch) -> tuple[list[str], dict]:
    with monkeypatch.context() as m:
        if not shortcut:
            m.setattr(wl, "every_draw_rejected", lambda sel, n: False)
        rng = np.random.default_rng(seed)
        queries = wl.make_workload(data, rng, per_band=per_band)
    return [f"{q.selectivity}|{q.sql_where('occupation')}" for q in queries], rng.bit_generator.state


@pytest.mark.parametrize("rows", [1, 4, 5, 9, 10, 25, 49, 50])
@pytest.mark.parametrize("qi", [CENSUS_QI, HIERARCHY_QI, CENSUS_QI[:1]], ids=["census", "hierarchy", "one-qi"])
def test_the_shortcut_draws_the_queries_and_leaves_the_generator_as_without_it(monkeypatch, rows, qi):
    _, data = technique_and_data(census(rows, seed=rows), qi, "occupation", "generalization", k=1)
    for seed in (0, rows):  # 7 queries a band: 350 draws where none is accepted
        assert drawn(data, seed, 7, True, monkeypatch) == drawn(data, seed, 7, False, monkeypatch)
    assert wl.every_draw_rejected(0.01, rows) == (rows < 50)
    assert wl.every_draw_rejected(0.05, rows) == (rows < 10) and wl.every_draw_rejected(0.10, rows) == (rows < 5)


def test_the_default_workload_of_a_small_table_is_the_one_drawn_without_the_shortcut(monkeypatch):
    """100 queries a band (5,000 draws where none is accepted), as a publish draws them."""
    _, data = technique_and_data(census(13, seed=2), CENSUS_QI, "occupation", "generalization", k=1)
    fast = drawn(data, 0, 100, True, monkeypatch)
    assert fast == drawn(data, 0, 100, False, monkeypatch) and len(fast[0]) == 200

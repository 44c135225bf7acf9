"""generalization's [technique] split_width (issue 44 item 4, docs/techniques.md): "values"
measures a categorical QI by the values a group holds, (values - 1) / (domain - 1), when Mondrian
chooses where to split, instead of its code range in the sorted values ("range", the default: the
releases pinned by tests/test_release_hashes.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.partition import mondrian
from privpub.tasks.partition.mondrian import mondrian_partition
from privpub.tasks.partition.people import people_partition
from privpub.tasks.techniques.registry import get_technique
from tests.helpers import microdata, technique_and_data
from tests.test_mondrian import range_width, reference_mondrian

COLOURS = [f"c{i}" for i in range(10)]
QI = [
    {"name": "a", "kind": "numeric"},
    {"name": "b", "kind": "categorical"},
    {"name": "c", "kind": "ordinal", "order": ["x", "y", "z"]},
]


def values_width(codes, rows, j, d):
    """split_width "values": a categorical by the values the partition holds, others by range."""
    if d.kind == "categorical":
        return (len(np.unique(codes[rows, j])) - 1) / (d.size - 1) if d.size > 1 else 0.0
    return range_width(codes, rows, j, d)


def frames():
    row = st.tuples(st.integers(0, 9), st.sampled_from(COLOURS), st.sampled_from(["x", "y", "z"]))
    return st.lists(row, min_size=4, max_size=40).map(
        lambda rows: pd.DataFrame(
            {
                "pid": range(len(rows)),
                "a": [r[0] for r in rows],
                "b": [r[1] for r in rows],
                "c": [r[2] for r in rows],
                "s": ["v"] * len(rows),
            }
        )
    )


@pytest.mark.parametrize("presence_cells", [0, mondrian.PRESENCE_CELLS])  # the sorted path, the table path
@given(frame=frames(), k=st.integers(1, 4))
def test_values_width_equals_the_recursive_reference(frame, k, presence_cells):
    data = microdata(frame, QI, "s")
    old, mondrian.PRESENCE_CELLS = mondrian.PRESENCE_CELLS, presence_cells
    try:
        part = mondrian_partition(data, k, split_width="values")
    finally:
        mondrian.PRESENCE_CELLS = old
    ours = {frozenset(np.flatnonzero(part.group == g).tolist()) for g in range(part.n_groups)}
    assert ours == reference_mondrian(data, k, width=values_width)


def two_halves() -> pd.DataFrame:
    """a = 0: colours c0 and c9 only (the two ends of the sorted order: range 1, values 1/9) with
    c over x, y, z (width 1); a = 10: colours c1..c8, c = x. The root splits on a (every width 1:
    the first QI); the a = 0 half splits on b by "range" (a tie with c: the earlier QI) and on c
    by "values"."""
    n = 30
    return pd.DataFrame(
        {
            "pid": range(2 * n),
            "a": np.repeat([0, 10], n),
            "b": [("c0", "c9")[i % 2] for i in range(n)] + [COLOURS[1 + i % 8] for i in range(n)],
            "c": [("x", "y", "z")[i % 3] for i in range(n)] + ["x"] * n,
            "s": "v",
        }
    )


def half_split_dims(part) -> tuple[int, int]:
    tree = part.tree
    return int(tree.dim[0]), int(tree.dim[tree.left[0]])


def test_the_split_follows_the_width_asked_for():
    data = microdata(two_halves(), QI, "s")
    assert data.domains[1].size == 10
    assert half_split_dims(mondrian_partition(data, 5)) == (0, 1)
    assert half_split_dims(mondrian_partition(data, 5, split_width="values")) == (0, 2)


def test_people_partition_measures_by_values_too():
    frame = two_halves()
    data = microdata(frame, QI, "s")
    person = frame["pid"].to_numpy()
    assert half_split_dims(people_partition(data, person, 5)) == (0, 1)
    valued = people_partition(data, person, 5, split_width="values")
    assert half_split_dims(valued) == (0, 2)
    assert np.bincount(valued.group).min() >= 5


def test_the_technique_passes_split_width_to_mondrian():
    frame = two_halves()
    tech, data = technique_and_data(frame, QI, "s", "generalization", k=5, split_width="values")
    part = tech.partition(data, np.random.default_rng(0))
    assert half_split_dims(part) == (0, 2)
    assert (part.group == mondrian_partition(data, 5, split_width="values").group).all()
    default, _ = technique_and_data(frame, QI, "s", "generalization", k=5)
    assert default.params.split_width == "range"
    assert half_split_dims(default.partition(data, np.random.default_rng(0))) == (0, 1)


def spec(technique: dict, **sections):
    return spec_from_dict(
        {
            "dataset": {"name": "t", "input": "x.parquet", "person_id": "pid", "sensitive": "s", "qi": QI},
            "technique": {"name": "generalization", "k": 2, **technique},
            **sections,
        }
    )


def test_an_unknown_split_width_is_refused_in_one_line():
    with pytest.raises(SpecError) as err:
        get_technique(spec({"split_width": "wide"}))
    assert "split_width" in str(err.value) and "\n" not in str(err.value)
    assert '"range", "values"' in str(err.value)


def test_values_with_dask_is_refused_before_any_work():
    with pytest.raises(SpecError) as err:
        get_technique(spec({"split_width": "values"}, run={"task_runner": "dask"}))
    assert str(err.value).startswith('[technique] split_width = "values" runs in memory only')
    get_technique(spec({"split_width": "range"}, run={"task_runner": "dask"}))  # the default's behaviour

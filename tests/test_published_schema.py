"""The published-table schema's list check (schemas/published.py `_list_of`): each cell of a
generalized QI a non-empty list of the QI's domain values. One published cell changed at a time,
just inside and just outside."""

from __future__ import annotations

import pyarrow as pa
import pytest

from privpub.schemas.errors import PublishedTableError
from privpub.schemas.input import validate_input
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.types import Release
from privpub.tasks.demo_data import census
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.verify.published import check_published
from tests.helpers import rng
from tests.test_validation import SPEC


@pytest.fixture(scope="module")
def published():
    tech = get_technique(SPEC)
    data = Microdata.from_frame(SPEC, validate_input(census(300, seed=2), SPEC))
    return tech, tech.anonymize(data, tech.partition(data, rng()), rng()).tables["table"]


def _with_cell(table: pa.Table, column: str, row: int, cell) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = cell
    i = table.column_names.index(column)
    return table.set_column(i, column, pa.array(values, table.schema.field(column).type))


def _ordinal(spec):
    return next(q for q in spec.dataset.qi if q.kind == "ordinal")


def test_a_cell_of_domain_values_passes_and_one_outside_is_refused(published):
    tech, table = published
    q = _ordinal(SPEC)
    inside = _with_cell(table, q.name, 5, [q.order[0], q.order[-1]])  # any values of the order
    check_published(Release({"table": inside}), SPEC, tech)
    outside = _with_cell(table, q.name, 5, [q.order[0], "not-a-" + q.name])
    with pytest.raises(PublishedTableError, match=f"fails its schema.*{q.name}"):
        check_published(Release({"table": outside}), SPEC, tech)


@pytest.mark.parametrize("cell", [[], None])
def test_an_empty_or_missing_list_is_refused(published, cell):
    tech, table = published
    for q in SPEC.dataset.qi:
        if q.kind == "numeric":
            continue
        bad = _with_cell(table, q.name, 0, cell)
        with pytest.raises(PublishedTableError, match=q.name):
            check_published(Release({"table": bad}), SPEC, tech)

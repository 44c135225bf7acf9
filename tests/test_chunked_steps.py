"""The typed chunked steps (tasks/core/technique.py ChunkedStep): `capabilities.chunked` derived
from the split hooks a class overrides, and the flow's table asking for a step's chunks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privpub.plugin import (
    UTILITY,
    VERIFY,
    Capabilities,
    ChunkPlan,
    PrivacyResult,
    Release,
    Technique,
    UtilityEstimate,
    VerifyContext,
)
from privpub.tasks.techniques.registry import registered

# what each built-in declared by hand before the hooks were typed (the flows' behaviour follows it)
DECLARED = {
    "anatomy": {"verify"},
    "ambiguity": {"verify"},
    "priview": {"verify"},
    "muco": {"anonymize", "verify", "utility"},
    "butterfly": {"verify"},
    "union-qid": {"verify"},
    "serial": {"verify"},
    "generalization": set(),
}


def test_built_ins_chunk_the_steps_they_declared_before():
    techniques = registered()
    assert {name: set(techniques[name].capabilities.chunked) for name in DECLARED} == DECLARED


def test_chunked_is_not_an_argument():
    with pytest.raises(TypeError, match="chunked"):
        Capabilities(chunked=frozenset({"verify"}))  # type: ignore[call-arg]


def _count_rows(table: pa.Table) -> int:
    return int(table.num_rows)


def _at_least_two(counts: list[int]) -> list[PrivacyResult]:
    return [PrivacyResult("rows", sum(counts), 2, sum(counts) >= 2)]


class _Rows(Technique):
    """Checks that a table has two rows or more, one chunk per row (a toy, never registered)."""

    small = 0

    def split_verify(self, release: Release, context: VerifyContext) -> ChunkPlan[pa.Table, int, list[PrivacyResult]]:
        table = release.tables["table"]
        return ChunkPlan([table.slice(i, 1) for i in range(table.num_rows)], _count_rows, _at_least_two)

    def one_piece(self, release: Release) -> bool:
        rows: int = release.tables["table"].num_rows
        return rows <= self.small


class _RowsAndUtility(_Rows):
    def split_utility(self, release: Release, data: object, workload: object) -> ChunkPlan[int, int, UtilityEstimate]:
        return ChunkPlan([1, 2], lambda c: c, lambda parts: UtilityEstimate(np.array(parts), {"chunks": 2.0}))


def _release(rows: int) -> Release:
    return Release({"table": pa.table({"x": list(range(rows))})})


@pytest.mark.parametrize("rows, passed", [(1, False), (2, True), (3, True)])
def test_a_split_verify_is_the_verify_step(rows, passed):
    """Overriding split_verify is enough: chunked says verify, `verify` runs the chunks, and the
    flow's plan (VERIFY) maps the same chunks; one_piece keeps a small release whole."""
    tech = object.__new__(_Rows)  # no spec needed by the toy
    assert _Rows.capabilities.chunked == {"verify"}
    expected = [PrivacyResult("rows", rows, 2, passed)]
    assert tech.verify(_release(rows), VerifyContext()) == expected
    plan = VERIFY.plan(tech, _release(rows), VerifyContext())
    assert plan is not None and len(plan.chunks) == rows
    assert plan.combine(list(reversed([plan.run(c) for c in reversed(plan.chunks)]))) == expected
    tech.small = rows  # now small enough: one piece
    assert VERIFY.plan(tech, _release(rows), VerifyContext()) is None
    assert VERIFY.run(tech, _release(rows), VerifyContext()) == expected


def test_a_subclass_adding_a_hook_adds_its_step():
    assert _RowsAndUtility.capabilities.chunked == {"verify", "utility"}
    tech = object.__new__(_RowsAndUtility)
    estimate, figures = UTILITY.run(tech, _release(3), None, [])
    assert estimate.tolist() == [1, 2] and figures == {"chunks": 2.0}
    # a technique that splits nothing: the flow gets no plan, the step runs whole
    assert Technique.capabilities.chunked == frozenset()
    assert VERIFY.plan(object.__new__(Technique), _release(3), VerifyContext()) is None

"""PriView's distinct-worlds count taken in one order of rows and columns (presence.py
`_count_without`) equals the count of the matrices as given: the number of non-negative integer
matrices with given row and column sums and zeros in one row's banned cells does not depend on
the order of the rows or of the columns."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.tasks.techniques.ambiguity.presence import _contingency_count, _count_without


@st.composite
def margins(draw):
    rows = draw(st.lists(st.integers(0, 3), min_size=1, max_size=5))
    total = sum(rows)
    n_cols = draw(st.integers(1, 5))
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=n_cols - 1, max_size=n_cols - 1)))
    cols = [b - a for a, b in zip([0, *cuts], [*cuts, total])]
    r = draw(st.integers(0, len(rows) - 1))
    banned = draw(st.lists(st.integers(0, n_cols - 1), unique=True, max_size=n_cols))
    return tuple(rows), tuple(cols), r, banned


@settings(max_examples=300, deadline=None)
@given(margins())
def test_the_count_in_canonical_order_is_the_count_as_given(case):
    rows, cols, r, banned = case
    direct = _contingency_count(rows, cols, frozenset((r, c) for c in banned))
    assert _count_without(rows, cols, r, banned) == direct


def test_a_worked_count():
    """Row sums (2, 1), column sums (1, 2): [[1, 1], [0, 1]] and [[0, 2], [1, 0]]; with cell
    (0, 0) banned only the second remains, which has a zero at (1, 1) too; with (0, 1) banned,
    neither."""
    assert _contingency_count((2, 1), (1, 2), frozenset()) == 2
    assert _count_without((2, 1), (1, 2), 0, [0]) == 1
    assert _count_without((2, 1), (1, 2), 1, [1]) == 1
    assert _contingency_count((2, 1), (1, 2), frozenset({(0, 0), (1, 1)})) == 1
    assert _count_without((2, 1), (1, 2), 0, [1]) == 0

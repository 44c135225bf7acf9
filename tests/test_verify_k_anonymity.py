"""The k-anonymity / l-diversity verifier agrees with an SQL GROUP BY over the published columns
and with pycanon, on published tables of random data."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pyarrow as pa
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from privpub.tasks.verify.k_anonymity import k_anonymity, l_diversity
from privpub.tasks.verify.published import equivalence_classes, qi_columns
from tests.helpers import microdata, release_of

QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "edu", "kind": "ordinal", "order": ["a", "b", "c", "d"]},
]


def published(rows, k, l, seed):
    frame = pd.DataFrame(rows, columns=["age", "sex", "edu", "s"])
    frame.insert(0, "pid", range(len(frame)))
    data = microdata(frame, QI, "s", k=k, l=l)
    from privpub.tasks.techniques.registry import get_technique

    tech = get_technique(data.spec)
    _, release = release_of(tech, data, seed)
    return release.tables["table"]


rows = st.lists(
    st.tuples(
        st.integers(18, 80),
        st.sampled_from(["f", "m"]),
        st.sampled_from("abcd"),
        st.sampled_from(["flu", "hiv", "cold", "asthma"]),
    ),
    min_size=6,
    max_size=60,
)


@settings(max_examples=40)
@given(rows, st.integers(1, 4), st.integers(0, 3))
def test_verifier_equals_sql_and_pycanon(rows, k, seed):
    assume(len(rows) >= k and len({r[3] for r in rows}) >= 2)
    table = published(rows, k, 2, seed)
    cols = qi_columns(table, ["age", "sex", "edu"])
    kres, lres = k_anonymity(table, cols, k), l_diversity(table, cols, "s", 2)
    sql = equivalence_classes(table, cols, "s")
    assert kres.value == min(sql.column("size").to_pylist())
    assert lres.value == min(sql.column("distinct_sensitive").to_pylist())
    assert kres.worst["classes"] == sql.num_rows
    # pycanon reads generalized cells as values: lists become strings
    frame = table.to_pandas()
    for c in ("sex", "edu"):
        frame[c] = frame[c].map(lambda v: "|".join(v))
    assert anonymity.k_anonymity(frame, cols) == kres.value
    assert anonymity.l_diversity(frame, cols, ["s"]) == lres.value
    assert kres.passed and lres.passed


def test_a_tampered_table_fails_k():
    table = published([(20 + i, "f", "a", ["flu", "hiv"][i % 2]) for i in range(12)], 3, 2, 0)
    frame = table.to_pandas()
    frame.loc[0, "age_lo"] = -1  # one row no longer looks like its class
    import pyarrow as pa

    tampered = pa.Table.from_pandas(frame, preserve_index=False)
    cols = qi_columns(tampered, ["age", "sex", "edu"])
    res = k_anonymity(tampered, cols, 3)
    assert res.value == 1 and not res.passed and res.worst["class"]["age_lo"] == -1


# Cells an adversary's table may hold: empty lists and items, nulls, order differences.
list_cells = st.one_of(st.none(), st.lists(st.sampled_from(["", "a", "b", "ab", "a b"]), max_size=3))


@settings(max_examples=150)
@given(st.lists(st.tuples(list_cells, st.one_of(st.none(), st.integers(0, 3))), min_size=1, max_size=30))
def test_class_ids_equal_sql_grouping_on_awkward_cells(cells):
    """Equal cells share a class and different cells never do, exactly as SQL GROUP BY sees them."""
    import pyarrow as pa

    from privpub.tasks.verify.published import class_ids

    table = pa.table(
        {"c": pa.array([c for c, _ in cells], pa.list_(pa.string())), "n": pa.array([n for _, n in cells], pa.int64())}
    )
    ids, n = class_ids(table, ["c", "n"])
    assert n == equivalence_classes(table, ["c", "n"]).num_rows
    keys = [(None if c is None else tuple(c), v) for c, v in cells]
    for i in range(len(cells)):
        for j in range(len(cells)):
            assert (ids[i] == ids[j]) == (keys[i] == keys[j])


def test_a_list_item_holding_the_separator_is_refused():
    import pyarrow as pa
    import pytest

    from privpub.tasks.verify.published import class_ids

    table = pa.table({"c": pa.array([["a\x1fb"], ["a", "b"]], pa.list_(pa.string()))})
    with pytest.raises(ValueError, match="U\\+001F"):
        class_ids(table, ["c"])


# A published-looking table drawn directly (any k, any l, not a technique's output): QI cells
# `band` and `sex`, sensitive `s`.
raw_tables = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(["f", "m"]), st.sampled_from(["flu", "hiv", "cold", "asthma"])),
    min_size=1,
    max_size=40,
)


def raw_table(rows) -> pa.Table:
    band, sex, s = zip(*rows)
    return pa.table({"band": list(band), "sex": list(sex), "s": list(s)})


@given(raw_tables)
def test_k_verdict_passes_at_pycanons_k_and_fails_at_one_more(rows):
    """pycanon's k and a count from the definition (the smallest group of equal QI cells) agree;
    the verifier accepts exactly that k and refuses k + 1."""
    k = anonymity.k_anonymity(pd.DataFrame(rows, columns=["band", "sex", "s"]), ["band", "sex"])
    assert k == min(Counter((b, x) for b, x, _ in rows).values())
    table = raw_table(rows)
    at, above = k_anonymity(table, ["band", "sex"], k), k_anonymity(table, ["band", "sex"], k + 1)
    assert (at.value, at.passed) == (k, True)
    assert (above.value, above.passed) == (k, False)


@given(raw_tables)
def test_l_verdict_passes_at_pycanons_l_and_fails_at_one_more(rows):
    """pycanon's distinct l and a count from the definition (the fewest distinct sensitive values
    in a group) agree; the verifier accepts exactly that l and refuses l + 1."""
    groups: dict[tuple, set] = {}
    for b, x, s in rows:
        groups.setdefault((b, x), set()).add(s)
    l = anonymity.l_diversity(pd.DataFrame(rows, columns=["band", "sex", "s"]), ["band", "sex"], ["s"])
    assert l == min(len(v) for v in groups.values())
    table = raw_table(rows)
    at, above = l_diversity(table, ["band", "sex"], "s", l), l_diversity(table, ["band", "sex"], "s", l + 1)
    assert (at.value, at.passed) == (l, True)
    assert (above.value, above.passed) == (l, False)

"""Issue 43's faster paths give what the code they replaced gave: each against that code (kept
here as the reference), on random inputs and on the edge cases, so a speed-up cannot change a
figure (the end-to-end pins: tests/test_evaluate_pins.py, the published-table hash pins)."""

from __future__ import annotations

import codecs
import mmap

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privpub.schemas.input import MAX_CELL_CHARS, _first_non_utf8, _holds_hex, _short_text
from privpub.tasks.compose.algebra import distinct_keys, lex_order
from privpub.tasks.core.microdata import QIDomain
from privpub.tasks.evaluate.workload import _condition
from privpub.tasks.risk import _best_entries
from privpub.tasks.verify.published import distinct_per_class


def _python_first_non_utf8(data: bytes) -> int | None:
    try:
        codecs.decode(data, "utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"a,b\n1,2\n",
        "é,ü\n😀\n".encode(),
        b"a\xffb",
        "é".encode()[:1],  # a character cut at the end of the file
        b"\xed\xa0\x80",  # a UTF-16 surrogate: not UTF-8
        b"\xc0\x80",  # an overlong NUL
        b"\xf4\x90\x80\x80",  # above U+10FFFF
        b"ok\x00nul",  # NUL is UTF-8 (refused separately)
    ],
)
def test_the_utf8_check_finds_the_byte_pythons_decoder_finds(tmp_path, data):
    path = tmp_path / "f.csv"
    path.write_bytes(data + b"x")  # mmap cannot map an empty file
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert _first_non_utf8(mapped) == _python_first_non_utf8(data + b"x")


@pytest.mark.parametrize(
    ("data", "found"),
    [(b"0x1F", True), (b"a,0X2\n", True), (b"x0", False), (b"0 x", False), (b"sex,0\n", False), (b"0\xd8\xb8", False)],
)
def test_the_hex_scan_finds_0x_and_0X_only(tmp_path, data, found):
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    assert _holds_hex(path) is found
    assert found == (b"0x" in data or b"0X" in data)


def test_text_length_passes_by_bytes_and_counts_characters_past_them():
    assert (
        _short_text(pd.Series(["é" * MAX_CELL_CHARS, "b", None])) is True
    )  # more bytes than the limit, not characters
    longer = _short_text(pd.Series(["a" * (MAX_CELL_CHARS + 1), "b", None]))
    assert list(longer) == [False, True, True]


@pytest.mark.parametrize("bound", [1, 7, 300, (1 << 22) + 1, 1 << 40])
def test_distinct_keys_equal_numpys_unique(bound):
    rng = np.random.default_rng(bound % 1000)
    for n in (0, 1, 50, 5000):
        keys = rng.integers(0, bound, n).astype(np.int64)
        for mine, numpys in zip(distinct_keys(keys, bound), np.unique(keys, return_inverse=True, return_counts=True)):
            assert mine.dtype == numpys.dtype and np.array_equal(mine, numpys)


def test_each_values_best_group_is_the_lexsorts_first():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n_groups, m = int(rng.integers(1, 25)), int(rng.integers(1, 7))
        cells = rng.choice(n_groups * m, size=int(rng.integers(1, n_groups * m + 1)), replace=False)
        cells.sort()
        g, v = cells // m, cells % m
        n = rng.integers(1, 4, len(g))
        size = np.bincount(g, weights=n, minlength=n_groups).astype(np.int64) + rng.integers(0, 3, n_groups)
        share = n / size[g]
        order = np.lexsort((g, -share, v))  # the former rule: highest share, then the first group
        expected = order[np.flatnonzero(np.concatenate(([True], v[order][1:] != v[order][:-1])))]
        assert sorted(_best_entries(g, v, share, m).tolist()) == sorted(expected.tolist())


@pytest.mark.parametrize(("n_classes", "width"), [(5, 3), (3000, 2000)])  # dense, then hashed
def test_distinct_values_per_class_count_the_pairs(n_classes, width):
    rng = np.random.default_rng(n_classes)
    ids = rng.integers(0, n_classes, 4000)
    codes = rng.integers(0, width, 4000)
    expected = np.bincount(pd.unique(ids * width + codes) // width, minlength=n_classes)
    assert np.array_equal(distinct_per_class(ids, codes, n_classes, width), expected)


def _former_categorical_codes(dom: QIDomain, freq: np.ndarray, coverage: float, rng: np.random.Generator):
    picked = np.zeros(dom.size, dtype=bool)
    chosen, mass = [], 0.0
    for c in rng.permutation(dom.size):
        if freq[c] == 0:
            continue
        chosen.append(c)
        mass += freq[c]
        if mass >= coverage:
            break
    picked[chosen] = True
    return picked


def test_a_categorical_conditions_codes_and_the_generators_state_are_the_former_loops():
    rng = np.random.default_rng(11)
    for _ in range(500):
        size = int(rng.integers(1, 40))
        counts = rng.integers(0, 5, size) * (rng.random(size) < 0.8)
        counts[0] += counts.sum() == 0
        freq = counts / counts.sum()
        coverage = float(rng.choice([rng.random(), 1.0, 0.01, freq[0], 2.0]))
        dom = QIDomain("q", "categorical", np.array([f"v{i}" for i in range(size)], dtype=object))
        seed = int(rng.integers(1 << 30))
        before, after = np.random.default_rng(seed), np.random.default_rng(seed)
        expected = _former_categorical_codes(dom, freq, coverage, before)
        cond, picked = _condition(dom, freq, coverage, after)
        assert np.array_equal(picked, expected)
        assert cond.values == frozenset(str(v) for v in dom.values[expected])
        assert before.integers(1 << 62) == after.integers(1 << 62)  # the next draws are the same


def test_the_composition_order_is_lexsorts_sorted_or_not():
    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 40, 3000):
        primary, secondary = rng.integers(0, 30, n), rng.integers(0, 4, n)
        expected = np.lexsort((secondary, primary))
        assert np.array_equal(lex_order(primary, secondary), expected)
        ordered_p, ordered_s = primary[expected], secondary[expected]  # in order: the identity, as lexsort's
        assert np.array_equal(lex_order(ordered_p, ordered_s), np.lexsort((ordered_s, ordered_p)))


@pytest.mark.parametrize(
    "values",
    [
        np.array([5, 3, 3, 90, 0], dtype=np.int64),
        np.array([-7, 2, -7, 40], dtype=np.int8),
        np.array([2**40, 2**40 + 3, 2**40], dtype=np.int64),  # far from zero, a small span
        np.array([0, 10**9, 5], dtype=np.int64),  # a span too wide: the sort, as before
        np.array([2**60, 2**60 + 1], dtype=np.int64),  # not exact as floats: the sort, as before
        np.array([1, 200, 7, 7], dtype=np.uint8),
        np.array([3], dtype=np.uint64),
    ],
)
def test_an_integer_qis_domain_and_codes_are_the_sorts_and_searchsorteds(values):
    """A numeric QI of integers: its distinct values counted over their span and its codes looked
    up there equal np.unique of the floats and searchsorted (the code they replaced)."""
    from privpub.schemas.spec import QISpec
    from privpub.tasks.core.microdata import distinct_values, domain_from_distinct, encode

    rng = np.random.default_rng(int(values[0]) % 1000)
    column = pd.Series(rng.choice(values, size=500))
    q = QISpec(name="x", kind="numeric")
    floats = column.to_numpy(dtype=float)
    distinct = distinct_values(q, column)
    assert distinct.dtype == np.float64 and np.array_equal(distinct, np.unique(floats))
    dom = domain_from_distinct(q, distinct)
    assert np.array_equal(encode(dom, column), np.searchsorted(dom.values, floats).astype(np.int32))
    # against a domain the column's values are not all in (a table read in parts, codes of a part)
    wider = QIDomain("x", "numeric", np.unique(np.concatenate([distinct[::2], [float(values.max()) + 0.5]])))
    assert np.array_equal(encode(wider, column), np.searchsorted(wider.values, floats).astype(np.int32))


def test_the_generalized_columns_taken_on_threads_are_the_takes_one_after_the_other():
    """Anonymize's group-to-row takes, on Arrow's threads, give the arrays taken one by one."""
    import pyarrow as pa

    from privpub.tasks.partition.generalized_table import rows_of_groups

    rng = np.random.default_rng(4)
    lists = pa.array([[f"v{j}" for j in range(i % 4)] for i in range(300)], pa.list_(pa.string()))
    per_group = {"a": lists, "b": pa.array(rng.integers(0, 90, 300)), "c": lists.slice(0, 300)}
    idx = pa.array(rng.integers(0, 300, 5000))
    got = rows_of_groups(per_group, idx)
    assert list(got) == ["a", "b", "c"]
    assert all(got[k].equals(per_group[k].take(idx)) for k in per_group)


def _tuple_classes(cells: list) -> list:
    """The class of each cell as the definition reads it: equal lists (in order), or both null."""
    seen: dict = {}
    return [seen.setdefault(None if c is None else tuple(c), len(seen)) for c in cells]


@given(
    st.lists(
        st.one_of(st.none(), st.lists(st.sampled_from(["", "a", "b", "ab", "é", "a b"]), max_size=4)),
        min_size=1,
        max_size=30,
    ),
    st.integers(0, 3),
)
def test_list_codes_from_packed_item_codes_are_the_classes_of_the_lists(cells, cut):
    """_cell_codes (items' codes packed as bytes) gives equal codes exactly to equal lists, on a
    plain, a sliced and a chunked column, and on a null list whose offsets still span items."""
    from privpub.tasks.verify.published import _cell_codes

    def same_classes(codes, expected):
        assert [codes[i] == codes[j] for i in range(len(codes)) for j in range(len(codes))] == [
            expected[i] == expected[j] for i in range(len(expected)) for j in range(len(expected))
        ]

    array = pa.array(cells, pa.list_(pa.string()))
    same_classes(_cell_codes(array).tolist(), _tuple_classes(cells))
    same_classes(
        _cell_codes(array.slice(min(cut, len(cells) - 1))).tolist(), _tuple_classes(cells[min(cut, len(cells) - 1) :])
    )
    chunked = pa.chunked_array([array.slice(0, len(cells) // 2), array.slice(len(cells) // 2)])
    same_classes(_cell_codes(chunked).tolist(), _tuple_classes(cells))
    # the first list made null without emptying its span of items (Arrow allows it)
    offsets = np.array([0, *np.cumsum([len(c or []) for c in cells])], dtype=np.int32)
    items = pa.array([v for c in cells for v in (c or [])], pa.string())
    mask = np.array([True] + [c is None for c in cells[1:]])
    hidden = pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(mask))
    expected = _tuple_classes([None, *cells[1:]])
    same_classes(_cell_codes(hidden).tolist(), expected)


def _coded(cells: list, dictionary: list[str] | None = None) -> pa.ListArray:
    """`cells` as lists of dictionary codes (over `dictionary`, which may list a value twice)."""
    values = dictionary if dictionary is not None else sorted({v for c in cells for v in (c or [])})
    where = {v: i for i, v in reversed(list(enumerate(values)))}
    offsets = np.array([0, *np.cumsum([len(c or []) for c in cells])], dtype=np.int32)
    indices = pa.array([where[v] for c in cells for v in (c or [])], pa.int8())
    items = pa.DictionaryArray.from_arrays(indices, pa.array(values, pa.string()))
    mask = pa.array([c is None for c in cells]) if any(c is None for c in cells) else None
    return pa.ListArray.from_arrays(pa.array(offsets), items, mask=mask)


@given(
    st.lists(
        st.one_of(st.none(), st.lists(st.sampled_from(["", "a", "b", "ab", "é"]), max_size=4)),
        min_size=1,
        max_size=30,
    ),
    st.booleans(),
)
def test_list_codes_of_dictionary_coded_cells_are_those_of_their_text(cells, doubled):
    """A generalized table held with dictionary-coded items (generalized_table's coded_lists) gets
    the classes its text gets, also when the dictionary lists a value twice."""
    from privpub.tasks.verify.published import _cell_codes

    dictionary = None
    if doubled:  # every value listed twice; the first of each pair is the one the cells point at
        dictionary = [v for v in sorted({v for c in cells for v in (c or [])}) for _ in (0, 1)]
    coded = _coded(cells, dictionary)
    assert coded.to_pylist() == cells
    codes = _cell_codes(coded).tolist()
    expected = _tuple_classes(cells)
    assert [codes[i] == codes[j] for i in range(len(codes)) for j in range(len(codes))] == [
        expected[i] == expected[j] for i in range(len(expected)) for j in range(len(expected))
    ]


def test_a_dictionary_coded_null_item_is_refused_as_a_text_one_is():
    from privpub.tasks.verify.published import _cell_codes

    items = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int8()), pa.array(["a", None], pa.string()))
    cells = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), items)
    with pytest.raises(ValueError, match="null item"):
        _cell_codes(cells)
    with pytest.raises(ValueError, match="null item"):
        _cell_codes(cells.cast(pa.list_(pa.string())))


@pytest.mark.parametrize("sensitive_type", [pa.string(), pa.large_string()])
def test_a_table_with_coded_lists_is_written_as_the_text_it_stands_for(tmp_path, sensitive_type):
    """state/store.py write_parquet: the file reads back exactly as the decoded table written with
    its schema (a column that would not read back the same without it: decoded and written so)."""
    import pyarrow.parquet as pq

    from privpub.state.store import write_parquet

    cells = [["a", "b"], ["b"], ["a", "b"], ["c"]]
    table = pa.table({"q": _coded(cells), "n": pa.array([1, 2, 3, 4]), "s": pa.array(list("wxyz"), sensitive_type)})
    plain = table.cast(
        pa.schema([pa.field("q", pa.list_(pa.string())), table.schema.field("n"), table.schema.field("s")])
    )
    write_parquet(table, tmp_path / "coded.parquet")
    pq.write_table(plain, tmp_path / "plain.parquet")
    back, expected = pq.read_table(tmp_path / "coded.parquet"), pq.read_table(tmp_path / "plain.parquet")
    assert back.schema.remove_metadata().equals(expected.schema.remove_metadata())
    assert back.equals(expected) and back.column("q").to_pylist() == cells


def test_the_domain_check_reads_dictionary_coded_items():
    """schemas/published.py: a coded item outside the QI's domain is found as a text one is."""
    from privpub.schemas.published import _list_of

    check = _list_of({"a", "b"})
    for cells in ([["a"], ["a", "b"]], [["a"], ["c", "b"], []]):
        coded = pd.Series(pa.chunked_array([_coded(cells)]).to_pandas(types_mapper=pd.ArrowDtype))
        text = pd.Series(
            pa.chunked_array([pa.array(cells, pa.list_(pa.string()))]).to_pandas(types_mapper=pd.ArrowDtype)
        )
        assert check._check_fn(coded).tolist() == check._check_fn(text).tolist()
    assert check._check_fn(coded).tolist() == [True, False, False]


def test_coded_items_keep_every_cell_of_a_list_array_sliced_or_holding_nulls():
    from privpub.tasks.partition.generalized_table import coded_items

    lists = pa.array([["a", "b"], None, ["c"], [], ["b", "a"]], pa.list_(pa.string()))
    for array in (lists, lists.slice(1), lists.slice(2, 2)):
        coded = coded_items(array)
        assert pa.types.is_dictionary(coded.type.value_type)
        assert coded.to_pylist() == array.to_pylist()
    assert coded_items(pa.array([1, 2])).to_pylist() == [1, 2]  # not a list: as it is


@given(
    cells=st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.sampled_from("abcd")), max_size=3))),
    start=st.integers(0, 3),
    extra=st.lists(st.sampled_from("abcdz"), max_size=2),
)
def test_the_domain_check_is_its_definition_on_text_coded_and_sliced_lists(cells, start, extra):
    """schemas/published.py `_list_of`: a cell passes iff it is a non-empty list of domain values,
    for text and dictionary-coded items (the dictionary may list unused and outside values), a
    slice of the lists, null lists and null items."""
    from privpub.schemas.published import _list_of

    check = _list_of({"a", "b", "c"})
    present = sorted({v for c in cells for v in (c or []) if v is not None})
    dictionary = pa.array(present + [v for v in extra if v not in present], pa.string())
    text = pa.array(cells, pa.list_(pa.string()))
    where = {v: i for i, v in enumerate(dictionary.to_pylist())}
    codes = pa.array(
        [None if c is None else [None if v is None else where[v] for v in c] for c in cells], pa.list_(pa.int8())
    )
    coded = pa.ListArray.from_arrays(
        codes.offsets, pa.DictionaryArray.from_arrays(codes.values, dictionary), mask=codes.is_null()
    )
    for lists in (text, coded):
        part = lists.slice(min(start, len(cells)))
        expected = [c is not None and len(c) > 0 and all(v in {"a", "b", "c"} for v in c) for c in part.to_pylist()]
        series = pd.Series(pa.chunked_array([part], part.type).to_pandas(types_mapper=pd.ArrowDtype))
        assert check._check_fn(series).tolist() == expected

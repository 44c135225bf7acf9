"""The CSV reader (issue 27): Arrow's reader where it gives what pandas' reader gives, pandas'
otherwise. For every file below the validated frame equals the one pandas' read_csv gives, and
the refusals keep their messages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privpub.schemas.errors import InputError
from privpub.schemas.input import PANDAS_NA_VALUES, _read_csv_with_arrow, read_input, validate_input
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.demo_data import census, census_spec


def _spec(folder, name="census.csv", **qi_kinds):
    d = census_spec(name, k=3, l=None)
    for q in d["dataset"]["qi"]:
        if q["name"] in qi_kinds:
            q.clear()
            q.update(name=next(k for k in qi_kinds if k == q.get("name", k)), kind=qi_kinds[q.get("name")])
    return spec_from_dict(d, base_dir=folder)


def _pandas_frame(spec):
    """pandas' reader as privpub calls it when Arrow's cannot give the same: text QIs as text."""
    text = {q.name: str for q in spec.dataset.qi if q.kind != "numeric"}
    raw = pd.read_csv(spec.path(spec.dataset.input), skipinitialspace=True, encoding="utf-8", dtype=text)
    return validate_input(raw, spec)


def test_the_missing_spellings_are_pandas_own():
    from pandas._libs.parsers import STR_NA_VALUES

    assert set(PANDAS_NA_VALUES) == set(STR_NA_VALUES)


def test_a_census_file_reads_as_pandas_reads_it(tmp_path):
    census(3000, seed=4).to_csv(tmp_path / "census.csv", index=False)
    spec = _spec(tmp_path)
    assert _read_csv_with_arrow(spec.path("census.csv"), spec) is not None  # the fast path ran
    pd.testing.assert_frame_equal(validate_input(read_input(spec), spec), _pandas_frame(spec))


@pytest.mark.parametrize(
    "change, fast",
    [
        ("dates", True),  # text that looks like dates stays text
        ("booleans", True),  # text that looks like booleans stays text, in both readers
        ("floats", True),  # a numeric QI with decimals
        ("quoted", True),  # quoted cells with commas
        ("text_ids", True),  # person ids that are not numbers
        ("leading_space", False),  # pandas skips the space: its reader is used
        ("extra_columns", True),  # columns the release does not use are not read
    ],
)
def test_files_that_differ_from_plain_census_read_as_pandas_reads_them(tmp_path, change, fast):
    frame = census(400, seed=5)
    if change == "dates":
        frame["race"] = np.where(np.arange(400) % 2, "2020-01-01", "2021-12-31")
    elif change == "booleans":
        frame["sex"] = np.where(np.arange(400) % 3, "true", "false")
    elif change == "floats":
        frame["age"] = frame["age"] + np.round(np.random.default_rng(1).random(400), 3)
    elif change == "quoted":
        frame["workclass"] = frame["workclass"] + ", inc"
    elif change == "text_ids":
        frame["pid"] = [f"id-{i:05d}" for i in range(400)]
    elif change == "extra_columns":
        frame["notes"] = "n/a"
        frame["when"] = "2020-01-01"
    frame.to_csv(tmp_path / "census.csv", index=False)
    if change == "leading_space":
        text = (tmp_path / "census.csv").read_text().replace(",male,", ", male,")
        (tmp_path / "census.csv").write_text(text)
    spec = _spec(tmp_path)
    assert (_read_csv_with_arrow(spec.path("census.csv"), spec) is not None) is fast
    pd.testing.assert_frame_equal(validate_input(read_input(spec), spec), _pandas_frame(spec))


def test_missing_values_are_refused_with_pandas_messages(tmp_path):
    frame = census(200, seed=6).astype({"race": object})
    frame.loc[17, "race"] = None  # an empty field (the NA rule: the text "NA" is a value)
    frame.to_csv(tmp_path / "census.csv", index=False)
    spec = _spec(tmp_path)
    with pytest.raises(InputError) as fast:
        validate_input(read_input(spec), spec)
    with pytest.raises(InputError) as slow:
        _pandas_frame(spec)
    assert str(fast.value) == str(slow.value) and "row 18" in str(fast.value)


def test_a_missing_column_and_a_broken_row_keep_their_messages(tmp_path):
    frame = census(50, seed=7)
    frame.drop(columns=["race"]).to_csv(tmp_path / "census.csv", index=False)
    spec = _spec(tmp_path)
    with pytest.raises(InputError, match="input is missing column\\(s\\) 'race'"):
        validate_input(read_input(spec), spec)
    frame.to_csv(tmp_path / "census.csv", index=False)
    with open(tmp_path / "census.csv", "a") as f:
        f.write("1,2,3,4,5,6,7,8,9,10,11,12\n")
    with pytest.raises(InputError, match="cannot read .*Expected 10 fields"):
        read_input(spec)


def test_text_that_looks_like_another_type_is_published_as_written(tmp_path):
    """No silent coercion: pandas' own guess would turn "true" into True and "007" into 7."""
    frame = census(60, seed=8)
    frame["sex"] = np.where(np.arange(60) % 2, "true", "false")
    frame["race"] = np.where(np.arange(60) % 2, "007", "010")
    frame.to_csv(tmp_path / "census.csv", index=False)
    out = validate_input(read_input(_spec(tmp_path)), _spec(tmp_path))
    assert set(out["sex"]) == {"true", "false"} and set(out["race"]) == {"007", "010"}


def _written(tmp_path, lines: list[str]):
    (tmp_path / "census.csv").write_text("\n".join(lines) + "\n")
    return _spec(tmp_path)


def test_a_file_pandas_would_repair_is_refused_naming_the_row(tmp_path):
    """Issue 25 item 7: a repeated header name (pandas renames the second), a short row (pandas
    fills it with empty cells), a NUL byte (read as part of a value) are refused before any
    reading, each with one line naming the row or column and quoting no cell."""
    lines = census(40, seed=7).assign(hours=40).to_csv(index=False).splitlines()
    short = [*lines[:9], lines[9].rsplit(",", 1)[0], *lines[10:]]  # row 9 lost its last (unread) field
    with pytest.raises(InputError, match="^input rejected: row 9 has 10 fields, the header 11$"):
        read_input(_written(tmp_path, short))
    # the same file with row 9 complete reads
    assert len(read_input(_written(tmp_path, lines))) == 40
    nul = [*lines[:12], lines[12][:4] + "\0" + lines[12][4:], *lines[13:]]
    with pytest.raises(InputError, match="^input rejected: row 12: holds a NUL byte$"):
        read_input(_written(tmp_path, nul))
    repeated = [lines[0] + ",sex", *(line + ",x" for line in lines[1:])]
    with pytest.raises(InputError, match="^input rejected: the header names column 'sex' twice"):
        read_input(_written(tmp_path, repeated))


def test_a_parquet_list_column_is_refused_not_published_as_text(tmp_path):
    frame = census(30, seed=7)
    frame.assign(race=[["South"]] * len(frame)).to_parquet(tmp_path / "census.parquet")
    with pytest.raises(InputError, match="^input rejected: column 'race' holds list<element: string> cells"):
        read_input(_spec(tmp_path, "census.parquet"))
    frame.assign(extra=[["South"]] * len(frame)).to_parquet(tmp_path / "census.parquet")  # not read: accepted
    assert len(read_input(_spec(tmp_path, "census.parquet"))) == 30

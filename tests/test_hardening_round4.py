"""Issue 41 items 4-7: inputs that published, hung or failed with more than one line.

Each refusal: exit 1, one `privpub: error:` line naming what is wrong (rows by position,
columns by name), no cell or person id quoted, nothing written but the attempt's audit row.
The NA rule (docs/spec.md, "The input"): in a CSV file only a truly empty field is an empty cell.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from privpub.schemas.errors import InputError
from tests.helpers import census_spec_toml
from tests.test_hardening import SECRET, _only_the_attempt_was_written, _snapshot, _write, good_frame, run

NO_SERVER = {"PREFECT_API_URL": "http://127.0.0.1:9/api"}  # never reached: refused before


def _headerless(folder: Path, frame: pd.DataFrame):
    _write(folder, frame)
    lines = (folder / "census.csv").read_text().splitlines()
    (folder / "census.csv").write_text("\n".join(lines[1:]) + "\n")  # the first row stands as the header
    return folder / "spec.toml"


def _bytes_in(line: int, at_end: bytes, extra: bool = True):
    """A byte that is not UTF-8 at the end of CSV line `line` (0: the header), in a column the
    release does not read (`notes`)."""

    def mutate(folder: Path, frame: pd.DataFrame):
        _write(folder, frame.assign(notes="n") if extra else frame)
        lines = (folder / "census.csv").read_bytes().split(b"\n")
        lines[line] = lines[line] + at_end
        (folder / "census.csv").write_bytes(b"\n".join(lines))
        return folder / "spec.toml"

    return mutate


def _born(value: str, row: int):
    def mutate(folder: Path, frame: pd.DataFrame):
        frame = frame.assign(born="1980-05-01")
        frame.loc[row - 1, "born"] = value
        spec = census_spec_toml(seed=None).replace(
            '{ name = "sex"', '{ name = "born", kind = "date", hierarchy = "year" }, { name = "sex"'
        )
        return _write(folder, frame, spec)

    return mutate


def _cell(column: str, row: int, value):
    def mutate(folder: Path, frame: pd.DataFrame):
        f = frame.astype({column: object})
        f.loc[row - 1, column] = value
        return _write(folder, f)

    return mutate


def _parquet(change):
    def mutate(folder: Path, frame: pd.DataFrame):
        change(frame).to_parquet(folder / "census.parquet")
        return _write(folder, None, census_spec_toml(seed=None, input_name="census.parquet"))

    return mutate


def _parts(second):
    """A folder of two Parquet files, the second changed by `second`."""

    def mutate(folder: Path, frame: pd.DataFrame):
        (folder / "parts").mkdir()
        frame.iloc[:200].to_parquet(folder / "parts" / "a.parquet")
        second(frame.iloc[200:]).to_parquet(folder / "parts" / "b.parquet")
        return _write(folder, None, census_spec_toml(seed=None, input_name="parts"))

    return mutate


def _wide_uint(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.assign(age=frame.age.astype("uint64"))
    frame.loc[3, "age"] = 2**63 + 5
    return frame


def _empty_qi_name(folder: Path, frame: pd.DataFrame):
    spec = census_spec_toml(seed=None).replace(
        '{ name = "sex", kind = "categorical" }',
        '{ name = "sex", kind = "categorical" }, { name = "", kind = "categorical" }',
    )
    return _write(folder, frame.assign(**{"": "a"}), spec)


# (case, how to break a valid folder, the fragment the one error line must hold)
CASES = [
    ("a CSV without a header row", _headerless, "the file seems to have no header row"),
    ("a date QI in year 0", _born("0000-01-01", 11), "row 11, column 'born': a date outside the years 0001 to 9999"),
    ("a non-UTF-8 byte in an unread column", _bytes_in(20, b"\xff"), "row 20, column 'notes': not UTF-8 text"),
    ("a non-UTF-8 byte in the header", _bytes_in(0, b"\xfe"), "the header: not UTF-8 text"),
    ("a hexadecimal number", _cell("age", 5, "0x1F"), "row 5, column 'age': not a number"),
    ("NA text in a numeric QI", _cell("age", 8, "NA"), "row 8, column 'age': not a number"),
    (
        "a Parquet string column as a numeric QI",
        _parquet(lambda f: f.assign(age=f.age.astype(str))),
        "column 'age': not a number (a numeric quasi-identifier; the Parquet column holds",
    ),
    (
        "a Parquet bool column as a numeric QI",
        _parquet(lambda f: f.assign(age=f.age > 40)),
        "the Parquet column holds booleans, which privpub does not convert",
    ),
    (
        "Parquet files whose column types differ",
        _parts(lambda f: f.astype({"age": str})),
        "column 'age' is large_string in b.parquet but int64 in a.parquet",
    ),
    (
        "Parquet files whose columns differ",
        _parts(lambda f: f.assign(extra=1)),
        "column 'extra' is in b.parquet but not in a.parquet",
    ),
    ("a uint64 QI value above 2^63 - 1", _parquet(_wide_uint), "row 4, column 'age': an integer above 2^63 - 1"),
    ("a QI named with the empty string", _empty_qi_name, "[dataset] qi: a column name must not be empty"),
]


@pytest.mark.parametrize("case, mutate, fragment", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_quoting_no_cell(tmp_path, case, mutate, fragment):
    frame = good_frame()
    spec = mutate(tmp_path, frame)
    before = _snapshot(tmp_path)
    res = run(["publish", str(spec)], NO_SERVER)
    assert res.returncode == 1, (case, res.stdout, res.stderr)
    errors = [line for line in res.stderr.splitlines() if line.startswith("privpub: error:")]
    assert len(errors) == 1 and fragment in errors[0], (case, res.stderr)
    assert res.stderr.count("\n") == 1 and res.stdout == "", res.stderr  # no warning, no dump
    leaked = [p for p in frame.pid if p in res.stderr] + ([SECRET] if SECRET in res.stderr else [])
    assert not leaked, (case, errors[0])
    _only_the_attempt_was_written(tmp_path, before, errors[0].removeprefix("privpub: error: "))


def test_a_headerless_file_is_never_quoted_by_any_command(tmp_path):
    """publish, serial, explore and init: the first row's cells are data, never in a message."""
    frame = good_frame()
    spec = _headerless(tmp_path, frame)
    first = (tmp_path / "census.csv").read_text().splitlines()[0].split(",")
    serial = tmp_path / "serial.toml"
    serial.write_text(census_spec_toml(seed=None, technique="serial", k=None))
    for args in (
        ["publish", str(spec)],
        ["serial", str(serial)],
        # a seed given: a drawn one is printed, and its 19 random digits may hold a cell's
        ["explore", str(spec), "--set", "k=5", "--seed", "3"],
        ["init", str(tmp_path / "census.csv"), "--sensitive", "occupation", "-o", str(tmp_path / "new.toml")],
        ["init", str(tmp_path / "census.csv"), "--sensitive", first[8], "-o", str(tmp_path / "new.toml")],
    ):
        res = run(args, NO_SERVER)
        errors = [line for line in res.stderr.splitlines() if line.startswith("privpub: error:")]
        assert res.returncode == 1 and len(errors) == 1 and "Traceback" not in res.stderr, (args, res.stderr)
        assert "seems to have no header row" in res.stderr, (args, res.stderr)
        text = res.stdout + res.stderr
        # the paths (pytest-NNN folders hold digits a cell may share) are not data
        assert not [c for c in first if c in text.replace(str(tmp_path), "").replace("census.csv", "")], (args, text)
    assert not (tmp_path / "new.toml").exists()


def test_a_spec_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    _write(tmp_path, good_frame())
    os.mkfifo(tmp_path / "fifo.toml")
    for args in (["publish", str(tmp_path / "fifo.toml")], ["explore", str(tmp_path / "fifo.toml"), "--set", "k=5"]):
        res = run(args, NO_SERVER, timeout=60)
        assert res.returncode == 1 and res.stderr.strip().endswith("fifo.toml is not a regular file"), res.stderr


def test_dates_just_inside_the_years_1_to_9999_publish_and_read_back(tmp_path):
    import privpub

    frame = good_frame(60).assign(born=["0001-01-01", "9999-12-31", "2000-02-29"] * 20)
    spec = census_spec_toml(seed=3, k=2, l=None).replace(
        '{ name = "sex"', '{ name = "born", kind = "date", hierarchy = "year" }, { name = "sex"'
    )
    _write(tmp_path, frame, spec)
    release = privpub.publish(tmp_path / "spec.toml")
    table = pd.read_parquet(tmp_path / "releases" / str(release) / "table.parquet")  # readable
    years = {d.year for d in table["born_lo"]} | {d.year for d in table["born_hi"]}
    assert {1, 9999} <= years
    frame.loc[7, "born"] = "0000-12-31"  # one day before the first
    _write(tmp_path, frame, spec)
    with pytest.raises(InputError, match=r"^input rejected: row 8, column 'born': a date outside the years"):
        privpub.publish(tmp_path / "spec.toml")


# --- the NA rule -----------------------------------------------------------------------------


def test_na_like_text_is_a_value_and_only_empty_fields_are_dropped(tmp_path):
    """`NA`, `None`, `NULL`, `NaN`, `n/a` in a text column are values, published as written;
    `missing = "drop"` leaves out only the rows with a truly empty field, and says how many."""
    frame = good_frame().astype({"sex": object, "race": object})
    spellings = ["NA", "None", "NULL", "NaN", "n/a", "nan"]
    for i, text in enumerate(spellings):
        frame.loc[i * 40 : i * 40 + 9, "sex"] = text  # 60 rows of NA-like text
    frame.loc[[5, 77, 301], "race"] = None  # 3 truly empty fields
    spec = census_spec_toml(seed=5).replace("[dataset]", '[dataset]\nmissing = "drop"')
    _write(tmp_path, frame, spec)
    res = run(["publish", str(tmp_path / "spec.toml")], {"PREFECT_API_URL": ""})
    assert res.returncode == 0, res.stderr
    release = res.stdout.splitlines()[0].strip()
    assert "dropped rows: 3 " in res.stdout and "0.8% of the 400 input rows" in res.stdout, res.stdout
    table = pd.read_parquet(tmp_path / "releases" / release / "table.parquet")
    published = {str(v) for cell in table["sex"] for v in np.atleast_1d(cell)}  # a value or a set of values
    assert len(table) == 397 and set(spellings) <= published, published
    with duckdb.connect(str(tmp_path / "privpub.duckdb"), read_only=True) as con:
        dropped = con.execute("SELECT value FROM release_metrics WHERE name = 'dropped-rows'").fetchall()
    assert dropped == [(3.0,)]


def test_the_csv_readers_agree_on_the_na_rule(tmp_path):
    """The fast (Arrow) and the strict (pandas, every column as text) readers read the same
    cells: NA-like text a value, an empty field empty, `nan` in a numeric column no number."""
    from privpub.schemas.input import read_input, validate_input
    from privpub.schemas.spec import load_spec

    frame = good_frame(100).astype({"sex": object, "age": float})
    frame.loc[3, "sex"] = "NA"
    frame.loc[4, "sex"] = "None"
    frame.to_csv(tmp_path / "census.csv", index=False)
    (tmp_path / "spec.toml").write_text(census_spec_toml(seed=1))
    fast = validate_input(read_input(load_spec(tmp_path / "spec.toml")), load_spec(tmp_path / "spec.toml"))
    text = (tmp_path / "census.csv").read_text().replace(",male,", ", male,")  # the strict reader's case
    (tmp_path / "census.csv").write_text(text)
    slow = validate_input(read_input(load_spec(tmp_path / "spec.toml")), load_spec(tmp_path / "spec.toml"))
    pd.testing.assert_frame_equal(fast, slow)
    assert fast["sex"].iloc[3] == "NA" and fast["sex"].iloc[4] == "None"


# --- the Python API: DataFrame cells and columns ----------------------------------------------


def _api_spec() -> dict:
    import tomllib

    spec = tomllib.loads(census_spec_toml(seed=2))
    spec["dataset"].pop("input")
    return spec


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda f: f.set_axis([*f.columns[:-1], "age"], axis=1), "the DataFrame names column 'age' twice"),
        (
            lambda f: f.set_axis(pd.MultiIndex.from_product([["x"], f.columns]), axis=1),
            "the DataFrame's columns have 2 levels of names (a MultiIndex)",
        ),
        (lambda f: f.assign(sex=f.sex.map(str.encode)), "row 1, column 'sex': holds bytes"),
        (lambda f: f.assign(age=f.age.astype(complex)), "row 1, column 'age': holds complex numbers"),
        (
            lambda f: f.assign(age=[2**80 if i == 6 else int(a) for i, a in enumerate(f.age)]),
            "row 7, column 'age': holds integers outside the 64-bit range",
        ),
        (
            lambda f: f.assign(race=[b"x" if i == 9 else r for i, r in enumerate(f.race)]),
            "row 10, column 'race': holds bytes",
        ),
        (lambda f: f.assign(age=_wide_uint(f).age), "row 4, column 'age': an integer above 2^63 - 1"),
    ],
    ids=["duplicate names", "MultiIndex", "bytes", "complex", "2**80", "bytes among text", "uint64"],
)
def test_a_dataframe_that_cannot_publish_as_it_is_is_refused_in_one_line(tmp_path, change, fragment):
    import privpub

    frame = change(good_frame(60))
    with pytest.raises(InputError) as err:
        privpub.publish(frame, _api_spec(), state=tmp_path / "privpub.duckdb")
    message = str(err.value)
    assert fragment in message and "\n" not in message, message
    assert SECRET not in message and not any(p in message for p in good_frame(60).pid)


# --- init, explore, the state file -------------------------------------------------------------


def test_init_refuses_what_it_cannot_read_in_one_line(tmp_path):
    frame = good_frame()
    frame.assign(tags=[[1, 2]] * len(frame)).to_parquet(tmp_path / "lists.parquet")
    frame.to_csv(tmp_path / "census.csv", index=False)
    lines = (tmp_path / "census.csv").read_bytes().split(b"\n")
    lines[5] = lines[5] + b"\xe9"
    (tmp_path / "latin.csv").write_bytes(b"\n".join(lines))
    for data, fragment in (
        ("lists.parquet", "column 'tags' holds lists or maps, not one value per cell"),
        ("latin.csv", "row 5, column 'salary': not UTF-8 text"),
    ):
        res = run(["init", str(tmp_path / data), "--sensitive", "occupation", "-o", str(tmp_path / "s.toml")])
        assert res.returncode == 1 and res.stderr.count("\n") == 1 and fragment in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and not (tmp_path / "s.toml").exists()


def test_init_never_overwrites_its_input(tmp_path):
    good_frame().to_csv(tmp_path / "data.csv", index=False)
    before = (tmp_path / "data.csv").read_bytes()
    for out in ("data.csv", "./data.csv"):
        res = run(["init", "data.csv", "--sensitive", "occupation", "-o", out, "--force"], cwd=tmp_path)
        assert res.returncode == 1 and "is the input itself" in res.stderr, res.stderr
    assert (tmp_path / "data.csv").read_bytes() == before


def test_explore_refuses_dask_and_a_page_that_is_a_folder(tmp_path):
    _write(tmp_path, good_frame())
    dask = tmp_path / "dask.toml"
    dask.write_text(census_spec_toml(seed=1).replace("[output]", '[run]\ntask_runner = "dask"\n[output]'))
    res = run(["explore", str(dask), "--set", "k=5"], NO_SERVER)
    assert res.returncode == 1 and '[run] task_runner = "dask": explore runs in this process' in res.stderr
    (tmp_path / "pages").mkdir()
    res = run(["explore", str(tmp_path / "spec.toml"), "--set", "k=5", "--html", str(tmp_path / "pages")])
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "is a directory" in res.stderr, res.stderr
    assert not list((tmp_path / "pages").iterdir())


def test_a_truncated_state_file_is_named_in_one_line_by_every_command(tmp_path):
    _write(tmp_path, good_frame(), census_spec_toml(seed=4))
    res = run(["publish", str(tmp_path / "spec.toml"), "--quiet"], {"PREFECT_API_URL": ""})
    assert res.returncode == 0, res.stderr
    release = res.stdout.strip()
    state = tmp_path / "privpub.duckdb"
    whole = state.read_bytes()
    state.write_bytes(whole[: len(whole) * 2 // 3])  # DuckDB opens it, then cannot read a block back
    for args in (["history"], ["trail"], ["verify", release], ["snapshot", str(tmp_path / "copy.duckdb")]):
        res = run([*args, "--state", str(state)])
        assert res.returncode == 1 and res.stderr.count("\n") == 1, (args, res.stderr)
        assert "internal error" not in res.stderr and "privpub.duckdb" in res.stderr, (args, res.stderr)


def test_the_nul_and_utf8_checks_read_the_file_once_each(tmp_path):
    """The whole-file UTF-8 check is bounded in memory and finds a byte past its first chunk."""
    import mmap

    from privpub.schemas.input import _first_non_utf8

    path = tmp_path / "big.csv"
    path.write_bytes(b"a" * ((1 << 24) + 10) + b"\xff" + b"b" * 5)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        assert _first_non_utf8(data) == (1 << 24) + 10
    # a character split across the chunk boundary is text
    path.write_bytes(b"a" * ((1 << 24) - 1) + "é".encode() + b"z")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        assert _first_non_utf8(data) is None

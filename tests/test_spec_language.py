"""The spec language of issue 29 item 4: a `date` QI kind (published as date ranges), `hierarchy =
"mask"` and date truncation ("month" / "year"), numbers in an ordinal `order`, and `[dataset]
missing = "refuse" | "drop" | "category"`; each through the Python API and the CLI, each new key
strict."""

from __future__ import annotations

import datetime as dt
import re

import hypothesis
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import strategies as st

import privpub
from privpub.schemas.errors import InputError, PublishedTableError, SpecError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.report import page as report
from tests.test_drivers import _without_a_server

CODES = ["10115", "10117", "10119", "10245", "10247", "20095", "20097", "20099", "30159", "30161"]


def table(n: int = 800, seed: int = 5) -> pd.DataFrame:
    """People with a birth date, a postcode, a 1-5 score and a secret diagnosis."""
    rng = np.random.default_rng(seed)
    born = pd.Timestamp("1940-01-01") + pd.to_timedelta(rng.integers(0, 25_000, n), unit="D")
    return pd.DataFrame(
        {
            "pid": [f"p{i:05d}" for i in range(n)],
            "born": born.strftime("%Y-%m-%d"),
            "zip": np.array(CODES, dtype=object)[rng.integers(0, len(CODES), n)],
            "score": rng.integers(1, 6, n),
            "sex": np.array(["f", "m"], dtype=object)[rng.integers(0, 2, n)],
            "diagnosis": np.array([f"d{i}" for i in range(8)], dtype=object)[rng.integers(0, 8, n)],
        }
    )


def spec(qi: list[dict], k: int = 10, **dataset) -> dict:
    return {
        "dataset": {"name": "people", "person_id": "pid", "sensitive": "diagnosis", "qi": qi, **dataset},
        "technique": {"name": "generalization", "k": k},
        "output": {"seed": 3},
    }


def class_sizes(published: pd.DataFrame, columns: list[str]) -> pd.Series:
    """Equivalence classes counted from the definition: rows with equal published QI cells."""
    keys = published[columns].map(lambda v: tuple(v) if isinstance(v, (list, np.ndarray)) else v)
    return keys.value_counts()


# --- date -----------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", ["day", "month", "year"])
def test_a_date_qi_is_published_as_date_ranges_that_cover_their_rows_and_are_k_anonymous(tmp_path, monkeypatch, unit):
    monkeypatch.chdir(tmp_path)
    frame = table()
    # a birth date by the day (or month) is near-unique in 800 people: marked, these tests are about dates
    q = {"name": "born", "kind": "date", "near_unique": "allow", **({"hierarchy": unit} if unit != "day" else {})}
    release = privpub.publish(frame, spec([q, {"name": "sex", "kind": "categorical"}]))
    arrow = pq.read_table(next(release.folder.glob("table*.parquet")))
    assert str(arrow.schema.field("born_lo").type) == "date32[day]" == str(arrow.schema.field("born_hi").type)
    published = arrow.to_pandas()
    sizes = class_sizes(published, ["born_lo", "born_hi", "sex"])
    assert sizes.min() >= 10 and release.figures.set_index("name").loc["k-anonymity", "value"] == sizes.min()
    lo, hi = pd.to_datetime(published.born_lo), pd.to_datetime(published.born_hi)
    assert (lo <= hi).all()
    if unit == "month":
        assert (lo.dt.day == 1).all() and (hi + pd.Timedelta(days=1)).dt.day.eq(1).all()
    if unit == "year":
        assert ((lo.dt.month == 1) & (lo.dt.day == 1)).all() and ((hi.dt.month == 12) & (hi.dt.day == 31)).all()
    if unit == "day":  # the ends are dates of the data
        assert set(lo.dt.strftime("%Y-%m-%d")) <= set(frame.born) >= set(hi.dt.strftime("%Y-%m-%d"))
    # every class's range holds at least as many input dates as the class has rows
    born = pd.to_datetime(frame.born).to_numpy()
    for (b_lo, b_hi), size in published.groupby(["born_lo", "born_hi"]).size().items():
        inside = ((born >= np.datetime64(b_lo)) & (born <= np.datetime64(b_hi))).sum()
        assert inside >= size


def test_dates_from_a_parquet_date_column_and_datetimes_publish_the_same_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table(300)
    as_dates = frame.assign(born=pd.to_datetime(frame.born).dt.date)
    as_dates.to_parquet(tmp_path / "people.parquet")
    qi = [{"name": "born", "kind": "date", "hierarchy": "month", "near_unique": "allow"}]
    from_text = privpub.publish(frame, spec(qi))
    from_parquet = privpub.publish(tmp_path / "people.parquet", spec(qi), state="other.duckdb")
    from_datetimes = privpub.publish(frame.assign(born=pd.to_datetime(frame.born)), spec(qi), state="third.duckdb")
    texts = [r.tables["table"].astype(str).to_numpy().tolist() for r in (from_text, from_parquet, from_datetimes)]
    assert texts[0] == texts[1] == texts[2]


@pytest.mark.parametrize("bad", ["2020-02-30", "2020", "03/01/2020", "yesterday"])
def test_a_cell_that_is_not_a_date_is_refused_naming_row_and_column_never_the_value(tmp_path, monkeypatch, bad):
    monkeypatch.chdir(tmp_path)
    frame = table(100)
    frame.loc[41, "born"] = bad
    with pytest.raises(InputError) as err:
        privpub.publish(frame, spec([{"name": "born", "kind": "date"}]))
    assert str(err.value) == "input rejected: row 42, column 'born': not a date (YYYY-MM-DD)"


def test_numbers_in_a_date_column_are_not_read_as_dates(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table(100).assign(born=lambda f: np.arange(len(f)) + 19_000)
    with pytest.raises(InputError, match=r"row 1, column 'born': not a date \(YYYY-MM-DD\) \(and 99 more"):
        privpub.publish(frame, spec([{"name": "born", "kind": "date"}]))


# --- hierarchy = "mask" -------------------------------------------------------------------------


def masked_tree(codes: list[str]) -> dict[str, list[str]]:
    """The oracle: the masking hierarchy of equal-length codes written out level by level."""
    tree: dict[str, set[str]] = {}
    width = len(codes[0])
    for code in codes:
        for masked in range(1, width + 1):
            parent = code[: width - masked] + "*" * masked
            child = code[: width - masked + 1] + "*" * (masked - 1)
            tree.setdefault(parent, set()).add(child)
    return {p: sorted(kids) for p, kids in sorted(tree.items())}


def test_a_mask_hierarchy_publishes_what_the_same_levels_written_out_publish(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table()
    qi = [{"name": "born", "kind": "date", "hierarchy": "year"}]
    masked = privpub.publish(frame, spec([*qi, {"name": "zip", "kind": "categorical", "hierarchy": "mask"}]))
    explicit = {"name": "zip", "kind": "categorical", "hierarchy": masked_tree(CODES)}
    written = privpub.publish(frame, spec([*qi, explicit]), state="other.duckdb")
    a, b = masked.tables["table"], written.tables["table"]
    assert a.astype(str).to_numpy().tolist() == b.astype(str).to_numpy().tolist()
    # each published set is every code under one masked prefix
    for cell in {tuple(v) for v in a.zip}:
        prefix = max((c[:i] for c in cell for i in range(6) if all(x.startswith(c[:i]) for x in cell)), key=len)
        assert sorted(cell) == [c for c in CODES if c.startswith(prefix)]
    assert any(len(cell) < len(CODES) for cell in a.zip)  # the tree generalizes below its root


def test_a_masked_code_holding_the_mask_character_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table(100)
    frame.loc[6, "zip"] = "101*5"
    with pytest.raises(InputError) as err:
        privpub.publish(frame, spec([{"name": "zip", "kind": "categorical", "hierarchy": "mask"}]))
    assert str(err.value).startswith("input rejected: row 7, column 'zip': holds '*'")
    assert "101*5" not in str(err.value)


@hypothesis.given(codes=st.lists(st.text(alphabet="019*", min_size=4, max_size=4), min_size=1, max_size=30))
def test_validation_refuses_exactly_the_masked_codes_holding_the_mask_character(codes):
    """A property over generated codes against the rule read directly: the input is refused iff
    some code holds '*'; the message names the first such row and counts the others, never a code."""
    given_spec = spec_from_dict(file_spec({"name": "zip", "kind": "categorical", "hierarchy": "mask"}))
    frame = pd.DataFrame(
        {
            "pid": [f"p{i}" for i in range(len(codes))],
            "zip": pd.Series(codes, dtype=object),
            "diagnosis": ["d"] * len(codes),
        }
    )
    starred = [i for i, code in enumerate(codes) if "*" in code]
    if not starred:
        assert validate_input(frame, given_spec)["zip"].tolist() == codes
        return
    with pytest.raises(InputError) as err:
        validate_input(frame, given_spec)
    more = f" (and {len(starred) - 1} more row(s) with this problem)" if len(starred) > 1 else ""
    assert str(err.value) == (
        f"input rejected: row {starred[0] + 1}, column 'zip': holds '*', which hierarchy = \"mask\" "
        f"writes for a masked character{more}"
    )
    assert not any(codes[i] in str(err.value) for i in starred)


# --- numbers in an ordinal order ----------------------------------------------------------------


@pytest.mark.parametrize("source", ["frame", "csv", "parquet"])
def test_an_ordinal_with_an_order_of_numbers_publishes_its_ranges(tmp_path, monkeypatch, source):
    monkeypatch.chdir(tmp_path)
    frame = table(400)
    qi = [{"name": "score", "kind": "ordinal", "order": [1, 2, 3, 4, 5]}, {"name": "sex", "kind": "categorical"}]
    if source == "frame":
        release = privpub.publish(frame, spec(qi))
    else:
        path = tmp_path / f"people.{source}"
        frame.to_csv(path, index=False) if source == "csv" else frame.to_parquet(path)
        release = privpub.publish(path, spec(qi))
    cells = {tuple(v) for v in release.tables["table"].score}
    assert cells and all(list(c) == [str(x) for x in range(int(c[0]), int(c[-1]) + 1)] for c in cells)
    assert class_sizes(release.tables["table"], ["score", "sex"]).min() >= 10


def test_an_order_of_floats_matches_the_cells_by_value_and_refuses_others(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table(300).assign(score=lambda f: f.score / 2)  # 0.5 ... 2.5
    qi = [{"name": "score", "kind": "ordinal", "order": [0.5, 1.0, 1.5, 2.0, 2.5]}]
    release = privpub.publish(frame, spec(qi))
    assert {x for v in release.tables["table"].score for x in v} <= {"0.5", "1.0", "1.5", "2.0", "2.5"}
    frame.loc[9, "score"] = 3.0
    with pytest.raises(InputError, match=r"^input rejected: row 10, column 'score': value not in the declared order$"):
        privpub.publish(frame, spec(qi), state="other.duckdb")


@hypothesis.given(
    order=st.lists(st.integers(-3, 6), min_size=1, max_size=5, unique=True),
    cells=st.lists(st.integers(-4, 8), min_size=1, max_size=25),
    halves=st.booleans(),
    form=st.sampled_from(["numbers", "text"]),
)
def test_validation_matches_numbers_to_an_order_of_numbers_by_value(order, cells, halves, form):
    """A property against the rule read directly: a cell is in an order of numbers iff its
    value equals one of the order's; an input with a cell outside is refused naming its first
    row, otherwise each cell is written as the order spells its value (CSV text read as numbers)."""
    spelled = [x / 2 for x in order] if halves else order  # halves: an order of floats (1.0, 1.5, ...)
    values = [x / 2 for x in cells] if halves else cells
    given_spec = spec_from_dict(file_spec({"name": "score", "kind": "ordinal", "order": spelled}))
    column = pd.Series(values) if form == "numbers" else pd.Series([f" {v} " for v in values], dtype=object)
    n = len(values)
    frame = pd.DataFrame({"pid": [f"p{i}" for i in range(n)], "score": column, "diagnosis": ["d"] * n})
    label = {float(o): str(o) for o in spelled}
    outside = [i for i, v in enumerate(values) if float(v) not in label]
    if not outside:
        assert validate_input(frame, given_spec)["score"].tolist() == [label[float(v)] for v in values]
        return
    more = f" (and {len(outside) - 1} more row(s) with this problem)" if len(outside) > 1 else ""
    with pytest.raises(InputError) as err:
        validate_input(frame, given_spec)
    assert (
        str(err.value) == f"input rejected: row {outside[0] + 1}, column 'score': value not in the declared order{more}"
    )


# --- [dataset] missing -------------------------------------------------------------------------


def with_empty_cells(frame: pd.DataFrame, share: float = 0.05, seed: int = 1) -> tuple[pd.DataFrame, int]:
    """`share` of the rows get one empty cell in a column the release reads; returns the count."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(frame), int(share * len(frame)), replace=False)
    columns = rng.choice(["born", "zip", "score", "diagnosis", "pid"], len(rows))
    out = frame.astype({"score": "Int64"})
    for column in set(columns):
        out.loc[rows[columns == column], column] = None
    return out, len(rows)


QI_ALL = [
    {"name": "born", "kind": "date", "hierarchy": "month", "near_unique": "allow"},  # birth months: near-unique
    {"name": "zip", "kind": "categorical", "hierarchy": "mask"},
    {"name": "score", "kind": "ordinal", "order": [1, 2, 3, 4, 5]},
]


def test_refuse_is_the_default_and_names_the_first_empty_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame, _ = with_empty_cells(table(400))
    first = int(np.flatnonzero(frame.isna().any(axis=1).to_numpy())[0]) + 1
    for given in ({}, {"missing": "refuse"}):
        with pytest.raises(InputError, match=rf"^input rejected: row {first}, column '\w+': is empty \(null\)"):
            privpub.publish(frame, spec(QI_ALL, **given))


@pytest.mark.parametrize("source", ["frame", "csv"])
def test_drop_leaves_out_the_rows_with_an_empty_cell_and_counts_them(tmp_path, monkeypatch, source):
    monkeypatch.chdir(tmp_path)
    frame, empty = with_empty_cells(table(1000))
    assert empty == 50
    if source == "csv":
        frame.to_csv(tmp_path / "people.csv", index=False)
        release = privpub.publish(tmp_path / "people.csv", spec(QI_ALL, missing="drop"))
    else:
        release = privpub.publish(frame, spec(QI_ALL, missing="drop"))
    figures = release.figures.set_index("name").value
    assert figures["dropped-rows"] == 50 and len(release.tables["table"]) == 950
    assert class_sizes(release.tables["table"], ["born_lo", "born_hi", "zip", "score"]).min() >= 10
    report = release.report.read_text()
    assert "Dropped rows: 50 (an empty cell in the person id, a quasi-identifier or the sensitive column" in report


def test_shares_of_the_input_count_the_dropped_rows_in_the_report_its_markdown_and_the_cli(
    tmp_path, monkeypatch, capsys
):
    """Issue 39 item 4: a table where "drop" leaves out 38.8% of the rows (a GSS-like share) and
    suppression some more. Every share "of the input rows" divides by the rows of the file (kept and
    dropped), and the verdict speaks of the file's rows: the old figures divided by the kept rows
    (63.4% here) and said "N of its <kept> rows"."""
    from privpub.flows import cli, pipeline, publish

    monkeypatch.chdir(tmp_path)
    frame, _ = with_empty_cells(table(2000), share=0.388)
    read = len(frame)
    dropped = int(frame[["pid", "born", "zip", "score", "diagnosis"]].isna().any(axis=1).sum())  # direct count
    assert dropped == 776 and f"{dropped / read:.1%}" == "38.8%" and f"{dropped / (read - dropped):.1%}" == "63.4%"
    frame.to_parquet(tmp_path / "gss_like.parquet", index=False)
    seen: dict = {}
    # the plain driver, or the Prefect one when the tests' Prefect server is configured
    for driver in (pipeline.Driver, publish.PrefectDriver):
        monkeypatch.setattr(driver, "after_commit", lambda self, run_id, *args: seen.update(args=args))
    release = privpub.publish(
        tmp_path / "gss_like.parquet",
        {**spec(QI_ALL, missing="drop"), "technique": {"name": "generalization", "k": 10, "suppress": 0.05}},
    )
    published = len(release.tables["table"])
    suppressed = read - dropped - published
    assert suppressed > 0 and release.figures.set_index("name").value["suppressed-rows"] == suppressed
    words = (
        f"publishes {published:,} of the {read:,} rows of gss_like.parquet "
        f"({dropped:,} left out for empty cells, {suppressed:,} suppressed)"
    )
    share = f"{dropped / read:.1%} of the {read:,} input rows"
    page = re.sub(r"\s+", " ", release.report.read_text())
    verdict = re.search(r'<section id="verdict"><p>([^<]+)</p>', page)
    assert verdict and words in verdict.group(1)
    assert "poor (38.8% of the input rows; 5% or more)" in page and "63.4%" not in page
    assert f"{share}; not published" in page
    assert f"fair ({suppressed / read:.1%} of the input rows; 1% to 5%)" in page  # suppressed: of the file's too
    assert f"{read} ({read - dropped} kept, {dropped} dropped for an empty cell) input rows" in page
    markdown = report.markdown_summary(*seen["args"])
    assert words in markdown and "| poor (38.8% of the input rows; 5% or more) |" in markdown and share in markdown
    assert f"rows in: {read} ({read - dropped} kept, {dropped} dropped for an empty cell)" in markdown
    cli.print_summary(tmp_path / "privpub.duckdb", release.id)
    printed = capsys.readouterr().out
    assert f"rows in: {read} ({read - dropped} kept, {dropped} dropped for an empty cell)" in printed
    assert f"dropped rows: {dropped:,} (an empty cell" in printed and share in printed and "63.4%" not in printed


def test_drop_names_a_bad_cell_by_its_row_in_the_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table(100).astype({"score": "Int64"})
    frame.loc[[2, 3], "score"] = None
    frame.loc[20, "born"] = "not a date"
    with pytest.raises(InputError, match=r"^input rejected: row 21, column 'born': not a date"):
        privpub.publish(frame, spec(QI_ALL, missing="drop"))


def test_without_drop_no_dropped_rows_figure_is_published(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    release = privpub.publish(table(300), spec(QI_ALL))
    assert "dropped-rows" not in set(release.figures.name)


def test_category_makes_an_empty_categorical_cell_a_value_and_still_refuses_other_empty_cells(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = table(400)
    frame.loc[frame.index % 7 == 0, "sex"] = None
    frame.loc[frame.index % 11 == 0, "zip"] = None
    qi = [{"name": "sex", "kind": "categorical"}, {"name": "zip", "kind": "categorical", "hierarchy": "mask"}]
    release = privpub.publish(frame, spec(qi, missing="category"))
    published = release.tables["table"]
    assert any("(missing)" in v for v in published.sex) and len(published) == 400
    assert "dropped-rows" not in set(release.figures.name)
    frame.loc[5, "diagnosis"] = None  # the sensitive column: not a category
    with pytest.raises(InputError, match=r"^input rejected: row 6, column 'diagnosis': is empty \(null\)$"):
        privpub.publish(frame, spec(qi, missing="category"), state="other.duckdb")


# --- strictness of every new key -----------------------------------------------------------------


def file_spec(qi: dict, **dataset) -> dict:
    given = spec([qi], **dataset)
    given["dataset"]["input"] = "x.csv"
    return given


def strict(qi: dict | None = None, **dataset) -> str:
    with pytest.raises(SpecError) as err:
        spec_from_dict(file_spec(qi or {"name": "born", "kind": "date"}, **dataset))
    message = str(err.value)
    assert "\n" not in message
    return message


def test_every_new_key_is_strict_with_one_line():
    assert "[dataset] qi[1] kind: Input should be 'numeric', 'date', 'ordinal' or 'categorical'" in strict(
        {"name": "born", "kind": "dates"}
    )
    assert "'mask', 'month', 'year'" not in strict({"name": "zip", "kind": "categorical", "hierarchy": "masks"})
    assert 'hierarchy: Value error, must be "mask", "month", "year" or a table' in strict(
        {"name": "born", "kind": "date", "hierarchy": "week"}
    )
    assert 'hierarchy = "mask" is for a categorical QI' in strict(
        {"name": "s", "kind": "ordinal", "order": ["a"], "hierarchy": "mask"}
    )
    assert 'hierarchy = "month" is for a date QI' in strict(
        {"name": "zip", "kind": "categorical", "hierarchy": "month"}
    )
    assert "dates are ordered already" in strict({"name": "born", "kind": "date", "order": ["a"]})
    assert 'date quasi-identifier \'born\': hierarchy is "month" or "year"' in strict(
        {"name": "born", "kind": "date", "hierarchy": {"all": ["a"]}}
    )
    assert "order: Value error, mixes text and numbers" in strict({"name": "s", "kind": "ordinal", "order": [1, "2"]})
    assert "order: Value error, item 1 is neither text nor a number" in strict(
        {"name": "s", "kind": "ordinal", "order": [True, False]}
    )
    assert "'order' repeats a value" in strict({"name": "s", "kind": "ordinal", "order": [1, 1.0]})
    assert "give an 'order' or hierarchy = \"mask\", not both" in strict(
        {"name": "s", "kind": "categorical", "order": ["a"], "hierarchy": "mask"}
    )
    assert "[dataset] missing: Input should be 'refuse', 'drop' or 'category'" in strict(missing="skip")
    assert "[dataset] missing: Input should be 'refuse', 'drop' or 'category'" in strict(missing=True)
    assert strict(missng="drop") == "[dataset] missng: unknown key; did you mean missing?"


@pytest.mark.parametrize(
    ("dataset", "qi", "why"),
    [
        ({}, {"name": "born", "kind": "date"}, "[dataset] qi 'born': a date quasi-identifier"),
        ({"missing": "drop"}, {"name": "zip", "kind": "categorical"}, '[dataset] missing = "drop"'),
        ({"person_id": "@row"}, {"name": "zip", "kind": "categorical"}, '[dataset] person_id = "@row"'),
    ],
)
def test_what_the_dask_path_does_not_do_is_refused_before_any_work(dataset, qi, why):
    with pytest.raises(SpecError) as err:
        spec_from_dict(file_spec(qi, **dataset) | {"run": {"task_runner": "dask"}})
    assert str(err.value) == f'{why} runs in memory only, not with [run] task_runner = "dask"'


def test_a_technique_that_does_not_publish_dates_refuses_a_date_qi(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    given = spec([{"name": "born", "kind": "date"}]) | {"technique": {"name": "anatomy", "l": 2}}
    with pytest.raises(SpecError, match=r"^\[dataset\] qi 'born': technique anatomy does not publish dates yet"):
        privpub.publish(table(100), given)


# --- through the CLI -----------------------------------------------------------------------------


def test_the_cli_publishes_dates_masks_numeric_orders_and_drops_rows(tmp_path):
    frame, _ = with_empty_cells(table(1000))
    frame.to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "spec.toml").write_text(
        """[dataset]
name = "people"
input = "people.csv"
person_id = "pid"
sensitive = "diagnosis"
missing = "drop"
qi = [
  { name = "born", kind = "date", hierarchy = "month", near_unique = "allow" },
  { name = "zip", kind = "categorical", hierarchy = "mask" },
  { name = "score", kind = "ordinal", order = [1, 2, 3, 4, 5] },
]

[technique]
name = "generalization"
k = 10
"""
    )
    res = _without_a_server(tmp_path, tmp_path, "-m", "privpub.flows.cli", "publish", "spec.toml")
    assert res.returncode == 0, res.stderr
    assert "dropped rows: 50 (an empty cell" in res.stdout and "k-anonymity: 10" in res.stdout
    published = pq.read_table(next((tmp_path / "releases").glob("people-0001-*/table.parquet")))
    assert published.num_rows == 950 and isinstance(published.column("born_lo")[0].as_py(), dt.date)
    (tmp_path / "spec.toml").write_text((tmp_path / "spec.toml").read_text().replace('"drop"', '"refuse"'))
    res = _without_a_server(tmp_path, tmp_path, "-m", "privpub.flows.cli", "publish", "spec.toml")
    assert res.returncode == 1 and "is empty (null)" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_the_published_schema_refuses_a_date_range_whose_low_end_is_after_its_high_end():
    from pandera.errors import SchemaError, SchemaErrors

    from privpub.schemas.published import generalized_table_schema

    schema = generalized_table_schema(spec_from_dict(file_spec({"name": "born", "kind": "date"})).dataset)
    day = dt.date(2020, 3, 1)
    inside = pd.DataFrame({"born_lo": [day, day], "born_hi": [day, dt.date(2020, 3, 2)], "diagnosis": ["a", "b"]})
    schema.validate(inside)  # a one-day range: lo == hi
    outside = inside.assign(born_lo=[day, dt.date(2020, 3, 3)])  # one day past its high end
    with pytest.raises((SchemaError, SchemaErrors), match="born_lo <= born_hi"):
        schema.validate(outside)
    with pytest.raises((SchemaError, SchemaErrors)):
        schema.validate(inside.assign(born_hi=[1, 2]))  # numbers are not dates


def test_a_release_whose_date_ranges_run_backwards_is_refused_before_it_is_published(tmp_path, monkeypatch):
    """End to end: a technique that published every row's date range with its ends swapped (the
    equivalence classes, hence k, unchanged) is stopped by the published-table check; nothing is
    committed or written."""
    from privpub.tasks.techniques.generalization.technique import Generalization

    monkeypatch.chdir(tmp_path)
    anonymize = Generalization.anonymize

    def backwards(self, data, part, rng):
        release = anonymize(self, data, part, rng)
        table = release.tables["table"]
        lo, hi = table.column("born_lo"), table.column("born_hi")
        table = table.set_column(table.column_names.index("born_lo"), "born_lo", hi)
        release.tables["table"] = table.set_column(table.column_names.index("born_hi"), "born_hi", lo)
        return release

    qi = [
        {"name": "born", "kind": "date", "hierarchy": "month", "near_unique": "allow"},
        {"name": "sex", "kind": "categorical"},
    ]
    monkeypatch.setattr(Generalization, "anonymize", backwards)
    with pytest.raises(PublishedTableError, match=r"^published table 'table' fails its schema: .*born_lo <= born_hi"):
        privpub.publish(table(300), spec(qi))
    assert privpub.history("privpub.duckdb").empty
    assert not list(tmp_path.rglob("*.parquet"))
    monkeypatch.setattr(Generalization, "anonymize", anonymize)  # the same input, published as it should be
    released = privpub.publish(table(300), spec(qi)).tables["table"]
    assert (pd.to_datetime(released.born_lo) < pd.to_datetime(released.born_hi)).all()

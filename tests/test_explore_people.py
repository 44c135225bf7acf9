"""`privpub explore` and the Python API on a table with several rows per person
(`[dataset] rows_per_person = "many"`): the figures count people, the words say so, and each
setting's figures, the series composition's included, are those its publish records."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import privpub
from tests.test_anatomy_people import people_table, spec_of


def privacy_figures(release) -> dict:
    f = release.figures
    return dict(zip(f[f.kind == "privacy"].name, f[f.kind == "privacy"].value))


def test_explore_a_table_with_several_rows_per_person(tmp_path):
    frame = people_table()
    spec = spec_of(tmp_path, 3, composition="warn")
    said: list[str] = []
    spec["dataset"]["input"] = str(tmp_path / "visits.parquet")
    frame.to_parquet(spec["dataset"]["input"])
    explored = privpub.explore(spec, {"l": [2, 3, 6]}, progress=said.append).set_index("l")
    assert f"{len(frame)} valid rows of {frame.pid.nunique()} people read" in said[0]
    assert explored.loc[2, "passed"] and explored.loc[3, "passed"]
    # 12 diagnoses over 600 people: the most frequent is held by more than 600 / 6 people
    assert not explored.loc[6, "passed"] and "people" in explored.loc[6, "reason"]
    for l in (2, 3):
        assert explored.loc[l, "people per group"] >= l
        assert Fraction(explored.loc[l, "attribute disclosure"]) * l <= 1
    assert explored.series_composition.isna().all()  # nothing to combine with yet

    first = privpub.publish(spec=spec)  # l = 3, the explored setting's seed
    published = privacy_figures(first)
    assert published["people per group"] == explored.loc[3, "people per group"]
    assert published["attribute disclosure"] == pytest.approx(float(Fraction(explored.loc[3, "attribute disclosure"])))
    assert first.people == frame.pid.nunique()
    assert f"of {frame.pid.nunique()} people: every privacy figure counts people" in first._repr_html_()

    # a month later: most people return, some with another row; explore combines with the series
    later = pd.concat([frame[frame.pid < "PATIENT-00450"], frame[frame.pid < "PATIENT-00100"].drop_duplicates("pid")])
    later.to_parquet(spec["dataset"]["input"])
    again = privpub.explore(spec, {"l": [2, 3]}).set_index("l")
    assert again.series_composition.notna().all()
    second = privpub.publish(spec=spec)
    composed = second.figures.set_index("name").loc["series-composition-l"]
    assert again.loc[3, "series-composition-l"] == composed.value
    detail = second.info["metrics"].set_index("name").loc["series-composition-l", "detail"]
    assert f'"people": {later.pid.nunique()}' in detail and f'"returning": {later.pid.nunique()}' in detail

"""The report's series pivot (tasks/report/series.py `series_wide`) is computed once per frame and
asked three times: each ask gets the pivot of the frame it passes, and a copy of its own."""

from __future__ import annotations

import pandas as pd

from privpub.tasks.report.series import series_wide


def _figures(values: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sequence": [i + 1 for i in range(len(values))],
            "release_id": [f"s-{i + 1:04d}" for i in range(len(values))],
            "name": ["k-anonymity"] * len(values),
            "value": values,
        }
    )


def test_each_frame_gets_its_own_pivot_and_each_ask_a_copy():
    first, second = _figures([3.0, 5.0]), _figures([7.0])
    a = series_wide({"series_figures": first})
    assert a is not None and a["k-anonymity"].tolist() == [3.0, 5.0]
    a.loc[:, "k-anonymity"] = -1.0  # a caller changing its copy changes no later ask
    again = series_wide({"series_figures": first})
    assert again is not None and again["k-anonymity"].tolist() == [3.0, 5.0]
    other = series_wide({"series_figures": second})
    assert other is not None and other["k-anonymity"].tolist() == [7.0]
    assert series_wide({"series_figures": first})["k-anonymity"].tolist() == [3.0, 5.0]
    assert series_wide({"series_figures": None}) is None and series_wide({}) is None

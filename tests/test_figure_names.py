"""Figure names in one convention (issue 44 item 1): the utility figures are written with hyphens
(`query-error-1pct`); a state written with the old underscore names (`query_error_1pct`) reads
with the new ones everywhere, its stored rows untouched, and still passes verify --history."""

from __future__ import annotations

import duckdb
import pytest

import privpub
from privpub.flows.cli import main
from privpub.schemas.figure_names import current_name, current_names, old_names
from privpub.state import store as store_mod
from privpub.state.store import Store
from privpub.tasks.report.figures import label, verdict
from tests.helpers import write_spec


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("query_error_1pct", "query-error-1pct"),
        ("query_error_10pct", "query-error-10pct"),
        ("uncertainty_penalty_normalized", "uncertainty-penalty-normalized"),
        ("suppressed_rows", "suppressed-rows"),
        ("avg_group_size", "avg-group-size"),
        ("penalty_marital_status", "penalty-marital_status"),  # the column keeps its own spelling
        ("k-anonymity", "k-anonymity"),
        ("query-error-5pct", "query-error-5pct"),
        ("groups", "groups"),
    ],
)
def test_old_names_map_to_new_ones_and_back(old, new):
    assert current_name(old) == new and current_name(new) == new
    assert old in old_names([new])
    assert current_names({old: 1.0}) == {new: 1.0}
    assert label(old) == label(new) and verdict(old, 0.3) == verdict(new, 0.3)


def _old_writer(real):
    """_insert_figures as the code before issue 44 called it: the utility figures' old names."""

    def insert(con, release_id, privacy, others):
        utility = {old_names([name])[-1]: value for name, value in others["utility"].items()}
        return real(con, release_id, privacy, {**others, "utility": utility})

    return insert


def test_a_state_written_with_the_old_names_reads_with_the_new_ones_and_verifies(census_dir, monkeypatch, capsys):
    spec = write_spec(census_dir, seed=5)
    with monkeypatch.context() as m:
        m.setattr(store_mod, "_insert_figures", _old_writer(store_mod._insert_figures))
        first = privpub.publish(str(spec))
    second = privpub.publish(str(spec), overrides={"output": {"seed": 6}}, allow_repeat=True)
    state = census_dir / "privpub.duckdb"
    with duckdb.connect(str(state), read_only=True) as con:
        stored = {
            r[0] for r in con.execute("SELECT name FROM release_metrics WHERE release_id = ?", [str(first)]).fetchall()
        }
        stored_new = {
            r[0] for r in con.execute("SELECT name FROM release_metrics WHERE release_id = ?", [str(second)]).fetchall()
        }
    assert {"query_error_1pct", "suppressed_rows", "uncertainty_penalty_normalized"} <= stored  # the old state
    assert not any("query_error" in n or "_rows" in n for n in stored_new)  # written now: hyphens
    read = Store(state).release(str(first))["metrics"]
    names = set(read[read.kind == "utility"].name)
    assert {"query-error-1pct", "suppressed-rows", "uncertainty-penalty-normalized"} <= names
    assert not any("_" in n and not n.startswith("penalty-") for n in names)
    assert names == set(Store(state).release(str(second))["metrics"].query("kind == 'utility'").name)
    # the series' figures (the report's series table) read both releases under the new names
    series = Store(state).series_figures("census", ["query-error-1pct"])
    assert series.name.tolist() == ["query-error-1pct", "query-error-1pct"]
    whole = privpub.verify(state=state, history=True)
    assert whole.attrs["ok"], whole.attrs["lines"]
    assert privpub.verify(str(first), state).attrs["ok"]  # recomputed figures match the stored ones
    capsys.readouterr()
    assert main(["verify", "--history", "--state", str(state)]) == 0
    assert main(["report", str(first), "--state", str(state)]) == 0
    report = (census_dir / "releases" / str(first) / "report.html").read_text()
    assert "query_error_1pct" not in report and "1% of the rows" in report

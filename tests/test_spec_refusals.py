"""Issue 25, item 6: spec and input problems that used to surface only after the work, as
internal errors, are refused before any work with one line naming them (no release, no staging
folder, the attempt in the audit log)."""

from __future__ import annotations

import pytest

from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.helpers import census_spec_toml
from tests.test_drivers import _without_a_server

SEX = '{ name = "sex", kind = "categorical" }'
CASES = {
    "seed of 2^64": (lambda t: t.replace("seed = 11", "seed = 18446744073709551616"), "[output] seed"),
    "workload seed a string": (lambda t: t + '\n[evaluate]\nworkload_seed = "x"\n', "[evaluate] workload_seed"),
    "workload seed below 0": (lambda t: t + "\n[evaluate]\nworkload_seed = -1\n", "[evaluate] workload_seed"),
    "a Parquet file named .csv": (
        lambda t: t.replace('input = "census.csv"', 'input = "fake.csv"'),
        "is a Parquet file with a .csv name: rename it to .parquet",
    ),
    "a hierarchy cycle": (
        lambda t: t.replace(SEX, SEX[:-2] + ', hierarchy = { A = ["B", "male"], B = ["A", "female"] } }'),
        "quasi-identifier 'sex': hierarchy: a tree has one root, found 0 (a cycle)",
    ),
    "a leaf with two parents": (
        lambda t: t.replace(
            SEX, SEX[:-2] + ', hierarchy = { A = ["male", "female"], B = ["male"], "*" = ["A", "B"] } }'
        ),
        "quasi-identifier 'sex': hierarchy: 'male' has two parents",
    ),
    "a cycle beside a root": (
        lambda t: t.replace(
            SEX, SEX[:-2] + ', hierarchy = { "*" = ["male", "female"], X = ["Y", "Z"], Y = ["X", "W"] } }'
        ),
        "quasi-identifier 'sex': hierarchy: some nodes are not below the root (a cycle)",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_before_any_work_with_one_line(tmp_path, case):
    census(300, seed=1).to_csv(tmp_path / "census.csv", index=False)
    census(300, seed=1).to_parquet(tmp_path / "fake.csv")
    change, message = CASES[case]
    spec = tmp_path / "spec.toml"
    spec.write_text(change(census_spec_toml()))
    res = _without_a_server(tmp_path, tmp_path, "-m", "privpub.flows.cli", "publish", str(spec), "--quiet")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert message in lines[0] and "internal error" not in lines[0]
    assert not (tmp_path / "releases").exists()
    state = tmp_path / "privpub.duckdb"
    if state.exists():  # the refusal is logged where a state file can be named
        assert Store(state).history().empty


def test_a_forest_hierarchy_without_a_common_root_is_still_a_hierarchy(tmp_path):
    """QI hierarchies may have several roots (tasks/core/microdata.hierarchy_leaves)."""
    from privpub.schemas.spec import load_spec

    spec = tmp_path / "spec.toml"
    spec.write_text(census_spec_toml().replace(SEX, SEX[:-2] + ', hierarchy = { A = ["male"], B = ["female"] } }'))
    assert load_spec(spec).dataset.qi_spec("sex").hierarchy == {"A": ["male"], "B": ["female"]}

"""Every registered technique publishes through the same flow, store and re-verification."""

from __future__ import annotations

import pandas as pd
import pytest

from privpub.flows.publish import publish_flow
from privpub.flows.reverify import reverify
from privpub.state.store import Store
from privpub.tasks.techniques.registry import technique_names
from tests.helpers import write_spec

# each technique gets exactly its own parameters: an unknown key would be refused
PARAMS = {
    "generalization": dict(k=5, l=3, extra=""),
    "ambiguity": dict(k=None, l=None, extra="alpha = 0.25\nbeta = 0.1"),
    "priview": dict(k=None, l=None, extra="alpha = 0.25\nbeta = 0.1"),
    "muco": dict(k=None, l=3, extra='delta = "1/6"'),
    "anatomy": dict(k=None, l=3, extra=""),
}
TABLES = {"generalization": {"table"}, "priview": {"AT", "ST"}, "muco": {"table"}, "anatomy": {"QIT", "ST"}}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_technique_publishes_and_reverifies(prefect_server, census_dir, name):
    assert name in technique_names()
    spec = write_spec(census_dir, technique=name, seed=8, **PARAMS[name])
    release_id = publish_flow(spec_path=str(spec))
    store = Store(census_dir / "privpub.duckdb")
    rel = store.release(release_id)
    assert rel["technique"] == name and rel["status"] == "committed"
    files = {f.removesuffix(".parquet") for f in rel["tables"].file}
    if name == "ambiguity":
        assert files == {"ST"} | {
            f"AT_{q}" for q in ("age", "sex", "education", "marital", "race", "workclass", "country", "salary")
        }
    else:
        assert files == TABLES[name]
    for f in rel["tables"].file:
        published = pd.read_parquet(census_dir / "releases" / release_id / f)
        assert "pid" not in published.columns
    privacy = rel["metrics"][rel["metrics"].kind == "privacy"]
    assert len(privacy) >= 1 and privacy.passed.all()
    ok, lines = reverify(census_dir / "privpub.duckdb", release_id)
    assert ok, lines

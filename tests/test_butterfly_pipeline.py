"""butterfly and union-qid publish through the Prefect flow, the store and re-verification."""

from __future__ import annotations

import pandas as pd
import pytest

from privpub.flows.publish import publish_flow
from privpub.flows.reverify import reverify
from privpub.state.store import Store
from privpub.tasks.demo_data import CENSUS_QI

# The paper's S1/S2 on the synthetic census: birthplace -> country, gender -> sex; salary is
# the sensitive column, so S2 keeps the paper's other attributes (workclass, race).
S1 = ["age", "occupation", "country", "sex", "marital", "education"]
S2 = ["sex", "marital", "education", "workclass", "race"]


def spec_toml(technique: str, k: int, extra: str = "") -> str:
    qi = [q for q in CENSUS_QI if q["name"] != "salary"] + [{"name": "occupation", "kind": "categorical"}]
    entries = []
    for q in qi:
        order = (", order = [" + ", ".join(f'"{v}"' for v in q["order"]) + "]") if "order" in q else ""
        entries.append(f'{{ name = "{q["name"]}", kind = "{q["kind"]}"{order} }}')
    qids = "[" + ", ".join("[" + ", ".join(f'"{c}"' for c in s) + "]" for s in (S1, S2)) + "]"
    return (
        "\n".join(
            [
                "[dataset]",
                'name = "census-multi"',
                'input = "census.csv"',
                'person_id = "pid"',
                'sensitive = "salary"',
                "qi = [" + ", ".join(entries) + "]",
                "",
                "[technique]",
                f'name = "{technique}"',
                f"k = {k}",
                f"qids = {qids}",
                extra,
                "",
                "[output]",
                'dir = "releases"',
                'state = "privpub.duckdb"',
                "seed = 4",
            ]
        )
        + "\n"
    )


@pytest.mark.parametrize("technique, extra", [("butterfly", "k_prime = 2"), ("union-qid", "")])
def test_publishes_and_reverifies(prefect_server, census_dir, technique, extra):
    spec = census_dir / "spec.toml"
    spec.write_text(spec_toml(technique, 6, extra))
    release_id = publish_flow(spec_path=str(spec))
    store = Store(census_dir / "privpub.duckdb")
    rel = store.release(release_id)
    assert rel["technique"] == technique and rel["status"] == "committed"
    assert set(rel["tables"].file) == {"table.parquet"}
    published = pd.read_parquet(census_dir / "releases" / release_id / "table.parquet")
    assert "pid" not in published.columns and len(published) == 600
    metrics = rel["metrics"]
    privacy = metrics[metrics.kind == "privacy"].set_index("name")
    assert privacy.passed.all()
    assert {"k-anonymity QID1", "k-anonymity QID2"} <= set(privacy.index)
    assert (privacy.loc[["k-anonymity QID1", "k-anonymity QID2"], "value"] >= 6).all()
    if extra:
        assert privacy.loc["k'-anonymity union QID", "value"] >= 2
    utility = metrics[metrics.kind == "utility"].set_index("name").value
    assert utility["uncertainty-penalty-common"] + utility["uncertainty-penalty-distinct"] == pytest.approx(
        utility["uncertainty-penalty"]
    )
    ok, lines = reverify(census_dir / "privpub.duckdb", release_id)
    assert ok, lines

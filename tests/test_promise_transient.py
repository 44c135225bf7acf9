"""Serial's transient (protected) values against the seed paper's definition (issue 46, item 1).
The paper (seeds/002, Section 6): "We take 10% least frequent sensitive values as transient
sensitive values." `transient = f` (a fraction) is that: the round(f x V) (at least one) least
frequent of the snapshot's V distinct values. Checked by brute force over every subset of that
size on small random inputs, and end to end from the release the pipeline commits."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest

import privpub
from privpub.state.store import Store
from tests.helpers import technique_and_data

QI = [{"name": "age", "kind": "numeric"}]


def least_frequent_sets(counts: dict[str, int], share: float) -> list[set[str]]:
    """Every set of the definition's size whose values are none more frequent than a value left
    out: the sets that are "the least frequent values" (several when counts tie at the edge)."""
    size = max(1, round(share * len(counts)))
    values = sorted(counts)
    return [
        set(s)
        for s in combinations(values, size)
        if max(counts[v] for v in s) <= min((counts[v] for v in values if v not in s), default=np.inf)
    ]


def frame_of(counts: dict[str, int], seed: int) -> pd.DataFrame:
    values = np.random.default_rng(seed).permutation([v for v, c in counts.items() for _ in range(c)])
    return pd.DataFrame({"pid": np.arange(len(values)), "age": np.arange(len(values)) % 50 + 20, "v": values})


@pytest.mark.parametrize("seed", range(40))
def test_a_fractional_transient_set_is_the_least_frequent_share_of_the_values(seed):
    """Promise: serial-transient-least-frequent. Random counts (ties included) of 3 to 9 values,
    a random share: the protected set is one of the least-frequent sets of the definition's size,
    and the only one when no tie crosses its edge."""
    rng = np.random.default_rng(seed)
    n_values = int(rng.integers(3, 10))
    counts = {f"v{i}": int(c) for i, c in enumerate(rng.integers(1, 7, n_values))}
    share = float(rng.choice([0.1, 0.2, 0.25, 0.34, 0.5, 0.6, 0.9]))
    tech, data = technique_and_data(frame_of(counts, seed), QI, "v", "serial", l=2, transient=share)
    chosen = {str(v) for v in tech.protected_values(data)}
    allowed = least_frequent_sets(counts, share)
    assert chosen in allowed, (counts, share, chosen)
    if len(allowed) == 1:
        assert chosen == allowed[0]


def test_the_committed_release_protects_the_least_frequent_tenth(tmp_path):
    """Promise: serial-transient-least-frequent. The paper's own setting, transient = 0.1, over 20
    values of distinct counts through privpub.publish: the release's protected values (kept for
    verify) are exactly the two least frequent, and its check reads them."""
    counts = {f"value-{i:02d}": 3 + i for i in range(20)}  # value-00 (3 rows) is the rarest
    frame = frame_of(counts, 0)
    spec = {
        "dataset": {"name": "s", "person_id": "pid", "sensitive": "v", "qi": QI},
        "technique": {"name": "serial", "l": 2, "transient": 0.1},
        "output": {"dir": str(tmp_path / "releases"), "seed": 3},
    }
    release = privpub.publish(frame, spec, state=tmp_path / "privpub.duckdb")
    protected = Store(tmp_path / "privpub.duckdb").private(str(release))["transient"]
    assert sorted(map(str, protected)) == ["value-00", "value-01"]
    assert [least_frequent_sets(counts, 0.1)] == [[{"value-00", "value-01"}]]
    assert privpub.verify(str(release), tmp_path / "privpub.duckdb").attrs["ok"]

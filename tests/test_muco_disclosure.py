"""Disclosure figures against exact enumeration: Example 1's formula and Section 5.1's measures.
The references are tests/muco_oracle.py and the enumeration below; none shares code with
tasks/techniques/muco/delta_probability.py."""

import itertools

import muco_oracle as oracle
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_muco import make_data, run

from privpub.tasks.techniques.muco import delta_probability as dp


@st.composite
def stored_tables(draw):
    """Tiny random output tables: a few groups, each tuple a distribution over its group's values."""
    n_groups = draw(st.integers(1, 2))
    rows, entries = 0, []
    for g in range(n_groups):
        values = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
        for _ in range(draw(st.integers(1, 3))):
            w = np.array(draw(st.lists(st.integers(0, 4), min_size=len(values), max_size=len(values))), float)
            if w.sum() == 0:
                w[0] = 1
            for v, p in zip(values, w / w.sum()):
                if p > 0:
                    entries.append((g, rows, v, p))
            rows += 1
    g, r, v, p = map(np.array, zip(*entries))
    table = pa.table(
        {
            "attribute": np.full(len(g), "age"),
            "gid": g.astype(np.int32),
            "row": r,
            "code": v.astype(np.int32),
            "prob": p,
        }
    )
    targets = np.array(draw(st.lists(st.integers(0, 3), min_size=rows, max_size=rows)))
    return table, targets


def enumerate_example1(table: pa.Table, targets: np.ndarray) -> np.ndarray:
    """E[ 1{v_t = x_t} / num(x_t) ] over every joint outcome of the tuples' independent draws."""
    df = table.to_pandas()
    choices = [list(zip(d["code"], d["prob"])) for _, d in df.groupby("row", sort=True)]
    out = np.zeros(len(choices))
    for outcome in itertools.product(*choices):
        prob = np.prod([p for _, p in outcome])
        values = np.array([v for v, _ in outcome])
        for t in range(len(choices)):
            if values[t] == targets[t]:
                out[t] += prob / (values == targets[t]).sum()
    return out


@settings(deadline=None, max_examples=60)
@given(stored_tables())
def test_example1_formula_equals_enumeration(case):
    table, targets = case
    got = dp.example1_identity(table, "age", targets)
    assert got == pytest.approx(enumerate_example1(table, targets), abs=1e-12)


def test_example1_on_a_released_table():
    data = make_data(n=60, delta="1/3", l=2)
    _, _, rel = run(data)
    src = rel.private["source_row"].column("source_row").to_numpy()
    target = data.codes[src, 0]  # each published row's tuple matched on its true age
    p = dp.example1_identity(rel.private["output_tables"], "age", target)
    expect = oracle.example1(rel.private["output_tables"], "age", target.tolist())
    assert p == pytest.approx(expect, abs=1e-12)
    assert p.max() > 0


@st.composite
def matching_case(draw):
    n = draw(st.integers(1, 7))
    d = draw(st.integers(1, 3))
    cell = st.integers(0, 2)
    orig = np.array(draw(st.lists(st.lists(cell, min_size=d, max_size=d), min_size=n, max_size=n)))
    pub = np.array(draw(st.lists(st.lists(st.integers(-1, 2), min_size=d, max_size=d), min_size=n, max_size=n)))
    own = np.array(draw(st.permutations(range(n))))
    s_orig = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    s_pub = s_orig[np.argsort(own)]  # the sensitive value travels with the record
    return orig, pub, own, s_orig, s_pub


@settings(deadline=None, max_examples=60)
@given(matching_case(), st.sampled_from(dp.P_MATCH))
def test_section51_disclosure_equals_enumeration(case, p):
    orig, pub, own, s_orig, s_pub = case
    fast = dp.disclosure(orig, pub, own, s_orig, s_pub, p_matches=(p,))[p]
    slow = oracle.disclosure(orig.tolist(), pub.tolist(), own.tolist(), s_orig.tolist(), s_pub.tolist(), p)
    assert fast == pytest.approx(slow, abs=1e-12)


@pytest.mark.parametrize("d", [1, 2, 5, 7])
def test_subset_weights_equal_the_enumerated_draws(d):
    # P(S) of every subset, from keep/drop patterns; subset_weights gives it per size
    for p in dp.P_MATCH:
        w = dp.subset_weights(p, d)
        for subset, prob in oracle.subset_probabilities(p, d).items():
            assert w[len(subset)] == pytest.approx(prob, rel=1e-12)


def test_release_full_match_discloses_only_unchangeable_tuples():
    # Section 5.1: with every QI known (P_match = 1) the target's own record matches only if
    # randomize_unchanged_tuples could not change it (the paper reports 0 for that case)
    data = make_data(n=160, delta="1/4", l=3)
    tech, _, rel = run(data)
    res = {r.model: r.value for r in tech.verify(rel, {"data": data})}
    pub = rel.tables["table"].to_pandas()
    src = rel.private["source_row"].column("source_row").to_numpy()
    expect = 0.0
    for row in rel.private["unchangeable_rows"]:
        target = data.frame.iloc[src[row]]
        matches = (pub[data.qi_names].astype(str) == target[data.qi_names].astype(str)).all(axis=1).sum()
        expect += 1 / matches
    assert res["identity disclosure (P_match=1.0)"] == pytest.approx(expect / data.n)
    assert res["identity disclosure (P_match=0.7)"] > 0
    for p in dp.P_MATCH:  # and every figure, exactly, by enumeration
        ident, attr = oracle.release_disclosure(data, rel, p)
        assert res[f"identity disclosure (P_match={p})"] == pytest.approx(ident, abs=1e-12)
        assert res[f"attribute disclosure (P_match={p})"] == pytest.approx(attr, abs=1e-12)


def test_release_disclosure_agrees_with_enumeration():
    data = make_data(n=48, delta="1/4", l=2)
    tech, _, rel = run(data)
    res = {r.model: r.value for r in tech.verify(rel, {"data": data})}
    for p in dp.P_MATCH:
        ident, attr = oracle.release_disclosure(data, rel, p)
        assert res[f"identity disclosure (P_match={p})"] == pytest.approx(ident, abs=1e-12)
        assert res[f"attribute disclosure (P_match={p})"] == pytest.approx(attr, abs=1e-12)

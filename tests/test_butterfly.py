"""Butterfly golden tests from the paper's worked examples, and the technique's contract."""

from __future__ import annotations

from collections import Counter
from itertools import product

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privpub.schemas.errors import SpecError
from privpub.tasks.demo_data import butterfly_table1
from privpub.tasks.techniques.butterfly.multi_qid import multi_qid_anonymity
from privpub.tasks.verify.linkage import candidates, joint_anonymity
from tests.helpers import release_of, technique_and_data
from tests.test_golden_spine import DOCTOR, TABLE2, TABLE3

CAT = "categorical"


def cat_qi(*names):
    return [{"name": n, "kind": CAT} for n in names]


def as_published(frame: pd.DataFrame, cols) -> pa.Table:
    """A raw table in published form: every categorical cell a one-value list."""
    return pa.table({c: [[v] for v in frame[c]] for c in cols})


# --- Example 2, Fig. 2(a) ---------------------------------------------------------------------

FIG2A = pd.DataFrame(
    {
        "pid": range(6),
        "A": ["a1", "a1", "a2", "a2", "a3", "a3"],
        "B": ["b"] * 6,
        "C": ["c1", "c2", "c1", "c3", "c2", "c3"],
        "s": list("uvwxyz"),
    }
)


def test_fig2a_is_2_anonymous_for_ab_and_bc_not_abc():
    table = as_published(FIG2A, "ABC")
    res = multi_qid_anonymity(table, [["A", "B"], ["B", "C"]], 2, k_prime=2, union=["A", "B", "C"])
    assert [(r.model, r.value, r.passed) for r in res] == [
        ("k-anonymity QID1", 2, True),
        ("k-anonymity QID2", 2, True),
        ("k'-anonymity union QID", 1, False),
    ]


def test_butterfly_on_fig2a_publishes_the_2_butterfly_without_loss():
    """All tuples agree on B (the body): butterflies whose wings pair the A and C values, so the
    release is Fig. 2(a) itself, with zero uncertainty penalty; the union QID method is not."""
    tech, data = technique_and_data(FIG2A, cat_qi("A", "B", "C"), "s", "butterfly", k=2, qids=[["A", "B"], ["B", "C"]])
    part, release = release_of(tech, data)
    table = release.tables["table"]
    rows = Counter((tuple(r["A"]), tuple(r["B"]), tuple(r["C"]), r["s"]) for r in table.to_pylist())
    assert rows == Counter(((a,), (b,), (c,), s) for a, b, c, s in FIG2A[["A", "B", "C", "s"]].itertuples(index=False))
    assert all(r.passed and r.value == 2 for r in tech.verify(release, {}))
    assert tech.utility(release, data)["uncertainty-penalty"] == 0
    assert part.info["butterflies"] >= 1 and part.info["points_in_butterflies"] == 6

    union, udata = technique_and_data(
        FIG2A, cat_qi("A", "B", "C"), "s", "union-qid", k=2, qids=[["A", "B"], ["B", "C"]]
    )
    _, urelease = release_of(union, udata)
    assert union.utility(urelease, udata)["uncertainty-penalty"] > 0


# --- Theorem 1, Table 4 -----------------------------------------------------------------------

TABLE4 = pd.DataFrame(list(product(["a1", "a2"], ["b1", "b2"], ["c1", "c2"])), columns=list("ABC"))


@pytest.mark.parametrize("k", [2, 4, 5])
def test_table4_construction_is_k_anonymous_for_every_proper_qid_not_the_union(k):
    copies = -(-k // 2)  # ceil(k/2) copies of every tuple of R1
    table = as_published(pd.concat([TABLE4] * copies, ignore_index=True), "ABC")
    proper = [["A", "B"], ["B", "C"], ["A", "C"], ["A"], ["C"]]
    res = multi_qid_anonymity(table, proper, k, k_prime=k, union=["A", "B", "C"])
    assert all(r.passed for r in res[:-1])
    assert res[-1].value == copies and not res[-1].passed


def test_butterfly_on_table4_is_k_anonymous_for_each_qid():
    frame = pd.concat([TABLE4] * 2, ignore_index=True).assign(pid=range(16), s=list("pq") * 8)
    tech, data = technique_and_data(frame, cat_qi("A", "B", "C"), "s", "butterfly", k=4, qids=[["A", "B"], ["B", "C"]])
    part, release = release_of(tech, data)
    assert all(r.passed for r in tech.verify(release, {}))
    assert part.info["loss"] <= part.info["union_loss"]


# --- Example 1, Tables 1-3 --------------------------------------------------------------------

QI1 = [
    {"name": "occupation", "kind": CAT},
    {"name": "age", "kind": "numeric"},
    {"name": "vehicle", "kind": CAT},
    {"name": "postcode", "kind": "numeric"},
]
INSURER = ["age", "vehicle", "postcode"]
HR = ["occupation", "age", "postcode"]


def table1_release(**extra):
    tech, data = technique_and_data(butterfly_table1(), QI1, "faulty", "butterfly", k=2, qids=[INSURER, HR], **extra)
    return tech, release_of(tech, data)[1].tables["table"]


def test_separate_releases_reidentify_the_doctor_with_the_insurers_knowledge_alone():
    insurer = {c: DOCTOR[c] for c in INSURER}
    assert len(candidates([TABLE2.drop(["occupation"])], insurer)) == 2  # its own release is safe
    found = candidates([TABLE2, TABLE3], insurer)  # ... until it obtains the HR release
    assert len(found) == 1 and found[0]["faulty"] == ("set", frozenset({"Yes"}))


def test_one_butterfly_release_keeps_every_recipient_at_2():
    _, table = table1_release()
    frame = butterfly_table1()
    for qid in (INSURER, HR):
        people = [dict(zip(qid, r)) for r in frame[qid].itertuples(index=False)]
        assert joint_anonymity([table], people) >= 2
    found = candidates([table], {c: DOCTOR[c] for c in INSURER})
    assert {v for rec in found for v in rec["faulty"][1]} == {"Yes", "No"}


def test_butterfly_alone_does_not_stop_background_knowledge_collusion():
    """Section 5.2: recipients pooling their knowledge link on the union QID; the plain butterfly
    release pins the doctor there (hence the two-level framework), the union method does not."""
    _, table = table1_release()
    assert len(candidates([table], DOCTOR)) == 1
    tech, data = technique_and_data(butterfly_table1(), QI1, "faulty", "union-qid", k=2, qids=[INSURER, HR])
    assert len(candidates([release_of(tech, data)[1].tables["table"]], DOCTOR)) == 2


# --- contract ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, message",
    [
        ({"qids": [["A", "B"]]}, "needs k"),
        ({"k": 2}, "qids"),
        ({"k": 2, "qids": [["A", "Z"]]}, "'Z' is not a quasi-identifier"),
        ({"k": 2, "qids": [[]]}, "qids"),
        ({"k": 2, "qids": [["A", "A"]]}, "twice"),
        ({"k": 2, "qids": [["A", "B"]], "k_prime": 2}, "k_prime must be smaller"),
    ],
)
def test_bad_parameters_name_the_key(params, message):
    with pytest.raises(SpecError, match=message):
        technique_and_data(FIG2A, cat_qi("A", "B", "C"), "s", "butterfly", **params)


def test_published_table_shape_and_seeded_shuffle():
    frame = pd.DataFrame(
        {
            "pid": range(40),
            "age": np.arange(40) % 13 + 20,
            "A": [f"a{i % 5}" for i in range(40)],
            "B": [f"b{i % 3}" for i in range(40)],
            "s": [f"s{i % 4}" for i in range(40)],
        }
    )
    qi = [{"name": "age", "kind": "numeric"}] + cat_qi("A", "B")
    tech, data = technique_and_data(frame, qi, "s", "butterfly", k=4, qids=[["age", "B"], ["B", "A"]])
    a = release_of(tech, data, seed=1)[1].tables["table"]
    b = release_of(tech, data, seed=1)[1].tables["table"]
    c = release_of(tech, data, seed=2)[1].tables["table"]
    assert a.column_names == ["age_lo", "age_hi", "A", "B", "s"]
    assert a.num_rows == 40 and "pid" not in a.column_names
    assert a.equals(b) and not a.equals(c)
    assert sorted(a.column("s").to_pylist()) == sorted(frame.s)
    lo, hi = a.column("age_lo").to_numpy(), a.column("age_hi").to_numpy()
    assert (lo <= hi).all() and lo.min() >= 20 and hi.max() <= 32


def test_two_level_refuses_when_too_few_union_classes():
    from privpub.schemas.errors import PartitionError

    same = FIG2A.assign(A="a1", C="c1")  # one class on the union: 1 < ceil(4/2) representatives
    tech, data = technique_and_data(
        same, cat_qi("A", "B", "C"), "s", "butterfly", k=4, k_prime=2, qids=[["A", "B"], ["B", "C"]]
    )
    with pytest.raises(PartitionError, match="fewer than ceil"):
        release_of(tech, data)


def test_group_sizes_are_the_union_classes_of_the_published_table():
    from privpub.tasks.demo_data import CENSUS_QI, census
    from privpub.tasks.verify.published import class_ids, qi_columns
    from tests.helpers import release_of, technique_and_data

    frame = census(400, seed=2)
    qids = [["age", "sex", "education"], ["education", "marital", "race"]]
    tech, data = technique_and_data(frame, CENSUS_QI, "occupation", "butterfly", k=5, qids=qids)
    _, release = release_of(tech, data)
    table = release.tables["table"]
    sizes = tech.group_sizes(release)
    assert sizes.sum() == len(frame)
    union_class, n_union = class_ids(table, qi_columns(table, tech.union))
    assert len(sizes) == n_union
    # union-QID classes refine every QID's classes: each union class lies inside one QID class
    for qid in qids:
        qid_class, n_qid = class_ids(table, qi_columns(table, qid))
        assert n_qid <= n_union
        pairs = {(u, q) for u, q in zip(union_class.tolist(), qid_class.tolist())}
        assert len(pairs) == n_union


def census_case():
    from privpub.tasks.demo_data import CENSUS_QI, census

    qids = [["age", "sex", "education"], ["education", "marital", "race"]]
    return census(300, seed=4), CENSUS_QI, qids, 4


COMPOSITION_CASES = {  # frame, QIs, QIDs, k
    "fig2a": lambda: (FIG2A.drop(columns="s"), cat_qi("A", "B", "C"), [["A", "B"], ["B", "C"]], 2),
    "table4": lambda: (
        pd.concat([TABLE4] * 2, ignore_index=True).assign(pid=range(16)),
        cat_qi("A", "B", "C"),
        [["A", "B"], ["B", "C"]],
        4,
    ),
    "census": census_case,
}


@pytest.mark.parametrize("case", list(COMPOSITION_CASES))
def test_the_series_check_composes_each_qids_published_classes(case):
    """`composition_groups` (the series check, docs/series.md): per QID, every group lies inside
    one class of the published table on that QID and holds at least k rows. Read from the
    published table: each row's sensitive value is unique, so it names the input row."""
    from privpub.tasks.verify.published import class_ids, qi_columns

    frame, qi, qids, k = COMPOSITION_CASES[case]()
    frame = frame.assign(tag=[f"r{i}" for i in range(len(frame))])
    tech, data = technique_and_data(frame, qi, "tag", "butterfly", k=k, qids=qids)
    part, release = release_of(tech, data)
    table = release.tables["table"]
    input_row = pd.Index(frame["tag"]).get_indexer(table.column("tag").to_pylist())
    group, n_groups = tech.composition_groups(data, part)
    assert len(group) == len(qids) * len(frame) and set(group.tolist()) == set(range(n_groups))
    assert tech.composition_views() == [f"QID {q + 1} ({', '.join(qid)})" for q, qid in enumerate(qids)]
    split_units = 0
    for q, qid in enumerate(qids):
        of_row = group[q * len(frame) : (q + 1) * len(frame)]
        published_class = np.empty(len(frame), np.int64)
        published_class[input_row] = class_ids(table, qi_columns(table, qid))[0]
        pairs = set(zip(of_row.tolist(), published_class.tolist()))
        assert len(pairs) == len(set(of_row.tolist()))  # a group never spans two published classes
        assert np.unique(of_row, return_counts=True)[1].min() >= k  # k rows per class, as Butterfly promises
        unit = part.group
        split_units += len(set(zip(unit.tolist(), published_class.tolist()))) > len(set(unit.tolist()))
    if case == "fig2a":  # its butterflies' units hold several classes of a QID: a unit is too coarse
        assert split_units

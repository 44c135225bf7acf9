"""Golden tests of the spine from the seed papers' worked examples."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa

from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import ambiguity_fig1, butterfly_table1
from privpub.tasks.evaluate.estimate_generalized import estimate_from_generalized
from privpub.tasks.evaluate.workload import CountQuery, RangeCond
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.verify.linkage import candidates, joint_anonymity

FIG1_QI = [
    {"name": "age", "kind": "numeric"},
    {"name": "gender", "kind": "categorical"},
    {"name": "zipcode", "kind": "numeric"},
]


def fig1_release(seed=0):
    frame = ambiguity_fig1()
    spec = spec_from_dict(
        {
            "dataset": {"name": "fig1", "input": "x.csv", "person_id": "name", "sensitive": "disease", "qi": FIG1_QI},
            "technique": {"name": "generalization", "k": 4, "l": 3},
        }
    )
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, frame)
    rng = np.random.default_rng(seed)
    part = tech.partition(data, rng)
    return tech, tech.anonymize(data, part, rng), data


def test_fig1b_three_diverse_generalization():
    """Mondrian with k = 4, l = 3 on Fig. 1(a) yields exactly the two QI-groups of Fig. 1(b)."""
    tech, release, _ = fig1_release()
    rows = release.tables["table"].to_pylist()
    groups = {}
    for r in rows:
        key = (r["age_lo"], r["age_hi"], tuple(r["gender"]), r["zipcode_lo"], r["zipcode_hi"])
        groups.setdefault(key, []).append(r["disease"])
    assert {k: sorted(v) for k, v in groups.items()} == {
        (20, 60, ("M",), 11000, 23000): sorted(["diabetes", "flu", "diarrhea", "stroke"]),
        (20, 60, ("F",), 21000, 54000): sorted(["leukemia", "diabetes", "leukemia", "dyspepsia"]),
    }
    results = {r.model: r for r in tech.verify(release, {})}
    assert results["k-anonymity"].value == 4 and results["k-anonymity"].passed
    assert results["l-diversity"].value == 3 and results["l-diversity"].passed


def test_fig1b_q1_estimate_is_three_eighths():
    """Q1: Disease = stroke AND Age >= 45 estimates 1 x (60-45)/(60-20) = 3/8 (true answer 1)."""
    tech, release, _ = fig1_release()
    q1 = CountQuery((("age", RangeCond(45, 60)),), "stroke")
    est = estimate_from_generalized(release.tables["table"], ["age", "gender", "zipcode"], "disease", [q1])
    assert Fraction(est[0]) == Fraction(3, 8)
    assert Fraction(tech.estimate_counts(release, [q1])[0]) == Fraction(3, 8)


def test_published_order_is_shuffled_by_the_seed():
    _, a, _ = fig1_release(seed=1)
    _, b, _ = fig1_release(seed=1)
    _, c, _ = fig1_release(seed=2)
    assert a.tables["table"].equals(b.tables["table"])  # same seed, same release
    assert not a.tables["table"].equals(c.tables["table"])


# --- Butterfly Example 1 (Tables 1-3) ---------------------------------------------------------

TABLE2 = pa.table(
    {  # 2-anonymous on (age, vehicle, postcode); vehicle generalized to its type
        "occupation": ["Dentist", "Family doctor", "Banker", "Mortgage broker"],
        "age": [30, 30, 30, 30],
        "vehicle": [
            ["Red Truck", "Black Truck"],
            ["White Sedan", "Green Sedan"],
            ["White Sedan", "Green Sedan"],
            ["Red Truck", "Black Truck"],
        ],
        "postcode": [31043] * 4,
        "faulty": ["No", "Yes", "No", "No"],
    }
)
TABLE3 = pa.table(
    {  # 2-anonymous on (occupation, age, postcode); occupation generalized
        "occupation": [
            ["Dentist", "Family doctor"],
            ["Dentist", "Family doctor"],
            ["Banker", "Mortgage broker"],
            ["Banker", "Mortgage broker"],
        ],
        "age": [30, 30, 30, 30],
        "vehicle": ["Red Truck", "White Sedan", "Green Sedan", "Black Truck"],
        "postcode": [31043] * 4,
        "faulty": ["No", "Yes", "No", "No"],
    }
)
DOCTOR = {"occupation": "Family doctor", "age": 30, "vehicle": "White Sedan", "postcode": 31043}


def test_each_release_alone_is_2_anonymous_for_its_recipient():
    insurer = {k: DOCTOR[k] for k in ("age", "vehicle", "postcode")}
    hr = {k: DOCTOR[k] for k in ("occupation", "age", "postcode")}
    assert len(candidates([TABLE2.drop(["occupation"])], insurer)) == 2
    assert len(candidates([TABLE3.drop(["vehicle"])], hr)) == 2


def test_two_releases_together_reidentify_the_family_doctor():
    found = candidates([TABLE2, TABLE3], DOCTOR)
    assert len(found) == 1
    assert found[0]["faulty"] == ("set", frozenset({"Yes"}))


def test_one_release_on_the_union_qid_does_not():
    frame = butterfly_table1()
    qi = [
        {"name": c, "kind": "categorical" if c in ("occupation", "vehicle") else "numeric"}
        for c in ("occupation", "age", "vehicle", "postcode")
    ]
    spec = spec_from_dict(
        {
            "dataset": {"name": "accidents", "input": "x.csv", "person_id": "pid", "sensitive": "faulty", "qi": qi},
            "technique": {"name": "generalization", "k": 2},
        }
    )
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, frame)
    rng = np.random.default_rng(0)
    release = tech.anonymize(data, tech.partition(data, rng), rng)
    table = release.tables["table"]
    found = candidates([table], DOCTOR)
    assert len(found) == 2
    assert {v for rec in found for v in rec["faulty"][1]} == {"Yes", "No"}
    everyone = [
        dict(zip(("occupation", "age", "vehicle", "postcode"), r))
        for r in frame[["occupation", "age", "vehicle", "postcode"]].itertuples(index=False)
    ]
    assert joint_anonymity([table], everyone) == 2
    assert joint_anonymity([TABLE2, TABLE3], everyone) == 1

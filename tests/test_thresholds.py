"""Every verified privacy model, just inside its threshold (passes) and one step outside (fails).

Each case builds the smallest published input that sits exactly at the threshold and then moves
it by the smallest step the model allows (one tuple, one value, one unit of a ratio), and
asserts the verdict and the reported figure exactly. tests/mutation/run_mutants.py loosens each
comparison in turn and checks that these tests notice.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from test_presence_association import ambiguity_release, priview_release

from privpub.tasks.audit import Auditor, secret_from_mapping
from privpub.tasks.core.sensitive_models import ModelChoice
from privpub.tasks.core.types import Release
from privpub.tasks.techniques.ambiguity.association import ambiguity_association, priview_association
from privpub.tasks.techniques.ambiguity.presence import ambiguity_presence, priview_presence
from privpub.tasks.techniques.anatomy.technique import verify_anatomy
from privpub.tasks.techniques.butterfly.multi_qid import multi_qid_anonymity
from privpub.tasks.techniques.muco import delta_probability as dp
from privpub.tasks.techniques.serial import guarantee as sg
from privpub.tasks.verify.k_anonymity import k_and_l
from privpub.tasks.verify.sensitive import UNBOUNDED, sensitive_results

# --- MuCo: delta-probability (Definition 3) and the cover (Corollary 3.2) ----------------------


def stored_tables(entries: list[tuple[str, int, int, int, float]]) -> pa.Table:
    """MuCo's stored long table from (attribute, gid, row, code, prob) entries."""
    a, g, r, c, p = zip(*entries)
    return pa.table(
        {
            "attribute": list(a),
            "gid": pa.array(g, pa.int32()),
            "row": pa.array(r, pa.int64()),
            "code": pa.array(c, pa.int32()),
            "prob": pa.array(p, pa.float64()),
        }
    )


def column_at_delta(delta: Fraction, step: Fraction) -> tuple[pa.Table, Fraction]:
    """Tuples over two values whose column of value 0 has max / sum = delta + a step: one tuple
    puts weight a/s (+ step) on value 0, b - a tuples put 1/s on it (delta = a/b, s a power of
    two, so every entry is exact in binary). Returns the table and its largest column ratio."""
    a, b = delta.numerator, delta.denominator
    s = 2 ** math.ceil(math.log2(a + 1))
    col0 = [Fraction(a, s) + step] + [Fraction(1, s)] * (b - a)
    col1 = [1 - p for p in col0]
    entries = [
        ("age", 0, r, code, float(p)) for r, p0 in enumerate(col0) for code, p in ((0, p0), (1, 1 - p0)) if p > 0
    ]
    worst = max(max(c) / sum(c) for c in (col0, col1) if sum(c))
    return stored_tables(entries), worst


DELTAS = [Fraction(1, 2), Fraction(1, 3), Fraction(1, 4), Fraction(2, 7), Fraction(3, 10)]


@pytest.mark.parametrize("delta", DELTAS, ids=str)
@pytest.mark.parametrize(
    "step, passes",
    [
        (Fraction(0), True),  # exactly delta
        (Fraction(1, 2**34), True),  # above by LP round-off only (excess < 1e-9)
        (Fraction(1, 2**24), False),  # the smallest step the check must see (excess ~ 4e-8)
        (Fraction(1, 64), False),  # one grid step
    ],
    ids=["at", "round-off", "tiny-step", "grid-step"],
)
def test_delta_probability_at_and_above_delta(delta, step, passes):
    tables, worst = column_at_delta(delta, step)
    res = dp.check_delta_probability(tables, delta)
    assert res.passed is passes
    assert res.value == pytest.approx(float(worst), rel=1e-12)
    assert (worst > delta) is (step > 0)


def cover_case(need: int, carriers: int) -> tuple[pa.Table, pa.Table, pa.Table]:
    """One group of need + 1 tuples; value "a" carried (p = 1/2) by `carriers` of them, value "b"
    by all; published row 0 shows "a", the others "b"."""
    m = need + 1
    entries = []
    for r in range(m):
        if r < carriers:
            entries += [("job", 0, r, 0, 0.5), ("job", 0, r, 1, 0.5)]
        else:
            entries.append(("job", 0, r, 1, 1.0))
    published = pa.table({"job": ["a"] + ["b"] * (m - 1)})
    codes = pa.table({"attribute": ["job", "job"], "code": pa.array([0, 1], pa.int32()), "value": ["a", "b"]})
    return stored_tables(entries), published, codes


@pytest.mark.parametrize("delta", DELTAS + [Fraction(1, 6), Fraction(1667, 10000)], ids=str)
@pytest.mark.parametrize("short", [0, 1], ids=["exactly-ceil(1/delta)", "one-short"])
def test_cover_exactly_ceil_one_over_delta_and_one_short(delta, short):
    need = math.ceil(1 / delta)
    tables, published, codes = cover_case(need, need - short)
    res = dp.check_cover(tables, published, codes, delta, ["job"])
    assert res.value == need - short
    assert res.threshold == need
    assert res.passed is (short == 0)
    if short:
        assert res.worst == {"attribute": "job", "row": 0, "gid": 0}


@pytest.mark.parametrize(
    "off, passes",
    [(0.0, True), (2.0**-20, True), (2.0**-19, False), (-(2.0**-19), False)],
    ids=["sums-to-1", "off-by-9.5e-7", "off-by-1.9e-6", "short-by-1.9e-6"],
)
def test_definition_1_row_sums_within_1e6_and_just_beyond(off, passes):
    # two tuples, one exact row and one whose entries sum to 1 + off
    tables = stored_tables(
        [("age", 0, 0, 0, 0.5), ("age", 0, 0, 1, 0.5), ("age", 0, 1, 0, 0.25), ("age", 0, 1, 1, 0.75 + off)]
    )
    res = dp.check_distributions(tables)
    assert (res.value, res.passed) == (abs(off), passes)
    if off:
        assert res.worst == {"attribute": "age", "row": "1"}


def test_definition_1_refuses_a_negative_entry():
    tables = stored_tables([("age", 0, 0, 0, 1.25), ("age", 0, 0, 1, -0.25)])
    res = dp.check_distributions(tables)
    assert res.value == 0.0 and not res.passed


# --- k-anonymity and distinct l-diversity (generalization) ---------------------------------------


def classes_table(sizes: list[int], distinct: list[int]) -> pa.Table:
    """A published table with one class per entry: `sizes[i]` rows showing age range i, holding
    `distinct[i]` distinct sensitive values (the rest repeat the first)."""
    lo, hi, s = [], [], []
    for i, (n, d) in enumerate(zip(sizes, distinct)):
        lo += [10 * i] * n
        hi += [10 * i + 9] * n
        s += [f"v{j}" for j in range(d)] + ["v0"] * (n - d)
    return pa.table({"age_lo": lo, "age_hi": hi, "sex": [["F", "M"]] * len(s), "s": s})


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("short", [0, 1], ids=["class-of-k", "class-of-k-1"])
def test_k_anonymity_class_of_k_and_of_k_minus_1(k, short):
    table = classes_table([k + 2, k - short, k + 1], [1, 1, 1])
    kres, _ = k_and_l(table, ["age_lo", "age_hi", "sex"], "s", k, None)
    assert (kres.value, kres.threshold, kres.passed) == (k - short, k, short == 0)
    assert kres.worst["class"]["age_lo"] == 10 and kres.worst["classes"] == 3


@pytest.mark.parametrize("l", [2, 3, 4])
@pytest.mark.parametrize("short", [0, 1], ids=["l-values", "one-value-short"])
def test_distinct_l_diversity_group_one_value_short(l, short):
    table = classes_table([l + 3, l + 1, l + 2], [l + 1, l - short, l])  # sizes keep k = l + 1
    kres, lres = k_and_l(table, ["age_lo", "age_hi", "sex"], "s", l + 1, l)
    assert kres.passed and kres.value == l + 1
    assert (lres.value, lres.threshold, lres.passed) == (l - short, l, short == 0)
    if short:
        assert lres.worst["class"]["age_lo"] == 10


def people_classes_table(classes: list[list[tuple[str, int]]]) -> tuple[pa.Table, np.ndarray]:
    """rows_per_person = "many": class i shows age range i; its entries are (value, rows) per
    person, each person a new number. Returns the table and each row's person."""
    lo, s, person = [], [], []
    for i, members in enumerate(classes):
        for value, rows in members:
            lo += [10 * i] * rows
            s += [value] * rows
            person += [len(set(person))] * rows
    return pa.table({"age_lo": lo, "age_hi": [x + 9 for x in lo], "s": s}), np.asarray(person, dtype=np.int64)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("short", [0, 1], ids=["k-people", "k-1-people-with-k+1-rows"])
def test_k_anonymity_over_people_k_people_and_k_minus_1_people_holding_more_than_k_rows(k, short):
    worst = [("v0", 1)] * (k - 1 - short) + [("v0", 2 + short)]  # k - short people, k + 1 rows
    table, person = people_classes_table([[("v0", 1)] * (k + 2), worst, [("v0", 1)] * (k + 1)])
    kres, _ = k_and_l(table, ["age_lo", "age_hi"], "s", k, None, person)
    assert (kres.value, kres.threshold, kres.passed) == (k - short, k, short == 0)
    assert kres.worst["class"]["age_lo"] == 10 and kres.worst["class"]["size"] == k + 1
    assert kres.worst["measures"] == "people" and kres.worst["classes"] == 3
    rows, _ = k_and_l(table, ["age_lo", "age_hi"], "s", k, None)  # a row as a person: blind to it
    assert rows.passed


@pytest.mark.parametrize("l", [2, 3])
@pytest.mark.parametrize("extra", [0, 1], ids=["l-people-one-value-each", "one-person-more-with-v0"])
def test_entropy_l_diversity_over_people_one_person_more_not_one_row_more(l, extra):
    # the second class: l people with a value each (exp(H) = l over people) though v0's person has
    # 9 rows; then one more person with v0 (one row): over people it drops below l
    worst = [("v0", 9)] + [(f"v{j}", 1) for j in range(1, l)] + [("v0", 1)] * extra
    table, person = people_classes_table([[(f"v{j}", 1) for j in range(l + 1)], worst])
    (res,) = sensitive_results(table, ["age_lo", "age_hi"], "s", ModelChoice("entropy", l), person)
    counts = [1 + extra] + [1] * (l - 1)
    n = sum(counts)
    exp_h = math.exp(-sum(c / n * math.log(c / n) for c in counts))
    assert res.value == pytest.approx(exp_h, rel=1e-12) and res.passed is (extra == 0)
    assert res.worst["class"]["age_lo"] == 10 and res.worst["class"]["distinct_people"] == l + extra


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("short", [0, 1], ids=["at-k-and-l", "one-short"])
def test_parted_k_and_l_at_the_thresholds_with_classes_split_over_parts(tmp_path, k, short):
    """The folder-of-parts verifier (the Dask path's, here in process): a class of k - short rows
    with l - short values, its rows spread over three parts, just inside and just outside."""
    import pyarrow.parquet as pq

    from privpub.tasks.core.parted_table import PartedTable, part_name
    from privpub.tasks.verify.parted import parted_k_and_l

    l = k
    table = classes_table([k + 2, k - short, k + 1], [l + 1, l - short, l])
    table = table.take(np.random.default_rng(k).permutation(table.num_rows))
    for i, rows in enumerate(np.array_split(np.arange(table.num_rows), 3)):
        pq.write_table(table.take(rows), tmp_path / part_name(i))
    kres, lres = parted_k_and_l(PartedTable(tmp_path), ["age_lo", "age_hi", "sex"], "s", k, l)
    assert (kres.value, kres.passed) == (k - short, short == 0)
    assert (lres.value, lres.passed) == (l - short, short == 0)


@pytest.mark.parametrize("l", [2, 3])
@pytest.mark.parametrize("short", [0, 1], ids=["l-values", "one-value-short"])
def test_anatomy_l_diversity_and_disclosure_one_value_short(l, short):
    # bucket 0: l distinct values once each (share 1/l); bucket 1 loses one value to a repeat
    values = [[f"v{j}" for j in range(l)], [f"v{j}" for j in range(l - short)] + ["v0"] * short]
    qit = pa.table({"age": list(range(2 * l)), "gid": [0] * l + [1] * l})
    rows = [(g, v) for g, vs in enumerate(values) for v in sorted(set(vs))]
    st = pa.table(
        {"gid": [g for g, _ in rows], "s": [v for _, v in rows], "count": [values[g].count(v) for g, v in rows]}
    )
    res = {r.model: r for r in verify_anatomy(Release({"QIT": qit, "ST": st}, {}), "s", l)}
    assert res["QIT and ST agree on group sizes"].passed
    assert (res["l-diversity (distinct)"].value, res["l-diversity (distinct)"].passed) == (l - short, short == 0)
    share = Fraction(1 + short, l)
    assert (res["attribute disclosure"].value, res["attribute disclosure"].passed) == (str(share), short == 0)


# --- entropy and recursive (c, l)-diversity, t-closeness (generalization, docs/models.md) ---------


def sensitive_table(classes: list[list]) -> pa.Table:
    """A published table with one class (age range) per list of sensitive values."""
    lo = [10 * i for i, vs in enumerate(classes) for _ in vs]
    return pa.table({"age_lo": lo, "age_hi": [x + 9 for x in lo], "s": [v for vs in classes for v in vs]})


def sensitive_check(classes: list[list], **choice):
    (res,) = sensitive_results(sensitive_table(classes), ["age_lo", "age_hi"], "s", ModelChoice(**choice))
    return res


@pytest.mark.parametrize("l", [2, 3, 4])
@pytest.mark.parametrize("each", [1, 1000])
@pytest.mark.parametrize("extra", [0, 1], ids=["exactly-l", "one-row-more"])
def test_entropy_l_diversity_at_exp_h_equal_l_and_one_row_more(l, each, extra):
    # the second class holds l values equally (exp(H) = l), then one of them once more
    worst = [f"v{j}" for j in range(l) for _ in range(each)] + ["v0"] * extra
    res = sensitive_check([[f"v{j}" for j in range(l + 1)], worst], diversity="entropy", l=l)
    counts = [each + extra] + [each] * (l - 1)
    n = sum(counts)
    exp_h = math.exp(-sum(c / n * math.log(c / n) for c in counts))
    assert (res.model, res.threshold, res.passed) == ("entropy-l-diversity", l, extra == 0)
    assert res.value == pytest.approx(exp_h, rel=1e-12) and res.worst["class"]["age_lo"] == 10
    assert (exp_h < l * (1 - 1e-12)) is (extra == 1)  # exactly l may come out an ulp below


@pytest.mark.parametrize("c", [2, 3])
@pytest.mark.parametrize("tail", [1, 1000])
@pytest.mark.parametrize("top, passes", [(-1, True), (0, False)], ids=["just-below-c", "exactly-c"])
def test_recursive_cl_diversity_just_below_c_and_at_c(c, tail, top, passes):
    # l = 2: r1 = c * tail + top, r2 = tail
    worst = ["v0"] * (c * tail + top) + ["v1"] * tail
    res = sensitive_check([["v0", "v1", "v2"], worst], diversity="recursive", l=2, c=float(c))
    assert (res.model, res.passed) == ("recursive-cl-diversity", passes)
    assert res.value == float(Fraction(c * tail + top, tail)) and res.worst["class"]["age_lo"] == 10


@pytest.mark.parametrize("l", [2, 3])
def test_recursive_cl_diversity_of_a_class_of_fewer_than_l_values(l):
    res = sensitive_check([["v0", "v1", "v2"], ["v0"] * 5 + ["v1"] * (l - 2)], diversity="recursive", l=l, c=100.0)
    assert (res.value, res.passed, res.worst["r_l_to_r_m"]) == (UNBOUNDED, False, 0)


# Three classes whose largest distance to the table is exactly 1/2 under each ground distance
CLOSENESS_CASES = {
    "equal": ([["x", "x"], ["y", "y"]], {}),
    "ordered": ([[0, 0], [1, 1], [2, 2]], {}),
    "hierarchical": (
        [["a1", "a1"], ["b1", "b1"]],
        {"hierarchy": {"r": ["A", "B"], "A": ["a1", "a2"], "B": ["b1", "b2"]}},
    ),
}


@pytest.mark.parametrize("closeness", sorted(CLOSENESS_CASES))
@pytest.mark.parametrize(
    "t, passes",
    [(0.5, True), (0.5 * (1 + 1e-9), True), (0.5 * (1 - 1e-9), False), (0.49, False)],
    ids=["at-t", "above", "a-hair-below", "below"],
)
def test_t_closeness_at_t_and_a_hair_below(closeness, t, passes):
    classes, extra = CLOSENESS_CASES[closeness]
    res = sensitive_check(classes, t=t, closeness=closeness, **extra)
    assert (res.model, res.threshold, res.passed) == ("t-closeness", t, passes)
    assert res.value == pytest.approx(0.5, abs=1e-15) and res.worst["distance"] == closeness


@pytest.mark.parametrize("moved", [0, 1], ids=["at-t", "one-row-moved"])
def test_t_closeness_ordered_at_t_and_one_row_further(moved):
    # class 1 holds 0 and 2 evenly, class 2 only 1: both at distance exactly 1/4; moving one row
    # of value 1 of class 2 to value 0 of class 1 changes both distributions
    classes = [[0, 0, 2, 2] + [0] * moved, [1] * (4 - moved)]
    exact = Fraction(1, 4) if not moved else None
    res = sensitive_check(classes, t=0.25, closeness="ordered")
    if exact is not None:
        assert res.value == pytest.approx(float(exact), abs=1e-15) and res.passed
    else:
        assert res.value > 0.25 and not res.passed


# --- basic beta-likeness (generalization) and the [risk] gain limits --------------------------------

# x is 1/4 of the table and 1/2 of the first class: a gain of exactly 1 (y: 3/4 -> 1, a gain of 1/3)
LIKENESS_CLASSES = [["x", "x", "y", "y"], ["y", "y", "y", "y"]]


@pytest.mark.parametrize(
    "beta, passes",
    [(1.0, True), (1.0 * (1 + 1e-9), True), (1.0 * (1 - 1e-9), False), (0.99, False)],
    ids=["at-beta", "above", "a-hair-below", "below"],
)
def test_beta_likeness_at_beta_and_a_hair_below(beta, passes):
    res = sensitive_check(LIKENESS_CLASSES, beta=beta)
    assert (res.model, res.threshold, res.passed) == ("beta-likeness", beta, passes)
    assert res.value == 1.0 and res.worst["class"]["age_lo"] == 0
    assert (res.worst["class_share"], res.worst["table_share"]) == (0.5, 0.25)


@pytest.mark.parametrize("moved", [0, 1], ids=["at-beta", "one-row-moved"])
def test_beta_likeness_at_beta_and_one_row_further(moved):
    # one y row of the first class moves to the second: the table's distribution is the same
    # (x 1/4), the first class's x rises from 1/2 to 2/3, a gain of 5/3
    classes = [["x", "x"] + ["y"] * (2 - moved), ["y"] * (4 + moved)]
    res = sensitive_check(classes, beta=1.0)
    gain = (Fraction(2, 4 - moved) - Fraction(1, 4)) / Fraction(1, 4)
    assert res.value == float(gain) and res.passed is (moved == 0)


@pytest.mark.parametrize(
    "key, limit, refused",
    [
        ("max_gain", 1.0, False),
        ("max_gain", 1.0 * (1 - 1e-9), True),
        ("max_gain", 1.0 * (1 + 1e-9), False),
        ("max_difference", 0.25, False),
        ("max_difference", 0.25 * (1 - 1e-9), True),
    ],
    ids=["gain-at", "gain-a-hair-below", "gain-above", "difference-at", "difference-a-hair-below"],
)
def test_risk_gain_limits_at_the_figure_and_a_hair_below(key, limit, refused):
    """The same table as a release: attribute-gain-max is exactly 1 and attribute-difference-max
    exactly 1/4 (x: 1/4 of all rows, 1/2 of the first class); a limit at the figure publishes,
    a hair below refuses, naming the figure."""
    from privpub.schemas.spec import spec_from_dict
    from privpub.tasks.risk import over_limits, risk_settings, table_shares

    figures, _ = table_shares(sensitive_table(LIKENESS_CLASSES), ["age_lo", "age_hi"], "s")
    assert figures == {"attribute-gain-max": 1.0, "attribute-difference-max": 0.25}
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "t",
                "input": "x.csv",
                "person_id": "pid",
                "sensitive": "s",
                "qi": [{"name": "age", "kind": "numeric"}],
            },
            "technique": {"name": "generalization", "k": 2},
            "risk": {key: limit},
        }
    )
    broken = over_limits(figures, risk_settings(spec))
    figure = "attribute-gain-max" if key == "max_gain" else "attribute-difference-max"
    assert broken == ([f"{figure} is {figures[figure]:.4g}, above the limit {limit:g}"] if refused else [])


# --- Butterfly: k-anonymity per QID, and k' on the union QID (two-level framework) ---------------


def qid_table(k: int, short_qid: int | None) -> pa.Table:
    """Columns a, b, c; QID1 = (a, b), QID2 = (b, c), each with two classes of k rows; for
    `short_qid` one row moves to the other class (classes of k - 1 and k + 1)."""
    n = 2 * k
    a, b, c = ["x"] * k + ["y"] * k, ["p"] * n, ["u"] * k + ["w"] * k
    if short_qid == 1:
        a = ["x"] * (k - 1) + ["y"] * (k + 1)
    if short_qid == 2:
        c = ["u"] * (k - 1) + ["w"] * (k + 1)
    return pa.table({"a": a, "b": b, "c": c})


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("short_qid", [None, 1, 2], ids=["every-qid-k", "qid1-k-1", "qid2-k-1"])
def test_butterfly_per_qid_class_of_k_and_of_k_minus_1(k, short_qid):
    res = multi_qid_anonymity(qid_table(k, short_qid), [["a", "b"], ["b", "c"]], k)
    got = {r.model: (r.value, r.passed) for r in res}
    for i in (1, 2):
        assert got[f"k-anonymity QID{i}"] == ((k - 1, False) if short_qid == i else (k, True))


@pytest.mark.parametrize("k_prime", [2, 3])
@pytest.mark.parametrize("short", [0, 1], ids=["union-k'", "union-k'-1"])
def test_two_level_union_qid_class_of_k_prime_and_one_short(k_prime, short):
    # each QID (a) and (c) is 2k'-anonymous; the union (a, c) has classes of k' and k' - short
    a = ["x"] * (2 * k_prime) + ["y"] * (2 * k_prime)
    c = ["u"] * k_prime + ["w"] * k_prime + ["u"] * (k_prime - short) + ["w"] * (k_prime + short)
    res = multi_qid_anonymity(pa.table({"a": a, "c": c}), [["a"], ["c"]], k_prime, k_prime, ["a", "c"])
    got = {r.model: (r.value, r.passed) for r in res}
    assert got["k-anonymity QID1"] == (2 * k_prime, True)
    assert got["k'-anonymity union QID"] == (k_prime - short, short == 0)


# --- Ambiguity and PriView: alpha-presence and beta-association ----------------------------------


@pytest.mark.parametrize("extra", [0, 1], ids=["at-alpha", "one-tuple-more"])
def test_ambiguity_presence_at_alpha_and_one_tuple_more(extra):
    # three distinct values on each of two QIs: Theorem 1 gives |G| / 9; one more tuple inside
    # the same published values raises it from 3/9 to 4/9
    cells = [(0, 0), (1, 1), (2, 2)] + [(0, 1)] * extra
    ats, st = ambiguity_release([cells], [["a", "b", "c", "d"][: len(cells)]])
    res = ambiguity_presence(ats, st, Fraction(1, 3))
    assert (res.value, res.passed) == (str(Fraction(3 + extra, 9)), extra == 0)


@pytest.mark.parametrize("repeated", [0, 1], ids=["duplicate-free", "one-row-repeated"])
def test_ambiguity_presence_refuses_an_at_table_that_repeats_a_row(repeated):
    """Issue 25, item 10: AT tables are duplicate-free (Definition 3.3). A repeated row is no
    release Ambiguity publishes: counted, it would pass for one more person and lower the figure;
    the verifier marks the group (presence 1, the group inconsistent) instead."""
    ats, st = ambiguity_release([[(0, 0), (1, 1), (2, 2)]], [["a", "b", "c"]])
    if repeated:
        ats["q0"] = pa.concat_tables([ats["q0"], ats["q0"].slice(0, 1)])
    res = ambiguity_presence(ats, st, Fraction(1, 3))
    assert (res.value, res.passed) == (("1", False) if repeated else ("1/3", True))
    assert res.worst["inconsistent_groups"] == repeated


@pytest.mark.parametrize(
    "beta, sens, worst",
    [
        (Fraction(1, 3), ["a", "a", "b", "b", "c", "c"], Fraction(1, 3)),
        (Fraction(1, 3), ["a", "a", "a", "b", "b", "c", "c"], Fraction(3, 7)),  # one more a
        (Fraction(2, 5), ["a", "a", "b", "c", "d"], Fraction(2, 5)),
        (Fraction(2, 5), ["a", "a", "a", "b", "c", "d"], Fraction(1, 2)),
    ],
    ids=["1/3-at", "1/3-above", "2/5-at", "2/5-above"],
)
def test_ambiguity_association_at_beta_and_one_value_more(beta, sens, worst):
    _, st = ambiguity_release([[(i, i) for i in range(len(sens))]], [sens])
    res = ambiguity_association(st, "S", beta)
    assert (res.value, res.passed) == (str(worst), worst <= beta)


@pytest.mark.parametrize(
    "alpha, units, worst",
    [
        # AT rows all distinct (m = 1): Pr(t in T) = n / |G|, n = units carrying t's QI' value
        (Fraction(1, 4), [(0, "a"), (1, "b"), (2, "c"), (3, "d")], Fraction(1, 4)),
        (Fraction(1, 4), [(0, "a"), (0, "b"), (2, "c"), (3, "d")], Fraction(1, 2)),
        (Fraction(2, 5), [(0, "a"), (0, "b"), (1, "c"), (1, "d"), (2, "e")], Fraction(2, 5)),
        (Fraction(2, 5), [(0, "a"), (0, "b"), (0, "c"), (1, "d"), (2, "e")], Fraction(3, 5)),
    ],
    ids=["1/4-at", "1/4-above", "2/5-at", "2/5-above"],
)
def test_priview_presence_at_alpha_and_one_unit_more(alpha, units, worst):
    at, st = priview_release([f"p{i}" for i in range(len(units))], units)
    res = priview_presence(at, st, "q", "S", alpha)
    assert (res.value, res.passed) == (str(worst), worst <= alpha)


@pytest.mark.parametrize("size", [12, 13], ids=["countable", "too-large-to-count"])
def test_priview_presence_of_a_group_too_large_to_count_is_certain(size):
    """Issue 25, item 10: with a repeated AT row and an ST unit count above 1 the literal
    Definition 5.1 count ("distinct" worlds) is computed up to DISTINCT_WORLDS_MAX_GROUP = 12
    people; above it the unknown probability is reported as 1, never as safe."""
    at_rows = ["x", "x"] + [f"p{i}" for i in range(size - 2)]
    units = [(0, "a"), (0, "a")] + [(i, chr(ord("b") + i)) for i in range(1, size - 1)]
    at, st = priview_release(at_rows, units)
    res = priview_presence(at, st, "q", "S", Fraction(1, 2))
    if size == 13:
        assert (res.value, res.passed) == ("1", False)
    else:  # counted: x meets one of the two q = 0 units in most but not all worlds
        assert Fraction(res.value) < 1 and res.passed == (Fraction(res.value) <= Fraction(1, 2))


@pytest.mark.parametrize(
    "beta, units, worst",
    [
        # m = 1: Pr((t, s) | t) = c / n over the n units of t's QI' value
        (Fraction(1, 2), [(0, "a"), (0, "a"), (0, "b"), (0, "c"), (1, "d"), (1, "e")], Fraction(1, 2)),
        (Fraction(1, 2), [(0, "a"), (0, "a"), (0, "a"), (0, "c"), (1, "d"), (1, "e")], Fraction(3, 4)),
        (Fraction(1, 3), [(0, "a"), (0, "b"), (0, "c"), (1, "d"), (1, "e"), (1, "f")], Fraction(1, 3)),
        (Fraction(1, 3), [(0, "a"), (0, "b"), (1, "c"), (1, "d"), (1, "e"), (1, "f")], Fraction(1, 2)),
    ],
    ids=["1/2-at", "1/2-above", "1/3-at", "1/3-one-unit-short"],
)
def test_priview_association_at_beta_and_one_step_above(beta, units, worst):
    at, st = priview_release([f"p{i}" for i in range(len(units))], units)
    res = priview_association(at, st, "q", "S", beta)
    assert (res.value, res.passed) == (str(worst), worst <= beta)


# --- serial publishing: the global guarantee p <= 1/l ---------------------------------------------


def _pairs(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    """Pairs (person, value "a") with their Q/D (p = 1 - Q/D) as the serial aggregate holds them."""
    return pd.DataFrame(
        {
            "person": [r[0] for r in rows],
            "value": ["a"] * len(rows),
            "links": [1] * len(rows),
            "q": pd.Series([r[1] for r in rows], dtype=object),
            "d": pd.Series([r[2] for r in rows], dtype=object),
        }
    )


@pytest.mark.parametrize("step", [0, 1], ids=["at-the-worst", "one-step-worse"])
def test_the_serial_summary_keeps_breaches_and_takes_a_worse_pair(step):
    """The O(release) summary of the serial check (advance_summary), from its definition: the
    series' breaching pairs are those of before plus the pairs that breach now and did not, and
    its worst pair is the largest p of the whole series. A pair of this release at the prior worst
    keeps the prior record; one step worse replaces it."""
    l = 2
    prior_worst = {"person": "p0", "value": "a", "links": 1, "q": "1", "d": "3"}  # p = 2/3: breaching
    prior = {"l": l, "pairs": 5, "breaching": 2, "worst": prior_worst}
    before = _pairs([("p1", 3, 4)])  # p = 1/4, within 1/2
    after = _pairs([("p1", 1, 3 + step), ("p2", 3, 4)])  # p1 now 2/3 (or 3/4): breaches anew
    summary = sg.advance_summary(prior, before, after, l)
    assert summary["pairs"] == 6 and summary["breaching"] == 3  # p2 is new; p1 breaches anew
    assert summary["worst"]["person"] == ("p1" if step else "p0")  # a tie keeps the lesser record


def serial_check(size: int, count: int, prior: tuple[int, int] | None, l: int = 2):
    """Person 0 holds the protected value "a" in a group of `size` with `count` a's; `prior` is
    (size, count) of one earlier group that linked person 0 to "a"."""

    table = pa.table({"gid": [0] * size, "dis": ["a"] * count + ["b"] * (size - count)})
    groups = pa.table({"gid": [0], "size": [size]})
    membership = pd.DataFrame({"person": list(range(size)), "gid": [0] * size})
    aggregate = None
    if prior:
        q, d = sg.not_linked([prior])
        aggregate = pd.DataFrame(
            {
                "person": [0],
                "value": ["a"],
                "links": [1],
                "q": pd.Series([q], dtype=object),
                "d": pd.Series([d], dtype=object),
            }
        )
    check = sg.check_release(table, groups, membership, aggregate, l=l, sensitive="dis", transient=["a"], release=2)
    return {r.model: r for r in check.results}


@pytest.mark.parametrize(
    "size, count, prior, p, breaching",
    [
        (2, 1, None, Fraction(1, 2), 0),  # first release: p = 1/2 exactly
        (5, 3, None, Fraction(3, 5), 5),  # one a more than 1/2 allows: every member is linked
        (6, 2, (4, 1), Fraction(1, 2), 0),  # 1 - (3/4)(4/6) = 1/2 exactly
        (5, 2, (4, 1), Fraction(11, 20), 1),  # the same group one tuple smaller: person 0 only
    ],
    ids=["first-at", "first-above", "linked-at", "linked-one-short"],
)
def test_serial_global_guarantee_at_one_over_l_and_one_step_above(size, count, prior, p, breaching):
    res = serial_check(size, count, prior)["serial-global"]
    assert (res.value, res.threshold, res.passed) == (str(p), "1/2", breaching == 0)
    assert res.worst["breaching_pairs"] == breaching


@pytest.mark.parametrize("size, count", [(4, 2), (5, 3)], ids=["at-1/2", "one-a-more"])
def test_serial_localized_at_one_over_l_and_above(size, count):
    res = serial_check(size, count, None)["serial-localized"]
    share = Fraction(count, size)
    assert (res.value, res.passed) == (str(share), share <= Fraction(1, 2))


# --- the online auditor: l-uncertainty --------------------------------------------------------


@pytest.mark.parametrize("l, response", [(3, "answer"), (4, "positive-denial")])
def test_auditor_answer_that_leaves_exactly_l_values_and_one_fewer(l, response):
    # six people with six distinct values; asking for three of them narrows each of the six to
    # three values: allowed under l = 3, refused under l = 4 whatever the secret
    secret = {f"p{i}": f"v{i}" for i in range(6)}
    auditor = Auditor(pd.DataFrame({"id": list(secret)}), list(secret.values()), l, secret_from_mapping(secret))
    decision = auditor.ask(["p0", "p1", "p2"])
    assert decision.response == response
    if response == "answer":
        assert decision.values == ("v0", "v1", "v2")
        assert min(len(v) for v in auditor.possible_values().values()) == l


@pytest.mark.parametrize(
    "values, response, floor",
    [
        # two answers of {p0, p1} are unsafe ({c, c} and {f, f}): across them p0 keeps c and f
        (["c", "c", "f", "f", "h", "p"], "answer", 2),
        # one value short: only {c, c} is unsafe, and denying would pin p0 and p1 to c (Table 5)
        (["c", "c", "f", "g", "h", "p"], "negative-denial", 1),
    ],
    ids=["floor-l", "floor-l-1"],
)
def test_auditor_denial_floor_at_l_and_one_short(values, response, floor):
    people = [f"p{i}" for i in range(6)]
    real = [values[0], values[2], values[1]] + values[3:]  # p0, p1 hold {c, f}: a safe answer
    auditor = Auditor(pd.DataFrame({"id": people}), values, 2, secret_from_mapping(dict(zip(people, real))))
    decision = auditor.ask(["p0", "p1"])
    assert (decision.response, decision.floor_delta) == (response, floor)

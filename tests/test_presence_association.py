"""alpha-presence and beta-association against brute-force possible worlds (Definitions 5.1-5.3)
and the paper's Fig. 1 / Fig. 2 / Fig. 9 examples."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import combinations, combinations_with_replacement, permutations, product

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from privpub.tasks.evaluate.estimate_generalized import range_fraction
from privpub.tasks.evaluate.workload import CountQuery, RangeCond
from privpub.tasks.techniques.ambiguity.association import ambiguity_association, priview_association
from privpub.tasks.techniques.ambiguity.presence import (
    ambiguity_groups,
    ambiguity_presence,
    ambiguity_presence_of,
    labeled_presence,
    priview_presence,
    priview_presence_of,
)
from privpub.tasks.techniques.ambiguity.technique import ambiguity_estimates

SETTINGS = settings(max_examples=30, deadline=None)


# --- brute force: Ambiguity ----------------------------------------------------------------------


def ambiguity_worlds(domains: list[list], sensitive: list) -> list[frozenset]:
    """Every world of one group: |G| distinct QI cells whose projections give back every AT
    value, with the sensitive multiset assigned to them (a set of (cell, s) rows)."""
    size = len(sensitive)
    worlds = []
    for cells in combinations(list(product(*domains)), size):
        if any({c[i] for c in cells} != set(d) for i, d in enumerate(domains)):
            continue
        for s in set(permutations(sensitive)):
            worlds.append(frozenset(zip(cells, s)))
    return worlds


def bag_worlds(domains: list[list], size: int) -> list[Counter]:
    """Worlds when a group may hold the same QI cell twice (multisets of cells)."""
    out = []
    for cells in combinations_with_replacement(list(product(*domains)), size):
        if all({c[i] for c in cells} == set(d) for i, d in enumerate(domains)):
            out.append(Counter(cells))
    return out


def ambiguity_release(groups: list[list[tuple]], sens: list[list]) -> tuple[dict, pa.Table]:
    """Published tables straight from groups of rows (the definition, not the constructor)."""
    m = len(groups[0][0])
    ats = {}
    for i in range(m):
        pairs = sorted({(g, row[i]) for g, rows in enumerate(groups) for row in rows})
        ats[f"q{i}"] = pa.table({f"q{i}": [v for _, v in pairs], "gid": [g for g, _ in pairs]})
    cnt = sorted(Counter((g, s) for g, ss in enumerate(sens) for s in ss).items())
    st_t = pa.table({"gid": [g for (g, _), _ in cnt], "S": [s for (_, s), _ in cnt], "count": [c for _, c in cnt]})
    return ats, st_t


@st.composite
def tiny_ambiguity(draw, max_groups=2, max_size=4, max_dom=3):
    m = draw(st.integers(2, 3))
    n_groups = draw(st.integers(1, max_groups))
    cell = st.tuples(*[st.integers(0, max_dom - 1) for _ in range(m)])
    groups, sens = [], []
    for _ in range(n_groups):
        rows = draw(st.lists(cell, min_size=1, max_size=max_size, unique=True))
        groups.append(rows)
        sens.append(draw(st.lists(st.sampled_from("abc"), min_size=len(rows), max_size=len(rows))))
    return groups, sens


@SETTINGS
@given(tiny_ambiguity())
def test_presence_and_association_equal_world_enumeration(case):
    groups, sens = case
    ats, st_t = ambiguity_release(groups, sens)
    g = ambiguity_groups(ats, st_t)
    worst_p, worst_a = Fraction(0), Fraction(0)
    for gi, (rows, ss) in enumerate(zip(groups, sens)):
        domains = [sorted({r[i] for r in rows}) for i in range(len(rows[0]))]
        worlds = ambiguity_worlds(domains, ss)
        theorem1 = Fraction(int(g.size[gi]), int(np.prod(g.at_sizes[gi])))
        for t in product(*domains):
            with_t = [w for w in worlds if any(c == t for c, _ in w)]
            assert Fraction(len(with_t), len(worlds)) == theorem1
            for s, c in Counter(ss).items():
                both = sum((t, s) in w for w in with_t)
                assert Fraction(both, len(with_t)) == Fraction(c, len(ss))  # Theorem 2
                worst_a = max(worst_a, Fraction(c, len(ss)))
        worst_p = max(worst_p, theorem1)
    assert Fraction(ambiguity_presence(ats, st_t, Fraction(1)).value) == worst_p
    assert Fraction(ambiguity_association(st_t, "S", Fraction(1)).value) == worst_a


@SETTINGS
@given(tiny_ambiguity(), st.data())
def test_a_repeated_at_row_makes_its_group_certain(case, data):
    """A tampered AT table (one row published twice) is not an Ambiguity release: its group's
    presence is reported as 1 whatever the others hold, never lowered by the extra row."""
    groups, sens = case
    ats, st_t = ambiguity_release(groups, sens)
    name = data.draw(st.sampled_from(sorted(ats)))
    row = data.draw(st.integers(0, ats[name].num_rows - 1))
    ats[name] = pa.concat_tables([ats[name], ats[name].slice(row, 1)])
    res = ambiguity_presence(ats, st_t, Fraction(1, 2))
    assert (res.value, res.passed) == ("1", False) and res.worst["inconsistent_groups"] >= 1


def enumerated_presence(rows: list[tuple], sens: list) -> Fraction:
    """A group's alpha-presence from its worlds: the largest share of worlds holding one cell."""
    domains = [sorted({r[i] for r in rows}) for i in range(len(rows[0]))]
    worlds = ambiguity_worlds(domains, sens)
    return max(Fraction(sum(any(c == t for c, _ in w) for w in worlds), len(worlds)) for t in product(*domains))


@SETTINGS
@given(tiny_ambiguity())
def test_presence_verdict_refuses_exactly_the_groups_whose_worlds_exceed_alpha(case):
    """The verdict, not only the figure: at every alpha among the groups' enumerated presences
    and just below the worst, the failing groups are those whose worlds hold some cell more
    often than alpha, and the release passes only when none does."""
    groups, sens = case
    ats, st_t = ambiguity_release(groups, sens)
    per_group = [enumerated_presence(rows, ss) for rows, ss in zip(groups, sens)]
    worst = max(per_group)
    for alpha in sorted(set(per_group)) + [worst * Fraction(9, 10)]:
        res = ambiguity_presence(ats, st_t, alpha)
        above = sum(p > alpha for p in per_group)
        assert (res.worst["failing_groups"], res.passed) == (above, above == 0)


@settings(max_examples=20, deadline=None)
@given(tiny_ambiguity(max_groups=2, max_size=3, max_dom=2))
def test_presence_of_a_tuple_covered_by_several_groups(case):
    """Whole-table worlds are products of group worlds; a tuple covered by two groups is present
    when either holds it: 1 - prod (1 - p_g), more than Theorem 1 for either group."""
    groups, sens = case
    ats, st_t = ambiguity_release(groups, sens)
    per_group = []
    for rows, ss in zip(groups, sens):
        domains = [sorted({r[i] for r in rows}) for i in range(len(rows[0]))]
        per_group.append([{c for c, _ in w} for w in ambiguity_worlds(domains, ss)])
    all_cells = set().union(*(set().union(*ws) for ws in per_group))
    for t in all_cells:
        hits = total = 0
        for combo in product(*per_group):
            total += 1
            hits += any(t in cells for cells in combo)
        expected = Fraction(hits, total)
        assert ambiguity_presence_of(ats, st_t, {f"q{i}": v for i, v in enumerate(t)}) == expected


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(2, 5))
def test_theorem1_is_an_upper_bound_when_a_group_repeats_a_tuple(k1, k2, size):
    """If two people share all QI values, worlds are multisets; every cell is still equally
    likely, and the expected number of distinct cells is below |G|, so Theorem 1 is safe."""
    domains = [list(range(k1)), list(range(k2))]
    worlds = bag_worlds(domains, size)
    assume(worlds)  # else the size cannot cover both domains
    for t in product(*domains):
        p = Fraction(sum(t in w for w in worlds), len(worlds))
        assert p <= min(Fraction(size, k1 * k2), Fraction(1))


# --- the paper's examples ----------------------------------------------------------------------

FIG1 = [
    ((45, "M", 11000), "diabetes"),
    ((20, "M", 12000), "flu"),
    ((50, "M", 23000), "diarrhea"),
    ((60, "M", 12000), "stroke"),
    ((20, "F", 54000), "leukemia"),
    ((50, "F", 23000), "diabetes"),
    ((60, "F", 23000), "leukemia"),
    ((60, "F", 21000), "dyspepsia"),
]


def fig2_tables(groups=((0, 1, 2, 3), (4, 5, 6, 7))):
    ats, st_t = ambiguity_release([[FIG1[i][0] for i in g] for g in groups], [[FIG1[i][1] for i in g] for g in groups])
    names = {"q0": "age", "q1": "gender", "q2": "zipcode"}
    ats = {names[k]: t.rename_columns([names[k], "gid"]) for k, t in ats.items()}
    return ats, st_t.rename_columns(["gid", "disease", "count"])


def test_fig2_presence_and_association():
    ats, st_t = fig2_tables()
    assert [t.num_rows for t in ats.values()] == [7, 2, 6]  # Fig. 2(a)-(c)
    assert ambiguity_presence_of(ats, st_t, {"age": 45, "gender": "M", "zipcode": 11000}) == Fraction(1, 3)
    assert ambiguity_presence_of(ats, st_t, {"age": 20, "gender": "F", "zipcode": 54000}) == Fraction(4, 9)
    presence = ambiguity_presence(ats, st_t, Fraction(1, 2))
    assert (presence.value, presence.worst["gid"], presence.passed) == ("4/9", 1, True)
    assoc = ambiguity_association(st_t, "disease", Fraction(1, 2))
    # Pr((Alice, leukemia) | Alice) = 2/4 = 1/2, the worst association of the release
    assert (assoc.value, assoc.worst["sensitive_value"], assoc.worst["gid"]) == ("1/2", "leukemia", 1)
    assert assoc.passed and not ambiguity_association(st_t, "disease", Fraction(1, 3)).passed


def test_fig2_count_queries_q1_q2():
    ats, st_t = fig2_tables()
    tables = {f"AT_{k}": v for k, v in ats.items()} | {"ST": st_t}
    q1 = CountQuery((("age", RangeCond(45, 200)),), "stroke")
    q2 = CountQuery((("age", RangeCond(50, 200)), ("zipcode", RangeCond(23000, 23000))), "diabetes")
    est = ambiguity_estimates(tables, "disease", [q1, q2])
    assert Fraction(est[0]) == Fraction(3, 4)
    # 1/6 + 2/9, a product per group; 7/18 has no exact double, so to float round-off
    assert est[1] == pytest.approx(7 / 18, rel=1e-15, abs=0)
    # the generalized table of Fig. 1(b): 1 x (60 - 45) / (60 - 20) = 3/8
    gen = range_fraction(np.array([20]), np.array([60]), RangeCond(45, 60))[0]
    assert Fraction(gen) == Fraction(3, 8)


def test_fig8_example_counts_sensitive_buckets_wrongly():
    """Section 7 says the group {t1, t2} has presence 1/(2 x 1 x 2) = 1/4 with '1' disease
    bucket; t1 and t2 have two diseases, and Theorem 1 / Definition 5.3 give 2/4."""
    ats, st_t = fig2_tables(groups=((0, 1),))
    worlds = ambiguity_worlds([[20, 45], ["M"], [11000, 12000]], ["diabetes", "flu"])
    assert Fraction(sum(any(c == (45, "M", 11000) for c, _ in w) for w in worlds), len(worlds)) == Fraction(1, 2)
    assert ambiguity_presence(ats, st_t, Fraction(1, 4)).value == "1/2"


# --- brute force: PriView ------------------------------------------------------------------------


def priview_worlds(at_rows: list, units: list) -> tuple[list, list]:
    """All bijections AT rows -> ST units ("labeled") and the distinct joined relations."""
    labeled = [tuple(zip(at_rows, perm)) for perm in permutations(units)]
    distinct = list({tuple(sorted(w)) for w in labeled})
    return labeled, distinct


def brute_priview(at_rows: list, units: list) -> dict[str, Fraction]:
    labeled, distinct = priview_worlds(at_rows, units)
    out = {}
    for name, worlds in (("labeled", labeled), ("distinct", distinct)):
        worst_p = worst_a = Fraction(0)
        for a in set(at_rows):
            for q in {u[0] for u in units}:
                with_t = [w for w in worlds if any(x == a and u[0] == q for x, u in w)]
                p = Fraction(len(with_t), len(worlds))
                worst_p = max(worst_p, p)
                for s in {u[1] for u in units if u[0] == q}:
                    both = sum(any(x == a and u == (q, s) for x, u in w) for w in with_t)
                    if with_t:
                        worst_a = max(worst_a, Fraction(both, len(with_t)))
        out[f"{name}_presence"], out[f"{name}_association"] = worst_p, worst_a
    return out


def priview_release(at_rows: list, units: list) -> tuple[pa.Table, pa.Table]:
    at = pa.table({"a": [a for a in at_rows], "gid": [0] * len(at_rows)})
    cnt = sorted(Counter(units).items())
    st_t = pa.table(
        {
            "gid": [0] * len(cnt),
            "q": [q for (q, _), _ in cnt],
            "S": [s for (_, s), _ in cnt],
            "count": [c for _, c in cnt],
        }
    )
    return at, st_t


@st.composite
def tiny_priview(draw):
    size = draw(st.integers(2, 6))
    at_rows = draw(st.lists(st.sampled_from("xyz"), min_size=size, max_size=size))
    units = draw(st.lists(st.tuples(st.integers(0, 2), st.sampled_from("abc")), min_size=size, max_size=size))
    return at_rows, units


@settings(max_examples=40, deadline=None)
@given(tiny_priview())
def test_priview_verifier_equals_world_enumeration(case):
    at_rows, units = case
    at, st_t = priview_release(at_rows, units)
    b = brute_priview(at_rows, units)
    size, st_rows = len(units), len(set(units))
    both_repeat = max(Counter(at_rows).values()) > 1 and max(Counter(units).values()) > 1
    if not both_repeat:  # the two counting rules agree unless both sides repeat a row
        assert b["labeled_presence"] == b["distinct_presence"]
        assert b["labeled_association"] == b["distinct_association"]
    # the labeled closed form, for every (a, q')
    for a, q in product(set(at_rows), {u[0] for u in units}):
        m, n = at_rows.count(a), sum(u[0] == q for u in units)
        labeled, _ = priview_worlds(at_rows, units)
        hits = sum(any(x == a and u[0] == q for x, u in w) for w in labeled)
        assert labeled_presence(size, n, m) == Fraction(hits, len(labeled))
    theorem6_p = Fraction(size, len(at_rows) * st_rows)
    theorem6_a = Fraction(max(Counter(units).values()), size)
    expected_p = max(theorem6_p, b["labeled_presence"], b["distinct_presence"])
    expected_a = max(theorem6_a, b["labeled_association"], b["distinct_association"])
    assert Fraction(priview_presence(at, st_t, "q", "S", Fraction(1)).value) == expected_p
    assert Fraction(priview_association(at, st_t, "q", "S", Fraction(1)).value) == expected_a
    q0 = units[0][0]
    assert priview_presence_of(at, st_t, "q", "S", {"a": at_rows[0], "q": q0}) == labeled_presence(
        size, sum(u[0] == q0 for u in units), at_rows.count(at_rows[0])
    )


@settings(max_examples=40, deadline=None)
@given(tiny_priview())
def test_priview_association_verdict_at_and_just_below_the_enumerated_worst(case):
    """The verdict against the worlds: beta equal to the enumerated worst association (the
    largest of Theorem 6 and both counting rules) passes, beta a tenth below it is refused."""
    at_rows, units = case
    at, st_t = priview_release(at_rows, units)
    b = brute_priview(at_rows, units)
    worst = max(Fraction(max(Counter(units).values()), len(units)), b["labeled_association"], b["distinct_association"])
    at_worst = priview_association(at, st_t, "q", "S", worst)
    below = priview_association(at, st_t, "q", "S", worst * Fraction(9, 10))
    assert (at_worst.passed, at_worst.worst["failing_rows"]) == (True, 0)
    assert not below.passed and below.worst["failing_rows"] >= 1


def fig9_tables():
    at = pa.table(
        {"age": [45, 20, 50, 60, 20, 50, 60, 60], "gender": ["M"] * 4 + ["F"] * 4, "gid": [1, 1, 1, 1, 2, 2, 2, 2]}
    )
    st_t = pa.table(
        {
            "gid": [1, 1, 1, 1, 2, 2, 2, 2],
            "zipcode": [11000, 12000, 23000, 12000, 54000, 23000, 23000, 21000],
            "disease": ["diabetes", "flu", "diarrhea", "stroke", "leukemia", "diabetes", "leukemia", "dyspepsia"],
            "count": [1] * 8,
        }
    )
    return at, st_t


def test_fig9_theorem6_is_loose():
    """Theorem 6 says 1/|G| = 1/4 and c/|G| = 1/4; the possible worlds say otherwise."""
    at, st_t = fig9_tables()
    grace = {"age": 60, "gender": "F", "zipcode": 23000}  # (60, F) twice in AT, 23000 twice in ST
    assert priview_presence_of(at, st_t, "zipcode", "disease", grace) == Fraction(5, 6)
    b = brute_priview(
        [(20, "F"), (50, "F"), (60, "F"), (60, "F")],
        [(54000, "leukemia"), (23000, "diabetes"), (23000, "leukemia"), (21000, "dyspepsia")],
    )
    assert b["labeled_presence"] == b["distinct_presence"] == Fraction(5, 6)
    # Alan's zip code 11000 appears only with diabetes: if Alan is in T, he has diabetes
    assert b["labeled_association"] == 1
    presence = priview_presence(at, st_t, "zipcode", "disease", Fraction(1, 2))
    assert (presence.value, presence.worst["gid"], presence.passed) == ("5/6", 2, False)
    assert presence.worst["theorem6"] == "1/4"
    assoc = priview_association(at, st_t, "zipcode", "disease", Fraction(1, 2))
    assert assoc.value == "1" and not assoc.passed


@settings(max_examples=15, deadline=None)
@given(st.integers(13, 24), st.integers(2, 4), st.integers(2, 4), st.randoms(use_true_random=False))
def test_priview_groups_beyond_the_exact_count_are_reported_certain(size, m, c, rnd):
    """A PriView group whose AT repeats a row (m copies) and whose ST holds a unit count above 1
    (c units of one (QI', S)) is counted exactly up to 12 people; beyond, the verifier does not
    know the literal Definition 5.1 probability and reports it as 1 (unsafe), never less."""
    at_rows = ["x"] * m + [f"p{i}" for i in range(size - m)]
    units = [(0, "a")] * c + [(i, f"s{i}") for i in range(1, size - c + 1)]
    rnd.shuffle(at_rows)
    rnd.shuffle(units)
    at, st_t = priview_release(at_rows, units)
    res = priview_presence(at, st_t, "q", "S", Fraction(99, 100))
    assert (res.value, res.passed) == ("1", False)

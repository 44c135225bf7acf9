"""alpha-presence of Ambiguity and PriView releases, read from the published tables only.

Possible worlds (Definitions 5.1-5.3), per QI-group, since GID is published in every table:

* Ambiguity (AT_1..AT_m duplicate-free, ST(gid, S, count)): a world of group G is a set of |G|
  distinct QI tuples from AT_1[G] x ... x AT_m[G] whose projections reproduce every AT_i[G], with
  the multiset of sensitive values of ST[G] assigned to them. Permuting the values of one
  attribute maps worlds to worlds, so every cell of the cross product is equally likely and
  Pr(t in T) = |G| / prod_i |G_AT_i| exactly (Theorem 1), although the proof's count C(P, |G|)
  also counts subsets that leave a published value unused.
* PriView (AT(QI, gid) with one row per person, ST(gid, QI', S, count)): a world pairs the AT rows
  of G with the ST units of G (a row with count c is c units). Two counting rules exist:
  - "labeled": every bijection between AT rows and ST units is equally likely. For t = (a, q')
    with a occurring m times in AT[G] and q' on n units of ST[G]:
        Pr(t in T) = 1 - C(|G| - n, m) / C(|G|, m)
    (hypergeometric: none of a's m rows meets a q' unit).
  - "distinct": every distinct joined relation is equally likely (the literal Definition 5.1).
    It differs from "labeled" only when a group has both a repeated AT row and an ST count > 1;
    then worlds are contingency tables with margins (m_a) and (c_b), counted here by a small
    dynamic programme for tiny groups and reported as 1 (unknown, so unsafe) for larger ones.
  Theorem 6 says 1/|G| (its proof: |G| / (|G_AT| x |G_ST|)). It ignores m and n, so it is too
  small whenever AT repeats a row or a QI' value sits on several ST units. The verifier reports,
  per group, the largest of Theorem 6 (proof form), the labeled count and (where it differs) the
  distinct count.

A tuple t can be covered by several groups; worlds of different groups are independent, so
Pr(t in T) = 1 - prod_g (1 - Pr_g(t)). `*_presence_of(t)` answers that for a given individual;
the release check is per group (Theorem 1 / 6), as the paper states it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cache, lru_cache
from math import comb
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.techniques.ambiguity.group_chunks import Worst, combine_worst

# groups at most this large get the exact "distinct relations" count when both sides repeat
DISTINCT_WORLDS_MAX_GROUP = 12


# --- small exact helpers ------------------------------------------------------------------------


def absent_fraction(g: int, n: int, m: int) -> Fraction:
    """Pr(none of m marked AT rows is paired with one of n marked ST units), |G| = g."""
    if m <= 0:
        return Fraction(1)
    return Fraction(comb(g - n, m), comb(g, m)) if n <= g else Fraction(0)


def labeled_presence(g: int, n: int, m: int) -> Fraction:
    return 1 - absent_fraction(g, n, m)


def labeled_association(g: int, c: int, n: int, m: int) -> Fraction:
    """Pr((t, s) in T | t in T) for t = (a, q'): c units (q', s) among n units with q'."""
    p_t = labeled_presence(g, n, m)
    return (1 - absent_fraction(g, c, m)) / p_t if p_t else Fraction(0)


def frac_max(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise max of num/den pairs a = (num, den), b = (num, den), exactly."""
    take_b = b[0] * a[1] > a[0] * b[1]
    return np.where(take_b, b[0], a[0]), np.where(take_b, b[1], a[1])


def frac_arrays(values: list[Fraction]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([v.numerator for v in values], dtype=object),
        np.array([v.denominator for v in values], dtype=object),
    )


def worst_and_check(num: np.ndarray, den: np.ndarray, threshold: Fraction) -> tuple[int, Fraction, int]:
    """(index of the largest num/den, its exact value, number of entries above threshold)."""
    if len(num) == 0:
        return -1, Fraction(0), 0
    ratio = num.astype(float) / den.astype(float)
    near = np.flatnonzero(ratio >= ratio.max() * (1 - 1e-9))  # settle float near-ties exactly
    exact = [Fraction(int(num[j]), int(den[j])) for j in near]
    best = max(range(len(near)), key=exact.__getitem__)
    failing = int(np.count_nonzero(num * threshold.denominator > threshold.numerator * den))
    return int(near[best]), exact[best], failing


def gid_values(table: pa.Table) -> np.ndarray:
    gid: npt.NDArray[np.int64] = table.column("gid").to_numpy().astype(np.int64)  # pyarrow is untyped
    return gid


# --- Ambiguity ----------------------------------------------------------------------------------


@dataclass
class AmbiguityGroups:
    """What an adversary reads off an Ambiguity release, per group id."""

    gid: np.ndarray  # sorted distinct group ids (from ST and every AT)
    size: np.ndarray  # |G| = sum of ST counts (int64)
    at_sizes: np.ndarray  # (groups, m) distinct values per AT_i (|G_AT_i|)
    qi_names: list[str]
    repeats: np.ndarray  # bool per group: some AT_i repeats a row (not a release: reported as 1)


def ambiguity_groups(at_tables: Mapping[str, pa.Table], st: pa.Table) -> AmbiguityGroups:
    names = list(at_tables)
    all_gids = [gid_values(st)] + [gid_values(t) for t in at_tables.values()]
    gid = np.unique(np.concatenate(all_gids)) if all_gids else np.zeros(0, np.int64)
    size = np.zeros(len(gid), np.int64)
    np.add.at(size, np.searchsorted(gid, gid_values(st)), st.column("count").to_numpy().astype(np.int64))
    at_sizes = np.zeros((len(gid), len(names)), np.int64)
    repeats = np.zeros(len(gid), bool)
    for j, name in enumerate(names):
        # duplicate-free by Definition 3.3: a repeated row is a table no Ambiguity release
        # publishes (it would pass for one more person), so its group is marked, never counted
        agg = (
            at_tables[name]
            .group_by("gid")
            .aggregate([(name, "count_distinct"), (name, "count", pc.CountOptions(mode="all"))])
        )
        at = np.searchsorted(gid, gid_values(agg))
        distinct = agg.column(f"{name}_count_distinct").to_numpy()
        at_sizes[at, j] = distinct
        repeats[at] |= agg.column(f"{name}_count").to_numpy() > distinct
    return AmbiguityGroups(gid, size, at_sizes, names, repeats)


def ambiguity_presence(at_tables: Mapping[str, pa.Table], st: pa.Table, alpha: Fraction) -> PrivacyResult:
    """Theorem 1 per group: |G| / prod_i |G_AT_i|; a group missing from an AT is reported as 1."""
    return combine_worst([ambiguity_presence_part(at_tables, st, alpha)])


def ambiguity_presence_part(at_tables: Mapping[str, pa.Table], st: pa.Table, alpha: Fraction) -> Worst:
    """alpha-presence of the groups these tables hold (all of a release, or a chunk of its gids)."""
    g = ambiguity_groups(at_tables, st)
    num = g.size.astype(object)
    den = np.prod(g.at_sizes.astype(object), axis=1) if len(g.gid) else np.zeros(0, object)
    # no world reproduces these tables: presence is not hidden
    broken = (den == 0) | (num > den) | g.repeats
    num = np.where(broken, 1, num)
    den = np.where(broken, 1, den)
    i, worst, failing = worst_and_check(num, den, alpha)
    counts = {
        "groups": int(len(g.gid)),
        "failing_groups": failing,
        "inconsistent_groups": int(np.count_nonzero(broken)),
    }
    detail: dict[str, Any] = {}
    if i >= 0:
        detail.update(
            gid=int(g.gid[i]),
            group_size=int(g.size[i]),
            probability=float(worst),
            at_sizes={n: int(k) for n, k in zip(g.qi_names, g.at_sizes[i])},
        )
    return Worst("alpha-presence", alpha, "failing_groups", worst, int(g.gid[i]) if i >= 0 else None, counts, detail)


def ambiguity_presence_of(at_tables: Mapping[str, pa.Table], st: pa.Table, t: Mapping[str, Any]) -> Fraction:
    """Pr(t in T) for one individual's QI values, over every group that covers t (Lemma 1)."""
    g = ambiguity_groups(at_tables, st)
    covering = np.ones(len(g.gid), dtype=bool)
    for name, table in at_tables.items():
        hit = pc.equal(table.column(name), pa.scalar(t[name], type=table.schema.field(name).type))
        has = np.zeros(len(g.gid), dtype=bool)
        has[np.searchsorted(g.gid, gid_values(table.filter(hit)))] = True
        covering &= has
    absent = Fraction(1)
    for i in np.flatnonzero(covering):
        p = Fraction(int(g.size[i]), int(np.prod(g.at_sizes[i].astype(object))))
        absent *= 1 - min(p, Fraction(1))
    return 1 - absent


# --- PriView ------------------------------------------------------------------------------------


@dataclass
class PriViewGroups:
    """Per group id: sizes and the multiplicities that decide the exact probabilities."""

    gid: np.ndarray
    size: np.ndarray  # |G| = sum of ST counts
    at_rows: np.ndarray  # |G_AT|
    st_rows: np.ndarray  # |G_ST|
    m_max: np.ndarray  # largest multiplicity of an AT row
    n_max: np.ndarray  # largest number of ST units sharing one QI' value
    c_max: np.ndarray  # largest ST count
    # per ST row: its group index, count c and n (units of its QI' value in the group)
    st_group: np.ndarray
    st_c: np.ndarray
    st_n: np.ndarray


def priview_groups(at: pa.Table, st: pa.Table, st_qi: str, sensitive: str) -> PriViewGroups:
    at_cols = [c for c in at.column_names if c != "gid"]
    gid = np.unique(np.concatenate([gid_values(at), gid_values(st)]))
    ng = len(gid)

    def per_group(gids: np.ndarray, values: np.ndarray, how: Callable[..., None]) -> np.ndarray:
        out = np.zeros(ng, np.int64)
        how(out, np.searchsorted(gid, gids), values)
        return out

    st_gid = gid_values(st)
    st_c = st.column("count").to_numpy().astype(np.int64)
    size = per_group(st_gid, st_c, np.add.at)
    st_rows = per_group(st_gid, np.ones(len(st_gid), np.int64), np.add.at)
    at_rows = per_group(gid_values(at), np.ones(at.num_rows, np.int64), np.add.at)
    mult = at.group_by(["gid"] + at_cols).aggregate([([], "count_all")])
    m_max = per_group(gid_values(mult), mult.column("count_all").to_numpy(), np.maximum.at)
    nq = st.group_by(["gid", st_qi]).aggregate([("count", "sum")])
    n_max = per_group(gid_values(nq), nq.column("count_sum").to_numpy(), np.maximum.at)
    c_max = per_group(st_gid, st_c, np.maximum.at)
    # n of each ST row's QI' value: join the (gid, QI') sums back onto ST
    keyed = st.select(["gid", st_qi]).append_column("row", pa.array(np.arange(st.num_rows)))
    joined = keyed.join(nq, ["gid", st_qi]).sort_by("row")
    st_n = joined.column("count_sum").to_numpy().astype(np.int64)
    return PriViewGroups(gid, size, at_rows, st_rows, m_max, n_max, c_max, np.searchsorted(gid, st_gid), st_c, st_n)


def group_tables(at: pa.Table, st: pa.Table, gid: int) -> tuple[pa.Table, pa.Table]:
    return (at.filter(pc.equal(at.column("gid"), gid)), st.filter(pc.equal(st.column("gid"), gid)))


def _contingency_count(rows: tuple[int, ...], cols: tuple[int, ...], forbidden: frozenset[tuple[int, int]]) -> int:
    """Number of non-negative integer matrices with the given row and column sums and zeros in
    the forbidden cells: the distinct joined relations of a PriView group."""

    @cache
    def rec(r: int, caps: tuple[int, ...]) -> int:
        if r == len(rows):
            return int(not any(caps))
        total = 0
        for alloc in _allocations(rows[r], caps, [(r, c) in forbidden for c in range(len(caps))]):
            total += rec(r + 1, tuple(a - b for a, b in zip(caps, alloc)))
        return total

    return rec(0, cols)


def _allocations(total: int, caps: tuple[int, ...], banned: list[bool], start: int = 0) -> Iterator[tuple[int, ...]]:
    if start == len(caps):
        if total == 0:
            yield ()
        return
    top = 0 if banned[start] else min(total, caps[start])
    for x in range(top, -1, -1):
        for rest in _allocations(total - x, caps, banned, start + 1):
            yield (x,) + rest


@lru_cache(maxsize=4096)
def _canonical_count(rows: tuple[int, ...], cols: tuple[int, ...], banned: int) -> int:
    """_contingency_count with zeros in row 0 at columns 0 .. banned - 1."""
    return _contingency_count(rows, cols, frozenset((0, c) for c in range(banned)))


def _count_without(rows: tuple[int, ...], cols: tuple[int, ...], r: int, banned: list[int]) -> int:
    """_contingency_count with zeros in row r at the columns `banned`. The count is the same for
    any order of the rows and of the columns, so it is taken in one order (row r first, the others
    sorted; the banned columns first, each part sorted): the rows and columns of equal sums that a
    PriView group repeats then share one count instead of one each."""
    others = sorted(rows[:r] + rows[r + 1 :])
    out = set(banned)
    order = sorted(cols[c] for c in out) + sorted(cols[c] for c in range(len(cols)) if c not in out)
    return _canonical_count((rows[r], *others), tuple(order), len(out))


def distinct_world_probabilities(
    at_g: pa.Table, st_g: pa.Table, st_qi: str, sensitive: str
) -> tuple[Fraction, Fraction]:
    """Exact presence of every (a, q') and association of every (a, q', s) of one group under
    the "distinct relations" rule; returns (max presence, max association) as Fractions."""
    at_cols = [c for c in at_g.column_names if c != "gid"]
    mult = at_g.group_by(at_cols).aggregate([([], "count_all")])
    rows = tuple(int(x) for x in mult.column("count_all").to_pylist())
    qv = st_g.column(st_qi).to_pylist()
    sv = st_g.column(sensitive).to_pylist()
    cols = tuple(int(x) for x in st_g.column("count").to_pylist())
    everything = _contingency_count(rows, cols, frozenset())
    worst_p, worst_a = Fraction(0), Fraction(0)
    for r in range(len(rows)):
        for q in set(qv):
            on_q = [b for b in range(len(cols)) if qv[b] == q]
            p_t = 1 - Fraction(_count_without(rows, cols, r, on_q), everything)
            worst_p = max(worst_p, p_t)
            for b in on_q:
                # (t, s) present: cell (r, b) positive; several ST rows can share (q', s) only
                # in a malformed table, and then any of them counts
                same = [x for x in on_q if sv[x] == sv[b]]
                p_ts = 1 - Fraction(_count_without(rows, cols, r, same), everything)
                if p_t:
                    worst_a = max(worst_a, p_ts / p_t)
    return worst_p, worst_a


def priview_presence(at: pa.Table, st: pa.Table, st_qi: str, sensitive: str, alpha: Fraction) -> PrivacyResult:
    return combine_worst([priview_presence_part(at, st, st_qi, sensitive, alpha)])


def priview_presence_part(at: pa.Table, st: pa.Table, st_qi: str, sensitive: str, alpha: Fraction) -> Worst:
    """alpha-presence of the groups these tables hold (all of a release, or a chunk of its gids)."""
    g = priview_groups(at, st, st_qi, sensitive)
    ng = len(g.gid)
    # Theorem 6 as proved: |G| / (|G_AT| x |G_ST|)
    th_num = g.size.astype(object)
    th_den = (g.at_rows * g.st_rows).astype(object)
    # labeled count: n_max / |G| when no AT row repeats, else the hypergeometric form
    lab_num, lab_den = g.n_max.astype(object), g.size.astype(object)
    repeated = np.flatnonzero(g.m_max > 1)
    if len(repeated):
        vals = [labeled_presence(int(g.size[i]), int(g.n_max[i]), int(g.m_max[i])) for i in repeated]
        lab_num[repeated], lab_den[repeated] = frac_arrays(vals)
    num, den = frac_max((th_num, th_den), (lab_num, lab_den))
    # distinct-relations count where it can differ from the labeled one
    both = np.flatnonzero((g.m_max > 1) & (g.c_max > 1))
    for i in both.tolist():
        if g.size[i] <= DISTINCT_WORLDS_MAX_GROUP:
            p, _ = distinct_world_probabilities(*group_tables(at, st, int(g.gid[i])), st_qi, sensitive)
        else:
            p = Fraction(1)  # too large to count: report the unknown probability as certain
        best = max(Fraction(int(num[i]), int(den[i])), p)
        num[i], den[i] = best.numerator, best.denominator
    broken = (g.size == 0) | (g.at_rows != g.size) | (den == 0)
    num = np.where(broken, 1, num)
    den = np.where(broken, 1, den)
    i, worst, failing = worst_and_check(num, den, alpha)
    counts = {
        "groups": ng,
        "failing_groups": failing,
        "inconsistent_groups": int(np.count_nonzero(broken)),
        "groups_where_theorem6_is_too_small": int(np.count_nonzero(th_num * den < num * th_den)),
    }
    detail: dict[str, Any] = {}
    if i >= 0:
        detail.update(
            gid=int(g.gid[i]),
            group_size=int(g.size[i]),
            probability=float(worst),
            theorem6=str(Fraction(int(th_num[i]), int(th_den[i])) if th_den[i] else "n/a"),
            max_at_multiplicity=int(g.m_max[i]),
            max_qi_units=int(g.n_max[i]),
        )
    return Worst("alpha-presence", alpha, "failing_groups", worst, int(g.gid[i]) if i >= 0 else None, counts, detail)


def priview_presence_of(at: pa.Table, st: pa.Table, st_qi: str, sensitive: str, t: Mapping[str, Any]) -> Fraction:
    """Pr(t in T) under the labeled rule, over every group covering t."""
    at_cols = [c for c in at.column_names if c != "gid"]
    mask = pc.equal(st.column(st_qi), pa.scalar(t[st_qi], type=st.schema.field(st_qi).type))
    amask = None
    for c in at_cols:
        e = pc.equal(at.column(c), pa.scalar(t[c], type=at.schema.field(c).type))
        amask = e if amask is None else pc.and_(amask, e)
    g = priview_groups(at, st, st_qi, sensitive)
    n = np.zeros(len(g.gid), np.int64)
    np.add.at(
        n,
        np.searchsorted(g.gid, gid_values(st.filter(mask))),
        st.filter(mask).column("count").to_numpy().astype(np.int64),
    )
    m = np.zeros(len(g.gid), np.int64)
    np.add.at(m, np.searchsorted(g.gid, gid_values(at.filter(amask))), 1)
    absent = Fraction(1)
    for i in np.flatnonzero((n > 0) & (m > 0)):
        absent *= absent_fraction(int(g.size[i]), int(n[i]), int(m[i]))
    return 1 - absent

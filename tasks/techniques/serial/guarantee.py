"""The global guarantee of serial publishing for transient sensitive values (arXiv 0903.0682).

Formulas as restated in ../shared/notes/serial-formulas.md (the seed copy lost them):

    p(o, s, k) = 1 - prod_j (|G_j| - n_j(s)) / |G_j|      over the releases whose group of o holds s
               = 1 - Q / D

A person-value pair is summarised by the integers Q = prod(|G_j| - n_j(s)) and D = prod |G_j|; every
decision below is an integer comparison on them, so nothing depends on floating-point rounding.

- global guarantee:      p <= 1/l          <=>  l*Q >= (l-1)*D
- may be linked again:   p <  1/l          <=>  l*Q >  (l-1)*D
- Theorem 1 (integer):   after a release with a group (size, count) holding s, p <= 1/l
                         <=>  l*Q > (l-1)*D  and  size * (l*Q - (l-1)*D) >= count * l*Q
  so the minimum ratio |G|/n(s) is m = l*Q / (l*Q - (l-1)*D) (first release: m = l).
- localized guarantee:   n_j(s) / |G_j| <= 1/l  <=>  l * count <= size

Strategies give the ratio a release must meet; both stay strictly above m, so p never reaches 1/l
(Corollary 2: equality at m; Theorem 2: after equality every later linking release breaches).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.techniques.serial import groups as serial_groups
from privpub.tasks.techniques.serial import pairs
from privpub.tasks.techniques.serial import statistics as st
from privpub.tasks.techniques.serial.groups import python_scalar

if TYPE_CHECKING:
    import pyarrow as pa

    from privpub.tasks.core.types import PrivacyResult

# ------------------------------------------------------------------------------------------------
# scalar, exact


def not_linked(terms: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(Q, D) for a series of (group size, count of s) terms; count 0 contributes 1 (Lemma 5)."""
    q = d = 1
    for size, count in terms:
        if not 0 <= count <= size or size <= 0:
            raise ValueError(f"impossible group: size {size}, count {count}")
        if count:
            q *= size - count
            d *= size
    return q, d


def breach_probability(terms: Iterable[tuple[int, int]]) -> Fraction:
    """p(o, s, k) for the (|G_j|, n_j(s)) of o's groups over the series (Lemma 4)."""
    q, d = not_linked(terms)
    return 1 - Fraction(q, d)


def within_guarantee(q: int, d: int, l: int) -> bool:
    """p = 1 - Q/D <= 1/l."""
    return l * q >= (l - 1) * d


def can_link_again(q: int, d: int, l: int) -> bool:
    """p < 1/l: some finite ratio keeps the next linking release within the guarantee."""
    return l * q > (l - 1) * d


def min_ratio(q: int, d: int, l: int) -> Fraction | None:
    """Theorem 1: the smallest |G|/n(s) for the next release; None when no ratio is enough."""
    slack = l * q - (l - 1) * d
    if slack <= 0:
        return None
    return Fraction(l * q, slack)


def ratio_meets(size: int, count: int, q: int, d: int, l: int) -> bool:
    """Theorem 1 in integer form: does a group (size, count of s) keep p(o, s, k) <= 1/l?"""
    if count == 0:
        return within_guarantee(q, d, l)
    lq = l * q
    slack = lq - (l - 1) * d
    return slack > 0 and size * slack >= count * lq


def localized_ok(size: int, count: int, l: int) -> bool:
    return l * count <= size


def exceeds_r_star(r: Fraction, l: int, k: int) -> bool:
    """r > r* = 1 / (1 - ((l-1)/l)^(1/k)), exactly: ((r-1)/r)^k > (l-1)/l."""
    a, b = r.numerator, r.denominator
    return a > b and l * (a - b) ** k > (l - 1) * a**k


def constant_ratio(l: int, k: int, scale: int = 100) -> Fraction:
    """The constant ratio: r* rounded up to the next multiple of 1/scale, strictly above r*.

    r* is irrational for the parameters of interest, so strictly above costs nothing; when r*
    happens to be a multiple of 1/scale the next one is taken, because at r* itself the k-th
    linking release reaches p = 1/l exactly (Corollary 2) and none may follow.
    """
    if l < 2 or k < 1:
        raise ValueError("constant ratio needs l >= 2 and k >= 1")
    guess = 1.0 / (1.0 - ((l - 1) / l) ** (1.0 / k))
    a = max(scale + 1, math.floor(guess * scale) - 2)
    while not exceeds_r_star(Fraction(a, scale), l, k):
        a += 1
    while a - 1 > scale and exceeds_r_star(Fraction(a - 1, scale), l, k):
        a -= 1
    return Fraction(a, scale)


# ------------------------------------------------------------------------------------------------
# strategies: the ratio |G|/n(s) the next release must meet for a pair with history (Q, D)

FALLBACK_FACTOR = Fraction(2)


@dataclass(frozen=True)
class Strategy:
    l: int

    def required(self, q: int, d: int) -> Fraction | None:
        """The ratio the next linking release must meet; None: the pair may never be linked again."""
        raise NotImplementedError

    def required_many(self, q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised `required` as exact (numerator, denominator) object arrays; den 0 = never."""
        raise NotImplementedError

    @property
    def first(self) -> Fraction:
        """The ratio for a pair with no history."""
        r = self.required(1, 1)
        assert r is not None
        return r

    @property
    def first_hi(self) -> float:
        """The float the grouping uses for `first` (an upper bound, as `ratio_upper_bound`)."""
        f = self.first
        return float(
            ratio_upper_bound(np.array([f.numerator], dtype=object), np.array([f.denominator], dtype=object))[0]
        )

    @property
    def p_floor(self) -> float:
        """Every pair with p_hi <= p_floor has the required ratio `first`, exactly, so a release
        need not read those pairs to size its groups (tasks/techniques/serial/pairs.py). Default: none."""
        return -1.0

    def ratio_bound(self, p_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Float upper bounds of the required ratio from upper bounds of p, for sizing groups,
        and where they are not good enough (the caller computes those exactly). Exactly
        `first_hi` where the exact ratio is `first`. Default: compute everything exactly."""
        return np.full(len(p_hi), np.inf), np.ones(len(p_hi), dtype=bool)

    def _m_upper(self, p_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Upper bounds of m = l(1 - P)/(1 - lP), which grows with P; unusable (near) where
        1 - lP is small, because the float error is then amplified."""
        slack = 1.0 - self.l * p_hi
        near = slack < 1e-4
        m = self.l * (1.0 - p_hi) / np.where(near, 1.0, slack) * (1 + 1e-6)
        return m, near


def _min_ratio_many(q: np.ndarray, d: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray]:
    lq = l * q
    slack = lq - (l - 1) * d
    ok = np.asarray(slack > 0, dtype=bool)
    num = np.where(ok, lq, 1).astype(object)
    den = np.where(ok, slack, 0).astype(object)
    return num, den


@dataclass(frozen=True)
class ConstantRatio(Strategy):
    """Section 6.1: the same ratio r_c (r* rounded up, `constant_ratio`) for every linking release.

    Rule: required = r_c when r_c > m (Theorem 1 minimum), else FALLBACK_FACTOR * m. Within k
    linking releases at ratios >= r_c, r_c > m always holds (p stays below 1 - (1-1/r_c)^k < 1/l),
    so the fallback only acts past the horizon k, where it keeps p strictly below 1/l.
    """

    k: int = 20
    ratio: Fraction = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ratio", constant_ratio(self.l, self.k))

    def required(self, q: int, d: int) -> Fraction | None:
        m = min_ratio(q, d, self.l)
        if m is None:
            return None
        return self.ratio if self.ratio > m else FALLBACK_FACTOR * m

    @property
    def p_floor(self) -> float:
        # m(P) = l(1 - P)/(1 - lP) grows with P and equals r_c at P* = (r_c - l)/(l(r_c - 1)), so
        # p <= p_hi <= p_floor < P* gives m < r_c: the ratio is r_c. float(P*) is within half an
        # ulp of P*, and the factor puts p_floor below it by far more than that.
        r, l = self.ratio, self.l
        return float((r - l) / (l * (r - 1))) * (1 - 1e-9)

    def ratio_bound(self, p_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, near = self._m_upper(p_hi)
        below = m < float(self.ratio) * (1 - 1e-12)  # m < r_c for sure: the ratio is r_c itself
        return np.where(below, self.first_hi, np.maximum(self.first_hi, float(FALLBACK_FACTOR) * m)), near

    def required_many(self, q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        num, den = _min_ratio_many(q, d, self.l)
        a, b = self.ratio.numerator, self.ratio.denominator
        use_rc = np.asarray(a * den > b * num, dtype=bool)  # r_c > m; false when den == 0
        fnum = num * FALLBACK_FACTOR.numerator
        fden = den * FALLBACK_FACTOR.denominator
        return np.where(use_rc, a, fnum).astype(object), np.where(use_rc, b, fden).astype(object)


@dataclass(frozen=True)
class Geometric(Strategy):
    """Section 6.2: required = factor * m, with factor > 1, so p < 1/l after every release."""

    factor: Fraction = Fraction(2)

    def __post_init__(self) -> None:
        if not self.factor > 1:
            raise ValueError("the geometric factor must be > 1")

    def required(self, q: int, d: int) -> Fraction | None:
        m = min_ratio(q, d, self.l)
        return None if m is None else self.factor * m

    @property
    def p_floor(self) -> float:
        return 0.0  # only a pair never linked (p = 0) keeps factor * l; every stored pair has p > 0

    def ratio_bound(self, p_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, near = self._m_upper(p_hi)
        return float(self.factor) * (1 + 1e-12) * m, near

    def required_many(self, q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        num, den = _min_ratio_many(q, d, self.l)
        return num * self.factor.numerator, den * self.factor.denominator


@dataclass(frozen=True)
class LocalizedOnly(Strategy):
    """Baseline, NOT safe for a series: ratio l in every release (the localized guarantee only)."""

    def required(self, q: int, d: int) -> Fraction | None:
        return Fraction(self.l)

    @property
    def p_floor(self) -> float:
        return np.inf  # the history never matters

    def ratio_bound(self, p_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.full(len(p_hi), self.first_hi), np.zeros(len(p_hi), dtype=bool)

    def required_many(self, q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(q)
        return np.full(n, self.l, dtype=object), np.full(n, 1, dtype=object)


def make_strategy(name: str, l: int, releases: int = 20, factor: Fraction = Fraction(2)) -> Strategy:
    if name == "constant-ratio":
        return ConstantRatio(l, releases)
    if name == "geometric":
        return Geometric(l, Fraction(factor))
    if name == "localized":
        return LocalizedOnly(l)
    raise ValueError(f"unknown serial strategy '{name}' (constant-ratio, geometric, localized)")


def ratio_upper_bound(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """float64 values >= num/den (inf where den == 0), for sizing groups; exact checks follow."""

    def one(a: int, b: int) -> float:
        if b == 0:
            return math.inf
        try:
            return a / b  # correctly rounded
        except OverflowError:
            return math.inf

    vals = np.frompyfunc(one, 2, 1)(num, den).astype(np.float64) if len(num) else np.zeros(0)
    return np.nextafter(vals * (1 + 2.0**-50), np.inf)


# ------------------------------------------------------------------------------------------------
# vectorised checks over many person-value pairs (object arrays of Python ints)


def within_guarantee_many(q: np.ndarray, d: np.ndarray, l: int) -> np.ndarray:
    return np.asarray(l * q >= (l - 1) * d, dtype=bool)


def ratio_meets_many(size: npt.ArrayLike, count: npt.ArrayLike, q: np.ndarray, d: np.ndarray, l: int) -> np.ndarray:
    """`ratio_meets` elementwise; size and count int arrays, q and d object arrays."""
    size = np.asarray(size).astype(object)
    count = np.asarray(count).astype(object)
    lq = l * q
    slack = lq - (l - 1) * d
    return np.asarray((slack > 0) & (size * slack >= count * lq), dtype=bool)


def worst_pair(
    q: np.ndarray, d: np.ndarray, tie: Callable[[int], tuple[str, int, str]] | None = None
) -> tuple[int, Fraction]:
    """Index and exact value of the largest p = 1 - Q/D (floats pick candidates, Fractions decide).
    Among equal p, the least `tie(i)` (default: the first index)."""
    if len(q) == 0:
        return -1, Fraction(0)
    try:
        with np.errstate(invalid="ignore"):
            approx = q.astype(np.float64) / d.astype(np.float64)
        if not np.isfinite(approx).all():
            raise OverflowError
    except OverflowError:  # products beyond 1e308: exact division, correctly rounded
        approx = np.frompyfunc(lambda a, b: a / b, 2, 1)(q, d).astype(np.float64)
    low = approx.min()
    cand = np.flatnonzero(approx <= low * (1 + 1e-9) + 1e-300)
    best = min(cand.tolist(), key=lambda i: (Fraction(int(q[i]), int(d[i])), i if tie is None else tie(i)))
    return int(best), 1 - Fraction(int(q[best]), int(d[best]))


# ------------------------------------------------------------------------------------------------
# the series summary: what the untouched pairs contribute to a check


def summarize(aggregate: pd.DataFrame, l: int) -> dict[str, Any]:
    """Pairs, pairs above 1/l and the worst pair of a whole aggregate (q, d as exact strings).

    It is the part of a release's check that the pairs of absent people contribute: their p does
    not change, so the next release's check combines this with its own pairs only."""
    q = aggregate["q"].to_numpy(dtype=object)
    d = aggregate["d"].to_numpy(dtype=object)
    i, _ = worst_pair(q, d, lambda i: _pair_order(aggregate, i))
    return {
        "l": l,
        "pairs": len(q),
        "breaching": int((~within_guarantee_many(q, d, l)).sum()) if len(q) else 0,
        "worst": None if i < 0 else _pair_record(aggregate, i),
    }


def stored_summary(source: pairs.MemoryPairs, l: int) -> dict[str, Any] | None:
    """The series summary of a state stored before summaries existed (computed once)."""
    aggregate = source.aggregate()
    return None if aggregate is None else summarize(aggregate, l)


def advance_summary(prior: dict[str, Any] | None, before: pd.DataFrame, after: pd.DataFrame, l: int) -> dict[str, Any]:
    """The summary after a release, from the prior summary and the pairs of the people in it.

    Exact because p never falls: a release multiplies Q/D by (|G| - n(s))/|G| <= 1, so a pair's
    new p is at least its old one, and the worst of the series is max(prior worst, worst of
    `after`). A pair of `after` breaches anew if it breaches now and did not before."""
    prior = prior or {"l": l, "pairs": 0, "breaching": 0, "worst": None}
    if prior.get("l") != l:
        raise ValueError(f"series summary kept for l = {prior.get('l')}, checked with l = {l}")
    key = ["person", "value"]
    old_at = (
        pd.MultiIndex.from_frame(before[key]).get_indexer(pd.MultiIndex.from_frame(after[key]))
        if len(before) and len(after)
        else np.full(len(after), -1)
    )
    q, d = after["q"].to_numpy(dtype=object), after["d"].to_numpy(dtype=object)
    new_ok = within_guarantee_many(q, d, l) if len(q) else np.zeros(0, dtype=bool)
    old_ok = np.ones(len(after), dtype=bool)
    known = old_at >= 0
    if known.any():
        old_ok[known] = within_guarantee_many(
            before["q"].to_numpy(dtype=object)[old_at[known]], before["d"].to_numpy(dtype=object)[old_at[known]], l
        )
    worst = prior["worst"]
    i, p = worst_pair(q, d, lambda i: _pair_order(after, i))
    if i >= 0:
        new = _pair_record(after, i)
        old_p = None if worst is None else 1 - Fraction(int(worst["q"]), int(worst["d"]))
        if old_p is None or p > old_p or (p == old_p and _record_order(new) < _record_order(worst)):
            worst = new
    return {
        "l": l,
        "pairs": int(prior["pairs"]) + int((~known).sum()),
        "breaching": int(prior["breaching"]) + int((~new_ok & old_ok).sum()),
        "worst": worst,
    }


def _pair_order(aggregate: pd.DataFrame, i: int) -> tuple[str, int, str]:
    """The tie-break among pairs of equal p: the same pair whatever order the pairs were read in
    (the carried aggregate in memory and the store's reads differ in order)."""
    return _record_order(_pair_record(aggregate, i))


def _record_order(record: dict[str, Any]) -> tuple[str, int, str]:
    # value and links first: the figure's detail (value, links, p) is then the same whatever the
    # person is called (an id, or its pseudonym in the state: state/pseudonyms.py)
    return str(record["value"]), int(record["links"]), str(record["person"])


def _pair_record(aggregate: pd.DataFrame, i: int) -> dict[str, Any]:
    return {
        "person": python_scalar(aggregate["person"].iat[i]),
        "value": python_scalar(aggregate["value"].iat[i]),
        "links": int(aggregate["links"].to_numpy()[i]),  # .iat is typed as any scalar (a date, ...)
        "q": str(aggregate["q"].iat[i]),
        "d": str(aggregate["d"].iat[i]),
    }


# ------------------------------------------------------------------------------------------------
# verification of a release of a series, from what the adversary sees


@dataclass
class SerialCheckResult:
    """Result of a release check: the privacy figures plus what the release adds."""

    results: list[PrivacyResult]
    rows: object  # pandas DataFrame of history rows recomputed from the published tables
    aggregate: object  # full check: every pair of the series; incremental: the pairs of this release's people
    summary: dict[str, Any] | None = None  # pairs, breaching, worst pair of the series after this release


def _published_rows(
    table: pa.Table,
    groups: pa.Table,
    membership: pa.Table | pd.DataFrame,
    *,
    l: int,
    sensitive: str,
    transient: Iterable[Any] | None,
    release: int,
    chunk_rows: int | None = None,
) -> tuple[pd.DataFrame, PrivacyResult]:
    """This release's history rows recomputed from the published tables and the membership, and
    the localized guarantee (tasks/verify/serial_groups.py, every run of groups in this process;
    one run unless chunk_rows is given)."""
    chunks = serial_groups.group_chunks(
        table,
        groups,
        membership,
        l=l,
        sensitive=sensitive,
        transient=transient,
        release=release,
        chunk_rows=chunk_rows or max(table.num_rows, 1),
    )
    return serial_groups.localized_and_rows([serial_groups.group_figures(c) for c in chunks], l)


def _global_result(summary: dict[str, Any], l: int) -> PrivacyResult:
    w = summary["worst"]
    p = Fraction(0) if w is None else 1 - Fraction(int(w["q"]), int(w["d"]))
    # The worst pair is named by its value and links only: its person id stays in the private
    # series summary (the figures are published in release_metrics and the report).
    where = {} if w is None else {"value": w["value"], "links": w["links"], "p": str(p)}
    return PrivacyResult(
        "serial-global",
        str(p),
        f"1/{l}",
        summary["breaching"] == 0,
        {**where, "breaching_pairs": summary["breaching"], "pairs": summary["pairs"]},
    )


def check_release(
    table: pa.Table,
    groups: pa.Table,
    membership: pa.Table | pd.DataFrame,
    prior_aggregate: Any,
    *,
    l: int,
    sensitive: str,
    transient: Iterable[Any] | None = None,
    release: int = 0,
) -> SerialCheckResult:
    """Global and localized guarantees of a candidate release over the whole series: every pair
    of the series is rechecked (what `privpub verify` does).

    table, groups: the published pyarrow tables; membership: (person, gid) of every real tuple
    (the adversary is assumed to know o's group); prior_aggregate: per-pair aggregate of the
    committed releases (tasks.serial.statistics, pandas with int q, d, e.g. rebuilt from the
    history rows); transient: the protected values (None = all).
    """
    published = _published_rows(
        table, groups, membership, l=l, sensitive=sensitive, transient=transient, release=release
    )
    return check_rows(*published, prior_aggregate, l=l)


def check_rows(rows: pd.DataFrame, localized: PrivacyResult, prior_aggregate: Any, *, l: int) -> SerialCheckResult:
    """`check_release` from the release's history rows and localized figure (serial_groups)."""
    agg = st.combine(
        ([st.as_frame(prior_aggregate, st.AGGREGATE_COLUMNS)] if prior_aggregate is not None else [])
        + [st.history_terms(rows)]
    )
    summary = summarize(agg, l)
    return SerialCheckResult([_global_result(summary, l), localized], rows, agg, summary)


def check_release_incremental(
    table: pa.Table,
    groups: pa.Table,
    membership: pa.Table | pd.DataFrame,
    prior_pairs: Any,
    prior_summary: dict[str, Any] | None,
    *,
    l: int,
    sensitive: str,
    transient: Iterable[Any] | None = None,
    release: int = 0,
) -> SerialCheckResult:
    """`check_release` in O(size of the release): only the pairs named by this release's history
    rows are recomputed exactly (their stored state read from `prior_pairs`, a PairSource or an
    aggregate); every other pair keeps its p, and `prior_summary` (pairs, breaching, worst pair of
    the committed series) stands for them. Gives the same figures as the full check (tested)."""
    published = _published_rows(
        table, groups, membership, l=l, sensitive=sensitive, transient=transient, release=release
    )
    return check_rows_incremental(*published, prior_pairs, prior_summary, l=l)


def check_rows_incremental(
    rows: pd.DataFrame, localized: PrivacyResult, prior_pairs: Any, prior_summary: dict[str, Any] | None, *, l: int
) -> SerialCheckResult:
    """`check_release_incremental` from the release's history rows and localized figure."""
    source = pairs.as_source(prior_pairs)
    if prior_summary is None and isinstance(source, pairs.MemoryPairs):
        prior_summary = stored_summary(source, l)  # series stored before summaries
    before = pairs.matching(source, rows)
    after = st.combine([before, st.history_terms(rows)])
    summary = advance_summary(prior_summary, before, after, l)
    return SerialCheckResult([_global_result(summary, l), localized], rows, after, summary)

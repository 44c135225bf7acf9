"""MuCo privacy checks, computed from the stored random output tables and the published table.

Stored tables (Release.private["output_tables"]), one row per non-zero entry p_ij:
    attribute, gid, row (the tuple's row in the published table), code (output value), prob
and Release.private["value_codes"] (attribute, code, value) maps published values to codes.

- Definition 1: each tuple's row of each table is a distribution (sums to 1).
- Definition 3 (delta-probability): max_i p_ij <= delta * sum_i p_ij for every column j.
- Corollary 3.2: every published QI value is carried, with non-zero probability, by at least
  ceil(1/delta) tuples of its group.
- Example 1: the probability that a target is re-identified by matching one of its QI values.
- Section 5.1: identity and attribute disclosure of an adversary who knows all QI values of a
  target and matches on each QI with probability P_match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.verify.published import column_codes

TOL = 1e-9  # LP round-off allowed in the inequality checks
P_MATCH = (0.3, 0.5, 0.7, 0.9, 1.0)


def canonical(values: np.ndarray, numeric: bool) -> np.ndarray:
    """The string form in which published and stored values are compared."""
    if numeric:
        return np.array([repr(float(v)) for v in values], dtype=object)
    return np.array([str(v) for v in values], dtype=object)


def _frame(tables: pa.Table) -> pd.DataFrame:
    df: pd.DataFrame = tables.to_pandas()  # pyarrow is untyped
    df["attribute"] = df["attribute"].astype(str)
    return df


@dataclass
class Entries:
    """The stored tables' columns as numpy arrays, the attribute as a code into `names` (in order of
    first appearance): grouping on integer keys rather than on a string column (issue 43)."""

    attr: np.ndarray
    names: list[str]
    row: np.ndarray
    gid: np.ndarray
    code: np.ndarray
    prob: np.ndarray

    @staticmethod
    def of(tables: pa.Table) -> Entries:
        attr = tables.column("attribute").combine_chunks().cast(pa.string()).dictionary_encode()
        col = {name: tables.column(name).to_numpy() for name in ("row", "gid", "code", "prob")}
        codes = attr.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return Entries(codes, [str(v) for v in attr.dictionary.to_pylist()], **col)

    def key(self, *parts: np.ndarray) -> np.ndarray:
        """One int64 per distinct (attribute, *parts) (a mixed-radix number, digits from `span`)."""
        out = self.attr.copy()
        for part in parts:
            lo, size = span(part)
            out = out * size + (part.astype(np.int64) - lo)
        return out


def span(values: np.ndarray) -> tuple[int, int]:
    """(smallest value, number of values from it to the largest) of an int column."""
    return (int(values.min()), int(values.max()) - int(values.min()) + 1) if len(values) else (0, 1)


def check_distributions(tables: pa.Table) -> PrivacyResult:
    """Definition 1: every row of every table sums to 1 (entries are non-negative)."""
    e = Entries.of(tables)
    # pandas' grouped sum (compensated, in row order) on one integer key per (attribute, row)
    sums = pd.Series(e.prob).groupby(e.key(e.row), sort=False).sum()
    first = pd.Series(np.arange(len(e.row))).groupby(e.key(e.row), sort=False).first().to_numpy()
    err = float(np.abs(sums.to_numpy() - 1).max()) if len(sums) else 0.0
    neg = bool((e.prob < 0).any())
    at = first[int(np.argmax(np.abs(sums.to_numpy() - 1)))] if len(sums) else None
    worst = {} if at is None else {"attribute": e.names[e.attr[at]], "row": e.row[at]}
    # a tuple with entries on some QIs and none on another has no distribution there (sum 0)
    rows = np.unique(e.row)
    for a in pd.unique(e.attr[first]):
        present = np.unique(e.row[first[e.attr[first] == a]])
        if len(present) < len(rows):
            err, worst = 1.0, {"attribute": e.names[a], "row": np.setdiff1d(rows, present)[0]}
    return PrivacyResult(
        "random output tables are distributions",
        err,
        TOL,
        passed=(err <= 1e-6) and not neg,
        worst={k: str(v) for k, v in worst.items()},
    )


@dataclass
class ColumnStats:
    """Per (attribute, gid, code) with a positive entry: the largest entry, the column sum and the
    number of non-zero entries, in order of first appearance; `key` is Entries.key(gid, code)."""

    entries: Entries
    key: pd.Index
    first: np.ndarray  # an entry of each column
    max: np.ndarray
    sum: np.ndarray
    count: np.ndarray


def column_stats(tables: pa.Table) -> ColumnStats:
    """Per (attribute, gid, code): the largest entry, the column sum, and the non-zero count."""
    e = Entries.of(tables)
    keep = np.flatnonzero(e.prob > 0)
    key = e.key(e.gid, e.code)[keep]
    grouped = pd.Series(e.prob[keep]).groupby(key, sort=False)
    stats = grouped.agg(["max", "sum", "count"])
    first = keep[pd.Series(np.arange(len(keep))).groupby(key, sort=False).first().to_numpy()]
    return ColumnStats(
        e, stats.index, first, stats["max"].to_numpy(), stats["sum"].to_numpy(), stats["count"].to_numpy()
    )


def check_delta_probability(tables: pa.Table, delta: Fraction) -> PrivacyResult:
    """Definition 3 on every column of every stored table: max(p_j) / sum_i p_ij <= delta."""
    stats = column_stats(tables)
    ratio = stats.max / stats.sum
    excess = stats.max - float(delta) * stats.sum
    worst = {}
    if len(ratio):
        e, at = stats.entries, stats.first[int(np.argmax(ratio))]
        worst = {"attribute": e.names[e.attr[at]], "gid": str(e.gid[at]), "code": str(e.code[at])}
    return PrivacyResult(
        "delta-probability",
        float(ratio.max()) if len(ratio) else 0.0,
        str(Fraction(delta)),
        passed=bool((excess <= TOL).all()),
        worst=worst,
    )


def published_codes(published: pa.Table, value_codes: pa.Table, attributes: list[str]) -> np.ndarray:
    """Codes (n x d) of the published QI cells; -1 for a value the stored tables do not know.

    Each column's distinct cells are looked up once: the cells are coded by the shared
    `column_codes` (once per table, reused by the verifier, the utility figures and the
    disclosure), and only one cell per code is read back as a value."""
    vc = _frame(value_codes)
    out = np.empty((published.num_rows, len(attributes)), dtype=np.int64)
    for a, name in enumerate(attributes):
        col = published.column(name)
        numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
        cells = column_codes(published, name)
        first = np.zeros(int(cells.max()) + 1 if len(cells) else 0, dtype=np.int64)
        first[cells[::-1]] = np.arange(len(cells) - 1, -1, -1)  # a row holding each code
        keys = canonical(col.take(first).to_numpy(zero_copy_only=False), numeric)
        sub = vc[vc["attribute"] == name]
        lookup = pd.Series(sub["code"].to_numpy(), index=sub["value"].to_numpy())
        out[:, a] = lookup.reindex(keys).fillna(-1).to_numpy(dtype=np.int64)[cells]
    return out


def check_cover(
    tables: pa.Table, published: pa.Table, value_codes: pa.Table, delta: Fraction, attributes: list[str]
) -> PrivacyResult:
    """Corollary 3.2: the column of each published cell has >= ceil(1/delta) non-zero entries."""
    need = math.ceil(1 / Fraction(delta))
    stats = column_stats(tables)
    e = stats.entries
    # the group of each published row: that of its first stored entry (-1: a row with none)
    rows, at = np.unique(e.row, return_index=True)
    gid = np.full(published.num_rows, -1, dtype=np.int64)
    inside = rows < published.num_rows
    gid[rows[inside]] = e.gid[at[inside]]
    codes = published_codes(published, value_codes, attributes)
    (g_lo, g_n), (c_lo, c_n) = span(e.gid), span(e.code)
    worst_n, worst = None, {}
    for a, name in enumerate(attributes):
        g, c = gid - g_lo, codes[:, a] - c_lo
        # a row without entries, or a value the stored tables never list, is carried by no one
        known = (gid >= 0) & (codes[:, a] >= 0) & (g >= 0) & (g < g_n) & (c >= 0) & (c < c_n)
        attr = e.names.index(name) if name in e.names else -1
        key = (attr * g_n + g) * c_n + c
        hit = stats.key.get_indexer(key) if attr >= 0 else np.full(len(key), -1)
        hit = np.where(known, hit, -1)
        carried = np.where(hit >= 0, stats.count[hit], 0)
        i = int(np.argmin(carried))
        if worst_n is None or carried[i] < worst_n:
            worst_n, worst = int(carried[i]), {"attribute": name, "row": i, "gid": int(gid[i])}
    return PrivacyResult(
        "mutual cover (Corollary 3.2)", worst_n, need, passed=worst_n is not None and worst_n >= need, worst=worst
    )


# --- Example 1: re-identification by one matched QI value ------------------------------------


def example1_identity(tables: pa.Table, attribute: str, target_code: np.ndarray) -> np.ndarray:
    """p(t) = sum_i p(v_t = x, num(x) = i) / i for every tuple t (indexed by published row),
    where x = target_code[t] and num(x) counts the tuples of the table that output x.

    The outputs are independent draws, so with S the number of other tuples that output x,
    p(t) = p_tx * E[1 / (1 + S)] = p_tx * integral_0^1 prod_{i != t} (1 - p_ix + p_ix z) dz.
    The integrand is a polynomial of degree < N (N = carriers of x); Gauss-Legendre with
    ceil(N/2) nodes is exact for it (capped at 256 nodes: beyond, the integrand is ~exp(-mu(1-z))).
    """
    df = _frame(tables)
    df = df[(df["attribute"] == attribute) & (df["prob"] > 0)]
    rows, codes, probs = df["row"].to_numpy(), df["code"].to_numpy(), df["prob"].to_numpy()
    out = np.zeros(len(target_code))
    order = np.argsort(codes, kind="stable")
    rows, codes, probs = rows[order], codes[order], probs[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    for s, e in zip(starts, ends):
        r, p = rows[s:e], probs[s:e]
        own = target_code[r] == codes[s]
        if not own.any():
            continue
        z, w = np.polynomial.legendre.leggauss(max(1, min(256, math.ceil((e - s) / 2))))
        z, w = (z + 1) / 2, w / 2
        terms = 1 - p[:, None] + p[:, None] * z[None, :]  # (N, nodes), > 0 since z > 0
        log_all = np.log(terms).sum(axis=0)
        mine = np.exp(log_all[None, :] - np.log(terms[own])) @ w
        out[r[own]] = p[own] * mine
    return out


# --- Section 5.1: disclosure of an adversary who matches on random subsets of QIs ------------


def _compress(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense ids 0..U-1 of the pairs (a, b) of non-negative ints (a join key without sorting
    when the pair space is small, a hash factorization otherwise: no sort either)."""
    base = int(b.max()) + 1
    key = a.astype(np.int64) * base + b
    size = (int(a.max()) + 1) * base
    if size > 8 * len(key) + 1_000_000:
        ids: np.ndarray = pd.factorize(key)[0]
        return ids
    present = np.zeros(size, dtype=bool)
    present[key] = True
    dense: np.ndarray = (np.cumsum(present) - 1)[key]
    return dense


def subset_weights(p_match: float, d: int) -> dict[int, float]:
    """P(|S| = s) / C(d, s) for the adversary's random non-empty subset S of the d QIs: each QI
    is kept with probability p_match, redrawn while S is empty (as the authors' code does)."""
    nonempty = 1 - (1 - p_match) ** d
    return {s: p_match**s * (1 - p_match) ** (d - s) / nonempty for s in range(1, d + 1)}


def qi_subsets(d: int) -> list[tuple[int, ...]]:
    """Every non-empty subset of the d QIs, depth first ((0,), (0, 1), (0, 1, 2), ...): each
    subset comes after its prefixes, so its match key extends the key of the one before."""
    out: list[tuple[int, ...]] = []

    def visit(start: int, subset: tuple[int, ...]) -> None:
        for a in range(start, d):
            out.append(subset + (a,))
            visit(a + 1, subset + (a,))

    visit(0, ())
    return out


@dataclass
class DisclosureInput:
    """What the Section 5.1 figures read (see `disclosure`); one object, shared by every chunk."""

    orig: np.ndarray  # (n, d) the targets' true QI codes
    pub: np.ndarray  # (N, d) published QI codes, -1 never matches
    own_row: np.ndarray  # (n,) the published row that is each target's own record
    s_orig: np.ndarray
    s_pub: np.ndarray


def subset_means(inp: DisclosureInput, subsets: list[tuple[int, ...]]) -> list[tuple[float, float]]:
    """Mean identity and attribute disclosure over the targets for each subset (in the depth-first
    order of qi_subsets, or a run of it). A subset's key is built from the longest prefix this
    call already keyed, so a run of qi_subsets costs one compression per subset (plus the first
    subset's prefix); the figures of a subset never depend on the run it is in."""
    orig, pub = inp.orig, inp.pub
    n_pub = len(pub)
    stacked = np.vstack([pub, np.where(orig < 0, -2, orig)]) + 2  # >= 0; -1 and -2 never equal
    s_all = np.concatenate([inp.s_pub, inp.s_orig]).astype(np.int64)
    own_equal = inp.pub[inp.own_row] == orig  # (n, d): the own record agrees on that QI
    chain: list[tuple[tuple[int, ...], np.ndarray, np.ndarray]] = []  # (prefix, key, own)
    out = []
    for sub in subsets:
        while chain and chain[-1][0] != sub[: len(chain[-1][0])]:
            chain.pop()
        for a in sub[len(chain[-1][0]) if chain else 0 :]:
            key = chain[-1][1] if chain else np.zeros(len(stacked), np.int64)
            own = chain[-1][2] if chain else np.ones(len(orig), dtype=bool)
            dense = _compress(key, stacked[:, a]).astype(np.int32)  # ids < N + n; half the memory
            chain.append((chain[-1][0] + (a,) if chain else (a,), dense, own & own_equal[:, a]))
        _, k, own = chain[-1]
        kp, ko = k[:n_pub], k[n_pub:]
        counts = np.bincount(kp, minlength=k.max() + 1)[ko]
        same = _compress(k, s_all)
        same_counts = np.bincount(same[:n_pub], minlength=same.max() + 1)[same[n_pub:]]
        with np.errstate(divide="ignore", invalid="ignore"):
            ident = np.where(own, 1.0 / np.maximum(counts, 1), 0.0)
            attr = np.where(counts > 0, same_counts / np.maximum(counts, 1), 0.0)
        out.append((float(ident.mean()), float(attr.mean())))
    return out


def disclosure_figures(
    d: int, subsets: list[tuple[int, ...]], means: list[tuple[float, float]], p_matches: Sequence[float] = P_MATCH
) -> dict[float, tuple[float, float]]:
    """The per-subset means (in qi_subsets order) weighted by the adversary's subset law."""
    mean_id = {s: 0.0 for s in range(1, d + 1)}
    mean_at = {s: 0.0 for s in range(1, d + 1)}
    for sub, (ident, attr) in zip(subsets, means):
        mean_id[len(sub)] += ident
        mean_at[len(sub)] += attr
    out = {}
    for p in p_matches:
        w = subset_weights(p, d)
        out[p] = (sum(w[s] * mean_id[s] for s in w), sum(w[s] * mean_at[s] for s in w))
    return out


def check_qi_count(d: int, max_qi: int = 12) -> None:
    if d > max_qi:
        raise ValueError(f"{d} QIs: exact disclosure enumerates 2^d subsets (limit {max_qi})")


def disclosure(
    orig: np.ndarray,
    pub: np.ndarray,
    own_row: np.ndarray,
    s_orig: np.ndarray,
    s_pub: np.ndarray,
    p_matches: Sequence[float] = P_MATCH,
    max_qi: int = 12,
) -> dict[float, tuple[float, float]]:
    """Average identity and attribute disclosure per tuple, exact over the adversary's subsets.

    orig (n x d): the targets' true QI codes; pub (N x d): published QI codes (-1 never matches);
    own_row[t]: the published row that is t's own record; s_orig/s_pub: sensitive codes.
    For a subset S of QIs, M = published rows equal to t on S. Identity disclosure is 1/|M| when t's
    own record is in M, else 0; attribute disclosure is the share of M with t's sensitive value
    (0 when M is empty). The subsets are independent: `subset_means` over runs of qi_subsets
    (chunks, e.g. on Dask workers) and `disclosure_figures` give the same figures.
    """
    d = orig.shape[1]
    check_qi_count(d, max_qi)
    subsets = qi_subsets(d)
    means = subset_means(DisclosureInput(orig, pub, own_row, s_orig, s_pub), subsets)
    return disclosure_figures(d, subsets, means, p_matches)

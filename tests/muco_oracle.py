"""MuCo's privacy figures recomputed from the definitions, for small releases only.

Nothing here imports tasks.verify.delta_probability: the stored tables are read row by row into
plain dicts, published cells are compared with the stored value strings as values (numbers as
numbers), and the adversary's random subset of QIs is enumerated as every keep/drop pattern with
its probability, conditioned on keeping at least one QI. Exact where the inputs are (Fractions of
the stored floats); slow on purpose.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from fractions import Fraction

import pyarrow as pa

ROUND_OFF = 1e-9  # the LP round-off a stored entry may carry (the checks' stated tolerance)


def _entries(tables: pa.Table):
    """(attribute, gid, row, code, prob) of every stored entry, in plain Python."""
    cols = [tables.column(c).to_pylist() for c in ("attribute", "gid", "row", "code", "prob")]
    return [(str(a), int(g), int(r), int(c), float(p)) for a, g, r, c, p in zip(*cols)]


def columns(tables: pa.Table) -> dict[tuple[str, int, int], list[float]]:
    """Column j of table P of (attribute, group): the non-zero p_ij of its tuples."""
    out: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for a, g, _, c, p in _entries(tables):
        if p > 0:
            out[(a, g, c)].append(p)
    return out


def distributions(tables: pa.Table, n_rows: int, attributes: list[str]) -> tuple[float, bool]:
    """Definition 1: (largest |row sum - 1| over every published row of every QI's table, every
    such row sums to 1 within 1e-6 and no p < 0). A row with no entry sums to 0."""
    sums = {(a, r): Fraction(0) for a in attributes for r in range(n_rows)}
    negative = False
    for a, _, r, _, p in _entries(tables):
        sums[(a, r)] += Fraction(p)
        negative |= p < 0
    err = max((abs(float(s - 1)) for s in sums.values()), default=0.0)
    return err, err <= 1e-6 and not negative


def delta_probability(tables: pa.Table, delta: Fraction) -> tuple[float, bool]:
    """Definition 3: (largest max_i p_ij / sum_i p_ij over every column, every column has
    max <= delta * sum up to round-off)."""
    worst, ok = Fraction(0), True
    for ps in columns(tables).values():
        top, total = Fraction(max(ps)), sum(map(Fraction, ps))
        worst = max(worst, top / total)
        ok &= top - delta * total <= ROUND_OFF
    return float(worst), ok


def _same_value(published, stored: str, numeric: bool) -> bool:
    return float(published) == float(stored) if numeric else str(published) == stored


def cover(
    tables: pa.Table, published: pa.Table, value_codes: pa.Table, delta: Fraction, attributes: list[str]
) -> tuple[int, bool]:
    """Corollary 3.2: (fewest tuples of its group carrying a published cell's value with p > 0,
    that number >= ceil(1/delta)). A value no stored table knows is carried by nobody."""
    entries = _entries(tables)
    group_of = {r: g for _, g, r, _, _ in entries}
    carriers: dict[tuple[str, int, int], set[int]] = defaultdict(set)
    for a, g, r, c, p in entries:
        if p > 0:
            carriers[(a, g, c)].add(r)
    known = list(
        zip(
            value_codes.column("attribute").to_pylist(),
            value_codes.column("code").to_pylist(),
            value_codes.column("value").to_pylist(),
        )
    )
    fewest = None
    for a in attributes:
        col = published.column(a)
        numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
        for row, v in enumerate(col.to_pylist()):
            codes = [c for name, c, s in known if name == a and _same_value(v, s, numeric)]
            n = max((len(carriers[(a, group_of.get(row), c)]) for c in codes), default=0)
            fewest = n if fewest is None else min(fewest, n)
    need = math.ceil(1 / Fraction(delta))
    return fewest, fewest is not None and fewest >= need


# --- Section 5.1 ---------------------------------------------------------------------------------


def subset_probabilities(p_match: float, d: int) -> dict[tuple[int, ...], float]:
    """P(S) for every non-empty subset S of the d QIs: each QI is kept with probability p_match
    independently, and a draw that keeps none is redrawn (so P is conditioned on S non-empty)."""
    weight = {}
    for keep in itertools.product((False, True), repeat=d):
        if any(keep):
            weight[tuple(i for i in range(d) if keep[i])] = math.prod(p_match if k else 1 - p_match for k in keep)
    total = sum(weight.values())
    return {s: w / total for s, w in weight.items()}


def disclosure(orig, pub, own_row, s_orig, s_pub, p_match: float) -> tuple[float, float]:
    """Average identity and attribute disclosure over the targets, by enumeration.

    orig[t] and pub[r] are sequences of QI values (any comparable values); own_row[t] is the
    published row of t's own record. For each subset S: M = the published rows equal to t on S;
    identity = 1/|M| if t's own row is in M, attribute = share of M with t's sensitive value."""
    n, d = len(orig), len(orig[0])
    ident = attr = 0.0
    for s, w in subset_probabilities(p_match, d).items():
        for t in range(n):
            m = [r for r in range(len(pub)) if all(pub[r][a] == orig[t][a] for a in s)]
            if not m:
                continue
            if own_row[t] in m:
                ident += w / len(m)
            attr += w * sum(s_pub[r] == s_orig[t] for r in m) / len(m)
    return ident / n, attr / n


def release_disclosure(data, release, p_match: float) -> tuple[float, float]:
    """`disclosure` for a release: the targets are the original rows (data.frame), the adversary
    reads the published table; own rows come from the private source_row."""
    pub = release.tables["table"]
    src = release.private["source_row"].column("source_row").to_pylist()
    own = [0] * len(src)
    for published_row, source in enumerate(src):
        own[source] = published_row
    shown = [list(r) for r in zip(*(pub.column(a).to_pylist() for a in data.qi_names))]
    sens = data.spec.dataset.sensitive
    return disclosure(
        data.frame[data.qi_names].to_numpy(dtype=object).tolist(),
        shown,
        own,
        data.frame[sens].tolist(),
        pub.column(sens).to_pylist(),
        p_match,
    )


def example1(tables: pa.Table, attribute: str, target_value) -> list[float]:
    """p(t) = E[1{v_t = x} / num(x)] per published row t with x = target_value[t]: the other
    tuples' outputs are independent, so the number S of others that output x has the
    Poisson-binomial law, built by convolution; p(t) = p_tx * sum_k P(S = k) / (k + 1)."""
    rows: dict[int, dict[int, float]] = defaultdict(dict)
    for a, _, r, c, p in _entries(tables):
        if a == attribute:
            rows[r][c] = p
    out = []
    for t in range(len(target_value)):
        x = target_value[t]
        law = [1.0]  # P(S = k)
        for r, dist in rows.items():
            q = dist.get(x, 0.0) if r != t else 0.0
            law = [a * (1 - q) + b * q for a, b in zip(law + [0.0], [0.0] + law)]
        out.append(rows[t].get(x, 0.0) * sum(pk / (k + 1) for k, pk in enumerate(law)))
    return out

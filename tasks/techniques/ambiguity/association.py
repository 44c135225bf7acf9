"""beta-association of Ambiguity and PriView releases, read from the published tables only.

Ambiguity (Theorem 2): Pr((t, s) in T | t in T) = c / |G|, exact under the possible worlds of
tasks/verify/presence.py (the sensitive multiset is assigned uniformly to the group's tuples).

PriView: Theorem 6 claims c / |G| as well, but ST publishes QI' next to S, so the adversary who
knows t's QI' value q' only has to choose among the n units of ST[G] that carry q'. Under the
labeled rule, with a repeated m times in AT[G]:
    Pr((t, s) | t) = (1 - C(|G|-c, m)/C(|G|, m)) / (1 - C(|G|-n, m)/C(|G|, m))   (= c/n for m = 1)
which is 1 whenever q' appears with a single sensitive value in the group (Fig. 9: Alan's zip
code 11000 appears only with diabetes). The verifier reports the largest of Theorem 6, the
labeled count and, for tiny groups where it differs, the distinct-relations count.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.techniques.ambiguity.group_chunks import Worst, combine_worst
from privpub.tasks.techniques.ambiguity.presence import (
    DISTINCT_WORLDS_MAX_GROUP,
    distinct_world_probabilities,
    frac_max,
    gid_values,
    group_tables,
    labeled_association,
    priview_groups,
    worst_and_check,
)


def ambiguity_association(st: pa.Table, sensitive: str, beta: Fraction) -> PrivacyResult:
    """Theorem 2 per ST row: c / |G|; the worst row names its group and sensitive value."""
    return combine_worst([ambiguity_association_part(st, sensitive, beta)])


def ambiguity_association_part(
    st: pa.Table, sensitive: str, beta: Fraction, st_rows: np.ndarray | None = None
) -> Worst:
    """beta-association of the groups ST holds; st_rows: each row's place in the whole ST
    (default: ST is the whole table)."""
    gids = gid_values(st)
    counts = st.column("count").to_numpy().astype(np.int64)
    uniq, inv = np.unique(gids, return_inverse=True)
    size = np.bincount(inv, weights=counts, minlength=len(uniq)).astype(np.int64)
    num, den = counts.astype(object), size[inv].astype(object)
    i, worst, failing = worst_and_check(num, den, beta)
    detail: dict[str, Any] = {}
    if i >= 0:
        detail.update(
            gid=int(gids[i]),
            sensitive_value=_py(st.column(sensitive)[i]),
            count=int(counts[i]),
            group_size=int(size[inv[i]]),
            probability=float(worst),
        )
    return Worst(
        "beta-association",
        beta,
        "failing_rows",
        worst,
        _place(i, st_rows),
        {"groups": int(len(uniq)), "failing_rows": failing},
        detail,
    )


def priview_association(at: pa.Table, st: pa.Table, st_qi: str, sensitive: str, beta: Fraction) -> PrivacyResult:
    return combine_worst([priview_association_part(at, st, st_qi, sensitive, beta)])


def priview_association_part(
    at: pa.Table, st: pa.Table, st_qi: str, sensitive: str, beta: Fraction, st_rows: np.ndarray | None = None
) -> Worst:
    """beta-association of the groups AT and ST hold; st_rows as in ambiguity_association_part."""
    g = priview_groups(at, st, st_qi, sensitive)
    grp = g.st_group
    th_num, th_den = g.st_c.astype(object), g.size[grp].astype(object)  # Theorem 6: c/|G|
    lab_num, lab_den = g.st_c.astype(object), g.st_n.astype(object)  # labeled, m = 1: c/n
    # rows of groups with a repeated AT row: the worst multiplicity decides (the conditional
    # grows with m), so evaluate every multiplicity that occurs up to m_max
    for r in np.flatnonzero(g.m_max[grp] > 1):
        gi = grp[r]
        v = max(
            labeled_association(int(g.size[gi]), int(g.st_c[r]), int(g.st_n[r]), m)
            for m in range(1, int(g.m_max[gi]) + 1)
        )
        lab_num[r], lab_den[r] = v.numerator, v.denominator
    num, den = frac_max((th_num, th_den), (lab_num, lab_den))
    for gi in np.flatnonzero((g.m_max > 1) & (g.c_max > 1)):
        rows = np.flatnonzero(grp == gi)
        if g.size[gi] <= DISTINCT_WORLDS_MAX_GROUP:
            _, a = distinct_world_probabilities(*group_tables(at, st, int(g.gid[gi])), st_qi, sensitive)
        else:
            a = Fraction(1)  # too large to count: report the unknown probability as certain
        r = rows[0]
        best = max(Fraction(int(num[r]), int(den[r])), a)
        num[r], den[r] = best.numerator, best.denominator
    i, worst, failing = worst_and_check(num, den, beta)
    too_small = th_num * den < num * th_den
    counts = {
        "groups": int(len(g.gid)),
        "failing_rows": failing,
        "rows_where_theorem6_is_too_small": int(np.count_nonzero(too_small)),
    }
    detail: dict[str, Any] = {}
    if i >= 0:
        detail.update(
            gid=int(g.gid[grp[i]]),
            qi_value=_py(st.column(st_qi)[i]),
            sensitive_value=_py(st.column(sensitive)[i]),
            count=int(g.st_c[i]),
            qi_units=int(g.st_n[i]),
            group_size=int(g.size[grp[i]]),
            theorem6=str(Fraction(int(th_num[i]), int(th_den[i]))),
            probability=float(worst),
        )
    return Worst("beta-association", beta, "failing_rows", worst, _place(i, st_rows), counts, detail)


def _place(i: int, rows: np.ndarray | None) -> int | None:
    """Where row i of a chunk sits in the whole table (None: the chunk has no row)."""
    if i < 0:
        return None
    return int(rows[i]) if rows is not None else i


def _py(scalar: pa.Scalar) -> Any:
    return scalar.as_py()

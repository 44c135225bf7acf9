"""A correction (issue 31): the x[cell, value] system of crossing intervals is not totally
unimodular, so "one QI of intervals" is not a polynomial class by a total-unimodularity argument.

Cells c1 < c3 < c2 on one QI, released intervals {c1, c3} and {c3, c2}, three values. The closed
world adds one row per value (its public total over all cells). A 5 x 5 submatrix of the system
has determinant -2; in the open world (no total rows) this small system happens to stay totally
unimodular, so the counterexample needs the public multiset.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

CELLS = ["c1", "c3", "c2"]  # in QI order
VALUES = [0, 1, 2]
VARIABLES = [(c, v) for c in CELLS for v in VALUES]  # x[cell, value]
FACTS = {"F1": {"c1", "c3"}, "F2": {"c3", "c2"}}


def system(closed: bool) -> tuple[np.ndarray, list[str]]:
    rows, names = [], []
    for c in CELLS:  # every cell is filled
        rows.append([int(vc == c) for vc, _ in VARIABLES])
        names.append(f"cell {c}")
    if closed:  # the public multiset
        for v in VALUES:
            rows.append([int(vv == v) for _, vv in VARIABLES])
            names.append(f"total {v}")
    for name, members in FACTS.items():  # each released fact and value
        for v in VALUES:
            rows.append([int(vc in members and vv == v) for vc, vv in VARIABLES])
            names.append(f"{name} {v}")
    return np.array(rows), names


def exact_det(m: np.ndarray) -> int:
    """The determinant by Gaussian elimination over the rationals (no rounding)."""
    a = [[Fraction(int(x)) for x in row] for row in m]
    n, det = len(a), Fraction(1)
    for i in range(n):
        pivot = next((r for r in range(i, n) if a[r][i] != 0), None)
        if pivot is None:
            return 0
        if pivot != i:
            a[i], a[pivot] = a[pivot], a[i]
            det = -det
        det *= a[i][i]
        for r in range(i + 1, n):
            f = a[r][i] / a[i][i]
            a[r] = [x - f * y for x, y in zip(a[r], a[i])]
    assert det.denominator == 1
    return int(det)


def test_the_crossing_intervals_submatrix_has_determinant_minus_two():
    a, names = system(closed=True)
    rows = [names.index(n) for n in ["cell c1", "cell c2", "total 0", "F1 1", "F2 1"]]
    cols = [VARIABLES.index(v) for v in [("c1", 0), ("c1", 1), ("c3", 1), ("c2", 0), ("c2", 1)]]
    sub = a[np.ix_(rows, cols)]
    assert sub.tolist() == [[1, 1, 0, 0, 0], [0, 0, 0, 1, 1], [1, 0, 0, 1, 0], [0, 1, 1, 0, 0], [0, 0, 1, 0, 1]]
    assert exact_det(sub) == -2
    assert round(np.linalg.det(sub)) == -2  # the numerical value agrees


def test_every_square_submatrix_up_to_five_by_five():
    """Exhaustively: the closed-world system has a square submatrix of determinant -2 (not totally
    unimodular); the open-world one has only -1, 0 and 1 up to size 5."""

    def dets(a: np.ndarray, k: int) -> set[int]:
        """All k x k minors at once (0/1 entries, k <= 5: small integers, float error far below 1/2)."""
        rows = np.array(list(itertools.combinations(range(a.shape[0]), k)))
        cols = np.array(list(itertools.combinations(range(a.shape[1]), k)))
        subs = a[rows[:, None, :, None], cols[None, :, None, :]].reshape(-1, k, k)
        return set(np.rint(np.linalg.det(subs)).astype(int).tolist())

    closed, _ = system(closed=True)
    assert -2 in dets(closed, 5) and max(abs(d) for d in dets(closed, 5)) == 2
    opened, _ = system(closed=False)
    assert all(dets(opened, k) <= {-1, 0, 1} for k in range(1, 6))

"""Bottom-up groups that meet every member's required ratio for every protected value they hold.

Points are the real tuples plus the virtual members (registered people absent from this release,
notes "Virtual members"). They are laid out along a Z-order curve over their QI ranks, so that
neighbours on the curve are QI-near, and groups are grown bottom-up along it: a group starts at
the first unassigned point and takes its next neighbours until

    |G| >= ceil(n_G(s) * max_{o in G} R(o, s))   for every protected value s in G,   |G| >= min_size

where R(o, s) is the ratio the strategy requires for the pair (the same `first` ratio for pairs
with no history). Adding a point never lowers the right-hand side, so the smallest such group is
found by a fixed-point iteration on its end: jump to the size the current window requires until
the window is large enough (a few vectorised steps per group, no loop over rows).

When no window within `cap` points can meet the requirements, the values that cannot be met are
suppressed (the sensitive value of those tuples is withheld, Section 6.3) and the group is formed
without them. A trailing remainder that cannot stand alone joins the previous group.
Requirements are float upper bounds of the exact ratios; the technique re-checks exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def zorder(coords: np.ndarray) -> np.ndarray:
    """A permutation of the rows of `coords` (n, d) along a Z-order curve over per-column ranks."""
    n, dims = coords.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    bits = max(1, min(31, 63 // max(dims, 1)))
    key = np.zeros(n, dtype=np.uint64)
    scaled = []
    for j in range(dims):
        _, rank = np.unique(coords[:, j], return_inverse=True)
        top = max(int(rank.max()), 1)
        scaled.append(np.floor(rank / top * ((1 << bits) - 1)).astype(np.uint64))
    for b in range(bits - 1, -1, -1):
        for j in range(dims):
            key = (key << np.uint64(1)) | ((scaled[j] >> np.uint64(b)) & np.uint64(1))
    return np.argsort(key, kind="stable")


@dataclass
class Requirements:
    """What the grouping must satisfy, in curve order.

    value: protected value code per point, -1 for none (non-transient, virtual, suppressed)
    real:  whether the point is a real tuple (virtual members count toward |G| only)
    first: the ratio for pairs without history (float, an upper bound of the exact one)
    pos, code, ratio: the pairs whose ratio differs from `first`, sorted by pos
    """

    value: np.ndarray
    real: np.ndarray
    first: float
    pos: np.ndarray
    code: np.ndarray
    ratio: np.ndarray
    min_size: int
    cap: int


@dataclass
class Groups:
    group: np.ndarray  # per point, in curve order; -1 = unused virtual member
    n_groups: int
    suppressed: np.ndarray  # per point: protected value withheld


def _needs(req: Requirements, value: np.ndarray, a: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    """Protected codes in window [a, e) and the size each one requires."""
    v = value[a:e]
    v = v[v >= 0]
    if not len(v):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    codes, counts = np.unique(v, return_counts=True)
    worst = np.full(len(codes), req.first)
    lo, hi = np.searchsorted(req.pos, [a, e])
    if hi > lo:
        ec = req.code[lo:hi]
        at = np.minimum(np.searchsorted(codes, ec), len(codes) - 1)
        hit = codes[at] == ec
        np.maximum.at(worst, at[hit], req.ratio[lo:hi][hit])
    return codes, np.ceil(counts * worst)


def _required(req: Requirements, value: np.ndarray, a: int, e: int) -> float:
    _, need = _needs(req, value, a, e)
    return max(float(req.min_size), float(need.max()) if len(need) else 0.0)


def _smallest_end(req: Requirements, value: np.ndarray, a: int, limit: int) -> int | None:
    """The smallest e <= limit with [a, e) feasible; None if there is none."""
    e = min(a + req.min_size, limit)
    while True:
        need = _required(req, value, a, e)
        if need <= e - a:
            return e
        if a + need > limit:
            return None
        e = a + int(need)


def _suppress(req: Requirements, value: np.ndarray, suppressed: np.ndarray, a: int, limit: int) -> None:
    """Withhold, within [a, limit), the protected values no window up to `limit` can hold."""
    codes, need = _needs(req, value, a, limit)
    bad = codes[need > limit - a]
    hit = np.flatnonzero(np.isin(value[a:limit], bad)) + a
    value[hit] = -1
    suppressed[hit] = True


def grow_groups(req: Requirements) -> Groups:
    """Partition the points (in curve order) into contiguous groups meeting `req`."""
    n = len(req.value)
    value = req.value.copy()
    suppressed = np.zeros(n, dtype=bool)
    starts: list[int] = []
    a = 0
    while a < n:
        limit = min(a + req.cap, n)
        e = _smallest_end(req, value, a, limit)
        if e is None and limit == n:
            # the remainder joins as many previous groups as it needs (within the cap)
            merged = len(starts)
            while merged and n - starts[merged - 1] <= req.cap:
                merged -= 1
                if _required(req, value, starts[merged], n) <= n - starts[merged]:
                    a, e = starts[merged], n
                    del starts[merged:]
                    break
        if e is None:
            limit = min(a + req.cap, n)
            before = value.copy()
            _suppress(req, value, suppressed, a, limit)
            end = _smallest_end(req, value, a, limit)
            e = limit if end is None else end
            # values past the group's end are judged again with their own group
            value[e:limit] = before[e:limit]
            suppressed[e:limit] = False
        starts.append(a)
        a = e
    bounds = np.array(starts + [n])
    group = np.repeat(np.arange(len(starts)), np.diff(bounds))
    # groups of virtual members only are not published
    has_real = np.bincount(group, weights=req.real, minlength=len(starts)) > 0
    renumber = np.cumsum(has_real) - 1
    group = np.where(has_real[group], renumber[group], -1)
    return Groups(group=group, n_groups=int(has_real.sum()), suppressed=suppressed)

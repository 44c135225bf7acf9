"""What an adversary who holds every release of a series learns about each person, in arrays.

The model (docs/series.md): the adversary knows each target's quasi-identifiers and in which
releases the target is, so in each release the target's record is one of its group's records.
A permanent value is the person's in every release they are in; transient values (named in
`[series] transient`) may change from one release to the next. So, in release r, the values the
adversary cannot exclude for the target are

    cand_r = {permanent v held in the target's group in every one of its releases}
           ∪ (the transient values of its group in r, if every one of its groups holds one)

and the records of release r that can be the target's are the records of its group holding a
value of cand_r. Per person this needs only a summary of the earlier releases: the permanent
values left, each with the fewest records that held it in one of the person's groups, and the
fewest transient values (and records) of one of its groups. People who share their summary and
their new group share the new summary, so summaries are kept as numbered *sets* that many
people point at (`Sets`), not per person.

Several rows per person (`[dataset] rows_per_person = "many"`): a record is then a (person,
value) pair, a count the people holding a value, and a group's *excess* its pairs beyond one per
person (0 when every person has one value). The people holding one of a set W of values are at
least W's pairs less the excess (a person counted twice holds two pairs), which keeps the k
figure (`Sets.identity`) a lower bound in people.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def expand(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges [starts[i], ends[i]): (i repeated once per element, the element positions)."""
    lengths = (ends - starts).astype(np.int64)
    owner = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)
    first = np.cumsum(lengths) - lengths
    pos = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(first, lengths) + np.repeat(starts, lengths)
    return owner, pos


# keys below this bound (or 4x their number) are made distinct by one bincount, not a sort
_DENSE_KEYS = 1 << 22


def distinct_keys(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(keys, return_inverse=True, return_counts=True) of non-negative int64 keys below
    `bound`: when the bound is small, one bincount and a cumulative sum (linear, where a sort
    of a million keys costs ten times more); the same arrays either way."""
    if bound > max(_DENSE_KEYS, 4 * len(keys)):
        return np.unique(keys, return_inverse=True, return_counts=True)
    counts = np.bincount(keys, minlength=bound)
    present = counts > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[keys], counts[present]


@dataclass
class GroupCounts:
    """Records per (group, value) of one release, and each group's transient summary."""

    key: np.ndarray  # sorted int64: group * n_values + value
    count: np.ndarray  # records holding that value in that group
    n_groups: int
    n_values: int
    t_distinct: np.ndarray  # (n_groups,) distinct transient values in the group
    t_records: np.ndarray  # (n_groups,) records holding a transient value
    # (n_groups,) the group's (person, value) pairs beyond one per person: 0 unless people have
    # several values (rows_per_person = "many")
    excess: np.ndarray | None = None

    @classmethod
    def of(
        cls,
        group: np.ndarray,
        value: np.ndarray,
        n_groups: int,
        transient: np.ndarray,
        person: np.ndarray | None = None,
    ) -> GroupCounts:
        """group: per record (-1: not published); value: per record, a code into `transient`
        (a bool per value code). person: each record's person when the records are the distinct
        (person, value) pairs of people with several rows: the counts are then people."""
        n_values = len(transient)
        ok = group >= 0
        key, _, count = distinct_keys(group[ok].astype(np.int64) * n_values + value[ok], n_groups * n_values)
        excess = None
        if person is not None:
            width = int(person.max()) + 1 if len(person) else 1
            people = np.unique(group[ok].astype(np.int64) * width + person[ok]) // width
            excess = np.bincount(group[ok], minlength=n_groups) - np.bincount(people, minlength=n_groups)
        return cls.of_counts(key, count, n_groups, transient, excess)

    @classmethod
    def of_counts(
        cls, key: np.ndarray, count: np.ndarray, n_groups: int, transient: np.ndarray, excess: np.ndarray | None = None
    ) -> GroupCounts:
        """From records per key (group * n_values + value), keys sorted and distinct; excess per
        group (None: none)."""
        n_values = len(transient)
        g, v = key // n_values, key % n_values
        t = transient[v]
        t_distinct = np.bincount(g[t], minlength=n_groups).astype(np.int64)
        t_records = np.bincount(g[t], weights=count[t], minlength=n_groups).astype(np.int64)
        if excess is not None:
            excess = excess.astype(np.int64)
        return cls(key.astype(np.int64), count.astype(np.int64), n_groups, n_values, t_distinct, t_records, excess)

    def lookup(self, group: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Records holding `value` in `group` (0 when none; value -1 = not in this release)."""
        if not len(self.key):
            return np.zeros(len(group), np.int64)
        k = group.astype(np.int64) * self.n_values + value
        i = np.minimum(np.searchsorted(self.key, k), len(self.key) - 1)
        return np.where((value >= 0) & (self.key[i] == k), self.count[i], 0)


@dataclass
class Sets:
    """Numbered summaries: set i holds the permanent values value[ptr[i]:ptr[i+1]] (sorted), each
    with minc = the fewest records that held it in one release, and the transient summary."""

    ptr: np.ndarray  # (m + 1,) int64
    value: np.ndarray  # int64 value codes
    minc: np.ndarray  # int64
    # fewest distinct transient values in one group: 0 as soon as one of the person's groups
    # held none (then the person cannot have been transient throughout)
    min_t: np.ndarray  # (m,) int64
    min_tc: np.ndarray  # (m,) int64: fewest records with a transient value in one group
    # (several rows per person) fewest of (transient pairs - excess) is min_tc, and the largest
    # excess of one of the person's groups is max_e: people, not pairs, in the k figure. None:
    # 0 for every set (one record per person)
    max_e: np.ndarray | None = field(default=None)

    def excess(self) -> np.ndarray:
        """(m,) the largest excess of one of the person's groups (0: one record per person)."""
        return np.zeros(self.size, np.int64) if self.max_e is None else self.max_e

    @property
    def size(self) -> int:
        return len(self.min_t)

    def owner(self) -> np.ndarray:
        return np.repeat(np.arange(self.size, dtype=np.int64), np.diff(self.ptr))

    def candidates(self) -> np.ndarray:
        """Per set: the fewest values the adversary cannot exclude in one of the releases."""
        result: np.ndarray = np.diff(self.ptr) + self.min_t
        return result

    def identity(self) -> np.ndarray:
        """Per set: records that can be the person's, a lower bound over its releases (exact in
        the newest release when it is the person's first). With several rows per person, people:
        while every group held a transient value, the candidates' pairs less each group's excess
        (min_tc has it taken off); once one held none (min_t = 0, the transient values are no
        candidates), the permanent candidates' pairs less the largest excess; or the most people
        holding one candidate value, if more (and never below 0). With one record per person both
        are Σ minc + min_tc (min_tc is 0 once a group held no transient value)."""
        per = np.bincount(self.owner(), weights=self.minc, minlength=self.size).astype(np.int64)
        if self.max_e is None:
            result: np.ndarray = per + self.min_tc
            return result
        pairs_less_excess = per + np.where(self.min_t > 0, self.min_tc, -self.max_e)
        # the holders of one candidate value are people who can be the person too (in every
        # release at least its minc), and there are never fewer than none
        one_value = np.zeros(self.size, np.int64)
        has = np.diff(self.ptr) > 0
        if has.any():
            one_value[has] = np.maximum.reduceat(self.minc, self.ptr[:-1][has])
        return np.maximum(np.maximum(pairs_less_excess, one_value), 0)

    @classmethod
    def empty(cls, several_rows: bool = False) -> Sets:
        z = np.zeros(0, np.int64)
        return cls(np.zeros(1, np.int64), z, z, z, z, z if several_rows else None)


def lex_order(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """np.lexsort((secondary, primary)), without sorting pairs already in order (a series' first
    release: its people come group by group, each group's values in order): the same order."""
    step = np.diff(primary)
    if ((step > 0) | ((step == 0) & (np.diff(secondary) >= 0))).all():
        return np.arange(len(primary), dtype=np.intp)
    return np.lexsort((secondary, primary))


def compose(
    prior: Sets, prior_set: np.ndarray, group: np.ndarray, counts: GroupCounts, permanent: np.ndarray
) -> tuple[Sets, np.ndarray]:
    """One more release: every published person's summary combined with its new group.

    prior_set: per row, the person's set in `prior` (-1: first release of this person);
    group: per row, its group in the new release (-1: not published, summary unchanged);
    permanent: bool per value code. Returns the new sets and each row's new set (-1: unpublished).
    """
    rows = np.flatnonzero(group >= 0)
    ng = counts.n_groups
    combo_key = (prior_set[rows].astype(np.int64) + 1) * ng + group[rows]
    uk, inv, _ = distinct_keys(combo_key, (prior.size + 1) * ng)
    old, g = uk // ng - 1, uk % ng
    is_new = old < 0

    # the group's permanent values, for people seen for the first time
    kg, kv = counts.key // counts.n_values, counts.key % counts.n_values
    keep = permanent[kv]
    pg, pv, pc = kg[keep], kv[keep], counts.count[keep]
    gptr = np.searchsorted(pg, np.arange(ng + 1))
    fresh = np.flatnonzero(is_new)
    o1, p1 = expand(gptr[g[fresh]], gptr[g[fresh] + 1])
    c1, v1, m1 = fresh[o1], pv[p1], pc[p1]

    # returning people: their permanent values left, if the new group holds them too
    back = np.flatnonzero(~is_new)
    o2, p2 = expand(prior.ptr[old[back]], prior.ptr[old[back] + 1])
    c2, v2 = back[o2], prior.value[p2]
    here = counts.lookup(g[c2], v2)
    held = here > 0
    c2, v2, m2 = c2[held], v2[held], np.minimum(prior.minc[p2], here)[held]

    combo = np.concatenate([c1, c2])
    order = lex_order(combo, np.concatenate([v1, v2]))
    ptr = np.searchsorted(combo[order], np.arange(len(uk) + 1)).astype(np.int64)
    t_here, tc_here = counts.t_distinct[g], counts.t_records[g]
    several = counts.excess is not None or prior.max_e is not None
    e_here = (counts.excess[g] if counts.excess is not None else np.zeros(len(g), np.int64)) if several else None
    if e_here is not None:
        tc_here = tc_here - e_here
    max_e = e_here
    if prior.size:  # a returning person keeps the fewest over its releases
        prev = np.clip(old, 0, None)
        min_t = np.where(is_new, t_here, np.minimum(prior.min_t[prev], t_here))
        min_tc = np.where(is_new, tc_here, np.minimum(prior.min_tc[prev], tc_here))
        if e_here is not None:
            max_e = np.where(is_new, e_here, np.maximum(prior.excess()[prev], e_here))
    else:
        min_t, min_tc = t_here, tc_here
    sets = Sets(
        ptr,
        np.concatenate([v1, v2])[order],
        np.concatenate([m1, m2])[order],
        min_t.astype(np.int64),
        min_tc.astype(np.int64),
        None if max_e is None else max_e.astype(np.int64),
    )
    row_set = np.full(len(group), -1, np.int64)
    row_set[rows] = inv
    return sets, row_set


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-spread 64-bit hash of each element (wrapping arithmetic)."""
    x = x.astype(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    result: np.ndarray = x ^ (x >> np.uint64(31))
    return result


def shared(sets: Sets) -> tuple[Sets, np.ndarray]:
    """The distinct sets, and for each set its distinct one. People with equal summaries then
    share one stored set (after a few releases most people would otherwise have their own).
    Found by a 64-bit hash of each set's content and then checked element by element, so the
    result is exact; should two different sets ever share a hash, nothing is merged."""
    if sets.size == 0:
        return sets, np.zeros(0, np.int64)
    lens = np.diff(sets.ptr)
    owner = sets.owner()
    pos = np.arange(len(sets.value), dtype=np.int64) - sets.ptr[owner]
    with np.errstate(over="ignore"):
        element = _mix(_mix(sets.value + 1) + _mix(sets.minc) * np.uint64(3) + _mix(pos) * np.uint64(5))
        body = np.zeros(sets.size, np.uint64)
        np.add.at(body, owner, element)  # wrapping sum: order-free, positions are in the elements
        h = _mix(
            body + _mix(lens) * np.uint64(7) + _mix(sets.min_t) * np.uint64(11) + _mix(sets.min_tc) * np.uint64(13)
        )
        if sets.max_e is not None:
            h = _mix(h + _mix(sets.max_e) * np.uint64(17))
    _, first, index = np.unique(h, return_index=True, return_inverse=True)
    rep = first[index]  # each set's representative
    same = (lens == lens[rep]) & (sets.min_t == sets.min_t[rep]) & (sets.min_tc == sets.min_tc[rep])
    if sets.max_e is not None:
        same &= sets.max_e == sets.max_e[rep]
    if same.all():
        there = sets.ptr[rep[owner]] + pos
        same = (sets.value == sets.value[there]).all() and (sets.minc == sets.minc[there]).all()
    if not same:
        return sets, np.arange(sets.size, dtype=np.int64)
    keep = np.sort(first)
    renumber = np.empty(sets.size, np.int64)
    renumber[keep] = np.arange(len(keep))
    o, p = expand(sets.ptr[keep], sets.ptr[keep + 1])
    out = Sets(
        np.concatenate([[0], np.cumsum(lens[keep])]).astype(np.int64),
        sets.value[p],
        sets.minc[p],
        sets.min_t[keep],
        sets.min_tc[keep],
        None if sets.max_e is None else sets.max_e[keep],
    )
    return out, renumber[rep]

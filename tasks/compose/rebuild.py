"""The composition figure of a committed release, rebuilt from the stored groups of every release
of its series up to it (`compose_membership`), for `privpub verify`: it does not trust the
summaries the publish read, it replays the series."""
from __future__ import annotations

import json

import numpy as np

from tasks.compose.algebra import GroupCounts, Sets, compose, shared


def _concat(a: Sets, b: Sets) -> Sets:
    return Sets(np.concatenate([a.ptr, b.ptr[1:] + a.ptr[-1]]), np.concatenate([a.value, b.value]),
                np.concatenate([a.minc, b.minc]), np.concatenate([a.min_t, b.min_t]),
                np.concatenate([a.min_tc, b.min_tc]))


def replay(store, series: str, sequence: int, by_values: bool, threshold: int) -> tuple[int, int, int] | None:
    """(fewest figure, people below the threshold, releases replayed) for the people of release
    `sequence`, or None when the series has no stored groups. by_values: candidate values (the l
    figure), else records (the k figure)."""
    def fetch(con):
        head = con.execute("SELECT sid, transient FROM compose_head WHERE series = ?", [series]).fetchone()
        if head is None:
            return None
        values = con.execute("SELECT vkey, value FROM compose_values WHERE sid = ? ORDER BY vkey",
                             [head[0]]).fetchall()
        rows = con.execute("SELECT release, pkey, gid, vkey FROM compose_membership WHERE sid = ? AND "
                           "release <= ? ORDER BY release", [head[0], sequence]).fetchnumpy()
        return head, values, rows

    got = store.query(fetch)
    if got is None or not len(got[2]["release"]):
        return None
    (sid, transient), values, rows = got
    transient_mask = np.isin(np.array([v for _, v in values], dtype=object), json.loads(transient))
    release, pkey, gid, vkey = (np.asarray(rows[c], np.int64) for c in ("release", "pkey", "gid", "vkey"))
    set_of = np.full(int(pkey.max()) + 1, -1, np.int64)
    sets = Sets.empty()
    bounds = np.flatnonzero(np.diff(release)) + 1
    for part in np.split(np.arange(len(release)), bounds):
        g, p = gid[part], pkey[part]
        counts = GroupCounts.of(g, vkey[part], int(g.max()) + 1, transient_mask)
        new, row_set = compose(sets, set_of[p], g, counts, ~transient_mask)
        figure = new.candidates() if by_values else new.identity()
        set_of[p] = row_set + sets.size
        sets, index = shared(_concat(sets, new))  # absent people keep their sets
        set_of = np.where(set_of >= 0, index[np.clip(set_of, 0, None)], -1)
    fig = figure[row_set]
    return int(fig.min()), int((fig < threshold).sum()), len(bounds) + 1

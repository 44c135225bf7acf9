"""The per-group half of a serial release's check, in runs of group ids (verify chunks on the task
runner): the localized guarantee n(s)/|G| <= 1/l of every group and protected value, and the
release's history rows (every real member x every protected value of its group), both read from
the published `table` and `groups` and the membership (person, gid).

The other half, the global guarantee, needs the series' state (each person-value pair's earlier
releases, from the store) and stays in the flow (tasks/verify/serial_guarantee.py). A run holds
about `chunk_rows` published rows: their gid and sensitive value, the `groups` rows and the
members of its group ids. The combine puts the history rows back in membership order and keeps
the localized figure of the run whose worst group comes first, so every figure and every worst
case is that of one pass over the whole table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from privpub.tasks.core.compact_table import CompactTable
from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.techniques.serial import statistics as st

_POS = "__member"


@dataclass
class GroupRun:
    """A run of group ids [base, next run's base): the published rows, groups and members in it."""

    base: int
    table: CompactTable  # gid, sensitive value
    groups: CompactTable  # gid, size
    members: CompactTable  # person, gid
    positions: np.ndarray  # each member's row in the membership table (increasing)
    l: int
    sensitive: str
    transient: list[Any] | None
    release: int


def _gids(table: pa.Table) -> np.ndarray:
    return np.asarray(table.column("gid").to_numpy(zero_copy_only=False), dtype=np.int64)


def _runs(gid: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by gid (stable) and where each run starts and ends among them."""
    order = np.argsort(gid, kind="stable")
    return order, np.concatenate([[0], np.searchsorted(gid[order], cuts), [len(gid)]])


def group_chunks(
    table: pa.Table,
    groups: pa.Table,
    membership: pa.Table,
    *,
    l: int,
    sensitive: str,
    transient: Iterable[Any] | None,
    release: int,
    chunk_rows: int,
) -> list[GroupRun]:
    """Runs of whole groups: a run starts at the group of every chunk_rows-th published row (in
    group order)."""
    if isinstance(membership, pd.DataFrame):
        membership = pa.Table.from_pandas(membership, preserve_index=False)
    t_gid, g_gid, m_gid = _gids(table), _gids(groups), _gids(membership)
    cuts = np.unique(np.sort(t_gid)[chunk_rows::chunk_rows])
    first = min((int(g.min()) for g in (t_gid, g_gid, m_gid) if len(g)), default=0)
    bases = np.concatenate([[first], cuts])
    table, members = table.select(["gid", sensitive]), membership.select(["person", "gid"])
    groups = groups.select(["gid", "size"])
    (t_order, t_at), (g_order, g_at), (m_order, m_at) = (_runs(g, cuts) for g in (t_gid, g_gid, m_gid))

    def run(source: pa.Table, order: np.ndarray, at: np.ndarray, j: int) -> CompactTable:
        return CompactTable(source.take(pa.array(order[at[j] : at[j + 1]])))

    return [
        GroupRun(
            int(bases[j]),
            run(table, t_order, t_at, j),
            run(groups, g_order, g_at, j),
            run(members, m_order, m_at, j),
            m_order[m_at[j] : m_at[j + 1]],
            l,
            sensitive,
            None if transient is None else list(transient),
            release,
        )
        for j in range(len(bases))
    ]


@dataclass
class GroupFigures:
    """One run's history rows (with each member's membership row) and localized figures."""

    rows: pd.DataFrame
    violating: int  # (group, value) entries with n(s)/|G| > 1/l
    worst: tuple[Fraction, dict[str, Any]] | None  # the largest n(s)/|G| and where (first in group order)


def group_figures(chunk: GroupRun) -> GroupFigures:
    table = chunk.table.table
    gid = _gids(table) - chunk.base
    shown = table.column(chunk.sensitive).to_pandas().to_numpy(dtype=object)
    present = ~pd.isna(shown)
    if chunk.transient is not None:
        present &= pd.Series(shown).isin(chunk.transient).to_numpy()
    codes, labels = pd.factorize(pd.Series(shown[present]), sort=True)
    value_code = np.full(len(shown), -1, dtype=np.int64)
    value_code[present] = codes
    values = np.asarray(labels, dtype=object)

    groups = chunk.groups.table
    g_ids = _gids(groups) - chunk.base
    size_of = np.zeros(int(g_ids.max()) + 1 if len(g_ids) else 0, dtype=np.int64)
    size_of[g_ids] = np.asarray(groups.column("size").to_numpy(), dtype=np.int64)
    real = np.bincount(gid, minlength=len(size_of))
    if (real > size_of).any():
        raise ValueError("a published group is smaller than its tuples")

    gv = st.group_values(gid, value_code, len(values))
    # localized: n(s)/|G| <= 1/l for every group and protected value, from the tables alone
    gv_gid, gv_code, cnt = gv
    l = chunk.l
    loc_ok = l * cnt <= size_of[gv_gid]
    worst = None
    if len(cnt):
        frac = cnt / size_of[gv_gid]
        cand = np.flatnonzero(frac >= frac.max() * (1 - 1e-9))  # floats pick candidates, Fractions decide
        i = max(cand, key=lambda j: Fraction(int(cnt[j]), int(size_of[gv_gid[j]])))
        worst = (
            Fraction(int(cnt[i]), int(size_of[gv_gid[i]])),
            {
                "gid": int(gv_gid[i]) + chunk.base,
                "value": python_scalar(values[gv_code[i]]),
                "count": int(cnt[i]),
                "size": int(size_of[gv_gid[i]]),
            },
        )

    members = chunk.members.table
    person = members.column("person").to_pandas().to_numpy()
    member_gid = _gids(members) - chunk.base
    if len(member_gid) != len(gid) or not np.array_equal(np.bincount(member_gid, minlength=len(real)), real):
        raise ValueError("group membership does not match the published table")
    rows = st.pair_rows(person, member_gid, size_of, gv, values, chunk.release)
    per_group = np.bincount(gv_gid, minlength=len(size_of))
    rows[_POS] = np.repeat(chunk.positions, per_group[member_gid])  # pair_rows' order: member by member
    return GroupFigures(rows, int((~loc_ok).sum()), worst)


def localized_and_rows(figures: list[GroupFigures], l: int) -> tuple[pd.DataFrame, PrivacyResult]:
    """The history rows in membership order and the localized guarantee, from every run (in
    group order: among equal shares the first group wins)."""
    frames = [f.rows for f in figures]
    rows = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    order = np.argsort(rows[_POS].to_numpy(), kind="stable")
    rows = rows.drop(columns=[_POS]).take(order).reset_index(drop=True)
    worst = max((f.worst for f in figures if f.worst is not None), key=lambda w: w[0], default=None)
    loc_worst, loc_where = worst if worst is not None else (Fraction(0), {})
    violating = sum(f.violating for f in figures)
    localized = PrivacyResult(
        "serial-localized", str(loc_worst), f"1/{l}", violating == 0, {**loc_where, "violating_groups": violating}
    )
    return rows, localized


def python_scalar(x: Any) -> Any:
    """A numpy scalar as the Python value (reports are serialised)."""
    return x.item() if hasattr(x, "item") else x

"""Brute-force linkers for every technique's published tables: the adversary who holds every
release of a series (docs/series.md), by enumeration from the definitions.

Shares no code with tasks/compose (nor with the techniques). The adversary's stated knowledge is
the target's QI values in each release it is in, and which releases those are. Each `*_records`
function reads one release's published tables (as pandas frames read back from the release
folder) and lists the records that can be the target's there, as (record key, sensitive value):

- Anatomy, QIT(QIs, gid) + ST(gid, value, count): the target's record is any QIT row with its exact
  QI values; it holds one of the values of that row's group in ST (a row of count c is c records).
- Ambiguity, AT_<qi>(qi, gid) per QI + ST(gid, value, count): a group can hold the target when
  every AT_<qi> lists the target's value of qi with that gid; its records are the group's ST units.
- PriView, AT(all QIs but QI', gid) + ST(gid, QI', value, count): a group can hold the target when
  AT has a row with the target's values (all QIs but QI') and that gid; its records are the
  group's ST units whose QI' is the target's.
- A generalized table (generalization, Butterfly, union-qid): any row whose cells cover the
  target's QI values (`series_linker.covers`).
- Records named by group (MuCo: see `group_records`).

`link` then enumerates every choice of one record per release and keeps those the value model
allows: one permanent value throughout, or transient values throughout.
"""

from __future__ import annotations

import itertools

import pandas as pd

from tests.series_linker import covers

Record = tuple[object, str]  # (a key naming the record in its release, its sensitive value)


def _units(st: pd.DataFrame, gids, sensitive: str, extra: pd.Series | None = None) -> list[Record]:
    """The ST units of groups `gids` (a row of count c is c records), optionally only rows where
    `extra` holds."""
    rows = st[st.gid.isin(list(gids))]
    if extra is not None:
        rows = rows[extra.loc[rows.index]]
    out: list[Record] = []
    for i, row in rows.iterrows():
        out += [((int(row.gid), int(i), u), str(row[sensitive])) for u in range(int(row["count"]))]
    return out


def anatomy_records(tables: dict[str, pd.DataFrame], qi: dict, sensitive: str) -> list[Record]:
    qit = tables["QIT"]
    match = pd.Series(True, index=qit.index)
    for name, value in qi.items():
        match &= qit[name] == value
    return _units(tables["ST"], set(qit.gid[match]), sensitive)


def ambiguity_records(tables: dict[str, pd.DataFrame], qi: dict, sensitive: str) -> list[Record]:
    gids = None
    for name, value in qi.items():
        at = tables[f"AT_{name}"]
        here = set(at.gid[at[name] == value])
        gids = here if gids is None else gids & here
    return _units(tables["ST"], gids or set(), sensitive)


def priview_records(tables: dict[str, pd.DataFrame], qi: dict, sensitive: str) -> list[Record]:
    at, st = tables["AT"], tables["ST"]
    (split,) = [c for c in st.columns if c in qi]  # QI': the QI published next to the value
    match = pd.Series(True, index=at.index)
    for name, value in qi.items():
        if name != split:
            match &= at[name] == value
    return _units(st, set(at.gid[match]), sensitive, st[split] == qi[split])


def generalized_records(table: pd.DataFrame, qi: dict, sensitive: str) -> list[Record]:
    rows = table.to_dict("records")
    return [(i, str(rec[sensitive])) for i, rec in enumerate(rows) if covers(rec, qi)]


def group_records(table: pd.DataFrame, row_group, target_group: int, sensitive: str) -> list[Record]:
    """The published rows of the target's group (row_group: the group of each published row).
    For a technique whose tables do not show its groups (MuCo), the group is part of the stated
    knowledge: the composition check's model grants the adversary the target's QI-group."""
    return [(i, str(v)) for i, (g, v) in enumerate(zip(row_group, table[sensitive])) if g == target_group]


def link(records: dict[int, list[Record]], transient: set) -> dict[int, tuple[set, int]]:
    """records: release -> the records that can be the target's there (only releases the target
    is in). Every choice of one record per release is a matching of the target across releases;
    the value model keeps a choice when its values are one permanent value throughout or
    transient throughout. Records of equal value are interchangeable for the model, so the
    choices are enumerated over the distinct values of each release (the same matchings, merged).
    Returns release -> (values the adversary cannot exclude, records that can be the target's)."""
    order = sorted(records)
    distinct = [sorted({v for _, v in records[r]}) for r in order]
    values: dict[int, set] = {r: set() for r in order}
    for pick in itertools.product(*distinct):
        permanent_throughout = len(set(pick)) == 1 and pick[0] not in transient
        transient_throughout = all(v in transient for v in pick)
        if permanent_throughout or transient_throughout:
            for r, v in zip(order, pick):
                values[r].add(v)
    return {r: (values[r], sum(v in values[r] for _, v in records[r])) for r in order}

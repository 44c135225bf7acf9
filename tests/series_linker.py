"""A brute-force linker: the adversary who holds every release of a series, by enumeration.

Shares no code with tasks/compose. For a target it knows the target's QI values in each release
and in which releases the target is. In each such release the target's record is one of the
published records whose cells cover the target's QI values; it enumerates every choice of one
record per release (a matching of the target across the releases) and keeps the choices the
value model allows: one permanent value throughout, or transient values throughout.
"""

from __future__ import annotations

import itertools


def covers(record: dict, qi: dict) -> bool:
    """A generalized record covers a person's QI values (numeric lo/hi; list cells by membership)."""
    for name, value in qi.items():
        if f"{name}_lo" in record:
            if not (record[f"{name}_lo"] <= value <= record[f"{name}_hi"]):
                return False
        elif value not in record[name]:
            return False
    return True


def link(
    target_qi: dict[int, dict], releases: dict[int, list[dict]], sensitive: str, transient: set
) -> dict[int, tuple[set, int]]:
    """target_qi: release -> the target's QI values (only releases the target is in);
    releases: release -> published records. Returns release -> (candidate values, records that
    can be the target's)."""
    order = sorted(target_qi)
    choices = [[i for i, rec in enumerate(releases[r]) if covers(rec, target_qi[r])] for r in order]
    values: dict[int, set] = {r: set() for r in order}
    records: dict[int, set] = {r: set() for r in order}
    for pick in itertools.product(*choices):
        vals = [releases[r][i][sensitive] for r, i in zip(order, pick)]
        permanent_throughout = len(set(vals)) == 1 and vals[0] not in transient
        transient_throughout = all(v in transient for v in vals)
        if permanent_throughout or transient_throughout:
            for r, i, v in zip(order, pick, vals):
                values[r].add(v)
                records[r].add(i)
    return {r: (values[r], len(records[r])) for r in order}


def worst(links: dict[int, tuple[set, int]]) -> tuple[int, int]:
    """(fewest candidate values, fewest records) over the target's releases."""
    return min(len(v) for v, _ in links.values()), min(n for _, n in links.values())

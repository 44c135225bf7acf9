"""What a steward reads when the series check says no: which earlier releases combine to narrow
the people below the threshold, and what can be done about it (docs/series.md, "Changing a
series' settings").

Releases are named by their number in the series and their id; people only by how many there
are. Never a person id, never a value of the sensitive column.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

LISTED = 8  # releases named one by one in a message; the others are counted
CHANGE = "`privpub series change SPEC`"
PEOPLE = "_remedies_people"  # the people below, shown to the connection for one query

# what the steward can do about a breach at publish, or about a change the series refuses
PUBLISH_REMEDIES = (
    "what the steward can do: [series] keep_groups = true (returning people keep their groups), "
    f"a lower [series] l or another [series] transient list ({CHANGE} re-checks the whole series under it "
    "and rebuilds its summaries), or a new series name (it hides the earlier releases from the check, "
    "not from the adversary)"
)
CHANGE_REMEDIES = (
    "what the steward can do: keep the series' settings, try a lower [series] l or another [series] "
    "transient list, or start a new series name (it hides the earlier releases from the check, not "
    "from the adversary)"
)
# the series check by k (a technique without l, no [series] l): the transient list and l do not
# enter it; the groups returning people get, and the series' name, do
PUBLISH_REMEDIES_K = (
    "what the steward can do: [series] keep_groups = true (returning people keep their groups, so the "
    "releases combined leave each of them as many records as one release gives), or a new series name "
    "(it hides the earlier releases from the check, not from the adversary); the check holds the "
    "technique's k over the series, and the transient list and [series] l do not enter it"
)
CHANGE_REMEDIES_K = (
    "what the steward can do: keep the series' settings, or start a new series name (it hides the earlier "
    "releases from the check, not from the adversary); the series check by k depends on the groups, not on "
    "the transient list"
)


def publish_remedies(model: str) -> str:
    """The remedies of a publish refused by `model` (series-composition-l or -k)."""
    return PUBLISH_REMEDIES_K if model.endswith("-k") else PUBLISH_REMEDIES


def change_remedies(model: str) -> str:
    """The remedies of a series change refused by `model`."""
    return CHANGE_REMEDIES_K if model.endswith("-k") else CHANGE_REMEDIES


VALUE_CHANGES = (
    "a value that changes must be named in [series] transient: add it to the spec's list and run "
    f"{CHANGE}, which rebuilds the series' summaries under the new list and re-checks the series"
)


def releases_holding(
    con: duckdb.DuckDBPyConnection, series: str, sid: int, pkeys: np.ndarray
) -> list[tuple[int, str, int]]:
    """(number, release id, how many of the people) for every release of the series that holds
    some of the people with these stored keys, in series order."""
    if not len(pkeys):
        return []
    con.register(PEOPLE, pa.table({"pkey": np.unique(np.asarray(pkeys, np.int64))}))
    try:
        rows = con.execute(
            f"SELECT m.release, coalesce(r.release_id, '?'), count(*) FROM compose_membership m "
            f"JOIN {PEOPLE} USING (pkey) LEFT JOIN release_rows r ON r.series = ? AND r.sequence = m.release "
            "WHERE m.sid = ? GROUP BY ALL ORDER BY m.release",
            [series, sid],
        ).fetchall()
    finally:
        con.unregister(PEOPLE)
    return [(int(n), str(rid), int(count)) for n, rid, count in rows]


def name_releases(releases: list[tuple[int, str, int]]) -> str:
    """`#1 (s-0001-abc123: 4 of them), #2 (...)`, the first LISTED, the rest counted."""
    named = ", ".join(f"#{n} ({rid}: {count} of them)" for n, rid, count in releases[:LISTED])
    rest = len(releases) - LISTED
    return named + (f" and {rest} more releases" if rest > 0 else "")


def breach_note(
    releases: list[tuple[int, str, int]],
    below: int,
    threshold: int,
    newcomers: int,
    model: str = "series-composition-l",
) -> str:
    """The publish refusal's second half: where the breach comes from, then the remedies."""
    parts = []
    if releases:
        parts.append(f"the {below} people below {threshold} were also in earlier releases {name_releases(releases)}")
    if newcomers:
        parts.append(f"{newcomers} of them are new in this release (this release alone narrows them)")
    return "; ".join([*parts, publish_remedies(model)])

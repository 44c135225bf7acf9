"""`privpub verify --history`: the state's hash chains and the release folders' manifests,
checked without loading a technique, pandas or Prefect (the CLI runs it from flows/cli_state.py);
flows/reverify.py re-verifies one release from its published tables and takes its history's
lines from here."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from privpub.flows.attempts import current_actor
from privpub.schemas.errors import StateError
from privpub.state import chain, ledger
from privpub.state.store import Store, published_sha256


class Check(NamedTuple):
    """One line of `privpub verify`: PASS / FAIL / SKIP / INFO, what was checked, the rest."""

    status: str
    check: str
    detail: str
    line: str


def check_line(line: str, check: str = "") -> Check:
    """A printed line as a Check: `PASS k-anonymity: 5 (required 5)`, or a problem of the published
    files (`check` given: the line names no check)."""
    status, _, rest = line.partition(" ")
    name, _, detail = rest.partition(": ") if not check else (check, "", rest)
    return Check(status, name, detail, line)


MAX_HISTORY_LINES = 50  # a state edited wholesale is named by its first findings and a count


def history_lines(store: Store, release_ids: list[str] | None = None) -> tuple[bool, list[str]]:
    """The history's chains (every release row, figure and audit row against its hash, the
    chains unbroken and anchored) and the manifests of `release_ids` (None: every release's,
    with the files beside them): (no FAIL, the lines). Lines name tables, release ids and row
    numbers, never a value."""

    def check(con) -> tuple[list[str], list[str]]:
        problems, summary = chain.check_chains(con)
        fails = [p.line() for p in problems]
        # the budget ledger against its releases: a row edited and re-chained still fails here
        by_series = ledger.spends(con)
        fails += [f"FAIL ledger: {p}" for p in ledger.ledger_problems(by_series)]
        infos: list[str] = []
        if release_ids is None:
            fails += [p.line() for p in chain.check_manifest_chain(con)] if summary else []
        ids = release_ids
        if ids is None:
            ids = [
                r[0]
                for r in con.execute("SELECT release_id FROM release_rows ORDER BY created_at, release_id").fetchall()
            ]
        for rid in ids:
            out = con.execute("SELECT output_dir FROM release_rows WHERE release_id = ?", [rid]).fetchone()
            if out is None or not summary:
                continue
            found, notes = chain.check_manifest(
                con, rid, Path(out[0]) / rid, published_sha256 if release_ids is None else None
            )
            fails += [p.line() for p in found]
            infos += [f"INFO history: {note}" for note in notes]
        passed = [*_chain_summary(summary, ids, release_ids is None), *_ledger_summary(by_series)]
        return fails, [*infos, *passed] if not fails else infos

    fails, rest = store.query(check)
    if len(fails) > MAX_HISTORY_LINES:
        fails = [*fails[:MAX_HISTORY_LINES], f"FAIL history: and {len(fails) - MAX_HISTORY_LINES} more findings"]
    return not fails, fails + rest


def _chain_summary(summary: dict, ids: list[str], every: bool) -> list[str]:
    """The PASS line of an intact history: what is chained, and since when."""
    words = {"release_rows": "release rows", "release_metrics": "figures", "audit_log": "audit rows"}
    counts = ", ".join(f"{summary[c]['rows']} {words[c]}" for c in chain.CHAINS)
    since = min((s["since"] for s in summary.values() if s["since"]), default=None)
    start = ""
    if since is not None and since[1] == "migration" and any(s["since"][2] for s in summary.values() if s["since"]):
        start = f"; the rows found at the migration of {since[0]:%Y-%m-%d %H:%M} were chained as they were (edits before it are not detected)"
    what = f"every manifest ({len(ids)} releases) and its files" if every else "its manifest.json"
    return [f"PASS history: chains intact ({counts}) and {what} match{start}"]


def _ledger_summary(by_series: dict[str, list[ledger.Spend]]) -> list[str]:
    """The PASS line of a ledger that agrees with its releases (none when no series is DP)."""
    dp = {series: [s for s in rel if s.dp] for series, rel in by_series.items()}
    dp = {series: rel for series, rel in dp.items() if rel}
    if not dp:
        return []
    releases = sum(len(rel) for rel in dp.values())
    return [
        f"PASS ledger: {releases} differentially private release(s) in {len(dp)} series; each series' total "
        "equals the sum of its releases' spends and is within its budget"
    ]


def verify_history(state: Path, actor: str | None = None) -> tuple[bool, list[str]]:
    """`privpub verify --history`: every chain and every release folder's manifest (the files
    beside it hashed too); logged in the audit log."""
    store = Store(state)
    if not store.path.exists():
        raise StateError(f"no state file at {store.path} (nothing has been published there yet)")
    store.upgrade()
    ok, lines = history_lines(store, None)
    lines = [f"history of {store.path}", *lines]
    store.log(current_actor(actor), "verify-history", None, "pass" if ok else "fail", None, {"lines": lines})
    return ok, lines

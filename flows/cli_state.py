"""The CLI's commands that read the state only: `history`, `snapshot`, `trail`, `verify --history`
(and the state file every state command reads). Light: no Prefect, no technique, no report, no
pydantic unless --spec names the state (the spec's model is loaded then), no pandas for `history`
(DuckDB loads it to bind a query's parameter: `history --series`, the chain checks of
`verify --history`; docs/benchmarks.md). tests/test_cli_imports.py lists what each must not load."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from privpub.flows.attempts import current_actor
from privpub.flows.history_check import verify_history
from privpub.flows.lazy import load_lazily
from privpub.flows.records import history, snapshot, state_file
from privpub.schemas.errors import CliError
from privpub.state.ledger import ACCOUNTING, amount, ledger_rows
from privpub.state.store import Store


def state_path(args: argparse.Namespace) -> Path:
    """The state file of a command: the --spec's, else --state (else $PRIVPUB_STATE, ./privpub.duckdb)."""
    if getattr(args, "spec", None):
        return load_lazily("privpub.schemas.spec:load_spec")(args.spec).state_path  # pydantic: only with --spec
    return state_file(args.state)


ESCAPES = str.maketrans({"\t": "\\t", "\r": "\\r", "\n": "\\n"})  # as pandas writes them


def _text_cells(values: list[Any]) -> tuple[list[str], bool] | None:
    """One column's cells as pandas' `to_string` writes them (the column is numeric?), or None
    for values it may write otherwise (a NULL number, a float, a date): the caller then asks pandas."""
    if values and all(type(v) is int for v in values):
        return [str(v) for v in values], True
    if not all(v is None or type(v) is str for v in values):
        return None
    missing = "None" if all(v is None for v in values) else "NaN"  # an all-NULL column stays object
    return [missing if v is None else v.translate(ESCAPES) for v in values], False


def text_table(columns: list[str], rows: list[tuple[Any, ...]]) -> str | None:
    """`DataFrame(rows, columns).to_string(index=False)` of the frame DuckDB would have made,
    without loading pandas (tests/test_cli_imports.py compares the two), or None when a column
    holds values this does not write as pandas does."""
    out = []
    for j, name in enumerate(columns):
        cells = _text_cells([r[j] for r in rows])
        if cells is None:
            return None
        texts, numeric = cells
        head = f" {name}" if numeric else name  # pandas keeps a sign's place in a number's header
        width = max(len(t) for t in [head, *texts])
        out.append([t.rjust(width) for t in [head, *texts]])
    return "\n".join(" ".join(line) for line in zip(*out))


def _history_text(columns: list[str], rows: list[tuple[Any, ...]]) -> str | None:
    """history's table as `cmd_history` prints it (created_at to the second), or None (ask pandas)."""
    at = columns.index("created_at")
    if not all(isinstance(r[at], datetime) for r in rows):
        return None
    return text_table(columns, [(*r[:at], str(r[at])[:19], *r[at + 1 :]) for r in rows])


LEDGER_COLUMNS = (
    "series",
    "sequence",
    "release_id",
    "epsilon",
    "delta",
    "series_epsilon",
    "budget_epsilon",
    "remaining_epsilon",
)


def ledger_text(store: Store, series: str | None) -> str | None:
    """The privacy-budget ledger under history's table (None: no series is differentially private):
    what each DP release spent, the series' total after it, the budget and what remained."""
    rows = ledger_rows(store.ledger(series))
    if not rows:
        return None
    cells = [
        tuple(str(r[c]) if c in ("series", "sequence", "release_id") else _amount(r[c]) for c in LEDGER_COLUMNS)
        for r in rows
    ]
    table = text_table(list(LEDGER_COLUMNS), cells)
    return f"\nprivacy budget ledger ({ACCOUNTING}):\n{table}"


def _amount(value: Any) -> str:
    return "-" if value is None else amount(value)


def cmd_history(args: argparse.Namespace) -> int:
    path = state_path(args)
    columns, rows = Store(path).history_rows(args.series)
    if not rows:
        print("no releases yet")
        return 0
    ledger = ledger_text(Store(path), args.series)
    text = _history_text(columns, rows)
    if text is not None:
        print(text)
        if ledger:
            print(ledger)
        return 0
    frame = history(path, args.series)  # a value only pandas knows how to write: pandas writes it
    if frame.empty:
        print("no releases yet")
        return 0
    with_cols = frame.assign(created_at=frame.created_at.astype(str).str.slice(0, 19))
    print(with_cols.to_string(index=False))
    if ledger:
        print(ledger)
    return 0


def cmd_verify_or_history(args: argparse.Namespace) -> int:
    """`verify --history` alone reads the state and the release folders only: it runs here, with
    no technique, pandera or pydantic loaded; a release's re-verification (RELEASE_ID) loads its technique
    (flows/cli_release.py, which prints the same history lines after the release's)."""
    if args.release_id or not args.history:
        return int(load_lazily("privpub.flows.cli_release:cmd_verify")(args))
    ok, lines = verify_history(state_path(args), actor=current_actor(args.actor))
    for line in lines:
        print(line)
    return 0 if ok else 1


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Copy the state for reading: `duckdb -readonly` on the live file would hold every publish."""
    print(snapshot(args.out, state_path(args)))
    return 0


def cmd_trail(args: argparse.Namespace) -> int:
    """The audit trail for a compliance officer: every attempt, its outcome, release and trigger."""
    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since)
        except ValueError:
            raise CliError(f"--since {args.since!r} is not a date (YYYY-MM-DD or an ISO timestamp)") from None
    frame = Store(state_path(args)).trail(args.series, since)
    if args.format == "json":
        for line in frame.to_json(orient="records", lines=True, date_format="iso").splitlines():
            if line.strip():
                print(line)
    else:
        sys.stdout.write(frame.to_csv(index=False))
    return 0

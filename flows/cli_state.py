"""The CLI's commands that read the state only: `history`, `snapshot`, `trail` (and the state
file every state command reads). Light: no Prefect, no technique, no report (tests/test_cli.py)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from privpub.flows.records import history, snapshot, state_file
from privpub.schemas.errors import CliError
from privpub.schemas.spec import load_spec
from privpub.state.store import Store


def state_path(args: argparse.Namespace) -> Path:
    """The state file of a command: the --spec's, else --state (else $PRIVPUB_STATE, ./privpub.duckdb)."""
    if getattr(args, "spec", None):
        return load_spec(args.spec).state_path
    return state_file(args.state)


def cmd_history(args: argparse.Namespace) -> int:
    frame = history(state_path(args), args.series)
    if frame.empty:
        print("no releases yet")
        return 0
    with_cols = frame.assign(created_at=frame.created_at.astype(str).str.slice(0, 19))
    print(with_cols.to_string(index=False))
    return 0


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

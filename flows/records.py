"""The state's records, read without loading a technique, Prefect or Dask: `privpub.history`,
`privpub.snapshot` and the state file they read (the CLI's `history`, `snapshot` and `trail`).

    privpub.history("privpub.duckdb"); privpub.snapshot("copy.duckdb", "privpub.duckdb")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from privpub.flows.lazy import load_lazily
from privpub.state.ledger import LEDGER_COLUMNS, ledger_rows
from privpub.state.location import DEFAULT_STATE, state_file
from privpub.state.store import Store

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_STATE", "history", "ledger", "snapshot", "state_file"]


def history(state: str | os.PathLike | None = None, series: str | None = None) -> pd.DataFrame:
    """The committed releases of a state file, as ``privpub history`` prints them.

    Parameters: ``state``, the state file (default ``$PRIVPUB_STATE``, else ./privpub.duckdb);
    ``series``, only this series' releases.

    Returns a DataFrame, one row per release: release_id, series, sequence, technique, status,
    seed, created_at, trigger, actor, flow_run_id.

    Example: ``privpub.history("privpub.duckdb", series="census")``."""
    return Store(state_file(state)).history(series)


def ledger(state: str | os.PathLike | None = None, series: str | None = None) -> pd.DataFrame:
    """The privacy-budget ledger of a state file's differentially private series, as ``privpub
    history`` prints it under the releases (docs/dp.md, "The budget ledger").

    Parameters: ``state``, the state file (default as ``history``); ``series``, only this series.

    Returns a DataFrame, one row per DP release in series order: series, sequence, release_id,
    epsilon and delta (what it spent), series_epsilon and series_delta (the series' total after
    it, basic sequential composition: the spends add up), budget_epsilon and budget_delta (the
    ``[series] budget`` it was checked against) and remaining_epsilon. Empty: no DP release.

    Example: ``privpub.ledger("privpub.duckdb", series="census").remaining_epsilon.iloc[-1]``."""
    frame = load_lazily("pandas:DataFrame")  # pandas only when asked: `privpub history` stays light
    return frame(ledger_rows(Store(state_file(state)).ledger(series)), columns=list(LEDGER_COLUMNS))


def snapshot(out: str | os.PathLike, state: str | os.PathLike | None = None) -> Path:
    """Copy the state file to ``out`` (a new file, readable by its owner only), consistently.

    Open the copy with DuckDB for your own queries: a session on the state file itself, even a
    read-only one, makes every publish wait. ``state``: the state file (default as ``history``).
    Returns the copy's path; refuses an ``out`` that exists.

    Example: ``con = duckdb.connect(str(privpub.snapshot("copy.duckdb")))``."""
    return Store(state_file(state)).snapshot(Path(out))

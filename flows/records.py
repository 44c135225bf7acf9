"""The state's records, read without loading a technique, Prefect or Dask: `privpub.history`,
`privpub.snapshot` and the state file they read (the CLI's `history`, `snapshot` and `trail`).

    privpub.history("privpub.duckdb"); privpub.snapshot("copy.duckdb", "privpub.duckdb")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from privpub.state.location import DEFAULT_STATE, state_file
from privpub.state.store import Store

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_STATE", "history", "snapshot", "state_file"]


def history(state: str | os.PathLike | None = None, series: str | None = None) -> pd.DataFrame:
    """The committed releases (what `privpub history` prints): release_id, series, sequence,
    technique, status, seed, created_at, trigger, actor, flow_run_id; one series' with `series`."""
    return Store(state_file(state)).history(series)


def snapshot(out: str | os.PathLike, state: str | os.PathLike | None = None) -> Path:
    """A consistent copy of the state file at `out` (a new file, owner-only): open the copy with
    DuckDB, even read-write, without holding any publish (a session on the state file itself,
    read-only ones included, makes every writer wait). Returns its path."""
    return Store(state_file(state)).snapshot(Path(out))

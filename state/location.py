"""Where the state file is: the default name and the rule the CLI's --state and the Python API
follow. Light (no DuckDB, no Arrow): `privpub --help` names the default."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_STATE = "privpub.duckdb"


def state_file(state: str | os.PathLike[str] | None = None) -> Path:
    """The state file: `state`, else $PRIVPUB_STATE, else ./privpub.duckdb (as the CLI's --state)."""
    return Path(state or os.environ.get("PRIVPUB_STATE", DEFAULT_STATE))

"""Who may read what privpub writes.

Everything secret-bearing (the state file and its WAL, staging folders, the temporary Prefect
server's database) is created owner-only, whatever the operator's umask: privpub processes run
under umask 077. Published files (a committed release's folder and its tables and report) get
the permissions the operator's own umask gives, applied when the release becomes visible.
"""

from __future__ import annotations

import os
from pathlib import Path

_operator_umask: int | None = None


def private_umask() -> int:
    """Switch this process to umask 077 (once) and return the operator's umask."""
    global _operator_umask
    if _operator_umask is None:
        _operator_umask = os.umask(0o077)
    return _operator_umask


def operator_umask() -> int:
    return _operator_umask if _operator_umask is not None else private_umask()


def owner_only(path: Path) -> None:
    """0600 for a file, 0700 for a folder (files created before privpub switched its umask)."""
    try:
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    except FileNotFoundError:
        pass


def as_published(folder: Path) -> None:
    """A release folder becomes readable as the operator's umask says (it was private while staged)."""
    mask = operator_umask()
    os.chmod(folder, 0o777 & ~mask)
    for path in folder.iterdir():
        if path.is_file():
            os.chmod(path, 0o666 & ~mask)
        elif path.is_dir() and not path.is_symlink():  # a table written as a folder of parts
            as_published(path)


def make_public_dir(folder: Path) -> None:
    """Create a folder that will hold published releases (and any missing parents) with the
    operator's permissions, not privpub's private umask."""
    missing = []
    p = Path(folder)
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o777 & ~operator_umask())

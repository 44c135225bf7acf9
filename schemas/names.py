"""Names privpub turns into paths (a series name, a published table's name) and the check that
every path it writes lies under its folder (issue 41, items 1 and 2).

A name is 1 to 64 ASCII letters, digits, `-`, `_` or `.`, starting with a letter or a digit: it
is one path component everywhere (no `/`, no `..`, no NUL, never hidden, never read as an
option), short enough for any file system once the release id's `-0001-abcdef` is added, and the
release id it makes matches the report server's RELEASE_ID."""

from __future__ import annotations

import re
from pathlib import Path

from privpub.schemas.errors import StateError

NAME_LENGTH = 64
NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_LENGTH - 1}}}")
NAME_RULE = f"1 to {NAME_LENGTH} letters (A-Z, a-z), digits, '-', '_' or '.', starting with a letter or a digit"


def name_problem(name: object) -> str | None:
    """Why `name` is not a name (the rule and what was given, never more than 40 characters of
    it), or None."""
    if isinstance(name, str) and NAME.fullmatch(name):
        return None
    if not isinstance(name, str):
        return f"must be text ({NAME_RULE}), got {type(name).__name__}"
    return f"must be {NAME_RULE}; got {shown(name)}"


def inside(folder: Path | str, *names: str) -> Path:
    """`folder / names...`, resolved, after checking that it lies strictly under the resolved
    folder: a StateError otherwise (a `..`, an absolute part, a symlink out, a NUL), so a path
    built from a bad name can never be written. Every path a release writes goes through it."""
    base = Path(folder).resolve()
    try:
        path = base.joinpath(*names).resolve()
    except (ValueError, OSError) as exc:  # a NUL byte; a name too long to resolve
        raise StateError(f"cannot write {shown('/'.join(names))} under {base}: {type(exc).__name__}") from None
    if path == base or not path.is_relative_to(base):
        raise StateError(f"cannot write {shown('/'.join(names))} under {base}: the path would lie outside it")
    return path


def shown(text: str, limit: int = 40) -> str:
    """A name as a message may quote it: in quotes with escapes (a NUL, a newline), and only its
    first `limit` characters and its length when longer."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"

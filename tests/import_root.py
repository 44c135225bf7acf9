"""A folder from which `import privpub` finds a given checkout's code, by plain path lookup.

The editable install maps `privpub` onto the fixed top-level folders with an import hook
(pyproject.toml `package-dir`), which tools that walk folders (grimp under lint-imports, mypy)
cannot follow, and which always points at the installed checkout. This builds
`<dest>/privpub/` of symbolic links (each flows/privpub/*.py, e.g. `__init__.py`, `plugin.py`; `flows`,
`tasks`, `schemas`, `state`, `deployments` -> the folders): put `<dest>` first on PYTHONPATH.

    python -m tests.import_root DEST [SOURCE]
"""

from __future__ import annotations

import sys
from pathlib import Path

FOLDERS = ("flows", "tasks", "schemas", "state", "deployments")


def link_tree(source: Path, dest: Path) -> Path:
    """`dest`, holding privpub/ as links into `source` (made again if it exists)."""
    package = dest / "privpub"
    package.mkdir(parents=True, exist_ok=True)
    root = source / "flows" / "privpub"  # the root package's own modules (privpub.plugin, privpub.testing, ...)
    links = {p.name: p for p in root.glob("*.py")} | {f: source / f for f in FOLDERS}
    for name, target in links.items():
        link = package / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target.resolve())
    return dest


if __name__ == "__main__":
    link_tree(Path(sys.argv[2] if len(sys.argv) > 2 else ".").resolve(), Path(sys.argv[1]))

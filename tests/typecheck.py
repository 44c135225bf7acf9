"""Type-check the package: `python tests/typecheck.py [mypy options]` (`make lint` runs it).

mypy cannot follow the editable install's `package-dir` mapping (`mypy -p privpub` finds no
package), so this builds the installed layout as a tree of symlinks, .venv/typecheck/privpub,
and checks it as `privpub` with the settings of [tool.mypy] in pyproject.toml. Paths in mypy's
report are mapped back to the repository's, so that editors can open them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / ".venv" / "typecheck"
FOLDERS = ("flows", "tasks", "schemas", "state", "deployments")


def build_tree() -> Path:
    """Rebuilt on every run, so that it follows added and removed modules."""
    package = TREE / "privpub"
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    for module in (ROOT / "flows" / "privpub").glob("*.py"):  # the root package's own modules
        (package / module.name).symlink_to(module)
    for folder in FOLDERS:
        if folder != "flows":
            (package / folder).symlink_to(ROOT / folder)
            continue
        # flows/privpub/ is the root package itself: linked above, not again as privpub.flows.privpub
        (package / "flows").mkdir()
        for entry in (ROOT / "flows").iterdir():
            if entry.name not in ("privpub", "__pycache__"):
                (package / "flows" / entry.name).symlink_to(entry)
    return package


def main(argv: list[str]) -> int:
    package = build_tree()
    env = {**os.environ, "MYPYPATH": str(TREE)}
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "-p", "privpub", *argv]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    report = run.stdout + run.stderr
    for prefix in (str(package), str(package.relative_to(ROOT))):
        for module in (ROOT / "flows" / "privpub").glob("*.py"):
            report = report.replace(f"{prefix}/{module.name}", f"flows/privpub/{module.name}")
        report = report.replace(f"{prefix}/", "")
    print(report, end="")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""How privpub names itself in the commands it prints as advice (issue 42): a line pasted into a
fresh shell in the checkout must run, so the name is `privpub` only when that resolves to this
install's script; otherwise the script's path (relative when it lies under the working folder,
e.g. `.venv/bin/privpub`, else absolute)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def command_name() -> str:
    """`privpub` as the shell can call it from here (every advice line uses this, no copies)."""
    script = Path(sys.executable).with_name("privpub")  # this install's script, beside its python
    if not script.is_file():  # run from a tree without an installed script: the module itself
        return f"{shlex.quote(sys.executable)} -m privpub.flows.cli"
    found = shutil.which("privpub")
    if found and Path(found).resolve() == script.resolve():
        return "privpub"
    cwd = Path.cwd()
    if script.is_relative_to(cwd):
        relative = os.path.relpath(script, cwd)  # e.g. .venv/bin/privpub
        return shlex.quote(relative if os.sep in relative else f"./{relative}")  # a slash: no PATH lookup
    return shlex.quote(str(script))


def advice(*words: object) -> str:
    """A privpub command line to print: the name above, then each word quoted for the shell."""
    return " ".join([command_name(), *(shlex.quote(str(w)) for w in words)])

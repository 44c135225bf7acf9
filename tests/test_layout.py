"""The house (issue 26): one import namespace, `privpub`, over the fixed top-level folders."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("flows", "tasks", "schemas", "state", "deployments")


def _sources():
    for folder in (*FOLDERS, "tests", "docs"):
        yield from (ROOT / folder).rglob("*.py")


@pytest.mark.parametrize("path", list(_sources()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_a_bare_top_level_folder(path):
    """`import tasks...` would load a second copy of a module beside `privpub.tasks...` (and
    collide with other packages named tasks or state in a user's environment)."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        for name in names:
            assert name.split(".")[0] not in FOLDERS, f"line {node.lineno}: import {name}; write privpub.{name}"
            assert not name.startswith("privpub.flows.privpub"), f"line {node.lineno}: the root is `privpub`"


def test_the_wheel_lists_every_package_folder():
    """pyproject.toml lists its packages (so that the wheel holds only `privpub`): a new folder
    must be listed, or it would be missing from an installed privpub."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = {"privpub"} | {
        "privpub." + ".".join(p.parent.relative_to(ROOT).parts)
        for f in FOLDERS
        for p in (ROOT / f).rglob("__init__.py")
        if p.parent != ROOT / "flows" / "privpub"
    }
    assert listed == found
    assert setuptools["package-dir"] == {"privpub": "flows/privpub", **{f"privpub.{f}": f for f in FOLDERS}}


def test_import_privpub_gives_the_public_surface():
    import privpub

    assert set(privpub.__all__) >= {"publish", "verify", "Store", "ReleaseSpec", "load_spec"}
    for name in privpub.__all__:
        assert getattr(privpub, name) is not None
    assert "generalization" in privpub.technique_names()


def test_the_public_names_and_their_sources_agree():
    import privpub

    assert set(privpub.__all__) - {"__version__"} == set(privpub._PUBLIC)


def test_the_wheel_installs_only_privpub(tmp_path):
    """`pip install .` must not put `flows`, `tasks`, `state`, ... on a user's sys.path."""
    import subprocess
    import sys
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("privpub-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "privpub",
        f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info",
    }
    assert "privpub/__init__.py" in names and "privpub/tasks/techniques/muco/technique.py" in names
    assert not [n for n in names if n.startswith("privpub/flows/privpub/")]  # the root is not packaged twice

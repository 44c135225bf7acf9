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


def _package_folders() -> set[str]:
    return {"privpub"} | {
        "privpub." + ".".join(p.parent.relative_to(ROOT).parts)
        for f in FOLDERS
        for p in (ROOT / f).rglob("__init__.py")
        if p.parent != ROOT / "flows" / "privpub"
    }


def test_the_wheel_lists_every_package_folder():
    """The packages are computed from the folders (setup.py), never listed by hand: a new
    technique folder is in an installed privpub without touching anything else (issue 40)."""
    import runpy

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "packages" not in setuptools  # no hand-kept list to forget a folder in
    assert set(runpy.run_path(str(ROOT / "setup.py"))["packages"]()) == _package_folders()
    assert setuptools["package-dir"] == {"privpub": "flows/privpub", **{f"privpub.{f}": f for f in FOLDERS}}


def _registered_folders() -> dict[str, str]:
    """Each registered technique's name -> the folder below tasks/techniques/ its class lives in."""
    from privpub.tasks.techniques.registry import registered

    prefix = "privpub.tasks.techniques."
    return {
        name: cls.__module__.removeprefix(prefix).split(".")[0]
        for name, cls in registered().items()
        if cls.__module__.startswith(prefix)
    }


def technique_names_outside_their_folder(root: Path, names: dict[str, str]) -> list[str]:
    """Every string constant of tasks/**/*.py equal to a technique's name, outside that
    technique's folder and the registry: file, line and name."""
    found = []
    for path in sorted((root / "tasks").rglob("*.py")):
        rel = path.relative_to(root)
        if rel == Path("tasks/techniques/registry.py"):
            continue
        folder = rel.parts[2] if rel.parts[:2] == ("tasks", "techniques") and len(rel.parts) > 3 else None
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                if names[node.value] != folder:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_no_technique_name_outside_its_folder():
    """A technique is its folder (issue 40): nothing else in tasks/ branches on, or suggests, a
    technique by name; what differs is a hook or a capability of the technique."""
    names = _registered_folders()
    assert {"generalization", "anatomy", "muco", "priview", "union-qid"} <= set(names)
    assert technique_names_outside_their_folder(ROOT, names) == []


def test_the_name_scan_finds_a_name_branch(tmp_path):
    """The scan above sees a name where it does not belong (as tasks/report/verdict.py held
    eight before issue 40), and not in the technique's own folder."""
    names = _registered_folders()
    (tmp_path / "tasks" / "report").mkdir(parents=True)
    (tmp_path / "tasks" / "report" / "words.py").write_text('def words(t):\n    return t == "anatomy"\n')
    (tmp_path / "tasks" / "techniques" / "anatomy").mkdir(parents=True)
    (tmp_path / "tasks" / "techniques" / "anatomy" / "contract.py").write_text('NAME = "anatomy"\n')
    (tmp_path / "tasks" / "techniques" / "muco").mkdir(parents=True)
    (tmp_path / "tasks" / "techniques" / "muco" / "x.py").write_text('OTHER = {"generalization": 1}\n')
    assert technique_names_outside_their_folder(tmp_path, names) == [
        "tasks/report/words.py:2: 'anatomy'",
        "tasks/techniques/muco/x.py:1: 'generalization'",
    ]


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
    assert {f"{p.replace('.', '/')}/__init__.py" for p in _package_folders() - {"privpub"}} <= set(names)
    assert "privpub/plugin.py" in names and "privpub/testing.py" in names
    assert not [n for n in names if n.startswith("privpub/flows/privpub/")]  # the root is not packaged twice


def _strict_patterns() -> list[str]:
    """The module patterns of pyproject.toml's strict mypy block (the one with disallow_untyped_defs)."""
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    return [m for block in overrides if block.get("disallow_untyped_defs") for m in block["module"]]


def _strict(module: str, patterns: list[str]) -> bool:
    # mypy's structured pattern: `a.b.*` matches a.b and every module below it
    return any(module == p or (p.endswith(".*") and (module + ".").startswith(p[:-1])) for p in patterns)


def test_every_module_under_tasks_and_state_is_checked_strictly():
    patterns = _strict_patterns()
    modules = []
    for folder in ("tasks", "state"):
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules.append("privpub." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert len(modules) > 100
    assert [m for m in modules if not _strict(m, patterns)] == []
    # the matcher itself: a module outside the patterns is reported
    assert not _strict("privpub.flows.cli", patterns) and _strict("privpub.tasks", patterns)

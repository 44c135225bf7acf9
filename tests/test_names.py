"""One meaning per name (issue 26, item 7): no two modules of privpub define a class or function
of the same name, and no module reaches into another's private (leading underscore) names."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("flows", "tasks", "schemas", "state", "deployments")

# name -> why two modules may each define it. Keep it short: a shared name must mean one thing.
SHARED: dict[str, str] = {}


def module_name(path: Path) -> str:
    """The import name of a source file (flows/privpub/ is `privpub` itself, pyproject.toml)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[:2] == ["flows", "privpub"]:
        parts = parts[2:]
    if parts[-1:] == ["__init__"]:
        parts = parts[:-1]
    return ".".join(["privpub", *parts])


MODULES = {module_name(p): p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _source_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def private_uses(module: str, source: str, is_package: bool = False) -> list[str]:
    """Another privpub module's private names that `module` uses: imported by name, or read as
    an attribute of an imported privpub module (`import privpub.a.b as m; m._x`)."""
    tree = ast.parse(source)
    found, aliases = [], {}  # local name -> the privpub module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = _source_module(module, is_package, node)
            if src.split(".")[0] != "privpub":
                continue
            for alias in node.names:
                if _private(alias.name) and src != module:
                    found.append(f"line {node.lineno}: from {src} import {alias.name}")
                if f"{src}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{src}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "privpub":
                    aliases[alias.asname or "privpub"] = alias.name if alias.asname else "privpub"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in aliases:
                owner = ".".join([aliases[value.id], *reversed(chain)])
                if owner != module:
                    found.append(f"line {node.lineno}: {owner}.{node.attr}")
    return found


def test_no_two_modules_define_the_same_name():
    """A class or function name means one thing across privpub (dunder hooks such as a module's
    __getattr__ are the language's, not ours)."""
    where = defaultdict(list)
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith(
                "__"
            ):
                where[node.name].append(module)
    where = defaultdict(list, {name: sorted(set(modules)) for name, modules in where.items()})  # typing overloads
    shared = {name: modules for name, modules in where.items() if len(modules) > 1 and name not in SHARED}
    assert not shared, f"defined in more than one module (rename one, or list it in SHARED): {shared}"
    assert not [name for name in SHARED if len(where[name]) < 2], "SHARED lists a name no longer shared"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_uses_another_modules_private_names(module):
    path = MODULES[module]
    assert private_uses(module, path.read_text(), path.name == "__init__.py") == []


def test_private_uses_finds_both_forms():
    """The scan itself: imports by name (absolute and relative), attributes of an imported
    module (aliased or by its full name); a module's own names and other packages' pass."""
    source = "\n".join(
        [
            "import numpy as np",
            "import privpub.tasks.techniques.serial.statistics",
            "from privpub.tasks.techniques.serial import statistics as st",
            "from privpub.tasks.evaluate.workload import _Selections",
            "from .pairs import _private_helper",
            "np._internal",
            "st._terms(rows)",
            "privpub.tasks.techniques.serial.statistics._column",
            "self._own",
        ]
    )
    uses = private_uses("privpub.tasks.techniques.serial.guarantee", source)
    assert sorted(u.split(": ", 1)[1] for u in uses) == [
        "from privpub.tasks.evaluate.workload import _Selections",
        "from privpub.tasks.techniques.serial.pairs import _private_helper",
        "privpub.tasks.techniques.serial.statistics._column",
        "privpub.tasks.techniques.serial.statistics._terms",
    ]

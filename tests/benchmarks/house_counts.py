"""Counts of the house (issue 26), not run by CI: modules, lines, import cycles, imports inside
functions, files per technique. Every `import` statement counts, inside functions too.

    .venv/bin/python -m tests.benchmarks.house_counts [ROOT]

ROOT is a checkout (default: this one). For a checkout from before the `privpub` namespace
(fa52237), pass --old: modules are then named by their folders (`tasks.x`), as they imported.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

FOLDERS = ("flows", "tasks", "schemas", "state", "deployments")


def modules(root: Path, old: bool) -> dict[str, Path]:
    found = {}
    for folder in FOLDERS:
        for path in (root / folder).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if not old and parts[:2] == ["flows", "privpub"]:
                parts = []  # the package root itself
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts if old else ["privpub", *parts])] = path
    return found


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(group)

    sys.setrecursionlimit(10_000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", type=Path, default=Path("."))
    ap.add_argument("--old", action="store_true", help="a checkout from before the privpub namespace")
    args = ap.parse_args()
    mods = modules(args.root, args.old)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    inside = inside_project = lines = 0
    for m, path in mods.items():
        source = path.read_text()
        lines += source.count("\n")
        tree = ast.parse(source)
        functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        in_function = {id(n) for f in functions for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            hits = {r for t in targets if (r := resolve(t)) and r != m}
            edges[m] |= hits
            if id(node) in in_function:
                inside += 1
                inside_project += bool(hits)
    print(f"modules {len(mods)}, lines {lines}")
    print(f"imports inside functions {inside} (of privpub's own modules {inside_project})")
    groups = cycles(edges)
    print(f"import cycles {len(groups)}" + "".join(f"\n  {sorted(g)}" for g in groups))
    techniques = args.root / "tasks" / "techniques"
    for folder in sorted(p for p in techniques.glob("*") if p.is_dir() and p.name != "__pycache__"):
        files = [f for f in folder.glob("*.py") if f.name != "__init__.py"]
        print(f"  {folder.name}: {len(files)} files, {sum(f.read_text().count(chr(10)) for f in files)} lines")


if __name__ == "__main__":
    main()

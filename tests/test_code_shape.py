"""The shape of the product code (issue 40): no function over 80 lines; no import inside a
function but a declared optional dependency (flows/lazy.py OPTIONAL_DEPENDENCIES) at an
allowed point; `importlib.import_module` only in the lazy loaders; no module assigning to
another module's globals (a run's state goes through its context, arguments or a contextvar
owned by the module that reads it)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from privpub.flows.lazy import OPTIONAL_DEPENDENCIES

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("flows", "tasks", "state", "schemas", "deployments")
MAX_LINES = 80

# (file, function) -> why it may import inside: an optional dependency, only when used
OPTIONAL_IMPORT_POINTS: dict[tuple[str, str], str] = {
    ("flows/attempts.py", "current_actor"): "prefect: the deployment's name, once a flow loaded Prefect",
    ("flows/attempts.py", "attribution"): "prefect: the flow run's trigger, in a flow run only",
    ("flows/attempts.py", "flow_run_id"): "prefect: the flow run's id, once a flow loaded Prefect",
    ("flows/run.py", "prefect_configured"): "prefect: its settings, when the caller loaded Prefect",
    ("flows/server.py", "prefect_api"): "prefect: the API settings of a server run",
    ("flows/server.py", "ready"): "prefect: the API settings of a server run",
    ("flows/server.py", "_api_settings"): "prefect: the API settings of a server run",
    ("flows/server.py", "_drain_prefect_logs"): "prefect: its log and event workers",
    ("flows/server.py", "wait_ready"): "httpx (Prefect's client): waiting for a server",
    ("flows/cluster.py", "dask_client"): 'distributed: [run] task_runner = "dask"',
    ("tasks/core/executor.py", "as_completed"): 'distributed: [run] task_runner = "dask"',
    ("state/store.py", "notice"): "prefect: the run's logger, once a flow loaded Prefect",
    ("tasks/population_models.py", "_special"): "scipy: the population models, with [risk] population only",
    ("tasks/population_models.py", "_optimize"): "scipy: Pitman's model, with [risk] population only",
    ("tasks/evaluate/classification.py", "_features"): "scipy: classification accuracy, with [evaluate] target only",
    ("tasks/evaluate/classification.py", "_accuracy"): "sklearn: classification accuracy, with [evaluate] target only",
    ("tasks/techniques/dp_synthetic/accounting.py", "approx_epsilon"): "opendp: dp-synthetic's accounting only",
    ("tasks/techniques/dp_synthetic/accounting.py", "rho_for"): "scipy: dp-synthetic's accounting only",
}

# the only callers of importlib.import_module: the command table's loader and the public
# names of `import privpub` (both "module:attribute" on first use), the technique registry (its
# folders and entry points) and the contract battery (a technique's contract.py beside it)
IMPORT_MODULE_CALLERS = {
    "flows/lazy.py",
    "flows/privpub/__init__.py",
    "flows/privpub/testing.py",
    "tasks/techniques/registry.py",
    # `first_use`: Arrow and numpy for the state's modules, which `privpub history` loads (issue 43)
    "state/pseudonyms.py",
}


def _files() -> list[Path]:
    return sorted(p for folder in PRODUCT for p in (ROOT / folder).rglob("*.py"))


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _shape():
    """(long functions, imports inside functions, import_module callers, module-global writes)."""
    long, inside, dynamic, writes = [], [], [], []
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in _functions(tree):
            lines = fn.end_lineno - fn.lineno + 1
            if lines > MAX_LINES:
                long.append((rel, fn.name, lines))
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    inside.append((rel, fn.name, node))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "import_module":
                dynamic.append(rel)
        writes += [(rel, line, text) for line, text in _module_global_writes(tree)]
    return long, inside, dynamic, writes


def _module_names(tree: ast.AST) -> set[str]:
    """The names a module binds to other modules (import x, import x.y as z, from pkg import module)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                try:
                    if importlib.util.find_spec(f"{node.module}.{a.name}") is not None:
                        names.add(a.asname or a.name)
                except (ImportError, ValueError):
                    pass
    return names


def _module_global_writes(tree: ast.AST):
    """`module.NAME = ...` (or `module.obj.attr = ...`) where `module` is another module."""
    modules = _module_names(tree)
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if root is not target and isinstance(root, ast.Name) and root.id in modules:
                yield node.lineno, ast.unparse(target)


SHAPE = _shape()


def test_no_function_over_80_lines():
    long = SHAPE[0]
    assert long == [], f"functions over {MAX_LINES} lines (split them into named steps): {long}"


def test_no_import_inside_a_function_but_a_declared_optional_dependency():
    bad = []
    for rel, fn, node in SHAPE[1]:
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        optional = all(m.split(".")[0] in OPTIONAL_DEPENDENCIES for m in modules)
        if (rel, fn) not in OPTIONAL_IMPORT_POINTS or not optional:
            bad.append(f"{rel} {fn}: {ast.unparse(node)}")
    assert bad == [], "imports inside functions (import at the top; lazy: flows/lazy.py load_lazily):\n" + "\n".join(
        bad
    )


def test_the_allow_lists_name_what_exists():
    """An entry that no longer matches anything is removed, not kept as a silent permission."""
    importing = {(rel, fn) for rel, fn, _ in SHAPE[1]}
    assert set(OPTIONAL_IMPORT_POINTS) <= importing, set(OPTIONAL_IMPORT_POINTS) - importing


def test_modules_are_imported_lazily_only_by_the_loaders():
    assert set(SHAPE[2]) <= IMPORT_MODULE_CALLERS, set(SHAPE[2]) - IMPORT_MODULE_CALLERS


def test_no_module_writes_another_modules_globals():
    assert SHAPE[3] == [], f"writes to another module's globals (use the run's context or a contextvar): {SHAPE[3]}"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from privpub.flows import attempts\nattempts.STARTED_BY_CLI = True\n", 1),
        ("from privpub.flows import publish as pub\npub.PREFECT.echo = None\n", 1),
        ("import os\nos.environ['X'] = '1'\n", 0),  # an item of a module's object, not a global
        ("from privpub.flows.pipeline import Driver\nDriver.echo = None\n", 0),  # a class, not a module
        ("x = object()\nx.y = 1\n", 0),
    ],
)
def test_the_global_write_check_sees_what_it_should(source, expected):
    assert len(list(_module_global_writes(ast.parse(source)))) == expected


def test_the_shape_checks_see_what_they_should():
    source = "def f():\n    import json\n" + "    x = 1\n" * MAX_LINES
    tree = ast.parse(source)
    fn = next(_functions(tree))
    assert fn.end_lineno - fn.lineno + 1 == MAX_LINES + 2
    assert any(isinstance(n, ast.Import) for n in ast.walk(fn))

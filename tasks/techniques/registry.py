"""The registry flows look techniques up in: the built-in folders (tasks/techniques/<folder>/,
found by pkgutil) and the plug-ins installed under the entry-point group `privpub.techniques`.

A folder's `technique` module registers its classes with `@register` (each class names itself:
`name = "..."`); a folder that
registers more than one technique lists the modules that do in its `__init__.py` as
`TECHNIQUE_MODULES` (default: `("technique",)`). A run imports only its own technique when its
name is a folder's (MuCo's module pulls in scipy.optimize, which a generalization run never
needs); any other name loads every folder, then the entry points.

An entry point names a Technique subclass (`name = "module:Class"`), registered under the entry
point's name, or a module whose import registers its techniques itself.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable
from typing import TypeVar

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks import techniques
from privpub.tasks.core.technique import Capabilities, Technique, unsupported

TechniqueClass = TypeVar("TechniqueClass", bound=type[Technique])

GROUP = "privpub.techniques"  # the entry-point group of plug-in techniques
PACKAGE = techniques.__name__

_REGISTRY: dict[str, type[Technique]] = {}
# where each registered technique was found: its module below tasks/techniques for a built-in
# (tests/test_validation.py), its full module name for a plug-in; filled as techniques register
MODULES: dict[str, str] = {}


def register(cls: TechniqueClass, name: str | None = None) -> TechniqueClass:
    """Register a Technique subclass under `name` (default: its `name` attribute) and return it,
    so `@register` decorates a class; a name taken by another class is refused."""
    if not isinstance(cls, type) or not issubclass(cls, Technique):
        raise TypeError(f"a technique is a subclass of Technique, got {cls!r}")
    name = name or cls.name
    if not name:
        raise ValueError(f"technique class {cls.__name__} has no name: set `name` or pass one")
    if _REGISTRY.get(name, cls) is not cls:
        raise ValueError(f"technique '{name}' registered twice")
    cls.name = name
    _REGISTRY[name] = cls
    MODULES[name] = cls.__module__.removeprefix(f"{PACKAGE}.")
    return cls


def folders() -> list[str]:
    """The built-in technique folders (each a package below tasks/techniques)."""
    return sorted(m.name for m in pkgutil.iter_modules(techniques.__path__) if m.ispkg)


def technique_names() -> list[str]:
    """The names a spec's ``[technique] name`` may take (built in and installed plug-ins), sorted.

    Example: ``privpub.technique_names()`` -> ``['ambiguity', 'anatomy', 'generalization', ...]``."""
    _load_all()
    return sorted(_REGISTRY)


def technique_class(name: str) -> type[Technique]:
    """The class registered as `name` (built-in or plug-in); a SpecError naming the known ones."""
    _load(name)
    if name not in _REGISTRY:
        raise SpecError(f"[technique] name = '{name}' is unknown; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def registered() -> dict[str, type[Technique]]:
    """Every registered technique by name (all folders and entry points loaded)."""
    _load_all()
    return dict(_REGISTRY)


def get_technique(spec: ReleaseSpec) -> Technique:
    cls = technique_class(spec.technique.name)
    refusal = unsupported(cls.capabilities, cls.name, spec)  # what the dataset asks, before the parameters
    if refusal is not None:
        raise SpecError(f"{refusal}; {_alternatives(refusal)}")
    return cls(spec)


def _alternatives(refusal: str) -> str:
    """What to use instead, from the registered techniques' capabilities (never a fixed name)."""
    if refusal.startswith("[dataset] qi"):
        able, other = _able(lambda c: c.publishes_dates), "or a numeric QI (e.g. the year)"
    else:
        able, other = _able(lambda c: c.many_rows_per_person), ""
    quoted = " or ".join(f'"{n}"' for n in able)
    return " ".join(p for p in (f"use technique {quoted}" if able else "no technique can", other) if p)


def _able(has: Callable[[Capabilities], bool]) -> list[str]:
    return [name for name, cls in registered().items() if has(cls.capabilities)]


def _folder_modules(folder: str) -> list[str]:
    package = importlib.import_module(f"{PACKAGE}.{folder}")
    names: tuple[str, ...] = getattr(package, "TECHNIQUE_MODULES", ("technique",))
    return [f"{PACKAGE}.{folder}.{module}" for module in names]


def _import(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as exc:  # name the broken plug-in rather than fail anonymously
        raise ImportError(f"technique module {module} cannot be imported: {exc}") from exc


def _load(name: str) -> None:
    """Import what registers `name`: its folder when it has one, else everything."""
    if name not in _REGISTRY and name in folders():
        for module in _folder_modules(name):
            _import(module)
    if name not in _REGISTRY:
        _load_all()


def _load_all() -> None:
    """Import every built-in folder's technique modules, then the entry points."""
    for folder in folders():
        for module in _folder_modules(folder):
            _import(module)
    _load_entry_points()


def _load_entry_points() -> None:
    for point in importlib.metadata.entry_points(group=GROUP):
        try:
            loaded = point.load()
        except Exception as exc:  # a broken plug-in is named, not skipped silently
            raise ImportError(f"technique plug-in {point.name} ({point.value}) cannot be loaded: {exc}") from exc
        if isinstance(loaded, type) and issubclass(loaded, Technique) and _REGISTRY.get(point.name) is not loaded:
            register(loaded, point.name)

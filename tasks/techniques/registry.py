"""The registry flows look techniques up in: each technique module registers its class with
`@register("name")`; `get_technique` imports a technique's module on first use (plug-ins).

`MODULES` says which module registers which technique, so a run imports only its own technique
(MuCo's module pulls in scipy.optimize, which a generalization run never needs). A name missing
here is still found: the registry then imports every folder's `technique` module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks import techniques
from privpub.tasks.core.technique import Technique

MODULES = {
    "generalization": "generalization.technique",
    "ambiguity": "ambiguity.technique",
    "priview": "ambiguity.priview",
    "muco": "muco.technique",
    "anatomy": "anatomy.technique",
    "butterfly": "butterfly.technique",
    "union-qid": "butterfly.technique",
    "serial": "serial.technique",
}


_REGISTRY: dict[str, type[Technique]] = {}


def register(name: str) -> Callable[[type[Technique]], type[Technique]]:
    def deco(cls: type[Technique]) -> type[Technique]:
        if name in _REGISTRY:
            raise ValueError(f"technique '{name}' registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def technique_names() -> list[str]:
    _load_plugins()
    return sorted(_REGISTRY)


def get_technique(spec: ReleaseSpec) -> Technique:
    name = spec.technique.name
    _load_plugin(name)
    if name not in _REGISTRY:
        raise SpecError(f"[technique] name = '{name}' is unknown; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](spec)


def _load_plugin(name: str) -> None:
    """Import the module that registers `name` (MODULES), else every module."""
    if name not in _REGISTRY and name in MODULES:
        importlib.import_module(f"privpub.tasks.techniques.{MODULES[name]}")
    if name not in _REGISTRY:
        _load_plugins()


def _load_plugins() -> None:
    """Import every technique module (MODULES, and each folder's `technique`) so that their
    @register decorators run."""
    modules = set(MODULES.values())
    modules.update(f"{m.name}.technique" for m in pkgutil.iter_modules(techniques.__path__) if m.ispkg)
    for name in sorted(modules):
        try:
            importlib.import_module(f"privpub.tasks.techniques.{name}")
        except ImportError as exc:  # name the broken plug-in rather than fail anonymously
            raise ImportError(f"technique module privpub.tasks.techniques.{name} cannot be imported: {exc}") from exc

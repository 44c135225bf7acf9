"""privpub: publish tables about people so that no one in them can be singled out.

privpub anonymizes a table (generalization, anatomy, MUCO, ...), checks every privacy figure
from the published tables as an adversary would read them, and publishes only when they pass;
each release of a series is recorded with its figures, its report and a verifiable history.

The functions below are what the ``privpub`` command does, from Python (no server needed)::

    import pandas as pd
    import privpub

    frame = pd.read_csv("census.csv")
    spec = {
        "dataset": {"name": "census", "person_id": "pid", "sensitive": "occupation",
                    "qi": [{"name": "age", "kind": "numeric"}, {"name": "sex", "kind": "categorical"}]},
        "technique": {"name": "generalization", "k": 10},
    }
    rows = privpub.explore(frame, spec, {"k": [5, 10, 20]})   # figures per setting, nothing published
    release = privpub.publish(frame, spec, set={"k": 20})     # publish the setting chosen
    release.tables["table"], release.figures, release.report
    privpub.history(); privpub.verify(release.id)

publish     publish the next release of a series (returns a PublishedRelease)
explore     the figures of several parameter settings, nothing published (a DataFrame);
            with optimize="gen-iloss": the best passing setting and the Pareto front (an Optimum)
history     the committed releases (a DataFrame); verify: re-check a release (a DataFrame)
ledger      the privacy-budget ledger of the differentially private series (a DataFrame)
init        propose a spec file from a table; change_series: change a series' [series] settings
snapshot    a consistent copy of the state file
load_spec, spec_from_dict, ReleaseSpec   read and check a spec; technique_names: the techniques
SpecError, InputError, PrivacyRefused    what a refusal raises (one line saying why)

Each function's help (``help(privpub.publish)``) says what it takes, returns and raises. The
user guide is the README and docs/ (docs/python.md for this API).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# This folder is the package `privpub` itself (pyproject.toml `package-dir`); the product's other
# folders import as privpub.flows, privpub.tasks, ... The public surface is `__all__`; every other
# module is internal. Names load on first use, so `import privpub` costs nothing until one is touched.

# public name -> (module, attribute)
_PUBLIC: dict[str, tuple[str, str]] = {
    "publish": ("privpub.flows.api", "publish_data"),
    "history": ("privpub.flows.records", "history"),
    "ledger": ("privpub.flows.records", "ledger"),
    "snapshot": ("privpub.flows.records", "snapshot"),
    "verify": ("privpub.flows.api", "verify"),
    "change_series": ("privpub.flows.api", "change_series"),
    "SeriesChange": ("privpub.tasks.compose.change", "SeriesChange"),
    "PublishedRelease": ("privpub.flows.published_release", "PublishedRelease"),
    "explore": ("privpub.flows.explore", "explore"),
    "Optimum": ("privpub.flows.optimize", "Optimum"),
    "init": ("privpub.flows.init", "init"),
    "Store": ("privpub.state.store", "Store"),
    "ReleaseSpec": ("privpub.schemas.spec", "ReleaseSpec"),
    "load_spec": ("privpub.schemas.spec", "load_spec"),
    "spec_from_dict": ("privpub.schemas.spec", "spec_from_dict"),
    "technique_names": ("privpub.tasks.techniques.registry", "technique_names"),
    "SpecError": ("privpub.schemas.errors", "SpecError"),
    "InputError": ("privpub.schemas.errors", "InputError"),
    "PrivacyRefused": ("privpub.schemas.errors", "PrivacyRefused"),
}

__all__ = [
    "InputError",
    "Optimum",
    "PrivacyRefused",
    "PublishedRelease",
    "ReleaseSpec",
    "SeriesChange",
    "SpecError",
    "Store",
    "__version__",
    "change_series",
    "explore",
    "history",
    "init",
    "ledger",
    "load_spec",
    "publish",
    "snapshot",
    "spec_from_dict",
    "technique_names",
    "verify",
]

if TYPE_CHECKING:
    from privpub.flows.api import change_series as change_series
    from privpub.flows.api import publish_data as publish
    from privpub.flows.api import verify as verify
    from privpub.flows.explore import explore as explore
    from privpub.flows.init import init as init
    from privpub.flows.optimize import Optimum as Optimum
    from privpub.flows.published_release import PublishedRelease as PublishedRelease
    from privpub.flows.records import history as history
    from privpub.flows.records import snapshot as snapshot
    from privpub.schemas.errors import InputError as InputError
    from privpub.schemas.errors import PrivacyRefused as PrivacyRefused
    from privpub.schemas.errors import SpecError as SpecError
    from privpub.schemas.spec import ReleaseSpec as ReleaseSpec
    from privpub.schemas.spec import load_spec as load_spec
    from privpub.schemas.spec import spec_from_dict as spec_from_dict
    from privpub.state.store import Store as Store
    from privpub.tasks.compose.change import SeriesChange as SeriesChange
    from privpub.tasks.techniques.registry import technique_names as technique_names


# the public submodules, loaded on first use too: privpub.plugin (writing a technique) and
# privpub.testing (its contract battery), docs/plugins.md
_SUBMODULES = ("plugin", "testing")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"privpub.{name}")
    if name not in _PUBLIC:
        raise AttributeError(f"module 'privpub' has no attribute {name!r}")
    module, attr = _PUBLIC[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

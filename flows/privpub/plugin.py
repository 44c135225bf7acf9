"""The plug-in surface (issue 40): what a technique written outside privpub needs.

    from privpub.plugin import Capabilities, Release, Technique, TechniqueParams, register

    class MyParams(TechniqueParams):
        k: int

    @register
    class Mine(Technique):
        name = "mine"
        Params = MyParams
        capabilities = Capabilities()
        def partition(self, data, rng): ...
        def anonymize(self, data, part, rng): ...
        def verify(self, release, context): ...
        def estimate_counts(self, release, workload): ...
        # optional, a step as chunks: split_anonymize, split_verify (then verify needs no body),
        # split_utility, each returning a ChunkPlan; one_piece(release) when small is cheaper whole

`technique(name)` returns a registered class, built-in or plugged in. A package can also name
its class in the entry-point group `privpub.techniques` (pyproject.toml:
`[project.entry-points."privpub.techniques"] mine = "mypackage.mine:Mine"`), found without an
import. `privpub.testing.check_technique(Mine)` runs the battery the built-ins pass
(docs/plugins.md).
"""

from __future__ import annotations

from privpub.tasks.core.contract import Contract, Tables, Tamper, narrow_interval, raise_count
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.params import TechniqueParams
from privpub.tasks.core.technique import (
    ANONYMIZE,
    RANGES,
    UTILITY,
    VERIFY,
    Capabilities,
    ChunkedStep,
    Description,
    Technique,
    find_result,
)
from privpub.tasks.core.types import (
    ChunkPlan,
    Partition,
    PriorContext,
    PrivacyResult,
    Release,
    UtilityEstimate,
    VerifyContext,
)
from privpub.tasks.techniques.registry import GROUP, register, technique_class, technique_names

__all__ = [
    "ANONYMIZE",
    "GROUP",
    "RANGES",
    "UTILITY",
    "VERIFY",
    "Capabilities",
    "ChunkPlan",
    "ChunkedStep",
    "Contract",
    "Description",
    "Microdata",
    "Partition",
    "PriorContext",
    "PrivacyResult",
    "Release",
    "Tables",
    "Tamper",
    "Technique",
    "TechniqueParams",
    "UtilityEstimate",
    "VerifyContext",
    "find_result",
    "narrow_interval",
    "raise_count",
    "register",
    "technique",
    "technique_names",
]


def technique(name: str) -> type[Technique]:
    """The technique class registered as `name` (built-in or plug-in); SpecError naming the
    known ones when there is none."""
    return technique_class(name)

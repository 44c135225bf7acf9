"""The plug-in contract of a technique, and the registry flows look techniques up in.

A technique module in tasks/anonymize/ defines a subclass of `Technique` and decorates it with
`@register("name")`. The flow calls, in order: partition -> anonymize -> verify -> estimate.
No flow branches on a technique's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from privpub.schemas.spec import ReleaseSpec, SpecError
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.params import TechniqueParams, read_params


class PrivacyRefused(RuntimeError):
    """The release cannot meet its privacy model: nothing is published."""


@dataclass
class Partition:
    """A group id per row (0..n_groups-1), and, for Mondrian, the split tree."""

    group: np.ndarray  # (n,) int64
    n_groups: int
    tree: Any = None  # tasks.partition.mondrian.SplitTree or None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def sizes(self) -> np.ndarray:
        """Rows per group; rows with group -1 (suppressed) are not counted."""
        return np.bincount(self.group[self.group >= 0], minlength=self.n_groups)


@dataclass
class Release:
    """What a technique produces.

    tables:  the published tables, written as <dir>/<release_id>/<name>.parquet
    private: metadata that verification of a randomized technique needs; stored in the state
             database with the release, never published
    info:    counts for the report (suppressed rows, groups, ...)
    """

    tables: dict[str, pa.Table]
    private: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChunkPlan:
    """A technique's anonymize step split into independent pieces (see Technique.plan_chunks).

    chunks: one picklable input per piece; a flow maps a task over them, so a piece may run in
            another process (a Dask worker) and must not need anything outside its chunk
    state:  whatever combine_chunks needs besides the results; it stays in the flow process
    """

    chunks: list[Any]
    state: Any = None


def chunk_bounds(sizes: np.ndarray, chunk_rows: int) -> np.ndarray:
    """First group of every chunk, and n_groups at the end: consecutive groups are cut where their
    first row crosses a multiple of chunk_rows (a group larger than that is a chunk of its own)."""
    start = np.cumsum(sizes) - sizes
    cut = np.flatnonzero(np.diff(start // chunk_rows) > 0) + 1
    return np.concatenate([[0], cut, [len(sizes)]]).astype(np.int64)


@dataclass
class PrivacyResult:
    """One privacy figure computed from the published tables, and whether it meets its threshold.

    `value` is what the report shows (an int, a float, or an exact fraction as a string);
    `worst` describes the worst group / person so a steward can look at it.
    """

    model: str
    value: Any
    threshold: Any
    passed: bool
    worst: dict[str, Any] = field(default_factory=dict)


class Technique:
    """Base class of a technique; subclasses override what differs."""

    name: ClassVar[str] = ""
    # the published tables, for the report and the schema check
    table_names: ClassVar[tuple[str, ...]] = ("table",)
    # True when a release depends on earlier releases of its series (its commit then checks
    # that no other release of the series was committed meanwhile)
    uses_history: ClassVar[bool] = False
    # True when partition / anonymize / verify also take a table read on a Dask cluster
    # (tasks/distributed_input.ClusterData; the flow then never holds the rows, see flows/cluster.py)
    distributed: ClassVar[bool] = False
    # the model of the keys [technique] may hold besides `name` (any other key is refused, "did
    # you mean"); Technique.__init__ validates them into `self.params`
    Params: ClassVar[type[TechniqueParams]] = TechniqueParams
    # the series composition check (tasks/compose): `guards_series` when the technique's own
    # verifier already plays the adversary holding every release under its own model (serial:
    # values change, absent people are counted as virtual members, so presence is not known);
    # `accepts_kept_groups` when `anonymize` takes any grouping from `[series] keep_groups`
    guards_series: ClassVar[bool] = False
    accepts_kept_groups: ClassVar[bool] = False

    params: TechniqueParams

    def __init__(self, spec: ReleaseSpec):
        self.spec = spec
        self.params = read_params(self.name, self.Params, spec.technique.params)
        self.check_params()

    # --- parameters -------------------------------------------------------------------------
    def check_params(self) -> None:
        """Raise SpecError for parameters that do not fit the dataset (e.g. a QI name that is
        not one); derive the technique's own state from them."""

    if not TYPE_CHECKING:  # hidden from the type checker: the code itself reads self.params.k

        def __getattr__(self, name: str) -> Any:
            # a parameter reads as an attribute of the technique too: technique.k is params.k
            params = self.__dict__.get("params")
            if params is None or name not in type(params).model_fields:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            return getattr(params, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # setting a parameter validates a new parameter model: the model itself stays frozen
        params = self.__dict__.get("params")
        if params is not None and name in type(params).model_fields:
            name, value = "params", read_params(self.name, type(params), {**dict(params), name: value})
        super().__setattr__(name, value)

    def check_data(self, data: Microdata) -> None:
        """Raise a ValueError when the data cannot meet the parameters (e.g. k > rows)."""

    @staticmethod
    def check_diversity(data: Microdata, l: int | None) -> None:
        """l-diversity needs at least l distinct sensitive values in the whole table."""
        if l is not None and len(data.sensitive_values) < l:
            raise ValueError(
                f"l = {l} is larger than the number of distinct sensitive values ({len(data.sensitive_values)})"
            )

    # --- the pipeline steps ----------------------------------------------------------------
    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        raise NotImplementedError

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        raise NotImplementedError

    # --- optional: anonymize as independent chunks (e.g. chunks of QI-groups) ---------------
    # A technique whose anonymize work splits into independent pieces returns a ChunkPlan from
    # plan_chunks; the flow then maps a task over plan.chunks on its task runner (threads in the
    # flow process, or Dask workers) and calls combine_chunks with the results in chunk order.
    # The release must not depend on where or in which order the chunks ran: a chunk that draws
    # random numbers takes a generator spawned for it in plan_chunks, never a shared one.
    def plan_chunks(self, data: Microdata, part: Partition, rng: np.random.Generator) -> ChunkPlan | None:
        """None (the default): anonymize runs as one step."""
        return None

    def anonymize_chunk(self, chunk: Any) -> Any:
        raise NotImplementedError

    def combine_chunks(
        self, data: Microdata, part: Partition, plan: ChunkPlan, results: list[Any], rng: np.random.Generator
    ) -> Release:
        raise NotImplementedError

    def anonymize_in_chunks(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        """The chunked anonymize run one chunk after the other, in this process: what `anonymize`
        of a chunked technique calls, so a direct call and a flow run publish the same release."""
        plan = self.plan_chunks(data, part, rng)
        if plan is None:
            raise NotImplementedError(f"technique '{self.name}' does not split its anonymize step")
        return self.combine_chunks(data, part, plan, [self.anonymize_chunk(c) for c in plan.chunks], rng)

    # --- optional: verify and evaluate with their per-row work in chunks -------------------
    # The pattern of the anonymize chunks: plan_verify / plan_utility return a ChunkPlan (None:
    # the step runs as one: verify, or estimate_counts + utility), the flow maps verify_chunk /
    # utility_chunk over plan.chunks on its task runner, and combine_verify / combine_utility
    # build the figures in the flow process. The figures must not depend on the chunk layout, the
    # runner or the order the chunks ran in, and must be those of the one-step methods.
    def plan_verify(self, release: Release, context: dict[str, Any]) -> ChunkPlan | None:
        return None

    def verify_chunk(self, chunk: Any) -> Any:
        raise NotImplementedError

    def combine_verify(
        self, release: Release, context: dict[str, Any], plan: ChunkPlan, results: list[Any]
    ) -> list[PrivacyResult]:
        raise NotImplementedError

    def plan_utility(self, release: Release, data: Microdata, workload: Any) -> ChunkPlan | None:
        return None

    def utility_chunk(self, chunk: Any) -> Any:
        raise NotImplementedError

    def combine_utility(
        self, release: Release, data: Microdata, workload: Any, plan: ChunkPlan, results: list[Any]
    ) -> tuple[np.ndarray, dict[str, float]]:
        """(estimate_counts of the workload, the utility() figures) from the chunks' results."""
        raise NotImplementedError

    def utility_in_chunks(
        self, release: Release, data: Microdata, workload: Any
    ) -> tuple[np.ndarray, dict[str, float]]:
        """estimate_counts and utility, through the chunk hooks when the technique has them."""
        plan = self.plan_utility(release, data, workload)
        if plan is None:
            return self.estimate_counts(release, workload), self.utility(release, data)
        return self.combine_utility(release, data, workload, plan, [self.utility_chunk(c) for c in plan.chunks])

    def verify(self, release: Release, context: dict[str, Any]) -> list[PrivacyResult]:
        """Privacy of the release as an adversary sees it (published tables + public knowledge).

        context may hold "data" (the validated Microdata) at publish time: only for measured
        figures such as disclosure rates, never for a pass/fail decision, which must follow from
        the published tables (plus the release's private metadata and history) alone."""
        raise NotImplementedError

    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """Estimated answers of the shared count-query workload, from the published tables."""
        raise NotImplementedError

    def prior_context(self, store: Any, spec: ReleaseSpec, before_sequence: int | None = None) -> dict[str, Any]:
        """What this technique needs from earlier releases of the series (and public lists),
        loaded from the store before partitioning; it is put in `data.extra` and passed to
        `verify`. before_sequence: only releases before this one (re-verification)."""
        return {}

    def commit_hook(self, release: Release) -> Callable[[Any, str, int], None] | None:
        """Writes of this technique's own state for `release`, run by the store as
        hook(con, release_id, sequence) inside the release's commit transaction (None: none)."""
        return None

    def utility(self, release: Release, data: Microdata) -> dict[str, float]:
        """Technique-specific utility figures (penalties, ILoss), beside the shared workload."""
        return {}

    def group_sizes(self, release: Release) -> np.ndarray | None:
        """QI-group sizes as the published tables show them (None when not meaningful)."""
        return None

    def table_schemas(self, data_spec: ReleaseSpec) -> dict[str, Any]:
        """pandera schemas of the published tables, by table name."""
        return {}


_REGISTRY: dict[str, type[Technique]] = {}


def register(name: str):
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
    """Import the module that registers `name` (tasks.techniques.MODULES), else every module."""
    import importlib

    from privpub.tasks.techniques import MODULES

    if name not in _REGISTRY and name in MODULES:
        importlib.import_module(f"privpub.tasks.techniques.{MODULES[name]}")
    if name not in _REGISTRY:
        _load_plugins()


def _load_plugins() -> None:
    """Import every technique module (MODULES, and each folder's `technique`) so that their
    @register decorators run."""
    import importlib
    import pkgutil

    import privpub.tasks.techniques as pkg

    modules = set(pkg.MODULES.values())
    modules.update(f"{m.name}.technique" for m in pkgutil.iter_modules(pkg.__path__) if m.ispkg)
    for name in sorted(modules):
        try:
            importlib.import_module(f"privpub.tasks.techniques.{name}")
        except ImportError as exc:  # name the broken plug-in rather than fail anonymously
            raise ImportError(f"technique module privpub.tasks.techniques.{name} cannot be imported: {exc}") from exc

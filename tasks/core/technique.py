"""The plug-in contract of a technique (the registry flows look techniques up in is
tasks/techniques/registry.py).

A technique module in tasks/techniques/<name>/ (or a plug-in anywhere: privpub.plugin) defines a
subclass of `Technique` with its `name` and decorates it with `@register`. The flow calls, in
order: partition -> anonymize -> verify -> estimate. No flow branches on a technique's name: what
differs is a hook or its `capabilities`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar

import numpy as np

from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.params import TechniqueParams, read_params
from privpub.tasks.core.types import (
    ChunkPlan,
    Partition,
    PriorContext,
    PrivacyResult,
    Release,
    UtilityEstimate,
    VerifyContext,
)


@dataclass(frozen=True)
class Capabilities:
    """What a technique can do and declares, read by the flows instead of its name (one frozen
    record per class: `capabilities = Capabilities(...)`, the defaults for the rest)."""

    # a release depends on earlier releases of its series (its commit then checks that no other
    # release of the series was committed meanwhile)
    uses_history: bool = False
    # partition / anonymize / verify also take rows kept in parts where the run's executor works
    # (data.in_parts: tasks/validate/parted.PartedData; the flow then never holds the rows, see
    # flows/cluster.py)
    distributed: bool = False
    # the series composition check (tasks/compose): its own verifier already plays the adversary
    # holding every release under its own model (values change, absent people are counted as
    # virtual members, so presence is not known)
    guards_series: bool = False
    # `anonymize` takes any grouping from `[series] keep_groups`
    accepts_kept_groups: bool = False
    # publishes a date QI (`kind = "date"`) as dates (Arrow date32 ranges): the others would
    # publish its day numbers, so they refuse it
    publishes_dates: bool = False
    # protects people with several rows each (`[dataset] rows_per_person = "many"`): a person's
    # rows stay in one group and every figure counts people (docs/models.md, "Several rows per
    # person"); the others refuse such a spec by name
    many_rows_per_person: bool = False
    # draws its published values at random (not only their order): a second release of the same
    # data with fresh randomness would let an adversary average it out (flows/pipeline.refuse_repeat)
    randomized: bool = False
    # the steps (CHUNKED_STEPS' names) whose work splits into independent pieces: derived from the
    # split hooks the class overrides (Technique.__init_subclass__), not an argument
    chunked: frozenset[str] = field(default=frozenset(), init=False)
    # in plain words, for the report: which risk the technique reduces and which it does not,
    # when its identity figures are not computed (QIs published unchanged or perturbed) or need
    # a caveat (docs/risk.md). None: both kinds of figure are read from its published table.
    risk_note: str | None = None

    def chunking(self, steps: frozenset[str]) -> Capabilities:
        """This record with `chunked` = steps (the one place it is set: Technique.__init_subclass__)."""
        record = replace(self)
        object.__setattr__(record, "chunked", steps)  # frozen, and not an argument
        return record


@dataclass(frozen=True)
class Description:
    """The report's words for a release of this technique (tasks/report/verdict.py): how the
    quasi-identifiers are published, which leads the sentence of the generic figures (k, QIDs,
    l), and the technique's own sentences after it, with its figures."""

    published_as: str = ""
    sentences: tuple[str, ...] = ()


# the `published_as` of the techniques that publish ranges and sets of values
RANGES = (
    "Each quasi-identifier is published as a range (such as [30, 39]) or a set of values ({a, b}) "
    "instead of its exact value"
)


class Technique:
    """Base class of a technique; subclasses override what differs."""

    name: ClassVar[str] = ""
    # the published tables, for the report and the schema check
    table_names: ClassVar[tuple[str, ...]] = ("table",)
    capabilities: ClassVar[Capabilities] = Capabilities()
    # the model of the keys [technique] may hold besides `name` (any other key is refused, "did
    # you mean"); Technique.__init__ validates them into `self.params`
    Params: ClassVar[type[TechniqueParams]] = TechniqueParams

    params: TechniqueParams

    def __init__(self, spec: ReleaseSpec):
        self.spec = spec
        self.params = read_params(self.name, self.Params, spec.technique.params)
        self.check_params()

    def __setattr__(self, name: str, value: Any) -> None:
        # a parameter lives in self.params only (frozen): setting it here would change nothing
        params = self.__dict__.get("params")
        if params is not None and name in type(params).model_fields:
            raise AttributeError(f"{name} is a parameter: replace technique.params with a new {type(params).__name__}")
        super().__setattr__(name, value)

    # --- parameters -------------------------------------------------------------------------
    def check_params(self) -> None:
        """Raise SpecError for parameters that do not fit the dataset (e.g. a QI name that is
        not one); derive the technique's own state from them."""

    def check_data(self, data: Microdata) -> None:
        """Raise a ValueError when the data cannot meet the parameters (e.g. k > rows)."""

    @staticmethod
    def check_diversity(data: Microdata, l: int | None) -> None:
        """l-diversity needs at least l distinct sensitive values in the whole table."""
        if l is not None and len(data.sensitive_values) < l:
            raise ValueError(
                f"l = {l} is larger than the number of distinct sensitive values ({len(data.sensitive_values)})"
            )

    def privacy_spend(self) -> dict[str, float] | None:
        """The differential-privacy budget one release spends ({"epsilon": e, "delta": d}); None: a syntactic technique."""
        return None

    # --- the pipeline steps ----------------------------------------------------------------
    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        raise NotImplementedError

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        """A technique that splits its anonymize step (split_anonymize) needs not override this."""
        return self.split_anonymize(data, part, rng).execute()

    def verify(self, release: Release, context: VerifyContext) -> list[PrivacyResult]:
        """Privacy of the release as an adversary sees it (published tables + public knowledge).

        context.data is the validated Microdata at publish time (None at re-verification): only
        for measured figures such as disclosure rates, never for a pass/fail decision, which
        must follow from the published tables (plus the release's private metadata and
        context.prior, the technique's history) alone (tasks/core/types.py VerifyContext). A
        technique that splits its verify step (split_verify) needs not override this."""
        return self.split_verify(release, context).execute()

    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """Estimated answers of the shared count-query workload, from the published tables."""
        raise NotImplementedError

    # --- optional: a step as independent chunks -------------------------------------------
    # A technique whose work in a step splits into independent pieces overrides that step's
    # split hook (split_anonymize, split_verify, split_utility), which returns the step as a
    # ChunkPlan; `capabilities.chunked` names the steps whose hook it overrides. The flow maps
    # plan.run over plan.chunks on the run's executor (tasks/core/executor.py) and calls
    # plan.combine in its own process (ChunkedStep below: the table it asks through). The output
    # must not depend on the chunk layout, the executor or the order the chunks ran in, and must
    # be that of the one-piece step: a chunk drawing random numbers takes a generator spawned for
    # it in the split hook, never a shared one.
    def split_anonymize(
        self, data: Microdata, part: Partition, rng: np.random.Generator
    ) -> ChunkPlan[Any, Any, Release]:
        """The anonymize step as chunks (then `anonymize` needs no override: it runs them here)."""
        raise NotImplementedError(f"technique '{self.name}' does not split its anonymize step")

    def split_verify(self, release: Release, context: VerifyContext) -> ChunkPlan[Any, Any, list[PrivacyResult]]:
        """The verify step as chunks (then `verify` needs no override: it runs them here)."""
        raise NotImplementedError(f"technique '{self.name}' does not split its verify step")

    def split_utility(self, release: Release, data: Microdata, workload: Any) -> ChunkPlan[Any, Any, UtilityEstimate]:
        """The utility step (estimate_counts of the workload and the utility figures) as chunks."""
        raise NotImplementedError(f"technique '{self.name}' does not split its utility step")

    def one_piece(self, release: Release) -> bool:
        """True when this release is small enough for the flow to verify and evaluate it in one
        piece (what chunks would save is less than a task per chunk costs); the figures are the
        same. A split anonymize step always runs as its chunks."""
        return False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the chunked steps are the split hooks the class overrides: said once, in code
        chunked = frozenset(step.name for step in CHUNKED_STEPS if step.split_by(cls))
        if chunked != cls.capabilities.chunked:
            cls.capabilities = cls.capabilities.chunking(chunked)

    def prior_context(self, store: Any, spec: ReleaseSpec, before_sequence: int | None = None) -> PriorContext:
        """What this technique needs from earlier releases of the series (and public lists),
        loaded from the store before partitioning; it is put in `data.extra` and passed to
        `verify` (VerifyContext.prior). before_sequence: only releases before this one
        (re-verification)."""
        return {}

    def commit_hook(self, release: Release) -> Callable[[Any, str, int], None] | None:
        """Writes of this technique's own state for `release`, run by the store as
        hook(con, release_id, sequence) inside the release's commit transaction (None: none)."""
        return None

    def composition_views(self) -> list[str]:
        """The adversaries the series composition check plays, named by what each knows: one by
        default (all the QIs). A technique that protects several QIDs separately (Butterfly)
        names one per QID, and `composition_groups` returns each one's groups, view after view."""
        return ["the quasi-identifiers"]

    def composition_groups(self, data: Microdata, part: Partition) -> tuple[np.ndarray, int]:
        """The groups the series composition check (tasks/compose) takes: in each, the records an
        adversary who knows a person's QIs cannot tell apart from the person's (docs/series.md).
        By default the partition's; a technique whose tables narrow a person within its group
        returns finer ones (group per row, -1 = not published; the number of groups). With
        several `composition_views`, one group per row and view: view 0's n rows, then view 1's,
        ..., the groups numbered across all views."""
        return part.group, part.n_groups

    def utility(self, release: Release, data: Microdata) -> dict[str, float]:
        """Technique-specific utility figures (penalties, ILoss), beside the shared workload."""
        return {}

    def quality_view(self, release: Release) -> Any:
        """How the quality models (tasks/evaluate/quality.py, docs/utility.md) read the release: a
        QualityView, or the reason they do not apply (a str), recorded beside each figure."""
        return "the technique does not say how its published tables read as one row per record"

    def group_sizes(self, release: Release) -> np.ndarray | None:
        """QI-group sizes as the published tables show them (None when not meaningful)."""
        return None

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        """The published table and QI columns an adversary links records through, for the risk
        figures (tasks/risk/__init__.py); None when no published table has a row per record with its
        QIs (capabilities.risk_note then says which risk the technique reduces)."""
        return None

    def attribute_risk(self, release: Release) -> float | None:
        """The highest share of one sensitive value among the people an adversary links to one
        group, read from the published tables, when the risk table holds no sensitive column
        (None: from the risk table, or not computed)."""
        return None

    def attribute_table(self, release: Release) -> tuple[Any, list[str], str | None] | None:
        """For the attribute-gain figures (tasks/risk/__init__.py table_shares): the published table whose
        rows show the sensitive value, the columns naming the group an adversary places a
        person in, and the column of counts when a row stands for several (a count table, such
        as Anatomy's ST). None: the risk table and its QI columns, when it shows the sensitive
        column (an equivalence class is the group)."""
        return None

    def table_schemas(self, data_spec: ReleaseSpec) -> dict[str, Any]:
        """pandera schemas of the published tables, by table name."""
        return {}

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        """The report's words for this release (Description), from its privacy figures; `sensitive`
        names the sensitive column as the report says it. By default none: the report then says
        the generic figures' words, or capabilities.risk_note."""
        return Description()


def find_result(privacy: Sequence[PrivacyResult], model: str) -> PrivacyResult | None:
    """The first result of `model` among the privacy results (None: not computed)."""
    return next((r for r in privacy if r.model == model), None)


# --- the chunked steps: how the flow asks a technique for a step's chunks ----------------------

P = ParamSpec("P")
OutT = TypeVar("OutT")


@dataclass(frozen=True)
class ChunkedStep(Generic[P, OutT]):
    """A step a technique may split into chunks, typed by its inputs (P) and output.

    name:    the step's name in `capabilities.chunked`
    hook:    Technique's split hook of the step; a class splits the step when it overrides it
    planner: the technique's ChunkPlan of the step for these inputs, or None when `one_piece`
             says the step is cheaper whole
    whole:   the step in one piece
    """

    name: str
    hook: Callable[..., object]
    planner: Callable[Concatenate[Technique, P], ChunkPlan[Any, Any, OutT] | None]
    whole: Callable[Concatenate[Technique, P], OutT]

    def split_by(self, cls: type[Technique]) -> bool:
        """Whether the technique class overrides this step's split hook."""
        return getattr(cls, self.hook.__name__) is not self.hook

    def plan(self, technique: Technique, *args: P.args, **kwargs: P.kwargs) -> ChunkPlan[Any, Any, OutT] | None:
        """The step's chunks for the flow, or None: the step runs whole."""
        if self.name not in technique.capabilities.chunked:
            return None
        return self.planner(technique, *args, **kwargs)

    def run(self, technique: Technique, *args: P.args, **kwargs: P.kwargs) -> OutT:
        """The step, whole or as its chunks one after the other, here: the same output."""
        plan = self.plan(technique, *args, **kwargs)
        return plan.execute() if plan is not None else self.whole(technique, *args, **kwargs)


def _plan_anonymize(
    technique: Technique, data: Microdata, part: Partition, rng: np.random.Generator
) -> ChunkPlan[Any, Any, Release]:
    return technique.split_anonymize(data, part, rng)


def _plan_verify(
    technique: Technique, release: Release, context: VerifyContext
) -> ChunkPlan[Any, Any, list[PrivacyResult]] | None:
    return None if technique.one_piece(release) else technique.split_verify(release, context)


def _plan_utility(
    technique: Technique, release: Release, data: Microdata, workload: Any
) -> ChunkPlan[Any, Any, UtilityEstimate] | None:
    return None if technique.one_piece(release) else technique.split_utility(release, data, workload)


def _whole_anonymize(technique: Technique, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
    return technique.anonymize(data, part, rng)


def _whole_verify(technique: Technique, release: Release, context: VerifyContext) -> list[PrivacyResult]:
    return technique.verify(release, context)


def _whole_utility(technique: Technique, release: Release, data: Microdata, workload: Any) -> UtilityEstimate:
    return UtilityEstimate(technique.estimate_counts(release, workload), technique.utility(release, data))


ANONYMIZE = ChunkedStep("anonymize", Technique.split_anonymize, _plan_anonymize, _whole_anonymize)
VERIFY = ChunkedStep("verify", Technique.split_verify, _plan_verify, _whole_verify)
UTILITY = ChunkedStep("utility", Technique.split_utility, _plan_utility, _whole_utility)
CHUNKED_STEPS: tuple[ChunkedStep[Any, Any], ...] = (ANONYMIZE, VERIFY, UTILITY)


def unsupported(capabilities: Capabilities, name: str, spec: ReleaseSpec) -> str | None:
    """The start of the refusal of a spec whose dataset the capabilities do not cover (None: it
    publishes it), before any work; the registry ends it with the techniques that can."""
    dates = [q.name for q in spec.dataset.qi if q.kind == "date"]
    if dates and not capabilities.publishes_dates:
        return f"[dataset] qi '{dates[0]}': technique {name} does not publish dates yet"
    if spec.dataset.rows_per_person == "many" and not capabilities.many_rows_per_person:
        return f'[dataset] rows_per_person = "many": technique {name} does not protect people with several rows yet'
    return None

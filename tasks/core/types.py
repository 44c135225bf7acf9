"""The data a technique's steps pass each other, shared by flows, shared steps and techniques
(the Technique base class is in tasks/core/technique.py).

Frozen: a step that changes one builds a new one (`dataclasses.replace`), so a value handed to a
step (and, on Dask, to a worker) is the value every later step sees. Their mappings (`tables`,
`info`, `worst`, a prior context) are typed read-only (`Mapping`; `Release.private` excepted,
see there): the keys are each technique's own, the values whatever it keeps there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from privpub.tasks.core.microdata import Microdata


@dataclass(frozen=True)
class Partition:
    """A group id per row (0..n_groups-1), and, for Mondrian, the split tree."""

    group: np.ndarray  # (n,) int64
    n_groups: int
    tree: Any = None  # tasks.partition.mondrian.SplitTree or None
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sizes(self) -> np.ndarray:
        """Rows per group; rows with group -1 (suppressed) are not counted."""
        return np.bincount(self.group[self.group >= 0], minlength=self.n_groups)


@dataclass(frozen=True)
class Release:
    """What a technique produces.

    tables:  the published tables, written as <dir>/<release_id>/<name>.parquet
    private: metadata that verification of a randomized technique needs; stored in the state
             database with the release, never published
    info:    counts for the report (suppressed rows, groups, ...)
    """

    tables: Mapping[str, pa.Table]
    # a dict, not read-only: a technique's commit_hook moves its statistics out of it in place
    # (serial), and the commit then stores what is left (why it stays so: docs/ARCHITECTURE.md)
    private: dict[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)


# a technique's state from earlier releases of its series (Technique.prior_context), keyed by the
# technique's own names: read-only to the steps that receive it (data.extra, VerifyContext.prior)
PriorContext = Mapping[str, Any]


@dataclass(frozen=True)
class VerifyContext(Mapping[str, Any]):
    """What `Technique.verify` reads beside the release.

    data:   the validated input, at publish only (None when `privpub verify` re-checks a stored
            release): for measured figures such as disclosure rates, never for a pass / fail
            decision, which follows from the published tables, `private` and `prior` alone
    prior:  the technique's `prior_context` (its state from earlier releases of the series),
            keyed by the technique's own names
    stored: at re-verification, the stored release's row (sequence, series, ...)

    Read as a mapping it is `prior` with "data" beside it, so a technique may read
    `context.get("data")` or its own keys as from the dict this replaced; `VerifyContext.of`
    makes one from such a dict.
    """

    data: Microdata | None = None
    prior: PriorContext = field(default_factory=dict)
    stored: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, context: VerifyContext | Mapping[str, Any] | None) -> VerifyContext:
        """A context from a plain mapping ({"data": ..., prior keys}) or None (nothing known)."""
        if isinstance(context, VerifyContext):
            return context
        given = dict(context or {})
        return cls(given.pop("data", None), given)

    def __getitem__(self, key: str) -> Any:
        if key == "data" and self.data is not None:
            return self.data
        return self.prior[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.prior
        if self.data is not None and "data" not in self.prior:
            yield "data"

    def __len__(self) -> int:
        return sum(1 for _ in self)


ChunkT = TypeVar("ChunkT")
PieceT = TypeVar("PieceT")
OutT = TypeVar("OutT")


@dataclass
class ChunkPlan(Generic[ChunkT, PieceT, OutT]):
    """A step split into independent pieces: `combine(executor.map(run, chunks))` is the step's
    output. Typed by its chunk, what `run` gives for one chunk, and the step's output
    (`ChunkPlan[Any, Any, Release]` for anonymize: tasks/core/technique.py ChunkedStep).

    chunks:  one picklable input per piece; a piece may run in another process (a Dask worker),
             so it must not need anything outside its chunk
    run:     applied to each chunk, anywhere: a module-level function or a bound method of a
             picklable object (it travels to the workers with the chunks)
    combine: the results in chunk order -> the step's output; runs in the calling process
    """

    chunks: list[ChunkT]
    run: Callable[[ChunkT], PieceT]
    combine: Callable[[list[PieceT]], OutT]

    def execute(self, executor: Any = None) -> OutT:
        """The step's output, the chunks mapped on `executor` (None: one after the other, here)."""
        results = executor.map(self.run, self.chunks) if executor is not None else [self.run(c) for c in self.chunks]
        return self.combine(results)


class UtilityEstimate(NamedTuple):
    """The utility step's output (whole: Technique.estimate_counts and Technique.utility; or its
    chunks combined, Technique.split_utility)."""

    estimate: np.ndarray  # the estimated answers of the shared count workload
    figures: dict[str, float]  # the technique's own utility figures


def chunk_bounds(sizes: np.ndarray, chunk_rows: int) -> np.ndarray:
    """First group of every chunk, and n_groups at the end: consecutive groups are cut where their
    first row crosses a multiple of chunk_rows (a group larger than that is a chunk of its own)."""
    start = np.cumsum(sizes) - sizes
    cut = np.flatnonzero(np.diff(start // chunk_rows) > 0) + 1
    return np.concatenate([[0], cut, [len(sizes)]]).astype(np.int64)


@dataclass(frozen=True)
class PrivacyResult:
    """One privacy figure computed from the published tables, and whether it meets its threshold.

    `value` is what the report shows (an int, a float, or an exact fraction as a string);
    `worst` describes the worst group / person so a steward can look at it.
    """

    model: str
    value: Any
    threshold: Any
    passed: bool
    worst: Mapping[str, Any] = field(default_factory=dict)

"""Per-group checks (alpha-presence, beta-association) run over chunks of group ids.

Every table of an Ambiguity or PriView release carries `gid`, and each figure is the worst of
per-group (or per-ST-row) probabilities that depend on one group's rows only. So the verifier
splits the published tables by ranges of group ids (`split_by_groups`: a chunk holds the rows
of every table whose gid lies in its range, about `chunk_rows` rows in all), checks each chunk
alone (a Dask worker holds one chunk) and keeps the worst (`combine_worst`). Each chunk's worst
entry is named by where it sits in the whole release (its gid, or its row in ST), so the
combined worst is the entry the one-step check picks among equal values: the first one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.types import ChunkPlan, PrivacyResult, Release, VerifyContext, chunk_bounds


@dataclass
class GroupChunk:
    """The rows of each published table whose gid lies in one range, and their positions in
    the whole table (ascending: a chunk keeps the tables' row order)."""

    tables: dict[str, pa.Table]
    rows: dict[str, np.ndarray]

    # Sent to a worker as Arrow IPC streams: pickled Arrow buffers can arrive unaligned on a Dask
    # worker (Acero then warns, and may copy, at every group_by); IPC pads every buffer.
    def __getstate__(self) -> dict[str, Any]:
        return {"tables": {name: _ipc_bytes(t) for name, t in self.tables.items()}, "rows": self.rows}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.tables = {name: pa.ipc.open_stream(b).read_all() for name, b in state["tables"].items()}
        self.rows = state["rows"]


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()  # pyarrow is untyped
    return data


@dataclass
class Worst:
    """One chunk's share of a figure: its worst entry and counts that add up over chunks.

    at: the worst entry's place in the whole release (its gid, or its ST row), None when the
    chunk has no entry; among equal values the smallest place wins, as in the one-step check."""

    model: str
    threshold: Fraction
    failing: str  # the count that decides the verdict (entries above the threshold)
    value: Fraction
    at: int | None
    counts: dict[str, int]
    detail: dict[str, Any] = field(default_factory=dict)


def combine_worst(parts: list[Worst]) -> PrivacyResult:
    """The figure of the whole release from its chunks' parts (any order)."""
    first = parts[0]
    counts = {name: sum(p.counts[name] for p in parts) for name in first.counts}
    ranked = [((p.value, -p.at), p) for p in parts if p.at is not None]
    worst = max(ranked, key=lambda r: r[0])[1] if ranked else None
    return PrivacyResult(
        first.model,
        str(worst.value if worst else Fraction(0)),
        str(first.threshold),
        counts[first.failing] == 0,
        {**counts, **(worst.detail if worst else {})},
    )


def split_by_groups(tables: dict[str, pa.Table], chunk_rows: int) -> list[GroupChunk]:
    """Consecutive ranges of group ids holding about chunk_rows published rows each (a group
    with more rows is a chunk of its own); at least one chunk, even for empty tables."""
    gids = {name: t.column("gid").to_numpy().astype(np.int64) for name, t in tables.items()}
    values, rows_per_gid = np.unique(np.concatenate(list(gids.values())), return_counts=True)
    bounds = chunk_bounds(rows_per_gid, chunk_rows)
    if len(bounds) <= 2:  # one chunk: the tables as they are
        return [GroupChunk(dict(tables), {name: np.arange(len(g)) for name, g in gids.items()})]
    order = {name: np.argsort(g, kind="stable") for name, g in gids.items()}
    by_gid = {name: g[order[name]] for name, g in gids.items()}
    chunks = []
    for first, end in zip(bounds[:-1], bounds[1:]):
        rows = {}
        for name, g in by_gid.items():
            a, b = np.searchsorted(g, values[first], "left"), np.searchsorted(g, values[end - 1], "right")
            rows[name] = np.sort(order[name][a:b])
        chunks.append(GroupChunk({name: tables[name].take(rows[name]) for name in tables}, rows))
    return chunks


def combine_figures(results: list[list[Worst]]) -> list[PrivacyResult]:
    """Each figure's worst case over the chunks."""
    return [combine_worst(list(parts)) for parts in zip(*results)]


class GroupChunkedVerify:
    """Technique's verify hooks (split_verify, one_piece) for a per-group verifier. A subclass
    names the tables its verifier reads (`verified_tables`) and checks one chunk (`check_chunk`
    -> [Worst] per figure); `verify` runs the chunks one after the other, so `privpub verify`
    and the flow (chunks on the task runner) go through the same code. A release of at most
    `[run] chunk_rows` published rows is checked in one step by the flow (no chunk tasks)."""

    spec: ReleaseSpec  # set by the Technique it is mixed into

    def verified_tables(self, release: Release) -> dict[str, pa.Table]:
        raise NotImplementedError

    def check_chunk(self, chunk: GroupChunk) -> list[Worst]:
        raise NotImplementedError

    def one_piece(self, release: Release) -> bool:
        tables = self.verified_tables(release)
        rows: int = sum(t.num_rows for t in tables.values())  # pyarrow is untyped
        return rows <= self.spec.run.chunk_rows

    def split_verify(
        self, release: Release, context: VerifyContext
    ) -> ChunkPlan[GroupChunk, list[Worst], list[PrivacyResult]]:
        chunks = split_by_groups(self.verified_tables(release), self.spec.run.chunk_rows)
        return ChunkPlan(chunks, self.check_chunk, combine_figures)

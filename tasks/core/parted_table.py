"""A published table written as a folder of Parquet parts: `<name>/part-00000.parquet`, ...

A release built on a Dask cluster never holds its whole table in one process: each worker's
part comes back to the flow, is written at once, and is forgotten. Readers (the verifier,
`privpub verify`, an analyst) accept either shape: `<name>.parquet` or `<name>/part-*.parquet`
(`read_published`). The folder's fingerprint is `state.store.sha256_files` over its parts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privpub.tasks.core.executor import Executor, as_executor

PART_GLOB = "part-*.parquet"


def part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


class StagingFolder(Protocol):
    """A private staging folder of the state store (state.store.StagedFiles)."""

    @property
    def path(self) -> Path: ...

    def discard(self) -> None: ...


class PartedTable:
    """The parts of one published table in `folder`, in name order (the row order)."""

    def __init__(self, folder: Path, executor: Executor | None = None, client: Any = None):
        self.folder = Path(folder)
        # where part-wise work runs: the run's executor (a Dask client is taken as one)
        self.executor = as_executor(executor if executor is not None else client)
        self.draft: StagingFolder | None = None  # the folder it was written in, until staged
        # equivalence-class sizes, kept by its verification for the group-size figures (tasks/verify/parted.py)
        self.class_sizes: np.ndarray | None = None

    @property
    def parts(self) -> list[Path]:
        return sorted(self.folder.glob(PART_GLOB))

    @property
    def num_rows(self) -> int:
        return sum(pq.ParquetFile(p).metadata.num_rows for p in self.parts)

    @property
    def schema(self) -> pa.Schema:
        return pq.read_schema(self.parts[0])

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    def iter_tables(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        for p in self.parts:
            yield pq.read_table(p, columns=columns)

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """The whole table in this process (small tables, tests)."""
        return pa.concat_tables(list(self.iter_tables(columns)))


def read_published(path: Path) -> pa.Table | PartedTable:
    """A published table as it was written: a Parquet file, or a folder of parts."""
    path = Path(path)
    return PartedTable(path) if path.is_dir() else pq.read_table(path)


def read_part(source: str | pa.Table) -> pa.Table:
    return pq.read_table(source) if isinstance(source, str) else source


def part_sources(parted: PartedTable) -> list[Any]:
    """What each part's work reads: the file's path if every worker sees it, else the table,
    placed on the workers."""
    paths = [str(p) for p in parted.parts]
    ex = parted.executor
    if not paths or all(ex.on_every_worker(os.path.isfile, paths[0])):
        return paths
    return [ex.scatter(pq.read_table(p)) for p in paths]


def map_parts(parted: PartedTable, fn: Callable[..., Any], *args: Any) -> list[Any]:
    """fn(table of one part, *args) for every part, on the table's executor: results in part order."""
    ex = parted.executor
    return ex.gather([ex.submit(on_part, fn, s, *args) for s in part_sources(parted)])


def on_part(fn: Callable[..., Any], source: str | pa.Table, *args: Any) -> Any:
    return fn(read_part(source), *args)

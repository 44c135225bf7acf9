"""A published table written as a folder of Parquet parts: `<name>/part-00000.parquet`, ...

A release built on a Dask cluster never holds its whole table in one process: each worker's
part comes back to the flow, is written at once, and is forgotten. Readers (the verifier,
`privpub verify`, an analyst) accept either shape: `<name>.parquet` or `<name>/part-*.parquet`
(`read_published`). The folder's fingerprint is `state.store.sha256_files` over its parts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

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

    def __init__(self, folder: Path, client=None):
        self.folder = Path(folder)
        self.client = client  # a Dask client: part-wise work runs on its workers
        self.draft: StagingFolder | None = None  # the folder it was written in, until staged

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
        return self.schema.names

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


def publish_parts(data, cpart, k: int, l: int | None, rng, output_dir: Path):
    """The subtrees of a distributed Mondrian finished on the cluster, each node's rows written as
    one part, in node order, into a private staging folder of their own (moved into the release's
    staging folder by stage_tables; deleted if the release never gets there)."""
    import weakref

    from privpub.state.store import open_staging
    from privpub.tasks.cluster.partition import finish_on_cluster

    draft = open_staging(output_dir)
    folder = draft.path / "table"
    folder.mkdir()

    def write_part(index: int, table: pa.Table) -> None:
        pq.write_table(table, folder / part_name(index))

    try:
        sizes = finish_on_cluster(data, cpart, k, l, rng, write_part)
    except BaseException:
        draft.discard()
        raise
    parted = PartedTable(folder)
    parted.draft = draft
    parted.client = data.client  # its verification and evaluation run on the same cluster
    weakref.finalize(parted, draft.discard)
    return parted, sizes

"""An Arrow table that travels to a Dask worker as Arrow IPC (chunks of verify, utility and the
cluster path carry one)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa


class CompactTable:
    """An Arrow table (often a slice) that pickles as Arrow IPC: only the slice's bytes travel to
    a Dask worker (pickling a slice itself copies the whole buffers under it)."""

    def __init__(self, table: pa.Table):
        self.table = table

    def __reduce__(self) -> tuple[Callable[[pa.Buffer], CompactTable], tuple[pa.Buffer]]:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.table.schema) as writer:
            writer.write_table(self.table)
        return _from_ipc, (sink.getvalue(),)


def _from_ipc(buffer: pa.Buffer) -> CompactTable:
    return CompactTable(pa.ipc.open_stream(buffer).read_all())

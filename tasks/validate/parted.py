"""A partitioned Parquet input read, validated and coded on a Dask cluster, never whole in one
process.

Each file is one partition. A worker reads it, checks it with the same pandera schema as the
in-memory path (a problem is named by file, then by row inside that file), and keeps it as small
integer codes against the file's own distinct values. The flow combines the distinct values of
all files into the global domains (the codes must be global: Mondrian's medians and widths are
over the whole table), and every worker maps its local codes onto them. Person ids are checked
unique across files by hash buckets (a repeated hash is confirmed on the ids themselves).
What stays on the workers per row: one int32 per QI and one for the sensitive value, and the
person id as text (for the series composition, tasks/compose/cluster.py).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from privpub.schemas.errors import InputError
from privpub.schemas.input import (
    check_frame_types,
    check_typed_cells,
    input_files,
    near_unique_error,
    refuse_mixed_schemas,
    validate_input,
)
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.executor import Executor, as_executor
from privpub.tasks.core.microdata import (
    HasDomains,
    Microdata,
    QIDomain,
    distinct_values,
    domain_from_distinct,
    merge_distinct,
    person_text,
)

ID_BUCKETS = 16


@dataclass
class LocalPart:
    """One file's rows as codes into the file's own distinct values."""

    n: int
    local_codes: list[np.ndarray]  # per QI, int32 into `uniques[j]`
    uniques: list[np.ndarray]
    s_codes: np.ndarray
    s_uniques: np.ndarray
    person: pa.Array  # the person ids as text (the series composition's key)


@dataclass
class CodedPart:
    """One file's rows coded against the global domains: what the workers keep."""

    xt: np.ndarray  # (D, n) int32
    s: np.ndarray  # (n,) int32
    person: pa.Array

    @property
    def n(self) -> int:
        return len(self.s)


def _read_file(path: Path, spec: ReleaseSpec) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # its class only: a reader's message may quote data
        raise InputError(f"cannot read {path.name}: {type(exc).__name__} (is it a valid Parquet file?)") from None


def scan_part(path: str | Path, spec: ReleaseSpec) -> tuple[LocalPart, dict[str, Any], list[np.ndarray]]:
    """On a worker: read and validate one file. Returns (LocalPart, summary, id-hash buckets);
    the summary (rows, distinct values, which numeric QIs are integers) goes to the flow."""
    path = Path(path)
    ds = spec.dataset
    problem = None
    try:
        raw = _read_file(path, spec)
        check_typed_cells(raw, spec)  # Parquet is typed: its cells are values as they are
        frame = validate_input(raw, spec)
        check_frame_types(raw, spec, "Parquet")
    except InputError as exc:
        problem = f"{path.name}: {exc}"
    if problem:  # raised outside the handler: no chained error (pandera's holds rows) is pickled
        raise InputError(problem)
    local_codes, uniques, distinct = [], [], []
    for q in ds.qi:
        col = frame[q.name]
        if q.kind == "numeric":
            u, inv = np.unique(col.to_numpy(dtype=float), return_inverse=True)
        else:
            inv, labels = pd.factorize(col.astype(str))
            u = np.asarray(labels, dtype=object)
        local_codes.append(inv.astype(np.int32))
        uniques.append(u)
        distinct.append(distinct_values(q, pd.Series(u)))
    s_codes, s_uniques = pd.factorize(frame[ds.sensitive], sort=True)
    integer = {q.name: bool(pd.api.types.is_integer_dtype(frame[q.name].dtype)) for q in ds.qi if q.kind == "numeric"}
    hashes = pd.util.hash_array(frame[ds.person_id].to_numpy())
    bucket = hashes % ID_BUCKETS
    buckets = [hashes[bucket == b] for b in range(ID_BUCKETS)]
    local = LocalPart(
        len(frame),
        local_codes,
        uniques,
        s_codes.astype(np.int32),
        np.asarray(s_uniques),
        person_text(frame[ds.person_id]),
    )
    # the values present of a QI whose domain the spec fixes (an order or a hierarchy): only for
    # counting its distinct values (the near-unique check), never kept
    present = {q.name: np.unique(np.asarray(u).astype(str)) for q, u, d in zip(ds.qi, uniques, distinct) if d is None}
    summary = {
        "n": len(frame),
        "distinct": distinct,
        "present": present,
        "s_values": np.asarray(s_uniques),
        "integer": integer,
    }
    return local, summary, buckets


def repeated_hashes(*buckets: np.ndarray) -> np.ndarray:
    """On a worker: the hashes that occur more than once in one bucket of every file."""
    values, counts = np.unique(np.concatenate(buckets), return_counts=True)
    return values[counts > 1]


def ids_with_hashes(path: str, spec: ReleaseSpec, hashes: np.ndarray) -> pd.DataFrame:
    """On a worker (only when a hash repeats): the rows of one file whose id has those hashes."""
    ids = _read_file(Path(path), spec)[spec.dataset.person_id]
    hit = np.flatnonzero(np.isin(pd.util.hash_array(ids.to_numpy()), hashes))
    return pd.DataFrame({"id": ids.to_numpy()[hit], "row": hit + 1, "file": Path(path).name})


def code_part(local: LocalPart, domains: list[QIDomain], s_values: np.ndarray) -> CodedPart:
    """On a worker: local codes -> global codes (the same mapping as tasks.microdata.encode)."""
    xt = np.empty((len(domains), local.n), dtype=np.int32)
    for j, dom in enumerate(domains):
        if dom.kind == "numeric":
            lookup = np.searchsorted(dom.values, local.uniques[j].astype(float))
        else:
            lookup = pd.Index(np.asarray(dom.values, dtype=object).astype(str)).get_indexer(
                pd.Index(local.uniques[j]).astype(str)
            )
        xt[j] = lookup[local.local_codes[j]]
    s = pd.Index(s_values).get_indexer(local.s_uniques)[local.s_codes]
    return CodedPart(xt, s.astype(np.int32), local.person)


def _code_part(local: LocalPart, meta: tuple[list[QIDomain], np.ndarray]) -> CodedPart:
    return code_part(local, *meta)


class PartedData(HasDomains):
    """The input as coded partitions kept where the run's executor works (Dask workers; or this
    process); the flow keeps only the domains.

    Offers what the flow and the checks read from Microdata (n, domains, sensitive values,
    extra) plus the partitions (`parts`, handles of CodedPart in file order, on `executor`)."""

    in_parts = True  # the rows stay in `parts`: steps send their work to them (HasDomains)

    def __init__(
        self,
        spec: ReleaseSpec,
        executor: Executor,
        files: list[str],
        parts: list[Any],
        sizes: list[int],
        domains: list[QIDomain],
        s_values: np.ndarray,
        integer: dict[str, bool],
    ) -> None:
        self.spec, self.executor, self.files = spec, executor, files
        self.parts, self.sizes = parts, np.asarray(sizes, dtype=np.int64)
        self.domains, self.sensitive_values, self.integer = domains, s_values, integer
        self.extra: dict[str, Any] = {}

    @property
    def n(self) -> int:
        return int(self.sizes.sum())

    # a row is a person: rows_per_person = "many" is refused on the cluster path (schemas/spec.py)
    person = None

    @property
    def people(self) -> int:
        return self.n

    def collect(self) -> Microdata:
        """Every row in this process, as Microdata (small tables and tests only)."""
        parts = self.executor.gather(self.parts)
        xt = np.concatenate([p.xt for p in parts], axis=1)
        return Microdata.from_codes(
            self.spec,
            self.domains,
            np.ascontiguousarray(xt.T),
            self.sensitive_values,
            np.concatenate([p.s for p in parts]),
            self.integer,
        )


def _duplicate_message(found: pd.DataFrame) -> str | None:
    repeated = found[found["id"].duplicated(keep=False)]
    if repeated.empty:
        return None  # only the hashes collided
    first_id = repeated["id"].iloc[0]
    a, b = repeated[repeated["id"] == first_id].iloc[:2].itertuples()
    return (
        f"input rejected: {b.file} row {b.row}, column person id: repeats the person id of "
        f"{a.file} row {a.row} (person ids must be unique)"
    )


def load_on_cluster(spec: ReleaseSpec, where: Executor | Any) -> PartedData:
    """Read, validate and code every file of `[dataset] input` where `where` works: an executor
    (the run's), or a distributed Client. Each file is read by one piece of work."""
    ex = as_executor(where)
    paths = input_files(spec)
    if len(paths) > 1:  # one type per column over the files (metadata only), as in memory
        refuse_mixed_schemas(paths, spec)
    files = [str(p) for p in paths]
    scanned = [ex.submit(scan_part, f, spec) for f in files]
    locals_ = [ex.submit(operator.getitem, f, 0) for f in scanned]
    summaries = ex.gather([ex.submit(operator.getitem, f, 1) for f in scanned])
    buckets = [
        [ex.submit(operator.getitem, ex.submit(operator.getitem, f, 2), b) for f in scanned] for b in range(ID_BUCKETS)
    ]
    del scanned
    repeats = np.concatenate(ex.gather([ex.submit(repeated_hashes, *b) for b in buckets]))
    del buckets
    if len(repeats):
        found = pd.concat(ex.gather([ex.submit(ids_with_hashes, f, spec, repeats) for f in files]), ignore_index=True)
        message = _duplicate_message(found)
        if message:
            raise InputError(message)
    ds = spec.dataset
    domains = [
        domain_from_distinct(q, merge_distinct([s["distinct"][j] for s in summaries])) for j, q in enumerate(ds.qi)
    ]
    counts = {
        q.name: len(dom.values)
        if summaries[0]["distinct"][j] is not None
        else len(np.unique(np.concatenate([s["present"][q.name] for s in summaries])))
        for j, (q, dom) in enumerate(zip(ds.qi, domains))
    }
    error = near_unique_error(ds, counts, sum(s["n"] for s in summaries))  # rows are people: no "many" on Dask
    if error is not None:
        raise error
    s_values = np.unique(np.concatenate([s["s_values"] for s in summaries]))
    integer = {name: all(s["integer"][name] for s in summaries) for name in summaries[0]["integer"]}
    meta = ex.scatter((domains, s_values), broadcast=True)
    parts = [ex.submit(_code_part, f, meta) for f in locals_]
    del locals_
    sizes = [s["n"] for s in summaries]
    return PartedData(spec, ex, files, parts, sizes, domains, s_values, integer)

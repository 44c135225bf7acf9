"""Step 1: read the input, check it against the spec, fingerprint it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pandas as pd

from privpub.schemas.errors import InputError
from privpub.schemas.input import (
    check_frame_types,
    check_typed_cells,
    checked_rows,
    files_root,
    input_files,
    input_text,
    is_frame_input,
    near_unique_error,
    read_input,
    typed_source,
)
from privpub.schemas.spec import ReleaseSpec
from privpub.state.store import sha256_file, sha256_files
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.threads import beside, rows_in_bytes


def input_fingerprint(spec: ReleaseSpec) -> str:
    """sha256 of the input file's bytes; for a folder or glob of Parquet files, `sha256_files`
    over them (their names relative to their common folder, sizes and bytes)."""
    files = input_files(spec)
    if len(files) == 1 and not spec.path(input_text(spec)).is_dir():
        return sha256_file(files[0])
    return sha256_files(files, files_root(files))


def frame_fingerprint(frame: pd.DataFrame) -> str:
    """A DataFrame's fingerprint: sha256 over its columns' names and dtypes (JSON) and pandas'
    64-bit hash of each row (`hash_pandas_object(frame, index=False)`, in row order). The same
    frame gives the same fingerprint in any process; a changed cell, column or row order another."""
    try:
        rows = pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()
    except TypeError:  # a cell pandas cannot hash (a list, a dict): its class only, never the value
        raise InputError("input rejected: the DataFrame holds cells that are not values (lists, dicts?)") from None
    columns = json.dumps([[str(name), str(dtype)] for name, dtype in frame.dtypes.items()])
    return hashlib.sha256(b"privpub DataFrame\0" + columns.encode() + b"\0" + rows).hexdigest()


def fingerprint(spec: ReleaseSpec, frame: pd.DataFrame) -> str:
    """The input's fingerprint (input_fingerprint), a DataFrame's (frame_fingerprint), or a hash
    of the table's rows when read from DuckDB."""
    if is_frame_input(spec):
        return frame_fingerprint(frame)
    if spec.dataset.input:
        return input_fingerprint(spec)
    return hashlib.sha256(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()).hexdigest()


def load_input(spec: ReleaseSpec) -> tuple[pd.DataFrame, str]:
    if spec.dataset.input and not is_frame_input(spec):  # the file's bytes hashed while it is read
        size = sum(f.stat().st_size for f in input_files(spec))
        with beside(rows_in_bytes(size), "privpub-fingerprint") as submit:
            fp = submit(input_fingerprint, spec)
            frame = read_input(spec)  # its error, if any, is the one raised
            return frame, fp.result()
    frame = read_input(spec)
    return frame, fingerprint(spec, frame)


def validate(frame: pd.DataFrame, spec: ReleaseSpec, technique: Technique | None) -> Microdata:
    """The rows checked against the spec's schema, then against the technique's parameters
    (technique None: not yet; `privpub explore` asks each setting's technique in turn)."""
    typed = typed_source(spec)
    if typed:  # a typed input's cells are values as they are: never converted
        check_typed_cells(frame, spec)
    valid, dropped = checked_rows(frame, spec)
    if typed:
        check_frame_types(frame, spec, typed)
    data = Microdata.from_frame(spec, valid)
    error = near_unique_error(spec.dataset, qi_value_counts(data), data.people)
    if error is not None:  # a name or an id among the QIs: refused before any technique runs
        raise error
    data.dropped_rows = dropped
    if technique is None:
        return data
    try:
        technique.check_data(data)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return data


def qi_value_counts(data: Microdata) -> dict[str, int]:
    """Each QI's distinct values as the release reads them (a date in its unit, an empty category
    one value): the codes in use, counted with one bincount per QI."""
    return {
        dom.name: int(np.count_nonzero(np.bincount(data.codes[:, j], minlength=1)))
        for j, dom in enumerate(data.domains)
    }


# Input the CLI already read and validated in this process, for the flow it then runs (a 1M-row
# CSV costs seconds to read and validate). Keyed by the spec and the file's identity, so a file
# changed in between, or another spec, is read again.
_CHECKED: dict[tuple[Any, ...], tuple[pd.DataFrame, str, Microdata]] = {}


def _input_key(spec: ReleaseSpec) -> tuple[Any, ...] | None:
    if not spec.dataset.input or is_frame_input(spec):
        return None
    stats = [p.stat() for p in input_files(spec)]
    return (spec.model_dump_json(), *((st.st_ino, st.st_size, st.st_mtime_ns) for st in stats))


def validate_and_keep(spec: ReleaseSpec, technique: Technique | None) -> Microdata:
    """Read and validate now, and keep the result for this process's next run of the same spec."""
    frame, fp = load_input(spec)
    data = validate(frame, spec, technique)
    key = _input_key(spec)
    if key is not None:
        _CHECKED.clear()
        _CHECKED[key] = (frame, fp, data)
    return data


def checked_input(spec: ReleaseSpec) -> tuple[pd.DataFrame, str, Microdata] | None:
    """The input validate_and_keep kept for this spec, if the file is unchanged (used once)."""
    try:
        key = _input_key(spec)
    except (OSError, InputError):
        return None
    return _CHECKED.pop(key, None) if key is not None else None

"""Step 1: read the input, check it against the spec, fingerprint it."""
from __future__ import annotations

import hashlib

import pandas as pd

from schemas.input import InputError, read_input, validate_input
from schemas.spec import ReleaseSpec
from tasks.microdata import Microdata


def fingerprint(spec: ReleaseSpec, frame: pd.DataFrame) -> str:
    """sha256 of the input file's bytes (or of the table's rows when read from DuckDB)."""
    if spec.dataset.input:
        h = hashlib.sha256()
        with open(spec.path(spec.dataset.input), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    return hashlib.sha256(pd.util.hash_pandas_object(frame, index=False).values.tobytes()).hexdigest()


def load_input(spec: ReleaseSpec) -> tuple[pd.DataFrame, str]:
    frame = read_input(spec)
    return frame, fingerprint(spec, frame)


def validate(frame: pd.DataFrame, spec: ReleaseSpec, technique) -> Microdata:
    data = Microdata.from_frame(spec, validate_input(frame, spec))
    try:
        technique.check_data(data)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return data

"""Issue 40, typed steps: the data a technique's steps pass each other is frozen
(tasks/core/types.py), and verify reads a typed VerifyContext that still reads as the dict it
replaced."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from privpub.tasks.core.types import Partition, PrivacyResult, Release, VerifyContext


def test_the_step_types_are_frozen():
    part = Partition(np.zeros(3, dtype=np.int64), 1)
    release = Release({"table": pa.table({"a": [1]})})
    result = PrivacyResult("k-anonymity", 3, 2, True)
    for value, name in ((part, "n_groups"), (release, "tables"), (result, "passed")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, None)
    changed = dataclasses.replace(result, passed=False, worst={"gid": 1})
    assert (changed.passed, dict(changed.worst), result.passed, dict(result.worst)) == (False, {"gid": 1}, True, {})


def test_a_verify_context_from_a_dict_and_as_one():
    data = object()
    context = VerifyContext.of({"data": data, "serial_own": {"x": 1}})
    assert context.data is data and dict(context.prior) == {"serial_own": {"x": 1}} and context.stored is None
    assert context["data"] is data and context.get("serial_own") == {"x": 1} and context.get("other") is None
    assert set(context) == {"serial_own", "data"} and len(context) == 2
    empty = VerifyContext.of(None)
    assert empty.data is None and "data" not in empty and empty.get("data") is None and not empty
    assert VerifyContext.of(context) is context
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.data = None  # type: ignore[misc]

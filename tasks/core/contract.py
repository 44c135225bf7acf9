"""A technique's contract case (issue 40): how the contract battery (privpub.testing,
tests/test_contract.py) specifies it and how one published row breaks its privacy model.

Each technique folder holds its cases in `contract.py` as `CONTRACTS = {"<name>": Contract(...)}`;
the battery collects them from the registered techniques. The generic tampers below alter one
published row of the table shapes several techniques share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Tables = dict[str, pa.Table]
# one published row altered (private: the release's private metadata), the other tables unchanged
Tamper = Callable[[Tables, Mapping[str, Any]], Tables]


@dataclass(frozen=True)
class Contract:
    """One technique's case in the battery, over the census demo table (tasks/demo_data.py)."""

    params: Mapping[str, Any]  # [technique] besides its name
    required: tuple[str, ...]  # each refused when missing
    tamper: Tamper  # one published row altered so that the privacy model no longer holds
    series_figure: str  # the privacy figure of a second release that accounts for the first
    sensitive: str = "occupation"
    # the battery's brute-force series adversary (tests/series_linker.py) applies: it knows every
    # QI of a person, as this model's adversary does
    linkable: bool = False
    qi: tuple[str, ...] | None = None  # the census QIs the spec declares (None: all of them)
    extra: Mapping[str, Any] = field(default_factory=dict)  # further spec sections


def narrow_interval(column: str, table_name: str = "table") -> Tamper:
    """The first record's `<column>_lo` / `<column>_hi` range narrowed to its lower end: its class
    now holds it alone (a generalized table)."""

    def tamper(tables: Tables, private: Mapping[str, Any]) -> Tables:
        table = tables[table_name]
        hi = np.array(table.column(f"{column}_hi").to_numpy(zero_copy_only=False), copy=True)
        hi[0] = table.column(f"{column}_lo")[0].as_py()
        at = table.schema.get_field_index(f"{column}_hi")
        altered = table.set_column(at, f"{column}_hi", pa.array(hi, table.schema.field(at).type))
        return {**tables, table_name: altered}

    return tamper


def raise_count(table_name: str = "ST", column: str = "count") -> Tamper:
    """A count table's first row counts its sensitive value once more than the group holds it."""

    def tamper(tables: Tables, private: Mapping[str, Any]) -> Tables:
        st = tables[table_name]
        at = st.schema.get_field_index(column)
        kind = st.schema.field(at).type
        counts = pc.add(st.column(column), pa.array(np.arange(st.num_rows) == 0).cast(kind))
        return {**tables, table_name: st.set_column(at, column, counts.cast(kind))}

    return tamper

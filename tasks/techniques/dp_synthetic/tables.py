"""The attributes dp-synthetic measures, coded against PUBLIC domains only (docs/dp.md), and the
published tables: the synthetic table in the generalized table's shape (a numeric QI as its bin's
<qi>_lo / <qi>_hi, any other QI as a one-value list, the sensitive value) and the mechanism table
(one row per measurement: what verify recomputes the privacy loss from)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pdx
import pyarrow as pa

from privpub.schemas.dates import date32
from privpub.schemas.spec import ReleaseSpec, sensitive_leaves
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.techniques.dp_synthetic.mst import Measurement
from privpub.tasks.techniques.dp_synthetic.params import DPSyntheticParams


@dataclass(frozen=True)
class Attribute:
    name: str
    codes: np.ndarray  # (n,) code per input row
    labels: pa.Array | None  # the published value of each code (None: a numeric bin)
    lo: Any = None  # a numeric bin's published range (numpy; dates: Arrow date32)
    hi: Any = None

    @property
    def size(self) -> int:
        return len(self.labels) if self.labels is not None else len(self.lo)


def numeric_attribute(data: Microdata, name: str, edges: list[float]) -> Attribute:
    """Bins from the declared edges; values outside them clamped into the end bins (a function of
    each row alone: no look at the data's range)."""
    cut = np.asarray(edges, dtype=float)
    values = data.frame[name].to_numpy(dtype=float)
    codes = np.clip(np.searchsorted(cut, values, side="right") - 1, 0, len(cut) - 2)
    dtype = data.frame[name].dtype
    if data.domain(name).unit:  # a date QI (day numbers): each bin's first and last day
        lo, hi = _whole_ranges(cut)
        return Attribute(name, codes, None, date32(lo), date32(hi))
    if isinstance(dtype, np.dtype) and np.issubdtype(dtype, np.integer):  # whole numbers: [lo, hi] inclusive
        return Attribute(name, codes, None, *_whole_ranges(cut))
    return Attribute(name, codes, None, cut[:-1], cut[1:])


def _whole_ranges(cut: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bins [e_i, e_i+1) of whole numbers as inclusive ranges (the last one closed at its edge)."""
    lo = np.array([math.ceil(e) for e in cut[:-1]], dtype=np.int64)
    hi = np.array([math.ceil(e) - 1 for e in cut[1:-1]] + [math.floor(cut[-1])], dtype=np.int64)
    return lo, np.maximum(hi, lo)


def attributes(data: Microdata, params: DPSyntheticParams) -> list[Attribute]:
    """The QIs in spec order, then the sensitive column, coded against their public domains
    (check_params has refused a spec whose domains are not public, unless categories = "from-data")."""
    out = []
    for j, dom in enumerate(data.domains):
        edges = params.edges(dom.name)
        if dom.kind == "numeric" and edges is not None:
            out.append(numeric_attribute(data, dom.name, edges))
        else:  # ordinal, categorical: the order or hierarchy's leaves (or, from-data, the data's values)
            labels = pa.array(np.asarray(dom.values, dtype=object).astype(str))
            out.append(Attribute(dom.name, data.codes[:, j].astype(np.int64), labels))
    ds = data.spec.dataset
    declared = sensitive_leaves(ds)
    if declared is not None:
        lookup = pd.Index(declared).get_indexer(pd.Index(data.sensitive_values).astype(str))
        codes = lookup[data.sensitive_codes]
        out.append(Attribute(ds.sensitive, codes.astype(np.int64), pa.array(declared)))
    else:
        out.append(Attribute(ds.sensitive, data.sensitive_codes.astype(np.int64), pa.array(data.sensitive_values)))
    return out


def synthetic_table(attrs: list[Attribute], codes: np.ndarray) -> pa.Table:
    columns: dict[str, pa.Array] = {}
    n = len(codes)
    for a, attr in enumerate(attrs):
        c = codes[:, a]
        if attr.labels is None:
            columns[f"{attr.name}_lo"] = _take(attr.lo, c)
            columns[f"{attr.name}_hi"] = _take(attr.hi, c)
        elif a == len(attrs) - 1:  # the sensitive column: a plain value
            columns[attr.name] = attr.labels.take(pa.array(c))
        else:
            offsets = pa.array(np.arange(n + 1, dtype=np.int32))
            columns[attr.name] = pa.ListArray.from_arrays(offsets, attr.labels.take(pa.array(c)))
    return pa.table(columns)


def _take(values: Any, codes: np.ndarray) -> pa.Array:
    if isinstance(values, pa.Array):  # dates
        return values.take(pa.array(codes))
    return pa.array(values[codes])


MECHANISM_COLUMNS = ("step", "attributes", "sigma", "exp_epsilon", "sensitivity", "rho")


def mechanism_table(attrs: list[Attribute], record: list[Measurement]) -> pa.Table:
    return pa.table(
        {
            "step": [m.step for m in record],
            "attributes": [" x ".join(attrs[a].name for a in m.attributes) for m in record],
            "sigma": pa.array([m.sigma for m in record], pa.float64()),
            "exp_epsilon": pa.array([m.exp_epsilon for m in record], pa.float64()),
            "sensitivity": pa.array([m.sensitivity for m in record], pa.float64()),
            "rho": pa.array([m.rho for m in record], pa.float64()),
        }
    )


def mechanism_schema() -> Any:
    steps = pdx.Check.isin(["one-way", "select", "two-way"])
    return pdx.DataFrameSchema(
        {
            "step": pdx.Column(checks=steps),
            "attributes": pdx.Column(nullable=False),
            "sigma": pdx.Column(float, nullable=True),
            "exp_epsilon": pdx.Column(float, nullable=True),
            "sensitivity": pdx.Column(float, pdx.Check.gt(0)),
            "rho": pdx.Column(float, pdx.Check.ge(0)),
        },
        strict=True,
    )


def published_domains(spec: ReleaseSpec) -> list[str]:
    """The QIs (and sensitive column) whose values the spec does not declare."""
    ds = spec.dataset
    missing = [q.name for q in ds.qi if q.kind == "categorical" and not q.order and not isinstance(q.hierarchy, dict)]
    if sensitive_leaves(ds) is None:
        missing.append(ds.sensitive)
    return missing

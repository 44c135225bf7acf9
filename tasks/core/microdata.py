"""Validated input in the shape the algorithms use: integer codes per quasi-identifier.

Every QI gets a domain (its ordered list of possible values) and each row a code, the position of
its value in that domain. Partitioners work on codes; published tables decode them back.
- numeric: the sorted distinct values present (code order = numeric order)
- date: a numeric domain of day numbers (schemas/dates.py) whose `unit` says it is a date
- ordinal: the spec's `order`
- categorical: the hierarchy's leaves in depth-first order (so every subtree is a contiguous code
  range; `hierarchy = "mask"`: built from the distinct values present, tasks/core/hierarchies.py),
  else the spec's `order`, else the sorted distinct values present
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from privpub.schemas.dates import unit_last_day
from privpub.schemas.spec import MASK, QISpec, ReleaseSpec
from privpub.tasks.core.hierarchies import mask_hierarchy
from privpub.tasks.core.threads import map_on_threads


@dataclass(frozen=True)
class QIDomain:
    name: str
    kind: str  # numeric | ordinal | categorical (a date QI is numeric: day numbers)
    values: np.ndarray  # domain values in code order
    hierarchy: dict[str, list[str]] | None = None
    # a date QI: "day", "month" or "year" (values are the unit's first days); None otherwise
    unit: str | None = None

    @property
    def size(self) -> int:
        return len(self.values)

    @property
    def span(self) -> float:
        """Width of the whole domain: value range for numeric, code range otherwise."""
        if self.kind == "numeric":
            return float(self.upper(self.values[-1:])[0] - self.values[0]) if self.size else 0.0
        return float(self.size - 1)

    def upper(self, values: np.ndarray) -> np.ndarray:
        """The top of each value's range: the value, or a date unit's last day."""
        return unit_last_day(values, self.unit) if self.unit else values

    def width(self, lo_code: np.ndarray, hi_code: np.ndarray) -> np.ndarray:
        """Width of code ranges in the same unit as `span`."""
        widths: np.ndarray  # (numpy's stubs type this arithmetic as Any)
        if self.kind == "numeric":
            v = self.values.astype(float)
            widths = (self.upper(self.values[hi_code]).astype(float) if self.unit else v[hi_code]) - v[lo_code]
        else:
            widths = (hi_code - lo_code).astype(float)
        return widths


def hierarchy_leaves(hierarchy: dict[str, list[str]]) -> list[str]:
    """Leaves in depth-first order, from the root(s) (nodes that are nobody's child)."""
    children = {c for kids in hierarchy.values() for c in kids}
    roots = [p for p in hierarchy if p not in children]
    out: list[str] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        kids = hierarchy.get(node)
        if kids:
            stack.extend(reversed(kids))
        else:
            out.append(node)
    return out


def distinct_values(q: QISpec, column: pd.Series) -> np.ndarray | None:
    """What a QI's domain needs from the data: the sorted distinct values (floats for numeric,
    text otherwise), or None when the spec fixes the domain (an order or a hierarchy). A table
    read in partitions combines these with `merge_distinct`."""
    if q.kind in ("numeric", "date"):
        present = _present_integers(column.to_numpy()) if q.kind == "numeric" else None
        return np.unique(column.to_numpy(dtype=float)) if present is None else present.astype(float)
    if q.tree or q.order:
        return None
    return np.array(sorted(pd.unique(column.astype(str))), dtype=object)


def merge_distinct(parts: list[np.ndarray | None]) -> np.ndarray | None:
    if parts[0] is None:
        return None
    # a QI's distinct values are None in every part (the spec fixes the domain) or in none
    return np.unique(np.concatenate(cast(list[np.ndarray], parts)))


def domain_from_distinct(q: QISpec, distinct: np.ndarray | None) -> QIDomain:
    hierarchy = q.tree
    if q.kind == "categorical" and q.hierarchy == MASK and distinct is not None:
        hierarchy = mask_hierarchy(distinct)
    if q.kind not in ("numeric", "date") and hierarchy:
        values = hierarchy_leaves(hierarchy)
    elif q.kind not in ("numeric", "date") and q.order:
        values = q.order_labels or []
    elif distinct is None:  # distinct_values gives None only when the spec fixes the domain
        raise ValueError(f"{q.name}: its domain needs the data's distinct values")
    elif q.kind == "numeric":
        return QIDomain(q.name, "numeric", distinct)
    elif q.kind == "date":
        return QIDomain(q.name, "numeric", distinct.astype(np.int64), unit=q.date_unit)
    else:
        values = list(distinct)
    return QIDomain(q.name, q.kind, np.array(values, dtype=object), hierarchy)


def build_domain(q: QISpec, column: pd.Series) -> QIDomain:
    return domain_from_distinct(q, distinct_values(q, column))


def _small_integer_range(values: np.ndarray) -> tuple[int, int] | None:
    """(lowest, highest) of integers spanning few values (at most 4 per row, each exact as a
    float), which a count or a lookup table over the span handles in one pass without sorting
    (issue 43: a numeric QI of a million rows coded in 0.01 s, not 0.11); None otherwise."""
    if values.dtype.kind not in "iu" or not len(values):
        return None
    lo, hi = int(values.min()), int(values.max())
    if hi - lo >= 4 * len(values) + 1024 or max(abs(lo), abs(hi)) >= 2**53:
        return None
    return lo, hi


def _present_integers(values: np.ndarray) -> np.ndarray | None:
    """The sorted distinct values of an integer column of a small range (np.unique's answer)."""
    span = _small_integer_range(values)
    if span is None:
        return None
    return np.flatnonzero(np.bincount(values.astype(np.int64, copy=False) - span[0])) + span[0]


def encode(domain: QIDomain, column: pd.Series) -> np.ndarray:
    if domain.kind == "numeric":
        values = column.to_numpy()
        span = _small_integer_range(values)
        if span is not None:  # each value's searchsorted position, looked up over the span
            lookup = np.searchsorted(domain.values, np.arange(span[0], span[1] + 1, dtype=float)).astype(np.int32)
            return lookup[values.astype(np.int64, copy=False) - span[0]]
        return np.searchsorted(domain.values, column.to_numpy(dtype=float)).astype(np.int32)
    # factorize once, then map the few distinct values onto the domain (no per-row str())
    codes, uniques = pd.factorize(column)
    lookup = pd.Index(np.asarray(domain.values, dtype=object).astype(str)).get_indexer(pd.Index(uniques).astype(str))
    return np.where(codes >= 0, lookup[codes], -1).astype(np.int32)


class HasDomains:
    """What readers of a table's QIs ask of anything with `domains` (Microdata, a cluster
    partition's view): the QI names and a QI's domain by name."""

    domains: list[QIDomain]
    # False: every row is here, in this process (Microdata). True: the rows stay in `parts` where
    # the run's executor works (tasks/validate/parted.PartedData), and a step sends its work there.
    in_parts = False

    @property
    def qi_names(self) -> list[str]:
        return [d.name for d in self.domains]

    def domain(self, name: str) -> QIDomain:
        return next(d for d in self.domains if d.name == name)


@dataclass
class Microdata(HasDomains):
    """The validated frame plus per-QI codes and sensitive-value codes."""

    spec: ReleaseSpec
    frame: pd.DataFrame
    domains: list[QIDomain]
    codes: np.ndarray  # (n, d) int32, column j = QI j
    sensitive_values: np.ndarray  # distinct sensitive values, sorted
    sensitive_codes: np.ndarray  # (n,) int32
    extra: dict[str, Any] = field(default_factory=dict)
    # input rows left out before any work for an empty cell ([dataset] missing = "drop")
    dropped_rows: int = 0
    # `[dataset] rows_per_person = "many"`: each row's person as a number 0..people-1 (the order of
    # first appearance; never the id itself); None: one row per person, a row is a person
    person: np.ndarray | None = None
    # `[evaluate] target`: the people held out of the release before anonymizing, with the whole
    # input they were drawn from (tasks/evaluate/classification.py HeldOut); None: no target
    held_out: Any = None

    @classmethod
    def from_frame(cls, spec: ReleaseSpec, frame: pd.DataFrame) -> Microdata:
        ds = spec.dataset
        codes = np.empty((len(frame), len(ds.qi)), dtype=np.int32)

        def coded(j: int) -> QIDomain:
            domain = build_domain(ds.qi[j], frame[ds.qi[j].name])
            codes[:, j] = encode(domain, frame[domain.name])
            return domain

        # Arrow's and numpy's kernels let go of the GIL: the QIs are coded on both cores (issue 43)
        domains = map_on_threads(coded, range(len(ds.qi)), min(2, len(ds.qi)), len(frame), "privpub-encode")
        s_codes, s_values = pd.factorize(frame[ds.sensitive], sort=True)
        person = pd.factorize(frame[ds.person_id])[0].astype(np.int64) if ds.rows_per_person == "many" else None
        return cls(spec, frame, domains, codes, np.asarray(s_values), s_codes.astype(np.int32), person=person)

    @classmethod
    def from_codes(
        cls,
        spec: ReleaseSpec,
        domains: list[QIDomain],
        codes: np.ndarray,
        sensitive_values: np.ndarray,
        sensitive_codes: np.ndarray,
        integer: dict[str, bool],
    ) -> Microdata:
        """Microdata of some rows whose codes were computed against domains and sensitive values
        of a whole table (a chunk of a table read in partitions). The frame holds what published
        tables read back: numeric QI values (integers stay integers) and the sensitive values."""
        cols = {}
        for j, dom in enumerate(domains):
            if dom.kind == "numeric":
                vals = dom.values[codes[:, j]]
                cols[dom.name] = vals.astype(np.int64) if integer.get(dom.name) else vals
        cols[spec.dataset.sensitive] = sensitive_values[sensitive_codes]
        return cls(spec, pd.DataFrame(cols), domains, codes, sensitive_values, sensitive_codes)

    @property
    def n(self) -> int:
        return len(self.frame)

    @property
    def people(self) -> int:
        """How many people the rows hold (n when each person has one row)."""
        return self.n if self.person is None else int(self.person.max()) + 1 if self.n else 0


def person_text(column: pd.Series) -> pa.Array:
    """The person ids as text, the key of compose_people (Arrow's cast: pandas' astype(str) costs
    a second a million rows; both write integers and strings the same way)."""
    try:
        return pa.compute.cast(pa.array(column.to_numpy()), pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pa.array(column.astype(str).to_numpy(object), pa.string())

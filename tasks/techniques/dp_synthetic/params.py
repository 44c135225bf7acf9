"""[technique] keys of dp-synthetic (docs/dp.md): epsilon and delta, the (epsilon, delta)-DP bound
of the whole release; the public discretization of the numeric QIs (bins, or bounds with
bin_count); where the category lists come from; the contribution limit of one person."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from privpub.tasks.core.params import TechniqueParams, integer


class DPSyntheticParams(TechniqueParams):
    epsilon: float = Field(gt=0, le=100, description="a number > 0 and <= 100 (the privacy-loss bound)")
    # the Gaussian measurements need a delta; 1e-6 is far below 1 / (the people of a census table)
    delta: float = Field(1e-6, gt=0, lt=1e-2, description="a number > 0 and below 0.01")
    # per numeric or date QI, its bin edges (ascending, public; a date QI's as ISO dates "2024-01-01"):
    # values outside are clamped into the end bins
    bins: dict[str, list[float | str]] = Field(default_factory=dict, description="a table {qi = [edges, ascending]}")
    # per numeric or date QI, public bounds [lo, hi] cut into bin_count bins of equal width
    bounds: dict[str, list[float | str]] = Field(default_factory=dict, description="a table {qi = [lo, hi]}")
    bin_count: int = integer(2, 10)
    # "declared": every categorical QI and the sensitive column carry their values in the spec
    # (order, hierarchy, sensitive_order); "from-data": the data's values are taken as public
    categories: Literal["declared", "from-data"] = Field("declared", description='one of "declared", "from-data"')
    # rows_per_person = "many": at most this many rows of one person are used (the others dropped
    # at random; default 1); the noise is scaled to it
    max_rows_per_person: int | None = integer(1, None)

    @field_validator("bins", "bounds", mode="before")
    @classmethod
    def _numbers(cls, value: object) -> object:
        # strict mode would refuse 17 where 17.0 is meant: whole numbers are numbers here
        if isinstance(value, dict):
            return {
                k: [float(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
                if isinstance(v, list)
                else v
                for k, v in value.items()
            }
        return value

    @field_validator("bins")
    @classmethod
    def _edges(cls, value: dict[str, list[float | str]]) -> dict[str, list[float | str]]:
        for name, edges in value.items():
            cut = _edge_numbers(f"bins.{name}", edges)
            if len(cut) < 2 or any(b <= a for a, b in zip(cut, cut[1:])):
                raise ValueError(f"bins.{name} must list at least 2 finite edges in ascending order")
        return value

    @field_validator("bounds")
    @classmethod
    def _bounds(cls, value: dict[str, list[float | str]]) -> dict[str, list[float | str]]:
        for name, pair in value.items():
            cut = _edge_numbers(f"bounds.{name}", pair)
            if len(cut) != 2 or not cut[0] < cut[1]:
                raise ValueError(f"bounds.{name} must be [lo, hi] with lo < hi")
        return value

    def edges(self, qi: str) -> list[float] | None:
        """The bin edges of a numeric or date QI (a date's as day numbers): declared, or cut from
        its public bounds (None: neither)."""
        if qi in self.bins:
            return _edge_numbers(qi, self.bins[qi])
        if qi in self.bounds:
            lo, hi = _edge_numbers(qi, self.bounds[qi])
            cut = [lo + (hi - lo) * i / self.bin_count for i in range(self.bin_count + 1)]
            return [float(math.floor(c)) for c in cut] if isinstance(self.bounds[qi][0], str) else cut
        return None

    def gives_dates(self, qi: str) -> bool | None:
        """Whether the QI's edges are dates (None: no edges given)."""
        given = self.bins.get(qi) or self.bounds.get(qi)
        return None if not given else all(isinstance(x, str) for x in given)


def _edge_numbers(where: str, items: list[float | str]) -> list[float]:
    """Edges as numbers: a date as its day number (days since 1970-01-01); not a mix of both."""
    if len({isinstance(x, str) for x in items}) > 1:
        raise ValueError(f"{where} mixes dates and numbers")
    out = []
    for x in items:
        if isinstance(x, str):
            try:
                x = float(np.datetime64(x, "D").astype(np.int64))
            except ValueError:
                raise ValueError(f"{where}: {x!r} is not an ISO date (2024-01-31)") from None
        if not math.isfinite(x):
            raise ValueError(f"{where} must hold finite numbers")
        out.append(float(x))
    return out

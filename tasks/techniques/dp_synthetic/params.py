"""[technique] keys of dp-synthetic (docs/dp.md): epsilon and delta, the (epsilon, delta)-DP bound
of the whole release; the public discretization of the numeric QIs (bins, or bounds with
bin_count); where the category lists come from; the contribution limit of one person."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from privpub.tasks.core.params import TechniqueParams, integer


class DPSyntheticParams(TechniqueParams):
    epsilon: float = Field(gt=0, le=100, description="a number > 0 and <= 100 (the privacy-loss bound)")
    # the Gaussian measurements need a delta; 1e-6 is far below 1 / (the people of a census table)
    delta: float = Field(1e-6, gt=0, lt=1e-2, description="a number > 0 and below 0.01")
    # per numeric QI, its bin edges (ascending, public): values outside are clamped into the end bins
    bins: dict[str, list[float]] = Field(default_factory=dict, description="a table {qi = [edges, ascending]}")
    # per numeric QI, public bounds [lo, hi] cut into bin_count bins of equal width
    bounds: dict[str, list[float]] = Field(default_factory=dict, description="a table {qi = [lo, hi]}")
    bin_count: int = integer(2, 10)
    # "declared": every categorical QI and the sensitive column carry their values in the spec
    # (order, hierarchy, sensitive_order); "from-data": the data's values are taken as public
    categories: Literal["declared", "from-data"] = Field("declared", description='one of "declared", "from-data"')
    # rows_per_person = "many": at most this many rows of one person are used (the others dropped
    # at random); the noise is scaled to it
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
    def _edges(cls, value: dict[str, list[float]]) -> dict[str, list[float]]:
        for name, edges in value.items():
            if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])) or not all(map(math.isfinite, edges)):
                raise ValueError(f"bins.{name} must list at least 2 finite edges in ascending order")
        return value

    @field_validator("bounds")
    @classmethod
    def _bounds(cls, value: dict[str, list[float]]) -> dict[str, list[float]]:
        for name, pair in value.items():
            if len(pair) != 2 or not pair[0] < pair[1] or not all(map(math.isfinite, pair)):
                raise ValueError(f"bounds.{name} must be [lo, hi] with lo < hi")
        return value

    def edges(self, qi: str) -> list[float] | None:
        """The bin edges of a numeric QI: declared, or cut from its public bounds (None: neither)."""
        if qi in self.bins:
            return self.bins[qi]
        if qi in self.bounds:
            lo, hi = self.bounds[qi]
            return [lo + (hi - lo) * i / self.bin_count for i in range(self.bin_count + 1)]
        return None

"""[technique] keys of generalization: k, and l for distinct l-diversity; suppress, the largest
share of rows left out as outliers (tasks/partition/outliers.py)."""

from __future__ import annotations

from pydantic import Field

from privpub.tasks.core.params import TechniqueParams, integer


class GeneralizationParams(TechniqueParams):
    k: int = integer(1)
    l: int | None = integer(1, None)
    suppress: float = Field(
        0.0, ge=0, lt=1, description="a number >= 0 and below 1 (the share of rows that may be left out)"
    )

    def k_and_l(self) -> tuple[int | None, int | None]:
        return self.k, self.l

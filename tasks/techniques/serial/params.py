"""[technique] keys of serial (the module docstring of technique.py says what each one does)."""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from privpub.tasks.core.params import FractionValue, TechniqueParams, integer


class SerialParams(TechniqueParams):
    l: int = integer(2)
    strategy: Literal["constant-ratio", "geometric", "localized"] = Field(
        "constant-ratio", description="constant-ratio, geometric or localized"
    )
    releases: int = integer(1, 20)  # constant-ratio's k
    factor: FractionValue = Fraction(2)  # geometric's growth factor
    # the protected values: every value, these values, or that share of the least frequent ones
    transient: Literal["all"] | list[Any] | Annotated[float, Field(gt=0, lt=1)] = Field(
        "all", description='"all", a list of values or a fraction in (0, 1)'
    )
    suppress: bool = Field(True, description="true or false")
    min_group_size: int | None = integer(1, None)  # None: l
    max_group_size: int | None = integer(1, None)  # None: max(1000, 5 * the first ratio)

    @model_validator(mode="after")
    def _check(self) -> SerialParams:
        if self.strategy == "geometric" and not self.factor > 1:
            raise ValueError(f"factor must be > 1, got {self.factor}")
        low = self.min_group_size if self.min_group_size is not None else self.l
        if self.max_group_size is not None and low > self.max_group_size:
            # every group would need more members than it may have: all values would be suppressed
            what = "min_group_size" if self.min_group_size is not None else "l (the smallest group)"
            raise ValueError(f"{what} = {low} is larger than max_group_size = {self.max_group_size}")
        return self

    def k_and_l(self) -> tuple[int | None, int | None]:
        return None, self.l

"""[technique] keys of butterfly and union-qid: k, qids (lists of QI names), optional k_prime."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from privpub.tasks.core.params import TechniqueParams, integer


class MultiQIDParams(TechniqueParams):
    k: int = integer(1)
    # the two-level framework of Section 5.2: k'-anonymous on the union QID as well
    k_prime: int | None = integer(1, None)
    qids: list[Annotated[list[str], Field(min_length=1)]] = Field(
        min_length=1, description="a non-empty list of non-empty lists of QI names"
    )

    @model_validator(mode="after")
    def _check(self) -> MultiQIDParams:
        if self.k_prime is not None and self.k_prime >= self.k:
            raise ValueError(f"k_prime must be smaller than k = {self.k}, got {self.k_prime}")
        for q in self.qids:
            if len(set(q)) != len(q):
                raise ValueError(f"qids: {q} lists a column twice")
        return self

    def k_and_l(self) -> tuple[int | None, int | None]:
        return self.k, None

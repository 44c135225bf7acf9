"""[technique] keys of generalization: k; l with the diversity model (distinct, entropy or
recursive (c, l)-diversity); t with the closeness ground distance; beta, basic beta-likeness
(docs/models.md); suppress, the
largest share of rows left out as outliers (tasks/partition/suppression.py); split_width, how
Mondrian measures a categorical QI when it chooses where to split (tasks/partition/mondrian.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import DatasetSpec
from privpub.tasks.core.params import TechniqueParams, integer
from privpub.tasks.core.sensitive_models import ModelChoice


class GeneralizationParams(TechniqueParams):
    k: int = integer(1)
    l: int | None = integer(1, None)
    suppress: float = Field(
        0.0, ge=0, lt=1, description="a number >= 0 and below 1 (the share of rows that may be left out)"
    )
    diversity: Literal["distinct", "entropy", "recursive"] = Field(
        "distinct", description='one of "distinct", "entropy", "recursive"'
    )
    c: float | None = Field(None, gt=0, description="a number > 0")
    t: float | None = Field(None, gt=0, le=1, description="a number in (0, 1]")
    closeness: Literal["equal", "ordered", "hierarchical"] | None = Field(
        None, description='one of "equal", "ordered", "hierarchical"'
    )
    # basic beta-likeness: no value's share in a class above (1 + beta) times its share in the table
    beta: float | None = Field(None, gt=0, description="a number > 0 (finite)")
    # "range": a categorical QI's code range in its sorted values (the default, the releases
    # published so far); "values": the values a group holds, as gen-iloss counts a set cell
    split_width: Literal["range", "values"] = Field("range", description='one of "range", "values"')

    @model_validator(mode="after")
    def _models_fit_together(self) -> GeneralizationParams:
        given = self.model_fields_set
        if "diversity" in given and self.l is None:
            raise ValueError("diversity needs l (the l of the diversity model)")
        if self.diversity == "recursive" and self.c is None:
            raise ValueError('diversity = "recursive" needs c (recursive (c, l)-diversity)')
        if self.c is not None and self.diversity != "recursive":
            raise ValueError('c is the c of recursive (c, l)-diversity: it needs diversity = "recursive"')
        if self.closeness is not None and self.t is None:
            raise ValueError("closeness is the ground distance of t-closeness: it needs t")
        return self

    def k_and_l(self) -> tuple[int | None, int | None]:
        return self.k, self.l  # entropy and recursive l-diversity imply l distinct values too

    def model_choice(self, ds: DatasetSpec) -> ModelChoice:
        """The sensitive-value models asked for, the closeness distance resolved against the
        dataset: given, else "hierarchical" with a sensitive_hierarchy, "ordered" with a
        sensitive_order; without either it must be given (SpecError)."""
        closeness = self.closeness
        if self.t is not None and closeness is None:
            if ds.sensitive_hierarchy:
                closeness = "hierarchical"
            elif ds.sensitive_order:
                closeness = "ordered"
            else:
                raise SpecError(
                    '[technique] t needs closeness = "equal" or "ordered" ([dataset] gives the sensitive column '
                    "no sensitive_order or sensitive_hierarchy to choose from)"
                )
        if closeness == "hierarchical" and not ds.sensitive_hierarchy:
            raise SpecError('[technique] closeness = "hierarchical" needs [dataset] sensitive_hierarchy')
        return ModelChoice(
            self.diversity if self.l is not None else None,
            self.l,
            self.c,
            self.t,
            closeness,
            ds.sensitive_order,
            ds.sensitive_hierarchy,
            self.beta,
        )

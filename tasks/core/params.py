"""The parameters of a technique: a frozen pydantic model per technique (its folder's params.py),
declared on the class as `Params` and read by `Technique.__init__` into `technique.params`.

Strict: an unknown key, a value of the wrong type ("3" or 3.0 for an integer), a non-finite
number or a value out of range is refused with one line naming the key, as a SpecError.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo
from pydantic_core import PydanticUndefined

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import unknown_key


class TechniqueParams(BaseModel):
    """The base of every technique's parameter model (a technique without one takes no keys)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    def k_and_l(self) -> tuple[int | None, int | None]:
        """The group size k and distinct l the technique guarantees (None: it has none), which the
        series composition check (tasks/compose) holds the series to."""
        return None, None


def integer(minimum: int, default: Any = PydanticUndefined) -> Any:
    """An integer field >= minimum (required without a default); its description is the text of
    the refusal: '[technique] k must be an integer >= 1, got 0'."""
    return Field(default, ge=minimum, description=f"an integer >= {minimum}")


def _to_fraction(value: Any, info: ValidationInfo) -> Fraction:
    """A number given as 0.1667 or as "1/6" (denominators up to 10**6); nan and inf refused."""
    try:
        return Fraction(str(value)).limit_denominator(10**6)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{info.field_name} = {value!r} is not a number or fraction") from None


def _in_unit_interval(value: Fraction, info: ValidationInfo) -> Fraction:
    if not 0 < value <= 1:
        raise ValueError(f"{info.field_name} must be in (0, 1], got {value}")
    return value


# a number or fraction string, kept exact
FractionValue = Annotated[Fraction, BeforeValidator(_to_fraction)]
# a probability in (0, 1], e.g. 0.1667 or "1/6"
Probability = Annotated[FractionValue, AfterValidator(_in_unit_interval)]

P = TypeVar("P", bound=TechniqueParams)


def read_params(technique: str, model: type[P], given: dict[str, Any]) -> P:
    """The technique's parameters validated, or a SpecError with the first problem (an unknown key
    before any other, as the spec check reports those first)."""
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        errors = exc.errors()
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise _spec_error(technique, model, error) from None


def _spec_error(technique: str, model: type[TechniqueParams], error: Any) -> SpecError:
    key = str(error["loc"][0]) if error["loc"] else ""
    if error["type"] == "extra_forbidden":
        return unknown_key("[technique]", key, list(model.model_fields))
    if error["type"] == "value_error":  # a validator's own sentence
        return SpecError(f"[technique] {error['ctx']['error']}")
    what = model.model_fields[key].description if key in model.model_fields else None
    if what is None:  # a model validator's error, or a field without a description
        return SpecError(f"[technique] {key}: {error['msg']}")
    if error["type"] == "missing":
        return SpecError(f"[technique] {technique} needs {key} ({what})")
    return SpecError(f"[technique] {key} must be {what}, got {error['input']!r}")

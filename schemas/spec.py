"""The ReleaseSpec: what a data steward writes in a TOML file (or passes as flow parameters).

Relative paths in a spec file are resolved against the spec file's own folder, so a spec
works the same whichever directory the command is started from.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from privpub.schemas.errors import SpecError
from privpub.schemas.names import name_problem


def unknown_key(where: str, key: str | int, valid: list[str] | tuple[str, ...]) -> SpecError:
    """The one message for a key nobody reads: '[technique] kk: unknown key; did you mean k?'."""
    near = difflib.get_close_matches(str(key), [str(v) for v in valid], n=1, cutoff=0.5)
    hint = f"did you mean {near[0]}?" if near else f"valid keys: {', '.join(map(str, valid)) or 'none'}"
    return SpecError(f"{where} {key}: unknown key; {hint}")


def check_known_keys(where: str, given: dict[str, Any], valid: list[str] | tuple[str, ...]) -> None:
    for key in given:
        if key not in valid:
            raise unknown_key(where, key, valid)


def _check_finite(value: Any, path: tuple[str | int, ...] = ()) -> None:
    """TOML and JSON overrides can carry inf and nan: no parameter accepts them."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{_where(path)} = {value}: not a finite number")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, (*path, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(v, (*path, i))


# `person_id = "@row"`: the table has no person id; the row number (from 1, in input order) is
# used as one (schemas/input.py adds it; the report says so).
# `[dataset] input` standing for a DataFrame handed to privpub.publish(frame, spec) (schemas/input.py)
FRAME_INPUT = "<DataFrame>"
ROW_ID = "@row"
# `hierarchy = "mask"` (a categorical QI): levels built from the data by masking the last
# characters with MASK_CHAR (tasks/core/hierarchies.py).
MASK = "mask"
MASK_CHAR = "*"
# `hierarchy = "month" | "year"` (a date QI): dates truncated to the month or year before work.
DATE_UNITS = ("month", "year")
# `[dataset] missing = "category"`: what an empty categorical QI cell becomes.
MISSING_CATEGORY = "(missing)"


def column_name_problem(name: str) -> str | None:
    """What is wrong with a column name the spec gives (docs/spec.md, "The input"), or None: it is not
    empty, not only spaces, and holds no control character (a NUL, a newline)."""
    if not name.strip():
        return "must not be empty" if not name else "must not be only spaces"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "must not hold a control character"
    return None


class QISpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    kind: Literal["numeric", "date", "ordinal", "categorical"]
    # ordinal: the order of the values (required); categorical: optional display order. Text, or
    # numbers when the column holds numbers (not both)
    order: list[str | int | float] | None = None
    # categorical: optional generalization tree {parent: [children]} (leaves are data values) or
    # "mask" (built from the data); date: "month" or "year" (truncation)
    hierarchy: dict[str, list[str]] | Literal["mask", "month", "year"] | None = None
    # "allow": this QI's values are near-unique per person (more than half as many distinct values
    # as people, schemas/input.py NEAR_UNIQUE_SHARE) and it is published generalized on purpose;
    # without it such a QI is refused as a direct identifier (docs/spec.md, "What is never published")
    near_unique: Literal["allow"] | None = None

    # one message for a wrong type (pydantic would give one per member of the union, per item)
    @field_validator("order", mode="before")
    @classmethod
    def _order_items(cls, value: Any) -> Any:
        if value is None:
            return value
        if not isinstance(value, list):
            raise ValueError("must be a list (of text, or of numbers)")
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise ValueError(f"item {i + 1} is neither text nor a number")
        if len({str if isinstance(v, str) else float for v in value}) > 1:
            raise ValueError("mixes text and numbers")
        return value

    @field_validator("hierarchy", mode="before")
    @classmethod
    def _hierarchy_form(cls, value: Any) -> Any:
        if value is None or value in (MASK, *DATE_UNITS):
            return value
        if isinstance(value, dict):
            for parent, kids in value.items():
                if not isinstance(kids, list) or not all(isinstance(k, str) for k in kids):
                    raise ValueError(f"'{parent}' must list its children as text")
            return value
        raise ValueError('must be "mask", "month", "year" or a table {parent = [children]}')

    @model_validator(mode="after")
    def _ordinal_needs_order(self) -> QISpec:
        if self.kind == "ordinal" and not self.order:
            raise ValueError(f"ordinal quasi-identifier '{self.name}' needs an 'order' list")
        if self.order is not None and len(set(self.order)) != len(self.order):
            raise ValueError(f"quasi-identifier '{self.name}': 'order' repeats a value")
        if self.kind == "date" and self.order is not None:
            raise ValueError(f"date quasi-identifier '{self.name}': dates are ordered already (no 'order')")
        if isinstance(self.hierarchy, str):
            fits = self.kind == "categorical" if self.hierarchy == MASK else self.kind == "date"
            if not fits:
                need = "a categorical" if self.hierarchy == MASK else "a date"
                raise ValueError(f"quasi-identifier '{self.name}': hierarchy = \"{self.hierarchy}\" is for {need} QI")
            if self.hierarchy == MASK and self.order is not None:
                raise ValueError(f"quasi-identifier '{self.name}': give an 'order' or hierarchy = \"mask\", not both")
        elif self.hierarchy is not None and self.kind == "date":
            raise ValueError(f'date quasi-identifier \'{self.name}\': hierarchy is "month" or "year"')
        if isinstance(self.hierarchy, dict):  # a cycle or a node with two parents: refused here, before any work
            problem = _tree_problem(self.hierarchy, one_root=False)
            if problem:
                raise ValueError(f"quasi-identifier '{self.name}': hierarchy: {problem}")
        return self

    @property
    def numeric_order(self) -> bool:
        """An order of numbers: the column's cells are read as numbers and matched to it."""
        return self.order is not None and len(self.order) > 0 and not isinstance(self.order[0], str)

    @property
    def order_labels(self) -> list[str] | None:
        """The order as the published lists spell it (numbers as written in the spec)."""
        return None if self.order is None else [str(v) for v in self.order]

    @property
    def tree(self) -> dict[str, list[str]] | None:
        """An explicit hierarchy {parent: [children]} (None for none or a built one)."""
        return self.hierarchy if isinstance(self.hierarchy, dict) else None

    @property
    def date_unit(self) -> str:
        """A date QI's unit: "day", or the "month" / "year" it is truncated to."""
        return self.hierarchy if isinstance(self.hierarchy, str) and self.hierarchy in DATE_UNITS else "day"


def _tree_problem(tree: dict[str, list[str]], one_root: bool = True) -> str | None:
    """Why {parent: [children]} is not one tree (None when it is): every parent has children,
    every node one parent, one root (or, with one_root False, at least one: a forest, as a QI's
    hierarchy may be), no cycle."""
    parent_of: dict[str, str] = {}
    for parent, kids in tree.items():
        if not kids:
            return f"'{parent}' has no children"
        for kid in kids:
            if kid in parent_of:
                return f"'{kid}' has two parents (or is listed twice)"
            parent_of[kid] = parent
    roots = [p for p in tree if p not in parent_of]
    if not roots or (one_root and len(roots) != 1):
        return f"a tree has one root, found {len(roots)}" + (" (a cycle)" if not roots else "")
    seen, stack = set(roots), list(roots)
    while stack:  # every node reachable from the root, each once: no cycle beside it
        for kid in tree.get(stack.pop(), []):
            seen.add(kid)
            stack.append(kid)
    if len(seen) != len(parent_of) + len(roots):
        return "some nodes are not below the root (a cycle)"
    return None


def sensitive_leaves(ds: DatasetSpec) -> list[str] | None:
    """The values the sensitive column may hold when the spec fixes them (order or hierarchy)."""
    if ds.sensitive_hierarchy:
        return sorted({c for kids in ds.sensitive_hierarchy.values() for c in kids if c not in ds.sensitive_hierarchy})
    return list(ds.sensitive_order) if ds.sensitive_order else None


class DatasetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, description="the series name")
    input: str | None = Field(default=None, description="CSV or Parquet file")
    table: str | None = Field(default=None, description="or a table in a DuckDB file: 'file.duckdb:table'")
    person_id: str
    # "one": each person has one row (a repeated person id is refused); "many": a person may have
    # several rows (tests, visits, person-years) and every privacy figure counts people, not rows
    # (docs/models.md, "Several rows per person")
    rows_per_person: Literal["one", "many"] = "one"
    sensitive: str
    qi: list[QISpec] = Field(min_length=1)
    registration: str | None = None
    # an empty cell in a column the release reads: "refuse" the input (naming row and column),
    # "drop" its row (counted in the report: dropped_rows), or for a categorical QI "category"
    # (the cell becomes the value MISSING_CATEGORY; empty cells elsewhere are still refused)
    missing: Literal["refuse", "drop", "category"] = "refuse"
    # the sensitive column's values in order (an ordinal column: t-closeness's ordered distance)
    sensitive_order: list[str] | None = Field(default=None, min_length=1)
    # a tree {parent: [children]} over the sensitive values (leaves are data values; one root):
    # t-closeness's hierarchical distance
    sensitive_hierarchy: dict[str, list[str]] | None = Field(default=None, min_length=1)

    @field_validator("name")
    @classmethod
    def _series_name(cls, name: str, info: ValidationInfo) -> str:
        """The series name makes the release folder's name: a name, never a path (schemas/names.py).
        A spec read back from the state (`stored`) keeps a name it was published under before."""
        problem = None if (info.context or {}).get("stored") else name_problem(name)
        if problem:  # the text as context: a name's braces are not a template
            raise PydanticCustomError("series_name", "the series name {problem}", {"problem": problem})
        return name

    @model_validator(mode="after")
    def _check(self) -> DatasetSpec:
        if not self.input and not self.table:
            raise ValueError("[dataset] needs 'input' (a CSV or Parquet file) or 'table'")
        names = [q.name for q in self.qi]
        for key, col in [("person_id", self.person_id), ("sensitive", self.sensitive)] + [("qi", n) for n in names]:
            problem = column_name_problem(col)
            if problem:
                raise ValueError(f"[dataset] {key}: a column name {problem}")
        if len(set(names)) != len(names):
            raise ValueError("[dataset] qi lists a column twice")
        for col in (self.person_id, self.sensitive):
            if col in names:
                raise ValueError(
                    f"[dataset] column '{col}' cannot be both a quasi-identifier and the person id or sensitive column"
                )
        if self.person_id == self.sensitive:
            raise ValueError("[dataset] person_id and sensitive must be different columns")
        if self.person_id == ROW_ID and self.rows_per_person == "many":
            raise ValueError(
                f'[dataset] rows_per_person = "many" needs a person id column: person_id = "{ROW_ID}" '
                "numbers rows, so every row would be a person of its own"
            )
        if self.sensitive_order is not None and len(set(self.sensitive_order)) != len(self.sensitive_order):
            raise ValueError("[dataset] sensitive_order repeats a value")
        if self.sensitive_order is not None and self.sensitive_hierarchy is not None:
            raise ValueError("[dataset] give the sensitive column an order or a hierarchy, not both")
        if self.sensitive_hierarchy is not None:
            tree_problem = _tree_problem(self.sensitive_hierarchy)
            if tree_problem:
                raise ValueError(f"[dataset] sensitive_hierarchy: {tree_problem}")
        return self

    @property
    def qi_names(self) -> list[str]:
        return [q.name for q in self.qi]

    def qi_spec(self, name: str) -> QISpec:
        return next(q for q in self.qi if q.name == name)


class TechniqueSpec(BaseModel):
    """`name` picks the technique in the registry; every other key is a parameter of it (checked
    by the technique's own parameter model)."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = "generalization"

    @property
    def params(self) -> dict[str, Any]:
        """The parameters as given (the release key and the stored `parameters`); the technique
        validates them into its own model (Technique.Params)."""
        return dict(self.model_extra or {})


class OutputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    dir: str = "releases"
    state: str = "privpub.duckdb"
    seed: int | None = Field(default=None, ge=0, lt=2**64)  # stored as UBIGINT


class RunSpec(BaseModel):
    """How the flow runs, never what it publishes: a release is the same on every task runner.

    task_runner: "inprocess" (threads of the flow process, the default) or "dask" (a local Dask
    cluster of `workers` processes, default 2) for the tasks a technique maps over its chunks.
    address: an existing Dask scheduler ("tcp://host:port") instead of a local cluster.
    chunk_rows: on Dask, the most rows one worker finishes alone (a technique that distributes
    its partitioning splits the table across workers until every part is this small); also the
    published rows per verify chunk of a technique that verifies in chunks (butterfly,
    union-qid, anatomy, serial, ambiguity, priview; a release of at most chunk_rows published
    rows is verified in one step).
    allow_spill: let Dask workers spill chunks (secret rows) to their scratch disk under memory
    pressure; off by default, so secret rows stay in memory.
    server: record the run on a Prefect server (the configured PREFECT_API_URL, else the running
    `privpub server`), as `--server` does; off by default: the CLI and `privpub.publish` run in
    their own process whether or not a server runs (flows/run.py)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task_runner: Literal["inprocess", "dask"] = "inprocess"
    workers: int | None = Field(default=None, ge=1)
    address: str | None = Field(default=None, pattern=r"^(tcp|tls)://[^\s/:]+:[0-9]{1,5}$")
    chunk_rows: int = Field(default=2_000_000, ge=1)
    allow_spill: bool = False
    server: bool = False

    @model_validator(mode="after")
    def _address_needs_dask(self) -> RunSpec:
        if self.address and self.task_runner != "dask":
            raise ValueError('address names a Dask scheduler: it needs task_runner = "dask"')
        if self.address and self.workers:
            raise ValueError("workers sizes a local cluster; an existing cluster (address) has its own")
        return self


# --- the optional sections: [evaluate], [audit], [series], [risk] ---------------------------------
# Each is a frozen strict model, like a technique's parameters (tasks/core/params.py): the spec
# keeps the section as written (the release key and `resolve_spec` read it so) and its reader
# validates it with `read_section` (spec.risk, spec.series, ...), so that a wrong value is refused
# by the step that reads it, before any work, in one line naming `[section] key`. Unknown keys
# are refused earlier, by spec_from_dict.


class SectionModel(BaseModel):
    """The base of an optional section's model: unknown keys, coercion and nan / inf refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rule(holds: Callable[[Any], bool], words: str, convert: Callable[[Any], object] | None = None) -> BeforeValidator:
    """A field's domain checked before pydantic's own type check, so the refusal is the section's
    sentence (`words`, formatted with the key and the value) rather than pydantic's; a value is
    converted only once it holds (an int limit read as a float, a list as a tuple)."""

    def check(value: object, info: ValidationInfo) -> object:
        if not holds(value):
            raise ValueError(words.format(key=info.field_name, value=value))
        return convert(value) if convert is not None else value

    return BeforeValidator(check)


def _optional(rule: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or rule(value)


def _float(value: object) -> object:
    """An int limit as a float (the figures are floats); None stays None."""
    return float(value) if _number(value) else value  # type: ignore[arg-type]


# [evaluate]
SEED_WORDS = "{key} = {value!r}: must be an integer from 0 to 2^64 - 1"
Seed64 = Annotated[int, _rule(lambda v: _whole(v) and 0 <= v < 2**64, SEED_WORDS)]


class EvaluateSpec(SectionModel):
    """[evaluate]: the seed of the shared count-query workload (tasks/evaluate); `target`, the
    column whose classification accuracy is measured on `holdout` of the people, held out of the
    release (tasks/evaluate/classification.py, docs/utility.md)."""

    workload_seed: Seed64 = 0
    target: Annotated[
        str | None,
        _rule(
            _optional(lambda v: isinstance(v, str) and v != ""),
            "{key} = {value!r}: must be a column name (the sensitive column or a quasi-identifier)",
        ),
    ] = None
    holdout: Annotated[
        float,
        _rule(
            lambda v: _number(v) and 0 < v <= 0.5,
            "{key} = {value!r}: must be a number above 0 and at most 0.5 (the share of people held out)",
            _float,
        ),
    ] = 0.2


# [series] (tasks/compose/check.py series_settings adds what depends on the technique)
def _values(value: object) -> bool:
    return isinstance(value, list) and not any(isinstance(v, (bool, list, dict)) for v in value)


class PrivacyBudget(BaseModel):
    """[series] budget: the differential-privacy loss the whole series may spend, summed over its
    releases (basic sequential composition, docs/dp.md); without delta it limits epsilon only (the
    releases' deltas still add up, recorded as series-delta)."""

    model_config = ConfigDict(frozen=True)

    epsilon: float
    delta: float | None = None


BUDGET_KEYS = ("epsilon", "delta")


def _budget(value: object) -> PrivacyBudget | None:
    """The budget table checked key by key, each problem in the section's own sentence."""
    if value is None or isinstance(value, PrivacyBudget):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"budget must be a table such as {{ epsilon = 2.5 }}, got {value!r}")
    for key in value:
        if key not in BUDGET_KEYS:
            near = difflib.get_close_matches(str(key), BUDGET_KEYS, n=1, cutoff=0.5)
            hint = f"did you mean {near[0]}?" if near else f"valid keys: {', '.join(BUDGET_KEYS)}"
            raise ValueError(f"budget.{key}: unknown key; {hint}")
    if "epsilon" not in value:
        raise ValueError("budget: epsilon is required (the series' total), e.g. { epsilon = 2.5 }")
    epsilon, delta = value["epsilon"], value.get("delta")
    if not (_number(epsilon) and 0 < epsilon < math.inf):
        raise ValueError(f"budget.epsilon = {epsilon!r}: must be a finite number above 0")
    if "delta" in value and not (delta is not None and _number(delta) and 0 < delta < 1):
        raise ValueError(f"budget.delta = {delta!r}: must be a number above 0 and below 1")
    return PrivacyBudget(epsilon=float(epsilon), delta=None if delta is None else float(delta))


class SeriesSpec(SectionModel):
    composition: Annotated[
        Literal["refuse", "warn"],
        _rule(lambda v: v in ("refuse", "warn"), 'composition must be "refuse" or "warn", got {value!r}'),
    ] = "refuse"
    # sensitive values a person may change between releases, as text (numbers as TOML wrote them)
    transient: Annotated[
        tuple[str, ...],
        _rule(_values, "transient must be a list of sensitive values", lambda v: tuple(str(x) for x in v)),
    ] = ()
    # None: the technique's own l (or k)
    l: Annotated[
        int | None, _rule(_optional(lambda v: _whole(v) and v >= 1), "l must be an integer >= 1, got {value!r}")
    ] = None
    keep_groups: Annotated[
        bool, _rule(lambda v: isinstance(v, bool), "keep_groups must be true or false, got {value!r}")
    ] = False
    # the series' differential-privacy budget (tasks/compose/budget.py reads it with the technique)
    budget: Annotated[PrivacyBudget | None, BeforeValidator(_budget)] = None


# [audit] (flows/audit.py audit_settings: defaults that depend on the grid, and the grid's bands,
# which depend on each QI's kind)
# the same as tasks/audit/after_denial.py POLICIES and tasks/audit/auditor.py STRATEGIES (a test
# holds them equal: schemas cannot import tasks)
AFTER_DENIAL = ("list", "implicit")
STRATEGIES = ("simulatable", "delay", "joint")


class AuditSpec(SectionModel):
    # required: validate_default runs the rule on a missing l too, for the same sentence
    l: Annotated[int, _rule(lambda v: _whole(v) and v >= 1, "l must be an integer >= 1")] = Field(
        default=None, validate_default=True
    )
    budget: Annotated[
        int | None,
        _rule(
            _optional(lambda v: _whole(v) and v >= 1),
            "budget must be a positive whole number (units of work per decision)",
        ),
    ] = None
    request_budget: Annotated[
        int | None,
        _rule(
            _optional(lambda v: _whole(v) and v >= 1),
            "request_budget must be a positive whole number (units of work per request)",
        ),
    ] = None
    # listed so that it is refused with its own line (budgets are counts now)
    time_budget: Annotated[
        None,
        _rule(
            lambda v: v is None,
            "time_budget: removed, budgets are counts of work, not seconds; use [audit] budget",
        ),
    ] = None
    strategy: Annotated[
        Literal["simulatable", "delay", "joint"],
        _rule(lambda v: v in STRATEGIES, 'strategy must be "simulatable", "delay" or "joint", got {value!r}'),
    ] = "simulatable"
    # "auto" or {QI = band width or hierarchy level}: each band checked by the QI's kind later
    grid: Annotated[
        Literal["auto"] | dict[str, object] | None,
        _rule(
            lambda v: v is None or v == "auto" or isinstance(v, dict),
            'grid must be "auto" or band widths per QI, e.g. {{ age = 5 }}',
        ),
    ] = None
    min_cell: Annotated[
        int | None,
        _rule(
            _optional(lambda v: _whole(v) and v >= 1),
            "min_cell must be a positive whole number (people per grid cell)",
        ),
    ] = None
    snap: Annotated[bool | None, _rule(_optional(lambda v: isinstance(v, bool)), "snap must be true or false")] = None
    after_denial: Annotated[
        Literal["list", "implicit"] | None,
        _rule(_optional(lambda v: v in AFTER_DENIAL), 'after_denial must be "list" or "implicit"'),
    ] = None


# [risk] (tasks/risk/__init__.py risk_settings)
FRACTION_WORDS = "{key} = {value!r}: must be a number above 0 and at most 1"
Fraction01 = Annotated[float, _rule(lambda v: _number(v) and 0 < v <= 1, FRACTION_WORDS, float)]
OptionalFraction = Annotated[
    float | None, _rule(_optional(lambda v: _number(v) and 0 < v <= 1), FRACTION_WORDS, _float)
]


class RiskSpec(SectionModel):
    """[risk]: `threshold` and the limits (figures above them refuse the release), and the
    population the input is a sample of: `population` a whole number of people (at least the
    input's records, checked once they are counted), or `sample_fraction`, not both."""

    threshold: Fraction01 = 0.2
    max_prosecutor: OptionalFraction = None
    max_records_at_risk: OptionalFraction = None
    max_attribute: OptionalFraction = None
    # a gain is a ratio: 1 allows twice the base rate
    max_gain: Annotated[
        float | None,
        _rule(
            _optional(lambda v: _number(v) and 0 < v < math.inf),
            "{key} = {value!r}: must be a finite number above 0",
            _float,
        ),
    ] = None
    max_difference: OptionalFraction = None
    population: Annotated[
        int | None,
        _rule(
            _optional(lambda v: _whole(v) and v >= 1), "{key} = {value!r}: must be a whole number of people, at least 1"
        ),
    ] = None
    sample_fraction: OptionalFraction = None

    @model_validator(mode="after")
    def _one_population(self) -> RiskSpec:
        if self.population is not None and self.sample_fraction is not None:
            raise ValueError("population and sample_fraction: give one of them, not both")
        return self


# the optional sections beside the modelled ones, and their models
SECTIONS: dict[str, type[SectionModel]] = {
    "evaluate": EvaluateSpec,
    "audit": AuditSpec,
    "series": SeriesSpec,
    "risk": RiskSpec,
}
# the keys each accepts (an unknown one is refused by spec_from_dict, before its reader runs)
EXTRA_SECTIONS: dict[str, tuple[str, ...]] = {name: tuple(model.model_fields) for name, model in SECTIONS.items()}

S = TypeVar("S", bound=BaseModel)


def read_section(name: str, model: type[S], given: Mapping[str, object]) -> S:
    """A section validated into its model, or a SpecError with the first problem (an unknown key
    before any other): '[risk] threshold = 0: must be a number above 0 and at most 1'."""
    try:
        return model.model_validate(dict(given))
    except ValidationError as exc:
        errors = exc.errors()
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise _section_error(f"[{name}]", model, error) from None


def _section_error(where: str, model: type[BaseModel], error: ErrorDetails) -> SpecError:
    key = str(error["loc"][0]) if error["loc"] else ""
    if error["type"] == "extra_forbidden":
        return unknown_key(where, key, list(model.model_fields))
    if error["type"] == "value_error":  # a rule's or a model validator's own sentence
        return SpecError(f"{where} {error.get('ctx', {}).get('error', error['msg'])}")
    return SpecError(f"{where} {key}: {error['msg']}" if key else f"{where} {error['msg']}")


class ReleaseSpec(BaseModel):
    # extra sections are allowed only when listed in EXTRA_SECTIONS (checked in spec_from_dict)
    model_config = ConfigDict(extra="allow")

    dataset: DatasetSpec
    technique: TechniqueSpec = TechniqueSpec()
    output: OutputSpec = OutputSpec()
    run: RunSpec = RunSpec()
    base_dir: str = "."

    def path(self, relative: str) -> Path:
        p = Path(relative).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def output_dir(self) -> Path:
        return self.path(self.output.dir)

    @property
    def state_path(self) -> Path:
        return self.path(self.output.state)

    def section(self, name: str) -> dict[str, Any]:
        """An optional section as written, such as [series] (the release key reads it so)."""
        return dict((self.model_extra or {}).get(name) or {})

    # The optional sections validated into their models (SectionModel): a wrong value is a
    # SpecError naming `[section] key` from the first reader, as technique parameters are.
    @property
    def evaluate(self) -> EvaluateSpec:
        return read_section("evaluate", EvaluateSpec, self.section("evaluate"))

    @property
    def audit(self) -> AuditSpec:
        return read_section("audit", AuditSpec, self.section("audit"))

    @property
    def series(self) -> SeriesSpec:
        return read_section("series", SeriesSpec, self.section("series"))

    @property
    def risk(self) -> RiskSpec:
        return read_section("risk", RiskSpec, self.section("risk"))


def _where(loc: tuple[str | int, ...]) -> str:
    """A pydantic error location as the user wrote it: ('dataset', 'qi', 0, 'ordr') ->
    '[dataset] qi[1] ordr'."""
    parts = [f"[{loc[0]}]"] if loc else []
    for p in loc[1:]:
        if isinstance(p, int):
            parts[-1] += f"[{p + 1}]"
        else:
            parts.append(str(p))
    return " ".join(parts)


def _valid_keys(loc: tuple[str | int, ...]) -> list[str]:
    """The keys allowed where an unknown key was found (for the 'did you mean' hint)."""
    models: dict[str, type[BaseModel]] = {"dataset": DatasetSpec, "output": OutputSpec, "run": RunSpec}
    model = models.get(str(loc[0])) if loc else None
    if model is DatasetSpec and len(loc) >= 3 and loc[1] == "qi":
        model = QISpec
    return list(model.model_fields) if model else []


def spec_from_dict(data: dict[str, Any], base_dir: str | Path = ".", *, stored: bool = False) -> ReleaseSpec:
    """Check a spec given as a dict of sections and return it as a ReleaseSpec.

    Parameters: ``data``, the spec's sections as a TOML file holds them (``{"dataset": {...},
    "technique": {...}, "output": {...}}``); ``base_dir``, the folder its relative paths start
    from. (``stored=True`` reads back a spec kept in a state file: its series name is not checked
    again.)

    Raises SpecError, one line naming the section and key, for an unknown section or key or a
    non-finite number (the technique's own parameters are checked when it is run or explored).

    Example: ``privpub.spec_from_dict({"dataset": {...}, "technique": {"name": "generalization",
    "k": 10}})``."""
    if not isinstance(data, dict):
        raise SpecError("a spec must be a table of sections ([dataset], [technique], ...)")
    _check_finite(data)
    known = [*(f for f in ReleaseSpec.model_fields if f != "base_dir"), *EXTRA_SECTIONS]
    for section, body in data.items():
        if section not in known:  # base_dir too: it is the spec file's folder, never a key
            near = difflib.get_close_matches(section, known, n=1, cutoff=0.5)
            raise SpecError(
                f"[{section}]: unknown section; "
                + (f"did you mean [{near[0]}]?" if near else f"valid: {', '.join(known)}")
            )
        if section in EXTRA_SECTIONS:
            if not isinstance(body, dict):
                raise SpecError(f"[{section}] must be a table of keys")
            check_known_keys(f"[{section}]", body, EXTRA_SECTIONS[section])
    read_section("evaluate", EvaluateSpec, data.get("evaluate", {}))  # the seed, before any work
    try:
        spec = ReleaseSpec.model_validate({**data, "base_dir": str(base_dir)}, context={"stored": stored})
    except ValidationError as exc:
        for err in exc.errors():
            if err["type"] == "extra_forbidden":
                loc = tuple(err["loc"])
                raise unknown_key(_where(loc[:-1]), loc[-1], _valid_keys(loc)) from None
        problems = "; ".join(f"{_where(tuple(err['loc']))}: {err['msg']}" for err in exc.errors())
        raise SpecError(f"invalid spec: {problems}") from None
    _check_parted(spec)
    _check_target(spec)
    return spec


def _check_target(spec: ReleaseSpec) -> None:
    """[evaluate] target: the sensitive column or a QI, never the person id (checked here, where
    [dataset] is known; its classes are counted when the rows are read)."""
    target, ds = spec.evaluate.target, spec.dataset
    if target is None:
        return
    if target == ds.person_id:
        raise SpecError(f"[evaluate] target = {target!r}: the person id column is not a target")
    if target != ds.sensitive and target not in [q.name for q in ds.qi]:
        raise SpecError(
            f"[evaluate] target = {target!r}: unknown column; the sensitive column ({ds.sensitive!r}) "
            "or a quasi-identifier"
        )
    if spec.run.task_runner == "dask":
        raise SpecError('[evaluate] target runs in memory only, not with [run] task_runner = "dask"')


def _check_parted(spec: ReleaseSpec) -> None:
    """What the Dask path (rows read file by file on workers) does not do yet: dates, dropped
    rows (counted per file) and row numbers as ids (numbered per file)."""
    if spec.run.task_runner != "dask":
        return
    ds = spec.dataset
    dates = [q.name for q in ds.qi if q.kind == "date"]
    problem = (
        f"[dataset] qi '{dates[0]}': a date quasi-identifier"
        if dates
        else '[dataset] missing = "drop"'
        if ds.missing == "drop"
        else f'[dataset] person_id = "{ROW_ID}"'
        if ds.person_id == ROW_ID
        else '[dataset] rows_per_person = "many"'
        if ds.rows_per_person == "many"
        else None
    )
    if problem:
        raise SpecError(f'{problem} runs in memory only, not with [run] task_runner = "dask"')


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """A spec file's sections as written, not yet checked (load_spec checks them)."""
    path = Path(path)
    if path.is_dir():
        raise SpecError(f"spec {path} is a directory, not a TOML file")
    if path.exists() and not path.is_file():  # a FIFO or a device: reading it could block forever
        raise SpecError(f"spec {path} is not a regular file")
    if not path.is_file():
        raise SpecError(f"spec file not found: {path}")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}") from None


def load_spec(path: str | Path) -> ReleaseSpec:
    """Read and check a spec file (TOML); its relative paths start from the file's folder.

    Returns a ReleaseSpec; raises SpecError (one line naming the key) for a spec that is refused.
    Example: ``spec = privpub.load_spec("spec.toml"); spec.technique.name``."""
    return spec_from_dict(read_spec_file(path), base_dir=Path(path).resolve().parent)


def resolve_spec(
    spec_path: str | None,
    spec: dict[str, Any] | None,
    overrides: dict[str, Any] | None,
    base_dir: str | Path | None = None,
) -> ReleaseSpec:
    """The spec file (or a spec dict, its paths from `base_dir`, default the current folder) with
    a run's overrides merged over it, section by section (e.g. a deployment's {"technique": {"k":
    20}}), then checked as strictly as a file."""
    if spec_path:
        base = load_spec(spec_path)
        data = base.model_dump(exclude={"base_dir"})
        base_dir = base.base_dir
    else:
        data, base_dir = dict(spec or {}), str(base_dir or Path.cwd())
    for section, values in (overrides or {}).items():
        if not isinstance(values, dict) or not isinstance(data.get(section, {}), dict):
            raise SpecError(f'overrides: [{section}] must be a table of keys, e.g. {{"technique": {{"k": 20}}}}')
        data[section] = {**data.get(section, {}), **values}
    return spec_from_dict(data, base_dir=base_dir)

"""The ReleaseSpec: what a data steward writes in a TOML file (or passes as flow parameters).

Relative paths in a spec file are resolved against the spec file's own folder, so a spec
works the same whichever directory the command is started from.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from privpub.schemas.errors import SpecError

# Optional sections beside the modelled ones, with the keys each accepts (read by spec.section()).
EXTRA_SECTIONS: dict[str, tuple[str, ...]] = {
    "evaluate": ("workload_seed",),
    # time_budget: listed so that flows/audit.py refuses it with its own line (budgets are counts now)
    "audit": ("l", "budget", "time_budget", "strategy", "grid", "min_cell", "snap", "after_denial"),
    "series": ("composition", "transient", "l", "keep_groups"),  # tasks/compose/check.py
    "risk": (
        "threshold",
        "max_prosecutor",
        "max_records_at_risk",
        "max_attribute",
        "max_gain",
        "max_difference",
        "population",
        "sample_fraction",
    ),  # tasks/risk/__init__.py
}


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
ROW_ID = "@row"
# `hierarchy = "mask"` (a categorical QI): levels built from the data by masking the last
# characters with MASK_CHAR (tasks/core/hierarchies.py).
MASK = "mask"
MASK_CHAR = "*"
# `hierarchy = "month" | "year"` (a date QI): dates truncated to the month or year before work.
DATE_UNITS = ("month", "year")
# `[dataset] missing = "category"`: what an empty categorical QI cell becomes.
MISSING_CATEGORY = "(missing)"


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
    # without it such a QI is refused as a direct identifier (README, "Direct identifiers")
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

    @model_validator(mode="after")
    def _check(self) -> DatasetSpec:
        if not self.input and not self.table:
            raise ValueError("[dataset] needs 'input' (a CSV or Parquet file) or 'table'")
        names = [q.name for q in self.qi]
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
    pressure; off by default, so secret rows stay in memory."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task_runner: Literal["inprocess", "dask"] = "inprocess"
    workers: int | None = Field(default=None, ge=1)
    address: str | None = Field(default=None, pattern=r"^(tcp|tls)://[^\s/:]+:[0-9]{1,5}$")
    chunk_rows: int = Field(default=2_000_000, ge=1)
    allow_spill: bool = False

    @model_validator(mode="after")
    def _address_needs_dask(self) -> RunSpec:
        if self.address and self.task_runner != "dask":
            raise ValueError('address names a Dask scheduler: it needs task_runner = "dask"')
        if self.address and self.workers:
            raise ValueError("workers sizes a local cluster; an existing cluster (address) has its own")
        return self


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
        """An optional extra section such as [audit]."""
        return dict((self.model_extra or {}).get(name) or {})


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


def spec_from_dict(data: dict[str, Any], base_dir: str | Path = ".") -> ReleaseSpec:
    """Validate a spec. Strict: an unknown section or key, or a non-finite number, is refused
    with one message naming it (technique parameters are checked by the technique itself)."""
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
    seed = data.get("evaluate", {}).get("workload_seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise SpecError(f"[evaluate] workload_seed = {seed!r}: must be an integer from 0 to 2^64 - 1")
    try:
        spec = ReleaseSpec.model_validate({**data, "base_dir": str(base_dir)})
    except ValidationError as exc:
        for err in exc.errors():
            if err["type"] == "extra_forbidden":
                loc = tuple(err["loc"])
                raise unknown_key(_where(loc[:-1]), loc[-1], _valid_keys(loc)) from None
        problems = "; ".join(f"{_where(tuple(err['loc']))}: {err['msg']}" for err in exc.errors())
        raise SpecError(f"invalid spec: {problems}") from None
    _check_parted(spec)
    return spec


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
    if not path.is_file():
        raise SpecError(f"spec file not found: {path}")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}") from None


def load_spec(path: str | Path) -> ReleaseSpec:
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

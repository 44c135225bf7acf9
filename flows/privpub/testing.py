"""The contract battery (issue 26 item 5, issue 40), in the spirit of scikit-learn's
`check_estimator`: the checks every built-in technique passes (tests/test_contract.py runs them
per registered technique), for a technique written anywhere.

    from privpub.testing import check_technique
    check_technique(MyTechnique)   # None when every check passes, else a ContractError

The technique must be registered (privpub.plugin.register) and have a contract case
(privpub.plugin.Contract): passed as `contract`, or `CONTRACTS[name]` in the `contract` module
beside the technique's module (a built-in's tasks/techniques/<folder>/contract.py) or in the
technique's module itself. The checks use stable surfaces only: spec dicts, `privpub.publish`,
the store and what `privpub verify` does (the release loaded again, the technique's verify).
"""

from __future__ import annotations

import importlib
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from privpub.flows.api import publish_data
from privpub.flows.reverify import load_release
from privpub.schemas.errors import PrivacyRefused, SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.state.store import Store
from privpub.tasks.core.contract import Contract, Tamper
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import PrivacyResult, VerifyContext
from privpub.tasks.demo_data import CENSUS_QI, census
from privpub.tasks.techniques.registry import get_technique, technique_class

__all__ = ["Battery", "Contract", "ContractError", "check_technique", "contract_of", "planted_census"]

ROWS = 120  # small: chunk_rows = 1 maps one chunk task per published row
FEW = 7  # "a few rows" per chunk
SEED = 8
STATE = "privpub.duckdb"
RELEASES = "releases"

# publishes one release: (folder to work in, the spec's sections, the input) -> release id; the
# spec names its input "census.csv" and its output RELEASES and STATE, relative to the folder
Publisher = Callable[[Path, dict[str, Any], pd.DataFrame], str]
Published = tuple[dict[str, str], list[tuple[Any, ...]]]


class ContractError(AssertionError):
    """A check of the battery failed; `check` names it."""

    def __init__(self, technique: str, check: str, detail: str):
        super().__init__(f"technique {technique}: {check}: {detail}")
        self.technique, self.check = technique, check


def planted_census(rows: int = ROWS, seed: int = 3) -> pd.DataFrame:
    """The battery's input: the census demo table with person ids that cannot occur anywhere by
    chance (the secret-rows check looks for them)."""
    frame = census(rows, seed=seed)
    frame["pid"] = [f"person-{uuid.uuid4().hex}" for _ in range(len(frame))]
    return frame


def contract_of(cls: type[Technique]) -> Contract:
    """The contract case of a registered technique: `CONTRACTS[name]` in the `contract` module
    beside its module (a built-in's folder), else in its module itself."""
    module = cls.__module__
    package = module if hasattr(importlib.import_module(module), "__path__") else module.rpartition(".")[0]
    places = [f"{package}.contract"] if package else []
    for place in [*places, module]:
        try:
            cases = getattr(importlib.import_module(place), "CONTRACTS", {})
        except ModuleNotFoundError as exc:
            if exc.name != place:
                raise
            continue
        if cls.name in cases:
            case: Contract = cases[cls.name]
            return case
    raise ContractError(
        cls.name,
        "contract",
        f"no contract case: add CONTRACTS = {{{cls.name!r}: Contract(...)}} to {places[0] if places else module}, "
        "or pass check_technique(cls, contract)",
    )


def publish_frame(folder: Path, spec: dict[str, Any], frame: pd.DataFrame) -> str:
    """The default publisher: `privpub.publish(frame, spec)` in this process, output in `folder`."""
    output = {**spec["output"], "dir": str(folder / RELEASES), "state": str(folder / STATE)}
    return str(publish_data(frame, {**spec, "output": output}))


def published(folder: Path, release_id: str) -> Published:
    """The release's files by sha256 (byte identity), and every privacy and utility figure."""
    rel = Store(folder / STATE).release(release_id)
    files = dict(zip(rel["tables"].table_name, rel["tables"].sha256))
    m = rel["metrics"].astype(str)  # (kind, name) order; NaN and NA compare as text
    figures = list(zip(m.kind, m.name, m.text_value, m.threshold, m.passed, m.detail))
    return files, figures


def verify_tables(state: Path, release_id: str, alter: Tamper | None = None) -> list[PrivacyResult]:
    """The privacy results `privpub verify` computes, on the published tables (altered first)."""
    store = Store(state)
    rel, spec, release, problems = load_release(store, release_id)
    if problems:
        raise AssertionError(f"the release does not load: {problems}")
    if alter is not None:
        release = replace(release, tables=alter(release.tables, release.private))
    technique = get_technique(spec)
    context = VerifyContext(None, technique.prior_context(store, spec, before_sequence=rel["sequence"]), rel)
    return technique.verify(release, context)


def month(frame: pd.DataFrame, number: int) -> pd.DataFrame:
    """The month's input: 90% of the people, drawn afresh each month (people leave and return)."""
    return frame.sample(frac=0.9, random_state=number).reset_index(drop=True)


@dataclass
class Battery:
    """The checks of one technique over one input, its default release published once."""

    name: str
    contract: Contract
    frame: pd.DataFrame
    workdir: Path
    publish: Publisher = publish_frame
    _baseline: tuple[Path, str] | None = field(default=None, repr=False)

    def fail(self, check: str, detail: str) -> ContractError:
        return ContractError(self.name, check, detail)

    # --- the spec ------------------------------------------------------------------------------
    def spec(self, params: Mapping[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
        """The battery's spec for this technique (sections replace the spec's own; a section the
        contract's `extra` also sets is merged key by key, the given keys winning)."""
        c = self.contract
        given = {
            name: {**c.extra[name], **body} if isinstance(c.extra.get(name), Mapping) else body
            for name, body in sections.items()
        }
        qi = [q for q in CENSUS_QI if c.qi is None or q["name"] in c.qi]
        if c.sensitive != "occupation":  # the sensitive column leaves the QIs, occupation joins them
            qi = [q for q in qi if q["name"] != c.sensitive] + [{"name": "occupation", "kind": "categorical"}]
        return {
            "dataset": {
                "name": "census",
                "input": "census.csv",
                "person_id": "pid",
                "sensitive": c.sensitive,
                "qi": qi,
            },
            "technique": {"name": self.name, **(c.params if params is None else params)},
            "output": {"dir": RELEASES, "state": STATE, "seed": SEED},
            **c.extra,
            **given,
        }

    def build(self, params: Mapping[str, Any]) -> Technique:
        return get_technique(spec_from_dict(self.spec(params)))

    def release(self, folder: Path, frame: pd.DataFrame | None = None, **sections: Any) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        return self.publish(folder, self.spec(**sections), self.frame if frame is None else frame)

    def baseline(self) -> tuple[Path, str]:
        """The default release, published once for the checks that compare with it."""
        if self._baseline is None:
            folder = self.workdir / f"{self.name}-default"
            self._baseline = folder, self.release(folder)
        return self._baseline

    # --- 1. strict parameters ------------------------------------------------------------------
    def check_parameters_accepted(self) -> None:
        try:
            built = self.build(self.contract.params)
        except SpecError as exc:
            raise self.fail("strict parameters", f"the contract's parameters are refused: {exc}") from exc
        if built.name != self.name:
            raise self.fail("strict parameters", f"the spec built technique {built.name}")

    def check_unknown_parameter_refused(self) -> None:
        params = dict(self.contract.params)
        message = self._refusal({**params, "no_such_key": 1}, "an unknown key")
        if "no_such_key" not in message:
            raise self.fail("strict parameters", f"the refusal of an unknown key does not name it: {message}")
        near = max(params, key=len)  # a near miss of a real key: "did you mean"
        message = self._refusal({**params, near * 2: params[near]}, "a misspelt key")
        if near * 2 not in message or f"did you mean {near}" not in message:
            raise self.fail("strict parameters", f"a misspelt key is not named with 'did you mean {near}': {message}")

    def check_missing_parameter_refused(self) -> None:
        for key in self.contract.required:
            params = {k: v for k, v in self.contract.params.items() if k != key}
            message = self._refusal(params, f"a spec without {key}")
            if key not in message:
                raise self.fail("strict parameters", f"the refusal of a missing {key} does not name it: {message}")

    def check_wrong_type_refused(self) -> None:
        for key in self.contract.required:  # TOML `key = true` where a number or a list is meant
            message = self._refusal({**self.contract.params, key: True}, f"{key} = true")
            if key not in message:
                raise self.fail("strict parameters", f"the refusal of {key} = true does not name it: {message}")

    def _refusal(self, params: Mapping[str, Any], what: str) -> str:
        try:
            self.build(params)
        except SpecError as exc:
            message = str(exc)
            if "\n" in message:
                raise self.fail("strict parameters", f"the refusal of {what} is not one line: {message!r}") from exc
            return message
        raise self.fail("strict parameters", f"{what} is accepted")

    def check_parameters(self) -> None:
        self.check_parameters_accepted()
        self.check_unknown_parameter_refused()
        self.check_missing_parameter_refused()
        self.check_wrong_type_refused()

    # --- 2. determinism ------------------------------------------------------------------------
    def check_determinism(self, folder: Path) -> None:
        """The same spec, input and seed publish identical tables and figures."""
        first = self.baseline()
        again = self.release(folder)
        if published(folder, again) != published(*first):
            raise self.fail("determinism", "the same spec, input and seed published different tables or figures")

    # --- 3. chunks equal one step --------------------------------------------------------------
    def check_chunks(self, folder: Path, chunk_rows: int, **run: Any) -> None:
        """Any `[run] chunk_rows` (and executor) publishes the one-step release and figures."""
        chunked = self.release(folder, run={"chunk_rows": chunk_rows, **run})
        if published(folder, chunked) != published(*self.baseline()):
            raise self.fail(
                "chunked equals one piece", f"chunk_rows = {chunk_rows} published another release than one piece"
            )

    # --- 4. the verifier refuses an altered release --------------------------------------------
    def check_tamper_refused(self) -> None:
        folder, release_id = self.baseline()
        state = folder / STATE
        failed = [r.model for r in verify_tables(state, release_id) if not r.passed]
        if failed:
            raise self.fail("verifier", f"the verifier refuses the untouched release ({', '.join(failed)})")
        try:
            results = verify_tables(state, release_id, self.contract.tamper)
        except (PrivacyRefused, ValueError):
            return  # refused outright
        if all(r.passed for r in results):
            figures = [(r.model, r.value, r.passed) for r in results]
            raise self.fail("verifier", f"the verifier passes the tampered release: {figures}")

    # --- 5. series figures ---------------------------------------------------------------------
    def check_series(self, folder: Path) -> tuple[list[pd.DataFrame], list[str]]:
        """Two releases of a series: the second carries the contract's series figure, the first
        no composition figure (nothing to combine yet). Returns the months and release ids."""
        months = [month(self.frame, m) for m in range(2)]
        ids = [self.release(folder, frame, series={"composition": "warn"}) for frame in months]
        store = Store(folder / STATE)
        if store.history().release_id.tolist() != ids:
            raise self.fail("series figures", "the history does not list the two releases in order")
        metrics = store.release(ids[1])["metrics"]
        names = metrics[metrics.kind == "privacy"].name.tolist()
        figure = self.contract.series_figure
        if figure not in names:
            raise self.fail("series figures", f"the second release has no {figure} figure (it has {names})")
        first = store.release(ids[0])["metrics"]
        if figure.startswith("series-composition") and first.name.str.startswith("series-composition").any():
            raise self.fail("series figures", "the first release of a series carries a composition figure")
        return months, ids

    # --- 6. no secret rows ---------------------------------------------------------------------
    def check_no_secrets(self, roots: Iterable[Path] = ()) -> None:
        """No person id, nor a whole input row, in the release's files (nor in `roots`)."""
        folder, release_id = self.baseline()
        needles = [str(pid).encode() for pid in self.frame.pid]
        rows = self.frame.drop(columns=["pid"]).astype(str).agg(",".join, axis=1).head(50)
        needles += [r.encode() for r in rows]
        places = [*roots, folder / RELEASES]
        files = [p for root in places if root.exists() for p in root.rglob("*") if p.is_file()]
        if not any(release_id in str(p) for p in files):
            raise self.fail("no secrets", "the release's own files were not found")
        for path in files:
            blob = path.read_bytes()
            if any(n in blob for n in needles):
                raise self.fail("no secrets", f"{path} holds an input row or a person id")

    def run(self) -> None:
        """Every check, in order; the first failure raises."""
        self.check_parameters()
        self.check_determinism(self.workdir / "again")
        for rows in (1, FEW):
            self.check_chunks(self.workdir / f"chunks-{rows}", rows)
        self.check_tamper_refused()
        self.check_series(self.workdir / "series")
        self.check_no_secrets()


def check_technique(
    cls: type[Technique],
    contract: Contract | None = None,
    *,
    frame: pd.DataFrame | None = None,
    workdir: str | Path | None = None,
) -> None:
    """Run the contract battery on a registered technique class; raise ContractError (an
    AssertionError naming the check) on the first failure, return None when every check passes.
    `frame`: the input (default: planted_census()); `workdir`: where the releases go (default: a
    temporary folder, removed after)."""
    if not (isinstance(cls, type) and issubclass(cls, Technique)):
        raise TypeError(f"check_technique takes a Technique subclass, got {cls!r}")
    try:
        registered = technique_class(cls.name) if cls.name else None
    except SpecError:
        registered = None
    if registered is not cls:
        raise ContractError(cls.name or cls.__name__, "registered", "register it first (privpub.plugin.register)")
    case = contract if contract is not None else contract_of(cls)
    data = planted_census() if frame is None else frame
    if workdir is not None:
        Battery(cls.name, case, data, Path(workdir)).run()
        return
    with tempfile.TemporaryDirectory(prefix="privpub-contract-") as tmp:
        Battery(cls.name, case, data, Path(tmp)).run()

"""Every technique's [technique] keys are a frozen, strict parameter model (tasks/techniques/<name>/
params.py): unknown keys, wrong types, non-finite numbers and out-of-range values are refused with
one line naming the key."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from privpub.schemas.spec import SpecError, TechniqueSpec, spec_from_dict
from privpub.tasks.core.params import read_params
from privpub.tasks.core.technique import Technique
from privpub.tasks.techniques.registry import get_technique, technique_names

QIDS = [["a"], ["b"]]
# the fewest keys each technique accepts
VALID = {
    "generalization": {"k": 2},
    "anatomy": {"l": 2},
    "muco": {"delta": 0.5},
    "ambiguity": {"alpha": 0.5, "beta": 0.5},
    "priview": {"alpha": 0.5, "beta": 0.5},
    "butterfly": {"k": 2, "qids": QIDS},
    "union-qid": {"k": 2, "qids": QIDS},
    "serial": {"l": 2},
    "dp-synthetic": {"epsilon": 1.0, "bounds": {"a": [0, 1], "b": [0, 1]}, "categories": "from-data"},
}
# the integer keys and their smallest value
INTEGERS = {
    "generalization": {"k": 1, "l": 1},
    "anatomy": {"l": 2},
    "muco": {"l": 1, "chunk_rows": 1},
    "ambiguity": {"window": 1},
    "priview": {"window": 1, "probe_queries": 1},
    "butterfly": {"k": 1, "k_prime": 1},
    "union-qid": {"k": 1, "k_prime": 1},
    "serial": {"l": 2, "releases": 1, "min_group_size": 1, "max_group_size": 1},
    "dp-synthetic": {"bin_count": 2},  # max_rows_per_person: only with rows_per_person = "many" (test_dp_synthetic.py)
}
PROBABILITIES = {"muco": ["delta"], "ambiguity": ["alpha", "beta"], "priview": ["alpha", "beta"]}
REQUIRED = {
    "generalization": ["k"],
    "anatomy": ["l"],
    "muco": ["delta"],
    "ambiguity": ["alpha", "beta"],
    "priview": ["alpha", "beta"],
    "butterfly": ["k", "qids"],
    "union-qid": ["k", "qids"],
    "serial": ["l"],
    "dp-synthetic": ["epsilon"],
}
SPEC = spec_from_dict(
    {
        "dataset": {
            "name": "t",
            "input": "x.csv",
            "person_id": "pid",
            "sensitive": "s",
            "qi": [{"name": "a", "kind": "numeric"}, {"name": "b", "kind": "numeric"}],
        }
    }
)


def make(name: str, **params) -> Technique:
    """The technique built past the spec check (which refuses non-finite numbers on its own)."""
    technique = TechniqueSpec.model_validate({"name": name, **VALID[name], **params})
    return get_technique(SPEC.model_copy(update={"technique": technique}))


def refused(name: str, **params) -> str:
    with pytest.raises(SpecError) as err:
        make(name, **params)
    return str(err.value)


def test_every_registered_technique_is_covered():
    assert set(technique_names()) == set(VALID) == set(INTEGERS) == set(REQUIRED)


@pytest.mark.parametrize("name", sorted(VALID))
def test_unknown_key_is_refused_with_the_nearest_key(name):
    """A misspelled [technique] key is refused naming the nearest key.

    Promise: spec-refuses-unknown-keys."""
    key = next(iter(make(name).params.model_fields))
    bad = key + key[-1]
    assert refused(name, **{bad: 3}) == f"[technique] {bad}: unknown key; did you mean {key}?"
    # a key of another technique is unknown here
    other = "delta" if name not in ("muco", "dp-synthetic") else "alpha"
    assert refused(name, **{other: 0.5}).startswith(f"[technique] {other}: unknown key; ")


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_a_missing_key_is_named(name):
    for key in REQUIRED[name]:
        params = {k: v for k, v in VALID[name].items() if k != key}
        with pytest.raises(SpecError, match=rf"^\[technique\] {name} needs {key} \("):
            get_technique(SPEC.model_copy(update={"technique": TechniqueSpec(name=name, **params)}))


@pytest.mark.parametrize("name", sorted(INTEGERS))
def test_integers_are_strict_finite_and_in_range(name):
    for key, minimum in INTEGERS[name].items():
        # k_prime must stay below k; serial's groups may not be capped below their minimum (l)
        inside = {"k": 3} if key == "k_prime" else {"min_group_size": 1} if key == "max_group_size" else {}
        assert getattr(make(name, **inside, **{key: minimum}).params, key) == minimum
        assert refused(name, **{key: minimum - 1}) == (
            f"[technique] {key} must be an integer >= {minimum}, got {minimum - 1}"
        )
        for wrong in (str(minimum), float(minimum), True, math.nan, math.inf):
            assert refused(name, **{key: wrong}) == (
                f"[technique] {key} must be an integer >= {minimum}, got {wrong!r}"
            )


@pytest.mark.parametrize("name", sorted(PROBABILITIES))
def test_probabilities_are_finite_and_in_the_unit_interval(name):
    for key in PROBABILITIES[name]:
        assert getattr(make(name, **{key: 1}).params, key) == 1
        assert getattr(make(name, **{key: "1/1000000"}).params, key) * 10**6 == 1
        assert refused(name, **{key: 0}) == f"[technique] {key} must be in (0, 1], got 0"
        assert refused(name, **{key: 1.000001}) == f"[technique] {key} must be in (0, 1], got 1000001/1000000"
        for wrong in ("x", math.nan, math.inf, True):
            assert refused(name, **{key: wrong}) == f"[technique] {key} = {wrong!r} is not a number or fraction"


def test_butterfly_checks_k_prime_and_qids():
    for name in ("butterfly", "union-qid"):
        assert refused(name, k_prime=2) == "[technique] k_prime must be smaller than k = 2, got 2"
        for wrong in ("a", [], [[]], [["a", 1]]):
            assert refused(name, qids=wrong).startswith(
                "[technique] qids must be a non-empty list of non-empty lists of QI names"
            )
        assert refused(name, qids=[["a", "a"]]) == "[technique] qids: ['a', 'a'] lists a column twice"
        assert "'z' is not a quasi-identifier" in refused(name, qids=[["z"]])


def test_priview_st_qi_names_a_quasi_identifier():
    assert make("priview", st_qi="b").params.st_qi == "b"
    assert refused("priview", st_qi="z") == "[technique] st_qi = 'z' is not a quasi-identifier"
    assert refused("priview", st_qi=1).startswith("[technique] st_qi must be the name of a quasi-identifier")


def test_serial_strategy_factor_transient_and_suppress():
    assert make("serial", strategy="geometric", factor="1000001/1000000").params.factor > 1
    assert refused("serial", strategy="geometric", factor=1) == "[technique] factor must be > 1, got 1"
    assert make("serial", factor=1).params.factor == 1  # only geometric grows by the factor
    assert refused("serial", factor=math.inf) == "[technique] factor = inf is not a number or fraction"
    assert refused("serial", strategy="weekly").startswith("[technique] strategy must be constant-ratio, geometric")
    for inside in ("all", ["x", "y"], 0.001, 0.999):
        assert make("serial", transient=inside).params.transient == inside
    for wrong in (0.0, 1.0, 3, math.nan, math.inf, "some"):
        assert refused("serial", transient=wrong).startswith('[technique] transient must be "all", a list')
    assert make("serial", suppress=False).params.suppress is False
    assert refused("serial", suppress="yes") == "[technique] suppress must be true or false, got 'yes'"
    tech = make("serial", l=3)
    assert (tech.min_size, tech.max_size) == (3, 1000)  # the defaults filled in


@pytest.mark.parametrize("name", sorted(VALID))
def test_the_model_is_frozen(name):
    params = make(name).params
    key = next(iter(params.model_fields))
    with pytest.raises(ValidationError, match="frozen"):
        setattr(params, key, getattr(params, key))
    assert make(name).params == params  # and compares by value


@pytest.mark.parametrize("name", sorted(VALID))
def test_k_and_l_are_the_models_own(name):
    """What the series composition check holds a series to (tasks/compose)."""
    params = make(name).params
    fields = params.model_fields
    assert params.k_and_l() == (params.k if "k" in fields else None, params.l if "l" in fields else None)


def test_a_parameter_is_read_and_replaced_through_the_params_model():
    """No attribute shims (issue 40): `technique.params` is the one place a parameter is read;
    setting one on the technique is refused naming `params`, and a replacement model is
    validated as any spec's."""
    tech = make("ambiguity")
    before = tech.params
    with pytest.raises(AttributeError):
        tech.alpha  # noqa: B018
    with pytest.raises(AttributeError, match="params"):
        tech.alpha = "1/4"
    tech.params = read_params(tech.name, type(before), {**dict(before), "alpha": "1/4"})
    assert tech.params.alpha * 4 == 1 and before.alpha * 2 == 1
    with pytest.raises(SpecError, match="alpha must be in"):
        read_params(tech.name, type(before), {**dict(before), "alpha": 2})

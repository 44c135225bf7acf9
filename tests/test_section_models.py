"""Issue 40, typed steps: [risk], [series], [audit] and [evaluate] are frozen strict models
(schemas/spec.py SectionModel), read like a technique's parameters: an unknown key refused with
"did you mean", a value of the wrong type refused without coercion, a value outside its domain
refused in one line naming `[section] key`; the spec keeps each section as written, so the
release key does not change."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import (
    AFTER_DENIAL,
    EXTRA_SECTIONS,
    SECTIONS,
    STRATEGIES,
    AuditSpec,
    EvaluateSpec,
    RiskSpec,
    SeriesSpec,
    spec_from_dict,
)
from privpub.tasks.audit.after_denial import POLICIES
from privpub.tasks.audit.auditor import STRATEGIES as AUDITOR_STRATEGIES
from privpub.tasks.demo_data import census_spec


def with_section(name: str, body: dict):
    return spec_from_dict({**census_spec("x.csv", k=5, l=None), name: body})


def read(name: str, body: dict):
    return getattr(with_section(name, body), name)


def test_the_schema_lists_are_the_auditors():
    """schemas cannot import tasks: the lists are copied, and held equal here."""
    assert AFTER_DENIAL == POLICIES
    assert STRATEGIES == AUDITOR_STRATEGIES


def test_the_accepted_keys_are_the_models_fields():
    assert EXTRA_SECTIONS == {name: tuple(model.model_fields) for name, model in SECTIONS.items()}
    assert set(SECTIONS) == {"risk", "series", "audit", "evaluate"}


@pytest.mark.parametrize(
    ("section", "body", "message"),
    [
        ("series", {"compositon": "warn"}, r"^\[series\] compositon: unknown key; did you mean composition\?$"),
        ("audit", {"l": 2, "budgt": 5}, r"^\[audit\] budgt: unknown key; did you mean budget\?$"),
        ("evaluate", {"workload_sed": 1}, r"^\[evaluate\] workload_sed: unknown key; did you mean workload_seed\?$"),
        ("risk", {"treshold": 0.1}, r"^\[risk\] treshold: unknown key; did you mean threshold\?$"),
    ],
)
def test_an_unknown_key_is_refused_by_the_spec_check(section, body, message):
    """The other sections refuse an unknown key the same way.

    Promise: spec-refuses-unknown-keys."""
    with pytest.raises(SpecError, match=message):
        with_section(section, body)


@pytest.mark.parametrize(
    ("section", "body", "message"),
    [
        # no coercion: "2", 2.0 and true are not the integer 2
        ("series", {"l": "2"}, r"^\[series\] l must be an integer >= 1, got '2'$"),
        ("series", {"l": 2.0}, r"^\[series\] l must be an integer >= 1, got 2.0$"),
        ("series", {"l": True}, r"^\[series\] l must be an integer >= 1, got True$"),
        ("series", {"keep_groups": 1}, r"^\[series\] keep_groups must be true or false, got 1$"),
        ("series", {"transient": ["a", True]}, r"^\[series\] transient must be a list of sensitive values$"),
        ("audit", {"l": "2"}, r"^\[audit\] l must be an integer >= 1$"),
        ("audit", {}, r"^\[audit\] l must be an integer >= 1$"),  # required
        ("audit", {"l": 2, "budget": 5.0}, r"^\[audit\] budget must be a positive whole number"),
        ("audit", {"l": 2, "strategy": "fast"}, r'^\[audit\] strategy must be "simulatable", "delay" or "joint", got'),
        ("audit", {"l": 2, "strategy": 1}, r"^\[audit\] strategy must be"),
        ("risk", {"threshold": "0.2"}, r"^\[risk\] threshold = '0.2': must be a number above 0 and at most 1$"),
        ("risk", {"population": 10.0}, r"^\[risk\] population = 10.0: must be a whole number of people"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_not_coerced(section, body, message):
    spec = with_section(section, body)  # unknown keys only are refused before the reader
    with pytest.raises(SpecError, match=message) as err:
        getattr(spec, section)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("section", "inside", "outside", "message"),
    [
        ("series", {"l": 1}, {"l": 0}, r"^\[series\] l must be an integer >= 1, got 0$"),
        ("audit", {"l": 1, "budget": 1}, {"l": 1, "budget": 0}, r"^\[audit\] budget must be a positive"),
        ("audit", {"l": 1, "grid": "auto", "min_cell": 1}, {"l": 1, "grid": "auto", "min_cell": 0}, r"min_cell"),
        ("risk", {"threshold": 1}, {"threshold": 1.0000001}, r"^\[risk\] threshold = 1.0000001: must be"),
        ("risk", {"max_prosecutor": 1e-12}, {"max_prosecutor": 0}, r"^\[risk\] max_prosecutor = 0: must be"),
        ("risk", {"max_gain": 1e-12}, {"max_gain": 0.0}, r"^\[risk\] max_gain = 0.0: must be a finite number"),
        ("risk", {"population": 1}, {"population": 0}, r"^\[risk\] population = 0: must be a whole number"),
    ],
)
def test_a_domain_just_inside_is_read_just_outside_refused(section, inside, outside, message):
    read(section, inside)
    with pytest.raises(SpecError, match=message):
        read(section, outside)


@pytest.mark.parametrize(
    ("section", "body"),
    [("risk", {"max_gain": float("inf")}), ("risk", {"threshold": float("nan")}), ("series", {"l": float("nan")})],
)
def test_a_non_finite_number_is_refused_by_the_spec_check_naming_the_key(section, body):
    key = next(iter(body))
    with pytest.raises(SpecError, match=rf"^\[{section}\] {key} = (inf|nan): not a finite number$"):
        with_section(section, body)


def test_the_models_are_frozen_and_typed():
    risk = read("risk", {"threshold": 1, "max_gain": 4, "population": 700})
    assert (risk.threshold, risk.max_gain, risk.population) == (1.0, 4.0, 700)
    assert isinstance(risk.threshold, float) and isinstance(risk.max_gain, float)  # an int limit read as a float
    with pytest.raises(ValidationError):
        risk.threshold = 0.5  # type: ignore[misc]
    series = read("series", {"transient": ["employed", 3], "l": 2})
    assert series.transient == ("employed", "3") and series.l == 2 and series.composition == "refuse"
    assert read("audit", {"l": 3}) == AuditSpec(l=3)
    assert read("evaluate", {}) == EvaluateSpec(workload_seed=0)
    assert RiskSpec().threshold == 0.2 and SeriesSpec().keep_groups is False


def test_the_spec_keeps_a_section_as_written():
    """The release key reads [series] as written (flows/pipeline.py release_key): an int stays an
    int, a default is not added."""
    spec = with_section("series", {"transient": [3], "keep_groups": True})
    assert spec.section("series") == {"transient": [3], "keep_groups": True}
    assert spec.series.transient == ("3",)

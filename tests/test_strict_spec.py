"""Issue 25, items 6 and 7: spec values refused before any work, in one line, with no coercion."""

from __future__ import annotations

import pytest

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.demo_data import census_spec
from privpub.tasks.techniques.registry import get_technique


def spec(**sections):
    data = census_spec("census.csv", seed=1)
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return data


@pytest.mark.parametrize(
    ("section", "key", "bad", "good"),
    [
        ("run", "allow_spill", "yes", True),
        ("run", "workers", "2", 2),
        ("run", "chunk_rows", 1000.0, 1000),
        ("run", "task_runner", 1, "inprocess"),
        ("output", "seed", "42", 42),
        ("output", "dir", 5, "out"),
        ("technique", "name", 3, "generalization"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_not_coerced(section, key, bad, good):
    """A value of the wrong type is refused in one line, never converted.

    Promise: spec-types-not-coerced."""
    spec_from_dict(spec(**{section: {key: good}}))
    with pytest.raises(SpecError, match=rf"\[{section}\] {key}: Input should be") as err:
        spec_from_dict(spec(**{section: {key: bad}}))
    assert "\n" not in str(err.value)


def test_a_seed_must_fit_in_64_bits():
    """A seed of 2^64 ran the whole pipeline and then failed at the commit (UBIGINT)."""
    assert spec_from_dict(spec(output={"seed": 2**64 - 1})).output.seed == 2**64 - 1
    with pytest.raises(SpecError, match=r"\[output\] seed: Input should be less than"):
        spec_from_dict(spec(output={"seed": 2**64}))
    with pytest.raises(SpecError, match=r"\[output\] seed: Input should be greater than or equal to 0"):
        spec_from_dict(spec(output={"seed": -1}))


@pytest.mark.parametrize("bad", ["x", -1, 2**64, 1.5, True])
def test_a_workload_seed_is_an_integer_in_range(bad):
    for good in (0, 2**64 - 1):
        spec_from_dict(spec(evaluate={"workload_seed": good}))
    with pytest.raises(SpecError, match=r"\[evaluate\] workload_seed = .*: must be an integer from 0 to 2\^64 - 1"):
        spec_from_dict(spec(evaluate={"workload_seed": bad}))


def test_base_dir_is_not_a_key_of_a_spec():
    """It was accepted and silently ignored (the spec file's folder is the base)."""
    data = spec()
    data["base_dir"] = "/tmp"
    with pytest.raises(SpecError, match=r"\[base_dir\]: unknown section"):
        spec_from_dict(data)


def serial(**params):
    data = spec()
    data["technique"] = {"name": "serial", "l": 2, **params}
    return get_technique(spec_from_dict(data))


def test_serial_groups_cannot_be_smaller_than_their_minimum():
    """min_group_size = 10, max_group_size = 3 published with every sensitive value suppressed."""
    assert serial(min_group_size=3, max_group_size=3).params.max_group_size == 3  # just inside
    with pytest.raises(SpecError, match="min_group_size = 4 is larger than max_group_size = 3"):
        serial(min_group_size=4, max_group_size=3)  # just outside
    serial(max_group_size=2)  # l = 2 is the smallest group
    with pytest.raises(SpecError, match=r"l \(the smallest group\) = 2 is larger than max_group_size = 1"):
        serial(max_group_size=1)

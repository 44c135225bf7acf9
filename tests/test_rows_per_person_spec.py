"""`[dataset] rows_per_person`: strict, "one" refuses a repeated person id naming "many" (never
"@row"), and every technique supports "many" or refuses it by name before any work (issue 39)."""

from __future__ import annotations

import pytest

from privpub.flows.pipeline import release_key
from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.techniques.registry import _REGISTRY, get_technique, technique_names
from tests.test_contract import spec_dict as contract_spec


def spec_dict(**dataset) -> dict:
    d = census_spec("x.csv", k=5, l=2)
    d["dataset"].update(dataset)
    return d


def test_default_is_one_row_per_person():
    assert spec_from_dict(spec_dict()).dataset.rows_per_person == "one"


@pytest.mark.parametrize("value", ["several", "Many", 2, True, ["many"]])
def test_a_value_outside_its_domain_or_of_another_type_is_refused(value):
    with pytest.raises(SpecError, match="rows_per_person"):
        spec_from_dict(spec_dict(rows_per_person=value))


def test_many_needs_a_person_id_column_not_the_row_number():
    with pytest.raises(SpecError, match=r'rows_per_person = "many" needs a person id column'):
        spec_from_dict(spec_dict(rows_per_person="many", person_id="@row"))


def test_many_is_refused_on_the_dask_runner_before_any_work():
    d = spec_dict(rows_per_person="many")
    d["run"] = {"task_runner": "dask"}
    with pytest.raises(SpecError, match=r'rows_per_person = "many" runs in memory only'):
        spec_from_dict(d)


def test_a_repeated_id_under_one_names_many_never_the_row_number():
    frame = census(40, seed=1)
    frame.loc[[4, 9, 12], "pid"] = 987654
    with pytest.raises(InputError, match=r"row 10, column 'pid': repeats the person id of row 5") as err:
        validate_input(frame, spec_from_dict(spec_dict()))
    message = str(err.value)
    assert 'rows_per_person = "many"' in message and "and 1 more repeated id" in message
    assert "@row" not in message and "987654" not in message


def test_under_many_a_repeated_id_is_accepted_and_rows_are_numbered_by_person():
    frame = census(40, seed=1)
    frame.loc[[4, 9, 12], "pid"] = 987654  # one person with three rows
    spec = spec_from_dict(spec_dict(rows_per_person="many"))
    data = Microdata.from_frame(spec, validate_input(frame, spec))
    assert data.n == 40 and data.people == 38
    assert data.person is not None and len(set(data.person[[4, 9, 12]])) == 1
    assert len(set(data.person.tolist())) == 38
    one = Microdata.from_frame(
        spec_from_dict(spec_dict()), validate_input(census(40, seed=1), spec_from_dict(spec_dict()))
    )
    assert one.person is None and one.people == 40


@pytest.mark.parametrize("name", technique_names())
def test_every_technique_supports_many_or_refuses_it_by_name(name):
    d = contract_spec(name)
    d["dataset"]["rows_per_person"] = "many"
    spec = spec_from_dict(d)
    if _REGISTRY[name].capabilities.many_rows_per_person:
        assert get_technique(spec).name == name
    else:
        with pytest.raises(SpecError, match=rf'rows_per_person = "many": technique {name} does not protect'):
            get_technique(spec)


def test_a_spec_without_the_new_dataset_keys_keeps_its_release_key():
    """The key privpub 992171f (before rows_per_person and near_unique) gave this spec: a re-run
    of a stored release is still recognised; the new keys at a value that changes something
    change the key."""
    d = census_spec("census.csv", k=5, l=2)
    assert (
        release_key(spec_from_dict(d), "f" * 64, 7)
        == "906647a83fd09f2e2c0afcce19909ec37c8ee48ecfadc3c1def77e144bb3c7c9"
    )
    d["dataset"]["rows_per_person"] = "many"
    assert (
        release_key(spec_from_dict(d), "f" * 64, 7)
        != "906647a83fd09f2e2c0afcce19909ec37c8ee48ecfadc3c1def77e144bb3c7c9"
    )
    d["dataset"]["rows_per_person"] = "one"
    d["dataset"]["qi"][0]["near_unique"] = "allow"
    assert (
        release_key(spec_from_dict(d), "f" * 64, 7)
        != "906647a83fd09f2e2c0afcce19909ec37c8ee48ecfadc3c1def77e144bb3c7c9"
    )

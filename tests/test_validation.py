"""Bad input ends with one clear message naming the problem (row and column where there is one)."""

from __future__ import annotations

import pytest

from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.input import validate_input
from privpub.schemas.spec import load_spec, spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import census, census_spec
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.validate import validate
from privpub.tasks.verify.published import check_published
from tests.helpers import rng

SPEC = spec_from_dict(census_spec("x.csv", k=5, l=2))


def frame():
    return census(40, seed=1)


def test_missing_column():
    with pytest.raises(InputError, match="missing column.*'race'"):
        validate_input(frame().drop(columns=["race"]), SPEC)


def test_null_in_a_qi_names_row_and_column():
    f = frame()
    f.loc[6, "sex"] = None
    with pytest.raises(InputError, match=r"row 7, column 'sex': is empty"):
        validate_input(f, SPEC)


def test_non_numeric_age_names_row_not_value():
    """The message names the row and column, never the cell.

    Promise: messages-quote-no-cell."""
    f = frame().astype({"age": object})
    f.loc[2, "age"] = "forty"
    with pytest.raises(InputError, match=r"row 3, column 'age': not a number$") as err:
        validate_input(f, SPEC)
    assert "forty" not in str(err.value)


def test_duplicated_person_id():
    f = frame()
    f.loc[[4, 9], "pid"] = 987654
    with pytest.raises(InputError, match=r"row 10, column 'pid': repeats the person id of row 5") as err:
        validate_input(f, SPEC)
    assert "987654" not in str(err.value)  # the id itself is never shown


def test_value_outside_declared_order():
    f = frame()
    f.loc[0, "education"] = "phd"
    with pytest.raises(InputError, match=r"row 1, column 'education': value not in the declared order"):
        validate_input(f, SPEC)


def test_k_larger_than_table():
    spec = spec_from_dict(census_spec("x.csv", k=100, l=None))
    with pytest.raises(InputError, match="k = 100 is larger than the table \\(40 rows\\)"):
        validate(frame(), spec, get_technique(spec))


def test_spec_errors_are_clear(tmp_path):
    with pytest.raises(SpecError, match="unknown"):
        get_technique(spec_from_dict({**census_spec("x.csv"), "technique": {"name": "nope"}}))
    with pytest.raises(SpecError, match="needs k"):
        get_technique(spec_from_dict({**census_spec("x.csv"), "technique": {"name": "generalization"}}))
    bad = tmp_path / "bad.toml"
    bad.write_text("[dataset\nname=1")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)
    with pytest.raises(SpecError, match="ordinal quasi-identifier 'e' needs an 'order'"):
        spec_from_dict(
            {
                "dataset": {
                    "name": "s",
                    "input": "a.csv",
                    "person_id": "p",
                    "sensitive": "s",
                    "qi": [{"name": "e", "kind": "ordinal"}],
                }
            }
        )


def test_readme_spec_example_loads(tmp_path):
    """The contract spec of the README (now the first example of docs/spec.md, where the README's
    reference moved) parses with every key as written."""
    text = open("docs/spec.md").read()
    block = text.split("```toml", 1)[1].split("```", 1)[0]
    (tmp_path / "spec.toml").write_text(block)
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.dataset.name == "census" and spec.technique.name == "generalization"
    assert spec.technique.params == {"k": 10, "l": 3}
    assert [q.kind for q in spec.dataset.qi] == ["numeric", "categorical", "ordinal"]
    assert spec.output.seed == 42 and spec.output_dir == tmp_path / "releases"


def test_published_table_passes_its_schema_and_holds_no_person_id():
    spec = SPEC
    tech = get_technique(spec)
    data = Microdata.from_frame(spec, validate_input(census(300, seed=2), spec))
    release = tech.anonymize(data, tech.partition(data, rng()), rng())
    check_published(release, spec, tech)
    cols = set(release.tables["table"].column_names)
    assert "pid" not in cols
    allowed = {"occupation"} | {
        c for q in spec.dataset.qi for c in ((f"{q.name}_lo", f"{q.name}_hi") if q.kind == "numeric" else (q.name,))
    }
    assert cols == allowed


def test_plugin_map_names_the_module_of_every_technique():
    """tasks.techniques.registry.MODULES lets a run import only its technique: it must be complete and true."""
    import sys

    from privpub.tasks.techniques.registry import _REGISTRY, MODULES, technique_names

    assert set(MODULES) == set(technique_names())
    for name, module in MODULES.items():
        assert _REGISTRY[name].__module__ == f"privpub.tasks.techniques.{module}", name
    assert "privpub.tasks.techniques.muco.technique" in sys.modules  # technique_names() loaded every plug-in


def test_an_infinity_above_a_non_number_is_named_first():
    """A column pandera cannot coerce skips its finite check; the earlier inf is still named
    (found by test_hardening's random corruptions: [(0, 'age', 'inf'), (1, 'age', 'text')])."""
    f = frame().astype({"age": object})
    f.loc[0, "age"] = float("inf")
    f.loc[1, "age"] = "text"
    with pytest.raises(
        InputError,
        match=r"^input rejected: row 1, column 'age': not a finite number "
        r"\(inf or nan\); row 2, column 'age': not a number$",
    ):
        validate_input(f, SPEC)

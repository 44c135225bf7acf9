"""Repeat protection against the series' latest release, not its first (issue 46, item 1): the
README's rule is that a release is a repeat when its input, technique and parameters are those
of the series' LAST release. Input A (#1), input B (#2): B again is refused naming #2, with the
randomized technique's reason; A again after B is not a repeat and publishes (#3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import privpub
from privpub.schemas.errors import PrivacyRefused
from privpub.state.store import Store
from privpub.tasks.demo_data import census
from tests.test_contract import spec_dict, toml

ROWS = 120


def setup_series(folder: Path, name: str) -> tuple[Path, Path, Path, list[str]]:
    """Spec, input A and input B (one cell apart) in `folder`; releases #1 on A and #2 on B."""
    spec = spec_dict(name, series={"composition": "warn"})  # the series check is not this test's subject
    spec["output"].pop("seed")  # each release draws its own: a repeat is refused, not returned
    text = "\n".join(f"[{s}]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in body.items()) for s, body in spec.items())
    (folder / "spec.toml").write_text(text)
    a = census(ROWS, seed=5)
    b = a.copy()
    b.loc[ROWS - 1, "age"] = int(b.loc[ROWS - 1, "age"]) + 1
    a_csv, b_csv = folder / "a.csv", folder / "b.csv"
    a.to_csv(a_csv, index=False)
    b.to_csv(b_csv, index=False)
    ids = [publish(folder, a_csv), publish(folder, b_csv)]
    return folder / "spec.toml", a_csv, b_csv, ids


def publish(folder: Path, data: Path) -> str:
    """A release of `data` through the spec file (its input: census.csv, a copy of `data`)."""
    (folder / "census.csv").write_bytes(data.read_bytes())
    return str(privpub.publish(str(folder / "spec.toml")))


@pytest.mark.parametrize("name", ["muco", "ambiguity"])
def test_the_input_of_the_latest_release_again_is_refused_naming_it(tmp_path, name):
    """Promise: repeat-protection. #1 on A, #2 on B, then B again: refused as a repeat of #2 (the
    latest), the message saying the technique is randomized; an audit row names #2."""
    _, _, b_csv, (first, second) = setup_series(tmp_path, name)
    with pytest.raises(PrivacyRefused) as refused:
        publish(tmp_path, b_csv)
    message = str(refused.value)
    assert f"the input is unchanged since release #2 ({second})" in message
    assert f"{name} is randomized" in message and "average the noise out" in message
    assert first not in message
    store = Store(tmp_path / "privpub.duckdb")
    log = store.audit_log()
    assert log.outcome.iloc[-1] == "refused" and second in log.detail.iloc[-1]
    assert store.history(None).release_id.tolist() == [first, second]


def test_the_input_of_an_earlier_release_after_another_is_not_a_repeat(tmp_path):
    """Promise: repeat-protection. #1 on A, #2 on B, then A again: the latest release's input is
    B, so A publishes (#3), as the README says (only the last release is compared)."""
    _, a_csv, _, (first, second) = setup_series(tmp_path, "muco")
    third = publish(tmp_path, a_csv)
    history = Store(tmp_path / "privpub.duckdb").history(None)
    assert history.release_id.tolist() == [first, second, third]
    assert history.sequence.tolist() == [1, 2, 3]
    # and A once more is now a repeat of #3
    with pytest.raises(PrivacyRefused, match=rf"unchanged since release #3 \({third}\)"):
        publish(tmp_path, a_csv)

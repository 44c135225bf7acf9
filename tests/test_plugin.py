"""The plug-in surface (issue 40): a technique written outside the repository, registered through
`privpub.plugin`, checked by `privpub.testing.check_technique` (the battery the built-ins pass)
and published with `privpub.publish`; a broken one refused by the battery, naming the check;
techniques found through the `privpub.techniques` entry-point group."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import privpub
from privpub import plugin
from privpub.schemas.errors import SpecError
from privpub.tasks.techniques import registry
from privpub.testing import ContractError, check_technique, planted_census

# A k-anonymity by full-domain generalization of one numeric QI, as a third party would write it:
# bins of width w (1, 2, 4, ...) until every bin holds k people or more; one published table of
# [age_lo, age_hi] and the sensitive value; its verifier counts the classes of the published table.
TECHNIQUE = """
from __future__ import annotations

import numpy as np
import pandera.pandas as pdr
import pyarrow as pa
from pydantic import Field

from privpub.plugin import Capabilities, Description, Partition, PrivacyResult, Release, Technique, TechniqueParams


class BinParams(TechniqueParams):
    k: int = Field(ge=1, description="an integer >= 1")
    qi: str = Field("age", description="the name of a numeric quasi-identifier")

    def k_and_l(self):
        return self.k, None


class AgeBins(Technique):
    name = "age-bins"
    Params = BinParams
    capabilities = Capabilities(risk_note=None)

    def check_params(self):
        if self.params.qi not in self.spec.dataset.qi_names:
            raise ValueError(f"[technique] qi: {self.params.qi!r} is not a quasi-identifier")

    def values(self, data):
        j = data.qi_names.index(self.params.qi)
        return data.domain(self.params.qi).values[data.codes[:, j]].astype(np.int64)

    def partition(self, data, rng):
        x = self.values(data)
        width = 1
        while True:  # at most log2(range) rounds; each one vectorised over the rows
            bins, group, sizes = np.unique(x // width, return_inverse=True, return_counts=True)
            if sizes.min() >= self.params.k or len(bins) == 1:
                return Partition(group=group.astype(np.int64), n_groups=len(bins), info={"width": width})
            width *= 2

    def anonymize(self, data, part, rng):
        x, width = self.values(data), part.info["width"]
        order = rng.permutation(data.n)
        lo = (x // width) * width
        sensitive = data.sensitive_values[data.sensitive_codes]
        q = self.params.qi
        table = pa.table({
            f"{q}_lo": pa.array(lo[order], pa.int64()),
            f"{q}_hi": pa.array(lo[order] + width - 1, pa.int64()),
            self.spec.dataset.sensitive: pa.array(sensitive[order].tolist()),
        })
        return Release({"table": table}, info={"groups": part.n_groups, "width": width})

    def class_sizes(self, table):
        q = self.params.qi
        keys = np.stack([table.column(f"{q}_lo").to_numpy(), table.column(f"{q}_hi").to_numpy()], axis=1)
        return np.unique(keys, axis=0, return_counts=True)[1]

    def verify(self, release, context):
        sizes = self.class_sizes(release.tables["table"])
        smallest = int(sizes.min())
        return [PrivacyResult("k-anonymity", smallest, self.params.k, smallest >= self.params.k, {"size": smallest})]

    def estimate_counts(self, release, workload):
        table, q = release.tables["table"], self.params.qi
        lo, hi = table.column(f"{q}_lo").to_numpy(), table.column(f"{q}_hi").to_numpy()
        sensitive = np.asarray(table.column(self.spec.dataset.sensitive).to_pylist(), dtype=object)
        out = np.zeros(len(workload))
        for i, query in enumerate(workload):  # one vectorised pass over the rows per query
            share = (sensitive == query.sensitive_value).astype(float)
            for column, cond in query.conditions:
                if column == q:  # uniform within a bin: the overlap's share of its width
                    overlap = np.minimum(hi, cond.hi) - np.maximum(lo, cond.lo) + 1
                    share *= np.clip(overlap, 0, None) / (hi - lo + 1)
            out[i] = share.sum()
        return out

    def group_sizes(self, release):
        return self.class_sizes(release.tables["table"])

    def risk_table(self, release):
        table = release.tables["table"]
        return table, [f"{self.params.qi}_lo", f"{self.params.qi}_hi"]

    def table_schemas(self, spec):
        q, bound = self.params.qi, pdr.Column(int, nullable=False)
        return {"table": pdr.DataFrameSchema(
            {f"{q}_lo": bound, f"{q}_hi": bound, spec.dataset.sensitive: pdr.Column(nullable=False)}, strict=True
        )}

    def describe(self, privacy, sensitive):
        return Description(published_as="The age is published as a range of equal width for everyone")
"""

CONTRACT = """
from privpub.plugin import Contract, narrow_interval

CONTRACTS = {
    "age-bins": Contract(
        params={"k": 5},
        required=("k",),
        tamper=narrow_interval("age"),
        series_figure="series-composition-k",
        qi=("age",),
    ),
}
"""


@pytest.fixture
def registry_restored():
    """Plug-ins registered by a test leave the registry as it was (every built-in loaded first: a
    module imported during the test would not register its classes again)."""
    registry.registered()
    saved, modules = dict(registry._REGISTRY), dict(registry.MODULES)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    registry.MODULES.clear()
    registry.MODULES.update(modules)


def write_plugin(folder: Path, package: str, technique: str = TECHNIQUE) -> None:
    """The plug-in as a package outside the repository: its technique and its contract case."""
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text("")
    (folder / package / "technique.py").write_text(textwrap.dedent(technique))
    (folder / package / "contract.py").write_text(textwrap.dedent(CONTRACT))


@pytest.fixture
def age_bins(tmp_path, monkeypatch, registry_restored):
    """The plug-in's class, imported from a folder outside the repository and registered."""
    root = Path(__file__).resolve().parent.parent
    folder = tmp_path / "outside"
    assert root not in folder.parents
    write_plugin(folder, "agebins_plugin")
    monkeypatch.syspath_prepend(str(folder))
    cls = importlib.import_module("agebins_plugin.technique").AgeBins
    yield plugin.register(cls)
    for name in [m for m in sys.modules if m.startswith("agebins_plugin")]:
        del sys.modules[name]


def spec(tmp_path: Path, k: int = 5) -> dict:
    return {
        "dataset": {
            "name": "census",
            "person_id": "pid",
            "sensitive": "occupation",
            "qi": [{"name": "age", "kind": "numeric"}],
        },
        "technique": {"name": "age-bins", "k": k},
        "output": {"dir": str(tmp_path / "releases"), "state": str(tmp_path / "state.duckdb"), "seed": 1},
    }


def brute_force_class_sizes(frame: pd.DataFrame) -> list[int]:
    """Class sizes of a published table, counted from its rows one by one (no numpy)."""
    sizes: dict[tuple, int] = {}
    for lo, hi in zip(frame.age_lo, frame.age_hi):
        sizes[(lo, hi)] = sizes.get((lo, hi), 0) + 1
    return sorted(sizes.values())


def test_the_plugin_is_registered_and_named_by_privpub(age_bins):
    assert plugin.technique("age-bins") is age_bins
    assert "age-bins" in privpub.technique_names()
    assert plugin.technique("generalization").name == "generalization"  # the built-ins are there too
    with pytest.raises(ValueError, match="registered twice"):
        plugin.register(type("Other", (plugin.Technique,), {"name": "age-bins"}))


def test_the_plugin_passes_the_contract_battery(age_bins, tmp_path):
    assert check_technique(age_bins, workdir=tmp_path) is None


def test_the_plugin_publishes_through_privpub_publish(age_bins, tmp_path):
    frame = planted_census(200, seed=4)
    release = privpub.publish(frame, spec(tmp_path, k=7))
    table = pq.read_table(tmp_path / "releases" / str(release) / "table.parquet").to_pandas()
    assert set(table.columns) == {"age_lo", "age_hi", "occupation"} and len(table) == 200
    sizes = brute_force_class_sizes(table)
    assert min(sizes) >= 7 and sum(sizes) == 200
    widths = set(table.age_hi - table.age_lo + 1)
    assert len(widths) == 1  # full-domain: one width for every bin
    # the smallest width that works: half of it leaves a bin of fewer than k people
    half = widths.pop() // 2
    if half:
        assert pd.Series(frame.age // half).value_counts().min() < 7
    figures = privpub.Store(tmp_path / "state.duckdb").release(str(release))["metrics"]
    k = figures[(figures.kind == "privacy") & (figures.name == "k-anonymity")].iloc[0]
    assert int(k.value) == min(sizes) and bool(k.passed)
    report = (tmp_path / "releases" / str(release) / "report.html").read_text()
    assert "The age is published as a range of equal width for everyone" in report  # its describe hook
    assert not [pid for pid in frame.pid if pid in report]


def test_a_k_just_above_the_people_is_refused_before_publishing(age_bins, tmp_path):
    """k = rows + 1: one bin of all rows is still too small; the verifier refuses the release."""
    frame = planted_census(30, seed=4)
    with pytest.raises(privpub.PrivacyRefused, match="k-anonymity"):
        privpub.publish(frame, spec(tmp_path, k=31))
    assert privpub.publish(frame, spec(tmp_path / "at", k=30))  # just inside: one bin of 30


def test_a_verifier_that_always_passes_fails_the_battery(tmp_path, monkeypatch, registry_restored):
    broken = TECHNIQUE.replace(
        "smallest >= self.params.k, {",
        "True, {",  # the tampered row is never refused
    ).replace('name = "age-bins"', 'name = "age-bins"  # broken')
    assert broken != TECHNIQUE
    write_plugin(tmp_path / "outside", "brokenbins_plugin", broken)
    monkeypatch.syspath_prepend(str(tmp_path / "outside"))
    cls = plugin.register(importlib.import_module("brokenbins_plugin.technique").AgeBins)
    try:
        with pytest.raises(ContractError) as err:
            check_technique(cls, workdir=tmp_path / "work")
        assert err.value.check == "verifier" and "tampered" in str(err.value)
        assert isinstance(err.value, AssertionError)
    finally:
        del sys.modules["brokenbins_plugin.technique"]


def test_lenient_parameters_fail_the_battery_before_any_release(tmp_path, monkeypatch, registry_restored):
    lenient = TECHNIQUE.replace(
        "class BinParams(TechniqueParams):\n",
        "class BinParams(TechniqueParams):\n    model_config = {'extra': 'allow'}\n",
    )
    write_plugin(tmp_path / "outside", "lenientbins_plugin", lenient)
    monkeypatch.syspath_prepend(str(tmp_path / "outside"))
    cls = plugin.register(importlib.import_module("lenientbins_plugin.technique").AgeBins)
    try:
        with pytest.raises(ContractError) as err:
            check_technique(cls, workdir=tmp_path / "work")
        assert err.value.check == "strict parameters" and "unknown key is accepted" in str(err.value)
        assert not (tmp_path / "work").exists()  # refused before publishing anything
    finally:
        del sys.modules["lenientbins_plugin.technique"]


def test_an_unregistered_class_or_one_without_a_contract_is_named(tmp_path, registry_restored):
    class Nameless(plugin.Technique):
        name = "nameless"

    with pytest.raises(ContractError, match="register it first") as err:
        check_technique(Nameless)
    assert err.value.check == "registered"
    plugin.register(Nameless)
    with pytest.raises(ContractError, match="no contract case") as err:
        check_technique(Nameless)
    assert err.value.check == "contract"


def test_an_entry_point_names_a_technique_found_without_an_import(tmp_path, monkeypatch, registry_restored):
    """A distribution on sys.path declaring `[privpub.techniques] age-bins-ep = module:Class`: the
    registry finds it by the entry point's name, and an unknown name still lists it."""
    folder = tmp_path / "site"
    write_plugin(folder, "epbins_plugin")
    (folder / "epbins_plugin" / "entry.py").write_text(
        "from epbins_plugin.technique import AgeBins\n\n\nclass EntryBins(AgeBins):\n    name = ''\n"
    )
    info = folder / "epbins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: epbins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[privpub.techniques]\nage-bins-ep = epbins_plugin.entry:EntryBins\n")
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    try:
        assert "epbins_plugin.entry" not in sys.modules
        found = plugin.technique("age-bins-ep")
        assert found.__name__ == "EntryBins" and found.name == "age-bins-ep"
        assert "age-bins-ep" in privpub.technique_names()
        with pytest.raises(SpecError, match="age-bins-ep"):  # the known names, plug-ins included
            plugin.technique("no-such-technique")
        frame = planted_census(60, seed=2)
        release = privpub.publish(frame, {**spec(tmp_path), "technique": {"name": "age-bins-ep", "k": 4}})
        assert privpub.history(tmp_path / "state.duckdb").technique.tolist() == ["age-bins-ep"]
        assert release
    finally:
        for name in [m for m in sys.modules if m.startswith("epbins_plugin")]:
            del sys.modules[name]


def test_a_broken_entry_point_is_named(tmp_path, monkeypatch, registry_restored):
    info = tmp_path / "site" / "brokenep-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenep\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[privpub.techniques]\nbroken = no_such_module_here:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    with pytest.raises(ImportError, match=r"technique plug-in broken \(no_such_module_here:Thing\)"):
        plugin.technique("not-a-folder-name")


def test_the_plugin_surface_reexports_the_contract_types():
    from privpub.tasks.core import params, technique, types

    assert plugin.Technique is technique.Technique and plugin.Capabilities is technique.Capabilities
    assert plugin.TechniqueParams is params.TechniqueParams
    assert (plugin.Release, plugin.Partition, plugin.PrivacyResult, plugin.ChunkPlan) == (
        types.Release,
        types.Partition,
        types.PrivacyResult,
        types.ChunkPlan,
    )
    assert plugin.Microdata.__name__ == "Microdata"
    assert privpub.plugin is plugin and privpub.testing.check_technique is check_technique  # lazy names
    assert set(plugin.__all__) >= {"technique", "register", "Technique", "Capabilities", "TechniqueParams"}
    assert np.all([hasattr(plugin, n) for n in plugin.__all__])

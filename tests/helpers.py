"""Small builders shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from privpub.schemas.spec import spec_from_dict
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.demo_data import CENSUS_QI


def child_pythonpath(root: Path) -> str:
    """PYTHONPATH for a privpub subprocess: the checkout's tests (`root`) after the path these
    tests run with, if any. run_mutants.py runs the tests with the mutated copy's privpub first
    on PYTHONPATH; a CLI test must run that code too, not the editable install's."""
    return os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(root)) if p)


def census_spec_toml(
    input_name: str = "census.csv",
    k: int | None = 5,
    l: int | None = 3,
    seed: int | None = 11,
    technique: str = "generalization",
    extra: str = "",
) -> str:
    qi = []
    for q in CENSUS_QI:
        parts = [f'name = "{q["name"]}"', f'kind = "{q["kind"]}"']
        if "order" in q:
            parts.append("order = [" + ", ".join(f'"{v}"' for v in q["order"]) + "]")
        qi.append("{ " + ", ".join(parts) + " }")
    lines = [
        "[dataset]",
        'name = "census"',
        f'input = "{input_name}"',
        'person_id = "pid"',
        'sensitive = "occupation"',
        "qi = [" + ", ".join(qi) + "]",
        "",
        "[technique]",
        f'name = "{technique}"',
    ] + ([f"k = {k}"] if k is not None else [])
    if l is not None:
        lines.append(f"l = {l}")
    lines += [extra, "", "[output]", 'dir = "releases"', 'state = "privpub.duckdb"']
    if seed is not None:
        lines.append(f"seed = {seed}")
    return "\n".join(lines) + "\n"


def write_spec(folder: Path, **kw) -> Path:
    path = folder / "spec.toml"
    path.write_text(census_spec_toml(**kw))
    return path


def microdata(
    frame, qi: list[dict], sensitive: str, person_id: str = "pid", k: int = 2, l: int | None = None
) -> Microdata:
    tech = {"name": "generalization", "k": k, **({"l": l} if l else {})}
    spec = spec_from_dict(
        {
            "dataset": {"name": "t", "input": "x.csv", "person_id": person_id, "sensitive": sensitive, "qi": qi},
            "technique": tech,
        }
    )
    return Microdata.from_frame(spec, frame)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def technique_and_data(frame, qi: list[dict], sensitive: str, name: str, **params):
    """A registered technique built from a one-off spec, and the matching Microdata."""
    from privpub.schemas.spec import spec_from_dict
    from privpub.tasks.techniques.registry import get_technique

    spec = spec_from_dict(
        {
            "dataset": {"name": "t", "input": "x.csv", "person_id": "pid", "sensitive": sensitive, "qi": qi},
            "technique": {"name": name, **params},
        }
    )
    return get_technique(spec), Microdata.from_frame(spec, frame)


def release_of(tech, data, seed: int = 0):
    """Partition and anonymize with one seeded generator, as the flow does."""
    generator = np.random.default_rng(seed)
    part = tech.partition(data, generator)
    return part, tech.anonymize(data, part, generator)


# The audit log's own hash chain (state/chain.py): its entries and its anchor belong to the audit
# log, so a test that sets the audit log apart ("writes nothing but its audit row") sets them
# apart too; the other chains' anchors are compared without the time each chain started.
BESIDE_AUDIT_LOG = {
    "history_chain": "SELECT * FROM history_chain WHERE chain <> 'audit_log'",
    "history_anchor": "SELECT chain, pos, link, started_by, started_rows FROM history_anchor WHERE chain <> 'audit_log'",
}


def table_query(name: str) -> str:
    """The SELECT that reads table `name` of a state, the audit log's chain left out."""
    return BESIDE_AUDIT_LOG.get(name, f'SELECT * FROM "{name}"')

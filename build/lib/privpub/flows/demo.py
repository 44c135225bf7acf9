"""`privpub demo` / `make run`: embedded census sample data and its spec (no download)."""

from __future__ import annotations

from pathlib import Path

from privpub.tasks.demo_data import CENSUS_QI, census

SPEC = """# privpub demo spec: a census-like sample, generalized to k = 10, l = 3.
# No seed: each run draws one and stores it with the release, so a second run publishes
# the next release of the series.
[dataset]
name = "census"
input = "census.csv"
person_id = "pid"
sensitive = "occupation"
qi = [
{qi}
]

[technique]
name = "generalization"
k = 10
l = 3

[output]
dir = "releases"
state = "privpub.duckdb"
"""


def _toml_qi(q: dict) -> str:
    parts = [f'name = "{q["name"]}"', f'kind = "{q["kind"]}"']
    if "order" in q:
        parts.append("order = [" + ", ".join(f'"{v}"' for v in q["order"]) + "]")
    return "  { " + ", ".join(parts) + " },"


SERIAL_TECHNIQUE = """[technique]
name = "serial"
l = 4
strategy = "constant-ratio"
releases = 20
transient = 0.1
"""


def prepare_serial_demo(directory: Path, rows: int = 5000) -> Path:
    """A serial spec over the demo snapshot (the 10% least frequent occupations transient)."""
    census_spec = prepare_demo(directory, rows)
    text = census_spec.read_text()
    head, _, rest = text.partition("[technique]")
    _, _, tail = rest.partition("[output]")
    serial = directory / "serial.toml"
    if not serial.exists():
        serial.write_text(
            head.replace('name = "census"', 'name = "census-serial"') + SERIAL_TECHNIQUE + "\n[output]" + tail
        )
    return serial.resolve()


def prepare_demo(directory: Path, rows: int = 5000) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "census.csv"
    if not data.exists():
        tmp = data.with_suffix(".csv.tmp")
        census(rows, seed=0).to_csv(tmp, index=False)
        tmp.rename(data)
    spec = directory / "census.toml"
    if not spec.exists():
        spec.write_text(SPEC.replace("{qi}", "\n".join(_toml_qi(q) for q in CENSUS_QI)))
    return spec.resolve()

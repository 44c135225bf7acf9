"""The same spec, input and seed publish identical tables, for every technique.

The pins were computed before evaluate and the report were made fast: a change there (or
anywhere) that alters a published table fails here. Each table is hashed as the sha256 of the
Arrow IPC stream of the table read back from its published Parquet file, with its chunks
combined and the schema metadata dropped. Hashing the Parquet bytes themselves would also pin
what does not belong to the release: the writer's version string ("created_by") and the pandas
metadata (which holds the pandas version), so a library upgrade would break the pin without a
single published value changing. Column names, types and every value, in order, are kept.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privpub.flows.publish import publish_flow
from privpub.flows.serial import serial_flow
from privpub.state.store import Store
from tests.helpers import write_spec
from tests.test_butterfly_pipeline import spec_toml as multi_qid_spec
from tests.test_serial_pipeline import SERIAL
from tests.test_techniques_pipeline import PARAMS


def content_sha256(path) -> str:
    table = pq.read_table(path)
    table = table.combine_chunks().replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def publish(folder, name: str) -> dict[str, str]:
    """Publish one release of `name` on the census_dir input (600 rows, fixed seed); the
    content hash of each of its tables."""
    if name in ("butterfly", "union-qid"):
        spec = folder / "spec.toml"
        spec.write_text(multi_qid_spec(name, 6, "k_prime = 2" if name == "butterfly" else ""))
        release_id = publish_flow(spec_path=str(spec))
    elif name == "serial":
        release_id = serial_flow(
            spec_path=str(write_spec(folder, technique="serial", k=None, l=2, seed=1, extra=SERIAL))
        )
    else:
        release_id = publish_flow(spec_path=str(write_spec(folder, technique=name, seed=8, **PARAMS[name])))
    files = Store(folder / "privpub.duckdb").release(release_id)["tables"].file
    return {f.removesuffix(".parquet"): content_sha256(folder / "releases" / release_id / f) for f in files}


EXPECTED: dict[str, dict[str, str]] = {
    "ambiguity": {
        "AT_age": "a621c6a1bb667740a72f08771e60999b1b9121f7673a2410a289d1f0366edc5d",
        "AT_country": "50fbfbe8e321657eb32028b715293a3adf656d82da359a929078977a4b7b5da5",
        "AT_education": "567f7c6a144b7688ce217d150442dfb1894f04aada4c9f476128b5626d9010e3",
        "AT_marital": "2f5c2d8dbfb87fa53f554b402563076b4fe46bff0e006c587ae4b3ef965d6169",
        "AT_race": "603dbe1039ad515e66e8963de4b6b15bf0e0860a9e2ed96f3caae513039b4fc5",
        "AT_salary": "0d7da051b4ecc34e3cf1f7d4d4cdae9b24e9fe2dee005bed1319d16de4ff57eb",
        "AT_sex": "6c27f22d2a18a488f3f9ff38d6b4a4caa7144fccc6a66a92096aa2827eb7cd45",
        "AT_workclass": "f1bcd2ab57dda33b9e2fead14265e9aba8f658a5b8f486c24774b63b0d7d2ead",
        "ST": "2dd9e9c356ca642042595047929bdc15f6d378f17faf3e6fa2eddb681aadbb68",
    },
    "anatomy": {
        "QIT": "8fefe015dafd994cfcfa13192d0d081b6d83dd5868e69790d4a5fda0e2169298",
        "ST": "4e34282873b9d6a4fbfb6d4ac801728fa348b804a613a4867891d1b789e63c75",
    },
    "butterfly": {"table": "57121683b2761415a219bfd5cb9ce9ed1b3a90ded0c6924f62e4812f191063fa"},
    "generalization": {"table": "a34b9fe6889a2f5b3360e665496e7439f5457e7a23a922b532600ebfb392b288"},
    "muco": {"table": "ab48586e16e9fbdd174e768e71759231a88a7a59f1cc9fac65497034cf8e4a32"},
    "priview": {
        "AT": "3244e97e526ca8431e157255d75bcc145e4edfbfc9b7070efb7c1531fc5a9bdc",
        "ST": "0806c9107071a61389048cc4323277b0857a85a9b25977018a751fe63bdf463a",
    },
    "serial": {
        "groups": "6b801d26c3b19ee9368e9f03d7cae0dcaa2acd842c7d55d17c189e538a933dd5",
        "table": "b3578c35fbb22a6b99ff74844d1fb248f7f60bef35b840f4c36de8d05af6d7b1",
    },
    "union-qid": {"table": "bbddfd2da675f61387cc976f1baa867ea0ded08a5c9bc418055f107687c47b52"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_published_tables_are_pinned(prefect_server, census_dir, name):
    assert publish(census_dir, name) == EXPECTED[name]

"""Verification of a published table written as a folder of parts, part by part, on the table's
executor: the Dask workers for a release built on a cluster, or `privpub verify` of a spec whose
[run] is Dask; else this process, one part at a time.

Equivalence classes are rows with identical published QI cells, wherever they are: each part is
reduced to (class key, sensitive value, rows) by a DuckDB GROUP BY (the key: the row's published
cells as one string, `class_keys`), the partial rows are bucketed by a hash of the key, and each
bucket (on one worker) adds them up per class.
The figures are those of `class_profile` on the whole table: the smallest class, the fewest
distinct sensitive values, every class's size. A worker reads a part from the shared file system
when it can see the file, else the flow reads it and sends it (one part in the flow at a time).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privpub.tasks.core.parted_table import PartedTable, on_part, part_sources
from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.verify.k_anonymity import k_and_l, k_anonymity
from privpub.tasks.verify.published import class_profile

BUCKETS = 16
RISKIEST = 5  # classes per bucket kept for the risk report (tasks/risk/__init__.py WORST_CLASSES)


# One string per row names its class: each published cell as text (a list's items joined by
# U+001F), the cells joined by U+001E. class_keys refuses a table in which a value holds either.
_ITEM, _CELL = "\x1f", "\x1e"


def class_keys(table: pa.Table, columns: list[str]) -> pa.Array:
    texts = []
    for name in columns:
        col = table.column(name)
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            items = pc.cast(col, pa.list_(pa.string()))
            flat = pc.list_flatten(items)
            text = pc.binary_join(items, _ITEM)
        else:
            flat = text = pc.cast(col, pa.string())
        if pc.any(pc.or_(pc.match_substring(flat, _ITEM), pc.match_substring(flat, _CELL))).as_py():
            raise ValueError(f"a published value of '{name}' contains the control character U+001E or U+001F")
        texts.append(text)
    return pc.binary_join_element_wise(*texts, _CELL)


def cells_of(key: str, table_schema: pa.Schema, columns: list[str]) -> dict[str, Any]:
    """The published cells a class key stands for (for the report's worst class)."""
    out: dict[str, Any] = {}
    for name, text in zip(columns, key.split(_CELL)):
        kind = table_schema.field(name).type
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            out[name] = text.split(_ITEM)
        elif pa.types.is_integer(kind):
            out[name] = int(text)
        elif pa.types.is_floating(kind):
            out[name] = float(text)
        else:
            out[name] = text
    return out


def bucketed_class_partials(table: pa.Table, columns: list[str], sensitive: str | None, buckets: int) -> list[pa.Table]:
    """One part's rows per (class key, sensitive value), split into hash buckets of the key."""
    rows = pa.table(
        {
            "key": class_keys(table, columns),
            "s": table.column(sensitive) if sensitive else pa.nulls(table.num_rows, pa.string()),
        }
    )
    con = duckdb.connect(config={"threads": 1})
    con.register("part", rows)
    grouped = con.sql(
        f"SELECT key, s, count(*) AS n, hash(key) % {buckets} AS bucket FROM part GROUP BY key, s"
    ).to_arrow_table()
    bucket = grouped.column("bucket").to_numpy()
    grouped = grouped.drop_columns(["bucket"])
    return [grouped.filter(pa.array(bucket == b)) for b in range(buckets)]


def bucket_classes(*partials: pa.Table) -> dict[str, Any]:
    """The classes of one bucket: sizes, distinct sensitive values, the worst classes' keys."""
    con = duckdb.connect(config={"threads": 1})
    con.register("partial", pa.concat_tables(partials).combine_chunks())
    # per class: its size, its distinct sensitive values, and the count of its most frequent one
    classes = con.sql(
        "SELECT key, sum(ns)::BIGINT AS size, count(s) AS distinct_s, max(ns)::BIGINT AS most "
        "FROM (SELECT key, s, sum(n) AS ns FROM partial GROUP BY key, s) GROUP BY key"
    ).to_arrow_table()
    if classes.num_rows == 0:
        empty = np.zeros(0, np.int64)
        return {
            "size": empty,
            "distinct": empty,
            "most": empty,
            "smallest": None,
            "least": None,
            "riskiest": None,
            "values": None,
        }
    size = classes.column("size").to_numpy()
    distinct = classes.column("distinct_s").to_numpy()
    most = classes.column("most").to_numpy()
    keys = classes.column("key")
    # the risk report's candidates: every key of this bucket's smallest size, and its
    # RISKIEST classes by size then share of the most frequent value
    order = np.lexsort((-(most / size), size))
    pick = np.union1d(order[:RISKIEST], np.flatnonzero(size == size.min()))
    return {
        "size": size,
        "distinct": distinct,
        "most": most,
        "smallest": keys[int(size.argmin())].as_py(),
        "least": keys[int(distinct.argmin())].as_py(),
        "riskiest": classes.select(["key", "size", "most"]).take(pa.array(pick)),
        "values": _bucket_values(con),
    }


def _bucket_values(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """Per sensitive value shown (a null is withheld: nobody's value, in its class's size): its
    rows in this bucket's classes, and the class where its share is highest (the first key
    among equal shares): key, rows holding it there, class size (tasks/risk/parted.py adds
    the buckets up into the attribute-gain figures)."""
    return con.sql(
        "WITH pairs AS (SELECT key, s, sum(n) AS ns FROM partial GROUP BY key, s), "
        "sizes AS (SELECT key, sum(ns) AS size FROM pairs GROUP BY key), "
        "ranked AS (SELECT p.key, p.s, p.ns, z.size, row_number() OVER "
        "(PARTITION BY p.s ORDER BY p.ns / z.size DESC, p.key) AS r FROM pairs p JOIN sizes z USING (key) "
        "WHERE p.s IS NOT NULL) "
        "SELECT s, sum(ns)::BIGINT AS n, any_value(key) FILTER (WHERE r = 1) AS key, "
        "(any_value(ns) FILTER (WHERE r = 1))::BIGINT AS holding, (any_value(size) FILTER (WHERE r = 1))::BIGINT AS size "
        "FROM ranked GROUP BY s"
    ).to_arrow_table()


@dataclass
class Classes:
    """The equivalence classes of a parted table (no per-row arrays)."""

    size: np.ndarray
    distinct: np.ndarray | None
    most: np.ndarray  # per class, the count of its most frequent sensitive value
    smallest: dict[str, Any]  # cells of a smallest class
    least: dict[str, Any]  # cells of a class with the fewest distinct sensitive values
    riskiest: pa.Table  # key, size, most: every class of the smallest size, and the riskiest ones
    values: pa.Table  # per bucket and sensitive value: s, n, key, holding, size (_bucket_values)


def parted_classes(parted: PartedTable, columns: list[str], sensitive: str | None) -> Classes:
    """The classes of a parted table, computed once per (columns, sensitive) and kept on it
    (the verifier, the risk figures and the riskiest rows all read them)."""
    known = parted.__dict__.setdefault("_classes", {})
    key = (tuple(columns), sensitive)
    if key not in known:
        known[key] = _parted_classes(parted, columns, sensitive)
    result: Classes = known[key]
    return result


def _parted_classes(parted: PartedTable, columns: list[str], sensitive: str | None) -> Classes:
    ex = parted.executor
    per_part = [
        ex.submit(on_part, bucketed_class_partials, s, columns, sensitive, BUCKETS) for s in part_sources(parted)
    ]
    results = ex.gather(
        [ex.submit(bucket_classes, *[ex.submit(operator.getitem, f, b) for f in per_part]) for b in range(BUCKETS)]
    )
    del per_part
    results = [r for r in results if len(r["size"])]
    size = np.concatenate([r["size"] for r in results])
    distinct = np.concatenate([r["distinct"] for r in results])
    most = np.concatenate([r["most"] for r in results])
    worst_k = min(range(len(results)), key=lambda i: results[i]["size"].min())
    worst_l = min(range(len(results)), key=lambda i: results[i]["distinct"].min())
    schema = parted.schema
    return Classes(
        size,
        distinct if sensitive else None,
        most,
        cells_of(results[worst_k]["smallest"], schema, columns),
        cells_of(results[worst_l]["least"], schema, columns),
        pa.concat_tables([r["riskiest"] for r in results]),
        pa.concat_tables([r["values"] for r in results]),
    )


def _class_description(cells: dict[str, Any], size: int, distinct: int | None = None) -> dict[str, Any]:
    out = {c: list(v) if isinstance(v, (list, tuple)) else v for c, v in cells.items()}
    out["size"] = int(size)
    if distinct is not None:
        out["distinct_sensitive"] = int(distinct)
    return out


def parted_k_and_l(
    parted: PartedTable, columns: list[str], sensitive: str, k: int | None, l: int | None
) -> list[PrivacyResult]:
    """k-anonymity (and distinct l-diversity when l is set) of a parted table; the class sizes
    are kept on the table for the group-size figures of the same release."""
    classes = parted_classes(parted, columns, sensitive)
    parted.class_sizes = classes.size
    reached = int(classes.size.min())
    out = [
        PrivacyResult(
            "k-anonymity",
            reached,
            k,
            k is None or reached >= k,
            {"class": _class_description(classes.smallest, reached), "classes": len(classes.size)},
        )
    ]
    if l:
        distinct = classes.distinct
        assert distinct is not None  # counted: parted_classes was given the sensitive column
        fewest = int(distinct.min())
        size_of_least = int(classes.size[distinct.argmin()])
        out.append(
            PrivacyResult(
                "l-diversity",
                fewest,
                l,
                fewest >= l,
                {"class": _class_description(classes.least, size_of_least, fewest)},
            )
        )
    return out


def parted_class_sizes(parted: PartedTable, columns: list[str]) -> np.ndarray:
    sizes = getattr(parted, "class_sizes", None)
    if sizes is None:
        sizes = parted.class_sizes = parted_classes(parted, columns, None).size
    return sizes


# A published table comes in one of two shapes (core/parted_table.read_published): one Arrow
# table, or a folder of parts. The functions below take either, so a technique never asks which.


def table_k_and_l(
    table: pa.Table | PartedTable,
    columns: list[str],
    sensitive: str,
    k: int | None,
    l: int | None,
    person: np.ndarray | None = None,
) -> list[PrivacyResult]:
    """k-anonymity, and distinct l-diversity when l is set, of a published table; with `person`
    (release.private["people"]: rows_per_person = "many", tables in memory only), k counts people."""
    if isinstance(table, PartedTable):
        if person is not None:
            raise ValueError('rows_per_person = "many" is verified in memory only, not on a table in parts')
        return parted_k_and_l(table, columns, sensitive, k, l)
    if l:
        return k_and_l(table, columns, sensitive, k, l, person)
    return [k_anonymity(table, columns, k, person=person)]


def table_class_sizes(table: pa.Table | PartedTable, columns: list[str]) -> np.ndarray:
    """Equivalence-class sizes of a published table."""
    if isinstance(table, PartedTable):
        return parted_class_sizes(table, columns)
    result: np.ndarray = class_profile(table, columns)["size"]
    return result

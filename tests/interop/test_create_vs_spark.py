"""icectl's new-table metadata against real Spark 3.5 + Iceberg 1.10.2 ``CREATE TABLE``.

For each case Spark creates the table from Spark SQL and icectl builds metadata from the
equivalent DDL with :func:`new_table_metadata`; given Spark's uuid, timestamp, location and
owner, icectl's first metadata file must be byte-for-byte Spark's ``v1.metadata.json`` (ids,
names, types, docs, specs, last ids, properties and their order). Sort orders are compared with
Spark's ``ALTER TABLE ... WRITE ORDERED BY``.

Note the one spelling difference: Spark's ``TIMESTAMP`` is Iceberg ``timestamptz``; icectl's DDL
uses Iceberg's meaning, so the icectl side writes ``timestamptz`` where Spark writes TIMESTAMP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.spark import latest_metadata_json, table_location

from icectl.ops.create.ddl import parse_partition_spec, parse_schema, parse_sort_order
from icectl.ops.create.metadata import java_hash_bucket, new_table_metadata
from icectl.spec.metadata import TableMetadata

NAMESPACE = "local.create_cmp"


@dataclass(frozen=True)
class Case:
    id: str
    spark_columns: str
    ddl: str
    spark_partition: str = ""
    partition: str = ""


FLAT = Case(
    "flat",
    "id BIGINT NOT NULL, ts TIMESTAMP, name STRING COMMENT 'the name', category STRING, d DATE, "
    "price DECIMAL(9,2)",
    "id long not null, ts timestamptz, name string comment 'the name', category string, d date, "
    "price decimal(9, 2)",
    "days(ts), bucket(16, id), truncate(4, name), category",
    "days(ts), bucket(16, id), truncate(4, name), category",
)

NESTED = Case(
    "nested",
    "id BIGINT, point STRUCT<x: DOUBLE NOT NULL, y: DOUBLE COMMENT 'why'>, tags ARRAY<STRING>, "
    "attrs MAP<STRING, STRUCT<a: INT, b: DECIMAL(9,2)>>, "
    "deep STRUCT<inner: STRUCT<l: ARRAY<STRUCT<q: INT, r: STRING>>, k: BIGINT>, "
    "m: MAP<INT, ARRAY<BIGINT>>>, ts TIMESTAMP_NTZ",
    "id long, point struct<x: double not null, y: double comment 'why'>, tags list<string>, "
    "attrs map<string, struct<a: int, b: decimal(9,2)>>, "
    "deep struct<inner: struct<l: list<struct<q: int, r: string>>, k: long>, "
    "m: map<int, list<long>>>, ts timestamp",
    "point.x, bucket(8, deep.inner.k), hours(ts)",
    "point.x, bucket(8, deep.inner.k), hours(ts)",
)

# Every primitive type Spark 3.5 can create, in Spark's spelling on both sides (icectl's aliases),
# except TIMESTAMP, which icectl reads as Iceberg's zone-less timestamp.
PRIMITIVES_ALIASES = Case(
    "prim_alias",
    "b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INT, i64 BIGINT, f FLOAT, r REAL, dbl DOUBLE, "
    "dec DECIMAL(38,10), dec5 DECIMAL(5), decd DECIMAL, s STRING, c CHAR(3), vc VARCHAR(10), bin BINARY, "
    "dt DATE, tsz TIMESTAMP, ntz TIMESTAMP_NTZ",
    "b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INT, i64 BIGINT, f FLOAT, r REAL, dbl DOUBLE, "
    "dec DECIMAL(38,10), dec5 DECIMAL(5), decd DECIMAL, s STRING, c CHAR(3), vc VARCHAR(10), bin BINARY, "
    "dt DATE, tsz TIMESTAMPTZ, ntz TIMESTAMP_NTZ",
    "years(dt), months(ntz), hours(tsz), truncate(2, dec), bucket(4, bin), b",
    "years(dt), months(ntz), hours(tsz), truncate(2, dec), bucket(4, bin), b",
)

# The same types in Iceberg's own names; partition transforms in their singular spellings.
PRIMITIVES_ICEBERG = Case(
    "prim_iceberg",
    "b BOOLEAN, i INT, l BIGINT, f FLOAT, d DOUBLE, dec DECIMAL(18,3), s STRING, bin BINARY, dt DATE, "
    "tsz TIMESTAMP, ts TIMESTAMP_NTZ",
    "b boolean, i int, l long, f float, d double, dec decimal(18, 3), s string, bin binary, dt date, "
    "tsz timestamptz, ts timestamp",
    "bucket(3, l), truncate(10, s), days(dt), years(ts), months(tsz), identity(i)",
    "bucket(3, l), truncate(10, s), day(dt), year(ts), month(tsz), identity(i)",
)

UNPARTITIONED = Case("unpart", "id BIGINT NOT NULL, data STRING", "id long not null, data string")

CASES = [FLAT, NESTED, PRIMITIVES_ALIASES, PRIMITIVES_ICEBERG, UNPARTITIONED]


def _create_in_spark(spark: Any, name: str, case: Case, format_version: int) -> Path:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    partitioned = f"PARTITIONED BY ({case.spark_partition})" if case.spark_partition else ""
    spark.sql(f"CREATE TABLE {name} ({case.spark_columns}) USING iceberg {partitioned} "
              f"TBLPROPERTIES ('format-version'='{format_version}', 'write.target-file-size-bytes'='1048576')")
    return table_location(spark, name)


def _ours(spark_md: dict[str, Any], case: Case, format_version: int, sort: str = "") -> TableMetadata:
    schema = parse_schema(case.ddl, format_version=format_version)
    properties = {"format-version": str(format_version), "write.target-file-size-bytes": "1048576"}
    if "owner" in spark_md["properties"]:  # Spark adds the session user; icectl's caller would too
        properties = {"owner": spark_md["properties"]["owner"], **properties}
    return new_table_metadata(
        schema=schema, location=spark_md["location"],
        partition_spec=parse_partition_spec(case.partition, schema),
        sort_order=parse_sort_order(sort, schema),
        properties=properties, format_version=format_version,
        table_uuid=spark_md["table-uuid"], now_ms=spark_md["last-updated-ms"])


@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_new_table_metadata_is_sparks(spark: Any, case: Case, format_version: int) -> None:
    location = _create_in_spark(spark, f"{NAMESPACE}.{case.id}_v{format_version}", case, format_version)
    raw = (location / "metadata" / "v1.metadata.json").read_bytes()
    theirs = json.loads(raw)
    ours = _ours(theirs, case, format_version)
    mine = ours.to_json()

    # Piece by piece first, so a failure says what differs.
    assert mine["schemas"] == theirs["schemas"]
    assert mine["last-column-id"] == theirs["last-column-id"]
    assert mine["partition-specs"] == theirs["partition-specs"]
    assert mine["default-spec-id"] == theirs["default-spec-id"]
    assert mine["last-partition-id"] == theirs["last-partition-id"]
    assert mine["sort-orders"] == theirs["sort-orders"]
    assert mine["properties"] == theirs["properties"]
    assert list(mine["properties"]) == list(theirs["properties"])  # Java's HashMap order
    assert mine == theirs
    assert ours.to_json_bytes() == raw


SORTS = [
    # (case, Spark's WRITE ORDERED BY, icectl's sort order)
    (FLAT, "id DESC NULLS LAST, days(ts)", "id desc nulls last, days(ts)"),
    (FLAT, "category, price DESC, name ASC NULLS LAST, id DESC NULLS FIRST",
     "category, price desc, name asc nulls last, id desc nulls first"),
    (FLAT, "bucket(4, id), truncate(name, 2) DESC, hours(ts)", "bucket(4, id), truncate(name, 2) desc, hours(ts)"),
    (NESTED, "point.x DESC, deep.inner.k, years(ts)", "point.x desc, deep.inner.k, years(ts)"),
]


@pytest.mark.parametrize(("case", "spark_order", "order"), SORTS, ids=[f"sort{i}" for i in range(len(SORTS))])
def test_sort_order_is_sparks(spark: Any, case: Case, spark_order: str, order: str) -> None:
    name = f"{NAMESPACE}.{case.id}_sorted{SORTS.index((case, spark_order, order))}"
    location = _create_in_spark(spark, name, case, 2)
    spark.sql(f"ALTER TABLE {name} WRITE ORDERED BY {spark_order}")
    theirs = latest_metadata_json(location)
    ours = _ours(theirs, case, 2, order)
    spark_default = next(o for o in theirs["sort-orders"] if o["order-id"] == theirs["default-sort-order-id"])
    assert ours.sort_order().to_json() == spark_default
    assert ours.default_sort_order_id == theirs["default-sort-order-id"] == 1
    # Java's newTableMetadata keeps only the new order; Spark added it to an unsorted table.
    assert [o["order-id"] for o in ours.to_json()["sort-orders"]] == [1]


def test_many_properties_in_javas_order(spark: Any) -> None:
    """Past 12 keys Java's HashMaps resize: the written order must still be Java's."""
    props = {f"icectl.p{i}": str(i) for i in range(20)}
    props["write.parquet.compression-codec"] = "snappy"  # a user value wins over Java's zstd
    name = f"{NAMESPACE}.many_props"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    listed = ", ".join(f"'{k}'='{v}'" for k, v in props.items())
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING iceberg TBLPROPERTIES ({listed})")
    raw = (table_location(spark, name) / "metadata" / "v1.metadata.json").read_bytes()
    theirs = json.loads(raw)
    # Keys sharing a bucket keep the order the caller's map had, and Spark's own map order is
    # not newTableMetadata's business: feed the keys bucket-reversed but ties in Spark's order.
    written = list(theirs["properties"])
    scrambled = sorted(written, key=lambda k: (-java_hash_bucket(k, 32),
                                               written.index(k)))
    assert scrambled != written
    ours = new_table_metadata(
        schema=parse_schema("id bigint"), location=theirs["location"], partition_spec=None, sort_order=None,
        properties={k: theirs["properties"][k] for k in scrambled}, format_version=2,
        table_uuid=theirs["table-uuid"], now_ms=theirs["last-updated-ms"])
    assert ours.properties == theirs["properties"]
    assert list(ours.properties) == list(theirs["properties"])
    assert ours.to_json_bytes() == raw

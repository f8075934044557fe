"""codec/partition_stats_file.py: the schema of Java's PartitionStatsHandler.schema for v2 and v3, and
partition values of every primitive type written in the Parquet types Iceberg's TypeToMessageType uses,
read back by pyarrow as the same values (the file itself against Spark's: tests/interop/
test_partition_stats_vs_spark.py)."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icectl.codec.partition_stats_file import (
    field_ids,
    read_partition_stats_file,
    stats_schema,
    write_partition_stats,
)
from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.schema import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    UUID,
    DecimalType,
    FixedType,
    NestedField,
    StructType,
)

TYPES = [BOOLEAN, INT, LONG, FLOAT, DOUBLE, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, TIMESTAMP_NS, STRING, UUID, BINARY,
         DecimalType(9, 2), DecimalType(18, 3), DecimalType(30, 4), FixedType(3)]
# Iceberg's TypeToMessageType: (physical type, logical type) of each.
PARQUET = [("BOOLEAN", "None"), ("INT32", "None"), ("INT64", "None"), ("FLOAT", "None"), ("DOUBLE", "None"),
           ("INT32", "Date"), ("INT64", "Time(isAdjustedToUTC=false, timeUnit=microseconds)"),
           ("INT64", "Timestamp(isAdjustedToUTC=false, timeUnit=microseconds"),
           ("INT64", "Timestamp(isAdjustedToUTC=true, timeUnit=microseconds"),
           ("INT64", "Timestamp(isAdjustedToUTC=false, timeUnit=nanoseconds"), ("BYTE_ARRAY", "String"),
           ("FIXED_LEN_BYTE_ARRAY", "UUID"), ("BYTE_ARRAY", "None"), ("INT32", "Decimal(precision=9, scale=2)"),
           ("INT64", "Decimal(precision=18, scale=3)"), ("FIXED_LEN_BYTE_ARRAY", "Decimal(precision=30, scale=4)"),
           ("FIXED_LEN_BYTE_ARRAY", "None")]
PTYPE = StructType(tuple(NestedField(1000 + i, f"f{i}", t) for i, t in enumerate(TYPES)))
U = uuid.UUID("12345678-1234-5678-1234-567812345678")
VALUES = (True, -1, 2**40, 1.5, -2.5, 19_000, 3_600_000_000, 1_700_000_000_000_000, 1_700_000_000_000_001,
          1_700_000_000_000_002_000, "é", U, b"\x00\xff", decimal.Decimal("-1.25"), decimal.Decimal("12.345"),
          decimal.Decimal("1.0001"), b"abc")
COUNTERS = {"spec_id": 3, "data_record_count": 10, "data_file_count": 2, "total_data_file_size_in_bytes": 99,
            "position_delete_record_count": 1, "position_delete_file_count": 1, "equality_delete_record_count": 0,
            "equality_delete_file_count": 0, "dv_count": 0}


def test_every_partition_type_round_trips_in_icebergs_parquet_types() -> None:
    rows = [{"partition": VALUES, **COUNTERS, "last_updated_at": 5, "last_updated_snapshot_id": 7},
            {"partition": (None,) * len(TYPES), **COUNTERS}]
    data = write_partition_stats(rows, stats_schema(PTYPE, 3))
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    got = [(meta.schema.column(i).physical_type, str(meta.schema.column(i).logical_type))
           for i in range(len(TYPES))]
    assert [(p, lt[:len(want)]) for (p, lt), (_, want) in zip(got, PARQUET, strict=True)] == PARQUET
    table = read_partition_stats_file(data)
    first, second = table.to_pylist()
    utc = datetime.UTC
    assert first["partition"] == {
        "f0": True, "f1": -1, "f2": 2**40, "f3": 1.5, "f4": -2.5, "f5": datetime.date(2022, 1, 8),
        "f6": datetime.time(1, 0), "f7": datetime.datetime(2023, 11, 14, 22, 13, 20),
        "f8": datetime.datetime(2023, 11, 14, 22, 13, 20, 1, tzinfo=utc),
        "f9": datetime.datetime(2023, 11, 14, 22, 13, 20, 2),
        "f10": "é", "f11": U, "f12": b"\x00\xff", "f13": decimal.Decimal("-1.25"),
        "f14": decimal.Decimal("12.345"), "f15": decimal.Decimal("1.0001"), "f16": b"abc"}
    assert all(v is None for v in second["partition"].values())
    assert {k: first[k] for k in COUNTERS} == COUNTERS and first["total_record_count"] is None
    assert (first["last_updated_at"], second["last_updated_at"]) == (5, None)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_schema_is_javas_for_the_format_version(version: int) -> None:
    """Java's PartitionStatsHandler.schema: v1/v2 delete counters optional and no dv_count; v3 required
    counters and dv_count (13) with initial and write default 0, last."""
    ptype = StructType((NestedField(1000, "region", STRING),))
    data = write_partition_stats([{"partition": ("eu",), **COUNTERS}], stats_schema(ptype, version))
    schema = pq.read_schema(pa.BufferReader(data))
    names = ["spec_id", "data_record_count", "data_file_count", "total_data_file_size_in_bytes",
             "position_delete_record_count", "position_delete_file_count", "equality_delete_record_count",
             "equality_delete_file_count", "total_record_count", "last_updated_at", "last_updated_snapshot_id"]
    expected_ids = [("partition", 1), ("partition.region", 1000), *((n, i) for i, n in enumerate(names, start=2))]
    if version >= 3:
        expected_ids.append(("dv_count", 13))
    assert list(field_ids(schema)) == expected_ids
    optional = {"total_record_count", "last_updated_at", "last_updated_snapshot_id"}
    if version < 3:
        optional |= {"position_delete_record_count", "position_delete_file_count", "equality_delete_record_count",
                     "equality_delete_file_count"}
    assert {f.name for f in schema if f.nullable} == optional
    iceberg = json.loads(schema.metadata[b"iceberg.schema"])
    assert [f["id"] for f in iceberg["fields"]] == [i for n, i in expected_ids if "." not in n]
    if version >= 3:
        assert iceberg["fields"][-1] == {"id": 13, "name": "dv_count", "required": True, "type": "int",
                                         "initial-default": 0, "write-default": 0}


def test_unpartitioned_and_unknown_types_are_refused() -> None:
    with pytest.raises(UnsupportedError, match="not partitioned"):
        stats_schema(StructType(()), 2)
    with pytest.raises(UnsupportedError, match="cannot be written"):
        write_partition_stats([], stats_schema(StructType((NestedField(1000, "v", TYPES[0].__class__("variant")),)), 2))
    with pytest.raises(CorruptInputError, match="partition statistics file"):
        read_partition_stats_file(b"PAR1 not really")

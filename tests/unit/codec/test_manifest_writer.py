"""icectl.codec.manifest_writer: Avro schemas, key-value metadata and round trips through icectl's reader."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import struct
import uuid
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from icectl.codec.avro import avro_field_name, decimal_required_bytes
from icectl.codec.manifest_reader import read_manifest, read_manifest_list, read_manifest_metadata
from icectl.codec.manifest_writer import (
    UNASSIGNED_SEQ,
    manifest_avro_schema,
    manifest_list_avro_schema,
    write_manifest,
    write_manifest_list,
)
from icectl.errors import UnsupportedError
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    PartitionFieldSummary,
)
from icectl.spec.partitioning import PartitionField, PartitionSpec
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
    Schema,
    StructType,
)
from icectl.spec.transforms import parse_transform
from icectl.spec.values import to_bytes

ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED

# --------------------------------------------------------------------------- the spec's tables
# Transcribed from the spec ("Manifest Lists", "Manifest Entry Fields", "Data File Fields"):
# name -> (field id, required).  Independent of the writer's own constants on purpose.
SPEC_MANIFEST_FILE = {
    1: {"manifest_path": (500, True), "manifest_length": (501, True), "partition_spec_id": (502, True),
        "added_snapshot_id": (503, True), "added_files_count": (504, False),
        "existing_files_count": (505, False), "deleted_files_count": (506, False),
        "added_rows_count": (512, False), "existing_rows_count": (513, False),
        "deleted_rows_count": (514, False), "partitions": (507, False), "key_metadata": (519, False)},
}
SPEC_MANIFEST_FILE[2] = {
    **{k: (fid, True if k.endswith("_count") else req) for k, (fid, req) in SPEC_MANIFEST_FILE[1].items()},
    "content": (517, True), "sequence_number": (515, True), "min_sequence_number": (516, True)}
SPEC_MANIFEST_FILE[3] = {**SPEC_MANIFEST_FILE[2], "first_row_id": (520, False)}
SPEC_FIELD_SUMMARY = {"contains_null": (509, True), "contains_nan": (518, False),
                      "lower_bound": (510, False), "upper_bound": (511, False)}
SPEC_ENTRY = {1: {"status": (0, True), "snapshot_id": (1, False), "data_file": (2, True)}}
SPEC_ENTRY[2] = {**SPEC_ENTRY[1], "sequence_number": (3, False), "file_sequence_number": (4, False)}
SPEC_ENTRY[3] = SPEC_ENTRY[2]
_COMMON = {"file_path": (100, True), "file_format": (101, True), "partition": (102, True),
           "record_count": (103, True), "file_size_in_bytes": (104, True), "column_sizes": (108, False),
           "value_counts": (109, False), "null_value_counts": (110, False), "nan_value_counts": (137, False),
           "lower_bounds": (125, False), "upper_bounds": (128, False), "key_metadata": (131, False),
           "split_offsets": (132, False), "sort_order_id": (140, False)}
SPEC_DATA_FILE = {
    1: {**_COMMON, "block_size_in_bytes": (105, True)},  # 106, 107, 111: "do not write"
    2: {**_COMMON, "content": (134, True), "equality_ids": (135, False), "referenced_data_file": (143, False)},
}
SPEC_DATA_FILE[3] = {**SPEC_DATA_FILE[2], "first_row_id": (142, False), "content_offset": (144, False),
                     "content_size_in_bytes": (145, False)}
# map<key-id: int, value-id: ...> and list<element-id: ...> ids of the spec's types
SPEC_MAP_IDS = {"column_sizes": (117, 118), "value_counts": (119, 120), "null_value_counts": (121, 122),
                "nan_value_counts": (138, 139), "lower_bounds": (126, 127), "upper_bounds": (129, 130)}
SPEC_LIST_IDS = {"split_offsets": 133, "equality_ids": 136, "partitions": 508}


def strip_option(t: Any) -> tuple[Any, bool]:
    if isinstance(t, list):
        assert t[0] == "null" and len(t) == 2
        return t[1], False
    return t, True


def check_record(record: dict[str, Any], expected: dict[str, tuple[int, bool]]) -> dict[str, Any]:
    fields = {f["name"]: f for f in record["fields"]}
    assert set(fields) == set(expected), record["name"]
    types = {}
    for name, (fid, required) in expected.items():
        f = fields[name]
        assert f["field-id"] == fid, name
        t, is_required = strip_option(f["type"])
        assert is_required == required, name
        assert ("default" in f and f["default"] is None) == (not required), name
        types[name] = t
    return types


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_manifest_list_schema_matches_the_spec_table(version: int) -> None:
    schema = manifest_list_avro_schema(version)
    assert schema["name"] == "manifest_file"
    types = check_record(schema, SPEC_MANIFEST_FILE[min(version, 3)])
    assert types["partitions"]["element-id"] == SPEC_LIST_IDS["partitions"]
    summary = types["partitions"]["items"]
    assert summary["name"] == "r508"
    check_record(summary, SPEC_FIELD_SUMMARY)


def test_manifest_list_field_order_is_javas() -> None:
    names = [f["name"] for f in manifest_list_avro_schema(1)["fields"]]
    assert names[:4] == ["manifest_path", "manifest_length", "partition_spec_id", "added_snapshot_id"]
    assert names.index("partitions") < names.index("added_rows_count")  # V1Metadata order
    names = [f["name"] for f in manifest_list_avro_schema(3)["fields"]]
    assert names[3:7] == ["content", "sequence_number", "min_sequence_number", "added_snapshot_id"]
    assert names[-3:] == ["partitions", "key_metadata", "first_row_id"]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_manifest_schema_matches_the_spec_table(version: int) -> None:
    ptype = StructType((NestedField(1000, "d", DATE), NestedField(1001, "b", INT)))
    schema = manifest_avro_schema(ptype, version)
    assert schema["name"] == "manifest_entry"
    shape = min(version, 3)
    types = check_record(schema, SPEC_ENTRY[shape])
    data_file = types["data_file"]
    assert data_file["name"] == "r2"
    file_types = check_record(data_file, SPEC_DATA_FILE[shape])
    assert [f["name"] for f in data_file["fields"]][:3] == (
        ["file_path", "file_format", "partition"] if shape == 1 else ["content", "file_path", "file_format"])
    for name, (key_id, value_id) in SPEC_MAP_IDS.items():
        array = file_types[name]
        assert array["type"] == "array" and array["logicalType"] == "map"
        kv = array["items"]
        assert kv["name"] == f"k{key_id}_v{value_id}"
        assert [(f["name"], f["field-id"]) for f in kv["fields"]] == [("key", key_id), ("value", value_id)]
        assert kv["fields"][0]["type"] == "int"
    for name in ("split_offsets", "equality_ids"):
        if name in file_types:
            assert file_types[name]["element-id"] == SPEC_LIST_IDS[name]
    partition = file_types["partition"]
    assert partition["name"] == "r102"
    assert [(f["name"], f["field-id"], f["type"]) for f in partition["fields"]] == [
        ("d", 1000, ["null", {"type": "int", "logicalType": "date"}]), ("b", 1001, ["null", "int"])]


def test_partition_avro_types_follow_appendix_a() -> None:
    ptype = StructType((
        NestedField(1000, "a", DecimalType(10, 2)), NestedField(1001, "b", DecimalType(10, 2)),
        NestedField(1002, "u", UUID), NestedField(1003, "f", FixedType(3)), NestedField(1004, "t", TIME),
        NestedField(1005, "ts", TIMESTAMP), NestedField(1006, "tz", TIMESTAMPTZ),
        NestedField(1007, "ns", TIMESTAMP_NS), NestedField(1008, "bin", BINARY),
        NestedField(1009, "x", parse_transform("identity").result_type(UUID)),
    ))
    fields = manifest_avro_schema(ptype, 2)["fields"][-1]["type"]["fields"]
    partition = next(f for f in fields if f["name"] == "partition")["type"]["fields"]
    types = {f["name"]: f["type"][1] for f in partition}
    assert types["a"] == {"type": "fixed", "name": "decimal_10_2", "size": 5, "logicalType": "decimal",
                          "precision": 10, "scale": 2}
    assert types["b"] == "decimal_10_2"  # a named Avro type is defined once, then referenced
    assert types["u"] == {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}
    assert types["x"] == "uuid_fixed"
    assert types["f"] == {"type": "fixed", "name": "fixed_3", "size": 3}
    assert types["t"] == {"type": "long", "logicalType": "time-micros"}
    assert types["ts"] == {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}
    assert types["tz"] == {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}
    assert types["ns"] == {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False}
    assert types["bin"] == "bytes"
    fastavro.parse_schema(manifest_avro_schema(ptype, 2))  # valid Avro


def test_decimal_sizes_and_name_sanitizing_match_java() -> None:
    # TypeUtil.decimalRequiredBytes for a few precisions
    assert [decimal_required_bytes(p) for p in (1, 2, 9, 10, 18, 19, 38)] == [1, 1, 4, 5, 8, 9, 16]
    assert avro_field_name("ts_day") == "ts_day"
    assert avro_field_name("1st-col") == "_1st_x2Dcol"
    assert avro_field_name("a b.c") == "a_x20b_x2Ec"
    ptype = StructType((NestedField(1000, "my-col", STRING),))
    part = manifest_avro_schema(ptype, 2)["fields"][-1]["type"]["fields"][3]["type"]["fields"][0]
    assert part == {"name": "my_x2Dcol", "type": ["null", "string"], "default": None,
                    "iceberg-field-name": "my-col", "field-id": 1000}


# --------------------------------------------------------------------------- helpers

SCHEMA = Schema((
    NestedField(1, "id", LONG, True), NestedField(2, "day", DATE), NestedField(3, "region", STRING),
    NestedField(4, "amount", DecimalType(10, 2)), NestedField(5, "key", UUID), NestedField(6, "ts", TIMESTAMPTZ),
    NestedField(7, "flag", BOOLEAN), NestedField(8, "score", DOUBLE), NestedField(9, "payload", BINARY),
    NestedField(10, "tag", FixedType(4)), NestedField(11, "f", FLOAT), NestedField(12, "t", TIME),
), schema_id=3)
SPEC = PartitionSpec(1, tuple(
    PartitionField((sid,), 1000 + i, name, parse_transform(transform))
    for i, (sid, name, transform) in enumerate([
        (1, "id_bucket", "bucket[16]"), (2, "day", "identity"), (3, "region", "identity"),
        (4, "amount", "identity"), (5, "key", "identity"), (6, "ts_hour", "hour"), (6, "ts", "identity"),
        (7, "flag", "identity"), (8, "score", "identity"), (9, "payload", "identity"), (10, "tag", "identity"),
        (11, "f", "identity"), (12, "t", "identity"), (3, "region_trunc", "truncate[2]"),
    ])))
PTYPE = SPEC.partition_type(SCHEMA)
UUIDS = [uuid.UUID("00000000-0000-0000-0000-000000000001"), uuid.UUID("ffffffff-0000-0000-0000-000000000000"),
         uuid.UUID("7fffffff-ffff-ffff-ffff-ffffffffffff")]


def partition(i: int) -> tuple[Any, ...]:
    return (i % 16, 19_000 + i, ["eu", "us", None, "apac"][i % 4], Decimal(f"{i * 3}.25") * (-1) ** i,
            UUIDS[i % 3], 470_000 + i, 1_700_000_000_000_000 + i, i % 2 == 0,
            [1.5, -0.0, float("nan"), 0.0][i % 4], bytes([i, 255 - i]), bytes([i, 0, 0, i]), float(i) / 4,
            3_600_000_000 * (i % 24), ["eu", "us", None, "ap"][i % 4])


def data_file(i: int, content: DataFileContent = DataFileContent.DATA, **extra: Any) -> DataFile:
    base = dict(
        content=content, file_path=f"s3://b/t/data/f{i}.parquet", file_format="PARQUET",
        partition=partition(i), record_count=10 * (i + 1), file_size_in_bytes=1000 + i,
        column_sizes={1: 10 + i, 2: 20}, value_counts={1: 10, 2: 10}, null_value_counts={1: 0, 2: i},
        nan_value_counts={8: 0}, lower_bounds={1: to_bytes(LONG, i)}, upper_bounds={1: to_bytes(LONG, 100 + i)},
        key_metadata=None, split_offsets=(4,), sort_order_id=0)
    base.update(extra)
    return DataFile(**base)


def roundtrip(result: Any, manifest: ManifestFile, version: int) -> list[ManifestEntry]:
    return list(read_manifest(result.data, manifest=manifest, partition_type=PTYPE, format_version=version))


def raw_records(data: bytes) -> list[dict[str, Any]]:
    return list(fastavro.reader(io.BytesIO(data)))


# --------------------------------------------------------------------------- manifests


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_data_manifest_roundtrip_every_field(version: int) -> None:
    snap = 55
    entries = [
        ManifestEntry(EXISTING, 11, 3, 3, data_file(0, first_row_id=900 if version >= 3 else None)),
        ManifestEntry(ADDED, snap, 7, 7, data_file(1, key_metadata=b"\x01\x02", split_offsets=(4, 100))),
        ManifestEntry(DELETED, snap, 2, 2, data_file(2, sort_order_id=None, nan_value_counts=None)),
        ManifestEntry(ADDED, snap, 7, 7, data_file(3, column_sizes={}, lower_bounds=None, upper_bounds=None)),
    ]
    if version == 1:  # v1 has no sequence numbers: readers take 0
        entries = [dataclasses.replace(e, sequence_number=0, file_sequence_number=0) for e in entries]
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=version,
                            content=ManifestContent.DATA, snapshot_id=snap)
    assert (result.added_files_count, result.existing_files_count, result.deleted_files_count) == (2, 1, 1)
    assert (result.added_rows_count, result.existing_rows_count, result.deleted_rows_count) == (60, 10, 30)
    m = result.to_manifest_file("m.avro", len(result.data), SPEC.spec_id, snap, 0 if version == 1 else 7,
                                first_row_id=1000 if version >= 3 else None)
    got = roundtrip(result, m, version)
    if version >= 3:  # the ADDED files had no first_row_id: they inherit from the manifest
        entries[1] = dataclasses.replace(entries[1], data_file=dataclasses.replace(entries[1].data_file,
                                                                                   first_row_id=1000))
        entries[3] = dataclasses.replace(entries[3], data_file=dataclasses.replace(entries[3].data_file,
                                                                                   first_row_id=1020))
    for a, b in zip(got, entries, strict=True):
        # NaN != NaN: compare partitions by their Avro-level identity
        assert repr(a.data_file.partition) == repr(b.data_file.partition)
        assert dataclasses.replace(a, data_file=dataclasses.replace(a.data_file, partition=None)) == \
            dataclasses.replace(b, data_file=dataclasses.replace(b.data_file, partition=None))
    raw = raw_records(result.data)
    assert raw[0]["data_file"]["block_size_in_bytes" if version == 1 else "content"] == (
        67108864 if version == 1 else 0)


def test_partition_values_are_written_in_avro_form() -> None:
    e = ManifestEntry(ADDED, 1, None, None, data_file(1))
    result = write_manifest([e], schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                            content=ManifestContent.DATA, snapshot_id=1)
    reader = fastavro.reader(io.BytesIO(result.data))
    raw = next(reader)["data_file"]["partition"]
    assert raw["day"].isoformat() == "2022-01-09"  # date logical type: int days
    assert raw["amount"] == Decimal("-3.25")  # fixed(5) decimal
    assert raw["key"] == UUIDS[1].bytes  # fixed(16)
    assert raw["ts"].timestamp() == 1_700_000_000.000001  # timestamp-micros
    assert raw["tag"] == bytes([1, 0, 0, 1])
    # Sign-extended fixed bytes, as Java's DecimalConversion writes them (visible uncompressed).
    plain = write_manifest([e], schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                           content=ManifestContent.DATA, snapshot_id=1, codec="null")
    assert b"\x02" + (-325).to_bytes(5, "big", signed=True) + b"\x02" + UUIDS[1].bytes in plain.data


def test_partition_summaries_as_java_computes_them() -> None:
    entries = [ManifestEntry(ADDED, 1, None, None, data_file(i)) for i in range(8)]
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                            content=ManifestContent.DATA, snapshot_id=1)
    s = dict(zip([f.name for f in PTYPE.fields], result.partitions, strict=True))

    def bounds(name: str) -> tuple[Any, Any]:
        return s[name].decoded_bounds(PTYPE.fields[[f.name for f in PTYPE.fields].index(name)].field_type)

    assert s["id_bucket"] == PartitionFieldSummary(False, False, to_bytes(INT, 0), to_bytes(INT, 7))
    assert bounds("day") == (19_000, 19_007)
    assert s["region"].contains_null and bounds("region") == ("apac", "us")
    assert bounds("amount") == (Decimal("-21.25"), Decimal("18.25"))
    # java.util.UUID.compareTo compares signed halves: ffffffff-... is the smallest, 7fff... the largest
    assert bounds("key") == (UUIDS[1], UUIDS[2])
    assert bounds("flag") == (False, True)
    # NaN is only flagged; -0.0 sorts before 0.0 (Float.compare)
    score = s["score"]
    assert score.contains_nan and not score.contains_null
    lower, upper = bounds("score")
    assert math.copysign(1, lower) == -1 and lower == 0 and upper == 1.5
    assert bounds("payload") == (bytes([0, 255]), bytes([7, 248]))  # unsigned lexicographic
    assert s["t"].contains_nan is False


def test_float_bounds_keep_negative_zero_apart() -> None:
    spec = PartitionSpec(0, (PartitionField((11,), 1000, "f", parse_transform("identity")),))
    ptype = spec.partition_type(SCHEMA)
    df = data_file(0)
    entries = [ManifestEntry(ADDED, 1, None, None, dataclasses.replace(df, partition=(v,))) for v in (0.0, -0.0)]
    result = write_manifest(entries, schema=SCHEMA, spec=spec, partition_type=ptype, format_version=2,
                            content=ManifestContent.DATA, snapshot_id=1)
    summary = result.partitions[0]
    assert summary.lower_bound == struct.pack("<f", -0.0) and summary.upper_bound == struct.pack("<f", 0.0)


def test_empty_manifest() -> None:
    result = write_manifest([], schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=3,
                            content=ManifestContent.DATA, snapshot_id=1)
    assert result.partitions == [PartitionFieldSummary(False, False, None, None)] * len(PTYPE.fields)
    assert result.min_sequence_number is None
    m = result.to_manifest_file("m.avro", len(result.data), 1, 1, UNASSIGNED_SEQ)
    assert m.min_sequence_number == UNASSIGNED_SEQ
    assert roundtrip(result, m, 3) == []


def test_min_sequence_number_over_live_explicit_entries() -> None:
    entries = [ManifestEntry(ADDED, 9, None, None, data_file(0)),
               ManifestEntry(DELETED, 9, 1, 1, data_file(1)),  # not live: ignored
               ManifestEntry(EXISTING, 4, 5, 5, data_file(2)),
               ManifestEntry(EXISTING, 3, 4, 2, data_file(3))]
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                            content=ManifestContent.DATA, snapshot_id=9)
    assert result.min_sequence_number == 4
    only_added = write_manifest(entries[:1], schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                                content=ManifestContent.DATA, snapshot_id=9)
    assert only_added.min_sequence_number is None
    assert only_added.to_manifest_file("m", 1, 1, 9, 12).min_sequence_number == 12


def test_null_sequence_numbers_stay_null_and_are_inherited() -> None:
    entries = [ManifestEntry(ADDED, 9, None, None, data_file(0)),
               ManifestEntry(ADDED, None, None, None, data_file(1)),
               ManifestEntry(EXISTING, 4, 5, 6, data_file(2))]
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                            content=ManifestContent.DATA, snapshot_id=9)
    raw = raw_records(result.data)
    assert [(r["snapshot_id"], r["sequence_number"], r["file_sequence_number"]) for r in raw] == [
        (9, None, None), (None, None, None), (4, 5, 6)]
    m = result.to_manifest_file("m.avro", len(result.data), 1, 9, 12)
    got = roundtrip(result, m, 2)
    assert [(e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in got] == [
        (9, 12, 12), (9, 12, 12), (4, 5, 6)]


@pytest.mark.parametrize("entry", [
    ManifestEntry(EXISTING, 4, None, None, data_file(0)),  # EXISTING must be explicit
    ManifestEntry(DELETED, 9, None, 3, data_file(0)),
    ManifestEntry(ADDED, 4, None, None, data_file(0)),  # another snapshot's file cannot inherit
])
def test_entries_that_cannot_inherit_are_refused(entry: ManifestEntry) -> None:
    with pytest.raises(ValueError, match="no data sequence number"):
        write_manifest([entry], schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                       content=ManifestContent.DATA, snapshot_id=9)


def test_wrong_content_and_partition_arity_are_refused() -> None:
    kw: dict[str, Any] = dict(schema=SCHEMA, spec=SPEC, partition_type=PTYPE, snapshot_id=1)
    deletes = [ManifestEntry(ADDED, 1, None, None, data_file(0, DataFileContent.POSITION_DELETES))]
    with pytest.raises(ValueError, match="DATA manifest"):
        write_manifest(deletes, format_version=2, content=ManifestContent.DATA, **kw)
    with pytest.raises(ValueError, match="v1"):
        write_manifest(deletes, format_version=1, content=ManifestContent.DELETES, **kw)
    short = [ManifestEntry(ADDED, 1, None, None, dataclasses.replace(data_file(0), partition=(1,)))]
    with pytest.raises(ValueError, match="partition"):
        write_manifest(short, format_version=2, content=ManifestContent.DATA, **kw)
    with pytest.raises(UnsupportedError):
        write_manifest([], format_version=5, content=ManifestContent.DATA, **kw)


@pytest.mark.parametrize("version", [2, 3])
def test_delete_manifest_roundtrip(version: int) -> None:
    pos = data_file(0, DataFileContent.POSITION_DELETES, sort_order_id=None,
                    referenced_data_file="s3://b/t/data/f9.parquet")
    eq = data_file(1, DataFileContent.EQUALITY_DELETES, equality_ids=(1, 3), referenced_data_file=None)
    entries = [ManifestEntry(ADDED, 5, None, None, pos), ManifestEntry(EXISTING, 4, 3, 3, eq)]
    if version == 3:
        dv = data_file(2, DataFileContent.POSITION_DELETES, file_format="PUFFIN", record_count=3,
                       column_sizes=None, value_counts=None, null_value_counts=None, nan_value_counts=None,
                       lower_bounds=None, upper_bounds=None, split_offsets=None, sort_order_id=None,
                       referenced_data_file="s3://b/t/data/f1.parquet", content_offset=4, content_size_in_bytes=42)
        entries = [ManifestEntry(ADDED, 5, None, None, dv), entries[1]]
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=version,
                            content=ManifestContent.DELETES, snapshot_id=5)
    meta = read_manifest_metadata(result.data)
    assert meta["content"] == "deletes"
    m = result.to_manifest_file("d.avro", len(result.data), SPEC.spec_id, 5, 8)
    assert m.content == ManifestContent.DELETES
    got = roundtrip(result, m, version)
    assert [e.data_file.file_path for e in got] == [e.data_file.file_path for e in entries]
    assert got[1].data_file.equality_ids == (1, 3)
    assert (got[0].sequence_number, got[1].sequence_number) == (8, 3)
    first = got[0].data_file
    assert first.referenced_data_file == entries[0].data_file.referenced_data_file
    if version == 3:
        assert first.is_dv and (first.content_offset, first.content_size_in_bytes, first.record_count) == (4, 42, 3)
        assert first.first_row_id is None  # delete files never get row ids


def test_fields_java_writes_only_for_some_content() -> None:
    # v3 Java: first_row_id only for data files; DV fields only for position deletes.
    eq = data_file(1, DataFileContent.EQUALITY_DELETES, equality_ids=(1,), first_row_id=5, content_offset=1,
                   referenced_data_file="x")
    result = write_manifest([ManifestEntry(EXISTING, 1, 1, 1, eq)], schema=SCHEMA, spec=SPEC,
                            partition_type=PTYPE, format_version=3, content=ManifestContent.DELETES,
                            snapshot_id=1)
    raw = raw_records(result.data)[0]["data_file"]
    assert (raw["first_row_id"], raw["content_offset"], raw["referenced_data_file"]) == (None, None, None)
    v2 = write_manifest([ManifestEntry(EXISTING, 1, 1, 1, eq)], schema=SCHEMA, spec=SPEC,
                        partition_type=PTYPE, format_version=2, content=ManifestContent.DELETES, snapshot_id=1)
    assert raw_records(v2.data)[0]["data_file"]["referenced_data_file"] == "x"  # any DeleteFile in v2


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_manifest_key_value_metadata(version: int) -> None:
    result = write_manifest([], schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=version,
                            content=ManifestContent.DATA, snapshot_id=1)
    meta = read_manifest_metadata(result.data)
    assert meta["schema"] == json.dumps(SCHEMA.to_json(), separators=(",", ":"))
    assert json.loads(meta["partition-spec"]) == SPEC.fields_to_json()
    assert meta["partition-spec"].startswith('[{"name":"id_bucket","transform":"bucket[16]","source-id":1,')
    assert meta["partition-spec-id"] == "1"
    assert meta["format-version"] == str(version)
    assert ("content" in meta) == (version >= 2)
    if version >= 2:
        assert meta["content"] == "data"
    assert "schema-id" not in meta  # Java does not write it (notes 1.4)
    assert meta["avro.codec"] == "deflate"
    # compact JSON, like Java's Avro and Jackson write it
    assert meta["avro.schema"] == json.dumps(manifest_avro_schema(PTYPE, version), separators=(",", ":"))
    iceberg = json.loads(meta["iceberg.schema"])
    assert iceberg["type"] == "struct" and iceberg["fields"][0] == {
        "id": 0, "name": "status", "required": True, "type": "int"}


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_codecs_and_multiple_blocks(codec: str) -> None:
    entries = [ManifestEntry(ADDED, 1, None, None, data_file(i % 50)) for i in range(1500)]
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                            content=ManifestContent.DATA, snapshot_id=1, codec=codec)
    reader = fastavro.block_reader(io.BytesIO(result.data))
    assert reader.metadata["avro.codec"] == codec
    assert sum(1 for _ in reader) > 1  # > 64 kB: several blocks
    m = result.to_manifest_file("m", len(result.data), 1, 1, 3)
    assert len(roundtrip(result, m, 2)) == 1500


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedError, match="codec"):
        write_manifest([], schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=2,
                       content=ManifestContent.DATA, snapshot_id=1, codec="snappy")


# --------------------------------------------------------------------------- manifest lists


def mf(path: str, *, content: ManifestContent = ManifestContent.DATA, added: int = 0, existing: int = 0,
       first_row_id: int | None = None, seq: int = 5, snapshot: int = 42) -> ManifestFile:
    return ManifestFile(
        manifest_path=path, manifest_length=1234, partition_spec_id=0, content=content, sequence_number=seq,
        min_sequence_number=seq, added_snapshot_id=snapshot, added_files_count=1 if added else 0,
        existing_files_count=1 if existing else 0, deleted_files_count=0, added_rows_count=added,
        existing_rows_count=existing, deleted_rows_count=0,
        partitions=(PartitionFieldSummary(True, False, b"\x01\x00\x00\x00", b"\x09\x00\x00\x00"),),
        key_metadata=None, first_row_id=first_row_id)


def test_first_row_id_assignment_spec_example() -> None:
    # Spec "Row lineage example": next-row-id 1000; added1/added2/added3 get 1000/1125/1225 -> 1375.
    manifests = [
        mf("existing", added=75, first_row_id=925, seq=4, snapshot=41),
        mf("added1", added=100, existing=25, seq=UNASSIGNED_SEQ),
        mf("deletes", content=ManifestContent.DELETES, added=3, seq=UNASSIGNED_SEQ),
        mf("added2", existing=100, seq=UNASSIGNED_SEQ),
        mf("added3", added=125, existing=25, seq=UNASSIGNED_SEQ),
    ]
    result = write_manifest_list(manifests, format_version=3, snapshot_id=42, parent_snapshot_id=41,
                                 sequence_number=5, first_row_id=1000)
    assert result.next_row_id == 1375 and result.added_rows == 375
    assert [m.first_row_id for m in result.manifests] == [925, 1000, None, 1125, 1225]
    back = read_manifest_list(result.data, format_version=3)
    assert list(back) == result.manifests
    assert [m.first_row_id for m in back] == [925, 1000, None, 1125, 1225]
    assert [m.sequence_number for m in back] == [4, 5, 5, 5, 5]
    assert back.metadata["first-row-id"] == "1000"


def test_delete_manifests_never_carry_a_first_row_id() -> None:
    result = write_manifest_list([mf("d", content=ManifestContent.DELETES, first_row_id=7)], format_version=3,
                                 snapshot_id=42, parent_snapshot_id=None, sequence_number=5, first_row_id=10)
    assert raw_records(result.data)[0]["first_row_id"] is None
    assert result.next_row_id == 10 and result.added_rows == 0


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_manifest_list_roundtrip_and_metadata(version: int) -> None:
    manifests = [mf("a", added=3, first_row_id=0), mf("b", existing=4, seq=3, snapshot=40, first_row_id=3)]
    if version >= 2:
        manifests.append(mf("c", content=ManifestContent.DELETES, added=1))
    result = write_manifest_list(manifests, format_version=version, snapshot_id=42, parent_snapshot_id=None,
                                 sequence_number=5, first_row_id=7 if version >= 3 else None)
    back = read_manifest_list(result.data, format_version=version)
    assert list(back) == result.manifests
    expected = [dataclasses.replace(m, first_row_id=m.first_row_id if version >= 3 and m.content == 0 else None)
                for m in manifests]
    if version == 1:
        expected = [dataclasses.replace(m, sequence_number=0, min_sequence_number=0) for m in expected]
    assert list(back) == expected
    meta = {k: v for k, v in back.metadata.items() if not k.startswith(("avro.", "iceberg."))}
    want = {"snapshot-id": "42", "parent-snapshot-id": "null", "format-version": str(version)}
    if version >= 2:
        want["sequence-number"] = "5"
    if version >= 3:
        want["first-row-id"] = "7"
    assert meta == want
    assert json.loads(back.metadata["avro.schema"]) == manifest_list_avro_schema(version)
    assert json.loads(back.metadata["iceberg.schema"])["fields"][0] == {
        "id": 500, "name": "manifest_path", "required": True, "type": "string",
        "doc": "Location URI with FS scheme"}
    assert result.next_row_id == (7 if version >= 3 else None)


def test_unassigned_sequence_numbers_get_the_snapshots() -> None:
    m = dataclasses.replace(mf("new", added=1), sequence_number=UNASSIGNED_SEQ, min_sequence_number=UNASSIGNED_SEQ)
    kept = dataclasses.replace(mf("old", added=1, snapshot=40), sequence_number=3, min_sequence_number=UNASSIGNED_SEQ)
    result = write_manifest_list([m], format_version=2, snapshot_id=42, parent_snapshot_id=41, sequence_number=9)
    back = read_manifest_list(result.data, format_version=2)
    assert (back[0].sequence_number, back[0].min_sequence_number) == (9, 9)
    assert back.metadata["parent-snapshot-id"] == "41"
    with pytest.raises(ValueError, match="unassigned"):  # only this snapshot's manifests may be unassigned
        write_manifest_list([kept], format_version=2, snapshot_id=42, parent_snapshot_id=41, sequence_number=9)


def test_manifest_list_refusals() -> None:
    deletes = mf("d", content=ManifestContent.DELETES, added=1)
    with pytest.raises(ValueError, match="v1"):
        write_manifest_list([deletes], format_version=1, snapshot_id=1, parent_snapshot_id=None, sequence_number=0)
    with pytest.raises(ValueError, match="first-row-id"):
        write_manifest_list([], format_version=3, snapshot_id=1, parent_snapshot_id=None, sequence_number=1)
    no_counts = dataclasses.replace(mf("x"), added_rows_count=None)
    with pytest.raises(ValueError, match="counts"):
        write_manifest_list([no_counts], format_version=2, snapshot_id=1, parent_snapshot_id=None,
                            sequence_number=1)
    # v1 lists may omit counts (optional there)
    v1 = write_manifest_list([no_counts], format_version=1, snapshot_id=1, parent_snapshot_id=None,
                             sequence_number=0)
    assert read_manifest_list(v1.data, format_version=1)[0].added_rows_count is None


def test_manifest_to_list_to_reader_end_to_end() -> None:
    # write_manifest -> to_manifest_file(UNASSIGNED) -> write_manifest_list -> read both back
    entries = [ManifestEntry(ADDED, 42, None, None, data_file(i)) for i in range(3)]
    entries.append(ManifestEntry(EXISTING, 40, 2, 2, data_file(3, first_row_id=500)))
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=3,
                            content=ManifestContent.DATA, snapshot_id=42)
    m = result.to_manifest_file("m.avro", len(result.data), SPEC.spec_id, 42, UNASSIGNED_SEQ)
    listed = write_manifest_list([m], format_version=3, snapshot_id=42, parent_snapshot_id=40,
                                 sequence_number=6, first_row_id=2000)
    assert listed.next_row_id == 2000 + 60 + 40
    back = read_manifest_list(listed.data, format_version=3)[0]
    assert (back.sequence_number, back.min_sequence_number, back.first_row_id) == (6, 2, 2000)
    assert back.partitions == tuple(result.partitions)
    got = roundtrip(result, back, 3)
    assert [e.data_file.first_row_id for e in got] == [2000, 2010, 2030, 500]
    assert [e.sequence_number for e in got] == [6, 6, 6, 2]

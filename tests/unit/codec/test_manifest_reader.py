"""Manifest lists and manifests written with fastavro using the spec's Avro schemas (v1, v2, v3).

The schemas below follow the spec tables and Appendix A exactly as Iceberg Java writes them:
field ids in ``field-id``, optional fields as ``["null", T]`` with a null default, int-keyed maps
as arrays of ``k<key-id>_v<value-id>`` records with logicalType ``map``, records named
``manifest_file``, ``r508``, ``manifest_entry``, ``r2`` and ``r102``.
"""

from __future__ import annotations

import io
import random
import uuid
from datetime import date, datetime, time, timezone
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from icectl.codec.manifest_reader import (
    partition_decoder,
    read_manifest,
    read_manifest_list,
    read_manifest_metadata,
    scan_manifest_list_paths,
)
from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.manifest import (
    DataFileContent,
    ManifestContent,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.schema import (
    DATE,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMPTZ,
    UUID,
    DecimalType,
    NestedField,
    Schema,
    StructType,
)


def opt(name: str, t: Any, fid: int) -> dict[str, Any]:
    return {"name": name, "type": ["null", t], "default": None, "field-id": fid}


def req(name: str, t: Any, fid: int) -> dict[str, Any]:
    return {"name": name, "type": t, "field-id": fid}


def int_map(key_id: int, value_id: int, value: str) -> dict[str, Any]:
    return {"type": "array", "logicalType": "map", "items": {
        "type": "record", "name": f"k{key_id}_v{value_id}",
        "fields": [req("key", "int", key_id), req("value", value, value_id)]}}


FIELD_SUMMARY = {"type": "array", "element-id": 508, "items": {
    "type": "record", "name": "r508", "fields": [
        req("contains_null", "boolean", 509), opt("contains_nan", "boolean", 518),
        opt("lower_bound", "bytes", 510), opt("upper_bound", "bytes", 511)]}}


def manifest_list_schema(version: int) -> dict[str, Any]:
    head = [req("manifest_path", "string", 500), req("manifest_length", "long", 501),
            req("partition_spec_id", "int", 502)]
    if version == 1:  # old Java names for 504-506: must be matched by field id
        fields = [
            *head, req("added_snapshot_id", "long", 503), opt("added_data_files_count", "int", 504),
            opt("existing_data_files_count", "int", 505), opt("deleted_data_files_count", "int", 506),
            opt("partitions", FIELD_SUMMARY, 507), opt("added_rows_count", "long", 512),
            opt("existing_rows_count", "long", 513), opt("deleted_rows_count", "long", 514),
            opt("key_metadata", "bytes", 519)]
    else:
        fields = [
            *head, req("content", "int", 517), req("sequence_number", "long", 515),
            req("min_sequence_number", "long", 516), req("added_snapshot_id", "long", 503),
            req("added_files_count", "int", 504), req("existing_files_count", "int", 505),
            req("deleted_files_count", "int", 506), req("added_rows_count", "long", 512),
            req("existing_rows_count", "long", 513), req("deleted_rows_count", "long", 514),
            opt("partitions", FIELD_SUMMARY, 507), opt("key_metadata", "bytes", 519)]
        if version >= 3:
            fields.append(opt("first_row_id", "long", 520))
    return {"type": "record", "name": "manifest_file", "fields": fields}


def data_file_schema(version: int, partition: dict[str, Any]) -> dict[str, Any]:
    fields = [req("file_path", "string", 100), req("file_format", "string", 101),
              req("partition", partition, 102), req("record_count", "long", 103),
              req("file_size_in_bytes", "long", 104)]
    if version == 1:
        fields.append(req("block_size_in_bytes", "long", 105))
    else:
        fields.insert(0, req("content", "int", 134))
    fields += [opt("column_sizes", int_map(117, 118, "long"), 108),
               opt("value_counts", int_map(119, 120, "long"), 109),
               opt("null_value_counts", int_map(121, 122, "long"), 110),
               opt("nan_value_counts", int_map(138, 139, "long"), 137),
               opt("lower_bounds", int_map(126, 127, "bytes"), 125),
               opt("upper_bounds", int_map(129, 130, "bytes"), 128),
               opt("key_metadata", "bytes", 131),
               opt("split_offsets", {"type": "array", "items": "long", "element-id": 133}, 132)]
    if version >= 2:
        fields.append(opt("equality_ids", {"type": "array", "items": "int", "element-id": 136}, 135))
    fields.append(opt("sort_order_id", "int", 140))
    if version == 3:
        fields.append(opt("first_row_id", "long", 142))
    if version >= 2:
        fields.append(opt("referenced_data_file", "string", 143))
    if version == 3:
        fields += [opt("content_offset", "long", 144), opt("content_size_in_bytes", "long", 145)]
    return {"type": "record", "name": "r2", "fields": fields}


def manifest_schema(version: int, partition: dict[str, Any] | None = None) -> dict[str, Any]:
    partition = partition or {"type": "record", "name": "r102", "fields": []}
    fields = [req("status", "int", 0)]
    if version == 1:
        fields.append(req("snapshot_id", "long", 1))
    else:
        fields += [opt("snapshot_id", "long", 1), opt("sequence_number", "long", 3),
                   opt("file_sequence_number", "long", 4)]
    fields.append(req("data_file", data_file_schema(version, partition), 2))
    return {"type": "record", "name": "manifest_entry", "fields": fields}


def avro_bytes(schema: dict[str, Any], records: list[dict[str, Any]],
               metadata: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, metadata=metadata or {},
                    codec="deflate")
    data = buf.getvalue()
    # Precondition of every test here: the field ids really are in the written schema.
    assert '"field-id"' in fastavro.reader(io.BytesIO(data)).metadata["avro.schema"]
    return data


def data_file(version: int, path: str, record_count: int, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"file_path": path, "file_format": "PARQUET", "partition": {},
                           "record_count": record_count, "file_size_in_bytes": 1000}
    if version == 1:
        rec["block_size_in_bytes"] = 67108864
    else:
        rec["content"] = 0
    rec.update(extra)
    return rec


def entry(status: int, file: dict[str, Any], snapshot_id: int | None = None,
          seq: int | None = None, file_seq: int | None = None) -> dict[str, Any]:
    return {"status": status, "snapshot_id": snapshot_id, "sequence_number": seq,
            "file_sequence_number": file_seq, "data_file": file}


UNPARTITIONED = StructType(())


# --------------------------------------------------------------------------- manifest lists


def test_v1_manifest_list_defaults_and_field_id_matching():
    summary = {"contains_null": False, "contains_nan": None,
               "lower_bound": (17486).to_bytes(4, "little"), "upper_bound": (17490).to_bytes(4, "little")}
    data = avro_bytes(manifest_list_schema(1), [
        {"manifest_path": "s3://b/t/metadata/m0.avro", "manifest_length": 4242, "partition_spec_id": 0,
         "added_snapshot_id": 77, "added_data_files_count": 3, "existing_data_files_count": None,
         "deleted_data_files_count": 0, "partitions": [summary], "added_rows_count": 30,
         "existing_rows_count": None, "deleted_rows_count": None, "key_metadata": None},
    ], {"snapshot-id": "77", "format-version": "1"})
    result = read_manifest_list(data, format_version=1)
    assert result.metadata["snapshot-id"] == "77"
    assert len(result) == 1
    m = result[0]
    assert m == ManifestFile(
        manifest_path="s3://b/t/metadata/m0.avro", manifest_length=4242, partition_spec_id=0,
        content=ManifestContent.DATA, sequence_number=0, min_sequence_number=0,
        added_snapshot_id=77, added_files_count=3, existing_files_count=None, deleted_files_count=0,
        added_rows_count=30, existing_rows_count=None, deleted_rows_count=None,
        partitions=m.partitions, key_metadata=None, first_row_id=None)
    assert m.partitions is not None and m.partitions[0].decoded_bounds(DATE) == (17486, 17490)
    assert m.has_existing_files  # null count: assumed non-zero


def test_v3_manifest_list_reads_every_field():
    rec = {"manifest_path": "m1.avro", "manifest_length": 10, "partition_spec_id": 2, "content": 1,
           "sequence_number": 9, "min_sequence_number": 4, "added_snapshot_id": 5,
           "added_files_count": 1, "existing_files_count": 2, "deleted_files_count": 3,
           "added_rows_count": 11, "existing_rows_count": 12, "deleted_rows_count": 13,
           "partitions": None, "key_metadata": b"\x01", "first_row_id": None}
    data = avro_bytes(manifest_list_schema(3), [rec, {**rec, "content": 0, "first_row_id": 1000}])
    deletes, data_manifest = read_manifest_list(io.BytesIO(data), format_version=3)
    assert deletes.content == ManifestContent.DELETES and deletes.first_row_id is None
    assert (deletes.sequence_number, deletes.min_sequence_number, deletes.added_snapshot_id) == (9, 4, 5)
    assert (deletes.added_files_count, deletes.existing_files_count, deletes.deleted_files_count) == (1, 2, 3)
    assert (deletes.added_rows_count, deletes.existing_rows_count, deletes.deleted_rows_count) == (11, 12, 13)
    assert deletes.key_metadata == b"\x01" and deletes.partition_spec_id == 2
    assert data_manifest.content == ManifestContent.DATA and data_manifest.first_row_id == 1000


def test_truncated_and_foreign_files_raise_corrupt_input():
    data = avro_bytes(manifest_list_schema(2), [
        {"manifest_path": f"m{i}.avro" * 20, "manifest_length": i, "partition_spec_id": 0, "content": 0,
         "sequence_number": 1, "min_sequence_number": 1, "added_snapshot_id": 1,
         "added_files_count": 1, "existing_files_count": 0, "deleted_files_count": 0,
         "added_rows_count": 1, "existing_rows_count": 0, "deleted_rows_count": 0,
         "partitions": None, "key_metadata": None} for i in range(200)])
    with pytest.raises(CorruptInputError, match=r"truncated Avro file|sync marker"):
        read_manifest_list(data[: len(data) - 40], format_version=2)
    with pytest.raises(CorruptInputError, match="truncated Avro file"):
        read_manifest_list(data[: len(data) // 2], format_version=2)
    with pytest.raises(CorruptInputError, match="not an Avro file"):
        read_manifest_list(b'{"format-version": 2}', format_version=2)
    with pytest.raises(CorruptInputError, match="not an Avro file"):
        read_manifest_list(b"", format_version=2)
    with pytest.raises(CorruptInputError, match=r"truncated Avro file \(incomplete header\)"):
        read_manifest_metadata(data[:20])


def test_manifest_list_must_have_the_required_fields():
    schema = {"type": "record", "name": "manifest_file",
              "fields": [req("manifest_path", "string", 500)]}
    with pytest.raises(CorruptInputError, match="no manifest_length field"):
        read_manifest_list(avro_bytes(schema, [{"manifest_path": "x"}]), format_version=2)


# --------------------------------------------------------------------------- inheritance


def manifest(version: int = 2, seq: int = 5, snapshot: int = 99, first_row_id: int | None = None,
             content: ManifestContent = ManifestContent.DATA) -> ManifestFile:
    return ManifestFile("m.avro", 1, 0, content=content, sequence_number=seq, min_sequence_number=seq,
                        added_snapshot_id=snapshot, first_row_id=first_row_id)


def read_all(data: bytes, m: ManifestFile, version: int, partition_type: StructType = UNPARTITIONED,
             fields: set[str] | None = None):
    return list(read_manifest(data, manifest=m, partition_type=partition_type, format_version=version,
                              fields=fields))


def test_v2_sequence_numbers_are_inherited_only_by_added_entries():
    data = avro_bytes(manifest_schema(2), [
        entry(1, data_file(2, "a", 1)),  # ADDED, all null: inherit
        entry(1, data_file(2, "b", 1), snapshot_id=98, seq=3),  # ADDED, explicit data seq (older data)
        entry(0, data_file(2, "c", 1), snapshot_id=7, seq=2, file_seq=2),  # EXISTING, explicit
        entry(0, data_file(2, "d", 1), snapshot_id=7),  # EXISTING without seqs: spec violation
        entry(2, data_file(2, "e", 1), seq=1, file_seq=4),  # DELETED, snapshot inherited
    ])
    a, b, c, d, e = read_all(data, manifest(), 2)
    assert (a.status, a.snapshot_id, a.sequence_number, a.file_sequence_number) == (
        ManifestEntryStatus.ADDED, 99, 5, 5)
    assert (b.snapshot_id, b.sequence_number, b.file_sequence_number) == (98, 3, 5)
    assert (c.status, c.snapshot_id, c.sequence_number, c.file_sequence_number) == (
        ManifestEntryStatus.EXISTING, 7, 2, 2)
    assert (d.sequence_number, d.file_sequence_number) == (None, None)
    assert (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) == (
        ManifestEntryStatus.DELETED, 99, 1, 4)
    assert not e.is_live and a.is_live and c.is_live


def test_v1_manifest_entries_default_to_sequence_number_zero():
    data = avro_bytes(manifest_schema(1), [
        {"status": 0, "snapshot_id": 5, "data_file": data_file(1, "a", 10)},
        {"status": 1, "snapshot_id": 6, "data_file": data_file(1, "b", 20)},
    ])
    entries = read_all(data, manifest(version=1, seq=0, snapshot=6), 1)
    assert [(e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in entries] == [
        (5, 0, 0), (6, 0, 0)]
    assert all(e.data_file.content == DataFileContent.DATA for e in entries)
    assert read_manifest_metadata(data)["avro.codec"] == "deflate"


def test_v3_first_row_id_inheritance():
    data = avro_bytes(manifest_schema(3), [
        entry(1, data_file(3, "a", 10)),  # -> 1000, next 1010
        entry(0, data_file(3, "b", 5, first_row_id=50), 1, 1, 1),  # explicit: kept, no advance
        entry(0, data_file(3, "c", 7), 1, 1, 1),  # EXISTING null -> 1010 (upgrade case), next 1017
        entry(2, data_file(3, "d", 100), 1, 1, 1),  # DELETED: neither assigned nor counted
        entry(1, data_file(3, "e", 3)),  # -> 1017
    ])
    ids = [e.data_file.first_row_id for e in read_all(data, manifest(3, first_row_id=1000), 3)]
    assert ids == [1000, 50, 1010, None, 1017]
    # The manifest has no first_row_id (written before the upgrade): nothing is assigned.
    ids = [e.data_file.first_row_id for e in read_all(data, manifest(3, first_row_id=None), 3)]
    assert ids == [None, 50, None, None, None]
    # Projection still reads record_count and first_row_id, so inheritance is unchanged.
    projected = read_all(data, manifest(3, first_row_id=1000), 3, fields={"file_path"})
    assert [e.data_file.first_row_id for e in projected] == [1000, 50, 1010, None, 1017]


def test_delete_manifest_with_deletion_vector():
    dv = data_file(3, "s3://b/t/data/dv.puffin", 3, content=1, file_format="PUFFIN",
                   referenced_data_file="s3://b/t/data/a.parquet", content_offset=4, content_size_in_bytes=46)
    eq = data_file(3, "s3://b/t/data/eq.parquet", 2, content=2, equality_ids=[1, 2])
    data = avro_bytes(manifest_schema(3), [entry(1, dv), entry(1, eq)])
    dv_entry, eq_entry = read_all(data, manifest(3, content=ManifestContent.DELETES), 3)
    assert dv_entry.is_dv and not eq_entry.is_dv
    f = dv_entry.data_file
    assert (f.content, f.referenced_data_file, f.content_offset, f.content_size_in_bytes, f.first_row_id) == (
        DataFileContent.POSITION_DELETES, "s3://b/t/data/a.parquet", 4, 46, None)
    assert eq_entry.data_file.content == DataFileContent.EQUALITY_DELETES
    assert eq_entry.data_file.equality_ids == (1, 2)


# --------------------------------------------------------------------------- partitions

PARTITION_AVRO = {"type": "record", "name": "r102", "fields": [
    opt("d", {"type": "int", "logicalType": "date"}, 1000),
    opt("id_bucket", "int", 1001),
    opt("amount", {"type": "fixed", "name": "decimal_9_2", "size": 4, "logicalType": "decimal",
                   "precision": 9, "scale": 2}, 1002),
    opt("s", "string", 1003),
    opt("ts", {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}, 1004),
    opt("u", {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}, 1005),
    opt("t", {"type": "long", "logicalType": "time-micros"}, 1006),
    opt("ts_day", {"type": "int", "logicalType": "date"}, 1007),
]}
PARTITION_VALUES = {"d": date(2017, 11, 16), "id_bucket": 3, "amount": Decimal("14.20"), "s": "iceberg",
                    "ts": datetime(2017, 11, 16, 22, 31, 8, 1, tzinfo=timezone.utc),
                    "u": uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes,
                    "t": time(22, 31, 8), "ts_day": 17486}
# Deliberately not in Avro order, with other names: matching must go by partition field id.
PARTITION_TYPE = StructType((
    NestedField(1007, "day", DATE), NestedField(1004, "ts_ident", TIMESTAMPTZ),
    NestedField(1000, "date_ident", DATE), NestedField(1001, "bucket", INT),
    NestedField(1002, "amt", DecimalType(9, 2)), NestedField(1003, "str", STRING),
    NestedField(1005, "uuid", UUID), NestedField(1006, "time", TIME),
))


def test_partition_tuple_is_typed_and_in_partition_type_order():
    data = avro_bytes(manifest_schema(2, PARTITION_AVRO), [
        entry(1, data_file(2, "a", 1, partition=PARTITION_VALUES)),
        entry(1, data_file(2, "b", 1, partition=dict.fromkeys(PARTITION_VALUES))),
    ])
    a, b = read_all(data, manifest(), 2, PARTITION_TYPE)
    assert a.data_file.partition == (
        17486, 1_510_871_468_000_001, 17486, 3, Decimal("14.20"), "iceberg",
        uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), 81_068_000_000)
    assert type(a.data_file.partition[0]) is int and type(a.data_file.partition[1]) is int
    assert b.data_file.partition == (None,) * 8


def test_partition_without_field_ids_matches_by_name():
    avro = {"type": "record", "name": "r102", "fields": [
        {"name": "b", "type": ["null", "long"], "default": None},
        {"name": "a", "type": ["null", "string"], "default": None}]}
    schema = manifest_schema(2, avro)
    data = avro_bytes(schema, [entry(1, data_file(2, "x", 1, partition={"a": "v", "b": 5}))])
    ptype = StructType((NestedField(1000, "a", STRING), NestedField(1001, "b", LONG)))
    assert read_all(data, manifest(), 2, ptype)[0].data_file.partition == ("v", 5)
    missing = StructType((NestedField(1000, "zzz", STRING),))
    with pytest.raises(CorruptInputError, match="no field for partition field 'zzz'"):
        read_all(data, manifest(), 2, missing)


# --------------------------------------------------------------------------- stats and projection


def stats_file(i: int, columns: int) -> dict[str, Any]:
    counts = [{"key": c, "value": i + c} for c in range(1, columns + 1)]
    bounds = [{"key": c, "value": (i + c).to_bytes(8, "little")} for c in range(1, columns + 1)]
    return data_file(2, f"s3://b/t/data/{i}.parquet", 100 + i, column_sizes=counts, value_counts=counts,
                     null_value_counts=counts, nan_value_counts=counts, lower_bounds=bounds,
                     upper_bounds=bounds, split_offsets=[4, 100], sort_order_id=0)


def test_full_read_decodes_stats_maps_and_bounds():
    data = avro_bytes(manifest_schema(2), [entry(1, stats_file(0, 3))])
    (e,) = read_all(data, manifest(), 2)
    f = e.data_file
    assert f.column_sizes == {1: 1, 2: 2, 3: 3} and f.nan_value_counts == {1: 1, 2: 2, 3: 3}
    assert f.lower_bounds == {1: b"\x01" + b"\x00" * 7, 2: b"\x02" + b"\x00" * 7, 3: b"\x03" + b"\x00" * 7}
    assert f.split_offsets == (4, 100) and f.sort_order_id == 0 and f.partition == ()
    schema = Schema((NestedField(1, "a", LONG), NestedField(2, "b", LONG)))
    assert f.lower_bound_values(schema) == {1: 1, 2: 2}  # id 3 is not in the schema: skipped


def test_projection_skips_unrequested_fields():
    data = avro_bytes(manifest_schema(2), [entry(1, stats_file(i, 5)) for i in range(3)])
    full = read_all(data, manifest(), 2)
    slim = read_all(data, manifest(), 2, fields={"file_path", "record_count"})
    assert [e.data_file.file_path for e in slim] == [e.data_file.file_path for e in full]
    assert [e.data_file.record_count for e in slim] == [100, 101, 102]
    f = slim[0].data_file
    assert (f.column_sizes, f.lower_bounds, f.split_offsets, f.partition, f.sort_order_id) == (
        None, None, None, None, None)
    assert [(e.status, e.snapshot_id, e.sequence_number) for e in slim] == [
        (e.status, e.snapshot_id, e.sequence_number) for e in full]
    with_bounds = read_all(data, manifest(), 2, fields={"upper_bounds", "partition"})
    assert with_bounds[2].data_file.upper_bounds == full[2].data_file.upper_bounds
    assert with_bounds[2].data_file.value_counts is None and with_bounds[2].data_file.partition == ()
    with pytest.raises(ValueError, match="unknown data_file fields: nope"):
        read_all(data, manifest(), 2, fields={"nope"})


def test_projection_inlines_named_types_defined_in_dropped_fields():
    # Avro allows a later field to reuse a record type by name; dropping its definition must not
    # leave a dangling reference in the reader schema.
    schema = manifest_schema(2)
    file_fields = schema["fields"][-1]["type"]["fields"]
    for f in file_fields:
        if f["name"] == "null_value_counts":
            f["type"] = ["null", {"type": "array", "logicalType": "map", "items": "k119_v120"}]
    counts = [{"key": 1, "value": 9}]
    data = avro_bytes(schema, [entry(1, data_file(2, "a", 1, value_counts=counts, null_value_counts=counts))])
    (e,) = read_all(data, manifest(), 2, fields={"null_value_counts"})
    assert e.data_file.null_value_counts == {1: 9} and e.data_file.value_counts is None


def test_truncated_manifest_raises_while_streaming():
    data = avro_bytes(manifest_schema(2), [entry(1, stats_file(i, 20)) for i in range(300)])
    it = read_manifest(data[: len(data) * 2 // 3], manifest=manifest(), partition_type=UNPARTITIONED,
                       format_version=2)
    with pytest.raises(CorruptInputError, match=r"truncated Avro file|sync marker"):
        list(it)


def test_manifest_metadata_keys():
    meta = {"schema": '{"type":"struct","schema-id":0,"fields":[]}', "partition-spec": "[]",
            "partition-spec-id": "0", "format-version": "2", "content": "data"}
    data = avro_bytes(manifest_schema(2), [], meta)
    got = read_manifest_metadata(io.BytesIO(data))
    assert {k: got[k] for k in meta} == meta
    assert read_all(data, manifest(), 2) == []


def test_v1_manifest_projection_drops_required_v1_fields():
    rec = {"status": 1, "snapshot_id": 6, "data_file": data_file(1, "b", 20)}
    data = avro_bytes(manifest_schema(1), [rec])
    (e,) = read_all(data, manifest(version=1, seq=0, snapshot=6), 1, fields={"file_path"})
    assert (e.data_file.file_path, e.data_file.record_count, e.sequence_number) == ("b", 20, 0)


def test_projection_works_on_non_seekable_streams():
    class OneWay(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._inner = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            chunk = self._inner.read(len(b))
            b[: len(chunk)] = chunk
            return len(chunk)

    data = avro_bytes(manifest_schema(2), [entry(1, stats_file(i, 3)) for i in range(3)])
    entries = list(read_manifest(io.BufferedReader(OneWay(data)), manifest=manifest(),
                                 partition_type=UNPARTITIONED, format_version=2, fields={"file_path"}))
    assert [e.data_file.record_count for e in entries] == [100, 101, 102]


def test_unknown_codec_is_unsupported():
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(manifest_schema(2)), [entry(1, stats_file(0, 1))],
                    codec="null")
    data = buf.getvalue().replace(b"\x08null", b"\x08nope", 1)
    with pytest.raises(UnsupportedError, match="codec"):
        read_all(data, manifest(), 2)


def test_damaged_manifests_only_ever_raise_corrupt_input():
    # Deterministic byte flips and cuts: each read must succeed or raise CorruptInputError,
    # never a raw fastavro, zlib or EOF exception.
    data = avro_bytes(manifest_schema(2, PARTITION_AVRO),
                      [entry(1, data_file(2, f"f{i}", i, partition=PARTITION_VALUES,
                                          lower_bounds=[{"key": 1, "value": b"ab"}])) for i in range(40)])
    rnd = random.Random(20)
    for _ in range(150):
        damaged = bytearray(data)
        for _ in range(rnd.randint(1, 3)):
            damaged[rnd.randrange(len(damaged))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            damaged = damaged[: rnd.randrange(len(damaged))]
        for fields in (None, {"file_path"}):
            try:
                read_all(bytes(damaged), manifest(), 2, PARTITION_TYPE, fields=fields)
            except (CorruptInputError, UnsupportedError):
                pass


def test_destroyed_magic_is_not_avro_although_fastavro_would_decode_it():
    # fastavro reads the 4 magic bytes as a fixed field and never compares them; Java's
    # DataFileReader fails ("Not an Avro data file"), so icectl must too.
    data = bytearray(avro_bytes(manifest_list_schema(2), [
        {"manifest_path": "m.avro", "manifest_length": 1, "partition_spec_id": 0, "content": 0,
         "sequence_number": 1, "min_sequence_number": 1, "added_snapshot_id": 1,
         "added_files_count": 1, "existing_files_count": 0, "deleted_files_count": 0,
         "added_rows_count": 1, "existing_rows_count": 0, "deleted_rows_count": 0,
         "partitions": None, "key_metadata": None}]))
    data[:4] = b"\0\0\0\0"
    with pytest.raises(CorruptInputError, match="not an Avro file"):
        read_manifest_list(bytes(data), format_version=2)
    with pytest.raises(CorruptInputError, match="not an Avro file"):
        read_manifest_metadata(bytes(data))
    assert scan_manifest_list_paths(bytes(data)) is None  # the shortcut leaves it to the full decode


@pytest.mark.parametrize("record", [
    {"type": "record", "name": "r102", "gields": []},  # a flipped bit in the header's JSON (seen in a search)
    {"type": "record", "name": "r102", "fields": [{"name": "x", "field-id": "one"}]},
    {"type": "record", "name": "r102", "fields": [{"type": "int"}]},
    {"type": "record", "name": "r102", "fields": 7},
])
def test_a_damaged_partition_record_schema_is_corrupt_input_not_a_crash(record: dict[str, Any]) -> None:
    ptype = StructType((NestedField(1000, "x", INT, False),))
    with pytest.raises(CorruptInputError, match="partition record"):
        partition_decoder(record, ptype)

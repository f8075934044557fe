"""Table metadata, snapshots, partition specs and sort orders: reading, defaults, exact round trips.

The JSON documents below are written the way Iceberg Java 1.10's TableMetadataParser writes
them (same keys, same key order, compact), so a round trip must reproduce them byte for byte.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from typing import Any

import pytest

from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.partitioning import PartitionField, PartitionSpec, unified_partition_type
from icectl.spec.schema import DATE, INT, LONG, STRING, UNKNOWN, NestedField, Schema
from icectl.spec.snapshots import Snapshot, SnapshotRef, ancestors_of, is_ancestor_of
from icectl.spec.sorting import SortOrder
from icectl.spec.transforms import DAY, IDENTITY, VOID, BucketTransform, UnknownTransform

SCHEMA_0 = ('{"type":"struct","schema-id":0,"fields":['
            '{"id":1,"name":"id","required":true,"type":"long"},'
            '{"id":2,"name":"data","required":false,"type":"string","doc":"payload"},'
            '{"id":3,"name":"ts","required":false,"type":"timestamptz"}]}')
SCHEMA_1 = ('{"type":"struct","schema-id":1,"identifier-field-ids":[1],"fields":['
            '{"id":1,"name":"id","required":true,"type":"long"},'
            '{"id":2,"name":"data","required":false,"type":"string","doc":"payload"},'
            '{"id":3,"name":"ts","required":false,"type":"timestamptz"},'
            '{"id":4,"name":"tags","required":false,"type":{"type":"list","element-id":5,'
            '"element":"string","element-required":false}}]}')

V1_JAVA = ('{"format-version":1,"table-uuid":"5f2a8a3e-54a2-4bd5-b7a6-2c9a0c6f0b11",'
           '"location":"file:/tmp/wh/db/v1tbl","last-updated-ms":1717000002000,"last-column-id":3,'
           f'"schema":{SCHEMA_0},"current-schema-id":0,"schemas":[{SCHEMA_0}],'
           '"partition-spec":[{"name":"ts_day","transform":"day","source-id":3,"field-id":1000}],'
           '"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":['
           '{"name":"ts_day","transform":"day","source-id":3,"field-id":1000}]}],'
           '"last-partition-id":1000,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],'
           '"properties":{"owner":"root"},"current-snapshot-id":7140000000000000001,'
           '"refs":{"main":{"snapshot-id":7140000000000000001,"type":"branch"}},'
           '"snapshots":[{"snapshot-id":7140000000000000001,"timestamp-ms":1717000001000,'
           '"summary":{"operation":"append","added-data-files":"1","added-records":"3",'
           '"total-records":"3"},"manifest-list":"file:/tmp/wh/db/v1tbl/metadata/snap-7140000000000000001'
           '-1-0b5e.avro","schema-id":0}],"statistics":[],"partition-statistics":[],'
           '"snapshot-log":[{"timestamp-ms":1717000001000,"snapshot-id":7140000000000000001}],'
           '"metadata-log":[{"timestamp-ms":1717000000000,"metadata-file":'
           '"file:/tmp/wh/db/v1tbl/metadata/v1.metadata.json"}]}')

V2_JAVA = ('{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1",'
           '"location":"s3://bucket/wh/db/events","last-sequence-number":2,"last-updated-ms":1717171717000,'
           f'"last-column-id":5,"current-schema-id":1,"schemas":[{SCHEMA_0},{SCHEMA_1}],'
           '"default-spec-id":1,"partition-specs":[{"spec-id":0,"fields":['
           '{"name":"ts_day","transform":"day","source-id":3,"field-id":1000}]},{"spec-id":1,"fields":['
           '{"name":"ts_day","transform":"day","source-id":3,"field-id":1000},'
           '{"name":"id_bucket","transform":"bucket[16]","source-id":1,"field-id":1001}]}],'
           '"last-partition-id":1001,"default-sort-order-id":1,"sort-orders":[{"order-id":0,"fields":[]},'
           '{"order-id":1,"fields":[{"transform":"identity","source-id":2,"direction":"asc",'
           '"null-order":"nulls-first"},{"transform":"bucket[4]","source-id":1,"direction":"desc",'
           '"null-order":"nulls-last"}]}],'
           '"properties":{"write.parquet.compression-codec":"zstd","commit.retry.num-retries":"4"},'
           '"current-snapshot-id":3055729675574597004,'
           '"refs":{"main":{"snapshot-id":3055729675574597004,"type":"branch"},'
           '"audit":{"snapshot-id":3051729675574597004,"type":"tag","max-ref-age-ms":86400000},'
           '"dev":{"snapshot-id":3051729675574597004,"type":"branch","min-snapshots-to-keep":2,'
           '"max-snapshot-age-ms":3600000}},'
           '"snapshots":[{"sequence-number":1,"snapshot-id":3051729675574597004,'
           '"timestamp-ms":1515100955770,"summary":{"operation":"append","spark.app.id":"local-1",'
           '"added-data-files":"2","added-records":"10","total-records":"10"},'
           '"manifest-list":"s3://bucket/wh/db/events/metadata/snap-3051729675574597004-1-a.avro",'
           '"schema-id":0},{"sequence-number":2,"snapshot-id":3055729675574597004,'
           '"parent-snapshot-id":3051729675574597004,"timestamp-ms":1555100955770,'
           '"summary":{"operation":"overwrite","added-delete-files":"1"},'
           '"manifest-list":"s3://bucket/wh/db/events/metadata/snap-3055729675574597004-1-b.avro",'
           '"schema-id":1}],'
           '"statistics":[{"snapshot-id":3055729675574597004,"statistics-path":'
           '"s3://bucket/wh/db/events/metadata/stats.puffin","file-size-in-bytes":413,'
           '"file-footer-size-in-bytes":42,"blob-metadata":[{"type":"apache-datasketches-theta-v1",'
           '"snapshot-id":3055729675574597004,"sequence-number":2,"fields":[1],'
           '"properties":{"ndv":"10"}}]}],'
           '"partition-statistics":[{"snapshot-id":3055729675574597004,"statistics-path":'
           '"s3://bucket/wh/db/events/metadata/partition-stats.parquet","file-size-in-bytes":1024}],'
           '"snapshot-log":[{"timestamp-ms":1515100955770,"snapshot-id":3051729675574597004},'
           '{"timestamp-ms":1555100955770,"snapshot-id":3055729675574597004}],'
           '"metadata-log":[{"timestamp-ms":1515100000000,"metadata-file":'
           '"s3://bucket/wh/db/events/metadata/00000-a.metadata.json"}]}')

# A new v3 table: no snapshot yet, so Java writes "current-snapshot-id": null and an empty refs map.
V3_EMPTY_JAVA = ('{"format-version":3,"table-uuid":"0d1e6a0c-3f43-4e8a-9a39-3d1f6c5f2b10",'
                 '"location":"s3://bucket/wh/db/v3tbl","last-sequence-number":0,'
                 f'"last-updated-ms":1717200000000,"last-column-id":3,"current-schema-id":0,"schemas":[{SCHEMA_0}],'
                 '"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],'
                 '"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],'
                 '"properties":{"format-version":"3"},"current-snapshot-id":null,"next-row-id":0,'
                 '"refs":{},"snapshots":[],"statistics":[],"partition-statistics":[],'
                 '"snapshot-log":[],"metadata-log":[]}')

V3_JAVA = ('{"format-version":3,"table-uuid":"0d1e6a0c-3f43-4e8a-9a39-3d1f6c5f2b10",'
           '"location":"s3://bucket/wh/db/v3tbl","last-sequence-number":1,'
           f'"last-updated-ms":1717200005000,"last-column-id":3,"current-schema-id":0,"schemas":[{SCHEMA_0}],'
           '"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],'
           '"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],'
           '"properties":{},"current-snapshot-id":8000000000000000001,"next-row-id":125,'
           '"encryption-keys":[{"key-id":"5f819b","encrypted-key-metadata":"aWNlYmVyZwo=",'
           '"encrypted-by-id":"kms-1","properties":{"alg":"AES_GCM_V1"}}],'
           '"refs":{"main":{"snapshot-id":8000000000000000001,"type":"branch"}},'
           '"snapshots":[{"sequence-number":1,"snapshot-id":8000000000000000001,'
           '"timestamp-ms":1717200005000,"summary":{"operation":"append","added-records":"125"},'
           '"manifest-list":"s3://bucket/wh/db/v3tbl/metadata/snap-8000000000000000001-1-c.avro",'
           '"schema-id":0,"first-row-id":0,"added-rows":125,"key-id":"5f819b"}],'
           '"statistics":[],"partition-statistics":[],'
           '"snapshot-log":[{"timestamp-ms":1717200005000,"snapshot-id":8000000000000000001}],'
           '"metadata-log":[{"timestamp-ms":1717200000000,"metadata-file":'
           '"s3://bucket/wh/db/v3tbl/metadata/00000-d.metadata.json"}]}')

# What Java 0.13 wrote for v1: no refs, statistics or partition-statistics keys yet.
V1_JAVA_0_13 = ('{"format-version":1,"table-uuid":"77b7b0c4-3b5e-4a43-a4d4-2b4c1b0f5e01",'
                '"location":"hdfs://nn/wh/db/legacy","last-updated-ms":1650000001000,"last-column-id":2,'
                '"schema":{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","required":true,'
                '"type":"int"},{"id":2,"name":"day","required":false,"type":"date"}]},"current-schema-id":0,'
                '"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","required":true,'
                '"type":"int"},{"id":2,"name":"day","required":false,"type":"date"}]}],'
                '"partition-spec":[{"name":"day","transform":"identity","source-id":2,"field-id":1000}],'
                '"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[{"name":"day",'
                '"transform":"identity","source-id":2,"field-id":1000}]}],"last-partition-id":1000,'
                '"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{},'
                '"current-snapshot-id":42,"snapshots":[{"snapshot-id":42,"timestamp-ms":1650000001000,'
                '"summary":{"operation":"append"},"manifest-list":"hdfs://nn/wh/db/legacy/metadata/snap-42.avro",'
                '"schema-id":0}],"snapshot-log":[{"timestamp-ms":1650000001000,"snapshot-id":42}],'
                '"metadata-log":[]}')

# The least a v1 file may hold (the spec's v1 required fields, plus v1's embedded manifest list).
V1_MINIMAL = ('{"format-version":1,"location":"hdfs://nn/wh/old","last-updated-ms":1600000000000,'
              '"last-column-id":2,"schema":{"type":"struct","fields":['
              '{"id":1,"name":"id","required":true,"type":"int"},'
              '{"id":2,"name":"day","required":false,"type":"date"}]},'
              '"partition-spec":[{"name":"day","transform":"identity","source-id":2}],'
              '"current-snapshot-id":42,'
              '"snapshots":[{"snapshot-id":42,"timestamp-ms":1600000000000,"manifests":'
              '["hdfs://nn/wh/old/metadata/m0.avro","hdfs://nn/wh/old/metadata/m1.avro"]}]}')


def _compact(text: str) -> bytes:
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode()


def _obj(text: str) -> dict[str, Any]:
    return json.loads(text)  # type: ignore[no-any-return]


# --- exact round trips --------------------------------------------------------------------------

@pytest.mark.parametrize("text", [V1_JAVA, V2_JAVA, V3_EMPTY_JAVA, V3_JAVA, V1_JAVA_0_13],
                         ids=["v1", "v2", "v3-empty", "v3", "v1-java-0.13"])
def test_round_trip_is_exact(text: str) -> None:
    metadata = parse_table_metadata(text)
    assert metadata.to_json() == _obj(text)
    assert list(metadata.to_json()) == list(_obj(text))  # same key order too
    assert metadata.to_json_bytes() == _compact(text)


def test_round_trip_of_pretty_printed_gzip_bytes() -> None:
    pretty = json.dumps(_obj(V2_JAVA), indent=2).encode()
    assert parse_table_metadata(gzip.compress(pretty)).to_json_bytes() == _compact(V2_JAVA)


def test_built_metadata_is_written_with_javas_full_key_set() -> None:
    # without source keys (built in code), v1 gets every key Java writes, in Java's order
    old = parse_table_metadata(V1_MINIMAL).replace(source_keys=None)
    assert list(old.to_json()) == [
        "format-version", "table-uuid", "location", "last-updated-ms", "last-column-id", "schema",
        "current-schema-id", "schemas", "partition-spec", "default-spec-id", "partition-specs",
        "last-partition-id", "default-sort-order-id", "sort-orders", "properties", "current-snapshot-id",
        "refs", "snapshots", "statistics", "partition-statistics", "snapshot-log", "metadata-log"]
    out = old.to_json()
    assert out["partition-spec"] == [
        {"name": "day", "transform": "identity", "source-id": 2, "field-id": 1000}]
    assert out["refs"] == {"main": {"snapshot-id": 42, "type": "branch"}}
    assert out["table-uuid"] is None
    assert out["snapshots"][0]["manifests"] == ["hdfs://nn/wh/old/metadata/m0.avro",
                                                "hdfs://nn/wh/old/metadata/m1.avro"]


def test_a_changed_default_is_written_even_if_the_file_lacked_the_key() -> None:
    old = parse_table_metadata(V1_MINIMAL)
    tagged = old.replace(refs={**old.refs, "v1.0": SnapshotRef(42, "tag")})
    assert tagged.to_json()["refs"] == {"main": {"snapshot-id": 42, "type": "branch"},
                                        "v1.0": {"snapshot-id": 42, "type": "tag"}}
    assert "sort-orders" not in tagged.to_json()


def test_no_current_snapshot_is_minus_one_before_v3_and_null_from_v3() -> None:
    v3 = parse_table_metadata(V3_EMPTY_JAVA)
    assert v3.current_snapshot_id is None and v3.current_snapshot() is None
    v2 = v3.replace(format_version=2, source_keys=None)
    assert v2.to_json()["current-snapshot-id"] == -1
    assert "next-row-id" not in v2.to_json()
    assert parse_table_metadata(json.dumps(v2.to_json())).current_snapshot_id is None
    assert v3.replace(source_keys=None).to_json()["current-snapshot-id"] is None


def test_unknown_keys_are_kept_everywhere() -> None:
    obj = _obj(V2_JAVA)
    obj["x-vendor"] = {"a": 1}
    obj["snapshots"][0]["x-snap"] = True
    obj["partition-specs"][1]["fields"][1]["x-field"] = "f"
    obj["sort-orders"][1]["x-order"] = 1
    obj["refs"]["audit"]["x-ref"] = "r"
    out = TableMetadata.from_json(obj).to_json()
    assert out == obj
    assert list(out)[-1] == "x-vendor"


# --- v1 defaults (Appendix E) -------------------------------------------------------------------

def test_v1_defaults() -> None:
    md = parse_table_metadata(V1_MINIMAL)
    assert md.table_uuid is None
    assert md.last_sequence_number == 0
    assert [s.schema_id for s in md.schemas] == [0] and md.current_schema_id == 0
    assert md.default_spec_id == 0
    assert md.spec().fields == (PartitionField((2,), 1000, "day", IDENTITY),)
    assert md.last_partition_id == 1000
    assert md.sort_order().order_id == 0 and md.sort_order().is_unsorted
    assert md.refs == {"main": SnapshotRef(42, "branch")}
    snapshot = md.current_snapshot()
    assert snapshot is not None and snapshot.sequence_number == 0 and snapshot.manifest_list is None
    assert snapshot.manifests == ("hdfs://nn/wh/old/metadata/m0.avro", "hdfs://nn/wh/old/metadata/m1.avro")
    assert snapshot.operation is None


def test_minimal_v1_keeps_its_own_keys_and_rereads_equal() -> None:
    md = parse_table_metadata(V1_MINIMAL)
    out = md.to_json()
    assert list(out) == list(_obj(V1_MINIMAL))  # no refs, sort orders, logs... added
    assert out["schema"]["schema-id"] == 0  # nested objects are written as Java writes them
    assert TableMetadata.from_json(out) == md


def test_v1_unpartitioned_last_partition_id_and_minus_one_snapshot() -> None:
    obj = _obj(V1_MINIMAL)
    obj["partition-spec"] = []
    obj["current-snapshot-id"] = -1
    md = TableMetadata.from_json(obj)
    assert md.last_partition_id == 999
    assert md.current_snapshot_id is None and md.refs == {}
    assert md.spec().is_unpartitioned


# --- accessors ------------------------------------------------------------------------------------

def test_accessors() -> None:
    md = parse_table_metadata(V2_JAVA)
    assert md.schema().schema_id == 1 and md.schema().identifier_field_ids == (1,)
    assert md.schema_by_id(0) is not None and md.schema_by_id(7) is None
    assert [f.name for f in md.spec().fields] == ["ts_day", "id_bucket"]
    assert md.spec_by_id(0) is not None and md.spec_by_id(5) is None
    assert md.sort_order().fields[1].direction == "desc"
    assert md.sort_order().fields[1].transform == BucketTransform(4)
    current = md.current_snapshot()
    assert current is not None and current.operation == "overwrite" and current.sequence_number == 2
    audit = md.snapshot_for_ref("audit")
    assert audit is not None and audit.snapshot_id == 3051729675574597004
    assert md.ref("audit") == SnapshotRef(3051729675574597004, "tag", max_ref_age_ms=86400000)
    assert md.ref("dev") is not None and md.ref("dev").min_snapshots_to_keep == 2  # type: ignore[union-attr]
    assert md.snapshot_for_ref("nope") is None
    assert md.property("commit.retry.num-retries") == "4"
    assert md.property("missing", "d") == "d"
    assert md.statistics[0].blob_metadata[0].properties == {"ndv": "10"}
    assert md.partition_statistics[0].file_size_in_bytes == 1024


def test_v3_fields() -> None:
    md = parse_table_metadata(V3_JAVA)
    assert md.next_row_id == 125
    snap = md.current_snapshot()
    assert snap is not None and (snap.first_row_id, snap.added_rows, snap.key_id) == (0, 125, "5f819b")
    key = md.encryption_keys[0]
    assert key.key_metadata_bytes == b"iceberg\n" and key.encrypted_by_id == "kms-1"


def test_replace_rebuilds_lookups_and_models_are_frozen() -> None:
    md = parse_table_metadata(V2_JAVA)
    trimmed = md.replace(snapshots=md.snapshots[1:])
    assert trimmed.snapshot_by_id(3051729675574597004) is None
    assert md.snapshot_by_id(3051729675574597004) is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        md.format_version = 3  # type: ignore[misc]


def test_ancestry() -> None:
    md = parse_table_metadata(V2_JAVA)
    chain = [s.snapshot_id for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id)]
    assert chain == [3055729675574597004, 3051729675574597004]
    assert is_ancestor_of(3055729675574597004, 3051729675574597004, md.snapshots_by_id)
    assert not is_ancestor_of(3051729675574597004, 3055729675574597004, md.snapshots_by_id)
    # an expired parent ends the walk; a cycle does not loop forever
    orphan = {1: Snapshot(1, 0, parent_snapshot_id=99, manifest_list="m")}
    assert [s.snapshot_id for s in ancestors_of(1, orphan)] == [1]
    loop = {1: Snapshot(1, 0, 2, manifest_list="a"), 2: Snapshot(2, 0, 1, manifest_list="b")}
    assert [s.snapshot_id for s in ancestors_of(1, loop)] == [1, 2]
    assert list(ancestors_of(None, loop)) == []


# --- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "drop", "field"), [
    (V2_JAVA, "last-column-id", "last-column-id"),
    (V2_JAVA, "schemas", "schemas"),
    (V2_JAVA, "table-uuid", "table-uuid"),
    (V2_JAVA, "last-sequence-number", "last-sequence-number"),
    (V2_JAVA, "last-partition-id", "last-partition-id"),
    (V3_JAVA, "next-row-id", "next-row-id"),
    (V1_MINIMAL, "schema", "schema"),
    (V1_MINIMAL, "location", "location"),
])
def test_missing_required_field_is_named(text: str, drop: str, field: str) -> None:
    obj = _obj(text)
    del obj[drop]
    with pytest.raises(CorruptInputError) as info:
        TableMetadata.from_json(obj)
    assert f"'{field}'" in info.value.message
    assert info.value.exit_code == 4


def test_missing_snapshot_field_is_named() -> None:
    obj = _obj(V2_JAVA)
    del obj["snapshots"][1]["timestamp-ms"]
    with pytest.raises(CorruptInputError, match="timestamp-ms"):
        TableMetadata.from_json(obj)


@pytest.mark.parametrize("version", [0, 5, 99])
def test_unsupported_format_version(version: int) -> None:
    obj = _obj(V2_JAVA)
    obj["format-version"] = version
    with pytest.raises(UnsupportedError, match=f"format-version {version}"):
        TableMetadata.from_json(obj)


def test_invalid_json_and_wrong_types() -> None:
    with pytest.raises(CorruptInputError, match="not valid JSON"):
        parse_table_metadata('{"format-version": 2,')
    with pytest.raises(CorruptInputError, match="JSON object"):
        parse_table_metadata("[1, 2]")
    obj = _obj(V2_JAVA)
    obj["last-column-id"] = "5"
    with pytest.raises(CorruptInputError, match="last-column-id"):
        TableMetadata.from_json(obj)
    obj = _obj(V2_JAVA)
    obj["current-schema-id"] = 9
    with pytest.raises(CorruptInputError, match="current-schema-id 9"):
        TableMetadata.from_json(obj)


def test_v4_snapshots_use_root_manifest() -> None:
    obj = _obj(V3_JAVA)
    obj["format-version"] = 4
    snap = obj["snapshots"][0]
    obj["snapshots"].append({"sequence-number": 2, "snapshot-id": 8000000000000000002,
                             "parent-snapshot-id": 8000000000000000001, "timestamp-ms": 1717200006000,
                             "summary": {"operation": "replace"},
                             "root-manifest": "s3://bucket/wh/db/v3tbl/metadata/root-8000000000000000002-e.avro",
                             "schema-id": 0, "first-row-id": 125, "added-rows": 0})
    md = TableMetadata.from_json(obj)
    assert md.snapshots[0].manifest_list == snap["manifest-list"]
    assert md.snapshots[1].root_manifest is not None and md.snapshots[1].manifest_list is None
    assert md.to_json() == obj
    del obj["snapshots"][1]["root-manifest"]
    with pytest.raises(CorruptInputError, match="manifest-list"):
        TableMetadata.from_json(obj)


# --- partition specs and sort orders ------------------------------------------------------------

def test_partition_field_source_ids_json() -> None:
    single = PartitionField((3,), 1000, "ts_day", DAY)
    assert single.to_json() == {"name": "ts_day", "transform": "day", "source-id": 3, "field-id": 1000}
    multi = PartitionField((1, 2), 1001, "zz", UnknownTransform("zorder"))
    assert multi.to_json() == {"name": "zz", "transform": "zorder", "source-ids": [1, 2], "field-id": 1001}
    assert PartitionField.from_json(multi.to_json()) == multi
    assert PartitionField.from_json({"name": "x", "transform": "identity", "source-ids": [7],
                                     "field-id": 1}).source_id == 7
    with pytest.raises(CorruptInputError, match="field-id"):
        PartitionSpec.from_fields_json([{"name": "a", "transform": "identity", "source-id": 1, "field-id": 5},
                                        {"name": "b", "transform": "identity", "source-id": 2}])


def test_partition_type_with_dropped_source() -> None:
    spec = PartitionSpec(1, (PartitionField((3,), 1000, "ts_day", DAY),
                             PartitionField((1,), 1001, "id_bucket", BucketTransform(16)),
                             PartitionField((9,), 1002, "gone", IDENTITY)))
    current = Schema((NestedField(1, "id", LONG, True), NestedField(3, "ts", DATE)), schema_id=2)
    old = Schema((NestedField(9, "gone", STRING),), schema_id=0)
    struct = spec.partition_type(current)
    assert [(f.field_id, f.name, f.field_type, f.required) for f in struct.fields] == [
        (1000, "ts_day", DATE, False), (1001, "id_bucket", INT, False), (1002, "gone", UNKNOWN, False)]
    assert spec.partition_type(current, [old]).fields[2].field_type == STRING


def test_partition_path_escapes_like_java() -> None:
    schema = Schema((NestedField(1, "id", LONG, True), NestedField(2, "d", DATE),
                     NestedField(3, "s", STRING)))
    spec = PartitionSpec(0, (PartitionField((2,), 1000, "d", IDENTITY),
                             PartitionField((3,), 1001, "s val", IDENTITY),
                             PartitionField((1,), 1002, "b", BucketTransform(8))))
    assert spec.partition_path((19753, "a/b c~é*", None), schema) == \
        "d=2024-01-31/s+val=a%2Fb+c%7E%C3%A9*/b=null"
    assert spec.partition_path((19753, "x", 3)) == "d=19753/s+val=x/b=3"  # without a schema: raw values


def test_spec_json_and_unpartitioned() -> None:
    obj = {"spec-id": 3, "fields": [{"name": "v", "transform": "void", "source-id": 1, "field-id": 1000}]}
    spec = PartitionSpec.from_json(obj)
    assert spec.to_json() == obj and spec.is_unpartitioned and spec.last_assigned_field_id == 1000
    assert not PartitionSpec(0, (PartitionField((1,), 1000, "i", IDENTITY),)).is_unpartitioned


def test_sort_order_json() -> None:
    obj = {"order-id": 2, "fields": [{"transform": "identity", "source-ids": [1, 2], "direction": "desc",
                                      "null-order": "nulls-last"}]}
    order = SortOrder.from_json(obj)
    assert order.fields[0].source_ids == (1, 2) and order.to_json() == obj
    assert SortOrder.from_json({"order-id": 0, "fields": []}).is_unsorted
    bad = {"order-id": 1, "fields": [{"transform": "identity", "source-id": 1, "direction": "up",
                                      "null-order": "nulls-last"}]}
    with pytest.raises(CorruptInputError, match="direction"):
        SortOrder.from_json(bad)


def test_unified_partition_type_unions_specs_by_field_id() -> None:
    schema = Schema((NestedField(1, "id", LONG, True), NestedField(3, "ts", DATE)))
    old = PartitionSpec(0, (PartitionField((3,), 1000, "ts_day", DAY),
                            PartitionField((1,), 1001, "id_bucket", BucketTransform(16))))
    # v1-style drop: the field stays with a void transform and a new name
    new = PartitionSpec(1, (PartitionField((3,), 1000, "day_of_ts", DAY),
                            PartitionField((1,), 1001, "id_bucket_dropped", VOID),
                            PartitionField((1,), 1002, "id", IDENTITY)))
    struct = unified_partition_type([old, new], schema)
    assert [(f.field_id, f.name, f.field_type) for f in struct.fields] == [
        (1000, "day_of_ts", DATE), (1001, "id_bucket_dropped", INT), (1002, "id", LONG)]
    clash = PartitionSpec(2, (PartitionField((3,), 1000, "x", IDENTITY),))
    with pytest.raises(CorruptInputError, match="conflicting"):
        unified_partition_type([old, clash], schema)
    with pytest.raises(UnsupportedError):
        unified_partition_type([PartitionSpec(3, (PartitionField((1,), 1003, "z", UnknownTransform("z")),))],
                               schema)

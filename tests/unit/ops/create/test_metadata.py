"""new_table_metadata as Java's TableMetadata.newTableMetadata and fresh ids (schema files: test_schema_file.py)."""

from __future__ import annotations

import uuid

import pytest

from icectl.errors import UsageError
from icectl.ops.create.ddl import parse_partition_spec, parse_schema, parse_sort_order
from icectl.ops.create.metadata import (
    PartitionRequest,
    SortRequest,
    assign_fresh_ids,
    build_partition_spec,
    build_sort_order,
    java_hash_map_order,
    new_table_metadata,
    persisted_properties,
)
from icectl.spec.metadata import parse_table_metadata
from icectl.spec.partitioning import PartitionField, PartitionSpec
from icectl.spec.schema import (
    DOUBLE,
    INT,
    LONG,
    STRING,
    TIMESTAMPTZ,
    UNKNOWN,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
)
from icectl.spec.sorting import SortField, SortOrder
from icectl.spec.transforms import DAY, IDENTITY, BucketTransform

UUID_TEXT = "9c12d441-03fe-4693-9a96-a0705ddf69c1"


def _new(ddl: str = "id long not null, ts timestamptz, data string", partition: str = "", sort: str = "",
         version: int = 2, properties: dict[str, str] | None = None, **kwargs: object) -> dict[str, object]:
    schema = parse_schema(ddl)
    md = new_table_metadata(schema=schema, location="s3://b/wh/db/t",
                            partition_spec=parse_partition_spec(partition, schema),
                            sort_order=parse_sort_order(sort, schema), properties=properties or {},
                            format_version=version, table_uuid=UUID_TEXT, now_ms=1717000000000, **kwargs)
    return md.to_json()


# --------------------------------------------------------------------------- fresh ids


def test_assign_fresh_ids_orders_like_java_and_keeps_docs_and_defaults() -> None:
    # Odd ids on purpose: only the shape matters.
    schema = Schema((
        NestedField(50, "a", StructType((NestedField(7, "x", LONG, True, doc="d"),
                                         NestedField(8, "y", ListType(9, STRING))))),
        NestedField(3, "m", MapType(4, STRING, 5, StructType((NestedField(6, "v", INT, initial_default=1,
                                                                          write_default=2, has_initial_default=True,
                                                                          has_write_default=True),)))),
        NestedField(2, "z", INT, extra=(("custom", 1),)),
    ), schema_id=9)
    fresh, last = assign_fresh_ids(schema)
    assert last == 9 and fresh.schema_id == 0
    names = {fresh.column_name(i): i for i in fresh.field_ids()}
    assert names == {"a": 1, "m": 2, "z": 3, "a.x": 4, "a.y": 5, "a.y.element": 6, "m.key": 7, "m.value": 8,
                     "m.value.v": 9}
    assert fresh.find_field(4).doc == "d" and fresh.find_field(4).required
    v = fresh.find_field(9)
    assert (v.initial_default, v.write_default) == (1, 2)
    assert fresh.find_field(3).extra == ()  # unknown JSON keys are not carried over, as in Java


def test_identifier_fields_follow_their_names() -> None:
    schema = Schema((NestedField(10, "b", STRING, True), NestedField(20, "a", LONG, True)),
                    identifier_field_ids=(20, 10))
    fresh, _ = assign_fresh_ids(schema)
    assert set(fresh.identifier_field_ids) == {1, 2}
    assert fresh.to_json()["identifier-field-ids"] == [1, 2]


def test_java_hash_order() -> None:
    # HashMap buckets: ints hash to themselves, so 17 (bucket 1 of 16) comes before 3.
    assert java_hash_map_order([3, 17, 1]) == [17, 1, 3]
    assert java_hash_map_order(["b", "a"]) == ["a", "b"]
    assert persisted_properties({"owner": "root", "a.b": "c", "format-version": "2", "uuid": "x"}) == {
        "owner": "root", "a.b": "c", "write.parquet.compression-codec": "zstd"}
    assert list(persisted_properties({"owner": "root", "a.b": "c"})) == [
        "owner", "a.b", "write.parquet.compression-codec"]  # the order Spark's v1.metadata.json has


# --------------------------------------------------------------------------- new table metadata


def test_v2_metadata_as_java_writes_it() -> None:
    md = _new(partition="days(ts), bucket(16, id)", sort="id desc", properties={"owner": "me"})
    assert md == {
        "format-version": 2, "table-uuid": UUID_TEXT, "location": "s3://b/wh/db/t", "last-sequence-number": 0,
        "last-updated-ms": 1717000000000, "last-column-id": 3, "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "required": True, "type": "long"},
            {"id": 2, "name": "ts", "required": False, "type": "timestamptz"},
            {"id": 3, "name": "data", "required": False, "type": "string"}]}],
        "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": [
            {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1000},
            {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001}]}],
        "last-partition-id": 1001, "default-sort-order-id": 1, "sort-orders": [{"order-id": 1, "fields": [
            {"transform": "identity", "source-id": 1, "direction": "desc", "null-order": "nulls-last"}]}],
        "properties": {"owner": "me", "write.parquet.compression-codec": "zstd"},
        "current-snapshot-id": -1, "refs": {}, "snapshots": [], "statistics": [], "partition-statistics": [],
        "snapshot-log": [], "metadata-log": []}


def test_v1_and_v3_specifics() -> None:
    v1 = _new(version=1)
    assert v1["format-version"] == 1 and "last-sequence-number" not in v1
    assert v1["schema"] == v1["schemas"][0] and v1["partition-spec"] == []  # v1's deprecated keys
    assert v1["last-partition-id"] == 999 and v1["current-snapshot-id"] == -1
    v3 = _new(version=3)
    assert v3["next-row-id"] == 0 and v3["current-snapshot-id"] is None
    assert v3["sort-orders"] == [{"order-id": 0, "fields": []}] and v3["default-sort-order-id"] == 0


@pytest.mark.parametrize("version", [1, 2, 3])
def test_round_trips_through_the_metadata_parser(version: int) -> None:
    schema = parse_schema("id long not null, p struct<x: double, y: list<int>>, ts timestamp")
    md = new_table_metadata(schema=schema, location="/tmp/t", partition_spec=parse_partition_spec("hours(ts)", schema),
                            sort_order=parse_sort_order("p.x", schema), properties={}, format_version=version)
    again = parse_table_metadata(md.to_json_bytes())
    assert again.to_json_bytes() == md.to_json_bytes()
    assert uuid.UUID(md.table_uuid or "").version == 4
    assert md.last_updated_ms > 1_700_000_000_000


def test_spec_and_order_are_rebuilt_on_fresh_ids_by_name() -> None:
    schema = Schema((NestedField(7, "data", STRING), NestedField(3, "ts", TIMESTAMPTZ),
                     NestedField(5, "id", LONG, True)))
    spec = PartitionSpec(4, (PartitionField((3,), 1007, "day_of_ts", DAY),
                             PartitionField((5,), 1003, "id_b", BucketTransform(2))))
    order = SortOrder(5, (SortField((7,), IDENTITY, "desc", "nulls-first"),))
    md = new_table_metadata(schema=schema, location="/t", partition_spec=spec, sort_order=order, properties={},
                            format_version=2)
    assert [(f.name, f.source_id, f.field_id) for f in md.spec().fields] == [("day_of_ts", 2, 1000),
                                                                           ("id_b", 3, 1001)]
    assert md.spec().spec_id == 0 and md.last_partition_id == 1001
    assert md.sort_order().order_id == 1 and md.sort_order().fields[0].source_id == 1
    assert md.sort_order().fields[0].null_order == "nulls-first"  # kept as given


def test_keep_ids_when_asked() -> None:
    schema = Schema((NestedField(7, "data", STRING), NestedField(3, "ts", TIMESTAMPTZ)))
    md = new_table_metadata(schema=schema, location="/t", partition_spec=None, sort_order=None, properties={},
                            format_version=2, fresh_ids=False)
    assert [f.field_id for f in md.schema().fields] == [7, 3] and md.last_column_id == 7


def test_properties_reserved_dropped_zstd_default_user_value_wins() -> None:
    md = _new(properties={"format-version": "2", "uuid": "u", "current-snapshot-id": "1",
                          "write.parquet.compression-codec": "snappy", "k": "v"})
    assert md["properties"] == {"write.parquet.compression-codec": "snappy", "k": "v"}


ERRORS = [
    ({"version": 4}, "cannot create a table with format version 4", "icectl upgrade"),
    ({"version": 0}, "format version 0", None),
    ({"properties": {"format-version": "3"}}, "format-version='3' contradicts format version 2", None),
    ({"properties": {"commit.retry.num-retries": "-1"}}, "commit.retry.num-retries must not be negative", None),
    ({"properties": {"commit.retry.min-wait-ms": "x"}}, "commit.retry.min-wait-ms must be an integer", None),
    ({"properties": {"write.metadata.metrics.column.nope": "full"}}, "names column 'nope'", None),
    ({"ddl": "t timestamp_ns"}, "t: type timestamp_ns needs format v3 or later", None),
    ({"ddl": "v variant, g geometry"}, "v: type variant needs format v3", None),
]


@pytest.mark.parametrize(("kwargs", "message", "hint"), ERRORS, ids=[e[1][:30] for e in ERRORS])
def test_errors(kwargs: dict[str, object], message: str, hint: str | None) -> None:
    with pytest.raises(UsageError) as info:
        _new(**kwargs)  # type: ignore[arg-type]
    assert message in info.value.one_line()
    if hint:
        assert hint in (info.value.hint or "")


def test_metrics_property_for_a_real_column_is_fine() -> None:
    md = _new(properties={"write.metadata.metrics.column.data": "counts"})
    assert md["properties"]["write.metadata.metrics.column.data"] == "counts"


def test_defaults_only_from_v3() -> None:
    schema = parse_schema("c int default 5")
    with pytest.raises(UsageError, match="c: default values need format v3 or later"):
        new_table_metadata(schema=schema, location="/t", partition_spec=None, sort_order=None, properties={},
                           format_version=2)
    md = new_table_metadata(schema=schema, location="/t", partition_spec=None, sort_order=None, properties={},
                            format_version=3)
    field = md.to_json()["schemas"][0]["fields"][0]
    assert field["initial-default"] == 5 and field["write-default"] == 5


LIST_OF_STRUCT = ListType(2, StructType((NestedField(3, "x", LONG),)))


@pytest.mark.parametrize(("fields", "ids", "message"), [
    ((NestedField(1, "a", LONG),), (1,), "identifier field a must be required"),
    ((NestedField(1, "a", DOUBLE, True),), (1,), "must not be float or double"),
    ((NestedField(1, "a", ListType(2, LONG, True), True),), (2,), "must not be nested in a list<long>"),
    ((NestedField(1, "s", StructType((NestedField(2, "x", LONG, True),))),), (2,),
     "must not be nested in optional field s"),
    ((NestedField(1, "s", StructType(()), True),), (1,), "must be of a primitive type"),
    ((NestedField(1, "u", UNKNOWN, True),), (), "a column of type unknown must be optional"),
    ((NestedField(1, "a", LONG), NestedField(1, "b", LONG)), (), "field ids more than once: [1]"),
    ((NestedField(1, "a", LONG), NestedField(2, "a", LONG)), (), "more than one column named 'a'"),
    ((NestedField(1, "l", LIST_OF_STRUCT),), (), None),
])
def test_schema_checks(fields: tuple[NestedField, ...], ids: tuple[int, ...], message: str | None) -> None:
    schema = Schema(fields, identifier_field_ids=ids)
    call = dict(schema=schema, location="/t", partition_spec=None, sort_order=None, properties={},
                format_version=3)
    if message is None:
        assert new_table_metadata(**call).schema().fields[0].field_type == LIST_OF_STRUCT  # type: ignore[arg-type]
        return
    with pytest.raises(UsageError) as info:
        new_table_metadata(**call)  # type: ignore[arg-type]
    assert message in info.value.one_line()


def test_builders_check_what_java_checks() -> None:
    schema = parse_schema("id long, ts timestamp, l list<int>")
    with pytest.raises(UsageError, match="redundant partition field"):
        build_partition_spec(schema, [PartitionRequest(2, DAY), PartitionRequest(2, DAY, "other")])
    with pytest.raises(UsageError, match="inside a list<int>"):
        build_partition_spec(schema, [PartitionRequest(4, IDENTITY)])
    spec = build_partition_spec(schema, [PartitionRequest(1, BucketTransform(2)),
                                         PartitionRequest(1, BucketTransform(4), "id_b4")])
    assert [f.name for f in spec.fields] == ["id_bucket", "id_b4"]  # bucket is not deduplicated
    order = build_sort_order(schema, [SortRequest(1, IDENTITY, "desc")])
    assert order.fields[0].null_order == "nulls-last"
    with pytest.raises(UsageError, match="inside a list"):
        build_sort_order(schema, [SortRequest(4, IDENTITY)])

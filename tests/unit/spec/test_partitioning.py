"""icectl/spec/partitioning.py: partition spec JSON (Appendix C), field ids, the partition type, paths."""

from __future__ import annotations

import pytest

from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.partitioning import (
    UNPARTITIONED,
    PartitionField,
    PartitionSpec,
    escape_path_part,
    unified_partition_type,
)
from icectl.spec.schema import DATE, INT, LONG, STRING, TIMESTAMPTZ, UNKNOWN, NestedField, Schema
from icectl.spec.transforms import HOUR, IDENTITY, MONTH, VOID, YEAR, BucketTransform, TruncateTransform

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "region", STRING),
                 NestedField(3, "ts", TIMESTAMPTZ), NestedField(4, "d", DATE)), schema_id=1)


def _spec(*fields: PartitionField, spec_id: int = 0) -> PartitionSpec:
    return PartitionSpec(spec_id, fields)


def test_spec_json_round_trips_in_the_spec_shape() -> None:
    # Appendix C's example plus a v3 multi-argument field and an unknown key
    doc = {"spec-id": 2, "fields": [
        {"name": "ts_day", "transform": "day", "source-id": 4, "field-id": 1000},
        {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001},
        {"name": "multi", "transform": "bucket[4]", "source-ids": [1, 2], "field-id": 1002, "x-vendor": True}]}
    spec = PartitionSpec.from_json(doc)
    assert [f.source_ids for f in spec.fields] == [(4,), (1,), (1, 2)]
    assert spec.fields[1].transform == BucketTransform(16)
    assert spec.to_json() == doc
    assert spec.last_assigned_field_id == 1002 and spec.field_by_id(1001) is spec.fields[1]


def test_v1_fields_without_ids_get_1000_and_up_and_a_mix_is_refused() -> None:
    v1 = [{"name": "region", "transform": "identity", "source-id": 2},
          {"name": "ts_hour", "transform": "hour", "source-id": 3}]
    spec = PartitionSpec.from_fields_json(v1)
    assert [f.field_id for f in spec.fields] == [1000, 1001]
    mixed = [dict(v1[0], **{"field-id": 1005}), v1[1]]
    with pytest.raises(CorruptInputError, match="1 of 2 fields without a field-id"):
        PartitionSpec.from_fields_json(mixed, spec_id=3)


@pytest.mark.parametrize(("doc", "match"), [
    ({"fields": []}, "spec-id"),
    ({"spec-id": 0}, "missing required field 'fields'"),
    ({"spec-id": 0, "fields": [{"name": "a", "transform": "identity", "source-ids": [], "field-id": 1000}]},
     "non-empty list"),
    ({"spec-id": 0, "fields": [{"name": "a", "transform": "identity", "source-id": "1", "field-id": 1000}]},
     "must be an integer"),
])
def test_malformed_spec_is_corrupt_input(doc: dict, match: str) -> None:
    with pytest.raises(CorruptInputError, match=match):
        PartitionSpec.from_json(doc)


def test_partition_type_follows_the_transform_result_types() -> None:
    # Partition Transforms table: bucket -> int, truncate -> source, identity -> source, year/month/hour -> int;
    # the struct uses the partition field ids and names, every field optional.
    spec = _spec(PartitionField((1,), 1000, "id_bucket", BucketTransform(8)),
                 PartitionField((2,), 1001, "region_trunc", TruncateTransform(3)),
                 PartitionField((2,), 1002, "region", IDENTITY),
                 PartitionField((3,), 1003, "ts_year", YEAR),
                 PartitionField((3,), 1004, "ts_month", MONTH),
                 PartitionField((3,), 1005, "ts_hour", HOUR),
                 PartitionField((1,), 1006, "dropped", VOID))
    fields = spec.partition_type(SCHEMA).fields
    assert [(f.field_id, f.name, f.field_type, f.required) for f in fields] == [
        (1000, "id_bucket", INT, False), (1001, "region_trunc", STRING, False), (1002, "region", STRING, False),
        (1003, "ts_year", INT, False), (1004, "ts_month", INT, False), (1005, "ts_hour", INT, False),
        (1006, "dropped", LONG, False)]


def test_a_dropped_source_column_comes_from_a_fallback_schema_or_is_unknown() -> None:
    spec = _spec(PartitionField((9,), 1000, "gone", IDENTITY))
    assert spec.partition_type(SCHEMA).fields[0].field_type == UNKNOWN  # as Java's partitionType
    old = Schema((NestedField(9, "gone", DATE),), schema_id=0)
    assert spec.partition_type(SCHEMA, [old]).fields[0].field_type == DATE


def test_unpartitioned_means_no_fields_or_only_void_ones() -> None:
    assert UNPARTITIONED.is_unpartitioned and UNPARTITIONED.last_assigned_field_id == 999
    assert _spec(PartitionField((1,), 1000, "x", VOID)).is_unpartitioned
    assert not _spec(PartitionField((1,), 1000, "x", IDENTITY)).is_unpartitioned


def test_partition_path_is_java_url_encoded() -> None:
    # Java's URLEncoder: space -> '+', '/' and '=' escaped, '~' escaped, '*' kept
    assert escape_path_part("a b/c=d~e*f") == "a+b%2Fc%3Dd%7Ee*f"
    spec = _spec(PartitionField((2,), 1000, "region name", IDENTITY), PartitionField((4,), 1001, "d", IDENTITY))
    assert spec.partition_path(["us east", 19000], SCHEMA) == "region+name=us+east/d=2022-01-08"
    with pytest.raises(ValueError):
        spec.partition_path(["us"], SCHEMA)


def test_compatible_specs_ignore_field_ids_but_not_names_or_transforms() -> None:
    a = _spec(PartitionField((1,), 1000, "b", BucketTransform(4)))
    assert a.compatible_with(_spec(PartitionField((1,), 1007, "b", BucketTransform(4)), spec_id=5))
    assert not a.compatible_with(_spec(PartitionField((1,), 1000, "b", BucketTransform(8))))
    assert not a.compatible_with(_spec(PartitionField((1,), 1000, "c", BucketTransform(4))))


def test_unified_partition_type_orders_by_field_id_and_refuses_conflicts() -> None:
    old = _spec(PartitionField((2,), 1001, "region", IDENTITY), spec_id=0)
    new = _spec(PartitionField((1,), 1000, "id_b", BucketTransform(2)),
                PartitionField((2,), 1001, "region_renamed", IDENTITY), spec_id=1)
    unified = unified_partition_type([old, new], SCHEMA)
    assert [(f.field_id, f.name) for f in unified.fields] == [(1000, "id_b"), (1001, "region_renamed")]
    clash = _spec(PartitionField((3,), 1001, "ts_hour", HOUR), spec_id=2)
    with pytest.raises(CorruptInputError, match="conflicting partition fields with id 1001"):
        unified_partition_type([old, clash], SCHEMA)
    future = PartitionSpec.from_json({"spec-id": 3, "fields": [
        {"name": "z", "transform": "zorder", "source-id": 1, "field-id": 1002}]})
    with pytest.raises(UnsupportedError, match="unknown transforms"):
        unified_partition_type([old, future], SCHEMA)

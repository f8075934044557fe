"""TableMetadata.partition_type (icectl/spec/metadata.py): one spec's type (by id or spec) and every spec's together."""

from __future__ import annotations

import pytest

from icectl.errors import CorruptInputError
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.partitioning import PartitionField, PartitionSpec
from icectl.spec.schema import DATE, INT, LONG, NestedField, Schema, StructType
from icectl.spec.transforms import DAY, IDENTITY, VOID, BucketTransform

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(3, "ts", DATE)), schema_id=0)
OLD = PartitionSpec(0, (PartitionField((3,), 1000, "ts_day", DAY),
                        PartitionField((1,), 1001, "id_bucket", BucketTransform(16))))
# v1-style drop: the field stays with a void transform and a new name
NEW = PartitionSpec(1, (PartitionField((3,), 1000, "day_of_ts", DAY),
                        PartitionField((1,), 1001, "id_bucket_dropped", VOID),
                        PartitionField((1,), 1002, "id", IDENTITY)))


def _metadata() -> TableMetadata:
    md = parse_table_metadata(
        b'{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"/wh/t",'
        b'"last-sequence-number":0,"last-updated-ms":1,"last-column-id":3,"current-schema-id":0,'
        b'"schemas":[{"type":"struct","schema-id":0,"fields":[]}],"default-spec-id":0,'
        b'"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,'
        b'"sort-orders":[{"order-id":0,"fields":[]}]}')
    return md.replace(schemas=(SCHEMA,), partition_specs=(OLD, NEW), default_spec_id=1, last_partition_id=1002)


def test_partition_type_by_id_or_spec() -> None:
    md = _metadata()
    assert md.partition_type(0) == md.partition_type(OLD) == OLD.partition_type(SCHEMA)
    assert [(f.field_id, f.field_type) for f in md.partition_type(1).fields] == [
        (1000, DATE), (1001, LONG), (1002, LONG)]  # a void field keeps its source type


def test_a_missing_spec_is_corrupt_input() -> None:
    with pytest.raises(CorruptInputError, match="manifest uses partition spec 9, which the table metadata lacks"):
        _metadata().partition_type(9)
    with pytest.raises(CorruptInputError, match="v4 entry uses partition spec 9"):
        _metadata().partition_type(9, used_by="v4 entry")


def test_unified_partition_type_keeps_the_name_of_a_dropped_field() -> None:
    unified = _metadata().unified_partition_type()
    assert isinstance(unified, StructType)
    # Newest names, except the v1-dropped field: the name of its newest non-void version (which
    # v4 roots were written with), unlike Java's Partitioning.partitionType.
    assert [(f.field_id, f.name, f.field_type, f.required) for f in unified.fields] == [
        (1000, "day_of_ts", DATE, False), (1001, "id_bucket", INT, False), (1002, "id", LONG, False)]

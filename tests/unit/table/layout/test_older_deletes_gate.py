"""Which delete manifests a rewrite reads for delete files older than every live data file when
it cannot trust the manifests its DVs were read from (another commit rewrote them): Java's
``ManifestFileUtil.canContainAny`` on the manifest's partition summaries (icectl's ``may_hold``)."""

from __future__ import annotations

import math

from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary
from icectl.spec.partitioning import PartitionField, PartitionSpec
from icectl.spec.schema import IcebergType, NestedField, Schema, parse_primitive
from icectl.spec.transforms import parse_transform
from icectl.spec.values import to_bytes
from icectl.table.layout.manifest_list import may_hold

SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True),
                 NestedField(2, "name", parse_primitive("string"), False),
                 NestedField(3, "x", parse_primitive("double"), False)))
SPEC = PartitionSpec(0, (PartitionField((1,), 1000, "id_bucket", parse_transform("bucket[4]")),
                         PartitionField((2,), 1001, "name", parse_transform("identity")),
                         PartitionField((3,), 1002, "x", parse_transform("identity"))))
MD = new_table_metadata(schema=SCHEMA, location="/tmp/t", partition_spec=SPEC, sort_order=None, properties={},
                        format_version=3, fresh_ids=False)
INT, STRING, DOUBLE = parse_primitive("int"), parse_primitive("string"), parse_primitive("double")


def manifest(*summaries: PartitionFieldSummary | None, spec_id: int = 0) -> ManifestFile:
    parts = None if summaries == (None,) else tuple(s for s in summaries if s is not None)
    return ManifestFile("/tmp/t/metadata/m.avro", 1, spec_id, ManifestContent.DELETES, partitions=parts)


def summary(t: IcebergType, lo: object, hi: object, *, null: bool = False,
            nan: bool | None = False) -> PartitionFieldSummary:
    return PartitionFieldSummary(null, nan, to_bytes(t, lo), to_bytes(t, hi))


RANGES = manifest(summary(INT, 1, 2), summary(STRING, "b", "d"), summary(DOUBLE, 0.5, 1.5, null=True))


def test_a_partition_inside_every_field_range_may_be_held() -> None:
    assert may_hold(MD, RANGES, 0, (1, "b", 0.5))
    assert may_hold(MD, RANGES, 0, (2, "cz", None))  # the field's summary says it holds nulls


def test_a_partition_outside_one_range_or_of_another_spec_is_not() -> None:
    assert not may_hold(MD, RANGES, 0, (3, "c", 1.0))
    assert not may_hold(MD, RANGES, 0, (1, "a", 1.0))
    assert not may_hold(MD, RANGES, 0, (1, "c", 2.0))
    assert not may_hold(MD, RANGES, 1, (1, "c", 1.0))  # Java compares the spec id first
    assert not may_hold(MD, RANGES, 0, (1, "c"))  # not the summaries' arity


def test_nulls_nans_and_missing_summaries_follow_java() -> None:
    no_nulls = manifest(summary(INT, 1, 2), summary(STRING, "b", "d"), summary(DOUBLE, 0.5, 1.5, nan=None))
    assert not may_hold(MD, no_nulls, 0, (1, "c", None))
    assert may_hold(MD, no_nulls, 0, (1, "c", math.nan))  # contains_nan unknown: may
    nan_free = manifest(summary(INT, 1, 2), summary(STRING, "b", "d"), summary(DOUBLE, 0.5, 1.5))
    assert not may_hold(MD, nan_free, 0, (1, "c", math.nan))
    all_null = manifest(summary(INT, 1, 2), summary(STRING, "b", "d"),
                        PartitionFieldSummary(True, False, None, None))
    assert not may_hold(MD, all_null, 0, (1, "c", 1.0))  # no non-null value in the manifest
    assert may_hold(MD, manifest(None), 0, (9, "z", 9.0))  # a list without summaries: may hold anything

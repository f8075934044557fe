"""spec/requirements: each REST requirement passes on its base and fails naming itself (Java's messages)."""

from __future__ import annotations

import pytest

from icectl.errors import CommitConflictError
from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.metadata import TableMetadata
from icectl.spec.requirements import (
    AssertCreate,
    AssertCurrentSchemaId,
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedFieldId,
    AssertLastAssignedPartitionId,
    AssertRefSnapshotId,
    AssertTableUUID,
    RequirementFailedError,
    check_requirements,
)
from icectl.spec.schema import NestedField, Schema, parse_primitive
from icectl.spec.snapshots import Snapshot, SnapshotRef

SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True),))


def with_history() -> TableMetadata:
    """main at 3 (1 <- 2 <- 3); tag t1 at 1."""
    md = new_table_metadata(schema=SCHEMA, location="/wh/t", partition_spec=None, sort_order=None, properties={},
                            format_version=2, now_ms=1000)
    snaps = tuple(Snapshot(i, i * 10, i - 1 or None, i, f"/m{i}") for i in (1, 2, 3))
    return md.replace(snapshots=snaps, current_snapshot_id=3, last_sequence_number=3,
                      refs={"main": SnapshotRef(3), "t1": SnapshotRef(1, "tag")})


def test_requirements_pass_on_their_base_and_fail_naming_themselves() -> None:
    md = with_history()
    ok = (AssertTableUUID(md.table_uuid or ""), AssertRefSnapshotId("main", 3), AssertRefSnapshotId("new", None),
          AssertCurrentSchemaId(md.current_schema_id), AssertLastAssignedFieldId(md.last_column_id),
          AssertDefaultSpecId(md.default_spec_id), AssertLastAssignedPartitionId(md.last_partition_id),
          AssertDefaultSortOrderId(md.default_sort_order_id))
    check_requirements(md, ok)
    with pytest.raises(CommitConflictError, match="assert-create failed: table already exists"):
        check_requirements(md, (AssertCreate(),))
    check_requirements(None, (AssertCreate(),))
    failing = {
        AssertTableUUID("other"): "UUID does not match",
        AssertRefSnapshotId("main", 2): "branch main has changed: expected id 2 != 3",
        AssertRefSnapshotId("t1", None): "tag t1 was created concurrently",
        AssertRefSnapshotId("gone", 5): "branch or tag gone is missing, expected 5",
        AssertCurrentSchemaId(9): "current schema changed",
        AssertLastAssignedFieldId(9): "last assigned field id changed",
        AssertDefaultSpecId(9): "default partition spec changed",
        AssertLastAssignedPartitionId(9): "last assigned partition id changed",
        AssertDefaultSortOrderId(9): "default sort order changed",
    }
    for requirement, why in failing.items():
        with pytest.raises(RequirementFailedError) as e:
            check_requirements(md, (*ok, requirement))
        assert e.value.requirement == requirement
        assert e.value.message.startswith(f"requirement {requirement.type} failed: ") and why in e.value.message


def test_to_json_matches_the_rest_spec() -> None:
    assert AssertCreate().to_json() == {"type": "assert-create"}
    assert AssertTableUUID("u").to_json() == {"type": "assert-table-uuid", "uuid": "u"}
    assert AssertRefSnapshotId("main", None).to_json() == {"type": "assert-ref-snapshot-id", "ref": "main",
                                                           "snapshot-id": None}
    assert AssertLastAssignedFieldId(3).to_json() == {"type": "assert-last-assigned-field-id",
                                                      "last-assigned-field-id": 3}
    assert AssertCurrentSchemaId(0).to_json() == {"type": "assert-current-schema-id", "current-schema-id": 0}
    assert AssertLastAssignedPartitionId(999).to_json() == {"type": "assert-last-assigned-partition-id",
                                                            "last-assigned-partition-id": 999}
    assert AssertDefaultSpecId(0).to_json() == {"type": "assert-default-spec-id", "default-spec-id": 0}
    assert AssertDefaultSortOrderId(0).to_json() == {"type": "assert-default-sort-order-id",
                                                     "default-sort-order-id": 0}

"""spec/updates: each update applied to a small metadata gives what Java's TableMetadata.Builder gives;
requirements fail with the REST requirement named; to_json has the REST spec's field names."""

from __future__ import annotations

import dataclasses

import pytest

from icectl.errors import CorruptInputError, RefusedError, UsageError
from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.metadata import TableMetadata
from icectl.spec.requirements import AssertCreate, AssertRefSnapshotId, RequirementFailedError
from icectl.spec.schema import NestedField, Schema, parse_primitive
from icectl.spec.snapshots import PartitionStatisticsFile, Snapshot, SnapshotLogEntry, SnapshotRef, StatisticsFile
from icectl.spec.updates import (
    AddSnapshot,
    AssignUUID,
    RemovePartitionSpecs,
    RemovePartitionStatistics,
    RemoveProperties,
    RemoveSchemas,
    RemoveSnapshotRef,
    RemoveSnapshots,
    RemoveStatistics,
    SetLocation,
    SetPartitionStatistics,
    SetProperties,
    SetSnapshotRef,
    SetStatistics,
    TableChange,
    UpgradeFormatVersion,
    add_snapshot,
    apply_change,
    apply_updates,
    format_upgrade_updates,
    prepare_commit,
    set_properties,
    snapshot_change,
)

SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True),))


def table(version: int = 2, **props: str) -> TableMetadata:
    return new_table_metadata(schema=SCHEMA, location="/wh/t", partition_spec=None, sort_order=None,
                              properties=props, format_version=version, now_ms=1000)


def snap(md: TableMetadata, sid: int, *, parent: int | None, ts: int, rows: int = 0) -> Snapshot:
    v3 = md.format_version >= 3
    return Snapshot(sid, ts, parent, md.last_sequence_number + 1 if md.format_version >= 2 else 0,
                    f"/wh/t/metadata/snap-{sid}.avro", summary={"operation": "append"}, schema_id=0,
                    first_row_id=md.next_row_id if v3 else None, added_rows=rows if v3 else None)


def with_history(version: int = 2) -> TableMetadata:
    """main: 1 <- 2 <- 3 at t=10, 20, 30; tag t1 at 1; branch b at 2."""
    md = table(version)
    for sid, parent in ((1, None), (2, 1), (3, 2)):
        md = apply_updates(md, (AddSnapshot(snap(md, sid, parent=parent, ts=sid * 10, rows=5)),
                                SetSnapshotRef("main", SnapshotRef(sid))))
    return apply_updates(md, (SetSnapshotRef("t1", SnapshotRef(1, "tag")), SetSnapshotRef("b", SnapshotRef(2))))


# --------------------------------------------------------------------------- snapshots and refs


def test_add_snapshot_on_v3_moves_next_row_id_and_sequence_number() -> None:
    md = table(3)
    s = snap(md, 7, parent=None, ts=5000, rows=12)
    new = apply_updates(md, (AddSnapshot(s),))
    assert new.next_row_id == 12 and new.last_sequence_number == 1
    assert new.last_updated_ms == 5000  # Java's addSnapshot sets lastUpdatedMillis
    assert new.snapshots == (s,) and new.refs == {} and new.current_snapshot_id is None and new.snapshot_log == ()


def test_add_snapshot_checks_as_java() -> None:
    md = with_history(3)
    with pytest.raises(RefusedError, match="already exists"):
        apply_updates(md, (AddSnapshot(md.snapshots[0]),))
    stale = dataclasses.replace(snap(md, 9, parent=3, ts=99), sequence_number=md.last_sequence_number)
    with pytest.raises(RefusedError, match="not above last-sequence-number"):
        apply_updates(md, (AddSnapshot(stale),))
    behind = Snapshot(9, 99, 3, md.last_sequence_number + 1, "/m", first_row_id=md.next_row_id - 1, added_rows=1)
    with pytest.raises(RefusedError, match="behind the table's next-row-id"):
        apply_updates(md, (AddSnapshot(behind),))
    with pytest.raises(RefusedError, match="needs first-row-id"):
        apply_updates(md, (AddSnapshot(Snapshot(9, 99, 3, md.last_sequence_number + 1, "/m")),))


def test_add_snapshot_refuses_numbers_beyond_a_java_long() -> None:
    md = table(3)
    top = 2**63 - 1
    past_seq = dataclasses.replace(snap(md, 9, parent=None, ts=99), sequence_number=top + 1)
    with pytest.raises(CorruptInputError, match="beyond the signed 64-bit range"):
        apply_updates(md, (AddSnapshot(past_seq),))
    past_rows = dataclasses.replace(snap(md, 9, parent=None, ts=99, rows=2), first_row_id=top - 1)
    with pytest.raises(CorruptInputError, match="next-row-id 9223372036854775808"):
        apply_updates(md, (AddSnapshot(past_rows),))
    at_the_top = dataclasses.replace(snap(md, 9, parent=None, ts=99, rows=1), first_row_id=top - 1)
    assert apply_updates(md, (AddSnapshot(at_the_top),)).next_row_id == 1  # Java: next-row-id += added-rows


def test_set_snapshot_ref_on_main_sets_current_and_appends_the_snapshot_log() -> None:
    md = table()
    s = snap(md, 1, parent=None, ts=4242)
    new = apply_updates(md, (AddSnapshot(s), SetSnapshotRef("main", SnapshotRef(1))))
    assert new.current_snapshot_id == 1 and new.refs["main"] == SnapshotRef(1)
    assert new.snapshot_log == (SnapshotLogEntry(4242, 1),)
    # Another branch: no current snapshot, no log entry.
    other = apply_updates(md, (AddSnapshot(s), SetSnapshotRef("dev", SnapshotRef(1))))
    assert other.current_snapshot_id is None and other.snapshot_log == () and other.refs == {"dev": SnapshotRef(1)}


def test_set_snapshot_ref_main_to_an_existing_snapshot_logs_now() -> None:
    md = with_history()
    rolled = apply_updates(md, (SetSnapshotRef("main", SnapshotRef(1)),), now_ms=777)
    assert rolled.current_snapshot_id == 1 and rolled.snapshot_log[-1] == SnapshotLogEntry(777, 1)
    assert rolled.last_updated_ms == 777


def test_set_snapshot_ref_unchanged_is_a_no_op_and_unknown_snapshot_is_refused() -> None:
    md = with_history()
    assert apply_updates(md, (SetSnapshotRef("main", md.refs["main"]),)) is md
    with pytest.raises(RefusedError, match="unknown snapshot 99"):
        apply_updates(md, (SetSnapshotRef("x", SnapshotRef(99)),))


def test_intermediate_main_snapshot_of_one_change_leaves_no_log_entry() -> None:
    md = table()
    s1 = snap(md, 1, parent=None, ts=10)
    s2 = Snapshot(2, 20, 1, 2, "/m2", schema_id=0)
    new = apply_updates(md, (AddSnapshot(s1), SetSnapshotRef("main", SnapshotRef(1)),
                             AddSnapshot(s2), SetSnapshotRef("main", SnapshotRef(2))))
    assert new.snapshot_log == (SnapshotLogEntry(20, 2),) and new.current_snapshot_id == 2


def test_remove_snapshots_drops_their_statistics_dangling_refs_and_history_before_a_gap() -> None:
    md = with_history()
    md = apply_updates(md, (SetStatistics(StatisticsFile(2, "/s2.puffin", 1, 1)),
                            SetStatistics(StatisticsFile(3, "/s3.puffin", 1, 1)),
                            SetPartitionStatistics(PartitionStatisticsFile(2, "/p2.parquet", 1))))
    new = apply_updates(md, (RemoveSnapshots((2,)),))
    assert [s.snapshot_id for s in new.snapshots] == [1, 3]
    assert "b" not in new.refs and set(new.refs) == {"main", "t1"}  # Java removes the refs left dangling
    assert [s.snapshot_id for s in new.statistics] == [3] and new.partition_statistics == ()
    assert [e.snapshot_id for e in new.snapshot_log] == [3]  # the gap at 2 drops 1's entry too
    assert new.current_snapshot_id == 3


def test_remove_snapshots_of_main_head_removes_main() -> None:
    new = apply_updates(with_history(), (RemoveSnapshots((3,)),))
    assert "main" not in new.refs and new.current_snapshot_id is None and new.snapshot_log == ()


def test_remove_snapshots_unknown_ids_change_nothing() -> None:
    md = with_history()
    assert apply_updates(md, (RemoveSnapshots((404,)),)) is md


def test_remove_snapshot_ref() -> None:
    md = with_history()
    new = apply_updates(md, (RemoveSnapshotRef("t1"),))
    assert set(new.refs) == {"main", "b"} and new.snapshots == md.snapshots
    assert apply_updates(md, (RemoveSnapshotRef("nope"),)) is md
    gone = apply_updates(md, (RemoveSnapshotRef("main"),))
    assert gone.current_snapshot_id is None and gone.snapshot_log == ()


def test_add_snapshot_helper_is_add_snapshot_plus_set_snapshot_ref() -> None:
    md = with_history(3)
    s = snap(md, 4, parent=2, ts=40, rows=3)
    new = add_snapshot(md, s, branch="b")
    assert new.refs["b"] == SnapshotRef(4) and new.current_snapshot_id == 3 and new.next_row_id == md.next_row_id + 3
    with pytest.raises(RefusedError, match="is a tag"):
        add_snapshot(md, snap(md, 5, parent=1, ts=50), branch="t1")
    with pytest.raises(RefusedError, match="build it on the current head"):
        add_snapshot(md, snap(md, 5, parent=1, ts=50), branch="main")
    change = snapshot_change(md, s, branch="b")
    assert change.requirements == (AssertRefSnapshotId("b", 2),)
    assert apply_change(md, change) == new


def test_retention_settings_of_a_branch_survive_a_new_snapshot() -> None:
    md = apply_updates(with_history(), (SetSnapshotRef("b", SnapshotRef(2, min_snapshots_to_keep=4)),))
    new = add_snapshot(md, snap(md, 4, parent=2, ts=40), branch="b")
    assert new.refs["b"] == SnapshotRef(4, min_snapshots_to_keep=4)


# --------------------------------------------------------------------------- properties, versions, others


def test_set_and_remove_properties() -> None:
    md = table(k="1", gone="x")
    new = apply_updates(md, (SetProperties({"k": "2", "n": "3"}), RemoveProperties(("gone", "absent"))))
    kept = {k: v for k, v in md.properties.items() if k != "gone"}
    assert new.properties == {**kept, "k": "2", "n": "3"} and "gone" in md.properties
    assert set_properties(md, {"k": "1"}) is md
    with pytest.raises(UsageError, match="both set and remove"):
        set_properties(md, {"k": "2"}, ["k"])
    with pytest.raises(UsageError, match="strings"):
        apply_updates(md, (SetProperties({"k": 2}),))  # type: ignore[dict-item]


def test_upgrade_format_version_and_assign_uuid() -> None:
    md = table(2).replace(table_uuid=None)
    updates = format_upgrade_updates(md, 3)
    assert [u.action for u in updates] == ["assign-uuid", "upgrade-format-version"]
    new = apply_updates(md, updates)
    assert new.format_version == 3 and new.table_uuid and new.next_row_id == 0
    assert [u.action for u in format_upgrade_updates(new, 3)] == ["upgrade-format-version"]
    assert apply_updates(new, (UpgradeFormatVersion(3),)) is new
    with pytest.raises(UsageError, match="downgrade"):
        apply_updates(new, (UpgradeFormatVersion(2),))
    with pytest.raises(UsageError, match="unsupported format version"):
        apply_updates(new, (UpgradeFormatVersion(9),))
    assert apply_updates(new, (AssignUUID("u-1"),)).table_uuid == "u-1"


def test_statistics_replace_per_snapshot_and_remove() -> None:
    md = with_history()
    a, b = StatisticsFile(2, "/a.puffin", 1, 1), StatisticsFile(2, "/b.puffin", 1, 1)
    new = apply_updates(md, (SetStatistics(a), SetStatistics(b)))
    assert new.statistics == (b,)
    assert apply_updates(new, (RemoveStatistics(2),)).statistics == ()
    p = PartitionStatisticsFile(3, "/p.parquet", 9)
    assert apply_updates(md, (SetPartitionStatistics(p), RemovePartitionStatistics(3))) is md


def test_remove_specs_and_schemas_never_the_current_ones() -> None:
    md = table()
    with pytest.raises(RefusedError, match="default partition spec"):
        apply_updates(md, (RemovePartitionSpecs((md.default_spec_id,)),))
    with pytest.raises(RefusedError, match="current schema"):
        apply_updates(md, (RemoveSchemas((md.current_schema_id,)),))
    assert apply_updates(md, (RemovePartitionSpecs((42,)), RemoveSchemas((42,)))) is md


def test_set_location() -> None:
    assert apply_updates(table(), (SetLocation("s3://b/t"),)).location == "s3://b/t"


def test_prepare_commit_appends_the_metadata_log() -> None:
    md = table()
    new = prepare_commit(md, set_properties(md, {"x": "1"}), "/wh/t/metadata/v1.metadata.json", 5000)
    assert [e.metadata_file for e in new.metadata_log] == ["/wh/t/metadata/v1.metadata.json"]
    assert new.last_updated_ms == 5000


# --------------------------------------------------------------------------- REST JSON shapes


def test_to_json_matches_the_rest_spec() -> None:
    s = Snapshot(1, 10, None, 1, "/m", summary={"operation": "append"})
    ref = SnapshotRef(1, "branch", max_ref_age_ms=5)
    stats = StatisticsFile(1, "/s.puffin", 3, 2)
    pstats = PartitionStatisticsFile(1, "/p.parquet", 4)
    assert AddSnapshot(s).to_json() == {"action": "add-snapshot", "snapshot": s.to_json()}
    assert SetSnapshotRef("main", ref).to_json() == {"action": "set-snapshot-ref", "ref-name": "main",
                                                     "snapshot-id": 1, "type": "branch", "max-ref-age-ms": 5}
    assert RemoveSnapshots((1, 2)).to_json() == {"action": "remove-snapshots", "snapshot-ids": [1, 2]}
    assert RemoveSnapshotRef("b").to_json() == {"action": "remove-snapshot-ref", "ref-name": "b"}
    assert SetProperties({"a": "1"}).to_json() == {"action": "set-properties", "updates": {"a": "1"}}
    assert RemoveProperties(("a",)).to_json() == {"action": "remove-properties", "removals": ["a"]}
    assert UpgradeFormatVersion(3).to_json() == {"action": "upgrade-format-version", "format-version": 3}
    assert AssignUUID("u").to_json() == {"action": "assign-uuid", "uuid": "u"}
    assert SetLocation("/x").to_json() == {"action": "set-location", "location": "/x"}
    assert SetStatistics(stats).to_json() == {"action": "set-statistics", "snapshot-id": 1,
                                              "statistics": stats.to_json()}
    assert RemoveStatistics(1).to_json() == {"action": "remove-statistics", "snapshot-id": 1}
    assert SetPartitionStatistics(pstats).to_json() == {"action": "set-partition-statistics",
                                                        "partition-statistics": pstats.to_json()}
    assert RemovePartitionStatistics(1).to_json() == {"action": "remove-partition-statistics", "snapshot-id": 1}
    assert RemovePartitionSpecs((1,)).to_json() == {"action": "remove-partition-specs", "spec-ids": [1]}
    assert RemoveSchemas((1,)).to_json() == {"action": "remove-schemas", "schema-ids": [1]}
    change = TableChange((AssertCreate(),), (AssignUUID("u"),))  # REST CommitTableRequest
    assert change.to_json() == {"requirements": [{"type": "assert-create"}],
                                "updates": [{"action": "assign-uuid", "uuid": "u"}]}


def test_apply_change_checks_the_requirements_before_applying() -> None:
    md = with_history()
    change = TableChange((AssertRefSnapshotId("main", 2),), (RemoveSnapshotRef("b"),))
    with pytest.raises(RequirementFailedError):
        apply_change(md, change)

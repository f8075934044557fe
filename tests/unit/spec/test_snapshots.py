"""icectl/spec/snapshots.py: snapshots, refs, snapshot and metadata logs in the spec's JSON, and ancestry."""

from __future__ import annotations

import pytest

from icectl.errors import CorruptInputError
from icectl.spec.snapshots import (
    MetadataLogEntry,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    ancestors_of,
    is_ancestor_of,
)

# The spec's snapshot fields (Snapshots table), v2 and v3 flavours, in the order Java writes them.
V2_SNAPSHOT = {"sequence-number": 4, "snapshot-id": 3051729675574597004, "parent-snapshot-id": 3055729675574597004,
               "timestamp-ms": 1515100955770, "summary": {"operation": "append", "added-data-files": "1"},
               "manifest-list": "s3://b/wh/.../snap-3051729675574597004.avro", "schema-id": 0}
V3_SNAPSHOT = {**V2_SNAPSHOT, "first-row-id": 100, "added-rows": 25}


@pytest.mark.parametrize("doc", [V2_SNAPSHOT, V3_SNAPSHOT], ids=["v2", "v3"])
def test_snapshot_json_round_trips_key_for_key(doc: dict) -> None:
    snap = Snapshot.from_json(doc)
    assert snap.to_json() == doc and list(snap.to_json()) == list(doc)
    assert snap.operation == "append" and snap.sequence_number == 4 and snap.parent_snapshot_id == 3055729675574597004


def test_v1_snapshot_without_sequence_number_reads_as_zero_and_stays_without() -> None:
    # Appendix E: a v1 snapshot has no sequence number; it is read as 0 and Java writes it only when > 0.
    v1 = {"snapshot-id": 1, "timestamp-ms": 10, "manifests": ["/m1.avro", "/m2.avro"]}
    snap = Snapshot.from_json(v1)
    assert snap.sequence_number == 0 and snap.manifests == ("/m1.avro", "/m2.avro")
    assert snap.to_json() == v1
    explicit_zero = {"sequence-number": 0, **v1}
    assert Snapshot.from_json(explicit_zero).to_json() == explicit_zero


def test_summary_is_written_operation_first() -> None:
    snap = Snapshot(1, 10, manifest_list="/l.avro", summary={"added-records": "3", "operation": "overwrite"})
    assert list(snap.to_json()["summary"]) == ["operation", "added-records"]


def test_v4_snapshot_names_its_root_manifest_instead_of_a_list() -> None:
    doc = {"sequence-number": 1, "snapshot-id": 7, "timestamp-ms": 10, "summary": {"operation": "append"},
           "root-manifest": "/wh/t/metadata/root-7.avro"}
    snap = Snapshot.from_json(doc)
    assert snap.root_manifest == doc["root-manifest"] and snap.manifest_list is None
    assert snap.to_json() == doc  # no empty v1 'manifests' list invented


@pytest.mark.parametrize(("doc", "match"), [
    ({"snapshot-id": 1, "timestamp-ms": 10}, "missing required field 'manifest-list'"),
    ({"snapshot-id": 1, "manifest-list": "/l"}, "timestamp-ms"),
    ({"snapshot-id": 1, "timestamp-ms": 10, "manifests": "/m.avro"}, "'manifests' must be a list of strings"),
    ({"snapshot-id": "1", "timestamp-ms": 10, "manifest-list": "/l"}, "snapshot-id"),
])
def test_malformed_snapshot_is_corrupt_input(doc: dict, match: str) -> None:
    with pytest.raises(CorruptInputError, match=match):
        Snapshot.from_json(doc)


def test_refs_round_trip_and_read_the_type_case_insensitively() -> None:
    branch = {"snapshot-id": 5, "type": "branch", "min-snapshots-to-keep": 2, "max-snapshot-age-ms": 1000,
              "max-ref-age-ms": 5000}
    assert SnapshotRef.from_json(branch, "main").to_json() == branch
    tag = SnapshotRef.from_json({"snapshot-id": 5, "type": "TAG"}, "v1")
    assert tag.type == "tag" and not tag.is_branch
    assert tag.to_json() == {"snapshot-id": 5, "type": "tag"}
    with pytest.raises(CorruptInputError, match="ref 'x' field 'type' must be 'branch' or 'tag'"):
        SnapshotRef.from_json({"snapshot-id": 5, "type": "label"}, "x")


def test_log_entries_round_trip() -> None:
    snap_log = {"timestamp-ms": 1515100955770, "snapshot-id": 1}
    meta_log = {"timestamp-ms": 1515100955770, "metadata-file": "s3://b/t/metadata/v1.metadata.json"}
    assert SnapshotLogEntry.from_json(snap_log).to_json() == snap_log
    assert MetadataLogEntry.from_json(meta_log).to_json() == meta_log
    with pytest.raises(CorruptInputError):
        MetadataLogEntry.from_json({"timestamp-ms": 1})


def _chain(*links: tuple[int, int | None]) -> dict[int, Snapshot]:
    return {sid: Snapshot(sid, sid, parent_snapshot_id=parent, manifest_list=f"/{sid}") for sid, parent in links}


def test_ancestors_start_at_the_snapshot_and_stop_at_an_expired_parent() -> None:
    # 4 -> 3 -> 2 -> (1 expired); 9 is on another branch off 2
    snaps = _chain((4, 3), (3, 2), (2, 1), (9, 2))
    assert [s.snapshot_id for s in ancestors_of(4, snaps)] == [4, 3, 2]
    assert [s.snapshot_id for s in ancestors_of(9, snaps)] == [9, 2]
    assert list(ancestors_of(None, snaps)) == [] and list(ancestors_of(1, snaps)) == []
    assert is_ancestor_of(4, 4, snaps) and is_ancestor_of(4, 2, snaps)
    assert not is_ancestor_of(4, 9, snaps) and not is_ancestor_of(2, 4, snaps)
    assert not is_ancestor_of(4, 1, snaps)  # expired: no longer provable


def test_ancestors_of_a_corrupt_cycle_terminate() -> None:
    snaps = _chain((1, 3), (2, 1), (3, 2))
    assert [s.snapshot_id for s in ancestors_of(3, snaps)] == [3, 2, 1]
    assert not is_ancestor_of(3, 7, snaps)

"""The v4 root layout (spec layout): how one commit's change turns the head's root into the new root."""

from __future__ import annotations

import dataclasses

import pytest
from pyroaring import BitMap64

from icectl.codec.mumbling import decode_mumbling, encode_mumbling
from icectl.errors import CommitConflictError
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import LONG, NestedField, Schema
from icectl.spec.tracked_file import ContentType, EntryStatus, ManifestInfo, TrackedFile, Tracking, V4Manifest
from icectl.storage import FileIO
from icectl.table.layout.root import NewLeaf, RootLayout, leaf_entry

ADDED, EXISTING, DELETED, MODIFIED = EntryStatus.ADDED, EntryStatus.EXISTING, EntryStatus.DELETED, EntryStatus.MODIFIED
SID, SEQ = 99, 7


def _md(next_row_id: int = 100) -> TableMetadata:
    schema = Schema((NestedField(1, "id", LONG, False),), schema_id=0)
    return TableMetadata(format_version=4, table_uuid="u", location="/t", last_sequence_number=SEQ - 1,
                         last_updated_ms=0, last_column_id=1, schemas=(schema,), current_schema_id=0,
                         partition_specs=(PartitionSpec(0, ()),), default_spec_id=0, last_partition_id=999,
                         next_row_id=next_row_id)


def _file(name: str, rows: int = 5, status: EntryStatus = EXISTING) -> TrackedFile:
    return TrackedFile(Tracking(status, 1, 1, 1, first_row_id=0), ContentType.DATA, f"/d/{name}", "parquet", rows,
                       100, 0)


def _info(rows: int = 10, dv: bytes | None = None) -> ManifestInfo:
    return ManifestInfo(0, 2, 0, 0, 0, rows, 0, 1, 4, dv)


def _leaf(name: str, rows: int = 10, dv: bytes | None = None, status: EntryStatus = EXISTING) -> TrackedFile:
    entry = leaf_entry(f"/m/{name}", 1000, 0, _info(rows, dv), 2)
    return entry.with_tracking(status=status, snapshot_id=1, sequence_number=1, file_sequence_number=1,
                               first_row_id=0, modified_snapshot_id=5 if dv else None,
                               deleted_positions=dv if status == MODIFIED else None)


def _rows(entries: list[TrackedFile]) -> list[tuple[ContentType, str, EntryStatus, int | None]]:
    return [(e.content_type, e.location, e.status, e.tracking.snapshot_id) for e in entries]


def test_carries_live_entries_drops_deleted_ones_and_marks_removed_files() -> None:
    root = V4Manifest([_file("a"), _file("b"), _file("gone", status=DELETED), _leaf("l1")], {})
    layout = RootLayout("main", removed_root_files={"/d/b"})
    entries, _, kept = layout.entries(_md(), root, SID, SEQ, FileIO())
    assert _rows(entries) == [(ContentType.DATA, "/d/a", EXISTING, 1), (ContentType.DATA, "/d/b", DELETED, SID),
                              (ContentType.DATA_MANIFEST, "/m/l1", EXISTING, 1)]
    assert kept == 1


def test_a_modified_leaf_is_carried_as_existing_keeping_its_dv_but_not_its_positions() -> None:
    dv = encode_mumbling([3])
    entries, _, _ = RootLayout("main").entries(_md(), V4Manifest([_leaf("l1", dv=dv, status=MODIFIED)], {}),
                                               SID, SEQ, FileIO())
    (e,) = entries
    assert e.status == EXISTING and e.manifest_info is not None and e.manifest_info.dv == dv
    assert e.tracking.modified_snapshot_id == 5 and e.tracking.deleted_positions is None


def test_a_removed_file_gone_from_the_head_is_a_conflict() -> None:
    layout = RootLayout("main", removed_root_files={"/d/x"})
    with pytest.raises(CommitConflictError, match="no longer a live root-level file"):
        layout.entries(_md(), V4Manifest([_file("a")], {}), SID, SEQ, FileIO())


def test_added_files_and_new_leaves_take_row_ids_in_order() -> None:
    fresh = TrackedFile(Tracking(ADDED), ContentType.DATA, "/d/new", "parquet", 3, 100, 0)
    leaf = leaf_entry("/m/new", 500, 0, ManifestInfo(4, 0, 0, 0, 8, 0, 0, -1), 4)
    layout = RootLayout("main", added=[fresh], new_leaves=[NewLeaf(leaf, 8)])
    entries, added_rows, _ = layout.entries(_md(next_row_id=100), V4Manifest([_file("a")], {}), SID, SEQ, FileIO())
    assert [(e.location, e.tracking) for e in entries[1:]] == [
        ("/d/new", Tracking(ADDED, SID, SEQ, SEQ, first_row_id=100)),
        ("/m/new", Tracking(ADDED, SID, SEQ, SEQ, first_row_id=103))]
    assert entries[2].manifest_info is not None and entries[2].manifest_info.min_sequence_number == SEQ
    assert added_rows == 11


def test_removed_leaf_rows_modify_the_leaf_entry_and_conflict_with_an_earlier_removal() -> None:
    layout = RootLayout("main", removed_leaf_rows={"/m/l1": BitMap64([1])})
    entries, _, _ = layout.entries(_md(), V4Manifest([_leaf("l1", dv=encode_mumbling([4]))], {}), SID, SEQ,
                                   FileIO())
    (e,) = entries
    assert e.status == MODIFIED and e.tracking.snapshot_id == 1 and e.tracking.modified_snapshot_id == SID
    assert e.manifest_info is not None and decode_mumbling(e.manifest_info.dv or b"") == [1, 4]  # cumulative
    assert decode_mumbling(e.tracking.deleted_positions or b"") == [1]  # this snapshot's only
    with pytest.raises(CommitConflictError, match="already removed"):
        layout.entries(_md(), V4Manifest([_leaf("l1", dv=encode_mumbling([1]))], {}), SID, SEQ, FileIO())
    with pytest.raises(CommitConflictError, match="no longer part of the branch head"):
        layout.entries(_md(), V4Manifest([_file("a")], {}), SID, SEQ, FileIO())


def test_replacing_leaves_come_first_and_what_they_replace_leaves_without_a_trace() -> None:
    root = V4Manifest([_file("a"), _leaf("l1", dv=encode_mumbling([0])), _leaf("l2")], {})
    new = leaf_entry("/m/merged", 900, 0, _info(12), 3)
    replaced = {"/m/l1"}
    layout = RootLayout("main", replacing_leaves=[new],
                        replaced=lambda e: (e.is_manifest and e.location in replaced) or e.is_file)
    entries, added_rows, kept = layout.entries(_md(), root, SID, SEQ, FileIO())
    assert _rows(entries) == [(ContentType.DATA_MANIFEST, "/m/merged", ADDED, SID),
                              (ContentType.DATA_MANIFEST, "/m/l2", EXISTING, 1)]
    assert entries[0].tracking == Tracking(ADDED, SID, SEQ, SEQ)
    assert (added_rows, kept) == (0, 1)  # compaction assigns no row ids
    assert dataclasses.replace(entries[1], tracking=entries[1].tracking).manifest_info == _info()

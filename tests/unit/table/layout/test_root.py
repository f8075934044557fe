"""The v4 root layout: how one commit's change turns the head's root into the new root."""

from __future__ import annotations

import dataclasses

import pytest
from pyroaring import BitMap64

from icectl.codec.v4_proposal import (
    ContentEntry,
    ContentType,
    ManifestStats,
    V4Manifest,
    VersionInfo,
    manifest_dv_entry,
)
from icectl.errors import CommitConflictError
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import LONG, NestedField, Schema
from icectl.storage import FileIO
from icectl.table.layout.root import NewLeaf, RootLayout, leaf_entry, root_file_key

ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED
SID, SEQ = 99, 7


def _md(next_row_id: int = 100) -> TableMetadata:
    schema = Schema((NestedField(1, "id", LONG, False),), schema_id=0)
    return TableMetadata(format_version=4, table_uuid="u", location="/t", last_sequence_number=SEQ - 1,
                         last_updated_ms=0, last_column_id=1, schemas=(schema,), current_schema_id=0,
                         partition_specs=(PartitionSpec(0, ()),), default_spec_id=0, last_partition_id=999,
                         next_row_id=next_row_id)


def _file(name: str, rows: int = 5, status: ManifestEntryStatus = EXISTING) -> ContentEntry:
    return ContentEntry(ContentType.DATA, f"/d/{name}", "parquet", 0, rows, VersionInfo(status, 1, 1, 1),
                        first_row_id=0)


def _leaf(name: str, rows: int = 10) -> ContentEntry:
    entry = leaf_entry(f"/m/{name}", 1000, 0, ManifestStats(0, 2, 0, 0, rows, 0, 1), ContentType.DATA_MANIFEST, None)
    return dataclasses.replace(entry, version_info=VersionInfo(EXISTING, 1, 1, 1), first_row_id=0)


def _rows(entries: list[ContentEntry]) -> list[tuple[ContentType, str, ManifestEntryStatus, int | None]]:
    return [(e.content_type, e.location, e.status, e.version_info.snapshot_id) for e in entries]


def test_carries_live_entries_drops_deleted_ones_and_marks_removed_files() -> None:
    root = V4Manifest([_file("a"), _file("gone", status=DELETED), _file("b"), _leaf("l1")], {})
    layout = RootLayout("main", removed_root_files={root_file_key("/d/b", ContentType.DATA, None)})
    entries, added_rows, kept = layout.entries(_md(), root, SID, SEQ, FileIO())
    assert _rows(entries) == [(ContentType.DATA, "/d/a", EXISTING, 1), (ContentType.DATA, "/d/b", DELETED, SID),
                              (ContentType.DATA_MANIFEST, "/m/l1", EXISTING, 1)]
    assert (added_rows, kept) == (0, 1)


def test_a_removed_file_gone_from_the_head_is_a_conflict() -> None:
    layout = RootLayout("main", removed_root_files={root_file_key("/d/x", ContentType.DATA, None)})
    with pytest.raises(CommitConflictError, match="no longer a live root-level file"):
        layout.entries(_md(), V4Manifest([_file("a")], {}), SID, SEQ, FileIO())


def test_added_files_and_new_leaves_take_row_ids_in_order() -> None:
    fresh = ContentEntry(ContentType.DATA, "/d/new", "parquet", 0, 3, VersionInfo(ADDED))
    leaf = leaf_entry("/m/new", 500, 0, ManifestStats(4, 0, 0, 8, 0, 0, -1), ContentType.DATA_MANIFEST, None)
    layout = RootLayout("main", added=[fresh], new_leaves=[NewLeaf(leaf, 8)])
    entries, added_rows, _ = layout.entries(_md(next_row_id=100), V4Manifest([_file("a")], {}), SID, SEQ, FileIO())
    assert [(e.location, e.first_row_id, e.version_info) for e in entries[1:]] == [
        ("/d/new", 100, VersionInfo(ADDED, SID, SEQ, SEQ)), ("/m/new", 103, VersionInfo(ADDED, SID, SEQ, SEQ))]
    assert entries[2].manifest_stats is not None and entries[2].manifest_stats.min_sequence_number == SEQ
    assert added_rows == 11


def test_removed_leaf_rows_become_a_manifest_dv_and_conflict_with_an_earlier_one() -> None:
    root = V4Manifest([_leaf("l1")], {})
    layout = RootLayout("main", removed_leaf_rows={"/m/l1": BitMap64([1])})
    entries, _, _ = layout.entries(_md(), root, SID, SEQ, FileIO())
    assert _rows(entries) == [(ContentType.DATA_MANIFEST, "/m/l1", EXISTING, 1),
                              (ContentType.MANIFEST_DV, "/m/l1", ADDED, SID)]
    earlier = manifest_dv_entry("/m/l1", 1000, [1], snapshot_id=5, sequence_number=5)
    with pytest.raises(CommitConflictError, match="already removed"):
        layout.entries(_md(), V4Manifest([_leaf("l1"), earlier], {}), SID, SEQ, FileIO())
    with pytest.raises(CommitConflictError, match="no longer part of the branch head"):
        layout.entries(_md(), V4Manifest([_file("a")], {}), SID, SEQ, FileIO())


def test_replacing_leaves_come_first_and_what_they_replace_leaves_without_a_trace() -> None:
    dv = manifest_dv_entry("/m/l1", 1000, [0], snapshot_id=5, sequence_number=5)
    root = V4Manifest([_file("a"), _leaf("l1"), dv, _leaf("l2")], {})
    new = leaf_entry("/m/merged", 900, 0, ManifestStats(0, 3, 0, 0, 12, 0, 1), ContentType.DATA_MANIFEST, None)
    replaced = {"/m/l1"}
    layout = RootLayout("main", replacing_leaves=[new],
                        replaced=lambda e: (e.is_manifest and e.location in replaced) or e.is_file
                        or (e.is_manifest_dv and e.referenced_file in replaced))
    entries, added_rows, kept = layout.entries(_md(), root, SID, SEQ, FileIO())
    assert _rows(entries) == [(ContentType.DATA_MANIFEST, "/m/merged", ADDED, SID),
                              (ContentType.DATA_MANIFEST, "/m/l2", EXISTING, 1)]
    assert entries[0].version_info == VersionInfo(ADDED, SID, SEQ, SEQ)
    assert (added_rows, kept) == (0, 1)  # compaction assigns no row ids

"""icectl/spec/content_entry.py: the v4 content entry (design/v4-layout.md) and its v1-v3 equivalents.

Expected values are built by hand from the layout page: section 3 (fields), 4 (content_stats),
5 (manifest DVs), 6 (inheritance) and 8 (a root entry from a manifest-list row).
"""

from __future__ import annotations

import struct

import pytest

from icectl.errors import CorruptInputError
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.schema import INT, LONG, STRING, NestedField, StructType
from icectl.spec.v4_proposal import (
    ContentEntry,
    ContentStats,
    ContentType,
    DeletionVectorRef,
    ManifestStats,
    V4Manifest,
    VersionInfo,
    aggregate_content_stats,
    content_entry_of,
    data_file_of,
    leaf_entries,
    live_manifest_dvs,
    manifest_entry_of_manifest_file,
    manifest_file_of,
    manifest_stats_of,
    with_inherited,
)

ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED
# a unified partition type: field 1000 of spec 0, 1001 of spec 1
PARTITION_TYPE = StructType((NestedField(1000, "region", STRING), NestedField(1001, "id_bucket", INT)))


def _long(v: int) -> bytes:
    return struct.pack("<q", v)


def _file(location: str, status: ManifestEntryStatus, rows: int, *, seq: int | None = None,
          snapshot_id: int | None = None, content_type: ContentType = ContentType.DATA,
          stats: ContentStats | None = None, first_row_id: int | None = None) -> ContentEntry:
    return ContentEntry(content_type, location, "parquet", 0, rows, VersionInfo(status, snapshot_id, seq, seq),
                        content_stats=stats, first_row_id=first_row_id)


def test_added_root_entries_inherit_the_snapshot_and_others_keep_theirs() -> None:
    added = _file("/a", ADDED, 1)
    inherited = with_inherited(added, snapshot_id=77, sequence_number=5)
    assert inherited.version_info == VersionInfo(ADDED, 77, 5, 5)
    # an explicit file sequence number (a file first added earlier) is kept
    partial = ContentEntry(ContentType.DATA, "/b", "parquet", 0, 1, VersionInfo(ADDED, None, None, 3))
    assert with_inherited(partial, 77, 5).version_info == VersionInfo(ADDED, 77, 5, 3)
    existing = ContentEntry(ContentType.DATA, "/c", "parquet", 0, 1, VersionInfo(EXISTING, None, None, None))
    assert with_inherited(existing, 77, 5) is existing  # EXISTING/DELETED never inherit (section 6)


def test_manifest_stats_count_by_status_and_take_the_live_minimum_sequence_number() -> None:
    entries = [_file("/a", ADDED, 10, seq=7), _file("/b", EXISTING, 20, seq=4), _file("/c", EXISTING, 5, seq=6),
               _file("/d", DELETED, 100, seq=2)]  # a deleted entry is not live: its 2 does not count
    assert manifest_stats_of(entries) == ManifestStats(1, 2, 1, 10, 25, 100, 4)
    assert manifest_stats_of([_file("/x", DELETED, 3, seq=1)]).min_sequence_number == -1
    assert manifest_stats_of([]) == ManifestStats(0, 0, 0, 0, 0, 0, -1)


def test_content_stats_aggregate_over_live_entries_with_type_aware_bounds() -> None:
    # -5 < 3 as a long, but its little-endian bytes sort after 3's: a byte-wise min would be wrong
    a = ContentStats(value_counts={1: 10, 2: 10}, null_value_counts={1: 0}, lower_bounds={1: _long(3)},
                     upper_bounds={1: _long(40)})
    b = ContentStats(value_counts={1: 5, 2: 1}, null_value_counts={1: 2}, lower_bounds={1: _long(-5)},
                     upper_bounds={1: _long(12)})
    dead = ContentStats(value_counts={1: 1000}, lower_bounds={1: _long(-1000)}, upper_bounds={1: _long(1000)})
    entries = [_file("/a", ADDED, 10, stats=a), _file("/b", EXISTING, 5, stats=b),
               _file("/c", DELETED, 1000, stats=dead)]
    out = aggregate_content_stats(entries, {1: LONG, 2: STRING})
    assert out.value_counts == {1: 15, 2: 11} and out.null_value_counts == {1: 2}
    assert out.lower_bounds == {1: _long(-5)} and out.upper_bounds == {1: _long(40)}
    assert out.column_sizes is None and out.nan_value_counts is None


def test_a_column_missing_from_one_entry_or_of_unknown_type_is_omitted() -> None:
    a = ContentStats(value_counts={1: 1, 2: 1}, lower_bounds={1: _long(1), 9: b"x"}, upper_bounds={9: b"y"})
    b = ContentStats(value_counts={1: 1}, lower_bounds={1: _long(2), 9: b"z"}, upper_bounds={9: b"z"})
    out = aggregate_content_stats([a, b], {1: LONG})  # no type for 9: its bounds cannot be ordered
    assert out.value_counts == {1: 2}
    assert out.lower_bounds == {1: _long(1)} and out.upper_bounds is None


def test_one_live_manifest_dv_per_leaf() -> None:
    def dv(status: ManifestEntryStatus, leaf: str) -> ContentEntry:
        return ContentEntry(ContentType.MANIFEST_DV, leaf, "puffin", 0, 2, VersionInfo(status, 1, 1, 1),
                            deletion_vector=DeletionVectorRef(inline_content=b"..."), referenced_file=leaf)
    old, new, other = dv(DELETED, "/leaf1"), dv(ADDED, "/leaf1"), dv(EXISTING, "/leaf2")
    assert live_manifest_dvs([old, new, other, _file("/f", ADDED, 1)]) == {"/leaf1": new, "/leaf2": other}
    assert new.manifest_dv_target == "/leaf1" and _file("/f", ADDED, 1).manifest_dv_target is None
    with pytest.raises(CorruptInputError, match="more than one live manifest DV for /leaf1"):
        live_manifest_dvs([new, dv(EXISTING, "/leaf1")])


def test_a_manifest_list_row_becomes_a_root_entry_and_back() -> None:
    row = ManifestFile("/m.avro", 4321, 1, ManifestContent.DATA, sequence_number=6, min_sequence_number=2,
                       added_snapshot_id=99, added_files_count=1, existing_files_count=2, deleted_files_count=3,
                       added_rows_count=10, existing_rows_count=20, deleted_rows_count=30, first_row_id=500)
    stats = ManifestStats(1, 2, 3, 10, 20, 30, 2)
    e = manifest_entry_of_manifest_file(row, status=EXISTING, manifest_stats=stats, content_stats=None)
    assert e.content_type == ContentType.DATA_MANIFEST and e.file_format == "avro"
    assert e.record_count == 30  # added + existing rows: what the leaf holds live
    assert e.version_info == VersionInfo(EXISTING, 99, 6, 6)  # 3/4: sequence_number == file_sequence_number
    assert (e.file_size_in_bytes, e.partition_spec_id, e.first_row_id) == (4321, 1, 500)
    assert manifest_file_of(e) == row  # partitions (field 507) have no v4 counterpart and stay None
    deletes = manifest_entry_of_manifest_file(
        ManifestFile("/d.avro", 1, 0, ManifestContent.DELETES, 6, 6, 99, first_row_id=None),
        status=ADDED, manifest_stats=stats, content_stats=None)
    assert deletes.content_type == ContentType.DELETE_MANIFEST and deletes.first_row_id is None
    with pytest.raises(CorruptInputError, match="not a manifest"):
        manifest_file_of(_file("/f", ADDED, 1))


def test_v3_entries_convert_to_content_entries_and_back() -> None:
    data = DataFile(DataFileContent.DATA, "/d.parquet", "PARQUET", ("us", 3), 42, 1024,
                    value_counts={1: 42}, lower_bounds={1: _long(1)}, upper_bounds={1: _long(9)},
                    split_offsets=(4,), sort_order_id=1, first_row_id=100)
    dv = DataFile(DataFileContent.POSITION_DELETES, "/dv.puffin", "PUFFIN", ("us", 3), 2, 300,
                  referenced_data_file="/d.parquet", content_offset=4, content_size_in_bytes=40)
    for f, content_type in ((data, ContentType.DATA), (dv, ContentType.POSITION_DELETE)):
        entry = ManifestEntry(EXISTING, 11, 3, 2, f)
        ce = content_entry_of(entry, 0, PARTITION_TYPE)
        assert ce.content_type == content_type and ce.file_format == f.file_format.lower()
        assert ce.partition == {1000: "us", 1001: 3} and ce.version_info == VersionInfo(EXISTING, 11, 3, 2)
        back = data_file_of(ce, PARTITION_TYPE)
        assert back.partition == f.partition and back.record_count == f.record_count
        assert (back.first_row_id, back.sort_order_id, back.referenced_data_file) == (
            f.first_row_id, f.sort_order_id, f.referenced_data_file)
        assert (back.content_offset, back.content_size_in_bytes) == (f.content_offset, f.content_size_in_bytes)
        assert back.value_counts == f.value_counts and back.lower_bounds == f.lower_bounds
    assert content_entry_of(ManifestEntry(EXISTING, 11, 3, 2, dv), 0, PARTITION_TYPE).deletion_vector == \
        DeletionVectorRef(4, 40)
    # a spec-0 file in the unified type: a partition field it lacks comes back as null
    narrow = content_entry_of(ManifestEntry(ADDED, 1, 1, 1, DataFile(DataFileContent.DATA, "/n", "PARQUET",
                                                                     ("eu",), 1, 1)), 0, PARTITION_TYPE)
    assert narrow.partition == {1000: "eu"}
    assert data_file_of(narrow, PARTITION_TYPE).partition == ("eu", None)


def test_leaf_rows_inherit_from_their_root_entry_like_a_manifest_list_row() -> None:
    # section 6: ADDED rows take the root entry's snapshot and sequence number; first_row_id runs on
    # from the DATA_MANIFEST entry's first_row_id over rows without one (DELETED rows get none).
    root_row = ManifestFile("/leaf.avro", 1, 0, ManifestContent.DATA, sequence_number=8, min_sequence_number=3,
                            added_snapshot_id=55, first_row_id=1000)
    leaf = V4Manifest([
        ContentEntry(ContentType.DATA, "/a", "parquet", 0, 10, VersionInfo(ADDED)),
        ContentEntry(ContentType.DATA, "/b", "parquet", 0, 7, VersionInfo(EXISTING, 12, 3, 3)),
        ContentEntry(ContentType.DATA, "/c", "parquet", 0, 4, VersionInfo(DELETED, 12, 3, 3)),
        ContentEntry(ContentType.DATA, "/d", "parquet", 0, 5, VersionInfo(ADDED), first_row_id=400),
        ContentEntry(ContentType.DATA, "/e", "parquet", 0, 2, VersionInfo(ADDED)),
    ], {"content": "data"})
    out = leaf_entries(leaf, root_row, PARTITION_TYPE)
    assert [(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file.first_row_id)
            for e in out] == [
        (ADDED, 55, 8, 8, 1000), (EXISTING, 12, 3, 3, 1010), (DELETED, 12, 3, 3, None),
        (ADDED, 55, 8, 8, 400), (ADDED, 55, 8, 8, 1017)]
    bad = V4Manifest([ContentEntry(ContentType.DATA_MANIFEST, "/x", "avro", 0, 1, VersionInfo(ADDED))], {})
    with pytest.raises(CorruptInputError, match="DATA_MANIFEST entry /x in a leaf manifest"):
        leaf_entries(bad, root_row, PARTITION_TYPE)

"""The manifest-list layout (v1-v3): new manifests first, then the head's that they do not replace."""

from __future__ import annotations

from pathlib import Path

import pytest

from icectl.codec.manifest_reader import read_manifest_list
from icectl.codec.manifest_writer import UNASSIGNED_SEQ
from icectl.errors import CommitConflictError
from icectl.spec.manifest import ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import LONG, NestedField, Schema
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table.layout import Attempt
from icectl.table.layout.manifest_list import ManifestListLayout

COMMIT = "abcdef00-0000-4000-8000-000000000000"


def _md(fv: int) -> TableMetadata:
    schema = Schema((NestedField(1, "id", LONG, False),), schema_id=0)
    return TableMetadata(format_version=fv, table_uuid="u", location="/t", last_sequence_number=4,
                         last_updated_ms=0, last_column_id=1, schemas=(schema,), current_schema_id=0,
                         partition_specs=(PartitionSpec(0, ()),), default_spec_id=0, last_partition_id=999,
                         next_row_id=50)


def _manifest(name: str, seq: int, snapshot_id: int, rows: int = 10) -> ManifestFile:
    return ManifestFile(f"/m/{name}", 100, 0, sequence_number=seq, min_sequence_number=seq,
                        added_snapshot_id=snapshot_id, added_files_count=1, existing_files_count=0,
                        deleted_files_count=0, added_rows_count=rows, existing_rows_count=0, deleted_rows_count=0)


def _attempt(tmp_path: Path, md: TableMetadata, head: Snapshot | None, number: int = 1) -> Attempt:
    return Attempt("t", md, head, 9, 5 if md.format_version >= 2 else 0, md.next_row_id if md.format_version >= 3
                   else None, number, str(tmp_path))


HEAD = Snapshot(3, 1000, None, 4, "/t/metadata/snap-3.avro", summary={"operation": "append"})


def test_new_manifests_first_then_the_kept_ones_with_the_commit_sequence_number(tmp_path: Path) -> None:
    md = _md(3)
    head_manifests = [_manifest("old1", 1, 1), _manifest("old2", 2, 2), _manifest("old3", 3, 3)]
    layout = ManifestListLayout(COMMIT, [_manifest("new", UNASSIGNED_SEQ, 9)], replaced={"/m/old2"},
                                head_manifests=lambda base, head: head_manifests)
    index = layout.write(FileIO(), _attempt(tmp_path, md, HEAD, number=2))
    assert index.path == str(tmp_path / f"snap-9-2-{COMMIT}.avro") and index.kept_manifests == 2
    listed = read_manifest_list(Path(index.path).read_bytes(), format_version=3).manifests
    assert [(m.manifest_path, m.sequence_number, m.first_row_id) for m in listed] == [
        ("/m/new", 5, 50), ("/m/old1", 1, 60), ("/m/old3", 3, 70)]  # v3: ranges from next-row-id
    assert index.added_rows == 30


def test_v1_lists_have_no_sequence_numbers_or_row_ids(tmp_path: Path) -> None:
    index = ManifestListLayout(COMMIT, [_manifest("new", UNASSIGNED_SEQ, 9)]).write(
        FileIO(), _attempt(tmp_path, _md(1), None))
    listed = read_manifest_list(Path(index.path).read_bytes(), format_version=1).manifests
    assert [(m.manifest_path, m.sequence_number) for m in listed] == [("/m/new", 0)]
    assert (index.added_rows, index.kept_manifests) == (None, 0)


def test_a_head_check_that_raises_stops_before_anything_is_written(tmp_path: Path) -> None:
    def stale(base: TableMetadata, head: Snapshot) -> list[ManifestFile]:
        raise CommitConflictError("a replaced manifest is gone")

    layout = ManifestListLayout(COMMIT, [], replaced={"/m/old"}, head_manifests=stale)
    with pytest.raises(CommitConflictError):
        layout.write(FileIO(), _attempt(tmp_path, _md(2), HEAD))
    assert list(tmp_path.iterdir()) == []

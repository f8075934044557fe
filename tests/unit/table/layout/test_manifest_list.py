"""The manifest-list layout (v1-v3): new manifests first, then the head's that they do not replace."""

from __future__ import annotations

from pathlib import Path

import fastavro
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
from icectl.table import load_table
from icectl.table.layout import Attempt
from icectl.table.layout.manifest_list import ManifestListLayout, manifest_list_path, manifest_path
from unit.ops.lifecycle.test_upgrade import icectl, parquet

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


def test_java_names_for_lists_and_manifests() -> None:
    assert manifest_list_path("/t/metadata", 42, 3, COMMIT) == f"/t/metadata/snap-42-3-{COMMIT}.avro"
    assert manifest_path("s3://b/t/metadata/", COMMIT, 0) == f"s3://b/t/metadata/{COMMIT}-m0.avro"


def test_without_a_head_check_the_head_list_is_read_and_carried(tmp_path: Path) -> None:
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--format-version", "2")
    for day in (1, 2):
        icectl("add-files", str(d), parquet(tmp_path / f"f{day}.parquet", range(day * 10, day * 10 + 3), day))
    table = load_table(str(d))
    md, head = table.metadata, table.metadata.current_snapshot()
    assert head is not None and head.manifest_list is not None
    with open(head.manifest_list, "rb") as f:
        before = [(r["manifest_path"], r["sequence_number"]) for r in fastavro.reader(f)]
    attempt = Attempt(str(d), md, head, 77, md.last_sequence_number + 1, None, 1, str(tmp_path / "out"))
    index = ManifestListLayout(COMMIT, [_manifest("new", UNASSIGNED_SEQ, 77)]).write(table.io, attempt)
    with open(index.path, "rb") as f:
        reader = fastavro.reader(f)
        rows = [(r["manifest_path"], r["sequence_number"]) for r in reader]
        meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    assert rows == [("/m/new", 3), *before] and [s for _, s in before] == [2, 1]
    assert (meta["snapshot-id"], meta["parent-snapshot-id"], meta["sequence-number"], meta["format-version"]) == (
        "77", str(head.snapshot_id), "3", "2")
    assert index.kept_manifests == 2

"""The snapshot writer: one commit path for manifest lists (v1-v3) and roots (v4)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from icectl.catalog.operations import CommitStateUnknownError
from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest
from icectl.codec.v4_manifest import read_v4_manifest
from icectl.config import parse_config
from icectl.errors import CommitConflictError
from icectl.ops.create.table import SchemaSource, create
from icectl.ops.lifecycle.upgrade import upgrade
from icectl.spec.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.spec.tracked_file import ContentType, EntryStatus, tracked_file_of
from icectl.storage import FileIO, join
from icectl.table import Table, load_table, snapshot_writer
from icectl.table.commit import new_snapshot_id
from icectl.table.layout.manifest_list import ManifestListLayout, manifest_path
from icectl.table.layout.root import RootLayout
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import column_field_types, partition_field_types, read_root
from icectl.table.snapshot_writer import SnapshotChange, snapshot_timestamp, write_snapshot


def _table(tmp_path: Path, fv: int) -> Table:
    d = str(tmp_path / "t")
    create(d, SchemaSource(ddl="id long"), config=parse_config({}), io=FileIO(), format_version=2 if fv > 3 else fv)
    if fv > 3:
        upgrade(load_table(d), fv)
    return load_table(d)


def _file(name: str, rows: int = 5) -> DataFile:
    return DataFile(DataFileContent.DATA, f"/data/{name}.parquet", "PARQUET", (), rows, 100 * rows)


def _append_v2(table: Table, *names: str, commit_id: str = "c0ffee00-0000-4000-8000-000000000000",
               **kw: Any) -> snapshot_writer.SnapshotCommit:
    """An append through the writer, as add-files does it on v1-v3: one manifest, then the list."""
    md = table.metadata
    sid = new_snapshot_id(md)
    files = [_file(n) for n in names]
    result = write_manifest([ManifestEntry(ManifestEntryStatus.ADDED, sid, None, None, f) for f in files],
                            schema=md.schema(), spec=md.spec(), partition_type=md.spec().partition_type(md.schema()),
                            format_version=md.format_version, content=ManifestContent.DATA, snapshot_id=sid)
    path = manifest_path(table.metadata_folder, commit_id, 0)
    table.io.write(path, result.data)
    layout = ManifestListLayout(commit_id, [result.to_manifest_file(path, len(result.data), 0, sid, UNASSIGNED_SEQ)])
    change = SnapshotChange("append", layout, written=[path])
    for f in files:
        change.summary.added_file(f)
    return write_snapshot(table, "main", change, snapshot_id=sid, **kw)


def _metadata_files(table: Table) -> set[str]:
    return set(os.listdir(table.metadata_folder))


def test_append_on_v2_lists_the_new_manifest_first_with_the_commit_sequence_number(tmp_path: Path) -> None:
    table = _table(tmp_path, 2)
    first = _append_v2(table, "a", commit_id="11111111-0000-4000-8000-000000000000")
    second = _append_v2(table, "b", "c", commit_id="22222222-0000-4000-8000-000000000000")
    snap = second.snapshot
    assert (snap.sequence_number, snap.parent_snapshot_id) == (2, first.snapshot.snapshot_id)
    assert snap.manifest_list is not None and os.path.basename(snap.manifest_list) == \
        f"snap-{snap.snapshot_id}-1-22222222-0000-4000-8000-000000000000.avro"
    assert second.files == [join(table.metadata_folder, "22222222-0000-4000-8000-000000000000-m0.avro"),
                            snap.manifest_list]
    ms = manifests_of(table.metadata, snap, table.io)
    assert [(m.sequence_number, m.min_sequence_number, m.added_snapshot_id) for m in ms] == \
        [(2, 2, snap.snapshot_id), (1, 1, first.snapshot.snapshot_id)]
    live = sorted((e.data_file.file_path, e.sequence_number) for _, e in iter_entries(table.metadata, table.io, ms))
    assert live == [("/data/a.parquet", 1), ("/data/b.parquet", 2), ("/data/c.parquet", 2)]
    assert snap.summary["operation"] == "append"
    assert (snap.summary["added-data-files"], snap.summary["added-records"], snap.summary["total-records"],
            snap.summary["total-data-files"]) == ("2", "10", "15", "3")
    assert snap.first_row_id is None and snap.added_rows is None  # no row lineage before v3
    assert second.index.kept_manifests == 1 and second.attempts == 1


def test_append_on_v3_assigns_row_ids_from_next_row_id(tmp_path: Path) -> None:
    table = _table(tmp_path, 3)
    _append_v2(table, "a")
    done = _append_v2(table, "b", "c", commit_id="33333333-0000-4000-8000-000000000000")
    assert (done.snapshot.first_row_id, done.snapshot.added_rows) == (5, 10)
    assert table.metadata.next_row_id == 15


def test_append_on_v4_writes_one_root_with_added_entries(tmp_path: Path) -> None:
    table = _table(tmp_path, 4)
    md = table.metadata
    ptype = md.spec().partition_type(md.schema())
    layout = RootLayout("main", added=[
        tracked_file_of(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, _file(n, rows)), 0, ptype)
        for n, rows in (("a", 3), ("b", 4))])
    change = SnapshotChange("append", layout)
    for e in layout.added:
        change.summary.added_file(_file(e.location.rsplit("/", 1)[1].split(".")[0], e.record_count))
    done = write_snapshot(table, "main", change)
    snap = done.snapshot
    assert snap.manifest_list is None and snap.root_manifest == done.index.path and done.files == [snap.root_manifest]
    assert (snap.sequence_number, snap.first_row_id, snap.added_rows) == (md.last_sequence_number + 1,
                                                                          md.next_row_id, 7)
    # The root as written (no inheritance applied): Parquet, its entries carry snapshot and sequence numbers.
    raw = Path(snap.root_manifest).read_bytes()
    assert raw[:4] == b"PAR1" and snap.root_manifest.endswith(".parquet")
    root = read_v4_manifest(raw, partition_types=partition_field_types(table.metadata),
                            column_types=column_field_types(table.metadata), root=True)
    assert read_root(table.metadata, snap, table.io).entries == root.entries
    rows = [(e.content_type, e.location, e.status, e.tracking.snapshot_id, e.tracking.sequence_number,
             e.tracking.file_sequence_number, e.first_row_id) for e in root.entries]
    sid, seq = snap.snapshot_id, snap.sequence_number
    assert rows == [(ContentType.DATA, "/data/a.parquet", EntryStatus.ADDED, sid, seq, seq, md.next_row_id),
                    (ContentType.DATA, "/data/b.parquet", EntryStatus.ADDED, sid, seq, seq, md.next_row_id + 3)]
    assert root.metadata == {"schema-id": str(snap.schema_id), "format-version": "4"}  # the spec's KV only
    assert (snap.summary["operation"], snap.summary["added-records"], snap.summary["total-records"]) == \
        ("append", "7", "7")


def test_a_failed_commit_deletes_exactly_the_files_the_change_wrote(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path, 2)
    _append_v2(table, "a")
    before = _metadata_files(table)

    def conflict(t: Table, build: Callable[[TableMetadata], TableMetadata], **kw: Any) -> Any:
        build(t.metadata)  # writes the list, as a real attempt does
        build(t.metadata)  # and a retry another one
        raise CommitConflictError("lost every attempt")

    monkeypatch.setattr(snapshot_writer, "commit", conflict)
    with pytest.raises(CommitConflictError):
        _append_v2(table, "b", commit_id="44444444-0000-4000-8000-000000000000")
    assert _metadata_files(table) == before  # the manifest and both lists are gone, nothing else


def test_an_unknown_commit_outcome_keeps_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path, 2)
    before = _metadata_files(table)

    def lost(t: Table, build: Callable[[TableMetadata], TableMetadata], **kw: Any) -> Any:
        build(t.metadata)
        raise CommitStateUnknownError("the answer was lost", location="v9.metadata.json")

    monkeypatch.setattr(snapshot_writer, "commit", lost)
    with pytest.raises(CommitStateUnknownError):
        _append_v2(table, "a", commit_id="55555555-0000-4000-8000-000000000000")
    new = _metadata_files(table) - before
    assert len(new) == 2 and any(n.startswith("snap-") for n in new)  # the table may reference them


def test_a_conflict_rebuilds_on_the_new_head_and_drops_the_lost_list(tmp_path: Path) -> None:
    table = _table(tmp_path, 2)
    _append_v2(table, "a")
    calls = 0

    def race(base: TableMetadata) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # another writer commits while our first attempt is being built
            _append_v2(load_table(str(tmp_path / "t")), "other", commit_id="66666666-0000-4000-8000-000000000000")

    done = _append_v2(table, "b", commit_id="77777777-0000-4000-8000-000000000000", check=race)
    other = table.metadata.snapshot_by_id(done.snapshot.parent_snapshot_id or 0)
    assert done.attempts == 2 and other is not None and other.summary["added-data-files"] == "1"
    assert done.snapshot.sequence_number == 3
    assert os.path.basename(done.snapshot.manifest_list or "").startswith(f"snap-{done.snapshot.snapshot_id}-2-")
    ms = manifests_of(table.metadata, done.snapshot, table.io)
    assert len(ms) == 3 and ms[0].sequence_number == 3  # ours first, then the other writer's and the first
    lists = {n for n in _metadata_files(table) if n.startswith(f"snap-{done.snapshot.snapshot_id}-")}
    assert lists == {os.path.basename(done.snapshot.manifest_list or "")}  # attempt 1's list was deleted
    assert done.snapshot.summary["total-data-files"] == "3"


def test_the_timestamp_never_goes_before_the_parent() -> None:
    future = Snapshot(1, 4_000_000_000_000, None, 1, "l", {"operation": "append"})
    assert snapshot_timestamp(future) == 4_000_000_000_001
    past = Snapshot(1, 1, None, 1, "l", {"operation": "append"})
    assert snapshot_timestamp(past) > 1_600_000_000_000

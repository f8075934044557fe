"""The read path: a snapshot's manifests, their entries in list order with inherited tracking, and the
cheap intactness check writers run on the manifests they carry forward.

Expected orders and numbers come from what the test did (one file per append, sequence numbers 1, 2, 3)
and from the manifest list and manifests read with fastavro, not through icectl's reader.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import fastavro
import pytest

from icectl.errors import CorruptInputError, ExitCode, IcectlError
from icectl.spec.manifest import ManifestEntryStatus, ManifestFile
from icectl.storage import FileIdentity, FileIO
from icectl.table import load_table
from icectl.table.scan import check_manifests_intact, data_manifests, delete_manifests, iter_entries, manifests_of
from unit.ops.lifecycle.test_upgrade import icectl, parquet


def _avro(path: str) -> list[dict]:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


@pytest.fixture
def appended(tmp_path: Path) -> tuple[Path, list[str], list[int]]:
    """A v2 table with three appends of one file each: (table, files, snapshot ids)."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--format-version", "2")
    files, ids = [], []
    for n in (1, 2, 3):
        files.append(parquet(tmp_path / f"f{n}.parquet", range(n * 10, n * 10 + n), n))
        ids.append(icectl("add-files", str(d), files[-1])["snapshot_id"])
    return d, files, ids


def test_manifests_newest_first_and_entries_inherit_from_their_manifest(
        appended: tuple[Path, list[str], list[int]]) -> None:
    d, files, ids = appended
    table = load_table(str(d))
    head = table.metadata.current_snapshot()
    assert head is not None and head.manifest_list is not None
    manifests = manifests_of(table.metadata, head, table.io)
    listed = _avro(head.manifest_list)
    assert [m.manifest_path for m in manifests] == [r["manifest_path"] for r in listed]
    assert [(m.added_snapshot_id, m.sequence_number) for m in manifests] == [(ids[2], 3), (ids[1], 2), (ids[0], 1)]
    # Written as ADDED with null sequence numbers (inheritance is what gives them theirs).
    raw = [e for m in manifests for e in _avro(m.manifest_path)]
    assert [(e["status"], e["snapshot_id"], e["sequence_number"], e["file_sequence_number"]) for e in raw] == [
        (1, ids[2], None, None), (1, ids[1], None, None), (1, ids[0], None, None)]
    got = [(m.manifest_path, e.data_file.file_path, e.snapshot_id, e.sequence_number, e.file_sequence_number,
            e.data_file.record_count) for m, e in iter_entries(table.metadata, table.io, manifests)]
    assert got == [(manifests[0].manifest_path, files[2], ids[2], 3, 3, 3),
                   (manifests[1].manifest_path, files[1], ids[1], 2, 2, 2),
                   (manifests[2].manifest_path, files[0], ids[0], 1, 1, 1)]
    assert data_manifests(manifests) == manifests and delete_manifests(manifests) == []


def test_existing_entries_keep_their_numbers_after_a_manifest_rewrite(
        appended: tuple[Path, list[str], list[int]]) -> None:
    d, files, ids = appended
    icectl("compact", str(d))
    table = load_table(str(d))
    head = table.metadata.current_snapshot()
    assert head is not None and head.sequence_number == 4
    manifests = manifests_of(table.metadata, head, table.io)
    assert [(m.sequence_number, m.existing_files_count) for m in manifests] == [(4, 3)]
    raw = _avro(manifests[0].manifest_path)
    assert sorted((e["status"], e["sequence_number"]) for e in raw) == [(0, 1), (0, 2), (0, 3)]  # EXISTING
    entries = {e.data_file.file_path: e for _, e in iter_entries(table.metadata, table.io, manifests)}
    for n in range(3):  # their own numbers, not the rewritten manifest's 4 or its snapshot
        e = entries[files[n]]
        assert (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) == (
            ManifestEntryStatus.EXISTING, ids[n], n + 1, n + 1)
    assert len(list(iter_entries(table.metadata, table.io, manifests, live_only=True))) == 3


class SlowFirst(FileIO):
    """Reads of one path wait until every other manifest has been read: completion order differs."""

    def __init__(self, slow: str, others: int) -> None:
        super().__init__()
        self.slow, self.others, self.done = slow, others, 0
        self.lock = threading.Lock()

    def read(self, path: str) -> bytes:
        self.wait(path)
        data = super().read(path)
        self.count(path)
        return data

    def read_with_identity(self, path: str) -> tuple[bytes, FileIdentity | None]:  # the cache's read
        self.wait(path)
        got = super().read_with_identity(path)
        self.count(path)
        return got

    def wait(self, path: str) -> None:
        if path == self.slow:
            deadline = time.monotonic() + 5
            while self.done < self.others and time.monotonic() < deadline:
                time.sleep(0.005)

    def count(self, path: str) -> None:
        with self.lock:
            self.done += path != self.slow


def test_entries_come_in_list_order_whatever_order_reads_finish_in(
        appended: tuple[Path, list[str], list[int]]) -> None:
    d, files, _ = appended
    table = load_table(str(d))
    head = table.metadata.current_snapshot()
    assert head is not None
    manifests = manifests_of(table.metadata, head, table.io)
    io = SlowFirst(manifests[0].manifest_path, len(manifests) - 1)
    got = [e.data_file.file_path for _, e in iter_entries(table.metadata, io, manifests, workers=3)]
    assert io.done == 2 and got == [files[2], files[1], files[0]]
    narrow = next(iter(iter_entries(table.metadata, table.io, manifests[:1], fields=["file_path"])))[1]
    assert narrow.data_file.file_path == files[2] and narrow.data_file.lower_bounds is None
    assert list(iter_entries(table.metadata, table.io, [])) == []


def test_v1_snapshots_with_embedded_manifest_paths(tmp_path: Path) -> None:
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--format-version", "1")
    f = parquet(tmp_path / "f.parquet", range(4), 1)
    sid = icectl("add-files", str(d), f)["snapshot_id"]
    table = load_table(str(d))
    head = table.metadata.current_snapshot()
    assert head is not None and head.manifest_list is not None
    path = _avro(head.manifest_list)[0]["manifest_path"]
    embedded = dataclasses.replace(head, manifest_list=None, manifests=(path,))
    manifests = manifests_of(table.metadata, embedded, table.io)
    assert manifests == [ManifestFile(manifest_path=path, manifest_length=Path(path).stat().st_size,
                                      partition_spec_id=0)]
    assert [(e.snapshot_id, e.data_file.file_path) for _, e in iter_entries(table.metadata, table.io, manifests)] \
        == [(sid, f)]
    with pytest.raises(CorruptInputError, match=f"snapshot {sid} has neither manifest-list nor manifests"):
        manifests_of(table.metadata, dataclasses.replace(head, manifest_list=None), table.io)


def test_a_broken_manifest_list_is_named(appended: tuple[Path, list[str], list[int]]) -> None:
    d, _, _ = appended
    table = load_table(str(d))
    head = table.metadata.current_snapshot()
    assert head is not None and head.manifest_list is not None
    Path(head.manifest_list).write_bytes(b"Obj\x01 not really avro")
    with pytest.raises(IcectlError) as e:
        manifests_of(table.metadata, head, table.io)
    assert e.value.exit_code == ExitCode.CORRUPT and head.manifest_list in e.value.message


def test_intactness_names_the_first_broken_manifest_in_list_order(
        appended: tuple[Path, list[str], list[int]]) -> None:
    d, _, _ = appended
    table = load_table(str(d))
    head = table.metadata.current_snapshot()
    assert head is not None
    manifests = manifests_of(table.metadata, head, table.io)
    check_manifests_intact(table.io, manifests, head.manifest_list)
    first, second, third = (Path(m.manifest_path) for m in manifests)
    third.unlink()
    data = second.read_bytes()
    second.write_bytes(data[:-1])
    with pytest.raises(CorruptInputError) as e:
        check_manifests_intact(table.io, manifests, head.manifest_list, workers=3)
    assert e.value.message == (f"manifest {second} is {len(data) - 1} bytes, the manifest list says {len(data)} "
                               f"(listed in {head.manifest_list})")
    second.write_bytes(data[:-16] + bytes(16))  # the right length, but the trailing sync marker is gone
    with pytest.raises(CorruptInputError, match=f"manifest {second} cannot be read"):
        check_manifests_intact(table.io, manifests[:2], None)
    check_manifests_intact(table.io, manifests[:2], None, probe=False)  # the length alone
    with pytest.raises(CorruptInputError, match=f"^manifest {third} is missing$"):
        check_manifests_intact(table.io, [manifests[0], manifests[2]], None)
    assert first.exists()

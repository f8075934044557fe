"""Scan planning: each live data file of a snapshot with the delete files that apply to it.

The spec's rules ("Scan Planning"), as Java's ``DeleteFileIndex`` applies them:

- a deletion vector applies to the data file it references when the data file's data sequence
  number is less than or equal to the DV's; a data file has at most one DV, and when it has one,
  no position delete file applies to it (a DV already holds those deletes);
- a position delete file applies when its ``referenced_data_file`` (or, when unset, the one path
  its ``file_path`` bounds hold) is unset or names the data file, the data file's data sequence
  number is less than or equal to the delete file's, and both
  have the same partition spec and partition values;
- an equality delete file applies when the data file's data sequence number is strictly less
  than the delete file's, and the delete file is in the data file's partition (same spec and
  values) or in an unpartitioned spec (a global equality delete).

Used by ``rewrite-data-files`` (which files to rewrite and which deletes to apply while reading
them) and by its commit-time check that no delete arrived meanwhile for a rewritten file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from icectl.spec.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table.scan import iter_entries, manifests_of


@dataclass(frozen=True)
class ScanFile:
    """A live content file of the snapshot: its entry's data sequence number and partition spec."""

    file: DataFile
    spec_id: int
    data_sequence_number: int
    # The manifest it was read from (Java's ``ContentFile.manifestLocation``); not part of its identity.
    manifest_path: str | None = field(default=None, compare=False)

    @property
    def partition_key(self) -> tuple[int, tuple[object, ...]]:
        return self.spec_id, tuple(self.file.partition or ())


@dataclass
class FileScanTask:
    """One live data file and the delete files that apply to it (Java's ``FileScanTask``)."""

    data: ScanFile
    dv: ScanFile | None = None
    position_deletes: list[ScanFile] = field(default_factory=list)
    equality_deletes: list[ScanFile] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.data.file.file_size_in_bytes

    @property
    def deletes(self) -> list[ScanFile]:
        return [*([self.dv] if self.dv is not None else []), *self.position_deletes, *self.equality_deletes]

    def known_deleted_records(self) -> int:
        """Rows deleted by file-scoped deletes (a DV, or position deletes naming this file only), as
        Java's planner counts them for the delete ratio; other delete files are not counted."""
        return sum(d.file.record_count for d in self.deletes
                   if d.file.content == DataFileContent.POSITION_DELETES and referenced_data_file(d.file) is not None)


POS_DELETE_FILE_PATH_ID = 2147483546


def referenced_data_file(f: DataFile) -> str | None:
    """The one data file a position delete file applies to: its ``referenced_data_file``, or the
    path its ``file_path`` column's bounds both hold (Java's ``ContentFileUtil.referencedDataFile``)."""
    if f.content != DataFileContent.POSITION_DELETES:
        return None
    if f.referenced_data_file is not None:
        return f.referenced_data_file
    lower = (f.lower_bounds or {}).get(POS_DELETE_FILE_PATH_ID)
    upper = (f.upper_bounds or {}).get(POS_DELETE_FILE_PATH_ID)
    if lower is not None and lower == upper:
        try:
            return lower.decode()
        except UnicodeDecodeError:
            return None
    return None


def _scan_file(m: ManifestFile, e: ManifestEntry) -> ScanFile:
    seq = e.sequence_number if e.sequence_number is not None else 0  # v1: every sequence number is 0
    return ScanFile(e.data_file, m.partition_spec_id, seq, m.manifest_path)


def live_files(md: TableMetadata, snapshot: Snapshot, io: FileIO) -> tuple[list[ScanFile], list[ScanFile]]:
    """The snapshot's live data files (in manifest order) and live delete files."""
    data: list[ScanFile] = []
    deletes: list[ScanFile] = []
    for m, e in iter_entries(md, io, manifests_of(md, snapshot, io), live_only=True):
        (deletes if m.content == ManifestContent.DELETES else data).append(_scan_file(m, e))
    return data, deletes


def assign_deletes(md: TableMetadata, data: Iterable[ScanFile], deletes: Iterable[ScanFile]) -> list[FileScanTask]:
    """A task per data file, with the delete files the spec applies to it."""
    dvs: dict[str, ScanFile] = {}
    positional: dict[tuple[int, tuple[object, ...]], list[ScanFile]] = defaultdict(list)
    equality: dict[tuple[int, tuple[object, ...]], list[ScanFile]] = defaultdict(list)
    global_equality: list[ScanFile] = []
    for d in deletes:
        if d.file.is_dv:
            assert d.file.referenced_data_file is not None
            dvs[d.file.referenced_data_file] = d
        elif d.file.content == DataFileContent.POSITION_DELETES:
            positional[d.partition_key].append(d)
        elif d.file.content == DataFileContent.EQUALITY_DELETES:
            spec = md.spec_by_id(d.spec_id)
            if spec is None or spec.is_unpartitioned:
                global_equality.append(d)
            else:
                equality[d.partition_key].append(d)
    tasks = []
    for f in data:
        seq, path = f.data_sequence_number, f.file.file_path
        task = FileScanTask(f)
        dv = dvs.get(path)
        if dv is not None and seq <= dv.data_sequence_number:
            task.dv = dv
        else:
            task.position_deletes = [d for d in positional.get(f.partition_key, ())
                                     if seq <= d.data_sequence_number
                                     and referenced_data_file(d.file) in (None, path)]
        task.equality_deletes = [d for d in (*equality.get(f.partition_key, ()), *global_equality)
                                 if seq < d.data_sequence_number]
        tasks.append(task)
    return tasks


def plan_tasks(md: TableMetadata, snapshot: Snapshot, io: FileIO) -> list[FileScanTask]:
    """Every live data file of ``snapshot`` with its deletes, in manifest order."""
    data, deletes = live_files(md, snapshot, io)
    return assign_deletes(md, data, deletes)

"""Manifest lists (format v1-v3): a snapshot is a list of manifests (spec "Manifest Lists").

The new snapshot's manifests (written before the commit, their sequence numbers unassigned)
come first, then every manifest of the branch head that they do not replace, as Java's
``SnapshotProducer`` orders them. The list writer assigns the snapshot's sequence number to the
new manifests and, in v3, ``first_row_id`` ranges to data manifests that lack one.

Deleted files (Java's ``MergingSnapshotProducer.delete`` through ``ManifestFilterManager``): each
head manifest holding one is rewritten at every attempt with its live entries, those files
DELETED by the new snapshot (sequence numbers kept), the others EXISTING; the rewritten manifests
replace the originals in the list. Every file to delete must be live on the head. A commit that
deletes data files with ``Deletes.drop_older`` (a rewrite of data files) also drops, as Java's
does, the delete files older than every live data file (:func:`oldest_live_data`).

An append (add-files, a cherry-picked append) writes one manifest of ADDED entries per partition
spec, ``<commit>-m<i>.avro`` with ``i`` from 0 (:meth:`ManifestListLayout.write_appended`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest, write_manifest_list
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import UNKNOWN
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO, join
from icectl.table.layout import Attempt, DeletedKey, Deletes, SnapshotLayout, WrittenIndex, deleted_key
from icectl.table.scan import iter_entries, manifests_of

HeadManifests = Callable[[TableMetadata, Snapshot], list[ManifestFile]]


def manifest_list_path(metadata_dir: str, snapshot_id: int, attempt: int, commit_id: str) -> str:
    """Java's name for a snapshot's manifest list: ``snap-<id>-<attempt>-<commit uuid>.avro``."""
    return join(metadata_dir, f"snap-{snapshot_id}-{attempt}-{commit_id}.avro")


def manifest_path(metadata_dir: str, commit_id: str, index: int) -> str:
    """Java's name for the ``index``-th manifest a commit writes: ``<commit uuid>-m<index>.avro``."""
    return join(metadata_dir, f"{commit_id}-m{index}.avro")


def as_existing(e: ManifestEntry) -> ManifestEntry:
    """The entry as a rewritten manifest holds it: EXISTING, its own snapshot id and sequence
    numbers, and (v3 data) its first_row_id, all explicit (already inherited by the reader)."""
    return ManifestEntry(ManifestEntryStatus.EXISTING, e.snapshot_id, e.sequence_number, e.file_sequence_number,
                         e.data_file)


LiveEntries = dict[str, tuple[ManifestFile, list[ManifestEntry]]]


def _live_entries(md: TableMetadata, head: Snapshot | None, io: FileIO,
                  deletes: Deletes) -> tuple[list[ManifestFile], LiveEntries]:
    """The head's manifests, and each one's live entries; raises ``deletes.missing`` when a file of
    ``deletes`` is not live on the head."""
    wanted = deletes.keys()
    manifests = manifests_of(md, head, io) if head is not None else []
    by_manifest: LiveEntries = {}
    found: set[tuple[str, int, str | None]] = set()
    for m, e in iter_entries(md, io, manifests, live_only=True):
        by_manifest.setdefault(m.manifest_path, (m, []))[1].append(e)
        key = deleted_key(e.data_file)
        if key in wanted:
            found.add(key)
    missing = sorted(k[0] for k in wanted.keys() - found)
    if missing:
        raise deletes.missing(missing)
    return manifests, by_manifest


def holding(md: TableMetadata, head: Snapshot | None, io: FileIO, deletes: Deletes) -> LiveEntries:
    """The head's manifests holding a file of ``deletes``, each with its live entries; raises
    ``deletes.missing`` when a file is not live on the head."""
    wanted = deletes.keys()
    return {path: (m, entries) for path, (m, entries) in _live_entries(md, head, io, deletes)[1].items()
            if any(deleted_key(e.data_file) in wanted for e in entries)}


def may_hold(md: TableMetadata, m: ManifestFile, spec_id: int, values: tuple[object, ...]) -> bool:
    """Java's ``ManifestFileUtil.canContainAny`` for one partition: whether the manifest's partition
    summaries may hold a file of spec ``spec_id`` in partition ``values``."""
    if spec_id != m.partition_spec_id:
        return False
    if m.partitions is None:
        return True
    if len(m.partitions) != len(values):
        return False
    fields = md.partition_type(m.partition_spec_id).fields
    for summary, f, value in zip(m.partitions, fields, values, strict=False):
        if value is None:
            if not summary.contains_null:
                return False
            continue
        if isinstance(value, float) and math.isnan(value):
            if summary.contains_nan is False:
                return False
            continue
        if f.field_type == UNKNOWN:
            continue
        if summary.lower_bound is None:
            return False
        lower, upper = summary.decoded_bounds(f.field_type)
        try:
            if value < lower or (upper is not None and value > upper):
                return False
        except TypeError:  # Java: a value not of the field's class is not contained
            return False
    return True


def older_scanned(md: TableMetadata, manifests: Sequence[ManifestFile], deletes: Deletes, by_manifest: LiveEntries,
                  wanted: Collection[DeletedKey]) -> Callable[[ManifestFile], bool] | None:
    """Which delete manifests Java's commit reads for delete files older than the live data
    (``ManifestFilterManager.canContainDeletedFiles``), None: none. With delete files to delete (a
    v3 rewrite's DVs): the manifests they were read from, when the head still lists them all
    (``canTrustManifestReferences``), else those whose partition summaries may hold one of theirs;
    without, when it deletes data files: every one."""
    if not deletes.drop_older:
        return None
    explicit = {(m.partition_spec_id, tuple(e.data_file.partition or ()))
                for m, entries in by_manifest.values() for e in entries
                if e.data_file.content != DataFileContent.DATA and deleted_key(e.data_file) in wanted}
    if explicit:
        trusted = deletes.delete_manifests
        listed = {m.manifest_path for m in manifests if m.content == ManifestContent.DELETES}
        if trusted and trusted <= listed:
            return lambda m: m.manifest_path in trusted
        return lambda m: any(may_hold(md, m, spec_id, values) for spec_id, values in explicit)
    if any(f.content == DataFileContent.DATA for f in deletes.files):
        return lambda m: True
    return None


def oldest_live_data(md: TableMetadata, manifests: Sequence[ManifestFile], by_manifest: LiveEntries,
                     wanted: Collection[DeletedKey]) -> int:
    """Java's ``minDataSequenceNumber`` in ``MergingSnapshotProducer.apply``: the smallest
    ``min_sequence_number`` of the head's data manifests once filtered (a manifest holding a deleted
    file: of its entries left live; one left with none counts not), and at most the table's last
    sequence number. Every live data file's data sequence number is at least that."""
    low = md.last_sequence_number
    for m in manifests:
        if m.content != ManifestContent.DATA:
            continue
        held = by_manifest.get(m.manifest_path)
        if held is not None and any(deleted_key(e.data_file) in wanted for e in held[1]):
            left = [e.sequence_number for e in held[1]
                    if deleted_key(e.data_file) not in wanted and e.sequence_number is not None]
            seq = min(left) if left else UNASSIGNED_SEQ
        else:
            seq = m.min_sequence_number
        if seq != UNASSIGNED_SEQ:
            low = min(low, seq)
    return low


def _may_hold_live(m: ManifestFile) -> bool:
    """Java's ``hasAddedFiles() || hasExistingFiles()`` on the list's counts (unknown: may)."""
    return not (m.added_files_count == 0 and m.existing_files_count == 0)


@dataclass
class ManifestListLayout(SnapshotLayout):
    """The head's manifests, minus ``replaced``, after ``added``."""

    snapshot_field: ClassVar[str] = "manifest_list"

    commit_id: str  # names the commit's manifests and lists (a uuid)
    added: Sequence[ManifestFile]  # this snapshot's manifests, written before the commit
    replaced: Collection[str] = ()  # paths of the head's manifests the added ones replace
    # The head's manifests; the default reads them. An operation passes its own to check them
    # (and raise when its change no longer applies) or to reuse what it read when planning.
    head_manifests: HeadManifests | None = None
    _rewritten: int = field(default=0, init=False, repr=False)  # manifests rewritten by earlier attempts

    def write(self, io: FileIO, attempt: Attempt, deletes: Deletes | None = None) -> WrittenIndex:
        base, head = attempt.base, attempt.head
        if head is None:
            current: list[ManifestFile] = []
        elif self.head_manifests is not None:
            current = self.head_manifests(base, head)
        else:
            current = manifests_of(base, head, io)
        rewritten, files, dropped = (self._rewrite_deletes(io, attempt, deletes) if deletes and deletes.files
                                     else ({}, [], []))
        replaced = set(self.replaced) | rewritten.keys()
        kept = [m for m in current if m.manifest_path not in replaced]
        result = write_manifest_list([*self.added, *rewritten.values(), *kept], format_version=base.format_version,
                                     snapshot_id=attempt.snapshot_id, parent_snapshot_id=attempt.parent_id,
                                     sequence_number=attempt.sequence_number, first_row_id=attempt.first_row_id)
        path = manifest_list_path(attempt.metadata_dir, attempt.snapshot_id, attempt.number, self.commit_id)
        io.write(path, result.data)
        return WrittenIndex(path, result.added_rows, len(kept), tuple(files), tuple(dropped))

    def _rewrite_deletes(self, io: FileIO, attempt: Attempt,
                         deletes: Deletes) -> tuple[dict[str, ManifestFile], list[str], list[tuple[int, DataFile]]]:
        """The head's manifests holding a deleted file, rewritten for this attempt (old path -> new
        manifest), the paths written, and the older delete files dropped (``Deletes.drop_older``)."""
        base, wanted = attempt.base, deletes.keys()
        manifests, by_manifest = _live_entries(base, attempt.head, io, deletes)
        scanned = older_scanned(base, manifests, deletes, by_manifest, wanted)
        older = oldest_live_data(base, manifests, by_manifest, wanted) if scanned is not None else 0

        def dropped(m: ManifestFile, e: ManifestEntry) -> bool:
            # ManifestFilterManager: a live delete entry with 0 < data sequence number < the oldest live data's
            seq = e.sequence_number
            return (m.content == ManifestContent.DELETES and seq is not None and 0 < seq < older
                    and _may_hold_live(m) and scanned is not None and scanned(m))

        out: dict[str, ManifestFile] = {}
        written: list[str] = []
        gone: list[tuple[int, DataFile]] = []
        for old, (m, entries) in by_manifest.items():
            marked = [deleted_key(e.data_file) in wanted or dropped(m, e) for e in entries]
            if not any(marked):
                continue
            spec = base.spec_by_id(m.partition_spec_id)
            assert spec is not None
            rows = [ManifestEntry(ManifestEntryStatus.DELETED, attempt.snapshot_id, e.sequence_number,
                                  e.file_sequence_number, e.data_file)
                    if mark else as_existing(e) for e, mark in zip(entries, marked, strict=True)]
            gone.extend((m.partition_spec_id, e.data_file) for e, mark in zip(entries, marked, strict=True)
                        if mark and deleted_key(e.data_file) not in wanted)
            result = write_manifest(rows, schema=base.schema(), spec=spec, partition_type=base.partition_type(spec),
                                    format_version=base.format_version, content=m.content,
                                    snapshot_id=attempt.snapshot_id)
            path = manifest_path(attempt.metadata_dir, self.commit_id, len(self.added) + self._rewritten)
            self._rewritten += 1
            written.append(path)
            io.write(path, result.data)
            # A new manifest of this snapshot (its sequence number assigned at commit); no first_row_id: a
            # rewritten data manifest gets a new range, as in Java (its EXISTING entries keep their own).
            out[old] = result.to_manifest_file(path, len(result.data), m.partition_spec_id, attempt.snapshot_id,
                                               UNASSIGNED_SEQ)
        return out, written, gone

    def would_rewrite(self, io: FileIO, md: TableMetadata, head: Snapshot | None, deletes: Deletes) -> int:
        """How many head manifests :meth:`write` would rewrite for ``deletes`` (for a dry run)."""
        return len(holding(md, head, io, deletes)) if deletes.files and head is not None else 0

    def write_appended(self, io: FileIO, md: TableMetadata, folder: str, files: dict[int, list[DataFile]],
                       snapshot_id: int, written: list[str], *, data_sequence_number: int | None = None,
                       content: ManifestContent = ManifestContent.DATA,
                       sequence_numbers: Mapping[str, int] | None = None) -> None:
        """See :meth:`SnapshotLayout.write_appended`; here also ``content`` (DELETES: the files are
        delete files, in delete manifests) and ``sequence_numbers`` (file path -> its data sequence
        number, over ``data_sequence_number``: Java's ``RewriteFiles.addFile(file, seq)`` per file)."""
        added = []
        for i, (spec_id, fs) in enumerate(sorted(files.items())):
            spec = md.spec_by_id(spec_id)
            assert spec is not None
            path = manifest_path(folder, self.commit_id, i)
            written.append(path)
            seqs = sequence_numbers or {}
            entries = [ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id,
                                     seqs.get(f.file_path, data_sequence_number), None, f) for f in fs]
            result = write_manifest(entries, schema=md.schema(), spec=spec, partition_type=md.partition_type(spec),
                                    format_version=md.format_version, content=content,
                                    snapshot_id=snapshot_id)
            io.write(path, result.data)
            added.append(result.to_manifest_file(path, len(result.data), spec_id, snapshot_id, UNASSIGNED_SEQ))
        self.added = added

    def appended_paths(self, md: TableMetadata, folder: str, files: dict[int, list[DataFile]], snapshot_id: int,
                       more_manifests: int = 0) -> list[str]:
        return [*(manifest_path(folder, self.commit_id, i) for i in range(len(files) + more_manifests)),
                manifest_list_path(folder, snapshot_id, 1, self.commit_id)]

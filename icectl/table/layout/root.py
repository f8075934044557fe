"""Root manifests (format v4): a snapshot is one root manifest (layout page section 8).

A commit writes one new root, built from the branch head's root on every attempt (sequence
number and row ids may move, so a concurrent writer is never overwritten). Its live entries are
carried over as EXISTING (the head's DELETED entries, which described the head's own change, are
dropped); then

* leaves that replace others (compaction; their rows keep their row ids) come first, ADDED, and
  the entries they replace leave the root without a trace;
* a removed root-level file becomes a DELETED entry;
* a removed row of a leaf goes into that leaf's manifest DV: a new ADDED inline DV with the union
  of the old positions and the new ones, and the old DV as a DELETED entry. No leaf is rewritten;
* files added at the root are ADDED entries with an explicit ``first_row_id`` from
  ``next-row-id``; a large append instead adds ONE new leaf (written once, before the commit)
  as an ADDED DATA_MANIFEST entry whose ``first_row_id`` its rows inherit.

A change that no longer applies (the file or leaf is gone meanwhile) fails with a conflict and
nothing of ours stays referenced.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pyroaring import BitMap64

from icectl.codec.root_manifest import (
    DATA,
    DELETES,
    ROOT,
    ContentEntry,
    ContentStats,
    ContentType,
    ManifestStats,
    V4Manifest,
    VersionInfo,
    content_entry_of,
    live_manifest_dvs,
    manifest_dv_entry,
    read_v4_manifest,
    write_v4_manifest,
)
from icectl.errors import CommitConflictError, IcectlError, RefusedError
from icectl.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.schema import IcebergType, StructType
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO, join
from icectl.table.layout import Attempt, Deletes, SnapshotLayout, WrittenIndex
from icectl.table.scan_v4 import dv_positions, partition_field_types, read_leaf, read_root, tree_manifests

EXISTING, ADDED, DELETED = ManifestEntryStatus.EXISTING, ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED


def appends_to_leaf(md: TableMetadata, file_count: int) -> bool:
    """Whether a v4 append of ``file_count`` files goes into new leaves rather than the root."""
    return file_count > root_max_added_files(md)


def root_max_added_files(md: TableMetadata) -> int:
    """Files one commit may add as root-level entries before they go into a new leaf."""
    return max(0, V4_ROOT_MAX_ADDED_FILES.parse(md.properties))


def column_types(md: TableMetadata) -> dict[int, IcebergType]:
    """Column id -> type over every schema, newest first (old manifests keep dropped columns' bounds)."""
    out: dict[int, IcebergType] = {}
    for schema in sorted(md.schemas, key=lambda s: -s.schema_id):
        for fid in schema.field_ids():
            f = schema.find_field(fid)
            if f is not None:
                out.setdefault(fid, f.field_type)
    return out


RootFileKey = tuple[str, str | None]


def root_file_key(location: str, content_type: ContentType, referenced_file: str | None) -> RootFileKey:
    """Which root-level file entry this is: its location, and for a delete file the data file it
    refers to, since the DVs in one Puffin file share their location (one DV per data file)."""
    return location, referenced_file if content_type != ContentType.DATA else None


def _key(e: ContentEntry) -> RootFileKey:
    return root_file_key(e.location, e.content_type, e.referenced_file)


def root_path(metadata_dir: str, snapshot_id: int) -> str:
    """A new root's name; a fresh one per attempt."""
    return join(metadata_dir, f"root-{snapshot_id}-{uuid.uuid4()}.avro")


def leaf_entry(location: str, size: int, spec_id: int, stats: ManifestStats, content_type: ContentType,
               content_stats: ContentStats | None) -> ContentEntry:
    """The root entry of a new leaf (its version_info is completed when the root is built)."""
    return ContentEntry(content_type=content_type, location=location, file_format="avro", partition_spec_id=spec_id,
                        record_count=stats.added_rows_count + stats.existing_rows_count,
                        version_info=VersionInfo(ADDED), file_size_in_bytes=size, manifest_stats=stats,
                        content_stats=content_stats)


def write_leaf(io: FileIO, md: TableMetadata, path: str, entries: list[ContentEntry], content: ManifestContent,
               spec_id: int, *, partition_type: StructType | None = None,
               field_types: Mapping[int, IcebergType] | None = None) -> ContentEntry:
    """Write a v4 leaf of ``entries`` (one spec, one content) and return its root entry.
    ``partition_type`` and ``field_types`` default to the table's; pass them to compute them once."""
    result = write_v4_manifest(entries, content=DATA if content == ManifestContent.DATA else DELETES,
                               partition_type=partition_type or md.unified_partition_type(),
                               field_types=field_types if field_types is not None else column_types(md))
    io.write(path, result.data)
    kind = ContentType.DATA_MANIFEST if content == ManifestContent.DATA else ContentType.DELETE_MANIFEST
    return leaf_entry(path, len(result.data), spec_id, result.stats, kind, result.content_stats)


@dataclass
class NewLeaf:
    """A leaf written before the commit whose rows get row ids from the commit."""

    entry: ContentEntry  # ADDED; version_info and first_row_id filled in per attempt
    added_rows: int  # row ids it needs (data leaves)


def head_root(md: TableMetadata, head: Snapshot | None, io: FileIO, branch: str) -> V4Manifest:
    """The root of ``head`` (an empty root for an empty branch)."""
    if head is None:
        return V4Manifest([], {})
    if not head.root_manifest:
        raise RefusedError(f"the head of branch '{branch}' (snapshot {head.snapshot_id}) has no root manifest",
                           hint="run 'icectl upgrade --to 4' so every branch head gets one")
    return read_root(md, head, io)


def _carried(e: ContentEntry, status: ManifestEntryStatus, snapshot_id: int | None = None) -> ContentEntry:
    vi = e.version_info
    sid = vi.snapshot_id if snapshot_id is None else snapshot_id
    return dataclasses.replace(e, version_info=VersionInfo(status, sid, vi.sequence_number,
                                                           vi.file_sequence_number))


def encode_root(md: TableMetadata, entries: list[ContentEntry], snapshot_id: int, sequence_number: int,
                parent_snapshot_id: int | None) -> bytes:
    """A root's bytes, checked to decode to exactly ``entries`` (a writer bug must not reach the table)."""
    data = write_v4_manifest(entries, content=ROOT, partition_type=md.unified_partition_type(),
                             snapshot_id=snapshot_id, sequence_number=sequence_number,
                             parent_snapshot_id=parent_snapshot_id).data
    decoded = read_v4_manifest(data, partition_types=partition_field_types(md)).entries
    if [(e.content_type, e.location, e.status, e.referenced_file) for e in decoded] != \
            [(e.content_type, e.location, e.status, e.referenced_file) for e in entries]:
        raise IcectlError("the new root does not decode to the entries written; nothing was committed")
    return data


@dataclass
class RootLayout(SnapshotLayout):
    """The head's root with one commit's change applied (see the module docstring)."""

    snapshot_field: ClassVar[str] = "root_manifest"

    branch: str
    added: list[ContentEntry] = field(default_factory=list)  # root-level files
    new_leaves: list[NewLeaf] = field(default_factory=list)
    removed_root_files: set[RootFileKey] = field(default_factory=set)  # root-level entries, by root_file_key
    removed_leaf_rows: dict[str, BitMap64] = field(default_factory=dict)  # leaf -> ordinals
    replacing_leaves: list[ContentEntry] = field(default_factory=list)  # ADDED, rows keep their row ids
    replaced: Callable[[ContentEntry], bool] | None = None  # live head entries the replacing leaves replace
    # The head's root; the default reads it. An operation passes its own to check it (and raise
    # when its change no longer applies) or to reuse what it read when planning.
    head_root: Callable[[TableMetadata, Snapshot], V4Manifest] | None = None

    def write(self, io: FileIO, attempt: Attempt, deletes: Deletes | None = None) -> WrittenIndex:
        base, head = attempt.base, attempt.head
        if base.format_version < 4:
            raise RefusedError(f"table {attempt.table} is not format v4 anymore")
        if head is not None and self.head_root is not None:
            root = self.head_root(base, head)
        else:
            root = head_root(base, head, io, self.branch)
        layout = self._with_deletes(io, base, head, deletes) if deletes and deletes.files else self
        entries, added_rows, kept = layout.entries(base, root, attempt.snapshot_id, attempt.sequence_number, io)
        data = encode_root(base, entries, attempt.snapshot_id, attempt.sequence_number, attempt.parent_id)
        path = root_path(attempt.metadata_dir, attempt.snapshot_id)
        io.write(path, data)
        return WrittenIndex(path, added_rows, kept)

    def _with_deletes(self, io: FileIO, base: TableMetadata, head: Snapshot | None, deletes: Deletes) -> RootLayout:
        """This change with ``deletes`` found on the head: a root-level file becomes a DELETED root
        entry, a leaf's file a position in that leaf's manifest DV (layout page section 8)."""
        wanted = {root_file_key(f.file_path, ContentType(int(f.content)), f.referenced_data_file): f.file_path
                  for f in deletes.files}
        root_files = set(self.removed_root_files)
        leaf_rows = {leaf: BitMap64(rows) for leaf, rows in self.removed_leaf_rows.items()}
        found: set[RootFileKey] = set()
        for m in tree_manifests(base, head, io) if head is not None else []:
            if m.root_entries is not None:
                rows: list[tuple[int, ManifestEntry]] = [(-1, e) for e in m.root_entries if e.is_live]
            else:
                dv = m.deleted_positions or BitMap64()
                rows = [(i, e) for i, e in enumerate(read_leaf(base, io, m, base.partition_type(m.partition_spec_id)))
                        if e.is_live and i not in dv]
            for i, e in rows:
                f = e.data_file
                key = root_file_key(f.file_path, ContentType(int(f.content)), f.referenced_data_file)
                if key not in wanted:
                    continue
                found.add(key)
                if i < 0:
                    root_files.add(key)
                else:
                    leaf_rows.setdefault(m.manifest_path, BitMap64()).add(i)
        missing = sorted(wanted[k] for k in wanted.keys() - found)
        if missing:
            raise deletes.missing(missing)
        return dataclasses.replace(self, removed_root_files=root_files, removed_leaf_rows=leaf_rows)

    def write_appended(self, io: FileIO, md: TableMetadata, folder: str, files: dict[int, list[DataFile]],
                       snapshot_id: int, written: list[str]) -> None:
        to_leaf = appends_to_leaf(md, sum(map(len, files.values())))
        for spec_id, fs in sorted(files.items()):
            ptype = md.partition_type(spec_id)
            root_entries = [content_entry_of(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f), spec_id,
                                             ptype) for f in fs]
            if not to_leaf:
                self.added.extend(root_entries)
                continue
            path = join(folder, f"{uuid.uuid4()}-m{len(self.new_leaves)}.avro")
            written.append(path)
            leaf = write_leaf(io, md, path, root_entries, ManifestContent.DATA, spec_id)
            assert leaf.manifest_stats is not None
            self.new_leaves.append(NewLeaf(leaf, leaf.manifest_stats.added_rows_count))

    def appended_paths(self, md: TableMetadata, folder: str, files: dict[int, list[DataFile]], snapshot_id: int,
                       more_manifests: int = 0) -> list[str]:
        leaves = len(files) if appends_to_leaf(md, sum(map(len, files.values()))) else 0
        return [*(join(folder, f"<uuid>-m{i}.avro") for i in range(leaves)),
                join(folder, f"root-{snapshot_id}-<uuid>.avro")]

    def entries(self, base: TableMetadata, root: V4Manifest, snapshot_id: int, seq: int,
                io: FileIO) -> tuple[list[ContentEntry], int, int]:
        """The new root's entries, the number of row ids they assign (from ``base.next_row_id``) and
        the number of live leaves carried over."""
        live = {_key(e): e for e in root.entries if e.is_live and e.is_file}
        leaves = {e.location: e for e in root.entries if e.is_live and e.is_manifest}
        gone = self.removed_root_files - live.keys()
        if gone:
            raise CommitConflictError(f"{min(gone)[0]} is no longer a live root-level file of the branch head",
                                      hint="another commit changed it; run the command again")
        old_dvs = live_manifest_dvs(root.entries)
        out = [dataclasses.replace(e, version_info=VersionInfo(ADDED, snapshot_id, seq, seq))
               for e in self.replacing_leaves]
        kept = 0
        for e in root.entries:
            if not e.is_live or (self.replaced is not None and self.replaced(e)):
                continue  # the head's own DELETED rows are not carried forward
            if e.is_file and _key(e) in self.removed_root_files:
                out.append(_carried(e, DELETED, snapshot_id))
            elif e.is_manifest_dv and e.referenced_file in self.removed_leaf_rows:
                out.append(_carried(e, DELETED, snapshot_id))
            else:
                kept += e.is_manifest
                out.append(_carried(e, EXISTING))
        for leaf, positions in sorted(self.removed_leaf_rows.items()):
            ref = leaves.get(leaf)
            if ref is None:
                raise CommitConflictError(f"leaf manifest {leaf} is no longer part of the branch head",
                                          hint="another commit (e.g. compaction) rewrote it; run the command again")
            old = dv_positions(old_dvs[leaf], io) if leaf in old_dvs else BitMap64()
            if old & positions:
                raise CommitConflictError(f"a file of leaf {leaf} was already removed by another commit",
                                          hint="run the command again")
            out.append(manifest_dv_entry(leaf, ref.file_size_in_bytes or 0, old | positions, snapshot_id=snapshot_id,
                                         sequence_number=seq))
        next_row_id = base.next_row_id
        for e in self.added:
            row_id = None
            if e.content_type == ContentType.DATA:
                row_id, next_row_id = next_row_id, next_row_id + e.record_count
            out.append(dataclasses.replace(e, version_info=VersionInfo(ADDED, snapshot_id, seq, seq),
                                           first_row_id=row_id))
        for new_leaf in self.new_leaves:
            e = new_leaf.entry
            ms = e.manifest_stats
            assert ms is not None
            row_id = None
            if e.content_type == ContentType.DATA_MANIFEST:
                row_id, next_row_id = next_row_id, next_row_id + new_leaf.added_rows
            min_seq = seq if ms.min_sequence_number < 0 else ms.min_sequence_number
            out.append(dataclasses.replace(e, version_info=VersionInfo(ADDED, snapshot_id, seq, seq),
                                           first_row_id=row_id,
                                           manifest_stats=dataclasses.replace(ms, min_sequence_number=min_seq)))
        return out, next_row_id - base.next_row_id, kept

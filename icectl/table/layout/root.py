"""Root manifests (format v4 as the spec merged it): a snapshot is one root manifest.

A commit writes one new root, built from the branch head's root on every attempt (sequence
number and row ids may move, so a concurrent writer is never overwritten). Its live entries are
carried over as EXISTING (the head's DELETED and REPLACED rows, which described the head's own
change, are dropped; a leaf entry's manifest DV and ``modified_snapshot_id`` stay, its
deleted/replaced positions, which describe only the snapshot that wrote them, go); then

* leaves that replace others (compaction; their rows keep their row ids) come first, ADDED, and
  the entries they replace leave the root without a trace;
* a removed root-level data file becomes a DELETED row (its colocated DV goes with it);
* a removed row of a leaf goes into that leaf's manifest DV: the leaf's root entry becomes
  MODIFIED, ``manifest_info.dv`` the union of the old positions and the new ones (Mumbling),
  ``tracking.deleted_positions`` the new ones and ``modified_snapshot_id`` this snapshot. No
  leaf is rewritten; carried-over v1-v3 manifests take manifest DVs the same way;
* files added at the root are ADDED rows with an explicit ``first_row_id`` from
  ``next-row-id``; a large append instead adds ONE new Parquet leaf per spec (written once,
  before the commit) as an ADDED DATA_MANIFEST entry whose ``first_row_id`` its rows inherit.

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

from icectl.codec.mumbling import encode_mumbling
from icectl.codec.v4_manifest import read_v4_manifest, write_v4_manifest
from icectl.codec.v4_schema import MANIFEST_SUFFIX
from icectl.errors import CommitConflictError, IcectlError, RefusedError, UnsupportedError
from icectl.spec.manifest import DataFile, DataFileContent, ManifestEntry, ManifestEntryStatus
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import unified_partition_type
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.schema import IcebergType, StructType
from icectl.spec.snapshots import Snapshot
from icectl.spec.tracked_file import (
    ContentType,
    EntryStatus,
    ManifestInfo,
    TrackedFile,
    Tracking,
    V4Manifest,
    manifest_info_of,
    tracked_file_of,
)
from icectl.storage import FileIO, join
from icectl.table.layout import Attempt, Deletes, SnapshotLayout, WrittenIndex
from icectl.table.scan_v4 import (
    column_field_types,
    manifest_dv,
    partition_field_types,
    read_leaf,
    read_root,
    tree_manifests,
)

EXISTING, ADDED, DELETED, MODIFIED = EntryStatus.EXISTING, EntryStatus.ADDED, EntryStatus.DELETED, EntryStatus.MODIFIED


def appends_to_leaf(md: TableMetadata, file_count: int) -> bool:
    """Whether a v4 append of ``file_count`` files goes into new leaves rather than the root."""
    return file_count > root_max_added_files(md)


def root_max_added_files(md: TableMetadata) -> int:
    """Files one commit may add as root-level entries before they go into a new leaf."""
    return max(0, V4_ROOT_MAX_ADDED_FILES.parse(md.properties))


def column_types(md: TableMetadata) -> dict[int, IcebergType]:
    """Column id -> type over every schema, newest first (old manifests keep dropped columns' bounds)."""
    return column_field_types(md)


def column_names(md: TableMetadata) -> dict[int, str]:
    """Column id -> its flattened name (``a_b`` for ``a.b``), for the names of content stats structs."""
    out: dict[int, str] = {}
    for schema in sorted(md.schemas, key=lambda s: -s.schema_id):
        for fid in schema.field_ids():
            name = schema.column_name(fid)
            out.setdefault(fid, (name or f"field_{fid}").replace(".", "_"))
    return out


def union_partition_type(md: TableMetadata) -> StructType:
    """The ``partition`` type of v4 rows: every spec's fields by id, all optional (Java's union)."""
    return unified_partition_type(md.partition_specs, md.schema(), md.schemas)


def root_path(metadata_dir: str, snapshot_id: int) -> str:
    """A new root's name; a fresh one per attempt."""
    return join(metadata_dir, f"root-{snapshot_id}-{uuid.uuid4()}{MANIFEST_SUFFIX}")


def leaf_path(metadata_dir: str, commit_uuid: str, n: int) -> str:
    """A new leaf's name, as Java names manifests."""
    return join(metadata_dir, f"{commit_uuid}-m{n}{MANIFEST_SUFFIX}")


def leaf_entry(location: str, size: int, spec_id: int, info: ManifestInfo, rows: int) -> TrackedFile:
    """The root entry of a new v4 leaf (its tracking is completed when the root is built)."""
    return TrackedFile(tracking=_tracking(ADDED), content_type=ContentType.DATA_MANIFEST, location=location,
                       file_format="parquet", record_count=rows, file_size_in_bytes=size, spec_id=spec_id,
                       manifest_info=info)


def _tracking(status: EntryStatus) -> Tracking:
    return Tracking(status)


def encode_leaf(md: TableMetadata, rows: list[TrackedFile], *, partition_type: StructType | None = None,
                field_types: Mapping[int, IcebergType] | None = None) -> bytes:
    """A v4 leaf's bytes (data files of one spec)."""
    return write_v4_manifest(rows, root=False, partition_type=partition_type or union_partition_type(md),
                             column_types=field_types if field_types is not None else column_types(md),
                             schema_id=md.current_schema_id, column_names=column_names(md)).data


def write_leaf(io: FileIO, md: TableMetadata, path: str, rows: list[TrackedFile], spec_id: int, *,
               partition_type: StructType | None = None,
               field_types: Mapping[int, IcebergType] | None = None) -> TrackedFile:
    """Write a v4 leaf of ``rows`` (data files of one spec) and return its root entry.
    ``partition_type`` and ``field_types`` default to the table's; pass them to compute them once."""
    data = encode_leaf(md, rows, partition_type=partition_type, field_types=field_types)
    io.write(path, data)
    return leaf_entry(path, len(data), spec_id, manifest_info_of(rows), len(rows))


@dataclass
class NewLeaf:
    """A leaf written before the commit whose rows get row ids from the commit."""

    entry: TrackedFile  # ADDED; tracking completed per attempt
    added_rows: int  # row ids it needs


def head_root(md: TableMetadata, head: Snapshot | None, io: FileIO, branch: str) -> V4Manifest:
    """The root of ``head`` (an empty root for an empty branch)."""
    if head is None:
        return V4Manifest([], {})
    if not head.root_manifest:
        raise RefusedError(f"the head of branch '{branch}' (snapshot {head.snapshot_id}) has no root manifest",
                           hint="run 'icectl upgrade --to 4' so every branch head gets one")
    return read_root(md, head, io)


def carried(e: TrackedFile) -> TrackedFile:
    """A live head row in the next root: EXISTING; a manifest entry keeps its manifest DV and
    ``modified_snapshot_id`` but not the positions that changed in the head's snapshot."""
    return e.with_tracking(status=EXISTING, deleted_positions=None, replaced_positions=None)


def encode_root(md: TableMetadata, entries: list[TrackedFile], snapshot_id: int, sequence_number: int,
                parent_snapshot_id: int | None) -> bytes:
    """A root's bytes, checked to decode to exactly ``entries`` (a writer bug must not reach the table)."""
    del snapshot_id, sequence_number, parent_snapshot_id  # v4 key-value metadata is schema-id and format-version
    data = write_v4_manifest(entries, root=True, partition_type=union_partition_type(md),
                             column_types=column_types(md), schema_id=md.current_schema_id,
                             column_names=column_names(md)).data
    decoded = read_v4_manifest(data, partition_types=partition_field_types(md), column_types=column_types(md),
                               root=True).entries
    if [(e.content_type, e.location, e.status, e.tracking.first_row_id) for e in decoded] != \
            [(e.content_type, e.location, e.status, e.tracking.first_row_id) for e in entries]:
        raise IcectlError("the new root does not decode to the entries written; nothing was committed")
    return data


def _positions(e: TrackedFile) -> BitMap64:
    dv = manifest_dv(e)
    return dv if dv is not None else BitMap64()


@dataclass
class RootLayout(SnapshotLayout):
    """The head's root with one commit's change applied (see the module docstring)."""

    snapshot_field: ClassVar[str] = "root_manifest"

    branch: str
    added: list[TrackedFile] = field(default_factory=list)  # root-level data files
    new_leaves: list[NewLeaf] = field(default_factory=list)
    removed_root_files: set[str] = field(default_factory=set)  # root-level data files, by location
    removed_leaf_rows: dict[str, BitMap64] = field(default_factory=dict)  # leaf -> ordinals
    replacing_leaves: list[TrackedFile] = field(default_factory=list)  # ADDED, rows keep their row ids
    replaced: Callable[[TrackedFile], bool] | None = None  # live head entries the replacing leaves replace
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
        """This change with ``deletes`` found on the head: a root-level data file becomes a DELETED
        row, a leaf's file a position in that leaf's manifest DV. A colocated DV goes with its data
        file; on its own it cannot be removed (that is a REPLACED/MODIFIED pair icectl does not write)."""
        wanted = {(f.file_path, f.referenced_data_file if f.content != DataFileContent.DATA else None): f
                  for f in deletes.files}
        data_removed = {path for path, ref in wanted if ref is None}
        root_files = set(self.removed_root_files)
        leaf_rows = {leaf: BitMap64(rows) for leaf, rows in self.removed_leaf_rows.items()}
        found: set[tuple[str, str | None]] = set()
        for m in tree_manifests(base, head, io) if head is not None else []:
            if m.root_entries is not None:
                rows: list[tuple[int, ManifestEntry]] = [(-1, e) for e in m.root_entries if e.is_live]
            else:
                dv = m.deleted_positions or BitMap64()
                rows = [(i, e) for i, e in enumerate(read_leaf(base, io, m, base.partition_type(m.partition_spec_id)))
                        if e.is_live and i not in dv]
            for i, e in rows:
                f = e.data_file
                key = (f.file_path, f.referenced_data_file if f.content != DataFileContent.DATA else None)
                if key not in wanted:
                    continue
                found.add(key)
                if i >= 0:
                    leaf_rows.setdefault(m.manifest_path, BitMap64()).add(i)
                elif f.content == DataFileContent.DATA:
                    root_files.add(f.file_path)
                elif f.referenced_data_file not in data_removed:  # a colocated DV without its data file
                    raise RefusedError(f"deletion vector {f.file_path} of {f.referenced_data_file} is colocated with "
                                       "its data file in the v4 root; icectl removes it only with the data file",
                                       hint="remove the data file too, or leave the DV")
        missing = sorted(wanted[k].file_path for k in wanted.keys() - found)
        if missing:
            raise deletes.missing(missing)
        return dataclasses.replace(self, removed_root_files=root_files, removed_leaf_rows=leaf_rows)

    def write_appended(self, io: FileIO, md: TableMetadata, folder: str, files: dict[int, list[DataFile]],
                       snapshot_id: int, written: list[str], *, data_sequence_number: int | None = None) -> None:
        if data_sequence_number is not None:
            raise UnsupportedError("v4: files keeping an earlier data sequence number are not written yet")
        to_leaf = appends_to_leaf(md, sum(map(len, files.values())))
        commit_uuid = str(uuid.uuid4())
        for spec_id, fs in sorted(files.items()):
            ptype = md.partition_type(spec_id)
            rows = [tracked_file_of(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f), spec_id, ptype)
                    for f in fs]
            if not to_leaf:
                self.added.extend(rows)
                continue
            path = leaf_path(folder, commit_uuid, len(self.new_leaves))
            written.append(path)
            leaf = write_leaf(io, md, path, rows, spec_id)
            assert leaf.manifest_info is not None
            self.new_leaves.append(NewLeaf(leaf, leaf.manifest_info.added_rows_count))

    def appended_paths(self, md: TableMetadata, folder: str, files: dict[int, list[DataFile]], snapshot_id: int,
                       more_manifests: int = 0) -> list[str]:
        leaves = len(files) if appends_to_leaf(md, sum(map(len, files.values()))) else 0
        return [*(join(folder, f"<uuid>-m{i}{MANIFEST_SUFFIX}") for i in range(leaves)),
                join(folder, f"root-{snapshot_id}-<uuid>{MANIFEST_SUFFIX}")]

    def entries(self, base: TableMetadata, root: V4Manifest, snapshot_id: int, seq: int,
                io: FileIO) -> tuple[list[TrackedFile], int, int]:
        """The new root's entries, the number of row ids they assign (from ``base.next_row_id``) and
        the number of live leaves carried over."""
        live = {e.location for e in root.entries if e.is_live and e.is_file}
        leaves = {e.location: e for e in root.entries if e.is_live and e.is_manifest}
        gone = self.removed_root_files - live
        if gone:
            raise CommitConflictError(f"{min(gone)} is no longer a live root-level file of the branch head",
                                      hint="another commit changed it; run the command again")
        for leaf in sorted(self.removed_leaf_rows):
            if leaf not in leaves:
                raise CommitConflictError(f"leaf manifest {leaf} is no longer part of the branch head",
                                          hint="another commit (e.g. compaction) rewrote it; run the command again")
        out = [e.with_tracking(status=ADDED, snapshot_id=snapshot_id, sequence_number=seq, file_sequence_number=seq)
               for e in self.replacing_leaves]
        kept = 0
        for e in root.entries:
            if not e.is_live or (self.replaced is not None and self.replaced(e)):
                continue  # the head's own DELETED/REPLACED rows are not carried forward
            if e.is_file and e.location in self.removed_root_files:
                out.append(e.with_tracking(status=DELETED, snapshot_id=snapshot_id))
            elif e.is_manifest and e.location in self.removed_leaf_rows:
                kept += 1
                out.append(self._modified_leaf(e, self.removed_leaf_rows[e.location], snapshot_id))
            else:
                kept += e.is_manifest
                out.append(carried(e))
        next_row_id = base.next_row_id
        for e in self.added:
            row_id, next_row_id = next_row_id, next_row_id + e.record_count
            out.append(e.with_tracking(status=ADDED, snapshot_id=snapshot_id, sequence_number=seq,
                                       file_sequence_number=seq, first_row_id=row_id))
        for new_leaf in self.new_leaves:
            e = new_leaf.entry
            info = e.manifest_info
            assert info is not None
            row_id, next_row_id = next_row_id, next_row_id + new_leaf.added_rows
            min_seq = seq if info.min_sequence_number < 0 else info.min_sequence_number
            out.append(dataclasses.replace(
                e.with_tracking(status=ADDED, snapshot_id=snapshot_id, sequence_number=seq, file_sequence_number=seq,
                                first_row_id=row_id),
                manifest_info=dataclasses.replace(info, min_sequence_number=min_seq)))
        return out, next_row_id - base.next_row_id, kept

    @staticmethod
    def _modified_leaf(e: TrackedFile, positions: BitMap64, snapshot_id: int) -> TrackedFile:
        """The leaf's root entry with ``positions`` added to its manifest DV (spec: MODIFIED, the
        cumulative ``dv``, the new ``deleted_positions`` and ``modified_snapshot_id``)."""
        old = _positions(e)
        if old & positions:
            raise CommitConflictError(f"a file of leaf {e.location} was already removed by another commit",
                                      hint="run the command again")
        info = e.manifest_info
        assert info is not None
        union = old | positions
        return dataclasses.replace(
            e.with_tracking(status=MODIFIED, modified_snapshot_id=snapshot_id,
                            deleted_positions=encode_mumbling(positions), replaced_positions=None),
            manifest_info=dataclasses.replace(info, dv=encode_mumbling(union)))


__all__ = [
    "NewLeaf",
    "RootLayout",
    "appends_to_leaf",
    "carried",
    "column_names",
    "column_types",
    "encode_leaf",
    "encode_root",
    "head_root",
    "leaf_entry",
    "leaf_path",
    "root_max_added_files",
    "root_path",
    "union_partition_type",
    "write_leaf",
]

"""Single-file commits on v4 tables: a data-changing commit writes one new root (layout page section 8).

The new root starts from the branch head's root: its live entries are carried over as EXISTING
(the head's DELETED entries, which described the head's own change, are dropped); then

* files added at the root are ADDED entries with an explicit ``first_row_id`` from
  ``next-row-id``; a large append instead adds ONE new leaf (written once, before the commit)
  as an ADDED DATA_MANIFEST entry whose ``first_row_id`` its rows inherit;
* a removed root-level file becomes a DELETED entry;
* a removed row of a leaf goes into that leaf's manifest DV: a new ADDED inline DV with the union
  of the old positions and the new ones, and the old DV as a DELETED entry. No leaf is rewritten.

The root is rebuilt from the fresh base on every commit attempt (sequence number and row ids may
move), so a concurrent writer is never overwritten; a change that no longer applies (the file or
leaf is gone meanwhile) fails with a conflict and nothing of ours stays referenced.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from pyroaring import BitMap64

from icectl.codec.root_manifest import (
    ROOT,
    ContentEntry,
    ContentStats,
    ContentType,
    ManifestStats,
    V4Manifest,
    VersionInfo,
    live_manifest_dvs,
    manifest_dv_entry,
    write_v4_manifest,
)
from icectl.errors import CommitConflictError, IcectlError, NotFoundError, RefusedError
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.schema import IcebergType
from icectl.spec.snapshots import MAIN_BRANCH, Snapshot
from icectl.storage import FileIO, join
from icectl.table import Table
from icectl.table.commit import CommitResult, add_snapshot, commit
from icectl.table.scan_v4 import dv_positions, read_root
from icectl.table.summary import SummaryBuilder

ROOT_MAX_ADDED_FILES = (V4_ROOT_MAX_ADDED_FILES.name, V4_ROOT_MAX_ADDED_FILES.default)  # tests name the key
EXISTING, ADDED, DELETED = ManifestEntryStatus.EXISTING, ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED


def root_max_added_files(md: TableMetadata) -> int:
    return max(0, V4_ROOT_MAX_ADDED_FILES.parse(md.properties))


RootFileKey = tuple[str, str | None]


def root_file_key(location: str, content_type: ContentType, referenced_file: str | None) -> RootFileKey:
    """Which root-level file entry this is: its location, and for a delete file the data file it
    refers to, since the DVs in one Puffin file share their location (one DV per data file)."""
    return location, referenced_file if content_type != ContentType.DATA else None


def _key(e: ContentEntry) -> RootFileKey:
    return root_file_key(e.location, e.content_type, e.referenced_file)


@dataclass
class NewLeaf:
    """A leaf written before the commit; its root entry is completed at each attempt."""

    entry: ContentEntry  # ADDED, version_info and first_row_id filled in per attempt
    added_rows: int  # row ids it needs (data leaves)


@dataclass
class V4Change:
    """What one data-changing commit does to the head's root."""

    operation: str
    summary: SummaryBuilder
    added: list[ContentEntry] = field(default_factory=list)  # root-level files
    new_leaves: list[NewLeaf] = field(default_factory=list)
    removed_root_files: set[RootFileKey] = field(default_factory=set)  # root-level entries, by root_file_key
    removed_leaf_rows: dict[str, BitMap64] = field(default_factory=dict)  # leaf -> ordinals


def branch_head(md: TableMetadata, branch: str, identifier: str, *, create_branch: bool = False) -> Snapshot | None:
    """The snapshot a commit on ``branch`` builds on. A branch the table lacks is refused unless
    ``create_branch``: then it starts at main's head, as Spark's ``CREATE BRANCH`` does (a new
    branch without a parent would hide every row main has)."""
    ref = md.ref(branch)
    if ref is not None and not ref.is_branch:  # refused before any file is written or read
        raise RefusedError(f"cannot commit to '{branch}': it is a tag, not a branch")
    if ref is not None or branch == MAIN_BRANCH:  # main of an empty table has no ref yet
        return md.snapshot_for_ref(branch)
    if not create_branch:
        raise NotFoundError(f"table {identifier} has no branch '{branch}'",
                            hint="check the name with 'icectl inspect refs'; add-files --create-branch "
                                 "starts a new branch at main's head")
    return md.snapshot_for_ref(MAIN_BRANCH)


def head_root(md: TableMetadata, branch: str, io: FileIO, identifier: str = "",
              *, create_branch: bool = False) -> tuple[Snapshot | None, V4Manifest]:
    """The branch head (see :func:`branch_head`) and its root (an empty root for an empty table)."""
    head = branch_head(md, branch, identifier, create_branch=create_branch)
    if head is None:
        return None, V4Manifest([], {})
    if not head.root_manifest:
        raise RefusedError(f"the head of branch '{branch}' (snapshot {head.snapshot_id}) has no root manifest",
                           hint="run 'icectl upgrade --to 4' so every branch head gets one")
    return head, read_root(md, head, io)


def _carried(e: ContentEntry, status: ManifestEntryStatus, snapshot_id: int | None = None) -> ContentEntry:
    vi = e.version_info
    sid = vi.snapshot_id if snapshot_id is None else snapshot_id
    return dataclasses.replace(e, version_info=VersionInfo(status, sid, vi.sequence_number,
                                                           vi.file_sequence_number))


def build_root(base: TableMetadata, root: V4Manifest, change: V4Change, snapshot_id: int, seq: int,
               io: FileIO) -> tuple[list[ContentEntry], int]:
    """The new root's entries and the number of row ids they assign (from ``base.next_row_id``)."""
    live = {_key(e): e for e in root.entries if e.is_live and e.is_file}
    leaves = {e.location: e for e in root.entries if e.is_live and e.is_manifest}
    gone = change.removed_root_files - live.keys()
    if gone:
        raise CommitConflictError(f"{min(gone)[0]} is no longer a live root-level file of the branch head",
                                  hint="another commit changed it; run the command again")
    old_dvs = live_manifest_dvs(root.entries)
    out: list[ContentEntry] = []
    for e in root.entries:
        if not e.is_live:
            continue  # the head's own DELETED rows are not carried forward
        if e.is_file and _key(e) in change.removed_root_files:
            out.append(_carried(e, DELETED, snapshot_id))
        elif e.is_manifest_dv and e.referenced_file in change.removed_leaf_rows:
            out.append(_carried(e, DELETED, snapshot_id))
        else:
            out.append(_carried(e, EXISTING))
    for leaf, positions in sorted(change.removed_leaf_rows.items()):
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
    for e in change.added:
        row_id = None
        if e.content_type == ContentType.DATA:
            row_id, next_row_id = next_row_id, next_row_id + e.record_count
        out.append(dataclasses.replace(e, version_info=VersionInfo(ADDED, snapshot_id, seq, seq), first_row_id=row_id))
    for leaf in change.new_leaves:
        e = leaf.entry
        ms = e.manifest_stats
        assert ms is not None
        row_id = None
        if e.content_type == ContentType.DATA_MANIFEST:
            row_id, next_row_id = next_row_id, next_row_id + leaf.added_rows
        min_seq = seq if ms.min_sequence_number < 0 else ms.min_sequence_number
        out.append(dataclasses.replace(e, version_info=VersionInfo(ADDED, snapshot_id, seq, seq), first_row_id=row_id,
                                       manifest_stats=dataclasses.replace(ms, min_sequence_number=min_seq)))
    return out, next_row_id - base.next_row_id


def commit_v4_change(table: Table, branch: str, change: V4Change, snapshot_id: int, written: list[str],
                     check: Callable[[TableMetadata], None] | None = None, *,
                     adjust: Callable[[TableMetadata], TableMetadata] | None = None,
                     create_branch: bool = False) -> CommitResult:
    """Commit ``change`` on ``branch`` as one new root; every root written is appended to ``written``
    (the caller deletes the ones the committed snapshot does not reference). ``adjust`` changes
    the fresh base in the same commit (e.g. a table property), at every attempt."""
    metadata_dir = table.metadata_folder

    def build(base: TableMetadata) -> TableMetadata:
        if base.format_version < 4:
            raise RefusedError(f"table {table.identifier} is not format v4 anymore")
        if check is not None:
            check(base)
        if adjust is not None:
            base = adjust(base)
        head, root = head_root(base, branch, table.io, table.identifier, create_branch=create_branch)
        seq = base.last_sequence_number + 1
        entries, added_rows = build_root(base, root, change, snapshot_id, seq, table.io)
        path = join(metadata_dir, f"root-{snapshot_id}-{uuid.uuid4()}.avro")
        data = write_v4_manifest(entries, content=ROOT, partition_type=base.unified_partition_type(),
                                 snapshot_id=snapshot_id, sequence_number=seq,
                                 parent_snapshot_id=head.snapshot_id if head else None).data
        table.io.write(path, data)
        written.append(path)
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            timestamp_ms=max(time.time_ns() // 1_000_000, (head.timestamp_ms + 1) if head else 0),
            parent_snapshot_id=head.snapshot_id if head else None, sequence_number=seq, root_manifest=path,
            summary=change.summary.build(change.operation, head.summary if head else None),
            schema_id=base.current_schema_id, first_row_id=base.next_row_id, added_rows=added_rows)
        return add_snapshot(base, snapshot, branch=branch)

    return commit(table, build)


def cleanup(io: FileIO, written: list[str], keep: set[str]) -> None:
    """Delete files this command wrote that no committed snapshot references (best effort)."""
    for path in written:
        if path not in keep:
            try:
                io.delete(path)
            except IcectlError:
                pass  # an unreferenced file is garbage, never data loss


def leaf_entry(location: str, size: int, spec_id: int, stats: ManifestStats, content_type: ContentType,
               content_stats: ContentStats | None) -> ContentEntry:
    """The root entry of a new leaf (completed by :func:`build_root` at each attempt)."""
    return ContentEntry(content_type=content_type, location=location, file_format="avro", partition_spec_id=spec_id,
                        record_count=stats.added_rows_count + stats.existing_rows_count,
                        version_info=VersionInfo(ADDED), file_size_in_bytes=size, manifest_stats=stats,
                        content_stats=content_stats)


def column_types(md: TableMetadata) -> dict[int, IcebergType]:
    """Column id -> type over every schema, newest first (old manifests keep dropped columns' bounds)."""
    out: dict[int, IcebergType] = {}
    for schema in sorted(md.schemas, key=lambda s: -s.schema_id):
        for fid in schema.field_ids():
            f = schema.find_field(fid)
            if f is not None:
                out.setdefault(fid, f.field_type)
    return out

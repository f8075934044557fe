"""`icectl compact` on format v4: rewrite a branch head's root and leaves in one `replace` commit.

Compaction of the merged spec's v4 tree, with v1-v3 compaction's planning per (spec, content)
group (:mod:`icectl.ops.compact.plan`) and its three steps. Only data groups are rewritten (v4
leaves hold data files; carried-over v1-v3 delete manifests stay as they are), and a root data
file with a colocated DV stays in the root:

1. :func:`plan_v4_compaction`: read the head's root. In each selected group, a leaf is kept as it
   is when it has no live manifest DV, is at least half the target size and not oversized (more
   than twice the target with more than one file). The other leaves and the group's root-level
   data/delete files are the inputs: a group is rewritten when it has root-level files (they are
   flushed into leaves) or a leaf with a manifest DV (applied: the rows it marks are dropped, the
   DV leaves the root), or when merging its small leaves (or splitting an oversized one) improves
   it as for v1-v3. The inputs' live rows are clustered and rolled at the target size; DELETED
   rows are dropped, and so are the root's DELETED entries (which alone justify a new root).
2. :func:`write_v4_compaction`: write the new v4 leaves, rows EXISTING with snapshot id, data and
   file sequence numbers and (data) ``first_row_id`` explicit, read each back through the v4
   reader (inheritance from its root entry included) and compare its live rows with the inputs'.
3. the commit (:mod:`icectl.ops.compact.run`, shared with v1-v3): one snapshot, operation
   ``replace``, no net change (same ``total-*``, no new row ids), whose root lists the new leaves
   (ADDED, first) and every other live entry of the head at commit time (EXISTING). When another
   writer committed meanwhile the plan is re-applied on its head if every replaced leaf is still
   live there with the same manifest DV and every flushed file is still a live root-level file;
   otherwise the plan is stale and is planned once more, then the command gives up with the
   conflict exit code.

Tree depth stays 2: leaves hold only data files. With ``--engine spark`` the leaves are read
and written by Spark tasks (:mod:`icectl.ops.compact.distribute`), as v1-v3 manifests are.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

from icectl.codec.v4_manifest import stored_content_stats
from icectl.codec.v4_schema import MANIFEST_SUFFIX
from icectl.engine import Engine, active
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, RefusedError
from icectl.ops.compact.distribute import BinJob, BinWriter, map_distinct
from icectl.ops.compact.plan import (
    SPLIT_FACTOR,
    CompactOptions,
    GroupPlan,
    ManifestShape,
    check_sort_by,
    cluster,
    decide,
    improves,
    refuse_impossible,
    roll,
    sort_fields,
    table_target_size,
)
from icectl.ops.compact.run import Plan, StalePlanError, Steps, write_bins
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    single_valued_ids,
)
from icectl.spec.manifest import ManifestFile as ManifestFileRow
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import IcebergType, StructType
from icectl.spec.snapshots import Snapshot
from icectl.spec.tracked_file import (
    ContentStats,
    ContentType,
    EntryStatus,
    TrackedFile,
    V4Manifest,
    manifest_file_of,
    root_file_entries,
    tracked_file_of,
)
from icectl.storage import FileIO, join
from icectl.table import Table
from icectl.table.commit import new_snapshot_id
from icectl.table.layout import SnapshotLayout
from icectl.table.layout.manifest_list import as_existing
from icectl.table.layout.root import RootLayout, column_types, encode_leaf, leaf_path, union_partition_type, write_leaf
from icectl.table.scan import check_manifests_intact
from icectl.table.scan_v4 import manifest_dv, read_leaf, read_root
from icectl.table.snapshot_writer import branch_head

KEEP_FILL = 0.5  # a leaf at least this fraction of the target (without DV, not oversized) is kept
EXISTING = ManifestEntryStatus.EXISTING


@dataclass
class V4GroupPlan(GroupPlan):
    """A (spec, content) group of a root: ``manifests`` are the leaves it replaces."""

    root_files: list[ManifestEntry] = field(default_factory=list)  # live root-level files flushed
    dvs: dict[str, BitMap64] = field(default_factory=dict)  # replaced leaf -> its live manifest DV
    dv_rows_dropped: int = 0  # rows the applied manifest DVs removed
    kept_leaves: int = 0
    forced: str = ""  # why the group must be rewritten whatever its size ("" when not)


@dataclass
class V4CompactPlan(Plan[V4GroupPlan]):
    """What one compaction of ``branch`` at ``base_snapshot`` (a v4 head) does."""

    root: V4Manifest = field(default_factory=lambda: V4Manifest([], {}))  # the head's, as planned
    root_deleted: int = 0  # DELETED entries of the head's root (dropped by any new root)

    @property
    def flushed(self) -> list[FileKey]:
        return [_file_key(e.data_file) for g in self.rewritten for e in g.root_files]

    @property
    def commits(self) -> bool:
        return bool(self.rewritten) or self.root_deleted > 0

    @property
    def leaves(self) -> int:
        return sum(1 for e in self.root.entries if e.is_live and e.is_manifest)

    @property
    def manifests_kept(self) -> int:
        return self.leaves - len(self.replaced)

    @property
    def listing_path(self) -> str:
        return join(self.metadata_dir, f"root-{self.snapshot_id}-<uuid>{MANIFEST_SUFFIX}")

    def manifest_path(self, index: int) -> str:
        return leaf_path(self.metadata_dir, self.commit_id, index)


@dataclass
class WrittenLeaf:
    entry: TrackedFile  # its root entry, ADDED; tracking completed at commit time
    group: V4GroupPlan
    entries: int

    @property
    def path(self) -> str:
        return self.entry.location

    @property
    def bytes(self) -> int | None:
        return self.entry.file_size_in_bytes


@dataclass(frozen=True)
class V4LeafShape(ManifestShape):
    """Encodes a group's rows as a v4 leaf (so rolling measures the bytes it will write)."""

    unified: StructType

    def content_entries(self, entries: Iterable[ManifestEntry]) -> list[TrackedFile]:
        return [tracked_file_of(e, self.spec.spec_id, self.partition_type) for e in entries]

    def encode(self, entries: Iterable[ManifestEntry]) -> bytes:
        return encode_leaf(self.md, self.content_entries(entries), partition_type=self.unified)


FileKey = tuple[str, int, str | None, int | None]


def _file_key(f: DataFile) -> FileKey:
    # DVs share Puffin files: a root-level file is its location, content, DV target and blob offset.
    return (f.file_path, int(f.content), f.referenced_data_file, f.content_offset)


def _entry_key(e: TrackedFile) -> FileKey:
    return (e.location, int(e.content_type), None, None)


def _content_of(e: TrackedFile) -> ManifestContent:
    if e.content_type in (ContentType.DATA, ContentType.DATA_MANIFEST):
        return ManifestContent.DATA
    return ManifestContent.DELETES


# --------------------------------------------------------------------------- 1. plan


def _head(md: TableMetadata, branch: str, table: str) -> Snapshot | None:
    snap = branch_head(md, branch, table)
    if snap is not None and not snap.root_manifest:
        raise RefusedError(f"the head of branch '{branch}' of v4 table {table} (snapshot {snap.snapshot_id}) has no "
                           "root manifest", hint="run 'icectl upgrade --to 4' so every branch head gets one")
    return snap


def _keeps(m: ManifestFileRow, target: int) -> bool:
    files = (m.added_files_count or 0) + (m.existing_files_count or 0)
    oversized = m.manifest_length > SPLIT_FACTOR * target and files != 1
    return m.manifest_length >= KEEP_FILL * target and not oversized


def plan_v4_compaction(table: Table, options: CompactOptions, metadata: TableMetadata | None = None,
                       engine: Engine | None = None) -> V4CompactPlan:
    """Group the root, decide, read the inputs (on ``engine``; None: :func:`icectl.engine.active`) and roll
    them (nothing is written)."""
    options.check()
    md = metadata or table.metadata
    target = options.target_size or table_target_size(md)
    if options.spec_id is not None and md.spec_by_id(options.spec_id) is None:
        raise NotFoundError(f"table {table.identifier} has no partition spec {options.spec_id}")
    head = _head(md, options.branch, table.identifier)
    root = _read_checked_root(table, md, head) if head is not None else V4Manifest([], {})
    # v4 leaves hold data files only: carried-over v1-v3 delete manifests stay as they are.
    contents = (ManifestContent.DATA,) if options.content in ("data", "all") else ()
    leaves: dict[tuple[int, int], list[ManifestFileRow]] = {}
    files: dict[tuple[int, int], list[ManifestEntry]] = {}
    for e in root.entries:
        if not e.is_live:
            continue
        key = (e.spec_id or 0, int(_content_of(e)))
        if (options.spec_id is not None and key[0] != options.spec_id) or ManifestContent(key[1]) not in contents:
            continue
        if e.is_manifest:
            leaves.setdefault(key, []).append(manifest_file_of(e))
        elif e.deletion_vector is None:  # a file with a colocated DV stays in the root
            data, _ = root_file_entries(e, md.partition_type(key[0]), head.snapshot_id if head else 0)
            files.setdefault(key, []).append(data)
    dv_entries = {e.location: e for e in root.entries if e.is_live and e.is_manifest and manifest_dv(e) is not None}
    if options.sort_by:
        keys = leaves.keys() | files.keys()
        check_sort_by(md, {sid for sid, _ in keys} or {s.spec_id for s in md.partition_specs}, options.sort_by)
    snapshot_id = new_snapshot_id(md)
    unified = union_partition_type(md)
    groups: list[V4GroupPlan] = []
    shapes: dict[tuple[int, int], V4LeafShape] = {}
    for key in sorted(leaves.keys() | files.keys()):
        spec = md.spec_by_id(key[0])
        if spec is None:
            raise CorruptInputError(f"root entry uses partition spec {key[0]}, which the table metadata lacks")
        shape = shapes[key] = V4LeafShape(md, spec, md.partition_type(key[0]), ManifestContent(key[1]),
                                          snapshot_id, unified)
        groups.append(_decide_group(key, leaves.get(key, []), files.get(key, []), dv_entries, options, target,
                                    len(shape.encode([]))))
    leaves_kept = {(g.spec_id, int(g.content)): [m for m in leaves.get((g.spec_id, int(g.content)), [])
                                                 if m not in g.manifests] for g in groups}
    _read_inputs(table, md, [g for g in groups if g.rewrite], dv_entries, engine or active())
    for g in groups:
        if not g.rewrite:
            continue
        shape = shapes[g.spec_id, int(g.content)]
        positions, g.sort_by = sort_fields(shape.spec, options.sort_by)
        g.bins, capacity = roll([as_existing(e) for e in cluster(g.live, positions)], shape, target)
        if not g.forced and not improves(g, capacity):
            g.reason = (f"rewriting would not improve {len(g.manifests)} small leaves "
                        f"({g.live_entries} live entries, {capacity} per leaf at the target size)")
            g.rewrite, g.bins, g.manifests = False, [], [*g.manifests, *leaves_kept[g.spec_id, int(g.content)]]
            g.kept_leaves = len(g.manifests)
    root_deleted = sum(1 for e in root.entries if not e.is_live)
    return V4CompactPlan(table.identifier, md, options.branch, head, target, groups, snapshot_id, str(uuid.uuid4()),
                         table.metadata_folder, root=root, root_deleted=root_deleted)


def _read_checked_root(table: Table, md: TableMetadata, head: Snapshot, known: V4Manifest | None = None) -> V4Manifest:
    """The head's root, refused (exit 4, naming the file) when it is missing, a live leaf is missing, is
    not its listed size or does not open as Avro, or a live root-level file has values no writer can
    have recorded: the new root copies every live entry and references every kept leaf unchanged.
    Leaves and files of ``known`` (a root checked before) are not checked again."""
    try:
        root = read_root(md, head, table.io)
    except NotFoundError as err:  # the table names it: a damaged table, not a wrong argument
        raise CorruptInputError(f"the root manifest of snapshot {head.snapshot_id} is missing ({err.message})",
                                path=head.root_manifest, hint="nothing was written") from None
    checked = {_entry_key(e) for e in known.entries if e.is_live} if known is not None else set()
    leaves = [manifest_file_of(e) for e in root.entries if e.is_live and e.is_manifest and _entry_key(e) not in checked]
    check_manifests_intact(table.io, leaves, head.root_manifest)
    single = single_valued_ids(md.schemas)
    for i, e in enumerate(root.entries):
        if e.is_live and e.is_file and _entry_key(e) not in checked:
            data, _ = root_file_entries(e, md.partition_type(e.spec_id or 0), head.snapshot_id)
            refuse_impossible(data.data_file, single, f"{head.root_manifest}#{i}")
    return root


def _decide_group(key: tuple[int, int], leaves: list[ManifestFileRow], files: list[ManifestEntry],
                  dvs: dict[str, TrackedFile], options: CompactOptions, target: int, header: int) -> V4GroupPlan:
    spec_id, content = key
    with_dv = [m for m in leaves if m.manifest_path in dvs]
    inputs = [m for m in leaves if m.manifest_path in dvs or not _keeps(m, target)]
    g = V4GroupPlan(spec_id, ManifestContent(content), inputs, False, "", root_files=list(files),
                    kept_leaves=len(leaves) - len(inputs))
    units = len(leaves) + (1 if files else 0)  # root-level files count as one manifest, as readers group them
    if options.min_manifests is not None and units < options.min_manifests:
        g.manifests, g.root_files, g.kept_leaves = leaves, [], len(leaves)
        g.reason = f"{units} manifest(s), fewer than --min-manifests {options.min_manifests}"
        return g
    reasons = []
    if files:
        reasons.append(f"{len(files)} root-level file(s) to flush into leaves")
    if with_dv:
        reasons.append(f"{len(with_dv)} leaf(s) with a manifest DV to apply")
    if reasons:
        g.rewrite, g.forced = True, "; ".join(reasons)
        g.reason = g.forced
        return g
    g.rewrite, g.reason = decide(inputs, target, None, header) if inputs else (False, "every leaf is full")
    if not g.rewrite:
        g.manifests, g.kept_leaves = leaves, len(leaves)
    return g


def _read_inputs(table: Table, md: TableMetadata, groups: list[V4GroupPlan], dvs: dict[str, TrackedFile],
                 engine: Engine) -> None:
    """The live rows of every replaced leaf (manifest DV applied, DELETED rows dropped) and of the
    root-level files flushed; all fields, since they are copied."""
    jobs = [LeafJob(m, g.spec_id, dvs.get(m.manifest_path)) for g in groups for m in g.manifests]
    owner = {m.manifest_path: g for g in groups for m in g.manifests}
    single = single_valued_ids(md.schemas)
    # The run's engine: threads of this process, or Spark tasks (each distinct leaf read once).
    for job, (rows, dv) in map_distinct(engine, read_leaf_task, jobs, _leaf_path, shared=(md, table.io),
                                        description="reading leaves"):
        g, m = owner[job.manifest.manifest_path], job.manifest
        if dv is not None:
            if dv and dv.max() >= len(rows):
                raise CorruptInputError(f"manifest DV position {dv.max()} is past the {len(rows)} rows of "
                                        f"{m.manifest_path}", path=m.manifest_path)
            g.dvs[m.manifest_path] = dv
        for i, e in enumerate(rows):
            if dv is not None and i in dv:
                g.dv_rows_dropped += 1
            elif not e.is_live:
                g.deleted_entries += 1
            else:
                refuse_impossible(e.data_file, single, f"{m.manifest_path}#{i}")
                _take(g, m.manifest_path, e)
    for g in groups:
        for e in g.root_files:
            _take(g, "", e)
        g.live_entries = len(g.live)


@dataclass(frozen=True)
class LeafJob:
    """A leaf to read for compaction: its manifest row, its group's spec and its live manifest DV."""

    manifest: ManifestFileRow
    spec_id: int
    dv: TrackedFile | None


def read_leaf_task(shared: tuple[TableMetadata, FileIO], job: LeafJob) -> tuple[list[ManifestEntry], BitMap64 | None]:
    """Every row of one leaf and the positions its manifest DV marks (on this machine or an executor)."""
    md, io = shared
    dv = manifest_dv(job.dv) if job.dv is not None else None
    return read_leaf(md, io, job.manifest, md.partition_type(job.spec_id)), dv


def _leaf_path(job: LeafJob) -> str:
    return job.manifest.manifest_path


def _take(g: V4GroupPlan, source: str, e: ManifestEntry) -> None:
    if e.sequence_number is None or e.file_sequence_number is None or e.snapshot_id is None:
        raise CorruptInputError(f"{e.status.name} entry for {e.data_file.file_path} lacks a snapshot id or sequence "
                                "number; it cannot be rewritten", path=source or None)
    if e.data_file.content == DataFileContent.DATA and e.data_file.first_row_id is None:
        raise CorruptInputError(f"data file {e.data_file.file_path} has no first_row_id in a v4 table; "
                                "it cannot be rewritten without changing its row ids", path=source or None)
    g.live.append(e)
    if source:
        g.live_per_manifest[source] = g.live_per_manifest.get(source, 0) + 1


# --------------------------------------------------------------------------- 2. write and check


def _v4_view(f: DataFile, types: dict[int, IcebergType]) -> DataFile:
    # What a v4 tracked_file keeps of a v1-v3 data_file: file_format lower case, no column sizes
    # and no equality ids, content stats as the typed form gives them back.
    cs = stored_content_stats(ContentStats(f.value_counts, f.null_value_counts, f.nan_value_counts, f.lower_bounds,
                                           f.upper_bounds), types)
    return dataclasses.replace(
        f, file_format=f.file_format.lower(), column_sizes=None, equality_ids=None,
        value_counts=cs.value_counts, null_value_counts=cs.null_value_counts, nan_value_counts=cs.nan_value_counts,
        lower_bounds=cs.lower_bounds, upper_bounds=cs.upper_bounds)


def _live_content(entries: Iterable[ManifestEntry], types: dict[int, IcebergType]) -> list[tuple[Any, ...]]:
    rows = [(e.data_file.file_path, int(e.data_file.content), e.data_file.content_offset or -1, e.snapshot_id,
             e.sequence_number, e.file_sequence_number, repr(_v4_view(e.data_file, types))) for e in entries]
    return sorted(rows)


def verify_v4_group(md: TableMetadata, io: FileIO, group: V4GroupPlan, written: Sequence[WrittenLeaf]) -> None:
    """Read the new leaves back as the v4 reader will (from their root entries) and compare their
    live rows with the group's inputs: snapshot ids, sequence numbers and every data_file field."""
    seq = md.last_sequence_number + 1
    got: list[ManifestEntry] = []
    for w in written:
        e = _completed(w.entry, 0, seq)
        rows = read_leaf(md, io, manifest_file_of(e), md.partition_type(group.spec_id))  # from storage
        if any(r.status != EXISTING for r in rows) or len(rows) != w.entries:
            raise IcectlError(f"leaf {e.location} does not hold what was written", path=e.location)
        got.extend(rows)
    types = column_types(md)
    if _live_content(got, types) != _live_content(group.live, types):
        raise IcectlError(f"the rewritten leaves of spec {group.spec_id} ({group.content_name}) do not hold the same "
                          "live files as the leaves and root-level files they replace; nothing was committed")


def _completed(e: TrackedFile, snapshot_id: int, seq: int) -> TrackedFile:
    """A new leaf's root entry as committed: ADDED with explicit snapshot id and sequence numbers."""
    return e.with_tracking(status=EntryStatus.ADDED, snapshot_id=snapshot_id, sequence_number=seq,
                           file_sequence_number=seq)


def _first_row_id(content: ManifestContent, entries: Sequence[ManifestEntry]) -> int | None:
    # Every row carries its first_row_id explicitly (checked when read), so the leaf needs no range
    # of its own; the smallest keeps the DATA_MANIFEST entry informative, as v1-v3 compaction does.
    if content != ManifestContent.DATA or not entries:
        return None
    return min(e.data_file.first_row_id for e in entries)  # type: ignore[type-var]


def write_v4_compaction(table: Table, plan: V4CompactPlan, engine: Engine | None = None) -> list[WrittenLeaf]:
    """Write the new leaves and check their content; returns them in root order."""
    md = plan.metadata
    shared = LeafWriteShared(md, table.io, plan.snapshot_id, union_partition_type(md), column_types(md))
    writer: BinWriter[V4GroupPlan, LeafWriteShared, TrackedFile, WrittenLeaf] = BinWriter(
        write_leaf_task, shared, lambda g, b, entry: WrittenLeaf(entry, g, len(b.entries)))
    return write_bins(table, plan, writer, lambda g, ws: verify_v4_group(md, table.io, g, ws), "leaves", engine)


@dataclass(frozen=True)
class LeafWriteShared:
    """What every leaf-writing task shares (computed once on the driver)."""

    md: TableMetadata
    io: FileIO
    snapshot_id: int
    unified: StructType
    field_types: dict[int, IcebergType]


def write_leaf_task(shared: LeafWriteShared, job: BinJob) -> TrackedFile:
    """Write one bin as a v4 leaf (on this machine or an executor); its root entry."""
    md = shared.md
    spec = md.spec_by_id(job.spec_id)
    assert spec is not None
    shape = V4LeafShape(md, spec, md.partition_type(job.spec_id), job.content, shared.snapshot_id, shared.unified)
    entry = write_leaf(shared.io, md, job.path, shape.content_entries(job.entries), job.spec_id,
                       partition_type=shared.unified, field_types=shared.field_types)
    return entry.with_tracking(first_row_id=_first_row_id(job.content, job.entries))


# --------------------------------------------------------------------------- 3. commit


def _stale(plan: V4CompactPlan, root: V4Manifest, io: FileIO) -> str | None:
    """Why the plan cannot be re-applied on a newer head's root (None: it can)."""
    leaves = {e.location for e in root.entries if e.is_live and e.is_manifest}
    files = {_entry_key(e) for e in root.entries if e.is_live and e.is_file}
    dvs = {e.location: e for e in root.entries if e.is_live and e.is_manifest}
    for g in plan.rewritten:
        for m in g.manifests:
            if m.manifest_path not in leaves:
                return f"leaf {m.manifest_path} was replaced by a concurrent commit"
            now = manifest_dv(dvs[m.manifest_path])
            if (now or BitMap64()) != (g.dvs.get(m.manifest_path) or BitMap64()):
                return f"a concurrent commit removed files from leaf {m.manifest_path}"
        for e in g.root_files:
            if _file_key(e.data_file) not in files:
                return f"root-level file {e.data_file.file_path} was removed by a concurrent commit"
    return None


def _layout(table: Table, plan: V4CompactPlan, written: list[WrittenLeaf],
            reapplied: list[int]) -> tuple[SnapshotLayout, Callable[[TableMetadata], Snapshot | None]]:
    """The new leaves (ADDED, first), then every other live entry of the head's root at commit time
    (EXISTING); the replaced leaves, their manifest DVs, the flushed files and every DELETED entry go."""
    replaced = {m.manifest_path for m in plan.replaced}
    flushed = set(plan.flushed)

    def head(fresh: TableMetadata) -> Snapshot | None:
        snap = fresh.snapshot_for_ref(plan.branch)
        if snap is None or plan.base_snapshot is None or not snap.root_manifest:
            raise StalePlanError(f"branch '{plan.branch}' of {table.identifier} changed meanwhile", fresh)
        return snap

    def head_root(fresh: TableMetadata, snap: Snapshot) -> V4Manifest:
        assert plan.base_snapshot is not None
        if snap.snapshot_id == plan.base_snapshot.snapshot_id:
            return plan.root
        root = _read_checked_root(table, fresh, snap, known=plan.root)
        why = _stale(plan, root, table.io)
        if why is not None:
            raise StalePlanError(f"{why} to {table.identifier}", fresh)
        if snap.snapshot_id not in reapplied:
            reapplied.append(snap.snapshot_id)
        return root

    def gone(e: TrackedFile) -> bool:
        return (e.is_manifest and e.location in replaced) or (e.is_file and _entry_key(e) in flushed)

    layout = RootLayout(plan.branch, replacing_leaves=[w.entry for w in written], replaced=gone, head_root=head_root)
    return layout, head


# --------------------------------------------------------------------------- the operation


V4_STEPS: Steps[V4CompactPlan, WrittenLeaf] = Steps(
    plan=plan_v4_compaction, write=write_v4_compaction, layout=_layout, rivals="commits")

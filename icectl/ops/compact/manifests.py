"""`icectl compact`: rewrite and merge the manifests of a branch head in one `replace` commit.

Three steps, each a function so that later layouts (v4 root and leaf manifests) can swap one:

1. :func:`plan_compaction`: group the head's manifests by (partition spec, content), data and
   delete manifests alike (Java's rewrite_manifests leaves delete manifests as they are), decide
   per group from the manifest list whether rewriting improves it, read the groups that do,
   cluster their live entries by partition value and roll them at the target size
   (``commit.manifest.target-size-bytes``, 8 MiB). DELETED entries are dropped.
2. :func:`write_compaction`: write the new manifests, entries EXISTING with their snapshot id,
   data and file sequence numbers and (v3) first_row_id explicit, then read every one back and
   check that its live content equals the replaced manifests' (every field of every file).
   A v3 data manifest whose entries all carry a first_row_id gets an explicit manifest
   first_row_id (the smallest of its entries'), so the manifest list assigns it no fresh row-id
   range and ``next-row-id`` does not move (Java assigns one anyway).
3. the commit (:mod:`icectl.ops.compact.run`, shared with v4): one snapshot, operation
   ``replace``, Java's summary keys and the parent's totals, on the branch head as it is at commit
   time: when another writer committed meanwhile and every replaced manifest is still in the new
   head, the new manifests replace them there (the other writer's manifests are kept); otherwise
   the plan is stale and is planned once more from scratch, then the command gives up with the
   conflict exit code. Replaced manifests stay on disk for older snapshots; expiry removes them.

With ``--engine spark`` the manifests of step 1 are decoded and the new manifests of step 2 written
by Spark tasks (:mod:`icectl.ops.compact.distribute`); planning, the check and the commit stay here.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from icectl.codec.manifest_writer import UNASSIGNED_SEQ
from icectl.engine import Engine, active
from icectl.errors import CorruptInputError, IcectlError, NotFoundError
from icectl.ops.compact.columns import cluster_rows, existing_entries, read_live_rows, roll_rows, verify_rows
from icectl.ops.compact.distribute import BinJob, BinWriter, map_distinct
from icectl.ops.compact.plan import (
    CompactOptions,
    GroupPlan,
    ManifestShape,
    check_sort_by,
    cluster,
    decide,
    group_manifests,
    improves,
    refuse_uncopyable,
    roll,
    sort_fields,
    table_target_size,
)
from icectl.ops.compact.report import compact_result
from icectl.ops.compact.result import CompactResult
from icectl.ops.compact.run import Plan, StalePlanError, Steps, run_compaction, write_bins
from icectl.ops.compact.v4 import V4_STEPS
from icectl.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestFile, single_valued_ids
from icectl.spec.metadata import MIN_ROW_LINEAGE_VERSION, TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table import Table
from icectl.table.commit import new_snapshot_id
from icectl.table.layout import SnapshotLayout
from icectl.table.layout.manifest_list import ManifestListLayout, as_existing, manifest_list_path
from icectl.table.manifest_read import ReadOptions, manifest_entries
from icectl.table.scan import check_manifests_intact, iter_entries, manifests_of
from icectl.table.snapshot_writer import branch_head
from icectl.table.write_guard import check_writable


@dataclass
class CompactPlan(Plan[GroupPlan]):
    """What one compaction of ``branch`` at ``base_snapshot`` does."""

    base_manifests: list[ManifestFile] = field(default_factory=list)  # the head's, as planned

    def list_path(self, attempt: int) -> str:
        return manifest_list_path(self.metadata_dir, self.snapshot_id, attempt, self.commit_id)

    @property
    def manifests_kept(self) -> int:
        return len(self.base_manifests) - len(self.replaced)

    @property
    def listing_path(self) -> str:
        return self.list_path(1)


@dataclass
class WrittenManifest:
    manifest: ManifestFile  # as it goes into the manifest list (sequence number unassigned)
    group: GroupPlan
    entries: int

    @property
    def path(self) -> str:
        return self.manifest.manifest_path

    @property
    def bytes(self) -> int:
        return self.manifest.manifest_length


# --------------------------------------------------------------------------- 1. plan


def plan_compaction(table: Table, options: CompactOptions, metadata: TableMetadata | None = None,
                    engine: Engine | None = None) -> CompactPlan:
    """Group, decide, read (on ``engine``; None: :func:`icectl.engine.active`) and roll (nothing is written)."""
    options.check()
    md = metadata or table.metadata
    target = options.target_size or table_target_size(md)
    head = branch_head(md, options.branch, table.identifier)
    if options.spec_id is not None and md.spec_by_id(options.spec_id) is None:
        raise NotFoundError(f"table {table.identifier} has no partition spec {options.spec_id}")
    manifests = _live_manifests(table, md, head) if head else []
    grouped = group_manifests(manifests, options)
    if options.sort_by:
        check_sort_by(md, {sid for sid, _ in grouped} or {s.spec_id for s in md.partition_specs}, options.sort_by)
    snapshot_id = new_snapshot_id(md)
    groups: list[GroupPlan] = []
    shapes: dict[tuple[int, int], ManifestShape] = {}
    for (spec_id, content), ms in sorted(grouped.items()):
        spec = md.spec_by_id(spec_id)
        if spec is None:
            raise CorruptInputError(f"manifest uses partition spec {spec_id}, which the table metadata lacks",
                                    path=ms[0].manifest_path)
        shape = shapes[spec_id, content] = ManifestShape(md, spec, md.partition_type(spec_id),
                                                         ManifestContent(content), snapshot_id)
        rewrite, reason = decide(ms, target, options.min_manifests, len(shape.encode([])))
        groups.append(GroupPlan(spec_id, ManifestContent(content), ms, rewrite, reason))
    rewritten = [g for g in groups if g.rewrite]
    replaced = {m.manifest_path for g in rewritten for m in g.manifests}
    # Kept manifests are probed without decoding; replaced ones are decoded whole just below, so
    # their listed length is all that is left to check.
    check_manifests_intact(table.io, [m for m in manifests if m.manifest_path not in replaced], head.manifest_list
                           if head else None)
    check_manifests_intact(table.io, [m for m in manifests if m.manifest_path in replaced],
                           head.manifest_list if head else None, probe=False)
    _read_groups(table, md, rewritten, engine or active())
    for g in groups:
        if g.rewrite:
            shape = shapes[g.spec_id, int(g.content)]
            positions, g.sort_by = sort_fields(shape.spec, options.sort_by)
            if g.rows is not None:  # read on this machine: planned over the Arrow form
                g.rows = cluster_rows(g.rows, positions, shape.partition_type)
                g.bins, capacity = roll_rows(g.rows, shape, target)
            else:
                g.bins, capacity = roll([as_existing(e) for e in cluster(g.live, positions)], shape, target)
            if not improves(g, capacity):
                g.rewrite, g.bins = False, []
                g.reason = (f"rewriting would not improve {len(g.manifests)} manifests "
                            f"({g.live_entries} live entries, {capacity} per manifest at the target size)")
    return CompactPlan(table.identifier, md, options.branch, head, target, groups, snapshot_id, str(uuid.uuid4()),
                       table.metadata_folder, base_manifests=manifests)


def _live_manifests(table: Table, md: TableMetadata, head: Snapshot) -> list[ManifestFile]:
    """The head's manifests. The caller checks each to exist, have its listed length and open as
    Avro: the new snapshot either copies a manifest's entries or references it unchanged, and must
    not be built on one that readers fail on (Java's RewriteManifests checks neither; its readers
    then fail)."""
    try:
        manifests = manifests_of(md, head, table.io)
    except NotFoundError as e:  # the table names it: a damaged table, not a wrong argument
        raise CorruptInputError(f"a manifest list or manifest of snapshot {head.snapshot_id} is missing "
                                f"({e.message})", path=e.path or head.manifest_list,
                                hint="nothing was written; 'icectl validate' lists every problem") from None
    return manifests


def _read_groups(table: Table, md: TableMetadata, groups: list[GroupPlan], engine: Engine) -> None:
    """Every entry of the manifests to replace (all fields: they are copied, not referenced).
    Entries no writer can have written (negative sizes, counts beyond the record count) are
    refused rather than copied into the new snapshot."""
    single = single_valued_ids(md.schemas)
    if engine.runs_in_process and read_live_rows(md, table.io, groups, single):
        return
    by_path = {m.manifest_path: g for g in groups for m in g.manifests}
    todo = [m for g in groups for m in g.manifests]
    ordinals: dict[str, int] = {}
    entries = iter_entries(md, table.io, todo) if engine.runs_in_process else (
        (m, e) for m, es in map_distinct(engine, read_manifest_task, todo, _path, shared=(md, table.io),
                                         description="reading manifests") for e in es)
    for m, e in entries:
        g = by_path[m.manifest_path]
        ordinal = ordinals[m.manifest_path] = ordinals.get(m.manifest_path, -1) + 1
        if not e.is_live:
            g.deleted_entries += 1
            continue
        refuse_uncopyable(md, e, single, m.manifest_path, ordinal)
        g.live.append(e)
        g.live_per_manifest[m.manifest_path] = g.live_per_manifest.get(m.manifest_path, 0) + 1
    for g in groups:
        g.live_entries = len(g.live)


def read_manifest_task(shared: tuple[TableMetadata, FileIO], m: ManifestFile) -> list[ManifestEntry]:
    """Every entry of one manifest, as :func:`iter_entries` reads it (an executor's task)."""
    md, io = shared
    return manifest_entries(io, m, partition_type=md.partition_type(m.partition_spec_id),
                            format_version=md.format_version)


def _path(m: ManifestFile) -> str:
    return m.manifest_path


# --------------------------------------------------------------------------- 2. write and check


def _first_row_id(md: TableMetadata, content: ManifestContent, entries: Sequence[ManifestEntry]) -> int | None:
    # Entries that all carry a first_row_id need no row ids from the manifest: an explicit
    # manifest first_row_id keeps the list writer from reserving a range (spec "First Row ID
    # Assignment": optional "if the writer knows that existing data files ... have assigned
    # first_row_id values"). Otherwise (pre-upgrade rows) a fresh range is assigned, as required.
    if md.format_version < MIN_ROW_LINEAGE_VERSION or content != ManifestContent.DATA:
        return None
    ids = [i for e in entries if (i := e.data_file.first_row_id) is not None]
    return min(ids) if len(ids) == len(entries) else None


def _entry_key(e: ManifestEntry) -> tuple[Any, ...]:
    f = e.data_file
    return (f.file_path, int(f.content), f.content_offset or -1, e.sequence_number or -1,
            e.file_sequence_number or -1, e.snapshot_id or -1)


def _live_content(entries: Sequence[ManifestEntry]) -> list[tuple[int | None, int | None, int | None, DataFile]]:
    return [(e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file)
            for e in sorted(entries, key=_entry_key)]


def verify_group(md: TableMetadata, io: FileIO, group: GroupPlan, written: Sequence[WrittenManifest]) -> None:
    """Read the new manifests back as readers will (inheritance included) and compare their live
    entries with the replaced manifests': snapshot ids, sequence numbers and every data_file field."""
    if group.rows is not None:
        verify_rows(md, io, group, written)
        return
    seq = md.last_sequence_number + 1 if md.format_version >= 2 else 0
    ptype = md.partition_type(group.spec_id)
    got: list[ManifestEntry] = []
    for w in written:
        m = dataclasses.replace(w.manifest, sequence_number=seq, min_sequence_number=seq)
        # The file itself, not the cache: this checks what was just written.
        entries = manifest_entries(io, m, partition_type=ptype, format_version=md.format_version,
                                   options=ReadOptions(use_cache=False))
        if any(not e.is_live for e in entries) or len(entries) != w.entries:
            raise IcectlError(f"manifest {m.manifest_path} does not hold what was written", path=m.manifest_path)
        got.extend(entries)
    if _live_content(got) != _live_content(group.live):
        raise IcectlError(f"the rewritten manifests of spec {group.spec_id} ({group.content_name}) do not hold the "
                          "same live files as the manifests they replace; nothing was committed")


def write_compaction(table: Table, plan: CompactPlan, engine: Engine | None = None) -> list[WrittenManifest]:
    """Write the new manifests and check their content; returns them in manifest-list order."""
    md = plan.metadata
    writer: BinWriter[GroupPlan, tuple[TableMetadata, FileIO, int], ManifestFile, WrittenManifest]
    writer = BinWriter(write_manifest_task, (md, table.io, plan.snapshot_id),
                       lambda g, b, mf: WrittenManifest(mf, g, b.size))
    return write_bins(table, plan, writer, lambda g, ws: verify_group(md, table.io, g, ws), "manifests", engine)


def write_manifest_task(shared: tuple[TableMetadata, FileIO, int], job: BinJob) -> ManifestFile:
    """Write one bin as a manifest (on this machine or an executor); its manifest-list row."""
    md, io, snapshot_id = shared
    spec = md.spec_by_id(job.spec_id)
    assert spec is not None
    ptype = md.partition_type(job.spec_id)
    # a bin of rows becomes entries here, one bin at a time (the plan never holds them all)
    entries = job.entries if job.rows is None else existing_entries(job.rows, ptype)
    result = ManifestShape(md, spec, ptype, job.content, snapshot_id).write(entries)
    io.write(job.path, result.data)
    return result.to_manifest_file(job.path, len(result.data), job.spec_id, snapshot_id, UNASSIGNED_SEQ,
                                   _first_row_id(md, job.content, entries))


# --------------------------------------------------------------------------- 3. commit


def _layout(table: Table, plan: CompactPlan, written: list[WrittenManifest],
            reapplied: list[int]) -> tuple[SnapshotLayout, Callable[[TableMetadata], Snapshot | None]]:
    """The new manifests in place of the replaced ones, on the branch head at commit time."""
    replaced = {m.manifest_path for m in plan.replaced}

    def head(fresh: TableMetadata) -> Snapshot | None:
        snap = branch_head(fresh, plan.branch, table.identifier)
        if snap is None or plan.base_snapshot is None:
            raise StalePlanError(f"branch '{plan.branch}' of {table.identifier} changed meanwhile", fresh)
        return snap

    def head_manifests(fresh: TableMetadata, snap: Snapshot) -> list[ManifestFile]:
        assert plan.base_snapshot is not None
        if snap.snapshot_id == plan.base_snapshot.snapshot_id:
            return plan.base_manifests
        current = manifests_of(fresh, snap, table.io)
        missing = replaced - {m.manifest_path for m in current}
        if missing:  # another writer rewrote one: our manifests would resurrect or drop files
            raise StalePlanError(f"manifest {sorted(missing)[0]} was replaced by a concurrent commit to "
                                 f"{table.identifier}", fresh)
        known = {m.manifest_path for m in plan.base_manifests}  # checked when planned
        check_manifests_intact(table.io, [m for m in current if m.manifest_path not in known], snap.manifest_list)
        if snap.snapshot_id not in reapplied:
            reapplied.append(snap.snapshot_id)
        return current

    return ManifestListLayout(plan.commit_id, [w.manifest for w in written], replaced, head_manifests), head


# --------------------------------------------------------------------------- the operation


def compact(table: Table, options: CompactOptions, *, dry_run: bool = False,
            on_planned: Callable[[Any], None] | None = None, engine: Engine | None = None) -> CompactResult:
    """Compact the manifests of a branch head (see the module docstring), reading and writing them on
    ``engine`` (None: :func:`icectl.engine.active`).

    ``on_planned`` runs after the new manifests are written, before the commit (tests use it to
    commit as a concurrent writer would).
    """
    check_writable(table)
    if table.metadata.format_version >= 4:  # roots and leaves (icectl.ops.compact.v4)
        return compact_result(run_compaction(table, options, V4_STEPS, dry_run=dry_run, on_planned=on_planned,
                                             engine=engine))
    return compact_result(run_compaction(table, options, STEPS, dry_run=dry_run, on_planned=on_planned, engine=engine))


STEPS: Steps[CompactPlan, WrittenManifest] = Steps(
    plan=plan_compaction, write=write_compaction, layout=_layout, rivals="rewrites")

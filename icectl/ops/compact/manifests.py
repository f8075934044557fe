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
3. :func:`commit_compaction`: one snapshot, operation ``replace``, Java's summary keys and the
   parent's totals, on the branch head as it is at commit time: when another writer committed
   meanwhile and every replaced manifest is still in the new head, the new manifests replace
   them there (the other writer's manifests are kept); otherwise the plan is stale
   (:class:`StalePlanError`) and :func:`compact` plans once more from scratch, then gives up
   with the conflict exit code. Replaced manifests stay on disk for older snapshots; expiry
   removes them.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from icectl import progress
from icectl.catalog.operations import CommitStateUnknownError
from icectl.codec.manifest_reader import read_manifest
from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest_list
from icectl.errors import CommitConflictError, CorruptInputError, IcectlError, NotFoundError
from icectl.ops.compact.plan import (
    Bin,
    CompactOptions,
    GroupPlan,
    ManifestShape,
    as_existing,
    branch_head,
    check_sort_by,
    cluster,
    decide,
    group_manifests,
    improves,
    refuse_impossible,
    roll,
    sort_fields,
    table_target_size,
)
from icectl.ops.compact.v4 import compact_v4
from icectl.results import RecordResult
from icectl.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestFile, single_valued_ids
from icectl.spec.metadata import MIN_ROW_LINEAGE_VERSION, TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO, delete_quietly, join
from icectl.table import Table
from icectl.table.commit import add_snapshot, commit, new_snapshot_id
from icectl.table.scan import check_manifests_intact, iter_entries, manifests_of
from icectl.table.summary import SummaryBuilder
from icectl.table.write_guard import check_writable

WRITE_WORKERS = 8


class StalePlanError(CommitConflictError):
    """A manifest the plan replaces is gone from the branch head: another writer rewrote it."""

    def __init__(self, message: str, fresh: TableMetadata) -> None:
        super().__init__(message, hint="run compact again")
        self.fresh = fresh


@dataclass
class CompactPlan:
    """What one compaction of ``branch`` at ``base_snapshot`` does."""

    table: str
    metadata: TableMetadata
    branch: str
    base_snapshot: Snapshot | None
    base_manifests: list[ManifestFile]
    target_size: int
    groups: list[GroupPlan]
    snapshot_id: int  # of the snapshot to commit (also the new manifests' added_snapshot_id)
    commit_id: str
    metadata_dir: str

    @property
    def rewritten(self) -> list[GroupPlan]:
        return [g for g in self.groups if g.rewrite]

    @property
    def replaced(self) -> list[ManifestFile]:
        return [m for g in self.rewritten for m in g.manifests]

    def manifest_path(self, index: int) -> str:
        return join(self.metadata_dir, f"{self.commit_id}-m{index}.avro")

    def list_path(self, attempt: int) -> str:
        return join(self.metadata_dir, f"snap-{self.snapshot_id}-{attempt}-{self.commit_id}.avro")


@dataclass
class WrittenManifest:
    manifest: ManifestFile  # as it goes into the manifest list (sequence number unassigned)
    group: GroupPlan
    entries: int


@dataclass
class CommitOutcome:
    metadata_location: str
    snapshot: Snapshot
    attempts: int
    manifests_kept: int
    reapplied_on: list[int] = field(default_factory=list)  # heads of other writers' commits taken in
    manifest_lists_written: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- 1. plan


def plan_compaction(table: Table, options: CompactOptions, metadata: TableMetadata | None = None) -> CompactPlan:
    """Group, decide, read and roll (nothing is written)."""
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
    _read_groups(table, md, rewritten)
    for g in groups:
        if g.rewrite:
            shape = shapes[g.spec_id, int(g.content)]
            positions, g.sort_by = sort_fields(shape.spec, options.sort_by)
            g.bins, capacity = roll([as_existing(e) for e in cluster(g.live, positions)], shape, target)
            if not improves(g, capacity):
                g.rewrite, g.bins = False, []
                g.reason = (f"rewriting would not improve {len(g.manifests)} manifests "
                            f"({g.live_entries} live entries, {capacity} per manifest at the target size)")
    metadata_dir = table.metadata_folder
    return CompactPlan(table.identifier, md, options.branch, head, manifests, target, groups, snapshot_id,
                       str(uuid.uuid4()), metadata_dir)


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


def _read_groups(table: Table, md: TableMetadata, groups: list[GroupPlan]) -> None:
    """Every entry of the manifests to replace (all fields: they are copied, not referenced).
    Entries no writer can have written (negative sizes, counts beyond the record count) are
    refused rather than copied into the new snapshot."""
    by_path = {m.manifest_path: g for g in groups for m in g.manifests}
    todo = [m for g in groups for m in g.manifests]
    single = single_valued_ids(md.schemas)
    ordinals: dict[str, int] = {}
    for m, e in iter_entries(md, table.io, todo):
        g = by_path[m.manifest_path]
        ordinal = ordinals[m.manifest_path] = ordinals.get(m.manifest_path, -1) + 1
        if not e.is_live:
            g.deleted_entries += 1
            continue
        refuse_impossible(e.data_file, single, f"{m.manifest_path}#{ordinal}")
        if md.format_version >= 2 and e.sequence_number is None:
            raise CorruptInputError(f"{e.status.name} entry for {e.data_file.file_path} has no data sequence "
                                    "number; it cannot be rewritten", path=m.manifest_path)
        g.live.append(e)
        g.live_per_manifest[m.manifest_path] = g.live_per_manifest.get(m.manifest_path, 0) + 1
    for g in groups:
        g.live_entries = len(g.live)


# --------------------------------------------------------------------------- 2. write and check


def _first_row_id(md: TableMetadata, content: ManifestContent, b: Bin) -> int | None:
    # Entries that all carry a first_row_id need no row ids from the manifest: an explicit
    # manifest first_row_id keeps the list writer from reserving a range (spec "First Row ID
    # Assignment": optional "if the writer knows that existing data files ... have assigned
    # first_row_id values"). Otherwise (pre-upgrade rows) a fresh range is assigned, as required.
    if md.format_version < MIN_ROW_LINEAGE_VERSION or content != ManifestContent.DATA:
        return None
    ids = [e.data_file.first_row_id for e in b.entries]
    return None if any(i is None for i in ids) else min(ids)  # type: ignore[type-var]


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
    seq = md.last_sequence_number + 1 if md.format_version >= 2 else 0
    ptype = md.partition_type(group.spec_id)
    got: list[ManifestEntry] = []
    for w in written:
        m = dataclasses.replace(w.manifest, sequence_number=seq, min_sequence_number=seq)
        entries = list(read_manifest(io.read(m.manifest_path), manifest=m, partition_type=ptype,
                                     format_version=md.format_version))
        if any(not e.is_live for e in entries) or len(entries) != w.entries:
            raise IcectlError(f"manifest {m.manifest_path} does not hold what was written", path=m.manifest_path)
        got.extend(entries)
    if _live_content(got) != _live_content(group.live):
        raise IcectlError(f"the rewritten manifests of spec {group.spec_id} ({group.content_name}) do not hold the "
                          "same live files as the manifests they replace; nothing was committed")


def write_compaction(table: Table, plan: CompactPlan) -> list[WrittenManifest]:
    """Write the new manifests and check their content; returns them in manifest-list order."""
    md = plan.metadata
    jobs: list[tuple[GroupPlan, Bin, str]] = []
    for g in plan.rewritten:
        for b in g.bins:
            jobs.append((g, b, plan.manifest_path(len(jobs))))

    def one(job: tuple[GroupPlan, Bin, str]) -> WrittenManifest:
        g, b, path = job
        spec = md.spec_by_id(g.spec_id)
        assert spec is not None
        result = ManifestShape(md, spec, md.partition_type(g.spec_id), g.content, plan.snapshot_id).write(b.entries)
        table.io.write(path, result.data)
        mf = result.to_manifest_file(path, len(result.data), g.spec_id, plan.snapshot_id, UNASSIGNED_SEQ,
                                     _first_row_id(md, g.content, b))
        return WrittenManifest(mf, g, len(b.entries))

    written: list[WrittenManifest] = []
    try:
        with progress.task("writing manifests", len(jobs)) as advance, \
                ThreadPoolExecutor(max(1, min(WRITE_WORKERS, len(jobs)))) as pool:
            for w in pool.map(one, jobs):
                written.append(w)
                advance(1)
        for g in plan.rewritten:
            verify_group(md, table.io, g, [w for w in written if w.group is g])
    except BaseException:
        for _, _, path in jobs:  # also those a failed pool task may have left half-done
            delete_quietly(table.io, path)
        raise
    return written


# --------------------------------------------------------------------------- 3. commit


def _summary(plan: CompactPlan, created: int, kept: int, parent: Snapshot | None) -> dict[str, str]:
    extra = {"manifests-created": str(created), "manifests-kept": str(kept),
             "manifests-replaced": str(len(plan.replaced)),
             "entries-processed": str(sum(g.live_entries for g in plan.rewritten)),
             "changed-partition-count": "0"}  # as Java's rewrite writes it
    return SummaryBuilder().build("replace", parent.summary if parent else None, extra)


def commit_compaction(table: Table, plan: CompactPlan, written: Sequence[WrittenManifest]) -> CommitOutcome:
    """One ``replace`` snapshot on the branch head at commit time (see the module docstring)."""
    replaced = {m.manifest_path for m in plan.replaced}
    new_manifests = [w.manifest for w in written]
    attempt = 0
    lists: list[str] = []
    reapplied: list[int] = []
    kept_count = [0]

    def build(fresh: TableMetadata) -> TableMetadata:
        nonlocal attempt
        attempt += 1
        head = branch_head(fresh, plan.branch, table.identifier)
        if head is None or plan.base_snapshot is None:
            raise StalePlanError(f"branch '{plan.branch}' of {table.identifier} changed meanwhile", fresh)
        if head.snapshot_id == plan.base_snapshot.snapshot_id:
            current = plan.base_manifests
        else:
            current = manifests_of(fresh, head, table.io)
            missing = replaced - {m.manifest_path for m in current}
            if missing:  # another writer rewrote one: our manifests would resurrect or drop files
                raise StalePlanError(f"manifest {sorted(missing)[0]} was replaced by a concurrent commit to "
                                     f"{table.identifier}", fresh)
            known = {m.manifest_path for m in plan.base_manifests}  # checked when planned
            check_manifests_intact(table.io, [m for m in current if m.manifest_path not in known], head.manifest_list)
            if head.snapshot_id not in reapplied:
                reapplied.append(head.snapshot_id)
        kept = [m for m in current if m.manifest_path not in replaced]
        kept_count[0] = len(kept)
        v = fresh.format_version
        seq = fresh.last_sequence_number + 1 if v >= 2 else 0
        first_row_id = fresh.next_row_id if v >= MIN_ROW_LINEAGE_VERSION else None
        path = plan.list_path(attempt)
        # New manifests first, then the kept ones, as Java orders them.
        result = write_manifest_list([*new_manifests, *kept], format_version=v, snapshot_id=plan.snapshot_id,
                                     parent_snapshot_id=head.snapshot_id, sequence_number=seq,
                                     first_row_id=first_row_id)
        table.io.write(path, result.data)
        lists.append(path)
        snapshot = Snapshot(
            snapshot_id=plan.snapshot_id, timestamp_ms=int(time.time() * 1000), parent_snapshot_id=head.snapshot_id,
            sequence_number=seq, manifest_list=path, summary=_summary(plan, len(new_manifests), len(kept), head),
            schema_id=fresh.current_schema_id, first_row_id=first_row_id, added_rows=result.added_rows)
        return add_snapshot(fresh, snapshot, branch=plan.branch)

    try:
        done = commit(table, build)
    except CommitStateUnknownError:
        raise  # the new version may be live: its files must stay
    except BaseException:
        for p in lists:
            delete_quietly(table.io, p)
        raise
    snap = done.metadata.snapshot_by_id(plan.snapshot_id)
    assert snap is not None
    for p in lists:
        if p != snap.manifest_list:  # manifest lists of attempts that lost a conflict
            delete_quietly(table.io, p)
    return CommitOutcome(done.metadata_location, snap, done.attempts, kept_count[0], reapplied,
                         [snap.manifest_list] if snap.manifest_list else [])


# --------------------------------------------------------------------------- the operation


def compact(table: Table, options: CompactOptions, *, dry_run: bool = False,
            on_planned: Callable[[CompactPlan], None] | None = None) -> RecordResult:
    """Compact the manifests of a branch head (see the module docstring).

    ``on_planned`` runs after the new manifests are written, before the commit (tests use it to
    commit as a concurrent writer would).
    """
    check_writable(table)
    if table.metadata.format_version >= 4:  # roots and leaves (icectl.ops.compact.v4)
        return compact_v4(table, options, dry_run=dry_run, on_planned=on_planned)
    plan = plan_compaction(table, options)
    if dry_run or not plan.rewritten:
        return _result(plan, dry_run=dry_run)
    replanned = False
    while True:
        written: list[WrittenManifest] = []
        try:
            written = write_compaction(table, plan)
            if on_planned is not None:
                on_planned(plan)
            outcome = commit_compaction(table, plan, written)
            break
        except StalePlanError as e:
            _delete_all(table.io, written, plan)
            if replanned:
                raise CommitConflictError(f"compacting {table.identifier} lost to concurrent rewrites twice "
                                          f"({e.message})", hint="run it again when the other writer is done") from e
            replanned = True
            plan = plan_compaction(table, options, metadata=e.fresh)
            if not plan.rewritten:
                return _result(plan, dry_run=False, replanned=True)
        except CommitStateUnknownError:
            raise  # the new version may be live: its manifests must stay
        except BaseException:
            _delete_all(table.io, written, plan)
            raise
    return _result(plan, dry_run=False, written=written, outcome=outcome, replanned=replanned)


def _delete_all(io: FileIO, written: Sequence[WrittenManifest], plan: CompactPlan) -> None:
    for w in written:  # never referenced by a committed snapshot
        delete_quietly(io, w.manifest.manifest_path)


def _group_row(g: GroupPlan, written: Sequence[WrittenManifest] | None, dry_run: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "spec_id": g.spec_id, "content": g.content_name, "action": "rewrite" if g.rewrite else "skip",
        "reason": g.reason, "manifests_in": len(g.manifests), "bytes_in": g.bytes_in}
    if not g.rewrite:
        return row
    row.update({"live_entries": g.live_entries, "deleted_entries_dropped": g.deleted_entries,
                "sort_by": list(g.sort_by), "manifests_out": len(g.bins)})
    if written is None:
        row["estimated_bytes_out"] = sum(b.estimated_bytes for b in g.bins)
        if dry_run:
            row["replaced"] = [{"path": m.manifest_path, "bytes": m.manifest_length} for m in g.manifests]
    else:
        mine = [w for w in written if w.group is g]
        row["bytes_out"] = sum(w.manifest.manifest_length for w in mine)
        row["written"] = [{"path": w.manifest.manifest_path, "bytes": w.manifest.manifest_length,
                           "entries": w.entries} for w in mine]
    return row


def _result(plan: CompactPlan, *, dry_run: bool, written: Sequence[WrittenManifest] | None = None,
            outcome: CommitOutcome | None = None, replanned: bool = False) -> RecordResult:
    rewritten = plan.rewritten
    data: dict[str, Any] = {
        "table": plan.table, "branch": plan.branch, "dry_run": dry_run,
        "base_snapshot_id": plan.base_snapshot.snapshot_id if plan.base_snapshot else None,
        "target_size_bytes": plan.target_size,
        "manifests_replaced": len(plan.replaced),
        "manifests_created": sum(len(g.bins) for g in rewritten),
        "manifests_kept": len(plan.base_manifests) - len(plan.replaced),
        "entries_processed": sum(g.live_entries for g in rewritten),
        "groups": [_group_row(g, written, dry_run) for g in plan.groups],
    }
    if dry_run:
        if rewritten:
            n = 0
            paths = []
            for g in rewritten:
                for _ in g.bins:
                    paths.append({"path": plan.manifest_path(n), "group": f"spec {g.spec_id} {g.content_name}"})
                    n += 1
            data["would_write"] = [*paths, {"path": plan.list_path(1)},
                                   {"path": "a new table metadata file (the next version)"}]
        else:
            data["would_write"] = []
        data["would_delete"] = []  # replaced manifests stay for older snapshots; expiry removes them
        verb = "Would compact" if rewritten else "Nothing to compact in"
        title = (f"{verb} {plan.table}: {data['manifests_replaced']} manifests into {data['manifests_created']}"
                 if rewritten else f"{verb} {plan.table}")
        return RecordResult("compact", title, data)
    if outcome is None:
        data["replanned"] = replanned
        return RecordResult("compact", f"Nothing to compact in {plan.table}", data)
    data["manifests_kept"] = outcome.manifests_kept
    data.update({"snapshot_id": outcome.snapshot.snapshot_id, "sequence_number": outcome.snapshot.sequence_number,
                 "metadata_location": outcome.metadata_location, "commit_attempts": outcome.attempts,
                 "reapplied_on": outcome.reapplied_on, "replanned": replanned})
    title = f"Compacted {plan.table}: {data['manifests_replaced']} manifests into {data['manifests_created']}"
    return RecordResult("compact", title, data)

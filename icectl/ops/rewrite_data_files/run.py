"""Rewriting the planned groups and committing them (Java's ``RewriteDataFilesSparkAction`` with
``RewriteDataFilesCommitManager``).

Without partial progress (the default) every group is rewritten, then one ``replace`` commit
takes them all; any failure fails the run and removes every file it wrote. With
``partial-progress.enabled`` the groups are committed in ``partial-progress.max-commits`` batches
(Java's ``ceil(groups / max-commits)`` groups each): a batch whose rewrite or commit fails is
reported as failed (``failed_data_files_count``) and the others still commit, until more than
``partial-progress.max-failed-commits`` batches failed.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from icectl.catalog.operations import CommitStateUnknownError
from icectl.engine import Engine
from icectl.errors import CommitConflictError, ExitCode, IcectlError, UsageError
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.name_mapping import NameMapping
from icectl.spec.name_mapping import of_properties as name_mapping_of
from icectl.spec.schema import Schema
from icectl.spec.snapshots import Snapshot
from icectl.spec.sorting import SortOrder
from icectl.storage import FileIO
from icectl.table import Table
from icectl.table.commit import delete_quietly, discard_on_failure, new_snapshot_id
from icectl.table.data_writer import DataFileWriter, partition_values
from icectl.table.layout import Deletes
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.rows import DeleteReader, arrow_schema, live_batches
from icectl.table.scan_tasks import FileScanTask, plan_tasks
from icectl.table.snapshot_writer import SnapshotChange, SnapshotCommit, branch_head, write_snapshot
from icectl.table.summary import partition_key
from icectl.threads import ordered_map

from .plan import FileGroup, RewriteOptions, Sizes
from .result import RewriteDataFilesResult, RewriteGroup
from .sort import check_memory, sort_indices, zorder_indices

MIN_ROW_LINEAGE_VERSION = 3


def same_spec(group: FileGroup, spec_id: int) -> bool:
    """Whether every file of the group is of spec ``spec_id`` (else its rows are re-partitioned)."""
    return all(t.data.spec_id == spec_id for t in group.tasks)


def rewrite_group(io: FileIO, md: TableMetadata, group: FileGroup, deletes: DeleteReader,
                  written: list[str], options: RewriteOptions | None = None) -> list[DataFile]:
    """The group's live rows written into new data files of the default spec (paths into ``written``
    as they are opened, so a failure can remove them); with the sort strategy, in its order."""
    spec = md.spec()
    schema, lineage, target, mapping = _reading(md)
    partition = group.partition if same_spec(group, spec.spec_id) else None
    rows_per_file = _rows_per_file(md, group, options, repartitioned=partition is None)
    order = sort_order_of(md, options) if options is not None and options.strategy == "sort" else None
    writer = DataFileWriter(io, md, spec, schema, target, rows_per_file,
                            prefix=f"{group.index - 1:05d}-{group.index}",
                            sort_order_id=_written_order_id(md, options, order))
    try:
        batches = (batch for t in group.tasks
                   for batch in live_batches(io, t, schema, target, deletes, mapping, row_lineage=lineage))
        if options is not None and options.strategy == "sort":
            rows = pa.Table.from_batches(list(batches), schema=target)
            if options.zorder:
                indices = zorder_indices(rows, schema, list(options.zorder))
            else:
                assert order is not None
                indices = sort_indices(rows, schema, order)
            batches = iter(rows.take(indices).to_batches(max_chunksize=64 * 1024))
        for batch in batches:
            writer.write(batch, partition)
        return writer.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        written.extend(writer.written)


def _reading(md: TableMetadata) -> tuple[Schema, bool, pa.Schema, NameMapping | None]:
    """How a group's rows are read: the current schema, whether rows carry row lineage (v3), the
    Arrow schema written, and the name mapping for files without field ids."""
    schema = md.schema()
    lineage = md.format_version >= MIN_ROW_LINEAGE_VERSION
    return schema, lineage, arrow_schema(schema, row_lineage=lineage), name_mapping_of(md.properties)


def _rows_per_file(md: TableMetadata, group: FileGroup, options: RewriteOptions | None, *,
                   repartitioned: bool) -> int:
    # From the rows before deletes: an over-estimate makes at most the expected count.
    rows = max(1, math.ceil(group.records / group.expected_output_files))
    if repartitioned and options is not None and group.input_size:
        # Files of older specs, re-partitioned: as Spark's writers, each output partition's file rolls
        # at the write size, not at the group's planned share (8 KiB target: 29 files where Spark wrote 21).
        per_row = group.input_size / max(1, group.records)
        rows = max(rows, math.ceil(Sizes.of(options, md).write_max / per_row))
    return rows


def planned_output_files(io: FileIO, md: TableMetadata, group: FileGroup, options: RewriteOptions) -> int:
    """How many files the group writes: its expected count, or for files of older specs (which a
    dry run cannot count from the plan alone) the partitions their live rows fall in, each cut at
    the files' row count, read as the rewrite reads them."""
    spec = md.spec()
    if same_spec(group, spec.spec_id) or spec.is_unpartitioned:
        return group.expected_output_files
    schema, lineage, target, mapping = _reading(md)
    deletes = DeleteReader(io, schema)
    per_partition: dict[tuple[object, ...], int] = {}
    for t in group.tasks:
        for batch in live_batches(io, t, schema, target, deletes, mapping, row_lineage=lineage):
            for p in partition_values(batch, spec, schema):
                per_partition[p] = per_partition.get(p, 0) + 1
    rows_per_file = _rows_per_file(md, group, options, repartitioned=True)
    return sum(math.ceil(n / rows_per_file) for n in per_partition.values())


@dataclass(frozen=True)
class GroupTask:
    """What an engine's task needs to rewrite a group (shipped once per map): the table's storage,
    its metadata and the options. The task writes the files and returns their ``data_file``s; when
    it fails it removes what it wrote (the driver never learns those paths)."""

    io: FileIO
    md: TableMetadata
    options: RewriteOptions


def rewrite_group_task(shared: GroupTask, group: FileGroup) -> list[DataFile]:
    written: list[str] = []
    try:
        return rewrite_group(shared.io, shared.md, group, DeleteReader(shared.io, shared.md.schema()), written,
                             shared.options)
    except BaseException:
        for path in written:
            delete_quietly(shared.io, path)
        raise


def _rewrite_batch(table: Table, options: RewriteOptions, batch: list[FileGroup], deletes: DeleteReader,
                   written: list[str], workers: int, engine: Engine | None) -> list[list[DataFile]]:
    """Each group of ``batch`` rewritten: on this machine's threads, or as the engine's tasks."""
    if engine is None or engine.runs_in_process:
        return list(ordered_map(
            lambda g: rewrite_group(table.io, table.metadata, g, deletes, written, options), batch,
            workers=max(1, workers), wait=True))
    outputs = []
    # One group a task: a group is minutes of work, so packing several into one task (as the engine
    # does for light items) would leave the other cores idle.
    for files in engine.map(rewrite_group_task, batch, shared=GroupTask(table.io, table.metadata, options),
                            description="rewriting data files", items_per_task=1):
        written.extend(f.file_path for f in files)  # the driver removes them if the commit fails
        outputs.append(files)
    return outputs


def sort_order_of(md: TableMetadata, options: RewriteOptions) -> SortOrder | None:
    """The order a sort rewrite uses: the given one, else the table's (Java refuses an unsorted
    table with no order given); None for a z-order."""
    if options.zorder:
        return None
    order = options.sort_order if options.sort_order is not None else md.sort_order()
    if order.is_unsorted:
        raise UsageError("cannot sort data without a sort order: the table is unsorted and none was given",
                         hint="pass --sort-order 'col [asc|desc] [nulls first|last], ...' or 'zorder(a, b)'")
    return order


def _written_order_id(md: TableMetadata, options: RewriteOptions | None, order: SortOrder | None) -> int | None:
    """The ``sort_order_id`` new files record: the table's order they are written in; as Spark's
    writer, the table's default order (0, unsorted, when it has none) for a bin-pack; none for a
    sort by an order the table does not have, or a z-order."""
    if options is None or options.strategy != "sort":
        return md.default_sort_order_id
    if order is None:
        return None
    same = any(o.fields == order.fields and o.order_id == order.order_id for o in md.sort_orders)
    return order.order_id if same else None


def no_new_deletes(table: Table, start: Snapshot, options: RewriteOptions,
                   rewritten: dict[str, FileScanTask]) -> Callable[[TableMetadata], None]:
    """Java's ``validateNoNewDeletesForDataFiles`` from the starting snapshot: a position delete or
    DV committed meanwhile for a rewritten file would be lost with it (an equality delete too when
    the new files do not keep the starting sequence number)."""
    def check(base: TableMetadata) -> None:
        head = branch_head(base, options.branch, table.identifier)
        if head is None or head.snapshot_id == start.snapshot_id:
            return
        for t in plan_tasks(base, head, table.io):
            before = rewritten.get(t.data.file.file_path)
            if before is None:
                continue
            known = {(d.file.file_path, d.file.content_offset) for d in before.deletes}
            for d in t.deletes:
                if (d.file.file_path, d.file.content_offset) in known:
                    continue
                if d.file.content == DataFileContent.EQUALITY_DELETES and options.use_starting_sequence_number:
                    continue
                raise CommitConflictError(
                    f"a delete file committed after snapshot {start.snapshot_id} ({d.file.file_path}) applies to "
                    f"rewritten data file {t.data.file.file_path}", path=t.data.file.file_path,
                    hint="run rewrite-data-files again: it will plan from the new head")
    return check


def commit_batch(table: Table, options: RewriteOptions, head: Snapshot, groups: list[FileGroup],
                 outputs: list[list[DataFile]], written: list[str]) -> tuple[SnapshotCommit, int | None]:
    """One ``replace`` commit of ``groups`` (their rewritten files in ``outputs``); returns the commit
    and the data sequence number the new files got (None: the new snapshot's)."""
    md = table.metadata
    spec = md.spec()
    layout = ManifestListLayout(str(uuid.uuid4()), [])
    removed: list[DataFile] = []
    dvs = [t.dv for g in groups for t in g.tasks if t.dv is not None]
    known = [d.manifest_path for d in dvs]
    # As Java's commit (MergingSnapshotProducer.apply): delete files older than every live data file go too.
    change = SnapshotChange("replace", layout, deletes=Deletes(
        removed, drop_older=True, delete_manifests=frozenset(p for p in known if p is not None)
        if all(p is not None for p in known) else None))
    for g in groups:
        for t in g.tasks:
            where = partition_key(md, t.data.spec_id, t.data.file.partition)
            removed.append(t.data.file)
            change.summary.removed_file(t.data.file, where)
            if t.dv is not None:  # a DV is its data file's alone: it goes with it (Java 1.8+, v3)
                removed.append(t.dv.file)
                change.summary.removed_file(t.dv.file, where)
    new_files = [f for files in outputs for f in files]
    for f in new_files:
        change.summary.added_file(f, partition_key(md, spec.spec_id, f.partition))
    seq = (head.sequence_number or 0) if options.use_starting_sequence_number and md.format_version >= 2 else None
    snapshot_id = new_snapshot_id(md)
    layout.write_appended(table.io, md, table.metadata_folder, {spec.spec_id: new_files}, snapshot_id, written,
                          data_sequence_number=seq)
    change.written.extend(written)
    rewritten = {t.data.file.file_path: t for g in groups for t in g.tasks}
    done = write_snapshot(table, options.branch, change, snapshot_id=snapshot_id,
                          check=no_new_deletes(table, head, options, rewritten))
    return done, seq


def _batches(groups: list[FileGroup], options: RewriteOptions) -> list[list[FileGroup]]:
    if not options.partial_progress:
        return [groups]
    per_commit = -(-len(groups) // options.max_commits)  # Java: ceil(groups / max-commits)
    return [groups[i:i + per_commit] for i in range(0, len(groups), per_commit)]


def run_groups(table: Table, options: RewriteOptions, head: Snapshot, groups: list[FileGroup],
               res: RewriteDataFilesResult, workers: int, engine: Engine | None = None) -> RewriteDataFilesResult:
    """Rewrite and commit ``groups``, filling in ``res`` (see the module docstring)."""
    deletes = DeleteReader(table.io, table.metadata.schema())
    if options.strategy == "sort":
        sort_order_of(table.metadata, options)  # an unsorted table with no order: refused before any work
        check_memory(max(g.input_size for g in groups), min(workers, len(groups)))
    docs: dict[int, RewriteGroup] = {d.index: d for d in res.groups}
    failed_commits = 0
    res.snapshot_ids = []
    for batch in _batches(groups, options):
        written: list[str] = []
        try:
            with discard_on_failure(table.io, written):
                outputs = _rewrite_batch(table, options, batch, deletes, written, workers, engine)
                done, seq = commit_batch(table, options, head, batch, outputs, written)
        except CommitStateUnknownError:
            raise
        except IcectlError as e:
            if not options.partial_progress:
                raise
            failed_commits += 1
            for g in batch:
                docs[g.index].status, docs[g.index].error = "failed", e.message
                res.failed_data_files_count += len(g.tasks)
                res.rewritten_data_files_count -= len(g.tasks)
                res.rewritten_bytes_count -= g.input_size
                res.removed_delete_files_count -= sum(1 for t in g.tasks if t.dv is not None)
            if failed_commits > options.failed_commits_allowed:
                raise CommitConflictError(
                    f"{failed_commits} of the partial-progress commits failed (more than max-failed-commits "
                    f"{options.failed_commits_allowed}); the last: {e.message}", hint=e.hint) from e
            continue
        for g, files in zip(batch, outputs, strict=True):
            doc = docs[g.index]
            doc.status = "rewritten"
            doc.files_out, doc.bytes_out = len(files), sum(f.file_size_in_bytes for f in files)
            doc.records_out = sum(f.record_count for f in files)
            res.added_data_files_count += len(files)
        res.snapshot_id = done.snapshot.snapshot_id
        res.snapshot_ids.append(done.snapshot.snapshot_id)
        if seq is not None:
            res.data_sequence_number = seq
        res.commit.record(done.metadata_location, done.attempts)
    if res.failed_data_files_count:
        res.exit_code = ExitCode.CONFLICT
        res.warnings.append(f"{res.failed_data_files_count} data files were not rewritten: their groups failed "
                            "(see the groups' errors); the other groups are committed")
    res.title = (f"Rewrote {res.rewritten_data_files_count} data files into {res.added_data_files_count} "
                 f"in {table.identifier}")
    return res

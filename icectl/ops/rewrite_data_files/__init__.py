"""`icectl rewrite-data-files`: compact small files (and files heavy with deletes) into files of the
target size, as Spark's ``rewrite_data_files`` procedure does with its default bin-pack strategy.

1. Plan (:mod:`.plan`): the branch head's live data files with the deletes that apply to them
   (:mod:`icectl.table.scan_tasks`), chosen and grouped as Java's ``BinPackRewriteFilePlanner``.
2. Rewrite: each group's live rows (deletion vectors and position deletes applied, columns read by
   field id into the current schema, v3 row lineage kept as ``_row_id`` and
   ``_last_updated_sequence_number`` columns; :mod:`icectl.table.rows`) are written into new
   Parquet files of the default partition spec (:mod:`icectl.table.data_writer`); groups run in
   parallel (``max-concurrent-file-group-rewrites``, Spark's default 5).
3. Commit as Java's ``RewriteFiles``: one ``replace`` snapshot adding the new files with the
   starting snapshot's data sequence number (``use-starting-sequence-number``, so an equality
   delete committed meanwhile still applies to the rows it targeted), the rewritten data files
   DELETED and, in v3, their deletion vectors with them. Each attempt checks that every rewritten
   file is still live and that no position delete or DV arrived for it since the start (else the
   commit fails with exit 5: the other writer's delete would be lost). Files written by a commit
   that did not happen are removed.

Nothing is deleted from storage: the rewritten files stay for older snapshots until
expire-snapshots removes them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable

from icectl.errors import CommitConflictError, UnsupportedError
from icectl.results import NEXT_METADATA
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.name_mapping import from_json as name_mapping_from_json
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.properties import DEFAULT_NAME_MAPPING
from icectl.spec.snapshots import Snapshot
from icectl.spec.values import to_human
from icectl.table import Table
from icectl.table.commit import discard_on_failure, new_snapshot_id
from icectl.table.data_writer import DataFileWriter, data_location
from icectl.table.layout import Deletes
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.rows import DeletedPositions, arrow_schema, live_batches
from icectl.table.scan_tasks import FileScanTask, plan_tasks
from icectl.table.snapshot_writer import SnapshotChange, branch_head, write_snapshot
from icectl.table.write_guard import check_writable
from icectl.threads import ordered_map

from .plan import FileGroup, RewriteOptions, Sizes, plan_groups
from .result import RewriteDataFilesResult, RewriteGroup

__all__ = ["RewriteDataFilesResult", "RewriteOptions", "rewrite_data_files"]

MIN_ROW_LINEAGE_VERSION = 3
MAX_CONCURRENT_GROUPS = 5  # Spark's max-concurrent-file-group-rewrites default


def _partition_doc(md: TableMetadata, spec: PartitionSpec, group: FileGroup,
                   same_spec: bool) -> dict[str, object]:
    if spec.is_unpartitioned or not same_spec:
        return {}
    ptype = md.partition_type(spec)
    return {f.name: to_human(f.field_type, v) for f, v in zip(ptype.fields, group.partition, strict=True)}


def _same_spec(group: FileGroup, spec: PartitionSpec) -> bool:
    return all(t.data.spec_id == spec.spec_id for t in group.tasks)


def _removed_dvs(group: FileGroup) -> list[DataFile]:
    """The deletion vectors that go with the group's data files (v3: a DV is only its file's)."""
    return [t.dv.file for t in group.tasks if t.dv is not None]


def rewrite_data_files(table: Table, options: RewriteOptions, *, dry_run: bool = False,
                       workers: int = MAX_CONCURRENT_GROUPS) -> RewriteDataFilesResult:
    """Rewrite the branch head's small (or delete-heavy) data files into files of the target size,
    as one ``replace`` commit (see the module docstring)."""
    options.check()
    check_writable(table)
    md = table.metadata
    if md.format_version > MIN_ROW_LINEAGE_VERSION:
        raise UnsupportedError(f"rewrite-data-files does not write format v{md.format_version} tables yet",
                               hint="it rewrites v1-v3 tables; compact a v4 table's manifests with icectl compact")
    sizes = Sizes.of(options, md)
    head = branch_head(md, options.branch, table.identifier)
    tasks = plan_tasks(md, head, table.io) if head is not None else []
    groups = plan_groups(md, tasks, options)
    spec = md.spec()
    res = RewriteDataFilesResult(
        title=f"{'Would rewrite' if dry_run else 'Rewrote'} data files of {table.identifier}",
        table=table.identifier, branch=options.branch, dry_run=dry_run, strategy=options.strategy,
        starting_snapshot_id=head.snapshot_id if head is not None else None, target_file_size_bytes=sizes.target,
        rewritten_data_files_count=sum(len(g.tasks) for g in groups), added_data_files_count=0,
        rewritten_bytes_count=sum(g.input_size for g in groups), failed_data_files_count=0,
        removed_delete_files_count=sum(len(_removed_dvs(g)) for g in groups),
        groups=[RewriteGroup(index=g.index, partition=_partition_doc(md, spec, g, _same_spec(g, spec)),
                             files_in=len(g.tasks), bytes_in=g.input_size, records_in=g.records,
                             delete_files_applied=len({d.file.file_path + str(d.file.content_offset)
                                                       for t in g.tasks for d in t.deletes}),
                             expected_output_files=g.expected_output_files) for g in groups])
    if head is None or not groups:
        res.title = f"Nothing to rewrite in {table.identifier} on {options.branch}"
        if dry_run:
            res.dry.plan([], [])
        return res
    for g in groups:
        if any(t.equality_deletes for t in g.tasks):
            t = next(t for t in g.tasks if t.equality_deletes)
            raise UnsupportedError(
                f"equality delete files apply to {t.data.file.file_path}; rewriting through equality deletes "
                "is not supported yet", path=t.data.file.file_path,
                hint="rewrite this table with Spark's rewrite_data_files until icectl applies equality deletes")
    if dry_run:
        res.added_data_files_count = sum(g.expected_output_files for g in groups)
        commit_id = str(uuid.uuid4())
        res.dry.plan([f"{data_location(md)}/ ({res.added_data_files_count} new data files)",
                      *ManifestListLayout(commit_id, []).appended_paths(md, table.metadata_folder, {spec.spec_id: []},
                                                                        new_snapshot_id(md)),
                      NEXT_METADATA], [])
        return res
    return _rewrite_and_commit(table, options, head, groups, res, workers)


def _rewrite_group(table: Table, md: TableMetadata, group: FileGroup, deleted: DeletedPositions,
                   written: list[str]) -> list[DataFile]:
    spec = md.spec()
    schema = md.schema()
    lineage = md.format_version >= MIN_ROW_LINEAGE_VERSION
    target = arrow_schema(schema, row_lineage=lineage)
    mapping_text = md.properties.get(DEFAULT_NAME_MAPPING)
    mapping = name_mapping_from_json(mapping_text) if mapping_text else None
    live = sum(t.data.file.record_count - t.known_deleted_records() for t in group.tasks)
    rows_per_file = max(1, math.ceil(max(live, 1) / group.expected_output_files))
    writer = DataFileWriter(table.io, md, spec, schema, target, rows_per_file,
                            prefix=f"{group.index - 1:05d}-{group.index}")
    same_spec = _same_spec(group, spec)
    try:
        for t in group.tasks:
            for batch in live_batches(table.io, t, schema, target, deleted.of(t), mapping, row_lineage=lineage):
                writer.write(batch, group.partition if same_spec else None)
        return writer.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        written.extend(writer.written)


def _no_new_deletes(table: Table, start: Snapshot, options: RewriteOptions,
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


def _rewrite_and_commit(table: Table, options: RewriteOptions, head: Snapshot, groups: list[FileGroup],
                        res: RewriteDataFilesResult, workers: int) -> RewriteDataFilesResult:
    md = table.metadata
    spec = md.spec()
    deleted = DeletedPositions(table.io)
    layout = ManifestListLayout(str(uuid.uuid4()), [])
    removed: list[DataFile] = []
    change = SnapshotChange("replace", layout, deletes=Deletes(removed))
    snapshot_id = new_snapshot_id(md)
    written = change.written
    partition_of = {}
    for g in groups:
        for t in g.tasks:
            s = md.spec_by_id(t.data.spec_id)
            partition_of[t.data.file.file_path] = (s.partition_path(t.data.file.partition or (), md.schema())
                                                   if s is not None and t.data.file.partition else "")
    with discard_on_failure(table.io, written):
        outputs = list(ordered_map(lambda g: _rewrite_group(table, md, g, deleted, written), groups,
                                   workers=max(1, workers), wait=True))
        new_files: list[DataFile] = []
        for g, files, doc in zip(groups, outputs, res.groups, strict=True):
            doc.files_out, doc.bytes_out = len(files), sum(f.file_size_in_bytes for f in files)
            doc.records_out = sum(f.record_count for f in files)
            new_files.extend(files)
            for t in g.tasks:
                removed.append(t.data.file)
                change.summary.removed_file(t.data.file, partition_of[t.data.file.file_path])
                if t.dv is not None:
                    removed.append(t.dv.file)
                    change.summary.removed_file(t.dv.file, partition_of[t.data.file.file_path])
        for f in new_files:
            change.summary.added_file(f, spec.partition_path(f.partition or (), md.schema()) if f.partition else "")
        start_seq = head.sequence_number or 0
        seq = start_seq if options.use_starting_sequence_number and md.format_version >= 2 else None
        layout.write_appended(table.io, md, table.metadata_folder, {spec.spec_id: new_files}, snapshot_id, written,
                              data_sequence_number=seq)
        rewritten = {t.data.file.file_path: t for g in groups for t in g.tasks}
        done = write_snapshot(table, options.branch, change, snapshot_id=snapshot_id,
                              check=_no_new_deletes(table, head, options, rewritten))
    res.added_data_files_count = len(new_files)
    res.snapshot_id = snapshot_id
    if seq is not None:
        res.data_sequence_number = seq
    res.commit.record(done.metadata_location, done.attempts)
    res.title = (f"Rewrote {res.rewritten_data_files_count} data files into {res.added_data_files_count} "
                 f"in {table.identifier}")
    return res


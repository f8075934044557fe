"""`icectl rewrite-data-files`: compact small files (and files heavy with deletes) into files of the
target size, as Spark's ``rewrite_data_files`` procedure does with its default bin-pack strategy.

1. Plan (:mod:`.plan`): the branch head's live data files with the deletes that apply to them
   (:mod:`icectl.table.scan_tasks`), chosen and grouped as Java's ``BinPackRewriteFilePlanner``.
2. Rewrite: each group's live rows (deletion vectors, position and equality deletes applied, columns read by
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
   that did not happen are removed. With partial progress, groups commit in batches and a failed
   batch leaves the others committed (:mod:`.run`).

Nothing is deleted from storage: the rewritten files stay for older snapshots until
expire-snapshots removes them.
"""

from __future__ import annotations

import uuid

from icectl.engine import Engine
from icectl.errors import UnsupportedError
from icectl.results import NEXT_METADATA
from icectl.spec.manifest import DataFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.values import to_human
from icectl.table import Table
from icectl.table.commit import new_snapshot_id
from icectl.table.data_writer import data_location
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.scan_tasks import plan_tasks
from icectl.table.snapshot_writer import branch_head
from icectl.table.write_guard import check_writable

from .plan import FileGroup, RewriteOptions, Sizes, plan_groups
from .result import RewriteDataFilesResult, RewriteGroup
from .run import planned_output_files, run_groups, same_spec, sort_order_of

__all__ = ["MAX_CONCURRENT_GROUPS", "RewriteDataFilesResult", "RewriteOptions", "rewrite_data_files"]

MAX_FORMAT_VERSION = 3  # v4 tables are refused: their layout is not written by this command yet
MAX_CONCURRENT_GROUPS = 5  # Spark's max-concurrent-file-group-rewrites default


def _partition_doc(md: TableMetadata, spec: PartitionSpec, group: FileGroup,
                   same_spec: bool) -> dict[str, object]:
    if spec.is_unpartitioned or not same_spec:
        return {}
    ptype = md.partition_type(spec)
    return {f.name: to_human(f.field_type, v) for f, v in zip(ptype.fields, group.partition, strict=True)}


def _removed_dvs(group: FileGroup) -> list[DataFile]:
    """The deletion vectors that go with the group's data files (v3: a DV is only its file's)."""
    return [t.dv.file for t in group.tasks if t.dv is not None]


def rewrite_data_files(table: Table, options: RewriteOptions, *, dry_run: bool = False,
                       workers: int = MAX_CONCURRENT_GROUPS, engine: Engine | None = None) -> RewriteDataFilesResult:
    """Rewrite the branch head's small (or delete-heavy) data files into files of the target size,
    as one ``replace`` commit (see the module docstring)."""
    options.check()
    check_writable(table)
    md = table.metadata
    if md.format_version > MAX_FORMAT_VERSION:
        raise UnsupportedError(f"rewrite-data-files does not write format v{md.format_version} tables yet",
                               hint="it rewrites v1-v3 tables; compact a v4 table's manifests with icectl compact")
    sizes = Sizes.of(options, md)
    if options.strategy == "sort":
        sort_order_of(md, options)  # an unsorted table with no order given: refused before any work
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
        groups=[RewriteGroup(index=g.index, partition=_partition_doc(md, spec, g, same_spec(g, spec.spec_id)),
                             files_in=len(g.tasks), bytes_in=g.input_size, records_in=g.records,
                             delete_files_applied=len({d.file.file_path + str(d.file.content_offset)
                                                       for t in g.tasks for d in t.deletes}),
                             expected_output_files=g.expected_output_files) for g in groups])
    if head is None or not groups:
        res.title = f"Nothing to rewrite in {table.identifier} on {options.branch}"
        if dry_run:
            res.dry.plan([], [])
        return res
    if dry_run:
        res.added_data_files_count = sum(planned_output_files(table.io, md, g, options) for g in groups)
        commit_id = str(uuid.uuid4())
        res.dry.plan([f"{data_location(md)}/ ({res.added_data_files_count} new data files)",
                      *ManifestListLayout(commit_id, []).appended_paths(md, table.metadata_folder, {spec.spec_id: []},
                                                                        new_snapshot_id(md)),
                      NEXT_METADATA], [])
        return res
    return run_groups(table, options, head, groups, res, workers, engine)

"""Maintenance commands: `icectl expire-snapshots` (the nightly retention job), `icectl compact` and
`icectl rewrite-data-files`, for one table or every table of a catalog or namespace (``--all``)."""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated

import typer

from icectl.cli.framework import TableTargets, command
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.cli.options.rewrite import (
    BranchOpt,
    MaxFileGroupSizeOpt,
    MaxFileSizeOpt,
    MinFileSizeOpt,
    MinInputFilesOpt,
    RewriteAllOpt,
    group_size,
    size,
)
from icectl.engine import Engine
from icectl.errors import UsageError
from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import CompactOptions, parse_size
from icectl.ops.compact.result import CompactResult
from icectl.ops.create.ddl import parse_sort_order
from icectl.ops.expire import ExpirePolicy, expire_snapshots, parse_older_than
from icectl.ops.expire.result import ExpireResult
from icectl.ops.rewrite_data_files import (
    MAX_CONCURRENT_GROUPS,
    RewriteDataFilesResult,
    RewriteOptions,
    rewrite_data_files,
)
from icectl.ops.rewrite_data_files.plan import (
    DELETE_FILE_THRESHOLD_DEFAULT,
    DELETE_RATIO_THRESHOLD_DEFAULT,
    MAX_COMMITS_DEFAULT,
    MIN_INPUT_FILES_DEFAULT,
)
from icectl.ops.rewrite_data_files.sort import zorder_columns
from icectl.results import MultiResult, Result
from icectl.spec.metadata import TableMetadata
from icectl.spec.sorting import SortOrder
from icectl.table import Table


def expire_cmd(
    tables: TableTargets,
    older_than: Annotated[str | None, typer.Option(
        "--older-than", help="Expire snapshots older than this: a duration (7d, 12h) or a timestamp. "
                             "Default: history.expire.max-snapshot-age-ms (5 days).", show_default=False)]
    = None,
    retain_last: Annotated[int | None, typer.Option(
        "--retain-last", help="Keep at least this many snapshots of each branch. "
                              "Default: history.expire.min-snapshots-to-keep (1).", show_default=False)] = None,
    snapshot_id: Annotated[list[int] | None, typer.Option(
        "--snapshot-id", help="Also expire this snapshot (repeatable).", show_default=False)] = None,
    clean_expired_metadata: Annotated[bool, typer.Option(
        "--clean-expired-metadata", help="Also drop schemas and partition specs no retained snapshot uses.")]
    = False,
    max_deletes: Annotated[int | None, typer.Option(
        "--max-deletes", help="Refuse a run that would delete more files than this.", show_default=False)]
    = None,
    allow_external_deletes: Annotated[bool, typer.Option(
        "--allow-external-deletes",
        help="Also delete files outside the table location (kept and reported by default).")] = False,
    max_concurrent_deletes: Annotated[int, typer.Option(
        "--max-concurrent-deletes", help="Files deleted in parallel.")] = 8,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> Result | MultiResult:
    """Expire snapshots by retention policy, then delete the files no retained snapshot reaches.

    Policy: table properties history.expire.* and each ref's own retention, overridden by
    --older-than and --retain-last. Snapshots no branch or tag reaches are kept while younger
    than the cutoff, as Iceberg Java does. Files are deleted only after the commit succeeded.
    """
    if max_deletes is not None and max_deletes < 0:  # else every run, even an empty one, is refused
        raise UsageError("--max-deletes must be 0 or more")
    now = int(time.time() * 1000)
    policy = ExpirePolicy(older_than_ms=parse_older_than(older_than, now) if older_than else None,
                          retain_last=retain_last, snapshot_ids=tuple(snapshot_id or ()),
                          clean_expired_metadata=clean_expired_metadata)
    kw = {"dry_run": dry_run, "max_deletes": max_deletes, "allow_external_deletes": allow_external_deletes,
          "max_concurrent_deletes": max_concurrent_deletes, "now_ms": now, "engine": engine}
    if tables.all_tables and policy.snapshot_ids:
        raise UsageError("--snapshot-id names one table's snapshots; it cannot go with --all")
    return tables.run(ExpireResult, lambda t: expire_snapshots(t, policy, **kw))  # type: ignore[arg-type]


def compact_cmd(
    tables: TableTargets,
    spec_id: Annotated[int | None, typer.Option(
        "--spec-id", help="Only manifests of this partition spec (default: every spec, each apart).",
        show_default=False)] = None,
    content: Annotated[str, typer.Option(
        "--content", help="Which manifests: data, deletes or all.")] = "all",
    min_manifests: Annotated[int | None, typer.Option(
        "--min-manifests", help="Only rewrite a (spec, content) group that has at least N manifests.",
        metavar="N", show_default=False)] = None,
    target_size: Annotated[str | None, typer.Option(
        "--target-size", help="Target manifest size (8388608, 8MiB, 512KiB). "
                              "Default: commit.manifest.target-size-bytes (8 MiB).", show_default=False)] = None,
    sort_by: Annotated[str | None, typer.Option(
        "--sort-by", help="Partition fields to cluster entries by first, comma-separated "
                          "(default: the partition tuple in order).", show_default=False)] = None,
    branch: Annotated[str, typer.Option("--branch", help="The branch whose head is compacted.")] = "main",
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> Result | MultiResult:
    """Rewrite and merge manifests (data and delete manifests) into few, clustered ones.

    Groups the branch head's manifests by partition spec and content, clusters live entries
    by partition value and rolls them at the target size; a group that would not improve is
    left alone. One 'replace' commit; every file, sequence number and row id stays as it was.
    Replaced manifests stay on disk for older snapshots until expire-snapshots removes them.
    On v4 tables the leaves of the root: root-level files are flushed into leaves, manifest
    DVs applied and DELETED root entries dropped.
    """
    options = CompactOptions(
        spec_id=spec_id, content=content, min_manifests=min_manifests,
        target_size=parse_size(target_size) if target_size is not None else None,
        sort_by=tuple(s.strip() for s in sort_by.split(",") if s.strip()) if sort_by else (), branch=branch)
    options.check()
    return tables.run(CompactResult, lambda t: compact(t, options, dry_run=dry_run, engine=engine))


def rewrite_data_files_cmd(
    tables: TableTargets,
    strategy: Annotated[str, typer.Option(
        "--strategy", help="binpack (rows as they are), or sort (by --sort-order, else the table's sort "
                           "order).")] = "binpack",
    sort_order: Annotated[str | None, typer.Option(
        "--sort-order", help="With --strategy sort: 'id desc nulls last, days(ts)', or 'zorder(a, b)'.",
        metavar="ORDER", show_default=False)] = None,
    where: Annotated[str | None, typer.Option(
        "--where", help="Only files that might hold a row matching this predicate "
                        "(id > 5 AND region = 'eu'; IN, IS NULL, NOT, DATE '...', TIMESTAMP '...').",
        metavar="PREDICATE", show_default=False)] = None,
    target_file_size_bytes: Annotated[str | None, typer.Option(
        "--target-file-size-bytes", help="Target size of the new files (536870912, 512MiB). "
                                         "Default: write.target-file-size-bytes (512 MiB).",
        metavar="SIZE", show_default=False)] = None,
    min_file_size_bytes: MinFileSizeOpt = None,
    max_file_size_bytes: MaxFileSizeOpt = None,
    min_input_files: MinInputFilesOpt = MIN_INPUT_FILES_DEFAULT,
    rewrite_all: RewriteAllOpt = False,
    max_file_group_size_bytes: MaxFileGroupSizeOpt = None,
    delete_file_threshold: Annotated[int, typer.Option(
        "--delete-file-threshold", help="Rewrite a file that this many delete files apply to. Default: off.",
        metavar="N", show_default=False)] = DELETE_FILE_THRESHOLD_DEFAULT,
    delete_ratio_threshold: Annotated[float, typer.Option(
        "--delete-ratio-threshold", help="Rewrite a file whose file-scoped deletes remove this share of its rows.",
        metavar="RATIO")] = DELETE_RATIO_THRESHOLD_DEFAULT,
    use_starting_sequence_number: Annotated[bool, typer.Option(
        "--use-starting-sequence-number/--no-use-starting-sequence-number",
        help="Give the new files the starting snapshot's data sequence number, so equality deletes committed "
             "meanwhile still apply.")] = True,
    partial_progress: Annotated[bool, typer.Option(
        "--partial-progress", help="Commit the groups in several commits (--max-commits); a failed one leaves "
                                   "the others committed.")] = False,
    max_commits: Annotated[int, typer.Option(
        "--max-commits", help="With --partial-progress: the most commits the groups are split into.",
        metavar="N")] = MAX_COMMITS_DEFAULT,
    max_failed_commits: Annotated[int | None, typer.Option(
        "--max-failed-commits", help="With --partial-progress: fail the run after more failed commits than "
                                     "this. Default: --max-commits.", metavar="N", show_default=False)] = None,
    max_concurrent: Annotated[int, typer.Option(
        "--max-concurrent-file-group-rewrites", help="Groups rewritten at once.", metavar="N")]
    = MAX_CONCURRENT_GROUPS,
    branch: BranchOpt = "main",
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> Result | MultiResult:
    """Compact small data files (and files heavy with deletes) into files of the target size.

    Spark's rewrite_data_files (bin-pack, sort, z-order), option for option: files outside
    75%-180% of the target size are grouped by partition and rewritten with their deletion
    vectors and position deletes applied, in one 'replace' commit that keeps the starting
    snapshot's sequence number and every row's _row_id. The rewritten files stay on disk for
    older snapshots until expire-snapshots removes them.
    """
    options = RewriteOptions(
        target_file_size_bytes=size(target_file_size_bytes, "--target-file-size-bytes"),
        min_file_size_bytes=size(min_file_size_bytes, "--min-file-size-bytes"),
        max_file_size_bytes=size(max_file_size_bytes, "--max-file-size-bytes"),
        min_input_files=min_input_files, rewrite_all=rewrite_all,
        max_file_group_size_bytes=group_size(max_file_group_size_bytes),
        delete_file_threshold=delete_file_threshold, delete_ratio_threshold=delete_ratio_threshold,
        use_starting_sequence_number=use_starting_sequence_number, partial_progress=partial_progress,
        max_commits=max_commits, max_failed_commits=max_failed_commits, where=where, strategy=strategy,
        zorder=tuple(zorder_columns(sort_order) or ()), branch=branch)
    if sort_order is not None and strategy != "sort":
        raise UsageError("--sort-order goes with --strategy sort", hint="add --strategy sort")
    options.check()
    if max_concurrent <= 0:
        raise UsageError(f"--max-concurrent-file-group-rewrites is {max_concurrent} but must be > 0")
    def run(t: Table) -> RewriteDataFilesResult:
        own = options
        if sort_order is not None and not options.zorder:
            own = dataclasses.replace(options, sort_order=_sort_order(t.metadata, sort_order))
        return rewrite_data_files(t, own, dry_run=dry_run, workers=max_concurrent, engine=engine)

    return tables.run(RewriteDataFilesResult, run)


def _sort_order(md: TableMetadata, text: str) -> SortOrder:
    """``text`` as a sort order of the table: the table's own id when it is one of its orders (the new
    files then record it), else an id the table does not use."""
    unused = max((o.order_id for o in md.sort_orders), default=0) + 1
    order = parse_sort_order(text, md.schema(), order_id=unused)
    same = next((o for o in md.sort_orders if o.fields == order.fields and not o.is_unsorted), None)
    return same if same is not None else order


def register(app: typer.Typer) -> None:
    command(app, "expire-snapshots", engine="deletes", each_table=True)(expire_cmd)
    command(app, "compact", engine=True, each_table=True)(compact_cmd)
    command(app, "rewrite-data-files", engine=True, each_table=True)(rewrite_data_files_cmd)


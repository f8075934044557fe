"""Delete-file maintenance: `icectl rewrite-position-delete-files`, for one table or every table of
a catalog or namespace (``--all``)."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import TableTargets, command
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.cli.options.rewrite import (
    MIN_INPUT_FILES_DEFAULT,
    BranchOpt,
    MaxFileGroupSizeOpt,
    MaxFileSizeOpt,
    MinFileSizeOpt,
    MinInputFilesOpt,
    RewriteAllOpt,
    group_size,
    size,
)
from icectl.errors import UsageError
from icectl.ops.rewrite_position_delete_files import (
    ConvertEqualityDeletesResult,
    PositionDeleteOptions,
    RewritePositionDeleteFilesResult,
    rewrite_position_delete_files,
)
from icectl.ops.rewrite_position_delete_files.convert import convert_equality_deletes as convert_deletes
from icectl.results import MultiResult, Result


def rewrite_position_delete_files_cmd(
    tables: TableTargets,
    target_file_size_bytes: Annotated[str | None, typer.Option(
        "--target-file-size-bytes", help="Target size of the new delete files (67108864, 64MiB). "
                                         "Default: write.delete.target-file-size-bytes (64 MiB).",
        metavar="SIZE", show_default=False)] = None,
    min_file_size_bytes: MinFileSizeOpt = None,
    max_file_size_bytes: MaxFileSizeOpt = None,
    min_input_files: MinInputFilesOpt = MIN_INPUT_FILES_DEFAULT,
    rewrite_all: RewriteAllOpt = False,
    max_file_group_size_bytes: MaxFileGroupSizeOpt = None,
    branch: BranchOpt = "main",
    convert_equality_deletes: Annotated[bool, typer.Option(
        "--convert-equality-deletes",
        help="Instead: turn the equality delete files into position delete files (v2) or deletion vectors "
             "(v3), one 'replace' commit.")] = False,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result | MultiResult:
    """Compact a v2 table's position delete files and drop deletes of data files no longer live.

    Spark's rewrite_position_delete_files, option for option: position delete files outside
    75%-180% of the target size are grouped by partition, their deletes of data files that are
    still live are sorted and written into new files (one per data file under Spark's default
    write.delete.granularity=file), in one 'replace' commit. v1 tables have no delete files; in
    v3, position delete files kept from v2 become deletion vectors (with the DVs of their
    partitions), and a table with DVs only has nothing to do. The rewritten files stay on disk
    for older snapshots until expire-snapshots removes them.

    With --convert-equality-deletes it converts instead: each data file an equality delete file
    applies to is read for the equality columns, and the rows matched become positions (a
    position delete file per data file in v2, the file's deletion vector in v3); the equality
    delete files leave the snapshot. Readers stop joining on every scan, and the table can go to
    format v4, which has no equality deletes.
    """
    if convert_equality_deletes:
        sizing = (target_file_size_bytes, min_file_size_bytes, max_file_size_bytes, max_file_group_size_bytes)
        if any(v is not None for v in sizing) or rewrite_all or min_input_files != MIN_INPUT_FILES_DEFAULT:
            raise UsageError("--convert-equality-deletes takes no sizing option (it writes one file per data "
                             "file), only --branch, --dry-run and --json")
        return tables.run(ConvertEqualityDeletesResult,
                          lambda t: convert_deletes(t, branch=branch, dry_run=dry_run))
    options = PositionDeleteOptions(
        target_file_size_bytes=size(target_file_size_bytes, "--target-file-size-bytes"),
        min_file_size_bytes=size(min_file_size_bytes, "--min-file-size-bytes"),
        max_file_size_bytes=size(max_file_size_bytes, "--max-file-size-bytes"),
        min_input_files=min_input_files, rewrite_all=rewrite_all,
        max_file_group_size_bytes=group_size(max_file_group_size_bytes),
        branch=branch)
    options.check()
    return tables.run(RewritePositionDeleteFilesResult,
                      lambda t: rewrite_position_delete_files(t, options, dry_run=dry_run))


def register(app: typer.Typer) -> None:
    command(app, "rewrite-position-delete-files", each_table=True)(rewrite_position_delete_files_cmd)

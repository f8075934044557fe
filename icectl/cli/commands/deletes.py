"""Delete-file maintenance: `icectl rewrite-position-delete-files`, for one table or every table of
a catalog or namespace (``--all``)."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import TableTargets, command
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.config import parse_size as parse_byte_size
from icectl.errors import UsageError
from icectl.ops.rewrite_position_delete_files import (
    ConvertEqualityDeletesResult,
    PositionDeleteOptions,
    RewritePositionDeleteFilesResult,
    rewrite_position_delete_files,
)
from icectl.ops.rewrite_position_delete_files.convert import convert_equality_deletes as convert_deletes
from icectl.ops.rewrite_position_delete_files.plan import MAX_FILE_GROUP_SIZE_DEFAULT, MIN_INPUT_FILES_DEFAULT
from icectl.results import MultiResult, Result


def _size(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    try:
        return parse_byte_size(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a size (67108864, 64MiB, 1.5GB)") from None


def rewrite_position_delete_files_cmd(
    tables: TableTargets,
    target_file_size_bytes: Annotated[str | None, typer.Option(
        "--target-file-size-bytes", help="Target size of the new delete files (67108864, 64MiB). "
                                         "Default: write.delete.target-file-size-bytes (64 MiB).",
        metavar="SIZE", show_default=False)] = None,
    min_file_size_bytes: Annotated[str | None, typer.Option(
        "--min-file-size-bytes", help="Delete files smaller than this are rewritten. Default: 75% of the target.",
        metavar="SIZE", show_default=False)] = None,
    max_file_size_bytes: Annotated[str | None, typer.Option(
        "--max-file-size-bytes", help="Delete files larger than this are rewritten. Default: 180% of the target.",
        metavar="SIZE", show_default=False)] = None,
    min_input_files: Annotated[int, typer.Option(
        "--min-input-files", help="Rewrite a group of at least this many delete files even when it is small.",
        metavar="N")] = MIN_INPUT_FILES_DEFAULT,
    rewrite_all: Annotated[bool, typer.Option(
        "--rewrite-all", help="Rewrite every position delete file, whatever its size.")] = False,
    max_file_group_size_bytes: Annotated[str | None, typer.Option(
        "--max-file-group-size-bytes", help="Largest amount of deletes rewritten as one group. Default: 100 GiB.",
        metavar="SIZE", show_default=False)] = None,
    branch: Annotated[str, typer.Option("--branch", help="The branch whose head is rewritten.")] = "main",
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
    group_size = _size(max_file_group_size_bytes, "--max-file-group-size-bytes")
    options = PositionDeleteOptions(
        target_file_size_bytes=_size(target_file_size_bytes, "--target-file-size-bytes"),
        min_file_size_bytes=_size(min_file_size_bytes, "--min-file-size-bytes"),
        max_file_size_bytes=_size(max_file_size_bytes, "--max-file-size-bytes"),
        min_input_files=min_input_files, rewrite_all=rewrite_all,
        max_file_group_size_bytes=group_size if group_size is not None else MAX_FILE_GROUP_SIZE_DEFAULT,
        branch=branch)
    options.check()
    return tables.run(RewritePositionDeleteFilesResult,
                      lambda t: rewrite_position_delete_files(t, options, dry_run=dry_run))


def register(app: typer.Typer) -> None:
    command(app, "rewrite-position-delete-files", each_table=True)(rewrite_position_delete_files_cmd)

"""Options of the two rewrite commands (rewrite-data-files, rewrite-position-delete-files), which
take Spark's ``SizeBasedFileRewritePlanner`` options by the same names: declared once here so the
two read, parse and refuse alike."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.config import parse_size as parse_byte_size
from icectl.errors import UsageError
from icectl.ops.rewrite_data_files.plan import MAX_FILE_GROUP_SIZE_DEFAULT, MIN_INPUT_FILES_DEFAULT

__all__ = ["MAX_FILE_GROUP_SIZE_DEFAULT", "MIN_INPUT_FILES_DEFAULT", "BranchOpt", "MaxFileGroupSizeOpt",
           "MaxFileSizeOpt", "MinFileSizeOpt", "MinInputFilesOpt", "RewriteAllOpt", "group_size", "size"]


def size(text: str | None, option: str) -> int | None:
    """A size option's bytes (67108864, 64MiB, 1.5GB); None when not given; exit 2 when not a size."""
    if text is None:
        return None
    try:
        return parse_byte_size(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a size (67108864, 64MiB, 1.5GB)") from None


def group_size(text: str | None) -> int:
    """``--max-file-group-size-bytes``, Spark's 100 GiB when not given."""
    given = size(text, "--max-file-group-size-bytes")
    return given if given is not None else MAX_FILE_GROUP_SIZE_DEFAULT


MinFileSizeOpt = Annotated[str | None, typer.Option(
    "--min-file-size-bytes", help="Files smaller than this are rewritten. Default: 75% of the target.",
    metavar="SIZE", show_default=False)]

MaxFileSizeOpt = Annotated[str | None, typer.Option(
    "--max-file-size-bytes", help="Files larger than this are rewritten. Default: 180% of the target.",
    metavar="SIZE", show_default=False)]

MinInputFilesOpt = Annotated[int, typer.Option(
    "--min-input-files", help="Rewrite a group of at least this many files even when it is small.",
    metavar="N")]

RewriteAllOpt = Annotated[bool, typer.Option("--rewrite-all", help="Rewrite every file, whatever its size.")]

MaxFileGroupSizeOpt = Annotated[str | None, typer.Option(
    "--max-file-group-size-bytes", help="Largest amount rewritten as one group. Default: 100 GiB.",
    metavar="SIZE", show_default=False)]

BranchOpt = Annotated[str, typer.Option("--branch", help="The branch whose head is rewritten.")]

"""``icectl rewrite-position-delete-files``'s ``--json`` document (the rules are :mod:`icectl.results`'s).

The counts carry the names Spark's ``rewrite_position_delete_files`` procedure reports them under.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.results import FLAT, UNSET, CommandResult, Committed, DryRun, Part, Unset


@dataclass(kw_only=True)
class DeleteGroupDoc(Part):
    """One group: the position delete files it reads, the dangling deletes it drops, the files it writes."""

    index: int
    partition: dict[str, Any]  # partition field name -> human value ({} unpartitioned)
    spec_id: int
    files_in: int
    bytes_in: int
    records_in: int
    data_sequence_number: int  # of the new files: the largest of the rewritten ones (Java's)
    dangling_deletes: int  # deletes of data files no longer live in the snapshot, dropped
    files_out: int
    records_out: int
    bytes_out: int | Unset = UNSET  # written from here on


@dataclass(kw_only=True)
class RewritePositionDeleteFilesResult(CommandResult):
    """``icectl rewrite-position-delete-files`` (Spark's ``rewrite_position_delete_files``)."""

    view: ClassVar[str] = "rewrite_position_delete_files"
    one_line: ClassVar[str] = "icectl.cli.output.summaries:rewrite_position_delete_files_line"

    table: str
    branch: str
    dry_run: bool
    format_version: int
    starting_snapshot_id: int | None
    target_file_size_bytes: int
    delete_granularity: str  # write.delete.granularity (Spark's default: file)
    rewritten_delete_files_count: int
    added_delete_files_count: int
    rewritten_bytes_count: int
    added_bytes_count: int | Unset = UNSET  # unknown on a dry run
    dangling_deletes_count: int = 0
    groups: list[DeleteGroupDoc] = field(default_factory=list)
    reason: str | None = None  # why there is nothing to do (v1, v3 with only deletion vectors, no deletes)
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    snapshot_id: int | None = None  # the replace snapshot; None: dry run or nothing to rewrite
    commit: Committed = field(default_factory=Committed, metadata=FLAT)


@dataclass(kw_only=True)
class ConvertedFileDoc(Part):
    """One data file the equality deletes applied to, and what its new deletes hold."""

    data_file: str
    equality_delete_files: int  # how many of the converted files apply to it
    deleted_rows: int  # rows they match that no position delete or DV deleted already
    data_sequence_number: int  # of its new delete file or DV (see the module)
    replaced_dv: str | None = None  # v3: the deletion vector the new one replaces (its Puffin file)


@dataclass(kw_only=True)
class ConvertEqualityDeletesResult(CommandResult):
    """``icectl rewrite-position-delete-files --convert-equality-deletes``: equality delete files
    turned into position deletes (v2) or deletion vectors (v3)."""

    view: ClassVar[str] = "convert_equality_deletes"
    one_line: ClassVar[str] = "icectl.cli.output.summaries:convert_equality_deletes_line"

    table: str
    branch: str
    dry_run: bool
    format_version: int
    starting_snapshot_id: int | None
    converted_equality_delete_files_count: int  # equality delete files the commit removes
    converted_equality_delete_bytes: int
    data_files_count: int  # data files those deletes applied to (read for their equality columns)
    deleted_rows_count: int  # positions written that no other delete held
    added_delete_files_count: int  # new position delete files (v2) or deletion vectors (v3)
    removed_delete_files_count: int  # the equality delete files, and in v3 the deletion vectors replaced
    added_bytes_count: int | Unset = UNSET  # unknown on a dry run
    files: list[ConvertedFileDoc] = field(default_factory=list)
    reason: str | None = None  # why there is nothing to do
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    snapshot_id: int | None = None  # the replace snapshot; None: dry run or nothing to convert
    commit: Committed = field(default_factory=Committed, metadata=FLAT)

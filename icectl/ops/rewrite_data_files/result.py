"""``icectl rewrite-data-files``'s ``--json`` document (the rules are :mod:`icectl.results`'s).

The counts carry the names Spark's ``rewrite_data_files`` procedure reports them under.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.results import FLAT, UNSET, CommandResult, Committed, DryRun, Part, Unset


@dataclass(kw_only=True)
class RewriteGroup(Part):
    """One file group: the files it reads, the deletes it applies, the files it writes."""

    index: int
    partition: dict[str, Any]  # partition field name -> human value ({} unpartitioned or other specs)
    files_in: int
    bytes_in: int
    records_in: int
    delete_files_applied: int
    expected_output_files: int
    status: str | Unset = UNSET  # rewritten, failed (after a run)
    error: str | Unset = UNSET  # why a group failed (partial progress)
    files_out: int | Unset = UNSET  # written from here on
    bytes_out: int | Unset = UNSET
    records_out: int | Unset = UNSET


@dataclass(kw_only=True)
class RewriteDataFilesResult(CommandResult):
    """``icectl rewrite-data-files`` (Spark's ``rewrite_data_files``, bin-pack)."""

    view: ClassVar[str] = "rewrite_data_files"
    one_line: ClassVar[str] = "icectl.cli.output.summaries:rewrite_data_files_line"

    table: str
    branch: str
    dry_run: bool
    strategy: str
    starting_snapshot_id: int | None
    target_file_size_bytes: int
    rewritten_data_files_count: int
    added_data_files_count: int
    rewritten_bytes_count: int
    failed_data_files_count: int
    removed_delete_files_count: int
    groups: list[RewriteGroup]
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    snapshot_id: int | None = None  # the (last) replace snapshot; None: dry run or nothing to rewrite
    snapshot_ids: list[int] | Unset = UNSET  # every replace snapshot (several with partial progress)
    data_sequence_number: int | Unset = UNSET  # of the new files (the starting snapshot's)
    commit: Committed = field(default_factory=Committed, metadata=FLAT)

"""The results of this family's commands:
their ``--json`` documents, one dataclass each (the rules are :mod:`icectl.results`'s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from icectl.results import FLAT, UNSET, CommandResult, DryRun, FileRef, Part, PlannedWrite, Unset, WrittenFile


@dataclass(kw_only=True)
class CompactGroup(Part):
    """One (partition spec, content) group of a compaction: skipped, or rewritten."""

    spec_id: int
    content: str  # data, deletes
    action: str  # rewrite, skip
    reason: str
    manifests_in: int
    bytes_in: int
    leaves_kept: int | Unset = UNSET  # v4
    root_files_in: int | Unset = UNSET  # v4
    live_entries: int | Unset = UNSET  # rewritten groups from here on
    deleted_entries_dropped: int | Unset = UNSET
    manifest_dvs_applied: int | Unset = UNSET  # v4
    dv_rows_dropped: int | Unset = UNSET  # v4
    sort_by: list[str] | Unset = UNSET
    manifests_out: int | Unset = UNSET
    estimated_bytes_out: int | Unset = UNSET  # planned, not written
    replaced: list[FileRef] | Unset = UNSET  # dry run
    flushed: list[str] | Unset = UNSET  # dry run, v4: root-level data files moved into leaves
    bytes_out: int | Unset = UNSET  # written
    written: list[WrittenFile] | Unset = UNSET  # written


@dataclass(kw_only=True)
class CompactResult(CommandResult):
    """``icectl compact``, of manifest lists (v1-v3) and of v4 roots and leaves (the v4-only keys)."""

    view: ClassVar[str] = "compact"
    one_line: ClassVar[str] = "icectl.cli.output.summaries:compact_line"

    table: str
    branch: str
    dry_run: bool
    format_version: int | Unset = UNSET  # v4 only
    base_snapshot_id: int | None
    target_size_bytes: int
    manifests_replaced: int
    manifests_created: int
    manifests_kept: int
    entries_processed: int
    root_files_flushed: int | Unset = UNSET  # v4
    manifest_dvs_applied: int | Unset = UNSET  # v4
    root_deleted_entries_dropped: int | Unset = UNSET  # v4
    groups: list[CompactGroup]
    dry: DryRun[list[PlannedWrite], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    snapshot_id: int | Unset = UNSET  # committed from here on
    sequence_number: int | Unset = UNSET
    metadata_location: str | Unset = UNSET
    root_manifest: str | Unset = UNSET  # v4
    commit_attempts: int | Unset = UNSET
    reapplied_on: list[int] | Unset = UNSET
    replanned: bool | Unset = UNSET  # not a dry run: whether a concurrent commit made it plan again

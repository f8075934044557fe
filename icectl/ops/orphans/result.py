"""The result of this family's commands:
their ``--json`` documents, one dataclass each (the rules are :mod:`icectl.results`'s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.results import FLAT, UNSET, CommandResult, DryRun, Unset


@dataclass(kw_only=True)
class RemoveOrphanFilesResult(CommandResult):
    """``icectl remove-orphan-files``: what was listed, which files are orphans, what was done.

    ``orphan_file_locations`` are the paths as listed (Spark's ``orphan_file_location`` rows);
    a dry run carries ``would_write`` (always empty) and ``would_delete`` (the same list), a real
    run ``deleted_count``, ``already_gone`` and ``failures``.
    """

    view: ClassVar[str] = "remove_orphan_files"
    one_line: ClassVar[str] = "icectl.cli.output.summaries:orphan_line"

    table: str
    dry_run: bool
    location: str  # the folder listed
    older_than_ms: int  # files modified at or after this are never deleted
    prefix_mismatch_mode: str
    listed_file_count: int  # files listed (hidden ones not counted)
    too_young_count: int  # of those, modified at or after the cutoff
    valid_file_count: int  # files the table's metadata reaches
    orphan_file_count: int = 0
    orphan_file_locations: list[str] = field(default_factory=list)
    kept_prefix_mismatch: list[str] = field(default_factory=list)  # mode ignore: named with another scheme
    kept_links: list[str] = field(default_factory=list)  # symbolic links: never deleted
    kept_external_files: list[str] = field(default_factory=list)  # outside the delete fence
    skipped_table_folders: list[str] = field(default_factory=list)  # hold another table: not listed
    kept_shared_files: list[str] = field(default_factory=list)  # another table reaches them
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    deleted_count: int | Unset = UNSET  # real run
    already_gone: int | Unset = UNSET  # real run
    failures: list[str] | Unset = UNSET  # real run

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "orphan_file_locations":  # the count always agrees with the list
            super().__setattr__("orphan_file_count", len(value))

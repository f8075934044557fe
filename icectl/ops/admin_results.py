"""The results of the table administration commands (issue 14), one dataclass per command.

The same rules as :mod:`icectl.ops.results` (whose classes these share: ``CommandResult``,
``UNSET`` keys for what only a dry run or only a commit carries); kept apart so that module
stays readable. One section per command family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.results import UNSET, CommandResult, Part, Unset

# --------------------------------------------------------------------------- snapshot management
# (rollback, set-current, cherrypick, publish, fast-forward)


# --------------------------------------------------------------------------- branches and tags


# --------------------------------------------------------------------------- properties


# --------------------------------------------------------------------------- remove-orphan-files


# --------------------------------------------------------------------------- register and drop


# What a purge deletes, in Java's order: content files, manifests, manifest lists, statistics
# (the categories of expire-snapshots), then the metadata JSON files and the version hint.
DROP_CATEGORIES = ("data_files", "position_delete_files", "equality_delete_files", "manifest_files",
                   "manifest_lists", "statistics_files", "metadata_files")


@dataclass(kw_only=True)
class RegisterResult(CommandResult):
    """``icectl register``: Spark's ``register_table`` (whose output is the last three counts)."""

    view: ClassVar[str] = "register_table"

    table: str  # catalog.namespace.table
    dry_run: bool
    metadata_file: str  # the file given, as read
    format_version: int
    table_uuid: str | None
    current_snapshot_id: int | None
    total_records_count: int | None  # the current snapshot's summary (None for an empty table); Spark's names
    total_data_files_count: int | None
    would_write: list[str] | Unset = UNSET  # dry run
    metadata_location: str | Unset = UNSET  # registered: what the catalog points at now


@dataclass(kw_only=True)
class DropResult(CommandResult):
    """``icectl drop [--purge]``. ``deleted`` counts per :data:`DROP_CATEGORIES`."""

    view: ClassVar[str] = "drop_table"

    table: str
    dry_run: bool
    purge: bool
    metadata_location: str  # the table's last metadata file
    would_drop: str | Unset = UNSET  # dry run: the catalog entry that would go
    would_delete: dict[str, list[str]] | Unset = UNSET  # dry run, --purge: paths per category
    dropped: bool | Unset = UNSET  # done: the catalog entry is gone
    kept_external_files: list[str] | Unset = UNSET  # --purge: reached, but outside the table location
    already_gone: int | Unset = UNSET  # done, --purge
    failures: list[str] | Unset = UNSET  # done, --purge: files that could not be deleted
    removed_directories: list[str] | Unset = UNSET  # done, --purge: emptied folders of the table removed
    deleted: dict[str, int] = field(default_factory=dict)  # count per category (dry run: would delete)



__all__: list[str] = []
_UNUSED = (dataclass, field, Any, ClassVar, UNSET, CommandResult, Part, Unset)  # until the sections fill

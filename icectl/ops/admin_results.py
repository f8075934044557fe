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


@dataclass
class RefState(Part):
    """A branch or tag as metadata has it (retention in ms, None: the table default applies), and
    its retention as people read it (``retention``)."""

    type: str  # branch | tag
    snapshot_id: int
    min_snapshots_to_keep: int | None
    max_snapshot_age_ms: int | None
    max_ref_age_ms: int | None
    retention: str  # "retain-last 3, max-snapshot-age 7d, max-ref-age 30d" or "table defaults"


@dataclass(kw_only=True)
class RefChangeResult(CommandResult):
    """``icectl branch|tag create|replace|drop``: the ref before and after (None: absent)."""

    view: ClassVar[str] = "ref_change"

    table: str
    dry_run: bool
    action: str  # create | replace | drop
    type: str  # branch | tag
    name: str
    before: RefState | None
    after: RefState | None
    changed: bool  # False: nothing to do (--if-not-exists, --if-exists, or the ref is that already)
    reason: str | Unset = UNSET  # why nothing changed
    would_write: list[str] | Unset = UNSET  # dry run
    metadata_location: str | Unset = UNSET  # committed
    commit_attempts: int | Unset = UNSET  # committed


# --------------------------------------------------------------------------- properties


@dataclass
class PropertyChange(Part):
    """One key's old and new value (None: absent)."""

    old: str | None
    new: str | None


@dataclass(kw_only=True)
class PropertiesChangeResult(CommandResult):
    """``icectl properties set|unset``: every key that changes, old -> new."""

    view: ClassVar[str] = "properties_change"

    table: str
    dry_run: bool
    changes: dict[str, PropertyChange]  # by key, in the order given
    unchanged: list[str]  # set to the value it has already
    not_set: list[str]  # unset, but absent already (ignored, as Java's UpdateProperties does)
    would_write: list[str] | Unset = UNSET  # dry run
    metadata_location: str | Unset = UNSET  # committed
    commit_attempts: int | Unset = UNSET  # committed


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

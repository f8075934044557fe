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


@dataclass
class RefMove(Part):
    """A branch that moves (or is created, or stays where it is: ``from_snapshot_id`` == ``to_snapshot_id``)."""

    ref: str
    from_snapshot_id: int | None
    to_snapshot_id: int
    created: bool = False


@dataclass
class NewSnapshot(Part):
    """The snapshot a cherry-pick writes: its operation, summary and the data files it re-adds
    (and, for a dynamic overwrite, removes).

    ``snapshot_id`` and ``summary`` of a dry run are what the commit would use on the table as it
    is now (the timestamp, and the id on a retry, are the commit's own)."""

    snapshot_id: int
    parent_snapshot_id: int | None
    operation: str
    summary: dict[str, str]
    added_data_files: list[str]
    removed_data_files: list[str] | Unset = UNSET  # a dynamic overwrite's


@dataclass(kw_only=True)
class SnapshotManagementResult(CommandResult):
    """``icectl rollback``, ``set-current``, ``fast-forward``, ``cherrypick`` and ``publish``.

    ``previous_snapshot_id`` and ``current_snapshot_id`` are the branch head before and after (the
    output columns of Spark's procedures); ``changed`` is false when the branch already was there
    (nothing is written). ``ref`` says how the branch moves; a cherry-pick that writes a snapshot
    also carries ``new_snapshot``; one that moves main to the picked snapshot is ``mode``
    ``fast-forward``."""

    view: ClassVar[str] = "snapshot_management"
    table: str
    dry_run: bool
    branch: str
    previous_snapshot_id: int | None
    current_snapshot_id: int | None
    changed: bool
    mode: str  # "set-ref", "fast-forward" or "cherry-pick" (a new snapshot)
    ref: RefMove
    source_snapshot_id: int | Unset = UNSET  # cherrypick, publish
    wap_id: str | Unset = UNSET  # publish, or a cherry-picked staged snapshot
    new_snapshot: NewSnapshot | Unset = UNSET
    would_write: list[str] | Unset = UNSET
    would_delete: list[str] | Unset = UNSET
    metadata_location: str | Unset = UNSET
    commit_attempts: int | Unset = UNSET


@dataclass(kw_only=True)
class RollbackResult(SnapshotManagementResult):
    view: ClassVar[str] = "rollback"


@dataclass(kw_only=True)
class SetCurrentResult(SnapshotManagementResult):
    view: ClassVar[str] = "set_current"


@dataclass(kw_only=True)
class FastForwardResult(SnapshotManagementResult):
    view: ClassVar[str] = "fast_forward"


@dataclass(kw_only=True)
class CherrypickResult(SnapshotManagementResult):
    view: ClassVar[str] = "cherrypick"


@dataclass(kw_only=True)
class PublishResult(SnapshotManagementResult):
    view: ClassVar[str] = "publish"



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


@dataclass(kw_only=True)
class RemoveOrphanFilesResult(CommandResult):
    """``icectl remove-orphan-files``: what was listed, which files are orphans, what was done.

    ``orphan_file_locations`` are the paths as listed (Spark's ``orphan_file_location`` rows);
    a dry run carries ``would_write`` (always empty) and ``would_delete`` (the same list), a real
    run ``deleted_count``, ``already_gone`` and ``failures``.
    """

    view: ClassVar[str] = "remove_orphan_files"

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
    would_write: list[str] | Unset = UNSET  # dry run
    would_delete: list[str] | Unset = UNSET  # dry run
    deleted_count: int | Unset = UNSET  # real run
    already_gone: int | Unset = UNSET  # real run
    failures: list[str] | Unset = UNSET  # real run

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "orphan_file_locations":  # the count always agrees with the list
            super().__setattr__("orphan_file_count", len(value))


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
    warning: str | Unset = UNSET  # the metadata is already another catalog entry's (they share every file)


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
    shared_with: list[str] | Unset = UNSET  # --purge --allow-shared: the named tables whose files went too
    deleted: dict[str, int] = field(default_factory=dict)  # count per category (dry run: would delete)


__all__ = [
    "DROP_CATEGORIES", "CherrypickResult", "DropResult", "FastForwardResult", "NewSnapshot", "PropertiesChangeResult",
    "PropertyChange", "PublishResult", "RefChangeResult", "RefMove", "RefState", "RegisterResult",
    "RemoveOrphanFilesResult", "RollbackResult", "SetCurrentResult", "SnapshotManagementResult",
]


@dataclass(kw_only=True)
class CacheInfoResult(CommandResult):
    """Where the cache is, how full, and whether this process would use and write it."""

    view: ClassVar[str] = "cache_info"

    dir: str
    enabled: bool
    writable: bool
    entries: int
    bytes: int
    max_bytes: int


@dataclass(kw_only=True)
class CacheClearResult(CommandResult):
    """What ``cache clear`` removed (or, with --dry-run, would remove)."""

    view: ClassVar[str] = "cache_clear"

    dir: str
    dry_run: bool
    entries: int
    bytes: int

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


# --------------------------------------------------------------------------- properties


# --------------------------------------------------------------------------- remove-orphan-files


# --------------------------------------------------------------------------- register and drop


__all__: list[str] = []
_UNUSED = (dataclass, field, Any, ClassVar, UNSET, CommandResult, Part, Unset)  # until the sections fill

"""The results of this family's commands:
their ``--json`` documents, one dataclass each (the rules are :mod:`icectl.results`'s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from icectl.results import FLAT, UNSET, CommandResult, Committed, DryRun, Part, Unset


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
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    commit: Committed = field(default_factory=Committed, metadata=FLAT)


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
    commit: Committed = field(default_factory=Committed, metadata=FLAT)

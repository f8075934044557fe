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


__all__: list[str] = []
_UNUSED = (dataclass, field, Any, ClassVar, UNSET, CommandResult, Part, Unset)  # until the sections fill

"""Table changes as metadata updates and requirements (REST spec ``TableUpdate`` / ``TableRequirement``).

A commit is a list of requirements, checked against the base metadata, and a list of updates,
applied to it in order. Each update and requirement carries the REST spec's ``action`` / ``type``
name, and :meth:`to_json` gives its body in the REST ``CommitTableRequest`` shape, so a REST
catalog can send what the file-system and SQL catalogs apply locally.

:func:`apply_updates` follows Iceberg Java's ``TableMetadata.Builder`` (its checks included):
``addSnapshot`` (sequence numbers, v3 row lineage), ``setRef`` (``main`` moves
``current-snapshot-id`` and appends to ``snapshot-log``), ``removeSnapshots`` (with their
statistics and the refs left dangling), the snapshot-log rewrite of ``build()`` (a gap in history
drops everything before it; an intermediate ``main`` snapshot of the same change leaves no entry).
:func:`prepare_commit` is the rest of ``build()`` when a new version is written: the metadata-log
and ``last-updated-ms``. Requirements are in :mod:`icectl.spec.requirements`.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from icectl.errors import CorruptInputError, RefusedError, UsageError
from icectl.spec.metadata import MAX_FORMAT_VERSION, MIN_ROW_LINEAGE_VERSION, TableMetadata
from icectl.spec.properties import METADATA_PREVIOUS_VERSIONS_MAX
from icectl.spec.requirements import AssertRefSnapshotId, TableRequirement, check_requirements
from icectl.spec.snapshots import (
    MAIN_BRANCH,
    MetadataLogEntry,
    PartitionStatisticsFile,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    StatisticsFile,
)
from icectl.spec.soundness import INT64_MAX

# ---------------------------------------------------------------------------------------------
# Updates


def _json_value(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


@dataclass(frozen=True)
class _Update:
    """A ``TableUpdate``: its REST body is ``action`` plus its fields, ``snake_case`` as ``kebab-case``."""

    action: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, **{f.name.replace("_", "-"): _json_value(getattr(self, f.name))
                                          for f in dataclasses.fields(self)}}


@dataclass(frozen=True)
class AssignUUID(_Update):
    action: ClassVar[str] = "assign-uuid"
    uuid: str


@dataclass(frozen=True)
class UpgradeFormatVersion(_Update):
    action: ClassVar[str] = "upgrade-format-version"
    format_version: int


@dataclass(frozen=True)
class AddSnapshot(_Update):
    action: ClassVar[str] = "add-snapshot"
    snapshot: Snapshot


@dataclass(frozen=True)
class SetSnapshotRef(_Update):
    """Create or replace a branch or tag; the REST body flattens the ref's fields beside ``ref-name``."""

    action: ClassVar[str] = "set-snapshot-ref"
    ref_name: str
    ref: SnapshotRef

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "ref-name": self.ref_name, **self.ref.to_json()}


@dataclass(frozen=True)
class RemoveSnapshots(_Update):
    action: ClassVar[str] = "remove-snapshots"
    snapshot_ids: tuple[int, ...]


@dataclass(frozen=True)
class RemoveSnapshotRef(_Update):
    action: ClassVar[str] = "remove-snapshot-ref"
    ref_name: str


@dataclass(frozen=True)
class SetProperties(_Update):
    action: ClassVar[str] = "set-properties"
    updates: Mapping[str, str]


@dataclass(frozen=True)
class RemoveProperties(_Update):
    action: ClassVar[str] = "remove-properties"
    removals: tuple[str, ...]


@dataclass(frozen=True)
class SetLocation(_Update):
    action: ClassVar[str] = "set-location"
    location: str


@dataclass(frozen=True)
class SetStatistics(_Update):
    action: ClassVar[str] = "set-statistics"
    statistics: StatisticsFile

    def to_json(self) -> dict[str, Any]:
        # snapshot-id is deprecated in the REST spec but still sent, as Java's parser writes it.
        return {"action": self.action, "snapshot-id": self.statistics.snapshot_id,
                "statistics": self.statistics.to_json()}


@dataclass(frozen=True)
class RemoveStatistics(_Update):
    action: ClassVar[str] = "remove-statistics"
    snapshot_id: int


@dataclass(frozen=True)
class SetPartitionStatistics(_Update):
    action: ClassVar[str] = "set-partition-statistics"
    partition_statistics: PartitionStatisticsFile


@dataclass(frozen=True)
class RemovePartitionStatistics(_Update):
    action: ClassVar[str] = "remove-partition-statistics"
    snapshot_id: int


@dataclass(frozen=True)
class RemovePartitionSpecs(_Update):
    action: ClassVar[str] = "remove-partition-specs"
    spec_ids: tuple[int, ...]


@dataclass(frozen=True)
class RemoveSchemas(_Update):
    action: ClassVar[str] = "remove-schemas"
    schema_ids: tuple[int, ...]


TableUpdate = (AssignUUID | UpgradeFormatVersion | AddSnapshot | SetSnapshotRef | RemoveSnapshots
               | RemoveSnapshotRef | SetProperties | RemoveProperties | SetLocation | SetStatistics
               | RemoveStatistics | SetPartitionStatistics | RemovePartitionStatistics | RemovePartitionSpecs
               | RemoveSchemas)


@dataclass(frozen=True)
class TableChange:
    """One commit: what must hold on the base, and what to do to it (REST ``CommitTableRequest``)."""

    requirements: tuple[TableRequirement, ...] = ()
    updates: tuple[TableUpdate, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"requirements": [r.to_json() for r in self.requirements],
                "updates": [u.to_json() for u in self.updates]}


# ---------------------------------------------------------------------------------------------
# Applying updates (TableMetadata.Builder)


class _Builder:
    """The state Java's builder keeps beside the metadata while a change is applied."""

    def __init__(self, base: TableMetadata, now_ms: int | None) -> None:
        self.md = base
        self.now_ms = now_ms
        self.last_updated: int | None = None  # Java's lastUpdatedMillis: set by an added snapshot
        self.added: set[int] = set()
        self.main_sets: list[int] = []  # added snapshots ``main`` was set to, in order
        self.removed_snapshots = False

    def apply(self, update: TableUpdate) -> None:
        handler = getattr(self, "_" + update.action.replace("-", "_"))
        handler(update)

    def _assign_uuid(self, u: AssignUUID) -> None:
        if not u.uuid:
            raise UsageError("cannot assign an empty table uuid")
        if u.uuid != self.md.table_uuid:
            self.md = self.md.replace(table_uuid=u.uuid)

    def _upgrade_format_version(self, u: UpgradeFormatVersion) -> None:
        old = self.md.format_version
        if u.format_version > MAX_FORMAT_VERSION:
            raise UsageError(f"cannot upgrade table to unsupported format version: v{u.format_version} "
                             f"(supported: v{MAX_FORMAT_VERSION})")
        if u.format_version < old:
            raise UsageError(f"cannot downgrade v{old} table to v{u.format_version}")
        if u.format_version != old:
            # Appendix E: v3 starts next-row-id at 0.
            self.md = self.md.replace(format_version=u.format_version,
                                      next_row_id=self.md.next_row_id if old >= MIN_ROW_LINEAGE_VERSION else 0)

    def _add_snapshot(self, u: AddSnapshot) -> None:
        md, snapshot = self.md, u.snapshot
        v, sid = md.format_version, snapshot.snapshot_id
        if md.snapshot_by_id(sid) is not None:
            raise RefusedError(f"snapshot {sid} already exists in the table")
        if v == 1 and snapshot.sequence_number != 0:
            raise RefusedError(f"format v1 snapshots have no sequence number (got {snapshot.sequence_number})")
        if v >= 2 and snapshot.sequence_number <= md.last_sequence_number and snapshot.parent_snapshot_id is not None:
            raise RefusedError(f"cannot add snapshot {sid} with sequence number {snapshot.sequence_number}: "
                               f"not above last-sequence-number {md.last_sequence_number}")
        next_row_id = md.next_row_id
        if v >= MIN_ROW_LINEAGE_VERSION:
            if snapshot.first_row_id is None or snapshot.added_rows is None:
                raise RefusedError(f"format v{v} snapshot {sid} needs first-row-id and added-rows")
            if snapshot.first_row_id < md.next_row_id:
                raise RefusedError(f"cannot add snapshot {sid}: first-row-id {snapshot.first_row_id} is behind "
                                   f"the table's next-row-id {md.next_row_id}")
            next_row_id += snapshot.added_rows  # also for branches other than main (spec "Row Lineage")
        last_row = (snapshot.first_row_id or 0) + (snapshot.added_rows or 0)  # one past its last row id
        if snapshot.sequence_number > INT64_MAX or max(next_row_id, last_row) > INT64_MAX:  # Java longs
            raise CorruptInputError(f"cannot add snapshot {sid}: its sequence number {snapshot.sequence_number} or "
                                    f"the next-row-id {max(next_row_id, last_row)} after it is beyond the signed "
                                    "64-bit range")
        self.last_updated = snapshot.timestamp_ms
        self.added.add(sid)
        self.md = md.replace(snapshots=(*md.snapshots, snapshot), last_sequence_number=snapshot.sequence_number,
                             next_row_id=next_row_id)

    def _set_snapshot_ref(self, u: SetSnapshotRef) -> None:
        md, name, ref = self.md, u.ref_name, u.ref
        if md.refs.get(name) == ref:
            return
        snapshot = md.snapshot_by_id(ref.snapshot_id)
        if snapshot is None:
            raise RefusedError(f"cannot set {name} to unknown snapshot {ref.snapshot_id}")
        if ref.snapshot_id in self.added:
            self.last_updated = snapshot.timestamp_ms
        changes: dict[str, Any] = {"refs": {**md.refs, name: ref}}
        if name == MAIN_BRANCH:
            if self.last_updated is None:
                self.last_updated = self.now_ms if self.now_ms is not None else time.time_ns() // 1_000_000
            changes["current_snapshot_id"] = ref.snapshot_id
            changes["snapshot_log"] = (*md.snapshot_log, SnapshotLogEntry(self.last_updated, ref.snapshot_id))
            if ref.snapshot_id in self.added:
                self.main_sets.append(ref.snapshot_id)
        self.md = md.replace(**changes)

    def _remove_snapshots(self, u: RemoveSnapshots) -> None:
        md, ids = self.md, set(u.snapshot_ids)
        removed = {s.snapshot_id for s in md.snapshots} & ids
        if not removed:
            return
        self.removed_snapshots = True
        alive = tuple(s for s in md.snapshots if s.snapshot_id not in removed)
        self.md = md.replace(
            snapshots=alive,
            statistics=tuple(s for s in md.statistics if s.snapshot_id not in removed),
            partition_statistics=tuple(s for s in md.partition_statistics if s.snapshot_id not in removed))
        alive_ids = {s.snapshot_id for s in alive}
        for name in [n for n, r in self.md.refs.items() if r.snapshot_id not in alive_ids]:
            self._remove_snapshot_ref(RemoveSnapshotRef(name))  # a ref may not dangle

    def _remove_snapshot_ref(self, u: RemoveSnapshotRef) -> None:
        changes: dict[str, Any] = {"refs": {n: r for n, r in self.md.refs.items() if n != u.ref_name}}
        if u.ref_name == MAIN_BRANCH:
            changes.update(current_snapshot_id=None, snapshot_log=())
        if u.ref_name in self.md.refs or u.ref_name == MAIN_BRANCH:
            self.md = self.md.replace(**changes)

    def _set_properties(self, u: SetProperties) -> None:
        bad = [k for k, val in u.updates.items() if not isinstance(k, str) or not isinstance(val, str)]
        if bad:
            raise UsageError(f"table properties are strings: {bad!r}")
        props = {**self.md.properties, **u.updates}
        if props != self.md.properties:
            self.md = self.md.replace(properties=props)

    def _remove_properties(self, u: RemoveProperties) -> None:
        removals = set(u.removals)
        if removals & self.md.properties.keys():
            self.md = self.md.replace(properties={k: v for k, v in self.md.properties.items() if k not in removals})

    def _set_location(self, u: SetLocation) -> None:
        if u.location != self.md.location:
            self.md = self.md.replace(location=u.location)

    def _set_statistics(self, u: SetStatistics) -> None:
        self.md = self.md.replace(statistics=_put_by_snapshot(self.md.statistics, u.statistics))

    def _remove_statistics(self, u: RemoveStatistics) -> None:
        self.md = self.md.replace(statistics=tuple(s for s in self.md.statistics if s.snapshot_id != u.snapshot_id))

    def _set_partition_statistics(self, u: SetPartitionStatistics) -> None:
        self.md = self.md.replace(
            partition_statistics=_put_by_snapshot(self.md.partition_statistics, u.partition_statistics))

    def _remove_partition_statistics(self, u: RemovePartitionStatistics) -> None:
        self.md = self.md.replace(partition_statistics=tuple(
            s for s in self.md.partition_statistics if s.snapshot_id != u.snapshot_id))

    def _remove_partition_specs(self, u: RemovePartitionSpecs) -> None:
        if self.md.default_spec_id in u.spec_ids:
            raise RefusedError("cannot remove the default partition spec")
        if {p.spec_id for p in self.md.partition_specs} & set(u.spec_ids):
            self.md = self.md.replace(partition_specs=tuple(
                p for p in self.md.partition_specs if p.spec_id not in u.spec_ids))

    def _remove_schemas(self, u: RemoveSchemas) -> None:
        if self.md.current_schema_id in u.schema_ids:
            raise RefusedError("cannot remove the current schema")
        if {s.schema_id for s in self.md.schemas} & set(u.schema_ids):
            self.md = self.md.replace(schemas=tuple(s for s in self.md.schemas if s.schema_id not in u.schema_ids))

    def build(self) -> TableMetadata:
        md = self.md
        # build()'s updateSnapshotLog: an added snapshot main moved past within this change is no
        # history; after removals, an entry whose snapshot is gone drops everything before it.
        intermediate = {sid for sid in self.main_sets if sid != md.current_snapshot_id}
        if intermediate or self.removed_snapshots:
            alive = md.snapshots_by_id
            log: list[SnapshotLogEntry] = []
            for e in md.snapshot_log:
                if e.snapshot_id in alive:
                    if e.snapshot_id not in intermediate:
                        log.append(e)
                elif self.removed_snapshots:
                    log.clear()  # no false time travel across a gap
            if tuple(log) != md.snapshot_log:
                md = md.replace(snapshot_log=tuple(log))
        if self.last_updated is not None and self.last_updated != md.last_updated_ms:
            md = md.replace(last_updated_ms=self.last_updated)
        return md


def _put_by_snapshot(files: tuple[Any, ...], new: Any) -> tuple[Any, ...]:
    """One statistics file per snapshot: ``new`` replaces the one of its snapshot (Java's map by id)."""
    if any(f.snapshot_id == new.snapshot_id for f in files):
        return tuple(new if f.snapshot_id == new.snapshot_id else f for f in files)
    return (*files, new)


def apply_updates(base: TableMetadata, updates: Iterable[TableUpdate], *, now_ms: int | None = None) -> TableMetadata:
    """``base`` with ``updates`` applied in order, as Java's ``TableMetadata.Builder`` applies them.

    Returns ``base`` itself when nothing changed. ``now_ms`` stamps the snapshot-log entry of a
    ``main`` moved to a snapshot not added by this change (Java: the current time).
    """
    builder = _Builder(base, now_ms)
    for update in updates:
        builder.apply(update)
    new = builder.build()
    return base if new == base else new


def apply_change(base: TableMetadata, change: TableChange, *, now_ms: int | None = None) -> TableMetadata:
    """:func:`check_requirements`, then :func:`apply_updates`."""
    check_requirements(base, change.requirements)
    return apply_updates(base, change.updates, now_ms=now_ms)


# ---------------------------------------------------------------------------------------------
# Changes icectl makes


def snapshot_updates(base: TableMetadata, snapshot: Snapshot, *,
                     branch: str = MAIN_BRANCH) -> tuple[AddSnapshot, SetSnapshotRef]:
    """add-snapshot and set-snapshot-ref moving ``branch`` to it (created when missing; an existing
    branch keeps its retention settings, as ``SnapshotRef.builderFrom``)."""
    ref = base.refs.get(branch)
    new_ref = dataclasses.replace(ref, snapshot_id=snapshot.snapshot_id) if ref is not None \
        else SnapshotRef(snapshot.snapshot_id, "branch")
    return AddSnapshot(snapshot), SetSnapshotRef(branch, new_ref)


def check_branch_head(base: TableMetadata, snapshot: Snapshot, branch: str) -> None:
    """A snapshot is committed to a branch (not a tag), on the branch's head: a build reusing a
    snapshot made for an older base cannot drop the commits in between."""
    sid = snapshot.snapshot_id
    ref = base.refs.get(branch)
    if ref is not None and not ref.is_branch:
        raise RefusedError(f"cannot commit to '{branch}': it is a tag, not a branch")
    head = ref.snapshot_id if ref is not None else None
    if ref is not None and snapshot.parent_snapshot_id != head:
        raise RefusedError(f"snapshot {sid} has parent {snapshot.parent_snapshot_id}, but branch '{branch}' "
                           f"is at {head}: build it on the current head")
    if ref is None and snapshot.parent_snapshot_id is not None \
            and base.snapshot_by_id(snapshot.parent_snapshot_id) is None:
        raise RefusedError(f"snapshot {sid} has unknown parent {snapshot.parent_snapshot_id}")


def snapshot_change(base: TableMetadata, snapshot: Snapshot, *, branch: str = MAIN_BRANCH) -> TableChange:
    """Commit ``snapshot`` to ``branch``: the branch must still be where ``base`` has it."""
    check_branch_head(base, snapshot, branch)
    ref = base.refs.get(branch)
    return TableChange((AssertRefSnapshotId(branch, ref.snapshot_id if ref is not None else None),),
                       snapshot_updates(base, snapshot, branch=branch))


def add_snapshot(base: TableMetadata, snapshot: Snapshot, *, branch: str = MAIN_BRANCH) -> TableMetadata:
    """``base`` with ``snapshot`` added and ``branch`` moved to it (created when missing).

    Checks what Java's builder checks (unique id; v2+: a sequence number above
    ``last-sequence-number`` unless the snapshot has no parent; v3+: ``first-row-id`` at or past
    ``next-row-id``; the ref is a branch) and one thing more: the parent must be the branch's head.
    """
    check_branch_head(base, snapshot, branch)
    return apply_updates(base, snapshot_updates(base, snapshot, branch=branch))


def property_updates(updates: Mapping[str, str] | None = None,
                     removals: Iterable[str] = ()) -> tuple[SetProperties, RemoveProperties]:
    """set-properties and remove-properties; a key may not be both set and removed."""
    updates = dict(updates or {})
    removed = tuple(dict.fromkeys(removals))
    if overlap := set(removed) & updates.keys():
        raise UsageError(f"cannot both set and remove {', '.join(sorted(overlap))}")
    return SetProperties(updates), RemoveProperties(removed)


def set_properties(base: TableMetadata, updates: Mapping[str, str] | None = None,
                   removals: Iterable[str] = ()) -> TableMetadata:
    """``base`` with table properties set and removed (Java's setProperties/removeProperties)."""
    return apply_updates(base, property_updates(updates, removals))


def format_upgrade_updates(base: TableMetadata, to: int) -> tuple[TableUpdate, ...]:
    """Appendix E's metadata changes: v2 needs a table-uuid (assigned when missing); v3 starts
    next-row-id at 0 (upgrade-format-version does that)."""
    assign: tuple[TableUpdate, ...] = () if base.table_uuid else (AssignUUID(str(uuid.uuid4())),)
    return (*assign, UpgradeFormatVersion(to))


def prepare_commit(base: TableMetadata, new: TableMetadata, base_location: str, now_ms: int) -> TableMetadata:
    """What Java's ``build()`` adds when metadata based on ``base`` (read from ``base_location``) is written.

    * metadata-log: ``base``'s log, trimmed to its newest ``max(1, previous-versions-max) - 1``
      entries, plus ``base_location`` stamped with ``base``'s ``last-updated-ms`` (addPreviousFile;
      the limit is read from the new properties);
    * ``last-updated-ms``: ``now_ms``, unless the change set it (adding a snapshot sets the
      snapshot's timestamp, as Java's builder does).
    """
    max_size = max(1, METADATA_PREVIOUS_VERSIONS_MAX.parse(new.properties))
    previous = list(base.metadata_log)
    if len(previous) >= max_size:
        previous = previous[len(previous) - max_size + 1:]
    previous.append(MetadataLogEntry(base.last_updated_ms, base_location))
    last_updated = new.last_updated_ms if new.last_updated_ms != base.last_updated_ms else now_ms
    return new.replace(metadata_log=tuple(previous), last_updated_ms=last_updated)


__all__ = [
    "AddSnapshot", "AssignUUID", "RemovePartitionSpecs", "RemovePartitionStatistics", "RemoveProperties",
    "RemoveSchemas", "RemoveSnapshotRef", "RemoveSnapshots", "RemoveStatistics", "SetLocation",
    "SetPartitionStatistics", "SetProperties", "SetSnapshotRef", "SetStatistics", "TableChange", "TableUpdate",
    "UpgradeFormatVersion", "add_snapshot", "apply_change", "apply_updates", "check_branch_head",
    "format_upgrade_updates", "prepare_commit", "property_updates", "set_properties",
    "snapshot_change", "snapshot_updates",
]

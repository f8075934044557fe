"""Snapshot retention for `icectl expire-snapshots`, as Iceberg Java's ``RemoveSnapshots`` decides it.

Refs older than their max-ref-age are dropped (never ``main``); each branch keeps its head and
the ancestors younger than the cutoff or among its first min-snapshots-to-keep; tags keep their
snapshot; snapshots no ref reaches are kept only while younger than the cutoff (Java's behaviour;
the spec's wording would expire them at once).

The outcome is a change in the REST spec's words (:mod:`icectl.spec.updates`): remove-snapshot-ref
for each dropped ref, remove-snapshots, and with ``--clean-expired-metadata`` remove-partition-specs
and remove-schemas, in the order Java's ``RemoveSnapshots.internalApply`` builds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icectl.errors import NotFoundError, RefusedError, UsageError
from icectl.spec.durations import parse_point_in_time_ms
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import GC_ENABLED, MAX_REF_AGE_MS, MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP
from icectl.spec.requirements import AssertCurrentSchemaId, AssertDefaultSpecId, AssertRefSnapshotId, TableRequirement
from icectl.spec.snapshots import MAIN_BRANCH, ancestors_of
from icectl.spec.updates import (
    RemovePartitionSpecs,
    RemoveSchemas,
    RemoveSnapshotRef,
    RemoveSnapshots,
    TableChange,
    TableUpdate,
    apply_updates,
)
from icectl.storage import FileIO
from icectl.table.scan import manifests_of


def parse_older_than(text: str, now_ms: int) -> int:
    """A cutoff: a duration back from now (``7d``, ``12h``, ``30m``, ``90s``, ``2w``), an ISO
    timestamp (UTC when no zone is given) or epoch milliseconds."""
    return parse_point_in_time_ms(text, now_ms, "--older-than")


@dataclass(frozen=True)
class ExpirePolicy:
    """What the command line asked for; None means: the table's properties decide."""

    older_than_ms: int | None = None
    retain_last: int | None = None
    snapshot_ids: tuple[int, ...] = ()
    clean_expired_metadata: bool = False


@dataclass
class Retention:
    """The outcome of the policy on one metadata version."""

    expired: list[int]
    retained: set[int]
    removed_refs: list[str]
    updates: tuple[TableUpdate, ...]  # remove-snapshot-ref for each removed ref, then remove-snapshots
    metadata: TableMetadata  # the base with them applied: snapshots, refs, statistics and logs updated


def apply_retention(base: TableMetadata, policy: ExpirePolicy, now_ms: int) -> Retention:
    """Java's RemoveSnapshots.internalApply on ``base`` (pure)."""
    # Java's Boolean.parseBoolean: anything but "true" (any case) disables GC, so refuse on it.
    if not GC_ENABLED.parse(base.properties):
        gc_enabled = GC_ENABLED.raw(base.properties)
        raise RefusedError(f"cannot expire snapshots: gc.enabled={gc_enabled} on this table (its files may be "
                           "shared with other tables)", hint="set gc.enabled=true if the table owns its files")
    if policy.retain_last is not None and policy.retain_last < 1:
        raise UsageError("--retain-last must be at least 1")
    max_age = MAX_SNAPSHOT_AGE_MS.parse(base.properties)
    default_cutoff = policy.older_than_ms if policy.older_than_ms is not None else now_ms - max_age
    default_min = policy.retain_last or MIN_SNAPSHOTS_TO_KEEP.parse(base.properties)
    default_ref_age = MAX_REF_AGE_MS.parse(base.properties)
    by_id = base.snapshots_by_id

    kept_refs: dict[str, Any] = {}
    removed_refs: list[str] = []
    for name, ref in base.refs.items():
        snap = by_id.get(ref.snapshot_id)
        if name == MAIN_BRANCH:
            kept_refs[name] = ref
            continue
        max_ref_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_ref_age
        if snap is not None and now_ms - snap.timestamp_ms <= max_ref_age:
            kept_refs[name] = ref
        else:
            removed_refs.append(name)

    retained: set[int] = {r.snapshot_id for r in kept_refs.values() if r.snapshot_id in by_id}
    for sid in policy.snapshot_ids:
        holders = sorted(n for n, r in kept_refs.items() if r.snapshot_id == sid)
        if holders:
            raise RefusedError(f"cannot expire snapshot {sid}: still referenced by {', '.join(holders)}")
    for ref in kept_refs.values():
        if not ref.is_branch or ref.snapshot_id not in by_id:
            continue
        # A ref's own settings win over the command line's and the table's (Java's rule).
        cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else default_cutoff
        min_keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else default_min
        kept = 0
        for anc in ancestors_of(ref.snapshot_id, by_id):
            if kept < min_keep or anc.timestamp_ms >= cutoff:
                retained.add(anc.snapshot_id)
                kept += 1
            else:
                break
    reachable = set(retained)
    for ref in kept_refs.values():
        if ref.is_branch:
            reachable.update(s.snapshot_id for s in ancestors_of(ref.snapshot_id, by_id))
    for s in base.snapshots:
        if s.snapshot_id not in reachable and s.timestamp_ms >= default_cutoff:
            retained.add(s.snapshot_id)  # unreferenced but young: Java keeps it
    unknown = [sid for sid in policy.snapshot_ids if sid not in by_id]
    if unknown:
        raise NotFoundError(f"snapshot {unknown[0]} is not in the table")
    retained -= set(policy.snapshot_ids)
    expired = [s.snapshot_id for s in base.snapshots if s.snapshot_id not in retained]
    updates: tuple[TableUpdate, ...] = (*(RemoveSnapshotRef(n) for n in removed_refs),
                                        *((RemoveSnapshots(tuple(expired)),) if expired else ()))
    return Retention(expired, retained, removed_refs, updates, apply_updates(base, updates))


def clean_expired_metadata(md: TableMetadata, io: FileIO) -> tuple[TableUpdate, ...]:
    """remove-partition-specs and remove-schemas for the specs and schemas no snapshot of ``md``
    (the metadata after expiry) uses; never the current ones."""
    used_specs = {md.default_spec_id}
    for s in md.snapshots:
        used_specs.update(m.partition_spec_id for m in manifests_of(md, s, io))
    used_schemas = {md.current_schema_id} | {s.schema_id for s in md.snapshots if s.schema_id is not None}
    specs = tuple(p.spec_id for p in md.partition_specs if p.spec_id not in used_specs)
    schemas = tuple(s.schema_id for s in md.schemas if s.schema_id not in used_schemas)
    return (*((RemovePartitionSpecs(specs),) if specs else ()), *((RemoveSchemas(schemas),) if schemas else ()))


def expiry_change(base: TableMetadata, retention: Retention, *, clean_metadata: bool,
                  io: FileIO) -> tuple[TableChange, TableMetadata]:
    """The commit of ``retention`` on ``base`` and the metadata it gives.

    Requirements: every ref is where the retention saw it (the expiry was judged on those heads),
    and, as Java's UpdateRequirements, the default spec and current schema stay for the removals.
    """
    updates = retention.updates
    md = retention.metadata
    requirements: list[TableRequirement] = [AssertRefSnapshotId(n, r.snapshot_id) for n, r in base.refs.items()]
    if clean_metadata:
        cleanup = clean_expired_metadata(md, io)
        if cleanup:
            requirements += [AssertDefaultSpecId(base.default_spec_id), AssertCurrentSchemaId(base.current_schema_id)]
            updates = (*updates, *cleanup)
            md = apply_updates(md, cleanup)
    return TableChange(tuple(requirements), updates), md


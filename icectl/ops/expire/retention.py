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

import datetime
from dataclasses import dataclass, field
from typing import Any

from icectl.errors import NotFoundError, RefusedError, UsageError
from icectl.ops.expire.result import ExpireCutoff, RefPolicy
from icectl.spec.durations import parse_point_in_time_ms
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import (
    GC_ENABLED,
    MAX_REF_AGE_MS,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    IntProperty,
)
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
    cutoff: ExpireCutoff | None = None  # the defaults applied, and where each came from
    ref_policies: list[RefPolicy] = field(default_factory=list)  # each ref's, in the metadata's order


def _source(prop: IntProperty, properties: dict[str, str]) -> str:
    return prop.name if prop.name in properties else "default"


def expire_cutoff(base: TableMetadata, policy: ExpirePolicy, now_ms: int) -> ExpireCutoff:
    """The defaults an expiry of ``base`` applies (Java's RemoveSnapshots constructor, then
    expireOlderThan / retainLast): the cutoff and the age it came from, min-snapshots-to-keep and
    max-ref-age-ms, each with its source."""
    props = base.properties
    if policy.older_than_ms is not None:
        cutoff, source = policy.older_than_ms, "--older-than"
    else:
        cutoff, source = now_ms - MAX_SNAPSHOT_AGE_MS.parse(props), _source(MAX_SNAPSHOT_AGE_MS, props)
    if policy.retain_last is not None:
        min_keep, min_source = policy.retain_last, "--retain-last"
    else:
        min_keep, min_source = MIN_SNAPSHOTS_TO_KEEP.parse(props), _source(MIN_SNAPSHOTS_TO_KEEP, props)
    return ExpireCutoff(expire_older_than_ms=cutoff, expire_older_than=iso_utc(cutoff),
                        max_snapshot_age_ms=now_ms - cutoff, source=source, now_ms=now_ms,
                        min_snapshots_to_keep=min_keep, min_snapshots_to_keep_source=min_source,
                        max_ref_age_ms=MAX_REF_AGE_MS.parse(props), max_ref_age_source=_source(MAX_REF_AGE_MS, props))


def iso_utc(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC (``2026-11-20T10:00:00.000Z``); out-of-range values clamp."""
    ms = max(-62135596800000, min(ms, 253402300799999))  # datetime's years 1..9999
    dt = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def apply_retention(base: TableMetadata, policy: ExpirePolicy, now_ms: int) -> Retention:
    """Java's RemoveSnapshots.internalApply on ``base`` (pure)."""
    # Java's Boolean.parseBoolean: anything but "true" (any case) disables GC, so refuse on it.
    if not GC_ENABLED.parse(base.properties):
        gc_enabled = GC_ENABLED.raw(base.properties)
        raise RefusedError(f"cannot expire snapshots: gc.enabled={gc_enabled} on this table (its files may be "
                           "shared with other tables)", hint="set gc.enabled=true if the table owns its files")
    if policy.retain_last is not None and policy.retain_last < 1:
        raise UsageError("--retain-last must be at least 1")
    defaults = expire_cutoff(base, policy, now_ms)
    default_cutoff = defaults.expire_older_than_ms
    default_min = defaults.min_snapshots_to_keep
    default_ref_age = defaults.max_ref_age_ms
    by_id = base.snapshots_by_id

    kept_refs: dict[str, Any] = {}
    removed_refs: list[str] = []
    policies: dict[str, RefPolicy] = {}
    for name, ref in base.refs.items():
        snap = by_id.get(ref.snapshot_id)
        age = now_ms - snap.timestamp_ms if snap is not None else None
        if name == MAIN_BRANCH:
            kept_refs[name] = ref
            policies[name] = RefPolicy(name=name, type=ref.type, snapshot_id=ref.snapshot_id, snapshot_age_ms=age,
                                       max_ref_age_ms=None, max_ref_age_source="main", removed=False)
            continue
        own = ref.max_ref_age_ms is not None
        max_ref_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_ref_age
        if age is not None and age <= max_ref_age:
            kept_refs[name] = ref
        else:
            removed_refs.append(name)
        policies[name] = RefPolicy(name=name, type=ref.type, snapshot_id=ref.snapshot_id, snapshot_age_ms=age,
                                   max_ref_age_ms=max_ref_age,
                                   max_ref_age_source="ref" if own else defaults.max_ref_age_source,
                                   removed=name not in kept_refs)

    retained: set[int] = {r.snapshot_id for r in kept_refs.values() if r.snapshot_id in by_id}
    for sid in policy.snapshot_ids:
        holders = sorted(n for n, r in kept_refs.items() if r.snapshot_id == sid)
        if holders:
            raise RefusedError(f"cannot expire snapshot {sid}: still referenced by {', '.join(holders)}")
    for name, ref in kept_refs.items():
        if not ref.is_branch or ref.snapshot_id not in by_id:
            continue
        # A ref's own settings win over the command line's and the table's (Java's rule).
        cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else default_cutoff
        min_keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else default_min
        p = policies[name]
        p.expire_older_than_ms, p.max_snapshot_age_ms = cutoff, now_ms - cutoff
        p.max_snapshot_age_source = "ref" if ref.max_snapshot_age_ms is not None else defaults.source
        p.min_snapshots_to_keep = min_keep
        p.min_snapshots_to_keep_source = ("ref" if ref.min_snapshots_to_keep is not None
                                          else defaults.min_snapshots_to_keep_source)
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
    return Retention(expired, retained, removed_refs, updates, apply_updates(base, updates), defaults,
                     list(policies.values()))


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


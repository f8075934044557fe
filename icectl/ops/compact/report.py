"""The result of `icectl compact`, one builder for every format version.

A compaction of a manifest list (v1-v3) and of a v4 root and its leaves report the same
:class:`~icectl.ops.results.CompactResult`: the groups planned, what a dry run would write, what
a run wrote and committed. A v4 run adds what only its layout has (root-level files flushed into
leaves, manifest DVs applied, the root's DELETED entries dropped, the new root); on v1-v3 those
keys stay UNSET, out of the document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from icectl.ops.compact.plan import GroupPlan
from icectl.ops.compact.result import CompactGroup, CompactResult
from icectl.ops.compact.run import Compaction, Plan, Written
from icectl.ops.compact.v4 import V4CompactPlan, V4GroupPlan
from icectl.results import NEXT_METADATA, UNSET, FileRef, PlannedWrite, WrittenFile


def compact_result(run: Compaction[Any, Any]) -> CompactResult:
    """The command's result for how a compaction run ended (dry run, nothing to do, committed)."""
    plan: Plan[Any] = run.plan
    rewritten = plan.rewritten
    created = sum(len(g.bins) for g in rewritten)
    res = CompactResult(
        table=plan.table, branch=plan.branch, dry_run=run.dry_run,
        base_snapshot_id=plan.base_snapshot.snapshot_id if plan.base_snapshot else None,
        target_size_bytes=plan.target_size, manifests_replaced=len(plan.replaced), manifests_created=created,
        manifests_kept=plan.manifests_kept, entries_processed=sum(g.live_entries for g in rewritten),
        groups=[_group(g, run.written, run.dry_run) for g in plan.groups])
    if isinstance(plan, V4CompactPlan):
        res.format_version = 4
        res.root_files_flushed = len(plan.flushed)
        res.manifest_dvs_applied = sum(len(g.dvs) for g in plan.rewritten)
        res.root_deleted_entries_dropped = plan.root_deleted if plan.commits else 0
        what = f"{len(plan.replaced)} leaves and {len(plan.flushed)} root-level files into {created} leaves"
    else:
        what = f"{len(plan.replaced)} manifests into {created}"
    if run.dry_run:
        res.dry.would_write = _would_write(plan) if plan.commits else []
        res.dry.would_delete = []  # replaced manifests stay for older snapshots; expiry removes them
        res.title = f"Would compact {plan.table}: {what}" if plan.commits else f"Nothing to compact in {plan.table}"
        return res
    res.replanned = run.replanned
    outcome = run.outcome
    if outcome is None:
        res.title = f"Nothing to compact in {plan.table}"
        return res
    res.title = f"Compacted {plan.table}: {what}"
    res.manifests_kept = outcome.manifests_kept  # of the head committed on, which may be another writer's
    res.snapshot_id, res.sequence_number = outcome.snapshot.snapshot_id, outcome.snapshot.sequence_number
    res.metadata_location, res.commit_attempts = outcome.metadata_location, outcome.attempts
    res.reapplied_on = outcome.reapplied_on
    if isinstance(plan, V4CompactPlan):
        assert outcome.snapshot.root_manifest is not None  # a v4 commit writes its root
        res.root_manifest = outcome.snapshot.root_manifest
    return res


def _would_write(plan: Plan[Any]) -> list[PlannedWrite]:
    """The new manifests (v1-v3: with their group), the manifest list or root, the metadata file."""
    bins = [g for g in plan.rewritten for _ in g.bins]
    label = not isinstance(plan, V4CompactPlan)
    new = [PlannedWrite(plan.manifest_path(i), f"spec {g.spec_id} {g.content_name}" if label else UNSET)
           for i, g in enumerate(bins)]
    return [*new, PlannedWrite(plan.listing_path), PlannedWrite(NEXT_METADATA)]


def _group(g: GroupPlan, written: Sequence[Written] | None, dry_run: bool) -> CompactGroup:
    row = CompactGroup(spec_id=g.spec_id, content=g.content_name, action="rewrite" if g.rewrite else "skip",
                       reason=g.reason, manifests_in=len(g.manifests), bytes_in=g.bytes_in)
    if isinstance(g, V4GroupPlan):
        row.leaves_kept, row.root_files_in = g.kept_leaves, len(g.root_files) if g.rewrite else 0
    if not g.rewrite:
        return row
    row.live_entries, row.deleted_entries_dropped = g.live_entries, g.deleted_entries
    row.sort_by, row.manifests_out = list(g.sort_by), len(g.bins)
    if isinstance(g, V4GroupPlan):
        row.manifest_dvs_applied, row.dv_rows_dropped = len(g.dvs), g.dv_rows_dropped
    if written is None:
        row.estimated_bytes_out = sum(b.estimated_bytes for b in g.bins)
        if dry_run:
            row.replaced = [FileRef(m.manifest_path, m.manifest_length) for m in g.manifests]
            if isinstance(g, V4GroupPlan):
                row.flushed = [e.data_file.file_path for e in g.root_files]
    else:
        mine = [w for w in written if w.group is g]
        row.bytes_out = sum(w.bytes or 0 for w in mine)
        row.written = [WrittenFile(w.path, w.bytes, w.entries) for w in mine]
    return row

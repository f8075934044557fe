"""`icectl expire-snapshots`: retention policy (as Iceberg Java's RemoveSnapshots) and file cleanup.

Retention (:mod:`icectl.ops.expire.retention`) decides which snapshots and refs go and expresses
that as remove-snapshot-ref / remove-snapshots updates, committed as one change.

Files: only after the commit succeeded, and only what was reachable from the expired snapshots
and is reachable from no snapshot of the table as re-read after the commit (reachability, never
Java's incremental shortcut): manifest lists, manifests, data files, delete files, Puffin files
(only when no retained DV uses them), statistics and partition-statistics files. Paths are
compared as locations (``file:///x`` is ``/x``), where Java compares strings; Hadoop's ``.crc``
sidecars of local files go with their files, as when Spark deletes them. The retained manifests'
files are read only when more than manifest lists is to go (:func:`files_to_delete`): a manifest
list is metadata, never one of the data or delete files a retained manifest lists.

Format v4 (layout page section 8): a v4 snapshot reaches its root manifest, the leaves its root
lists as live (v1-v4 manifests), the rows of each leaf not removed by that snapshot's manifest
DV, its live root-level data and delete files, and the Puffin files of its live manifest DVs. A
root counts as ``manifest_lists`` (it takes the manifest list's place) and a Puffin file of
manifest DVs as ``manifest_files`` (it is part of the manifest tree), so the counts keep Spark's
names. A leaf's rows are judged per snapshot: one snapshot's manifest DV never hides a row that
another retained snapshot still reaches.
"""

from __future__ import annotations

import time
from typing import Any

from icectl.engine import Engine, active, using
from icectl.errors import ExitCode, IcectlError, RefusedError, StorageError
from icectl.ops.expire.leftovers import Leftovers, leftover_snapshots
from icectl.ops.expire.result import ExpireResult
from icectl.ops.expire.retention import ExpirePolicy, Retention, apply_retention, expiry_change, parse_older_than
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import PartitionStatisticsFile, StatisticsFile
from icectl.spec.updates import TableChange
from icectl.storage import FileIO
from icectl.table import Table
from icectl.table.commit import commit, operations_for
from icectl.table.delete_fence import file_identity, identity_cache, table_fence
from icectl.table.delete_tally import deleting
from icectl.table.deletes import delete_file_set
from icectl.table.neighbours import Neighbours, find_neighbours
from icectl.table.reach import FileSet, ReadCache, manifest_paths, reachable_files
from icectl.table.write_guard import check_writable
from icectl.threads import STAT_WORKERS, ordered_map


def files_to_delete(before: TableMetadata, expired: list[int], after: TableMetadata, io: FileIO,
                    cache: ReadCache | None = None, leftovers: Leftovers | None = None) -> FileSet:
    """Reachable from the expired snapshots of ``before`` (and from ``leftovers``, the snapshots
    earlier expiries removed) and from no snapshot of ``after``: the run's engine's set algebra
    (:meth:`icectl.engine.Engine.doomed_files`: :func:`icectl.table.reach.files_to_delete` here,
    Spark joins on the Spark engine)."""
    extra = ((lambda skip: _leftover_files(leftovers, io, skip)) if leftovers is not None and leftovers.snapshots
             else None)
    return active().doomed_files(before, expired, after, io, cache if cache is not None else ReadCache(), extra=extra)


def _leftover_files(leftovers: Leftovers, io: FileIO, skip: set[str]) -> FileSet:
    """What the leftover snapshots reach and is still on disk, as far as it can be read.

    Their files may be partly deleted (a cleanup cut short): a missing manifest list drops its
    snapshot, a missing manifest is left out; any other read failure drops that metadata's
    snapshots with a note. A cache of its own, so a failed read never leaves a manifest looking
    empty to the retained side.
    """
    out = FileSet()
    cache = ReadCache()
    for md, ids in leftovers.by_metadata():
        snaps = [s for s in (md.snapshot_by_id(i) for i in ids) if s is not None]
        heads = [s.root_manifest or s.manifest_list for s in snaps]
        try:
            present = list(ordered_map(lambda p: p is None or io.exists(p), heads, workers=STAT_WORKERS))
            snaps = [s for s, ok in zip(snaps, present, strict=True) if ok]
            paths = sorted({p for s in snaps if not s.root_manifest
                            for p in manifest_paths(md, s, io, cache, shortcut=True)} - skip)
            missing = {p for p, ok in zip(paths, ordered_map(io.exists, paths, workers=STAT_WORKERS), strict=True)
                       if not ok}
            got, _ = reachable_files(md, [s.snapshot_id for s in snaps], io, skip_manifests=skip | missing,
                                     cache=cache, shortcut=True)
        except (IcectlError, OSError, ValueError) as e:  # e.g. a scheme with no storage support
            why = e.one_line() if isinstance(e, IcectlError) else f"{type(e).__name__}: {e}"
            leftovers.notes.append(f"files of earlier expired snapshots {sorted(ids)[:3]} left for a later "
                                   f"run: {why[:300]}")
            continue
        alive = {s.snapshot_id for s in snaps}
        leftovers.on_disk.update(alive)
        stats: tuple[StatisticsFile | PartitionStatisticsFile, ...] = (*md.statistics, *md.partition_statistics)
        for st in stats:
            if st.snapshot_id in alive:
                got.add(st.statistics_path, "statistics_files")
        gone_keys = {file_identity(p) for p in missing}  # FileSet keys are file identities
        for k, v in got.files.items():
            if k not in gone_keys:
                out.files.setdefault(k, v)
    return out


# --------------------------------------------------------------------------- the operation


def _check_deletes(table: Table, files: FileSet, *, allow_external: bool, max_deletes: int | None) -> FileSet:
    """Apply the delete fence (:func:`icectl.table.delete_fence.table_fence`) to ``files``: unless
    ``allow_external``, the files outside it (added from elsewhere, or reached through a symlink
    leading out of the table) are taken OUT of ``files`` and returned: they are kept, reported, and
    never block the rest. Raises RefusedError when more than ``max_deletes`` remain to delete."""
    kept = FileSet()
    if not allow_external:
        fence = table_fence(table)
        for key, (path, _category) in list(files.files.items()):
            if not fence.contains(path):
                kept.files[key] = files.files.pop(key)
    if max_deletes is not None and len(files.paths) > max_deletes:
        raise RefusedError(f"expiry would delete {len(files.paths)} files, more than --max-deletes {max_deletes}",
                           hint="raise --max-deletes or expire in smaller steps")
    return kept


def _keep_shared(files: FileSet, neighbours: Neighbours | None) -> dict[str, str]:
    """Take the files another table reaches (:mod:`icectl.table.neighbours`) OUT of ``files``, to be
    kept and reported: path -> the table that reaches it."""
    shared = neighbours.shared([p for p, _c in files.files.values()]) if neighbours and files.files else {}
    for key in [k for k, (p, _c) in files.files.items() if p in shared]:
        files.files.pop(key)
    return shared


def _report_shared(res: ExpireResult, shared: dict[str, str]) -> str:
    """Record the files kept for other tables; the words the summary line gets for them."""
    names = sorted(set(shared.values()))
    if shared:
        res.kept_shared_files, res.shared_with = sorted(shared), names
    return f"; kept {len(shared)} file(s) other tables reach ({', '.join(names)})" if shared else ""


def _report_kept(res: ExpireResult, kept: FileSet, table: Table) -> str:
    """Record the files the fence kept; the words the summary line gets for them ("" for none)."""
    paths = sorted(kept.paths)
    res.kept_external_files = paths
    if not paths:
        return ""
    fence = table_fence(table)
    res.warnings += [w for w in fence.ignored if w not in res.warnings]  # write.data.path=/ and the like
    return (f"; kept {len(paths)} file(s) outside the table location {fence.describe()} "
            "(--allow-external-deletes deletes them)")


def _commit_lost(table: Table, expired: list[int], *, committed_at: float) -> str | None:
    """Why the expiry is not (or no longer) in the table, or ``None`` when it is.

    If any expired snapshot is back in the current metadata, the table was built on the version
    before ours: its files are live again and nothing may be deleted.
    """
    ops = operations_for(table)
    time.sleep(max(0.0, ops.settle_seconds() - (time.monotonic() - committed_at)))
    current = ops.refresh().metadata  # a failure to read deletes nothing (the caller's except)
    back = [i for i in expired if current.snapshot_by_id(i) is not None]
    if back:
        return (f"another writer replaced the committed metadata: snapshot {back[0]} is current again; "
                "nothing deleted (run expire-snapshots again)")
    return None


def expire_snapshots(table: Table, policy: ExpirePolicy, *, dry_run: bool = False, max_deletes: int | None = None,
                     allow_external_deletes: bool = False, max_concurrent_deletes: int = 8,
                     now_ms: int | None = None, engine: Engine | None = None) -> ExpireResult:
    """Expire snapshots by policy, commit, then delete the files no retained snapshot reaches.
    ``engine``: where reachability is judged and files deleted (None: :func:`icectl.engine.active`); it is
    the run's engine (its set algebra and deletes: :class:`icectl.engine.Engine`)."""
    # every reachable file's identity is asked for, many of them often
    with identity_cache(), using(engine or active()):
        return _expire_snapshots(table, policy, dry_run=dry_run, max_deletes=max_deletes,
                                 allow_external_deletes=allow_external_deletes,
                                 max_concurrent_deletes=max_concurrent_deletes, now_ms=now_ms)


def _expire_snapshots(table: Table, policy: ExpirePolicy, *, dry_run: bool, max_deletes: int | None,
                      allow_external_deletes: bool, max_concurrent_deletes: int, now_ms: int | None) -> ExpireResult:
    check_writable(table)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    base = table.metadata
    plan = apply_retention(base, policy, now)
    _, planned_md = expiry_change(base, plan, clean_metadata=policy.clean_expired_metadata, io=table.io)
    # With --clean-expired-metadata a version is always said to be written (as before this was
    # expressed as updates): when nothing changes the commit writes nothing.
    may_change = bool(plan.expired or plan.removed_refs or policy.clean_expired_metadata)
    cache = ReadCache()
    # What earlier expiries removed from the metadata but left on disk (a run killed after its
    # commit) is deleted along with this run's files, through the same checks.
    found = leftover_snapshots(table.io, base, table.metadata_location)
    planned = (files_to_delete(base, plan.expired, planned_md, table.io, cache, found)
               if plan.expired or found.snapshots else FileSet())
    # The tables sharing files with this one are found before anything is committed: a catalog that
    # cannot be listed refuses here, with the table unchanged.
    neighbours = find_neighbours(table) if planned.files else None
    shared = _keep_shared(planned, neighbours)
    kept = _check_deletes(table, planned, allow_external=allow_external_deletes, max_deletes=max_deletes)
    res = ExpireResult(table=table.identifier, dry_run=dry_run, expired_snapshots=plan.expired,
                       removed_refs=plan.removed_refs, retained_snapshot_count=len(plan.retained),
                       leftover_snapshots=sorted(found.on_disk), skipped_metadata=found.notes)
    _note_policy(res, plan)
    if dry_run:
        return _dry_run(res, table, planned, found, may_change=may_change,
                        notes=_report_kept(res, kept, table) + _report_shared(res, shared))
    if not may_change and not planned.files:
        res.title = f"Nothing to expire in {table.identifier}"
        return res

    committed_base: dict[str, Any] = {}

    def build(fresh: TableMetadata) -> TableChange:
        r = apply_retention(fresh, policy, now)  # re-run on the freshest metadata, as Java does
        committed_base.update(base=fresh, retention=r)
        return expiry_change(fresh, r, clean_metadata=policy.clean_expired_metadata, io=table.io)[0]

    result = commit(table, build)
    committed_at = time.monotonic()
    used: TableMetadata = committed_base["base"]
    retention: Retention = committed_base["retention"]
    res.expired_snapshots, res.removed_refs = retention.expired, retention.removed_refs
    res.retained_snapshot_count = len(retention.retained)
    _note_policy(res, retention)
    res.commit.record(result.metadata_location, result.attempts)
    try:
        # Judged on the table as it is now, so a snapshot another writer added after our commit
        # keeps its files. Any read failure here deletes nothing.
        current = operations_for(table).refresh()
        after = current.metadata
        # This run's own snapshots are in the log now too (our base): judged with the run's own
        # files and cache, not read again as leftovers.
        found = leftover_snapshots(table.io, after, current.location, also=found,
                                   ignore=frozenset(retention.expired))
        doomed = (files_to_delete(used, retention.expired, after, table.io, cache, found)
                  if retention.expired or found.snapshots else FileSet())
        res.leftover_snapshots, res.skipped_metadata = sorted(found.on_disk), found.notes
    except IcectlError as e:
        return _skipped(res, "Expired snapshots; no file deleted (cleanup could not read the table)",
                        e.one_line(), e.exit_code)
    try:
        if doomed.files and neighbours is None:
            neighbours = find_neighbours(table)
        shared_note = _report_shared(res, _keep_shared(doomed, neighbours))
        kept_note = _report_kept(res, _check_deletes(table, doomed, allow_external=allow_external_deletes,
                                                     max_deletes=max_deletes), table) + shared_note
    except RefusedError as e:
        # The commit is done; only the deletions are refused. Say so and keep the table intact.
        res.deletes_refused = e.one_line()
        res.title, res.exit_code = "Expired snapshots; file deletions refused", ExitCode.REFUSED
        return res
    return _delete_doomed(table, res, doomed, retention, found, committed_at=committed_at, kept_note=kept_note,
                          max_concurrent_deletes=max_concurrent_deletes)


def _dry_run(res: ExpireResult, table: Table, planned: FileSet, found: Leftovers, *, may_change: bool,
             notes: str) -> ExpireResult:
    res.dry.would_write = ["the next table metadata version (snapshots, refs and logs updated)"] if may_change else []
    res.dry.would_delete = planned.by_category()
    res.deleted = {c: len(v) for c, v in planned.by_category().items()}
    res.title = (f"Would expire {len(res.expired_snapshots)} snapshots of {table.identifier}{notes}"
                 + _leftover_note(found, planned, "would finish"))
    return res


def _delete_doomed(table: Table, res: ExpireResult, doomed: FileSet, retention: Retention, found: Leftovers, *,
                   committed_at: float, kept_note: str, max_concurrent_deletes: int) -> ExpireResult:
    """The last step: unless another writer undid the expiry since the commit, delete the files
    no retained snapshot reaches (fence-checked already), and say what happened."""
    try:
        lost = (_commit_lost(table, [*retention.expired, *found.ids], committed_at=committed_at)
                if doomed.files else None)
    except IcectlError as e:
        return _skipped(res, "Expired snapshots; no file deleted (cleanup could not re-read the table)",
                        e.one_line(), e.exit_code)
    if lost:
        return _skipped(res, "Expiry undone by another writer; no file deleted", lost, ExitCode.CONFLICT)
    with deleting(len(doomed.files), "files of the expired snapshots",
                  "the table is readable (its metadata names none of them since the commit); run the same "
                  "command again to delete the rest"):
        outcome = delete_file_set(table.io, doomed, workers=max_concurrent_deletes,
                                  executor=active().remote_deletes())
    res.already_gone, res.failures, res.deleted = outcome.already_gone, outcome.failures, dict(outcome.deleted)
    res.title = (f"Expired {len(retention.expired)} snapshots of {table.identifier}{kept_note}"
                 + _leftover_note(found, doomed))
    res.exit_code = StorageError.exit_code if outcome.failures else ExitCode.OK
    return res


def _note_policy(res: ExpireResult, retention: Retention) -> None:
    """The cutoff and each ref's policy, as the retention that decided applied them."""
    if retention.cutoff is not None:
        res.cutoff = retention.cutoff
    res.ref_policies = retention.ref_policies


def _skipped(res: ExpireResult, title: str, why: str, exit_code: int) -> ExpireResult:
    """The result of a committed expiry whose cleanup deleted nothing, and why."""
    res.title, res.cleanup_skipped, res.exit_code = title, why, exit_code
    return res


def _leftover_note(found: Leftovers, files: FileSet, verb: str = "finishing") -> str:
    """The title's mention of an earlier expiry's cleanup being finished (empty when there is none)."""
    if not found.on_disk or not files.files:
        return ""
    return f"; {verb} the cleanup of {len(found.on_disk)} snapshot(s) expired earlier"


__all__ = ["ExpirePolicy", "expire_snapshots", "files_to_delete", "parse_older_than"]

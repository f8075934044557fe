"""Snapshot management: rollback, set-current, fast-forward, cherrypick and publish.

Iceberg Java's ``ManageSnapshots`` (``SetSnapshotOperation``, ``CherryPickOperation``,
``UpdateSnapshotReferencesOperation.fastForward``) and the Spark procedures of the same names,
with the same checks refusing the same things:

* :func:`rollback`: the branch goes back to an ancestor of its head (Java: "not an ancestor of the
  current state"), given by id or as the latest ancestor strictly older than a timestamp
  (``rollbackToTime``);
* :func:`set_current`: the branch goes to any snapshot of the table (by id or by a ref's snapshot);
* :func:`fast_forward`: ``branch`` goes to ``to_ref``'s snapshot when its head is an ancestor of it;
  a branch that does not exist is created there (Java's ``replaceBranch(from, to, true)``);
* :func:`cherrypick`: main gets a snapshot's change: a fast-forward when the snapshot's parent is
  main's head (no new snapshot), else an ``append`` is re-applied as a new snapshot that adds the
  same data files, and a dynamic overwrite (``replace-partitions``) as a new ``overwrite`` that
  adds and deletes the same files when the partitions it replaces did not change since its parent
  (``source-snapshot-id``, and ``published-wap-id`` for a staged write);
* :func:`publish`: cherry-pick the staged snapshot whose summary has ``wap.id`` (write-audit-publish).

Each is one commit through the table's catalog with the usual retries. Every check is made again
on the fresh base of each attempt (a concurrent writer's commit is never lost: the branch must
still be where that base has it, ``assert-ref-snapshot-id``). Moving main appends to the
snapshot-log, as Java's ``setBranchSnapshot`` does.

Not done (refused, exit 6): re-applying a dynamic overwrite to a v4 table (an append is re-applied
as root-level entries or new leaves; fast-forwards and ref moves work on every format version).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable

from icectl.errors import CommitConflictError, IcectlError, NotFoundError, RefusedError
from icectl.ops.snapshots.cherrypick import (
    SourceFiles,
    check_replaced_partitions,
    source_files,
)
from icectl.ops.snapshots.result import (
    CherrypickResult,
    FastForwardResult,
    NewSnapshot,
    PublishResult,
    RefMove,
    RollbackResult,
    SetCurrentResult,
    SnapshotManagementResult,
)
from icectl.results import NEXT_METADATA
from icectl.spec.metadata import TableMetadata
from icectl.spec.requirements import AssertRefSnapshotId
from icectl.spec.snapshots import MAIN_BRANCH, Snapshot, SnapshotRef, ancestors_of
from icectl.spec.tracked_file import FORMAT_VERSION as V4
from icectl.spec.updates import SetSnapshotRef, TableChange
from icectl.table import Table
from icectl.table.commit import commit, discard_on_failure, new_snapshot_id
from icectl.table.layout import Deletes
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.layout.root import RootLayout
from icectl.table.snapshot_writer import SnapshotChange, write_snapshot
from icectl.table.summary import SummaryBuilder
from icectl.table.write_guard import check_writable

# Snapshot summary keys (Java's SnapshotSummary)
STAGED_WAP_ID = "wap.id"
PUBLISHED_WAP_ID = "published-wap-id"
SOURCE_SNAPSHOT_ID = "source-snapshot-id"
REPLACE_PARTITIONS = "replace-partitions"

_SNAPSHOTS_HINT = "list them with 'icectl inspect snapshots'"
_REFS_HINT = "list them with 'icectl inspect refs'"


# ---------------------------------------------------------------------------------------------
# Shared checks


def _branch_ref(md: TableMetadata, branch: str, identifier: str, *, may_be_missing: bool = False) -> SnapshotRef | None:
    """The branch's ref (None: main of a table without a current snapshot, or a missing branch
    when ``may_be_missing``). A tag is refused: only branches move."""
    ref = md.ref(branch)
    if ref is not None and not ref.is_branch:
        raise RefusedError(f"'{branch}' of table {identifier} is a tag, not a branch: a tag does not move",
                           hint="to move a tag, replace it ('icectl tag replace')")
    if ref is None and branch != MAIN_BRANCH and not may_be_missing:
        raise NotFoundError(f"table {identifier} has no branch '{branch}'", hint=_REFS_HINT)
    return ref


def _snapshot(md: TableMetadata, snapshot_id: int, identifier: str) -> Snapshot:
    snapshot = md.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise NotFoundError(f"table {identifier} has no snapshot {snapshot_id}", hint=_SNAPSHOTS_HINT)
    return snapshot


def _ancestors(md: TableMetadata, head_id: int | None) -> list[Snapshot]:
    """``head_id`` and its ancestors, newest first (Java's ``SnapshotUtil.ancestorIds``)."""
    return list(ancestors_of(head_id, md.snapshots_by_id))


def _head_id(ref: SnapshotRef | None) -> int | None:
    return ref.snapshot_id if ref is not None else None


def _when(ms: int) -> str:
    try:
        iso = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return f"{ms} (epoch ms)"
    return f"{iso.replace('+00:00', 'Z')} ({ms} epoch ms)"


def latest_ancestor_older_than(md: TableMetadata, head_id: int | None, timestamp_ms: int) -> Snapshot | None:
    """The ancestor of ``head_id`` with the latest timestamp strictly before ``timestamp_ms``
    (Java's ``findLatestAncestorOlderThan``; on a tie the newer in the chain)."""
    best: Snapshot | None = None
    for s in _ancestors(md, head_id):
        if s.timestamp_ms < timestamp_ms and s.timestamp_ms > (best.timestamp_ms if best else 0):
            best = s
    return best


# ---------------------------------------------------------------------------------------------
# Moving a branch (rollback, set-current, fast-forward, a cherry-pick that fast-forwards)

# target(base) -> (the branch's ref in base, the snapshot id it goes to); raises when refused
Target = Callable[[TableMetadata], tuple[SnapshotRef | None, int]]


def _move(table: Table, branch: str, target: Target, res: SnapshotManagementResult, *,
          dry_run: bool) -> SnapshotManagementResult:
    """Plan on the loaded metadata, then commit ``set-snapshot-ref`` with ``assert-ref-snapshot-id``
    (the branch is still where each attempt's base has it), ``target`` checked again on that base."""
    ref, to = target(table.metadata)
    _said_move(res, branch, ref, to)
    if dry_run:
        res.dry.would_write = [NEXT_METADATA] if res.changed else []
        res.dry.would_delete = []
        return res

    def build(base: TableMetadata) -> TableChange:
        ref, to = target(base)
        _said_move(res, branch, ref, to)
        if ref is not None and ref.snapshot_id == to:
            return TableChange()
        new_ref = dataclasses.replace(ref, snapshot_id=to) if ref is not None else SnapshotRef(to, "branch")
        return TableChange((AssertRefSnapshotId(branch, _head_id(ref)),), (SetSnapshotRef(branch, new_ref),))

    done = commit(table, build)
    if done.committed:
        res.commit.metadata_location = done.metadata_location
    res.commit.commit_attempts = done.attempts
    return res


def _said_move(res: SnapshotManagementResult, branch: str, ref: SnapshotRef | None, to: int) -> None:
    head = _head_id(ref)
    res.previous_snapshot_id, res.current_snapshot_id = head, to
    res.changed = head != to
    res.ref = RefMove(branch, head, to, created=ref is None)


def _result(cls: type[SnapshotManagementResult], table: Table, branch: str, dry_run: bool,
            mode: str = "set-ref") -> SnapshotManagementResult:
    return cls(table=table.identifier, dry_run=dry_run, branch=branch, previous_snapshot_id=None,
               current_snapshot_id=None, changed=False, mode=mode, ref=RefMove(branch, None, 0))


def _title(res: SnapshotManagementResult, what: str) -> SnapshotManagementResult:
    if not res.changed:
        res.title = (f"{res.table}: branch '{res.branch}' already is at snapshot {res.current_snapshot_id}; "
                     "nothing to do")
        return res
    verb = "Would move" if res.dry_run else "Moved"
    start = "created at" if res.ref.created else f"from {res.previous_snapshot_id} to"
    res.title = f"{verb} branch '{res.branch}' of {res.table} ({what}): {start} {res.current_snapshot_id}"
    return res


def rollback(table: Table, *, to_snapshot: int | None = None, to_timestamp_ms: int | None = None,
             branch: str = MAIN_BRANCH, dry_run: bool = False) -> RollbackResult:
    """Move ``branch`` back to an ancestor of its head: ``to_snapshot``, or the latest ancestor
    strictly older than ``to_timestamp_ms`` (exactly one of them). Java's ``rollbackTo`` /
    ``rollbackToTime``; Spark's ``rollback_to_snapshot`` / ``rollback_to_timestamp``."""
    if (to_snapshot is None) == (to_timestamp_ms is None):
        raise ValueError("rollback takes to_snapshot or to_timestamp_ms")
    check_writable(table)
    ident = table.identifier

    def target(md: TableMetadata) -> tuple[SnapshotRef | None, int]:
        ref = _branch_ref(md, branch, ident)
        head = _head_id(ref)
        if to_timestamp_ms is not None:
            found = latest_ancestor_older_than(md, head, to_timestamp_ms)
            if found is None:
                raise NotFoundError(f"cannot roll back branch '{branch}' of table {ident}: no snapshot of its "
                                    f"history is older than {_when(to_timestamp_ms)}", hint=_SNAPSHOTS_HINT)
            return ref, found.snapshot_id
        assert to_snapshot is not None
        _snapshot(md, to_snapshot, ident)
        if to_snapshot not in {s.snapshot_id for s in _ancestors(md, head)}:
            raise RefusedError(f"cannot roll back branch '{branch}' of table {ident} to snapshot {to_snapshot}: "
                               f"it is not an ancestor of the branch head {head}",
                               hint="set-current moves a branch to any snapshot")
        return ref, to_snapshot

    res = _move(table, branch, target, _result(RollbackResult, table, branch, dry_run), dry_run=dry_run)
    assert isinstance(res, RollbackResult)
    return _title(res, "rollback")  # type: ignore[return-value]


def set_current(table: Table, snapshot_id: int | None = None, *, ref: str | None = None,
                branch: str = MAIN_BRANCH, dry_run: bool = False) -> SetCurrentResult:
    """Move ``branch`` to any snapshot of the table: ``snapshot_id``, or the snapshot ``ref``
    (a branch or tag) points at (exactly one of them). Java's ``setCurrentSnapshot``; Spark's
    ``set_current_snapshot``."""
    if (snapshot_id is None) == (ref is None):
        raise ValueError("set_current takes snapshot_id or ref")
    check_writable(table)
    ident = table.identifier

    def target(md: TableMetadata) -> tuple[SnapshotRef | None, int]:
        branch_ref = _branch_ref(md, branch, ident)
        if ref is not None:
            named = md.ref(ref)
            if named is None:
                raise NotFoundError(f"table {ident} has no branch or tag '{ref}'", hint=_REFS_HINT)
            return branch_ref, _snapshot(md, named.snapshot_id, ident).snapshot_id
        assert snapshot_id is not None
        return branch_ref, _snapshot(md, snapshot_id, ident).snapshot_id

    res = _move(table, branch, target, _result(SetCurrentResult, table, branch, dry_run), dry_run=dry_run)
    return _title(res, "set-current")  # type: ignore[return-value]


def fast_forward(table: Table, branch: str, to_ref: str, *, dry_run: bool = False) -> FastForwardResult:
    """Move ``branch`` forward to ``to_ref``'s snapshot; its head must be an ancestor of it. A
    branch the table lacks is created there, as Java's ``fastForwardBranch`` does. Spark's
    ``fast_forward``."""
    check_writable(table)
    ident = table.identifier

    def target(md: TableMetadata) -> tuple[SnapshotRef | None, int]:
        to = md.ref(to_ref)
        if to is None:
            raise NotFoundError(f"table {ident} has no branch or tag '{to_ref}'", hint=_REFS_HINT)
        ref = _branch_ref(md, branch, ident, may_be_missing=True)
        if ref is None or ref.snapshot_id == to.snapshot_id:
            return ref, to.snapshot_id
        if ref.snapshot_id not in {s.snapshot_id for s in _ancestors(md, to.snapshot_id)}:
            raise RefusedError(f"cannot fast-forward branch '{branch}' of table {ident} to '{to_ref}': its head "
                               f"{ref.snapshot_id} is not an ancestor of {to.snapshot_id}",
                               hint="set-current moves a branch to any snapshot; cherrypick applies one change")
        return ref, to.snapshot_id

    res = _move(table, branch, target, _result(FastForwardResult, table, branch, dry_run), dry_run=dry_run)
    return _title(res, f"fast-forward to '{to_ref}'")  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Cherry-pick and publish


class _NoLongerFastForward(Exception):
    """Main moved meanwhile: the pick now needs a new snapshot (Java's retry does the same)."""


def _check_wap(ancestors: list[Snapshot], source: Snapshot) -> str | None:
    """Java's ``WapUtil.validateWapPublish``: a staged wap id main already has is refused."""
    wap_id = source.summary.get(STAGED_WAP_ID)
    if wap_id:
        for s in ancestors:
            if wap_id in (s.summary.get(STAGED_WAP_ID), s.summary.get(PUBLISHED_WAP_ID)):
                raise RefusedError(f"cannot cherry-pick snapshot {source.snapshot_id}: wap id '{wap_id}' was "
                                   f"published already (snapshot {s.snapshot_id} of main)")
    return wap_id


def _check_not_picked(ancestors: list[Snapshot], source: Snapshot) -> None:
    """Java's ``validateNonAncestor``: main has the snapshot, or a pick of it, already."""
    sid = source.snapshot_id
    for s in ancestors:
        if s.snapshot_id == sid:
            raise RefusedError(f"cannot cherry-pick snapshot {sid}: it is already an ancestor of main")
    for s in ancestors:
        if s.summary.get(SOURCE_SNAPSHOT_ID) == str(sid):
            raise RefusedError(f"cannot cherry-pick snapshot {sid}: it was already picked to create "
                               f"snapshot {s.snapshot_id} of main")


def _reapplicable(source: Snapshot) -> bool:
    """An append, or a dynamic overwrite: a change a new snapshot can re-apply."""
    return source.operation == "append" or (
        source.operation == "overwrite" and source.summary.get(REPLACE_PARTITIONS, "").lower() == "true")


def plan_pick(md: TableMetadata, snapshot_id: int, identifier: str) -> tuple[str, Snapshot, str | None]:
    """``("fast-forward" | "append" | "overwrite", source, staged wap id)``, or the refusal Java's
    ``CherryPickOperation`` makes (in its order)."""
    source = md.snapshot_by_id(snapshot_id)
    if source is None:
        raise NotFoundError(f"cannot cherry-pick snapshot {snapshot_id}: table {identifier} has no such snapshot",
                            hint=_SNAPSHOTS_HINT)
    head = md.snapshot_for_ref(MAIN_BRANCH)
    head_id = head.snapshot_id if head is not None else None
    ancestors = _ancestors(md, head_id)
    fast_forward = source.parent_snapshot_id == head_id
    operation = source.operation
    if operation == "append":
        wap_id = _check_wap(ancestors, source)
        if fast_forward:
            return "fast-forward", source, wap_id
        _check_not_picked(ancestors, source)
        return "append", source, wap_id
    if _reapplicable(source):  # a dynamic overwrite
        parent = source.parent_snapshot_id
        if parent is not None and parent not in {s.snapshot_id for s in ancestors}:
            raise RefusedError(f"cannot cherry-pick overwrite snapshot {snapshot_id}: its parent {parent} is not "
                               "an ancestor of main's head")
        wap_id = _check_wap(ancestors, source)
        if fast_forward:
            return "fast-forward", source, wap_id
        _check_not_picked(ancestors, source)
        return "overwrite", source, wap_id
    if fast_forward:
        return "fast-forward", source, source.summary.get(STAGED_WAP_ID) or None
    raise RefusedError(f"cannot cherry-pick snapshot {snapshot_id}: not an append, a dynamic overwrite or a "
                       f"fast-forward (operation {operation}; its parent {source.parent_snapshot_id} is not "
                       f"main's head {head_id})")


def cherrypick(table: Table, snapshot_id: int, *, dry_run: bool = False,
               _result_cls: type[SnapshotManagementResult] = CherrypickResult) -> CherrypickResult:
    """Apply snapshot ``snapshot_id``'s change to main (Java's ``CherryPickOperation``; Spark's
    ``cherrypick_snapshot``): a fast-forward when its parent is main's head, else an append (or a
    dynamic overwrite) is re-applied as a new ``append`` (``overwrite``) snapshot
    (``source-snapshot-id``, ``published-wap-id``)."""
    check_writable(table)
    ident = table.identifier
    mode, source, wap_id = plan_pick(table.metadata, snapshot_id, ident)
    res = _result(_result_cls, table, MAIN_BRANCH, dry_run, mode)
    res.source_snapshot_id = snapshot_id
    if wap_id:
        res.wap_id = wap_id
    if mode == "fast-forward":
        def target(md: TableMetadata) -> tuple[SnapshotRef | None, int]:
            if plan_pick(md, snapshot_id, ident)[0] != "fast-forward":
                raise _NoLongerFastForward
            return _branch_ref(md, MAIN_BRANCH, ident), snapshot_id
        try:
            _move(table, MAIN_BRANCH, target, res, dry_run=dry_run)
            return _pick_title(res)  # type: ignore[return-value]
        except _NoLongerFastForward:
            # Java's retry: an append or a dynamic overwrite becomes a new snapshot (re-checked on
            # each attempt's base), anything else only ever fast-forwards.
            if not _reapplicable(source):
                raise RefusedError(f"cannot cherry-pick snapshot {snapshot_id}: main moved meanwhile and "
                                   f"{source.operation} snapshots can only be fast-forwarded") from None
    return _pick_title(_pick_new(table, source, wap_id, res, dry_run=dry_run))  # type: ignore[return-value]


def _pick_new(table: Table, source: Snapshot, wap_id: str | None, res: SnapshotManagementResult, *,
              dry_run: bool) -> SnapshotManagementResult:
    """A new snapshot on main re-applying ``source``: an append's added files, or a dynamic
    overwrite's added and removed files (:mod:`icectl.ops.snapshots.cherrypick`)."""
    md, ident = table.metadata, table.identifier
    operation = source.operation or "append"
    v4 = md.format_version >= V4
    if v4 and operation != "append":
        raise RefusedError(f"cannot cherry-pick {operation} snapshot {source.snapshot_id} into v4 table {ident}: "
                           "icectl re-applies only appends to a v4 root yet",
                           hint="a snapshot whose parent is main's head can be picked (a fast-forward)")
    head = md.snapshot_for_ref(MAIN_BRANCH)
    if v4 and head is not None and head.root_manifest is None:
        raise RefusedError(f"cannot cherry-pick snapshot {source.snapshot_id} into v4 table {ident}: main's head "
                           f"{head.snapshot_id} is a snapshot of before the upgrade to v4 (no root manifest to "
                           "build on)",
                           hint="a snapshot written since the upgrade has one: move main there first (set-current)")
    files = source_files(table, md, source)
    removed = set(SourceFiles.paths(files.removed)) if operation == "overwrite" else set()
    extra = {PUBLISHED_WAP_ID: wap_id} if wap_id else {}
    extra[SOURCE_SNAPSHOT_ID] = str(source.snapshot_id)
    summary = SummaryBuilder()
    for fs in files.added.values():
        for f, key in fs:
            summary.added_file(f, key)
    if removed:
        for fs in files.removed.values():
            for f, key in fs:
                summary.removed_file(f, key)
    new_id = new_snapshot_id(md)
    commit_id = str(uuid.uuid4())
    head_id = head.snapshot_id if head is not None else None
    res.mode = "cherry-pick"
    res.changed = True
    res.previous_snapshot_id, res.current_snapshot_id = head_id, new_id
    res.ref = RefMove(MAIN_BRANCH, head_id, new_id, created=md.ref(MAIN_BRANCH) is None)
    res.new_snapshot = NewSnapshot(new_id, head_id, operation,
                                   summary.build(operation, head.summary if head else None, extra),
                                   SourceFiles.paths(files.added), removed_data_files=sorted(removed))
    if operation == "overwrite":
        check_replaced_partitions(table, md, head, source, files)
    layout: ManifestListLayout | RootLayout = RootLayout(MAIN_BRANCH) if v4 else ManifestListLayout(commit_id, [])
    added_files = SourceFiles.data_files(files.added)
    deletes = Deletes([f for fs in files.removed.values() for f, _ in fs] if removed else [],
                      missing=lambda paths: _missing_deletes(source, paths))
    if dry_run:
        rewrites = layout.would_rewrite(table.io, md, head, deletes) if isinstance(layout, ManifestListLayout) else 0
        res.dry.would_write = [*layout.appended_paths(md, table.metadata_folder, added_files, new_id,
                                                  more_manifests=rewrites), NEXT_METADATA]
        res.dry.would_delete = []
        return res

    change = SnapshotChange(operation, layout, summary, extra=lambda _index: dict(extra), deletes=deletes)

    def still_a_pick(base: TableMetadata) -> None:
        """Java's ``validate`` on the fresh base: not picked meanwhile, wap id not published, for an
        overwrite the replaced partitions unchanged (the layout then rewrites the head's manifests
        holding the files it deletes, for this attempt)."""
        if plan_pick(base, source.snapshot_id, ident)[0] != operation:
            raise CommitConflictError(f"main of table {ident} moved meanwhile to the parent of snapshot "
                                      f"{source.snapshot_id}", hint="run cherrypick again")
        missing = [s for s in files.added if base.spec_by_id(s) is None]
        if missing:
            raise CommitConflictError(f"partition spec {missing[0]} of table {ident} was removed meanwhile")
        if operation != "overwrite":
            return
        check_replaced_partitions(table, base, base.snapshot_for_ref(MAIN_BRANCH), source, files)

    with discard_on_failure(table.io, change.written):
        layout.write_appended(table.io, md, table.metadata_folder, added_files, new_id, change.written)
        done = write_snapshot(table, MAIN_BRANCH, change, snapshot_id=new_id, check=still_a_pick)
    committed = done.snapshot
    res.previous_snapshot_id = committed.parent_snapshot_id
    res.ref = RefMove(MAIN_BRANCH, committed.parent_snapshot_id, new_id, created=res.ref.created)
    res.new_snapshot = NewSnapshot(new_id, committed.parent_snapshot_id, committed.operation or operation,
                                   dict(committed.summary), SourceFiles.paths(files.added),
                                   removed_data_files=sorted(removed))
    res.commit.metadata_location, res.commit.commit_attempts = done.metadata_location, done.attempts
    return res


def _missing_deletes(source: Snapshot, paths: list[str]) -> IcectlError:
    return RefusedError(f"cannot cherry-pick dynamic overwrite {source.snapshot_id}: {len(paths)} of the files "
                        f"it deletes are not in main any more ({paths[0]}, ...)",
                        hint="Java refuses this too: 'Missing required files to delete'")


def _pick_title(res: SnapshotManagementResult) -> SnapshotManagementResult:
    what = f"wap id '{res.wap_id}' (snapshot {res.source_snapshot_id})" if isinstance(res, PublishResult) \
        else f"snapshot {res.source_snapshot_id}"
    verb = ("Would publish" if res.dry_run else "Published") if isinstance(res, PublishResult) \
        else ("Would cherry-pick" if res.dry_run else "Cherry-picked")
    if res.mode == "fast-forward":
        if not res.changed:
            res.title = f"{res.table}: main already is at snapshot {res.current_snapshot_id}; nothing to do"
        else:
            res.title = (f"{verb} {what} into {res.table}: main fast-forwards from {res.previous_snapshot_id} "
                         f"to {res.current_snapshot_id}")
    else:
        res.title = (f"{verb} {what} into {res.table} as new snapshot {res.current_snapshot_id} "
                     f"on main's head {res.previous_snapshot_id}")
    return res


def staged_snapshot(md: TableMetadata, wap_id: str, identifier: str) -> Snapshot:
    """The snapshot whose summary has ``wap.id`` == ``wap_id``: the first in the table's list, as
    Spark's ``publish_changes`` finds it."""
    for s in md.snapshots:
        if s.summary.get(STAGED_WAP_ID) == wap_id:
            return s
    raise NotFoundError(f"table {identifier} has no staged snapshot with wap.id '{wap_id}'",
                        hint="staged writes are the snapshots whose summary has wap.id ('icectl inspect snapshots')")


def publish(table: Table, wap_id: str, *, dry_run: bool = False) -> PublishResult:
    """Cherry-pick the staged snapshot of write-audit-publish id ``wap_id`` into main (Spark's
    ``publish_changes``)."""
    check_writable(table)  # before the wap id is looked up: a copied table is refused whatever it holds
    source = staged_snapshot(table.metadata, wap_id, table.identifier)
    res = cherrypick(table, source.snapshot_id, dry_run=dry_run, _result_cls=PublishResult)
    res.wap_id = wap_id
    return _pick_title(res)  # type: ignore[return-value]


__all__ = [
    "PUBLISHED_WAP_ID", "SOURCE_SNAPSHOT_ID", "STAGED_WAP_ID", "cherrypick", "fast_forward",
    "latest_ancestor_older_than", "plan_pick", "publish", "rollback", "set_current", "staged_snapshot",
]

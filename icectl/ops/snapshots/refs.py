"""Branches and tags: create, replace, drop and list them (Spark's ``ALTER TABLE ... CREATE [OR
REPLACE] BRANCH|TAG [IF NOT EXISTS] ... AS OF VERSION ... RETAIN ... WITH SNAPSHOT RETENTION``,
``REPLACE BRANCH|TAG``, ``DROP BRANCH|TAG [IF EXISTS]``; Java's ``UpdateSnapshotReferencesOperation``).

Each change is one metadata commit of a ``set-snapshot-ref`` or ``remove-snapshot-ref`` update
with an ``assert-ref-snapshot-id`` requirement (a create requires the ref absent), through
:func:`icectl.table.commit.commit` and its retries. The change is decided on the loaded table
(what a dry run shows); a retry after a conflict goes on only when the ref is still exactly as it
was then, so a concurrent writer's branch or tag is never overwritten or dropped: a ref created
meanwhile makes a create fail as if it had existed (exit 6, or nothing with ``if_not_exists``),
any other change of the ref is a commit conflict (exit 5).

Semantics, as Java's:
* create: the name must be free (a branch or a tag of that name exists: exit 6, unless
  ``if_not_exists``: nothing changes, not even the retention, as Spark's ``IF NOT EXISTS``);
* replace: the ref must exist (exit 3) and be of the kind named (exit 6); it moves to the target
  and keeps its retention except what is given (``SnapshotRef.builderFrom``); replacing ``main``
  moves the current snapshot and appends to the snapshot-log;
* create with ``replace`` (``CREATE OR REPLACE``): create when absent, else replace;
* drop: ``main`` never (exit 6); the ref must exist (exit 3, unless ``if_exists``) and be of the
  kind named (exit 6: ``tag drop`` does not drop a branch).
The target is ``snapshot_id``, the head of ``ref``, or the current snapshot. On a table without
snapshots, creating a branch commits an empty ``append`` snapshot on it, its retention in the same
commit (Java's ``createBranch(name)``, which Spark's ``CREATE BRANCH`` calls); a tag has nothing
to point at (exit 6). Tags have no ``min-snapshots-to-keep`` or ``max-snapshot-age-ms``
(exit 2); every retention value is positive (exit 2), as ``SnapshotRef.Builder`` checks.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from icectl.errors import CommitConflictError, NotFoundError, RefusedError, UsageError
from icectl.ops.snapshots.result import RefChangeResult, RefState
from icectl.results import NEXT_METADATA, Column, RowsResult
from icectl.spec.durations import MAX_LONG, human_duration
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import MAX_REF_AGE_MS, MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP
from icectl.spec.requirements import AssertRefSnapshotId
from icectl.spec.snapshots import MAIN_BRANCH, SnapshotRef
from icectl.spec.tracked_file import FORMAT_VERSION as V4
from icectl.spec.updates import RemoveSnapshotRef, SetSnapshotRef, TableChange
from icectl.table import Table
from icectl.table.commit import commit, new_snapshot_id
from icectl.table.layout import SnapshotLayout
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.layout.root import RootLayout
from icectl.table.snapshot_writer import SnapshotChange, write_snapshot
from icectl.table.write_guard import check_writable

_MAX_INT = 2**31 - 1  # Java's Integer.MAX_VALUE

RefKind = Literal["branch", "tag"]
KINDS: tuple[RefKind, ...] = ("branch", "tag")


@dataclass(frozen=True)
class RefRetention:
    """A ref's own retention; None: not given (a new ref leaves it to the table's
    ``history.expire.*``, a replaced one keeps what it had)."""

    min_snapshots_to_keep: int | None = None  # --retain-last, branches only
    max_snapshot_age_ms: int | None = None  # --max-snapshot-age, branches only
    max_ref_age_ms: int | None = None  # --max-ref-age

    def check(self, kind: RefKind) -> None:
        """``SnapshotRef.Builder``'s checks: tags keep no snapshot history; values are positive."""
        if kind == "tag":
            for value, option in ((self.min_snapshots_to_keep, "--retain-last"),
                                  (self.max_snapshot_age_ms, "--max-snapshot-age")):
                if value is not None:
                    raise UsageError(f"tags do not support {option}: a tag keeps exactly one snapshot",
                                     hint="give a tag only --max-ref-age")
        for value, option in ((self.min_snapshots_to_keep, "--retain-last"),
                              (self.max_snapshot_age_ms, "--max-snapshot-age"),
                              (self.max_ref_age_ms, "--max-ref-age")):
            if value is not None and value <= 0:
                raise UsageError(f"{option} must be greater than 0, got {value}")
        # Java reads min-snapshots-to-keep as an int and the ages as longs: a larger number would
        # be written into metadata that Iceberg Java then refuses to load.
        for value, option, most in ((self.min_snapshots_to_keep, "--retain-last", _MAX_INT),
                                    (self.max_snapshot_age_ms, "--max-snapshot-age", MAX_LONG),
                                    (self.max_ref_age_ms, "--max-ref-age", MAX_LONG)):
            if value is not None and value > most:
                unit = "" if option == "--retain-last" else " ms"
                raise UsageError(f"{option} must be at most {most}{unit}, got {value}{unit}")

    def applied_to(self, ref: SnapshotRef) -> SnapshotRef:
        """``ref`` with every given value set, the others kept."""
        given = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return dataclasses.replace(ref, **given) if given else ref


def retention_text(ref: SnapshotRef) -> str:
    """A ref's own retention as people read it."""
    parts = []
    if ref.min_snapshots_to_keep is not None:
        parts.append(f"retain-last {ref.min_snapshots_to_keep}")
    if ref.max_snapshot_age_ms is not None:
        parts.append(f"max-snapshot-age {human_duration(ref.max_snapshot_age_ms)}")
    if ref.max_ref_age_ms is not None:
        parts.append(f"max-ref-age {human_duration(ref.max_ref_age_ms)}")
    return ", ".join(parts) if parts else "table defaults"


def ref_state(ref: SnapshotRef | None) -> RefState | None:
    if ref is None:
        return None
    return RefState(type=ref.type, snapshot_id=ref.snapshot_id, min_snapshots_to_keep=ref.min_snapshots_to_keep,
                    max_snapshot_age_ms=ref.max_snapshot_age_ms, max_ref_age_ms=ref.max_ref_age_ms,
                    retention=retention_text(ref))


def _check_name(name: str, kind: str) -> None:
    if not name or name != name.strip():
        raise UsageError(f"{kind} name {name!r} is empty or starts or ends with blanks")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise UsageError(f"a ref is a branch or a tag, not {kind!r}")


def _target(table: Table, snapshot_id: int | None, ref: str | None, name: str, kind: str) -> int:
    """The snapshot the ref will point at: ``snapshot_id``, ``ref``'s head, or the current one."""
    snap = table.snapshot(snapshot_id, ref)  # NotFoundError (exit 3) for an unknown id or ref
    if snap is None:
        if ref is not None:  # a ref pointing at a snapshot the table lacks: damaged metadata
            raise NotFoundError(f"{ref} of table {table.identifier} points at a snapshot the table does not have",
                                path=table.metadata_location)
        raise RefusedError(f"cannot create {kind} {name}: table {table.identifier} has no snapshot yet",
                           hint="write to the table first")
    return snap.snapshot_id


def _outcome(table: Table, action: str, kind: RefKind, name: str, before: SnapshotRef | None,
             after: SnapshotRef | None, *, dry_run: bool, reason: str | None = None) -> RefChangeResult:
    changed = before != after
    res = RefChangeResult(table=table.identifier, dry_run=dry_run, action=action, type=kind, name=name,
                          before=ref_state(before), after=ref_state(after), changed=changed)
    if not changed:
        res.reason = reason or f"{kind} {name} is like that already"
    done = f"would {action}" if dry_run else {"create": "created", "replace": "replaced", "drop": "dropped"}[action]
    if not changed:
        res.title = f"{table.identifier}: nothing to do: {res.reason}"
    elif after is None:
        res.title = f"{done} {kind} {name} of {table.identifier}"
    else:
        res.title = f"{done} {kind} {name} of {table.identifier} at snapshot {after.snapshot_id} " \
                    f"({retention_text(after)})"
    return res


def _commit_ref(table: Table, res: RefChangeResult, name: str, kind: RefKind, before: SnapshotRef | None,
                after: SnapshotRef | None, *,
                on_created_meanwhile: Callable[[SnapshotRef], str] | None) -> RefChangeResult:
    """One commit moving ``name`` from ``before`` to ``after``, only while it is ``before``."""
    gave_up: list[str] = []

    def build(base: TableMetadata) -> TableChange:
        gave_up.clear()
        fresh = base.refs.get(name)
        if fresh != before:
            if before is None and fresh is not None and on_created_meanwhile is not None:
                gave_up.append(on_created_meanwhile(fresh))  # raises unless it is nothing to do
                return TableChange()
            if before is not None and fresh is None and after is None:
                gave_up.append(f"{kind} {name} was dropped meanwhile")
                return TableChange()
            now = "gone" if fresh is None else f"a {fresh.type} at snapshot {fresh.snapshot_id}"
            was = f"at snapshot {before.snapshot_id}" if before is not None else "absent"
            raise CommitConflictError(f"{kind} {name} of table {table.identifier} changed meanwhile (was {was}, "
                                      f"now {now}); nothing was changed", hint="check it and run the command again")
        if after is not None and base.snapshot_by_id(after.snapshot_id) is None:
            raise NotFoundError(f"snapshot {after.snapshot_id} is gone from table {table.identifier} "
                                "(expired meanwhile)", hint="list snapshots with 'icectl inspect snapshots'")
        requirement = AssertRefSnapshotId(name, before.snapshot_id if before is not None else None)
        update = SetSnapshotRef(name, after) if after is not None else RemoveSnapshotRef(name)
        return TableChange((requirement,), (update,))

    done = commit(table, build)
    if gave_up:  # another writer did it first: report what is there now
        res.changed, res.reason = False, gave_up[0]
        res.after = ref_state(done.metadata.refs.get(name))
        res.title = f"{table.identifier}: nothing to do: {res.reason}"
    res.commit.metadata_location, res.commit.commit_attempts = done.metadata_location, done.attempts
    return res


def create_ref(table: Table, name: str, kind: RefKind, *, snapshot_id: int | None = None, ref: str | None = None,
               retention: RefRetention | None = None, replace: bool = False, create: bool = True,
               if_not_exists: bool = False, dry_run: bool = False) -> RefChangeResult:
    """Create and/or replace branch or tag ``name`` (see the module docstring).

    ``create`` and not ``replace``: ``CREATE [IF NOT EXISTS]``; ``create`` and ``replace``:
    ``CREATE OR REPLACE``; ``replace`` alone: ``REPLACE``. Points at ``snapshot_id``, at the head of
    ``ref``, or at the current snapshot, with ``retention`` applied.
    """
    _check_kind(kind)
    _check_name(name, kind)
    if not create and not replace:
        raise UsageError("nothing to do: neither create nor replace")
    if if_not_exists and replace:
        raise UsageError("--if-not-exists cannot go with replace: a replace changes an existing ref")
    retention = retention or RefRetention()
    retention.check(kind)
    check_writable(table)  # commit() refuses a copied table too; this makes a dry run say so
    if (kind == "branch" and create and snapshot_id is None and ref is None
            and table.metadata.current_snapshot() is None and name not in table.metadata.refs):
        return _create_branch_on_empty_table(table, name, retention, dry_run=dry_run)
    existing = table.metadata.refs.get(name)
    if existing is not None and create and not replace:
        reason = f"{existing.type} {name} exists already"
        if if_not_exists:  # Spark's IF NOT EXISTS: nothing at all, not even the retention given
            return _outcome(table, "create", kind, name, existing, existing, dry_run=dry_run, reason=reason)
        raise RefusedError(f"cannot create {kind} {name} in table {table.identifier}: {reason}",
                           hint=f"use --if-not-exists to accept it, or 'icectl {kind} replace' to move it")
    target = _target(table, snapshot_id, ref, name, kind)
    if existing is None and create:
        action = "create"
        after = retention.applied_to(SnapshotRef(target, kind))
    elif replace:
        action = "replace"
        if existing is None:
            raise NotFoundError(f"table {table.identifier} has no {kind} '{name}' to replace",
                                path=table.metadata_location, hint=f"create it with 'icectl {kind} create'")
        if existing.type != kind:
            raise RefusedError(f"'{name}' is a {existing.type}, not a {kind}",
                               hint=f"use 'icectl {existing.type} replace' to move it")
        after = retention.applied_to(dataclasses.replace(existing, snapshot_id=target))  # keeps its retention
    else:
        raise AssertionError("unreachable: create or replace")
    res = _outcome(table, action, kind, name, existing, after, dry_run=dry_run)
    if dry_run:
        res.would_write = [NEXT_METADATA] if res.changed else []
        return res
    if not res.changed:
        return res

    def created_meanwhile(fresh: SnapshotRef) -> str:
        reason = f"{fresh.type} {name} was created meanwhile by another writer"
        if if_not_exists:
            return reason
        if replace:  # CREATE OR REPLACE decided to create; replacing what it did not see would lose it
            raise CommitConflictError(f"{reason}; nothing was changed", hint="check it and run the command again")
        raise RefusedError(f"cannot create {kind} {name} in table {table.identifier}: {reason}",
                           hint=f"use 'icectl {kind} replace' to move it")

    return _commit_ref(table, res, name, kind, existing, after, on_created_meanwhile=created_meanwhile)


def _create_branch_on_empty_table(table: Table, name: str, retention: RefRetention, *,
                                  dry_run: bool) -> RefChangeResult:
    """Java's ``createBranch(name)`` on a table without a current snapshot: an empty fast append
    on the new branch, and the branch's retention, in one commit."""
    layout: SnapshotLayout = (RootLayout(name) if table.metadata.format_version >= V4
                              else ManifestListLayout(str(uuid.uuid4()), []))
    snapshot_id = new_snapshot_id(table.metadata)
    planned = retention.applied_to(SnapshotRef(snapshot_id, "branch"))
    res = _outcome(table, "create", "branch", name, None, planned, dry_run=dry_run)
    res.title += " (a new empty snapshot: the table has none yet)"
    if dry_run:
        res.would_write = [f"an empty {layout.snapshot_field.replace('_', ' ')} for new snapshot {snapshot_id}",
                           NEXT_METADATA]
        return res

    def still_empty(base: TableMetadata) -> None:
        fresh = base.refs.get(name)
        if fresh is not None:
            raise RefusedError(f"cannot create branch {name} in table {table.identifier}: a {fresh.type} of that "
                               "name was created meanwhile by another writer", hint="check it with 'icectl "
                               "inspect refs'")
        if base.current_snapshot() is not None:
            raise CommitConflictError(f"table {table.identifier} got its first snapshot meanwhile; nothing was "
                                      "changed", hint="run the command again: the branch then starts there")

    def with_retention(staged: TableMetadata) -> list[SetSnapshotRef]:
        made = staged.refs[name]
        return [SetSnapshotRef(name, retention.applied_to(made))] if retention.applied_to(made) != made else []

    # Java's summary builder writes changed-partition-count even when no partition changed.
    change = SnapshotChange("append", layout, extra=lambda _index: {"changed-partition-count": "0"})
    done = write_snapshot(table, name, change, snapshot_id=snapshot_id,
                          check=still_empty, then=with_retention, create_branch=True)
    res.after = ref_state(table.metadata.refs.get(name))
    res.commit.metadata_location, res.commit.commit_attempts = done.metadata_location, done.attempts
    return res


def replace_ref(table: Table, name: str, kind: RefKind, *, snapshot_id: int | None = None, ref: str | None = None,
                retention: RefRetention | None = None, dry_run: bool = False) -> RefChangeResult:
    """``REPLACE BRANCH|TAG``: :func:`create_ref` with ``create=False, replace=True``."""
    return create_ref(table, name, kind, snapshot_id=snapshot_id, ref=ref, retention=retention, replace=True,
                      create=False, dry_run=dry_run)


def drop_ref(table: Table, name: str, kind: RefKind, *, if_exists: bool = False,
             dry_run: bool = False) -> RefChangeResult:
    """``DROP BRANCH|TAG [IF EXISTS]``: remove the ref (its snapshots stay until expire-snapshots)."""
    _check_kind(kind)
    _check_name(name, kind)
    if name == MAIN_BRANCH and kind == "branch":  # a tag drop of main is refused below: main is a branch
        raise RefusedError(f"cannot drop main: it is the table's current state (table {table.identifier})",
                           hint="move it with 'icectl branch replace TABLE main --snapshot ID' instead")
    check_writable(table)
    existing = table.metadata.refs.get(name)
    if existing is None:
        if if_exists:
            return _outcome(table, "drop", kind, name, None, None, dry_run=dry_run, reason=f"no {kind} {name}")
        raise NotFoundError(f"table {table.identifier} has no {kind} '{name}'", path=table.metadata_location,
                            hint=f"list them with 'icectl {kind} list'; --if-exists accepts a missing one")
    if existing.type != kind:
        raise RefusedError(f"'{name}' is a {existing.type}, not a {kind}: not dropped",
                           hint=f"use 'icectl {existing.type} drop' to drop it")
    res = _outcome(table, "drop", kind, name, existing, None, dry_run=dry_run)
    if dry_run:
        res.would_write = [NEXT_METADATA]
        return res
    return _commit_ref(table, res, name, kind, existing, None, on_created_meanwhile=None)


# --------------------------------------------------------------------------- list


def retention_defaults(md: TableMetadata) -> dict[str, int]:
    """The table-wide retention that applies to refs without their own (``history.expire.*``)."""
    return {MIN_SNAPSHOTS_TO_KEEP.name: MIN_SNAPSHOTS_TO_KEEP.parse(md.properties),
            MAX_SNAPSHOT_AGE_MS.name: MAX_SNAPSHOT_AGE_MS.parse(md.properties),
            MAX_REF_AGE_MS.name: MAX_REF_AGE_MS.parse(md.properties)}


def _shown(own: int | None, default: int, human: bool) -> str:
    if own is not None:
        return human_duration(own) if human else str(own)
    return f"{human_duration(default) if human else default} (default)"


def ref_row(name: str, ref: SnapshotRef, defaults: dict[str, int]) -> dict[str, Any]:
    """One row of ``branch|tag list``: the ref's own values (``*_ms``, None: the default applies) and
    what applies, human-readable, defaults marked ``(default)``; ``-`` where nothing applies."""
    branch = ref.is_branch
    if name == MAIN_BRANCH:
        max_ref_age = "never (main)"  # expire-snapshots never removes main, whatever it says
    else:
        max_ref_age = _shown(ref.max_ref_age_ms, defaults[MAX_REF_AGE_MS.name], True)
    return {
        "name": name, "type": ref.type, "snapshot_id": ref.snapshot_id,
        "retain_last": _shown(ref.min_snapshots_to_keep, defaults[MIN_SNAPSHOTS_TO_KEEP.name], False)
        if branch else "-",
        "max_snapshot_age": _shown(ref.max_snapshot_age_ms, defaults[MAX_SNAPSHOT_AGE_MS.name], True)
        if branch else "-",
        "max_ref_age": max_ref_age,
        "min_snapshots_to_keep": ref.min_snapshots_to_keep, "max_snapshot_age_ms": ref.max_snapshot_age_ms,
        "max_ref_age_ms": ref.max_ref_age_ms,
    }


REF_LIST_TERMINAL = ["name", "type", "snapshot_id", "retain_last", "max_snapshot_age", "max_ref_age"]


def list_refs(table: Table, kind: RefKind | None = None) -> RowsResult:
    """The branches and/or tags, main first then by name, with the retention that applies to each."""
    if kind is not None:
        _check_kind(kind)
    md = table.metadata
    defaults = retention_defaults(md)
    names = sorted(md.refs, key=lambda n: (n != MAIN_BRANCH, n))
    rows = [ref_row(n, md.refs[n], defaults) for n in names if kind is None or md.refs[n].type == kind]
    what = {"branch": "Branches", "tag": "Tags", None: "Branches and tags"}[kind]
    meta = {"table": table.identifier, "metadata_location": table.metadata_location,
            "defaults": defaults}
    return RowsResult({"branch": "branches", "tag": "tags", None: "refs"}[kind], f"{what} of {table.identifier}",
                      [*REF_LIST_TERMINAL, "min_snapshots_to_keep", "max_snapshot_age_ms", "max_ref_age_ms"], rows,
                      meta,
                      terminal_columns=REF_LIST_TERMINAL, location=md.location,
                      column_info={"retain_last": Column("text", "retain last"),
                                   "max_snapshot_age": Column("text", "max snapshot age"),
                                   "max_ref_age": Column("text", "max ref age")})


__all__ = ["KINDS", "RefKind", "RefRetention", "create_ref", "drop_ref", "list_refs", "ref_row", "ref_state",
           "replace_ref", "retention_defaults", "retention_text"]

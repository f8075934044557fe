"""One snapshot writer for every format version (Java's ``SnapshotProducer``).

:func:`write_snapshot` commits one change to a branch: on each attempt it takes the branch head
of the fresh base, has the table's layout (:mod:`icectl.table.layout`: a manifest list for
v1-v3, a root manifest for v4) write the file that lists the new snapshot's content, builds the
``Snapshot`` (:func:`new_snapshot`: one timestamp rule, one summary builder) and adds it to the
branch; a conflict rebuilds all of that on the new head. Files written before the commit (new
manifests or leaves) and by every attempt are deleted when the commit fails
(:func:`icectl.table.commit.discard_on_failure`); after a success, the lists or roots of lost
attempts are.

:func:`commit_snapshots` is the one place where snapshots are added to metadata and committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from icectl.errors import CorruptInputError, NotFoundError, RefusedError
from icectl.spec.metadata import MIN_ROW_LINEAGE_VERSION, TableMetadata
from icectl.spec.requirements import TableRequirement
from icectl.spec.snapshots import MAIN_BRANCH, Snapshot
from icectl.spec.soundness import INT64_MAX
from icectl.spec.updates import TableChange, TableUpdate, apply_updates, snapshot_change
from icectl.storage import delete_quietly
from icectl.table import Table
from icectl.table.commit import CommitResult, commit, discard_on_failure, new_snapshot_id
from icectl.table.layout import Attempt, Deletes, SnapshotLayout, WrittenIndex
from icectl.table.summary import SummaryBuilder, partition_key
from icectl.table.write_guard import check_table_home

# stage(base) -> (updates applied before the snapshots, [(branch, snapshot), ...])
Stage = Callable[[TableMetadata], tuple[Sequence[TableUpdate], Sequence[tuple[str, Snapshot]]]]


def branch_head(md: TableMetadata, branch: str, identifier: str, *, create_branch: bool = False) -> Snapshot | None:
    """The snapshot a commit on ``branch`` builds on (None: main of an empty table). A tag is
    refused (exit 6), a ref naming a snapshot the table lacks is corrupt (exit 4). A branch the
    table lacks is refused unless ``create_branch``: then it starts at main's head, as Spark's
    ``CREATE BRANCH`` does (a new branch without a parent would hide every row main has)."""
    ref = md.ref(branch)
    if ref is not None and not ref.is_branch:  # refused before any file is written or read
        raise RefusedError(f"cannot commit to '{branch}': it is a tag, not a branch",
                           hint="give a branch (list them with 'icectl inspect refs')")
    if ref is not None:
        snap = md.snapshot_by_id(ref.snapshot_id)
        if snap is None:
            raise CorruptInputError(f"branch '{branch}' of table {identifier} points at snapshot {ref.snapshot_id}, "
                                    "which the table lacks")
        return snap
    if branch == MAIN_BRANCH:  # main of an empty table has no ref yet
        return md.snapshot_for_ref(branch)
    if not create_branch:
        raise NotFoundError(f"table {identifier} has no branch '{branch}'",
                            hint="check the name with 'icectl inspect refs'; add-files --create-branch "
                                 "starts a new branch at main's head")
    return md.snapshot_for_ref(MAIN_BRANCH)


def sequence_number(base: TableMetadata) -> int:
    """The next snapshot's data sequence number (v1 has none: 0)."""
    return base.last_sequence_number + 1 if base.format_version >= 2 else 0


def check_counters(table: Table, base: TableMetadata, seq: int, first_row_id: int | None = None,
                   added_rows: int = 0) -> None:
    """Raise :class:`~icectl.errors.CorruptInputError` (exit 4) when the next snapshot's sequence
    number or the table's next-row-id (``first_row_id + added_rows``, v3 row lineage) would pass
    the largest signed 64-bit number: Iceberg reads them as Java longs, so neither a manifest list
    nor a metadata file may be written with them. Called before any file of the snapshot is
    written (and once more with the rows the snapshot assigns, before its commit)."""
    where = table.metadata_location
    if seq > INT64_MAX:
        raise CorruptInputError(
            f"cannot add a snapshot to table {table.identifier}: its last-sequence-number "
            f"{base.last_sequence_number} leaves no next sequence number within the signed 64-bit range "
            f"(sequence number would overflow) in {where}", path=where,
            hint="no Iceberg writer can commit to it; if the number is damaged, restore an earlier metadata "
                 "version (see 'icectl inspect metadata-log')")
    if first_row_id is not None and first_row_id + added_rows > INT64_MAX:
        raise CorruptInputError(
            f"cannot add a snapshot to table {table.identifier}: next-row-id {first_row_id} plus the "
            f"{added_rows} row id(s) the snapshot assigns passes the signed 64-bit range (row id would "
            f"overflow) in {where}", path=where,
            hint="no Iceberg writer can commit to it; if the number is damaged, restore an earlier metadata "
                 "version (see 'icectl inspect metadata-log')")


def snapshot_timestamp(parent: Snapshot | None) -> int:
    """Now in milliseconds, and always after the parent: ``max(now, parent.timestamp_ms + 1)``.

    A clock behind the parent's (another host, a clock step) must not make the branch history
    go back in time; Java's snapshot-log check refuses out-of-order main entries."""
    now = time.time_ns() // 1_000_000
    return max(now, parent.timestamp_ms + 1) if parent is not None else now


def new_snapshot(base: TableMetadata, parent: Snapshot | None, snapshot_id: int, seq: int, *, operation: str,
                 summary: SummaryBuilder, extra: dict[str, str] | None = None, manifest_list: str | None = None,
                 root_manifest: str | None = None, first_row_id: int | None = None,
                 added_rows: int | None = None) -> Snapshot:
    """The ``Snapshot`` of a commit on ``parent``: the one timestamp rule and the one summary
    builder (``total-*`` carried from the parent)."""
    return Snapshot(snapshot_id=snapshot_id, timestamp_ms=snapshot_timestamp(parent),
                    parent_snapshot_id=parent.snapshot_id if parent is not None else None, sequence_number=seq,
                    manifest_list=manifest_list, root_manifest=root_manifest,
                    summary=summary.build(operation, parent.summary if parent is not None else None, extra),
                    schema_id=base.current_schema_id, first_row_id=first_row_id, added_rows=added_rows)


def commit_snapshots(table: Table, stage: Stage, written: list[str],
                     last: Callable[[TableMetadata], Sequence[TableUpdate]] | None = None) -> CommitResult:
    """Commit what ``stage(base)`` returns: the updates that go first (e.g. upgrade-format-version,
    set-properties) and the snapshots, each added to its branch (add-snapshot, set-snapshot-ref,
    assert-ref-snapshot-id: the branch is still where ``base`` has it). Retries call ``stage`` on
    the fresh base; every file in ``written`` (as it grows) is deleted when the commit fails,
    unless its outcome is unknown. ``last(staged)`` returns updates that go after the snapshots, on
    the metadata with them added (e.g. a new branch's retention)."""
    check_table_home(table)

    def build(base: TableMetadata) -> TableChange:
        first, snapshots = stage(base)
        staged = apply_updates(base, first)  # the snapshots land on the base with those updates applied
        requirements: list[TableRequirement] = []
        updates: list[TableUpdate] = list(first)
        for branch, snapshot in snapshots:
            change = snapshot_change(staged, snapshot, branch=branch)
            staged = apply_updates(staged, change.updates)
            requirements.extend(change.requirements)
            updates.extend(change.updates)
        if last is not None:
            updates.extend(last(staged))
        return TableChange(tuple(requirements), tuple(updates))

    with discard_on_failure(table.io, written):
        return commit(table, build)


@dataclass
class SnapshotChange:
    """What one commit does to a branch (Java's ``SnapshotProducer``): the files it adds (through
    its layout: manifests or leaves written before the commit, root-level entries), the files it
    deletes (``deletes``: marked DELETED by the layout on each attempt's head, manifests rewritten
    or manifest DVs), its operation and summary."""

    operation: str
    layout: SnapshotLayout
    summary: SummaryBuilder = field(default_factory=SummaryBuilder)
    # Summary keys that depend on the attempt (e.g. compaction's manifests-kept), after the metrics.
    extra: Callable[[WrittenIndex], dict[str, str]] | None = None
    written: list[str] = field(default_factory=list)  # files written before the commit, all referenced
    deletes: Deletes = field(default_factory=Deletes)


@dataclass(frozen=True)
class SnapshotCommit:
    snapshot: Snapshot
    metadata_location: str
    attempts: int
    index: WrittenIndex  # the committed list or root
    files: list[str]  # files of the committed snapshot this commit wrote: change.written, then the index


def write_snapshot(table: Table, branch: str, change: SnapshotChange, *, snapshot_id: int | None = None,
                   head: Callable[[TableMetadata], Snapshot | None] | None = None,
                   check: Callable[[TableMetadata], None] | None = None,
                   adjust: Callable[[TableMetadata], Sequence[TableUpdate]] | None = None,
                   then: Callable[[TableMetadata], Sequence[TableUpdate]] | None = None,
                   create_branch: bool = False) -> SnapshotCommit:
    """Commit ``change`` as one new snapshot on ``branch`` (see the module docstring).

    At each attempt: ``check(base)`` may raise to give up; ``adjust(base)`` returns updates that
    go into the same commit before the snapshot (e.g. set-properties of the name mapping);
    ``then(staged)`` updates that go after it, on the metadata with the snapshot added;
    ``head(base)`` is the snapshot to build on (default :func:`branch_head`).
    """
    check_table_home(table)  # the write gate, before any file is written (table.io refuses too)
    snapshot_id = snapshot_id if snapshot_id is not None else new_snapshot_id(table.metadata)
    folder = table.metadata_folder
    written = list(change.written)
    indexes: dict[str, WrittenIndex] = {}
    attempts = 0

    def stage(base: TableMetadata) -> tuple[Sequence[TableUpdate], list[tuple[str, Snapshot]]]:
        nonlocal attempts
        attempts += 1
        if check is not None:
            check(base)
        first = tuple(adjust(base)) if adjust is not None else ()
        base = apply_updates(base, first)
        parent = head(base) if head is not None else branch_head(base, branch, table.identifier,
                                                                  create_branch=create_branch)
        seq = sequence_number(base)
        first_row_id = base.next_row_id if base.format_version >= MIN_ROW_LINEAGE_VERSION else None
        check_counters(table, base, seq, first_row_id)
        attempt = Attempt(table.identifier, base, parent, snapshot_id, seq, first_row_id, attempts, folder)
        index = change.layout.write(table.io, attempt, change.deletes)
        written.extend(index.files)
        written.append(index.path)
        indexes[index.path] = index
        check_counters(table, base, seq, first_row_id, index.added_rows or 0)
        summary = change.summary
        if index.dropped:  # delete files this attempt dropped besides change.deletes (Deletes.drop_older)
            summary = summary.copy()
            for spec_id, f in index.dropped:
                summary.removed_file(f, partition_key(base, spec_id, f.partition))
        snapshot = new_snapshot(base, parent, snapshot_id, seq, operation=change.operation, summary=summary,
                                extra=change.extra(index) if change.extra is not None else None,
                                first_row_id=first_row_id, added_rows=index.added_rows,
                                **{change.layout.snapshot_field: index.path})
        return first, [(branch, snapshot)]

    done = commit_snapshots(table, stage, written, then)
    committed = done.metadata.snapshot_by_id(snapshot_id)
    assert committed is not None
    path = getattr(committed, change.layout.snapshot_field)
    keep = {path, *change.written, *indexes[path].files}
    for p in written:
        if p not in keep:  # lists, roots and rewritten manifests of attempts that lost a conflict
            delete_quietly(table.io, p)
    return SnapshotCommit(committed, done.metadata_location, done.attempts, indexes[path],
                          [*change.written, *indexes[path].files, path])

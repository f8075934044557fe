"""`icectl upgrade TABLE --to N`: raise a table's format version in one atomic commit.

* ``--to 2`` / ``--to 3`` (Appendix E): a metadata-only commit, as Java's
  ``TableMetadata.upgradeFormatVersion`` (only ``format-version`` changes; ``next-row-id`` stays at
  its initial 0, so v3 row lineage starts with the next snapshot, whose manifest list assigns
  ``first_row_id`` to every data manifest).
* ``--to 4`` (the merged spec's Appendix E, O(1)): the same commit also gives the head of every
  branch a new ``replace`` snapshot whose root manifest holds one EXISTING entry per manifest-list
  row of the head, a reference to the v1-v3 manifest (``manifest_info.format_version`` 0) with its
  counts, sequence numbers and ``first_row_id`` copied. No manifest, data or delete file is
  rewritten; v2/v3 delete manifests keep applying. v1/v2 tables pass through v3's rules: data
  manifests without ``first_row_id`` get one from ``next-row-id``, which advances. Before anything
  is written, each root is decoded again and its live content compared, entry for entry, with its
  head's as the v1-v3 reader plans it; any difference aborts. Older snapshots and tags keep their
  manifest lists.
* ``--to 4`` on a v4 table whose branch heads are in the proposal layout of earlier icectl versions
  (Avro roots): one commit gives each such head a ``replace`` snapshot in the spec layout
  (:func:`plan_migration`: data files into Parquet leaves, DVs colocated on
  root entries, position and equality delete files into a v1-v3 delete manifest); the old roots
  and leaves become unreferenced and expire removes them.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.codec.manifest_writer import write_manifest
from icectl.errors import CommitConflictError, CorruptInputError, IcectlError, RefusedError, UsageError
from icectl.results import FLAT, NEXT_METADATA, UNSET, CommandResult, Committed, DryRun, Part, Unset
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import MAX_FORMAT_VERSION, TableMetadata
from icectl.spec.snapshots import MAIN_BRANCH, Snapshot
from icectl.spec.tracked_file import (
    PRE_V4,
    EntryStatus,
    TrackedFile,
    colocate,
    manifest_info_of,
    manifest_info_of_manifest_file,
    manifest_row,
    tracked_file_of,
)
from icectl.spec.updates import TableUpdate, apply_updates, format_upgrade_updates
from icectl.storage import FileIO, join
from icectl.table import Table
from icectl.table.commit import discard_on_failure, new_snapshot_id, operations_for
from icectl.table.layout.root import encode_leaf, encode_root, leaf_entry, leaf_path, root_path
from icectl.table.manifest_read import manifest_entries
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import TreeManifest, is_proposal_root, read_tree_entries, tree_manifests
from icectl.table.snapshot_writer import check_counters, commit_snapshots, new_snapshot
from icectl.table.summary import SummaryBuilder
from icectl.table.write_guard import check_writable
from icectl.threads import ordered_map


@dataclass
class UpgradeBranch(Part):
    """A branch head and the new snapshot ``--to 4`` gives it (a root manifest over its manifests)."""

    branch: str
    head_snapshot_id: int
    new_snapshot_id: int
    sequence_number: int
    root_manifest: str | None
    manifests: int
    live_files: int
    first_row_id: int | None
    added_rows: int | None


@dataclass(kw_only=True)
class UpgradeResult(CommandResult):
    """``icectl upgrade``."""

    view: ClassVar[str] = "upgrade"

    table: str
    dry_run: bool
    from_version: int
    to_version: int
    branches: list[UpgradeBranch]  # --to 4 only; empty otherwise
    warning: str | Unset = UNSET  # --to 4 from an older version
    committed: bool | Unset = UNSET  # False when the table is at the version already
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    written: list[str] | Unset = UNSET  # committed from here on
    commit: Committed = field(default_factory=Committed, metadata=FLAT)
    seconds: float | Unset = UNSET



V4_WARNING = ("format v4 is written as the Iceberg spec merged it (2026-10-14); no released engine reads it yet: "
              "Spark 3.5 with Iceberg 1.10 cannot read the table after the upgrade")
V4 = 4
_COUNT_READ_FIELDS = frozenset({"content", "file_path", "record_count"})


@dataclass
class BranchRoot:
    """The new head of one branch after ``--to 4``."""

    branch: str
    head: Snapshot
    snapshot: Snapshot
    root_data: bytes
    manifests: int
    live_files: int
    leaves: list[tuple[str, bytes]] = dataclasses.field(default_factory=list)  # written with the root


@dataclass
class UpgradePlan:
    from_version: int
    to_version: int
    metadata: TableMetadata  # the upgraded base, before the new snapshots are added
    roots: list[BranchRoot]


def _upgraded_base(md: TableMetadata, to: int) -> TableMetadata:
    """Appendix E's metadata changes: v2 needs a table-uuid; v3 starts next-row-id at 0."""
    return apply_updates(md, format_upgrade_updates(md, to))


def _branches(md: TableMetadata) -> list[tuple[str, int]]:
    heads = [(name, ref.snapshot_id) for name, ref in md.refs.items() if ref.is_branch]
    return sorted(heads, key=lambda b: (b[0] != MAIN_BRANCH, b[0]))


class _ManifestReader:
    """The six counts of each manifest: the list's, or (v1 lists may omit them) its entries', read once."""

    def __init__(self, md: TableMetadata, io: FileIO) -> None:
        self.md, self.io = md, io
        self.cache: dict[str, tuple[int, ...]] = {}

    def counts(self, manifests: list[ManifestFile]) -> list[tuple[int, ...]]:
        def listed(m: ManifestFile) -> tuple[int | None, ...]:
            return (m.added_files_count, m.existing_files_count, m.deleted_files_count, m.added_rows_count,
                    m.existing_rows_count, m.deleted_rows_count)

        todo = [m for m in manifests if m.manifest_path not in self.cache and None in listed(m)]
        counts: dict[str, list[int]] = {m.manifest_path: [0] * 6 for m in todo}
        slot = {ManifestEntryStatus.ADDED: 0, ManifestEntryStatus.EXISTING: 1, ManifestEntryStatus.DELETED: 2}
        for m, e in iter_entries(self.md, self.io, todo, fields=_COUNT_READ_FIELDS):
            c = counts[m.manifest_path]
            c[slot[e.status]] += 1
            c[slot[e.status] + 3] += e.data_file.record_count
        for m in todo:
            self.cache[m.manifest_path] = tuple(counts[m.manifest_path])
        return [self.cache.get(m.manifest_path) or tuple(v or 0 for v in listed(m)) for m in manifests]


def plan_upgrade(table: Table, to: int) -> UpgradePlan:
    md = table.metadata
    if not 2 <= to <= MAX_FORMAT_VERSION:
        raise UsageError(f"--to must be 2, 3 or 4 (got {to})")
    if to < md.format_version:
        raise UsageError(f"cannot downgrade table {table.identifier} from v{md.format_version} to v{to}")
    base = _upgraded_base(md, to)
    if md.format_version >= V4 and to == V4:
        return plan_migration(table)
    if to < V4 or md.format_version >= V4:
        return UpgradePlan(md.format_version, to, base, [])
    reader = _ManifestReader(md, table.io)
    folder = table.metadata_folder
    next_row_id, seq = base.next_row_id, md.last_sequence_number
    taken: set[int] = set()
    roots: list[BranchRoot] = []
    for branch, head_id in _branches(md):
        head = md.snapshot_by_id(head_id)
        if head is None:
            raise CorruptInputError(f"branch '{branch}' points at snapshot {head_id}, which the table lacks",
                                    path=table.metadata_location)
        manifests = manifests_of(md, head, table.io)
        seq += 1
        first_row_id = next_row_id
        entries: list[TrackedFile] = []
        for m, counts in zip(manifests, reader.counts(manifests), strict=True):
            row_id = m.first_row_id if m.content == ManifestContent.DATA else None
            if m.content == ManifestContent.DATA and row_id is None:  # v3's first_row_id assignment
                row_id = next_row_id
                next_row_id += counts[3] + counts[4]
            added_by = m.added_snapshot_id if m.added_snapshot_id is not None else head.snapshot_id
            m = dataclasses.replace(m, first_row_id=row_id, added_snapshot_id=added_by)
            info = manifest_info_of_manifest_file(m, format_version=PRE_V4, counts=counts)
            entries.append(manifest_row(m, info, status=EntryStatus.EXISTING, record_count=sum(counts[:3])))
        check_counters(table, md, seq, first_row_id, next_row_id - first_row_id)  # before a root is encoded
        snapshot_id = new_snapshot_id(md)
        while snapshot_id in taken:
            snapshot_id = new_snapshot_id(md)
        taken.add(snapshot_id)
        data = encode_root(md, entries, snapshot_id, seq, head.snapshot_id)
        snapshot = new_snapshot(md, head, snapshot_id, seq, operation="replace", summary=SummaryBuilder(),
                                root_manifest=root_path(folder, snapshot_id), first_row_id=first_row_id,
                                added_rows=next_row_id - first_row_id)
        live = check_same_content(md, base, head, snapshot, data, manifests, table.io, branch)
        roots.append(BranchRoot(branch, head, snapshot, data, len(manifests), live))
    return UpgradePlan(md.format_version, to, base, roots)


EntryKey = tuple[Any, ...]  # a live entry as _key gives it


def _key(m: ManifestFile, e: ManifestEntry) -> EntryKey:
    """A live entry as a comparable key (layout page section 7); index 9 is first_row_id."""
    f = e.data_file
    return (f.file_path, int(f.content), e.snapshot_id, e.sequence_number, e.file_sequence_number,
            m.partition_spec_id, f.partition, f.record_count, f.file_size_in_bytes, f.first_row_id,
            f.referenced_data_file, f.content_offset, f.content_size_in_bytes)


def _live_keys_both(md: TableMetadata, upgraded: TableMetadata, io: FileIO, manifests: list[ManifestFile],
                    tree: list[TreeManifest]) -> tuple[Counter[EntryKey], Counter[EntryKey]]:
    """The head's live entries (v1-v3 reader) and the new root's (v4 reader), each manifest read
    from storage once for both."""
    before: Counter[EntryKey] = Counter()
    after: Counter[EntryKey] = Counter()
    for tm in tree:
        if tm.root_entries is not None:
            after.update(_key(tm, e) for e in tm.root_entries if e.is_live)
    olds: dict[str, list[ManifestFile]] = {}
    news: dict[str, list[TreeManifest]] = {}
    for m in manifests:
        olds.setdefault(m.manifest_path, []).append(m)
    for tm in tree:
        if tm.root_entries is None:
            news.setdefault(tm.manifest_path, []).append(tm)

    def read(path: str) -> tuple[list[EntryKey], list[EntryKey]]:
        data = io.read(path)
        try:
            b = [_key(m, e) for m in olds.get(path, [])
                 for e in manifest_entries(io, m, partition_type=md.partition_type(m.partition_spec_id),
                                           format_version=md.format_version, data=data) if e.is_live]
        except IcectlError as err:
            err.path = err.path or path
            raise
        a = [_key(tm, e) for tm in news.get(path, [])
             for e in read_tree_entries(upgraded, io, tm, upgraded.partition_type(tm.partition_spec_id), data=data)
             if e.is_live]
        return b, a

    paths = sorted(olds.keys() | news.keys())
    for b, a in ordered_map(read, paths):
        before.update(b)
        after.update(a)
    return before, after


def check_same_content(md: TableMetadata, upgraded: TableMetadata, head: Snapshot, snapshot: Snapshot,
                       root_data: bytes, manifests: list[ManifestFile], io: FileIO, branch: str) -> int:
    """Refuse unless the new root (decoded from ``root_data``) plans exactly the head's live entries.

    Row ids the head lacked (v1/v2, or a v3 head from before a v2 -> v3 upgrade) are compared
    only for being assigned: every live data file of the new root must have one. Returns the
    number of live entries.
    """
    before, after = _live_keys_both(md, upgraded, io, manifests, tree_manifests(upgraded, snapshot, io, root_data))
    unassigned = sum(n for k, n in after.items() if k[1] == DataFileContent.DATA and k[9] is None)
    if unassigned:
        raise RefusedError(f"upgrade aborted: the new root of branch '{branch}' leaves {unassigned} data files "
                           "without a first_row_id; nothing written", hint="report this as an icectl bug")
    # Files the head gave no row id must now have one: compare them without it.
    lacking = {k for k in before if k[1] == DataFileContent.DATA and k[9] is None}
    after = Counter({(_without_row_id(k) if _without_row_id(k) in lacking else k): n for k, n in after.items()})
    if before != after:
        missing = next(iter(before - after), None)
        extra = next(iter(after - before), None)
        raise RefusedError(
            f"upgrade aborted: the new root of branch '{branch}' differs from head {head.snapshot_id} "
            f"({sum((before - after).values())} entries missing, e.g. {_show(missing)}; "
            f"{sum((after - before).values())} extra, e.g. {_show(extra)}); nothing written",
            hint="report this as an icectl bug")
    return sum(before.values())


def _without_row_id(key: EntryKey) -> EntryKey:
    k = list(key)
    k[9] = None
    return tuple(k)


def _show(key: Any) -> str:
    return "none" if key is None else f"{key[0]} (seq {key[3]}, content {key[1]})"


def upgrade(table: Table, to: int, *, dry_run: bool = False) -> UpgradeResult:
    """Upgrade ``table`` to format version ``to`` in one commit (see the module docstring)."""
    check_writable(table)
    md = table.metadata
    start = time.perf_counter()
    if to >= V4 > md.format_version:
        highest = operations_for(table).max_format_version
        if highest is not None and to > highest:  # before anything is written
            raise RefusedError(f"cannot upgrade {table.identifier} to format version {to}: its catalog holds format "
                               f"versions up to {highest} (the REST protocol has no representation of v4 root "
                               "manifests); nothing written", hint=f"upgrade it to {highest} at most")
    plan = plan_upgrade(table, to)
    res = UpgradeResult(
        table=table.identifier, dry_run=dry_run, from_version=plan.from_version, to_version=to,
        branches=[UpgradeBranch(r.branch, r.head.snapshot_id, r.snapshot.snapshot_id, r.snapshot.sequence_number,
                                r.snapshot.root_manifest, r.manifests, r.live_files, r.snapshot.first_row_id,
                                r.snapshot.added_rows) for r in plan.roots],
        warning=V4_WARNING if to == V4 and plan.from_version < V4 else UNSET)
    if plan.from_version >= to and not plan.roots:
        res.title, res.committed = f"Table {table.identifier} is already v{plan.from_version}", False
        return res
    writes = [path for r in plan.roots for path, _ in r.leaves] + [r.snapshot.root_manifest or "" for r in plan.roots]
    if dry_run:
        res.title = (f"Would upgrade {table.identifier} from v{plan.from_version} to v{to}" if plan.from_version < to
                     else f"Would rewrite {len(plan.roots)} branch head(s) of {table.identifier} into the v4 layout "
                          "of the spec")
        res.dry.would_write, res.dry.would_delete = [*writes, NEXT_METADATA], []
        return res
    written: list[str] = []
    heads = {r.branch: r.head.snapshot_id for r in plan.roots}

    def stage(base: TableMetadata) -> tuple[tuple[TableUpdate, ...], list[tuple[str, Snapshot]]]:
        if (base.format_version != md.format_version or dict(_branches(base)) != dict(_branches(md))
                or base.next_row_id != md.next_row_id or base.last_sequence_number != md.last_sequence_number
                or base.partition_specs != md.partition_specs or base.schemas != md.schemas):
            raise CommitConflictError(f"table {table.identifier} changed while it was being upgraded; "
                                      "nothing was changed", hint="run the upgrade again")
        assert all(heads[r.branch] == r.snapshot.parent_snapshot_id for r in plan.roots)
        return format_upgrade_updates(base, to), [(r.branch, r.snapshot) for r in plan.roots]

    with discard_on_failure(table.io, written):
        for r in plan.roots:
            for path, data in [*r.leaves, (r.snapshot.root_manifest or "", r.root_data)]:
                table.io.write(path, data)
                written.append(path)
        done = commit_snapshots(table, stage, written)
    res.title = (f"Upgraded {table.identifier} from v{plan.from_version} to v{to}" if plan.from_version < to else
                 f"Rewrote {len(plan.roots)} branch head(s) of {table.identifier} into the v4 layout of the spec")
    res.committed, res.written, res.commit.metadata_location = True, written, done.metadata_location
    res.commit.commit_attempts, res.seconds = done.attempts, round(time.perf_counter() - start, 3)
    return res


# --------------------------------------------------------------------------- proposal layout -> spec layout


def _proposal_heads(md: TableMetadata, io: FileIO) -> list[tuple[str, Snapshot]]:
    out = []
    for branch, head_id in _branches(md):
        head = md.snapshot_by_id(head_id)
        if head is not None and head.root_manifest and is_proposal_root(io.read(head.root_manifest)):
            out.append((branch, head))
    return out


MigrationKey = tuple[Any, ...]


def _migration_key(spec_id: int, e: ManifestEntry) -> MigrationKey:
    f = e.data_file
    return (f.file_path, int(f.content), f.referenced_data_file, f.content_offset, f.content_size_in_bytes,
            e.sequence_number, e.file_sequence_number, spec_id, f.partition, f.record_count,
            f.first_row_id if f.content == DataFileContent.DATA else None)


def _migrated_rows(md: TableMetadata, io: FileIO, head: Snapshot) -> tuple[list[tuple[int, ManifestEntry]], int]:
    """Every live entry of a proposal-layout head (v1-v3 view) and the number of manifests it had."""
    tree = tree_manifests(md, head, io)
    out: list[tuple[int, ManifestEntry]] = []
    for tm in tree:
        ptype = md.partition_type(tm.partition_spec_id)
        out += [(tm.partition_spec_id, e) for e in read_tree_entries(md, io, tm, ptype) if e.is_live]
    return out, len(tree)


def plan_migration(table: Table) -> UpgradePlan:
    """Each branch head in the proposal layout as a ``replace`` snapshot in the spec layout: data
    files in one Parquet leaf per spec (EXISTING, every value explicit), files with a deletion
    vector in the root with the DV colocated, position/equality delete files in one v1-v3 delete
    manifest per spec (format_version 0). Checked before anything is written: decoded again, the
    new tree holds exactly the head's live files, sequence numbers and row ids."""
    md = table.metadata
    io = table.io
    heads = _proposal_heads(md, io)
    if not heads:
        return UpgradePlan(md.format_version, V4, md, [])
    folder = table.metadata_folder
    next_row_id, seq = md.next_row_id, md.last_sequence_number
    taken: set[int] = set()
    roots: list[BranchRoot] = []
    for branch, head in heads:
        live, manifest_count = _migrated_rows(md, io, head)
        seq += 1
        snapshot_id = new_snapshot_id(md)
        while snapshot_id in taken:
            snapshot_id = new_snapshot_id(md)
        taken.add(snapshot_id)
        first_row_id = next_row_id
        commit_uuid = str(uuid.uuid4())
        dvs = {e.data_file.referenced_data_file: e.data_file for _, e in live if e.data_file.is_dv}
        root_rows: list[TrackedFile] = []
        leaf_rows: dict[int, list[TrackedFile]] = {}
        delete_rows: dict[int, list[ManifestEntry]] = {}
        for spec_id, e in live:
            f = e.data_file
            if f.content != DataFileContent.DATA:
                if not f.is_dv:
                    existing = dataclasses.replace(e, status=ManifestEntryStatus.EXISTING)
                    delete_rows.setdefault(spec_id, []).append(existing)
                continue
            if f.first_row_id is None:  # row lineage the proposal layout left unassigned
                e = dataclasses.replace(e, data_file=dataclasses.replace(f, first_row_id=next_row_id))
                next_row_id += f.record_count
            row = tracked_file_of(e, spec_id, md.partition_type(spec_id), status=EntryStatus.EXISTING)
            if f.file_path in dvs:
                root_rows.append(colocate(row, dvs.pop(f.file_path)))
            else:
                leaf_rows.setdefault(spec_id, []).append(row)
        if dvs:
            orphan = next(iter(dvs.values()))
            raise CorruptInputError(f"deletion vector {orphan.file_path} references {orphan.referenced_data_file}, "
                                    f"which is not a live data file of branch '{branch}'", path=head.root_manifest)
        leaves: list[tuple[str, bytes]] = []
        entries: list[TrackedFile] = []
        for spec_id, rows in sorted(leaf_rows.items()):
            path = leaf_path(folder, commit_uuid, len(leaves))
            data = encode_leaf(md, rows)
            leaves.append((path, data))
            entry = leaf_entry(path, len(data), spec_id, manifest_info_of(rows), len(rows))
            entries.append(entry.with_tracking(status=EntryStatus.ADDED, snapshot_id=snapshot_id,
                                               sequence_number=seq, file_sequence_number=seq,
                                               first_row_id=min(r.tracking.first_row_id or 0 for r in rows)))
        for spec_id, rows_ in sorted(delete_rows.items()):
            spec = md.spec_by_id(spec_id)
            assert spec is not None
            path = join(folder, f"{commit_uuid}-d{spec_id}.avro")
            result = write_manifest(rows_, schema=md.schema(), spec=spec, partition_type=md.partition_type(spec),
                                    format_version=3, content=ManifestContent.DELETES, snapshot_id=snapshot_id)
            leaves.append((path, result.data))
            m = result.to_manifest_file(path, len(result.data), spec_id, snapshot_id, seq)
            counts = (m.added_files_count or 0) + (m.existing_files_count or 0) + (m.deleted_files_count or 0)
            info = manifest_info_of_manifest_file(m, format_version=PRE_V4)
            entries.append(manifest_row(m, info, status=EntryStatus.ADDED, record_count=counts))
        entries += root_rows
        check_counters(table, md, seq, first_row_id, next_row_id - first_row_id)
        data = encode_root(md, entries, snapshot_id, seq, head.snapshot_id)
        snapshot = new_snapshot(md, head, snapshot_id, seq, operation="replace", summary=SummaryBuilder(),
                                root_manifest=root_path(folder, snapshot_id), first_row_id=first_row_id,
                                added_rows=next_row_id - first_row_id)
        _check_migration(md, io, branch, live, snapshot, data, dict(leaves))
        roots.append(BranchRoot(branch, head, snapshot, data, manifest_count, len(live), leaves))
    return UpgradePlan(V4, V4, md, roots)


class _Overlay:
    """Reads the new files from memory and the rest from the table (for checking before writing)."""

    def __init__(self, io: FileIO, files: dict[str, bytes]) -> None:
        self.io, self.files = io, files

    def read(self, path: str) -> bytes:
        return self.files[path] if path in self.files else self.io.read(path)

    def size(self, path: str) -> int:
        return len(self.files[path]) if path in self.files else self.io.size(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.io, name)


def _check_migration(md: TableMetadata, io: FileIO, branch: str, live: list[tuple[int, ManifestEntry]],
                     snapshot: Snapshot, root_data: bytes, leaves: dict[str, bytes]) -> None:
    overlay: Any = _Overlay(io, {**leaves, snapshot.root_manifest or "": root_data})
    before = Counter(_migration_key(s, e) for s, e in live)
    after: Counter[MigrationKey] = Counter()
    for tm in tree_manifests(md, snapshot, overlay, root_data):
        data = leaves.get(tm.manifest_path) if tm.root_entries is None else None
        for e in read_tree_entries(md, overlay, tm, md.partition_type(tm.partition_spec_id), data=data):
            if e.is_live:
                after[_migration_key(tm.partition_spec_id, e)] += 1
    # A colocated DV keeps its blob, not its own snapshot/sequence numbers (they are the data file's).
    strip = lambda c: Counter({k[:5] + k[7:] if k[1] != 0 else k: n for k, n in c.items()})  # noqa: E731
    if strip(before) != strip(after):
        missing = next(iter(strip(before) - strip(after)), None)
        extra = next(iter(strip(after) - strip(before)), None)
        raise RefusedError(f"upgrade aborted: the spec-layout root of branch '{branch}' differs from its head "
                           f"(e.g. missing {missing}, extra {extra}); nothing written",
                           hint="report this as an icectl bug")

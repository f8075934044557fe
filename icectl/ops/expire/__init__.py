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
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

from icectl import progress
from icectl.catalog.hadoop import FileSystemOperations
from icectl.codec.manifest_reader import read_manifest_list, scan_manifest_list_paths
from icectl.engine import Engine, active, using
from icectl.engine.spark_reach import doomed_files, spark_engine, supports
from icectl.errors import ExitCode, IcectlError, RefusedError, StorageError
from icectl.ops.expire.delete import delete_files
from icectl.ops.expire.leftovers import Leftovers, leftover_snapshots
from icectl.ops.expire.result import EXPIRE_CATEGORIES, ExpireResult
from icectl.ops.expire.retention import ExpirePolicy, Retention, apply_retention, expiry_change, parse_older_than
from icectl.spec.manifest import DataFileContent, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import PartitionStatisticsFile, Snapshot, StatisticsFile
from icectl.spec.updates import TableChange
from icectl.storage import FileIO, scheme_of
from icectl.table import Table
from icectl.table.commit import commit, operations_for
from icectl.table.delete_fence import (
    check_absolute,
    check_snapshot_lists,
    file_identity,
    identity_cache,
    table_fence,
)
from icectl.table.delete_tally import deleting
from icectl.table.neighbours import Neighbours, find_neighbours
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import TreeFiles, leaf_rows, tree_files
from icectl.table.write_guard import check_writable

# Java's delete order (content files, manifests, manifest lists, statistics files), defined with
# the result's JSON keys deleted_<category>_count.
CATEGORIES = EXPIRE_CATEGORIES


# --------------------------------------------------------------------------- reachability


@dataclass
class FileSet:
    """Files by category; a file in several categories counts once, in the first."""

    # file_identity (local: the real path) -> (path as written, category): an in-table symlink
    # alias and the file it names are one file, so a retained alias keeps the file.
    files: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, path: str, category: str) -> None:
        self.files.setdefault(file_identity(path), (path, category))

    @property
    def paths(self) -> dict[str, str]:
        return dict(self.files.values())

    def by_category(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
        for p, c in self.files.values():
            out[c].append(p)
        return {c: sorted(v) for c, v in out.items()}

    def minus(self, other: FileSet) -> FileSet:
        return FileSet({k: v for k, v in self.files.items() if k not in other.files})


def _content_category(content: int) -> str:
    if content == DataFileContent.DATA:
        return "data_files"
    if content == DataFileContent.POSITION_DELETES:
        return "position_delete_files"  # DVs too: their Puffin file, as Spark counts it
    return "equality_delete_files"


@dataclass
class ReadCache:
    """Manifest lists and manifests are immutable: read each once per run, however often asked
    (the plan before the commit and the check after it see mostly the same files)."""

    lists: dict[str, list[str]] = field(default_factory=dict)  # manifest list -> its manifest paths (decoded)
    scanned: dict[str, list[str]] = field(default_factory=dict)  # the same, found by the shortcut
    manifests: dict[str, ManifestFile] = field(default_factory=dict)  # every manifest-list row built
    contents: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # manifest -> live (path, category)
    trees: dict[str, TreeFiles] = field(default_factory=dict)  # v4 root -> what it references
    leaf_rows: dict[str, list[tuple[str, DataFileContent, bool]]] = field(default_factory=dict)  # every row
    # The shortcut's hits, each decoded once: the lists of N fast appends repeat N^2/2 paths
    names: dict[bytes, str] = field(default_factory=dict)
    spark: dict[Any, Any] = field(default_factory=dict)  # the Spark engine's results, by their inputs


def _manifest_paths(md: TableMetadata, s: Snapshot, io: FileIO, cache: ReadCache, *, shortcut: bool) -> list[str]:
    """A snapshot's manifest paths. ``shortcut`` allows finding the paths without decoding rows
    (:func:`scan_manifest_list_paths`): used only for the expired side, where a wrong answer could
    only leave a file behind, never delete one that a retained snapshot reaches."""
    if not s.manifest_list:
        ms = manifests_of(md, s, io)
        for m in ms:
            cache.manifests.setdefault(m.manifest_path, m)
        return [m.manifest_path for m in ms]
    known = cache.lists.get(s.manifest_list)
    if known is None and shortcut:
        known = cache.scanned.get(s.manifest_list)
    if known is not None:
        return known
    data = io.read(s.manifest_list)
    paths = scan_manifest_list_paths(data, cache.names) if shortcut else None
    if paths is not None:
        cache.scanned[s.manifest_list] = paths  # kept apart: the retained side never trusts it
        return paths
    try:
        listing = read_manifest_list(data, format_version=md.format_version, reuse=cache.manifests)
    except IcectlError as e:
        if s.manifest_list not in e.message:
            e.message = f"{e.message} in {s.manifest_list}"
        e.path = e.path or s.manifest_list
        raise
    paths = [m.manifest_path for m in listing]
    cache.lists[s.manifest_list] = paths
    return paths


def _listing_manifest(path: str, md: TableMetadata, cache: ReadCache) -> ManifestFile:
    """The manifest-list row of ``path`` (see :func:`_decode_rows`), or, when no list row could be
    decoded, a stand-in that is enough to list the manifest's live files."""
    m = cache.manifests.get(path)
    return m if m is not None else ManifestFile(path, 0, md.default_spec_id)


def _decode_rows(md: TableMetadata, snaps: list[Snapshot], io: FileIO, cache: ReadCache, paths: set[str]) -> None:
    """Decode the manifest lists (among ``snaps``' lists the shortcut read) that name ``paths``, so
    those manifests are read with their own rows (partition spec, sequence numbers): the manifests
    only expired snapshots reach, usually a few lists of a few rows."""
    todo = set(paths)
    for s in snaps:
        listed = cache.scanned.get(s.manifest_list or "")
        if not todo or listed is None or todo.isdisjoint(listed):
            continue
        _manifest_paths(md, s, io, cache, shortcut=False)  # fills cache.manifests
        todo.difference_update(listed)


def reachable_files(md: TableMetadata, snapshot_ids: Iterable[int], io: FileIO,
                    skip_manifests: set[str] | None = None,
                    cache: ReadCache | None = None, *, shortcut: bool = False,
                    whole: set[str] | None = None, contents: bool = True) -> tuple[FileSet, set[str]]:
    """Every file the given snapshots reach, and the set of their manifest paths (v4: live leaves).

    Each manifest list and each manifest is read once however many snapshots share it; manifests
    in ``skip_manifests`` are listed but not opened (their content is known to stay reachable).
    ``shortcut``: see :func:`_manifest_paths`; never for the retained side. ``whole``, when given,
    receives the manifests whose every live row these snapshots reach: all but the v4 leaves that
    each of them reaches through a manifest DV (the only safe ``skip_manifests`` for another call).
    ``contents=False`` (v1-v3 snapshots only) leaves the manifests unopened: lists and manifests only.
    """
    cache = cache if cache is not None else ReadCache()
    out = FileSet()
    every = [s for s in (md.snapshot_by_id(i) for i in snapshot_ids) if s is not None]
    snaps = [s for s in every if not s.root_manifest]
    roots = [s for s in every if s.root_manifest]

    def paths_of(s: Snapshot) -> list[str]:
        return _manifest_paths(md, s, io, cache, shortcut=shortcut)

    version = md.format_version
    check_snapshot_lists(version, snaps)  # v1-v3: no relative path is ever resolved (nor read)
    manifests: dict[str, None] = {}
    with progress.task("reading manifest lists", len(snaps)) as advance, ThreadPoolExecutor(16) as pool:
        for s, paths in zip(snaps, pool.map(paths_of, snaps), strict=True):
            if s.manifest_list:
                out.add(s.manifest_list, "manifest_lists")
            for p in paths:
                check_absolute(p, version, "a manifest", *_named_by(s))
            manifests.update(dict.fromkeys(paths))
            advance(1)
    leaves = _tree_reach(md, roots, io, cache, out) if roots else {}
    for p in manifests:
        out.add(p, "manifest_files")
    for p in leaves:
        out.add(p, "manifest_files")
    wanted = [p for p in manifests if (not skip_manifests or p not in skip_manifests) and (contents or roots)]
    unknown = {p for p in wanted if p not in cache.contents and p not in cache.manifests}
    if unknown and shortcut:
        _decode_rows(md, snaps, io, cache, unknown)
    to_read = [_listing_manifest(p, md, cache) for p in wanted if p not in cache.contents]
    for m in to_read:
        cache.contents[m.manifest_path] = []
    for m, e in iter_entries(md, io, to_read, fields={"content", "file_path", "file_format"}, live_only=True):
        check_absolute(e.data_file.file_path, version, "a live file", f"manifest {m.manifest_path}", m.manifest_path)
        cache.contents[m.manifest_path].append((e.data_file.file_path, _content_category(e.data_file.content)))
    for p in wanted:
        for path, category in cache.contents[p]:
            out.add(path, category)
    if not roots:
        if whole is not None:
            whole.update(manifests)
        return out, set(manifests)
    skip = skip_manifests or set()
    _leaf_contents(md, io, cache, out, {p: v for p, v in leaves.items() if p not in skip})
    for s in roots:
        for t in cache.trees[s.root_manifest or ""].files:
            out.add(t[0], _content_category(t[1]))
    for s in roots:
        for p in cache.trees[s.root_manifest or ""].manifest_dv_files:
            out.add(p, "manifest_files")
    if whole is not None:
        whole.update(manifests)
        whole.update(p for p, (_m, dv) in leaves.items() if not dv)
    return out, set(manifests) | set(leaves)


def _named_by(s: Snapshot) -> tuple[str, str | None]:
    """Who names a snapshot's manifests, for :func:`check_absolute`: its list, or the snapshot (v1 inline)."""
    if s.manifest_list:
        return f"manifest list {s.manifest_list}", s.manifest_list
    return f"snapshot {s.snapshot_id}", None


def _tree_reach(md: TableMetadata, roots: list[Snapshot], io: FileIO, cache: ReadCache,
                out: FileSet) -> dict[str, tuple[ManifestFile, BitMap64 | None]]:
    """Read the v4 snapshots' roots (each once per run); add the roots to ``out``; return each
    live leaf with the rows removed in EVERY one of these snapshots (the intersection of their
    manifest DVs; None: some snapshot removes none), since a row stays reachable while any of
    them keeps it."""
    todo = [s for s in roots if (s.root_manifest or "") not in cache.trees]
    with progress.task("reading root manifests", len(todo)) as advance, ThreadPoolExecutor(16) as pool:
        for s, t in zip(todo, pool.map(lambda s: tree_files(md, s, io), todo), strict=True):
            cache.trees[s.root_manifest or ""] = t
            advance(1)
    leaves: dict[str, tuple[ManifestFile, BitMap64 | None]] = {}
    for s in roots:
        t = cache.trees[s.root_manifest or ""]
        out.add(t.root, "manifest_lists")
        for m, dv in t.leaves:
            seen = leaves.get(m.manifest_path)
            if seen is None:
                leaves[m.manifest_path] = (m, BitMap64(dv) if dv else None)
            elif seen[1] is not None:
                both = seen[1] & dv if dv else None
                leaves[m.manifest_path] = (seen[0], both or None)
    return leaves


def _leaf_contents(md: TableMetadata, io: FileIO, cache: ReadCache, out: FileSet,
                   leaves: dict[str, tuple[ManifestFile, BitMap64 | None]]) -> None:
    """Add the live rows of each leaf that are not removed (``leaves``: from :func:`_tree_reach`)."""
    todo = [m for p, (m, _dv) in leaves.items() if p not in cache.leaf_rows]
    with progress.task("reading leaf manifests", len(todo)) as advance, ThreadPoolExecutor(16) as pool:
        for m, rows in zip(todo, pool.map(lambda m: leaf_rows(md, io, m), todo), strict=True):
            cache.leaf_rows[m.manifest_path] = rows
            advance(1)
    for p, (_m, removed) in leaves.items():
        for ordinal, (path, content, live) in enumerate(cache.leaf_rows[p]):
            if live and (removed is None or ordinal not in removed):
                out.add(path, _content_category(content))


def statistics_files(md: TableMetadata) -> set[str]:
    out = {s.statistics_path for s in md.statistics} | {s.statistics_path for s in md.partition_statistics}
    for p in out:
        check_absolute(p, md.format_version, "a statistics file", "the table metadata")
    return out


def files_to_delete(before: TableMetadata, expired: list[int], after: TableMetadata, io: FileIO,
                    cache: ReadCache | None = None, leftovers: Leftovers | None = None) -> FileSet:
    """Reachable from the expired snapshots of ``before`` (and from ``leftovers``, the snapshots
    earlier expiries removed) and from no snapshot of ``after``.

    The retained snapshots' manifests are opened only when something beside manifest lists is to
    go (a manifest no retained snapshot lists, its files, a statistics file): the files they list
    matter only against those. When only manifest lists go (appends: every manifest stays), the
    retained side is its lists and manifest paths, as in Java's ReachableFileCleanup, which reads
    the current manifests only when there are manifests to delete.

    On the Spark engine (v1-v3, no leftovers of earlier runs) the same, as Spark joins:
    :func:`icectl.engine.spark_reach.doomed_files`; v4 tables and leftovers are judged here.
    """
    engine = spark_engine()
    if engine is not None and supports(before, after) and not (leftovers and leftovers.snapshots):
        return FileSet(dict(doomed_files(engine, before, expired, after, io,  # the same, as Spark joins
                                         statistics_files(before) if expired else set(), statistics_files(after),
                                         memo=cache.spark if cache is not None else None)))
    cache = cache if cache is not None else ReadCache()
    kept_manifests: set[str] = set()
    retained = [s.snapshot_id for s in after.snapshots]
    kept, _ = reachable_files(after, retained, io, cache=cache, whole=kept_manifests, contents=False)
    for p in statistics_files(after):
        kept.add(p, "statistics_files")
    gone, _ = reachable_files(before, expired, io, skip_manifests=kept_manifests, cache=cache, shortcut=True)
    if expired:
        for p in statistics_files(before):
            gone.add(p, "statistics_files")
    if leftovers is not None and leftovers.snapshots:
        for k, v in _leftover_files(leftovers, io, kept_manifests).files.items():
            gone.files.setdefault(k, v)
    doomed = gone.minus(kept)
    if any(category != "manifest_lists" for _path, category in doomed.files.values()):
        kept, _ = reachable_files(after, retained, io, cache=cache)  # lists cached: now the manifests too
        for p in statistics_files(after):
            kept.add(p, "statistics_files")
        doomed = gone.minus(kept)
    return doomed


def _leftover_files(leftovers: Leftovers, io: FileIO, skip: set[str]) -> FileSet:
    """What the leftover snapshots reach and is still on disk, as far as it can be read.

    Their files may be partly deleted (a cleanup cut short): a missing manifest list drops its
    snapshot, a missing manifest is left out; any other read failure drops that metadata's
    snapshots with a note. A cache of its own, so a failed read never leaves a manifest looking
    empty to the retained side.
    """
    out = FileSet()
    cache = ReadCache()
    with ThreadPoolExecutor(16) as pool:
        for md, ids in leftovers.by_metadata():
            snaps = [s for s in (md.snapshot_by_id(i) for i in ids) if s is not None]
            heads = [s.root_manifest or s.manifest_list for s in snaps]
            try:
                present = list(pool.map(lambda p: p is None or io.exists(p), heads))
                snaps = [s for s, ok in zip(snaps, present, strict=True) if ok]
                paths = sorted({p for s in snaps if not s.root_manifest
                                for p in _manifest_paths(md, s, io, cache, shortcut=True)} - skip)
                missing = {p for p, ok in zip(paths, pool.map(io.exists, paths), strict=True) if not ok}
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


# A writer that checks, then renames (Java's HadoopTableOperations on a local disk) can replace
# our new metadata version if it checked just before we published. Its window is short; before
# deleting anything we let at least this long pass since our commit and look again.
_SETTLE_SECONDS = 0.5


def _commit_lost(table: Table, expired: list[int], *, committed_at: float) -> str | None:
    """Why the expiry is not (or no longer) in the table, or ``None`` when it is.

    If any expired snapshot is back in the current metadata, the table was built on the version
    before ours: its files are live again and nothing may be deleted.
    """
    ops = operations_for(table)
    if isinstance(ops, FileSystemOperations) and scheme_of(ops.table_dir) == "file":
        time.sleep(max(0.0, _SETTLE_SECONDS - (time.monotonic() - committed_at)))
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
    the run's engine below (``spark_engine()``) until reachability takes it as an argument."""
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
        res.would_write = ["the next table metadata version (snapshots, refs and logs updated)"] if may_change else []
        res.would_delete = planned.by_category()
        res.deleted = {c: len(v) for c, v in planned.by_category().items()}
        kept_note = _report_kept(res, kept, table) + _report_shared(res, shared)
        res.title = (f"Would expire {len(plan.expired)} snapshots of {table.identifier}"
                     f"{kept_note}" + _leftover_note(found, planned, "would finish"))
        return res
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
    res.metadata_location, res.commit_attempts = result.metadata_location, result.attempts
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
        outcome = delete_files(table.io, doomed, max_concurrent_deletes)
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


__all__ = ["CATEGORIES", "ExpirePolicy", "expire_snapshots", "files_to_delete", "parse_older_than",
           "reachable_files"]

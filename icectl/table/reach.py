"""What a table's snapshots reach: every manifest list, manifest (v4: root, leaf, manifest DV Puffin)
and content file, by category, over any layout. Expire, remove-orphan-files and drop --purge judge
what may go by it (the Spark engine's twin, :mod:`icectl.engine.spark_reach`, joins the same
categories as DataFrames).

Categories are Spark's expire_snapshots output names (``deleted_<category>_count``) in Java's
delete order: content files, manifests, manifest lists, statistics files. Files are keyed by
:func:`~icectl.table.delete_fence.file_identity` (local: the real path), so an in-table symlink
alias and the file it names are one file.

Format v4 (layout page section 8): a v4 snapshot reaches its root manifest, the leaves its root
lists as live (v1-v4 manifests), the rows of each leaf not removed by that snapshot's manifest
DV, its live root-level data and delete files, and the Puffin files of its live manifest DVs. A
root counts as ``manifest_lists`` (it takes the manifest list's place) and a Puffin file of
manifest DVs as ``manifest_files`` (it is part of the manifest tree). A leaf's rows are judged per
snapshot: one snapshot's manifest DV never hides a row that another retained snapshot still reaches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

from icectl import progress
from icectl.codec.manifest_reader import read_manifest_list, scan_manifest_list_paths
from icectl.errors import IcectlError
from icectl.spec.manifest import DataFileContent, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table.delete_fence import check_absolute, check_snapshot_lists, file_identity
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import TreeFiles, leaf_rows, tree_files
from icectl.threads import ordered_map

# Java's delete order (content files, manifests, manifest lists, statistics files); the result's
# JSON keys are deleted_<category>_count.
CATEGORIES = ("data_files", "position_delete_files", "equality_delete_files", "manifest_files", "manifest_lists",
              "statistics_files")


# The order reachable_files adds the categories in (lists, then manifests, then content files, then
# statistics): a file reached as several keeps the category of the lowest rank (the Spark twin ranks alike).
CATEGORY_RANK = {"manifest_lists": 0, "manifest_files": 1, "data_files": 2, "position_delete_files": 2,
                 "equality_delete_files": 2, "statistics_files": 3}


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


def content_category(content: int) -> str:
    """The category of a content file by its ``content`` (DVs count as position deletes, as Spark counts them)."""
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


def manifest_paths(md: TableMetadata, s: Snapshot, io: FileIO, cache: ReadCache, *, shortcut: bool) -> list[str]:
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
        manifest_paths(md, s, io, cache, shortcut=False)  # fills cache.manifests
        todo.difference_update(listed)


def reachable_files(md: TableMetadata, snapshot_ids: Iterable[int], io: FileIO,
                    skip_manifests: set[str] | None = None,
                    cache: ReadCache | None = None, *, shortcut: bool = False,
                    whole: set[str] | None = None, contents: bool = True) -> tuple[FileSet, set[str]]:
    """Every file the given snapshots reach, and the set of their manifest paths (v4: live leaves).

    Each manifest list and each manifest is read once however many snapshots share it; manifests
    in ``skip_manifests`` are listed but not opened (their content is known to stay reachable).
    ``shortcut``: see :func:`manifest_paths`; never for the retained side. ``whole``, when given,
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
        return manifest_paths(md, s, io, cache, shortcut=shortcut)

    version = md.format_version
    check_snapshot_lists(version, snaps)  # v1-v3: no relative path is ever resolved (nor read)
    manifests: dict[str, None] = {}
    with progress.task("reading manifest lists", len(snaps)) as advance:
        for s, paths in zip(snaps, ordered_map(paths_of, snaps), strict=True):
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
        cache.contents[m.manifest_path].append((e.data_file.file_path, content_category(e.data_file.content)))
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
            out.add(t[0], content_category(t[1]))
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
    with progress.task("reading root manifests", len(todo)) as advance:
        for s, t in zip(todo, ordered_map(lambda s: tree_files(md, s, io), todo), strict=True):
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
    with progress.task("reading leaf manifests", len(todo)) as advance:
        for m, rows in zip(todo, ordered_map(lambda m: leaf_rows(md, io, m), todo), strict=True):
            cache.leaf_rows[m.manifest_path] = rows
            advance(1)
    for p, (_m, removed) in leaves.items():
        for ordinal, (path, content, live) in enumerate(cache.leaf_rows[p]):
            if live and (removed is None or ordinal not in removed):
                out.add(path, content_category(content))


def statistics_files(md: TableMetadata) -> set[str]:
    out = {s.statistics_path for s in md.statistics} | {s.statistics_path for s in md.partition_statistics}
    for p in out:
        check_absolute(p, md.format_version, "a statistics file", "the table metadata")
    return out


def files_to_delete(before: TableMetadata, expired: list[int], after: TableMetadata, io: FileIO,
                    cache: ReadCache | None = None,
                    extra: Callable[[set[str]], FileSet] | None = None) -> FileSet:
    """Reachable from the expired snapshots of ``before`` (and what ``extra(kept_manifests)`` adds:
    expire's leftovers of earlier runs) and from no snapshot of ``after``.

    The retained snapshots' manifests are opened only when something beside manifest lists is to
    go (a manifest no retained snapshot lists, its files, a statistics file): the files they list
    matter only against those. When only manifest lists go (appends: every manifest stays), the
    retained side is its lists and manifest paths, as in Java's ReachableFileCleanup, which reads
    the current manifests only when there are manifests to delete.

    The Spark engine computes the same as Spark joins (:meth:`icectl.engine.Engine.doomed_files`).
    """
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
    if extra is not None:
        for k, v in extra(kept_manifests).files.items():
            gone.files.setdefault(k, v)
    doomed = gone.minus(kept)
    if any(category != "manifest_lists" for _path, category in doomed.files.values()):
        kept, _ = reachable_files(after, retained, io, cache=cache)  # lists cached: now the manifests too
        for p in statistics_files(after):
            kept.add(p, "statistics_files")
        doomed = gone.minus(kept)
    return doomed


__all__ = ["CATEGORIES", "CATEGORY_RANK", "FileSet", "ReadCache", "content_category", "files_to_delete",
           "manifest_paths", "reachable_files", "statistics_files"]

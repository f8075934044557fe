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

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from icectl import progress
from icectl.codec.avro_native import native_enabled
from icectl.codec.manifest_live import FIELDS, live_files
from icectl.codec.manifest_reader import read_manifest_list, scan_manifest_list_paths
from icectl.errors import IcectlError
from icectl.spec.manifest import DataFileContent, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.storage.path_arrays import first_relative, member_mask
from icectl.table.delete_fence import check_absolute, check_snapshot_lists, file_identities, file_identity
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import TreeFiles, leaf_rows, tree_files
from icectl.table.scan_v4_proposal import TreeManifest
from icectl.threads import ordered_map

# Java's delete order (content files, manifests, manifest lists, statistics files); the result's
# JSON keys are deleted_<category>_count.
CATEGORIES = ("data_files", "position_delete_files", "equality_delete_files", "manifest_files", "manifest_lists",
              "statistics_files")


# The order reachable_files adds the categories in (lists, then manifests, then content files, then
# statistics): a file reached as several keeps the category of the lowest rank (the Spark twin ranks alike).
CATEGORY_RANK = {"manifest_lists": 0, "manifest_files": 1, "data_files": 2, "position_delete_files": 2,
                 "equality_delete_files": 2, "statistics_files": 3}


_CATEGORY_TYPE = pa.dictionary(pa.int8(), pa.large_string())


class FileSet:
    """Files by category; a file added several times counts once, in the category of lowest rank
    and the smallest spelling (:func:`_order`, as the Spark twin keeps it).

    Keyed by :func:`~icectl.table.delete_fence.file_identity` (local: the real path): an in-table
    symlink alias and the file it names are one file, so a retained alias keeps the file. Millions
    of content files stay Arrow columns (:meth:`add_columns`, :meth:`minus` with ``is_in``, their
    identities computed once per folder); :attr:`files`, the dict ``identity -> (path as written,
    category)``, is built when asked for (and from then on used and changed in place)."""

    def __init__(self, files: dict[str, tuple[str, str]] | None = None) -> None:
        self._files = files  # the dict form, once built or given
        self._parts: list[pa.Table] = []  # (identity or null, path, category) in the order added
        self._pending: list[tuple[str, str]] = []  # add()s since the last part
        self._table: pa.Table | None = None  # the parts, one row per identity (see _order)

    def add(self, path: str, category: str) -> None:
        if self._files is not None:
            key = file_identity(path)
            known = self._files.get(key)
            if known is None or _order(path, category) < _order(*known):
                self._files[key] = (path, category)
            return
        self._pending.append((path, category))
        self._table = None

    def add_columns(self, paths: pa.Array, categories: pa.Array, identities: pa.Array | None = None) -> None:
        """Add ``paths`` (strings) with their ``categories`` (strings or a dictionary of them), in
        order; ``identities``: their :func:`file_identity` where already known (null: not yet)."""
        if self._files is not None:
            self._parts, self._files = [self._dict_part(self._files)], None
        self._flush()
        known = (identities.cast(pa.large_string()) if identities is not None
                 else pa.nulls(len(paths), pa.large_string()))
        self._parts.append(pa.table({"identity": known,
                                     "path": paths.cast(pa.large_string()),
                                     "category": categories.cast(_CATEGORY_TYPE)}))
        self._table = None

    @staticmethod
    def _dict_part(files: dict[str, tuple[str, str]]) -> pa.Table:
        return pa.table({"identity": pa.array(list(files), pa.large_string()),
                         "path": pa.array([p for p, _c in files.values()], pa.large_string()),
                         "category": pa.array([c for _p, c in files.values()], pa.large_string()).cast(_CATEGORY_TYPE)})

    def _flush(self) -> None:
        if self._pending:
            paths, cats = zip(*self._pending, strict=True)
            self._parts.append(pa.table({"identity": pa.nulls(len(paths), pa.large_string()),
                                         "path": pa.array(paths, pa.large_string()),
                                         "category": pa.array(cats, pa.large_string()).cast(_CATEGORY_TYPE)}))
            self._pending = []

    def table(self) -> pa.Table:
        """The files as columns ``identity``, ``path``, ``category``: one row per identity (:func:`_order`)."""
        if self._files is not None:
            return self._dict_part(self._files)
        if self._table is None:
            self._table = _first_per_identity(self._rows())
        return self._table

    def _rows(self) -> pa.Table:
        """Every row added (a file added twice: twice), identities filled in; the parts become this one."""
        if self._files is not None:
            return self._dict_part(self._files)
        self._flush()
        if not self._parts:
            return self._dict_part({})
        whole = pa.concat_tables(self._parts).combine_chunks()
        ident = whole.column("identity").chunk(0) if whole.num_rows else pa.array([], pa.large_string())
        todo = pc.is_null(ident)
        if pc.any(todo).as_py():
            got = file_identities(whole.column("path").chunk(0).filter(todo))
            ident = pc.replace_with_mask(ident, todo, got)
        whole = whole.set_column(0, "identity", ident)
        self._parts = [whole]
        return whole

    @property
    def files(self) -> dict[str, tuple[str, str]]:
        if self._files is None:
            t = self.table()
            self._files = dict(zip(t.column("identity").to_pylist(),
                                   zip(t.column("path").to_pylist(), t.column("category").to_pylist(), strict=True),
                                   strict=True))
            self._parts, self._pending, self._table = [], [], None
        return self._files

    def __len__(self) -> int:
        return len(self._files) if self._files is not None else self.table().num_rows

    @property
    def paths(self) -> dict[str, str]:
        if self._files is not None:
            return dict(self._files.values())
        t = self.table()
        return dict(zip(t.column("path").to_pylist(), t.column("category").to_pylist(), strict=True))

    def by_category(self) -> dict[str, list[str]]:
        if self._files is not None:
            out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
            for p, c in self._files.values():
                out[c].append(p)
            return {c: sorted(v) for c, v in out.items()}
        t = self.table()
        cats = t.column("category").cast(pa.large_string())
        paths = t.column("path")
        # Arrow sorts UTF-8 by bytes: the order of code points, as Python sorts str.
        out = {}
        for c in CATEGORIES:
            got = paths.filter(pc.equal(cats, c)).combine_chunks()
            out[c] = pc.take(got, pc.array_sort_indices(got)).to_pylist()
        return out

    def update(self, other: FileSet) -> None:
        """Add ``other``'s files (a file in both keeps the entry :func:`_order` puts first)."""
        if self._files is not None and other._files is not None:
            for k, v in other._files.items():
                known = self._files.get(k)
                if known is None or _order(*v) < _order(*known):
                    self._files[k] = v
            return
        t = other.table()
        if t.num_rows:
            self.add_columns(t.column("path"), t.column("category"), t.column("identity"))

    def categories(self) -> set[str]:
        """The categories that hold at least one file."""
        if self._files is not None:
            return {c for _p, c in self._files.values()}
        return set(pc.unique(self.table().column("category").combine_chunks().cast(pa.large_string())).to_pylist())

    def categories_added(self) -> set[str]:
        """Every category a file was added with: :meth:`categories`, and the category of a file
        added again (a superset, without deduplicating millions of rows)."""
        if self._files is not None:
            return self.categories()
        return set(pc.unique(self._rows().column("category").combine_chunks().cast(pa.large_string())).to_pylist())

    def minus(self, other: FileSet) -> FileSet:
        """The files of this set that ``other`` does not hold (by identity)."""
        if self._files is not None and other._files is not None:
            return FileSet({k: v for k, v in self._files.items() if k not in other._files})
        # Membership needs no deduplication: the rows left are deduplicated when asked for.
        mine, theirs = self._rows(), other._rows()
        theirs_ids = theirs.column("identity").combine_chunks()
        left = mine.filter(pc.invert(member_mask(mine.column("identity").combine_chunks(), theirs_ids)))
        out = FileSet()
        out._parts = [left]
        return out


def _order(path: str, category: str) -> tuple[int, str, str]:
    """Which entry of one file a set keeps: the lowest category rank, then the smallest path (one
    file spelled two ways, ``data/x`` and ``data/../data/x``), as the Spark twin's ``min`` picks."""
    return CATEGORY_RANK.get(category, len(CATEGORY_RANK)), path, category


def _first_per_identity(t: pa.Table) -> pa.Table:
    """One row per identity: the one :func:`_order` puts first (rows otherwise in their order)."""
    ident = t.column("identity")
    codes = pc.dictionary_encode(ident).combine_chunks()
    if len(codes.dictionary) == t.num_rows:
        return t
    idx = codes.indices.to_numpy(zero_copy_only=False)
    repeated = np.bincount(idx)[idx] > 1
    single = np.flatnonzero(~repeated)
    rows = np.flatnonzero(repeated)
    # Only the files added more than once are ranked (few, usually: a file in several manifests).
    sub = t.take(pa.array(rows))
    cats = sub.column("category").combine_chunks().cast(pa.large_string())
    ranks = pa.array([CATEGORY_RANK.get(c, len(CATEGORY_RANK)) for c in pc.unique(cats).to_pylist()], pa.int32())
    rank = pc.take(ranks, pc.index_in(cats, value_set=pc.unique(cats)))
    keys = pa.table({"code": pa.array(idx[rows]), "rank": rank, "path": sub.column("path"), "category": cats})
    order = pc.sort_indices(keys, sort_keys=[("code", "ascending"), ("rank", "ascending"),
                                             ("path", "ascending"), ("category", "ascending")]).to_numpy()
    sorted_codes = idx[rows][order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_codes[1:] != sorted_codes[:-1]
    keep = np.sort(np.concatenate([single, rows[order[first]]]))
    return t.take(pa.array(keep))


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
    contents: dict[str, pa.Table] = field(default_factory=dict)  # manifest -> its live (path, category) rows
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
    _read_contents(md, io, cache, [_listing_manifest(p, md, cache) for p in wanted if p not in cache.contents])
    if wanted:
        got = pa.concat_tables([cache.contents[p] for p in wanted], promote_options="default")
        out.add_columns(got.column("path"), got.column("category"),
                        got.column("identity") if "identity" in got.column_names else None)
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


_CATEGORY_NAMES = pa.array(["data_files", "position_delete_files", "equality_delete_files"], pa.large_string())


def _contents_table(paths: pa.Array, content: pa.Array) -> pa.Table:
    """A manifest's live files as (path, category): DVs count as position deletes, as Spark counts them."""
    content = pc.fill_null(content.cast(pa.int8()), DataFileContent.DATA)  # v1 manifests have none
    codes = pc.if_else(pc.equal(content, DataFileContent.DATA), 0,
                       pc.if_else(pc.equal(content, DataFileContent.POSITION_DELETES), 1, 2)).cast(pa.int8())
    return pa.table({"path": paths.cast(pa.large_string()),
                     "category": pa.DictionaryArray.from_arrays(codes, _CATEGORY_NAMES)})


def _read_contents(md: TableMetadata, io: FileIO, cache: ReadCache, manifests: list[ManifestFile]) -> None:
    """Fill ``cache.contents`` with each manifest's live (path, category) rows, as Arrow columns
    (no Python object per entry); a relative path refuses the run, naming the first one.

    Ordinary manifests are decoded natively in batches (:func:`icectl.codec.manifest_live.live_files`);
    what that leaves (v4 tree manifests, a file it cannot decide, the native decoder off) is read
    one by one by the reader, whose errors are the ones reported."""
    version = md.format_version
    got: dict[str, pa.Table] = {}
    if native_enabled():
        plain = [m for m in manifests if not isinstance(m, TreeManifest)]
        for m, live in _batched_live(md, io, plain):
            if live is not None:
                got[m.manifest_path] = live
    rest = [m for m in manifests if m.manifest_path not in got]
    if not rest:  # every manifest batched, and no batch holds a relative path (checked on its thread)
        cache.contents.update(got)
        return
    rows: dict[str, list[tuple[str, int]]] = {m.manifest_path: [] for m in rest}
    for m, e in iter_entries(md, io, rest, fields=FIELDS, live_only=True):
        rows[m.manifest_path].append((e.data_file.file_path, int(e.data_file.content)))
    for path, found in rows.items():
        got[path] = _contents_table(pa.array([p for p, _c in found], pa.large_string()),
                                    pa.array([c for _p, c in found], pa.int8()))
    tables = [(m, got[m.manifest_path]) for m in manifests]
    if not tables:
        return
    bad = first_relative(pa.chunked_array([t.column("path") for _m, t in tables], pa.large_string()).combine_chunks())
    if bad is not None:
        for m, t in tables:  # the manifest that names it, as the one-entry check reports it
            if bad < t.num_rows:
                path = t.column("path")[bad].as_py()
                check_absolute(path, version, "a live file", f"manifest {m.manifest_path}", m.manifest_path)
            bad -= t.num_rows
    for m, t in tables:
        cache.contents[m.manifest_path] = t


_BATCH_BYTES = 16 << 20  # manifests decoded in one native read (and held at once per reading thread)
_BATCH_FILES = 512


def _batched_live(md: TableMetadata, io: FileIO, manifests: list[ManifestFile]
                  ) -> Iterator[tuple[ManifestFile, pa.Table | None]]:
    """Each manifest with its live (path, category) rows (None: left to the reader), batches read
    and decoded in threads, one per core (the decoder uses one core a read)."""
    batches: list[list[ManifestFile]] = []
    size = 0
    for m in manifests:
        if not batches or len(batches[-1]) >= _BATCH_FILES or size + m.manifest_length > _BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(m)
        size += max(0, m.manifest_length)
    ptypes = {sid: md.partition_type(sid) for sid in {m.partition_spec_id for m in manifests}}

    def decode(batch: list[ManifestFile]) -> list[pa.Table | None]:
        datas: list[bytes] = []
        for m in batch:
            try:
                datas.append(io.read(m.manifest_path))
            except IcectlError:  # the reader reports it, one by one
                return [None] * len(batch)
        found = live_files(datas, [ptypes[m.partition_spec_id] for m in batch], md.format_version)
        done = [f for f in found if f is not None]
        if not done or first_relative(pa.concat_arrays([p for p, _c in done])) is not None:
            return [None] * len(batch)  # (a relative path: the one-by-one read names the first, in order)
        # One table for the batch (the kernels' cost once), each manifest a slice of it; the paths'
        # identities computed here too, on the reading threads.
        whole = _contents_table(pa.concat_arrays([p for p, _c in done]), pa.concat_arrays([c for _p, c in done]))
        whole = whole.append_column("identity", file_identities(whole.column("path").combine_chunks()))
        out: list[pa.Table | None] = []
        at = 0
        for f in found:
            out.append(None if f is None else whole.slice(at, len(f[0])))
            at += 0 if f is None else len(f[0])
        return out

    with progress.task("reading manifests", len(manifests)) as advance:
        for batch, found in zip(batches, ordered_map(decode, batches, workers=os.cpu_count() or 2), strict=True):
            advance(len(batch))
            yield from zip(batch, found, strict=True)


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
        gone.update(extra(kept_manifests))
    doomed = gone.minus(kept)
    if doomed.categories_added() - {"manifest_lists"}:  # a superset: at worst the manifests are read
        kept, _ = reachable_files(after, retained, io, cache=cache)  # lists cached: now the manifests too
        for p in statistics_files(after):
            kept.add(p, "statistics_files")
        doomed = gone.minus(kept)
    return doomed


__all__ = ["CATEGORIES", "CATEGORY_RANK", "FileSet", "ReadCache", "content_category", "files_to_delete",
           "manifest_paths", "reachable_files", "statistics_files"]

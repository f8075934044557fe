"""The delete fence: where a command may delete files, and how a file is recognised.

Every path that deletes table files (expire-snapshots' cleanup, the metadata-log cleanup of
``write.metadata.delete-after-commit.enabled``) asks this module first.

* Identity (:func:`file_identity`): on a local disk a file is its real path, every symlink
  resolved, so an alias inside the table and the file it names are one file, and a link out of
  the table leads out of the fence. Object storage has no links: :func:`~icectl.storage.file_key`.
* Fence (:func:`table_fence`): for a table found in a folder (a table directory, a Hadoop-catalog
  table, a ``vN.metadata.json`` in its ``metadata/``) the intersection of that folder and the
  metadata's ``location``, so metadata naming a parent folder cannot widen it; for a catalog
  table without a folder of its own, the ``location``. Plus ``write.data.path`` and
  ``write.metadata.path`` (and their deprecated spellings) where set: Iceberg Java writes the
  table's own files there (its ``LocationProviders`` put data files under ``write.data.path``
  instead of ``<location>/data``). Such a folder outside the table is counted only when it cannot
  hold what is not the table's (:func:`path_property_problem`): never a file-system root or bucket,
  a parent of the table's folder or location, nor a folder holding another table's metadata.
  ``properties set`` and ``create`` refuse such values; found in metadata another tool wrote, they
  are ignored (:attr:`Fence.ignored`) and the files there are kept as outside files.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from icectl.catalog import is_metadata_file
from icectl.catalog.hadoop_layout import version_of
from icectl.errors import CorruptInputError, IcectlError, NotFoundError
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import OWN_PATH_PROPERTIES, WRITE_METADATA_PATH
from icectl.spec.snapshots import Snapshot
from icectl.storage import (
    FileIO,
    basename,
    checksum_sidecar,
    is_relative_path,
    join,
    parent,
    path_identity,
    scheme_of,
)
from icectl.storage.path_arrays import identities
from icectl.table import Table
from icectl.table.delete_tally import count_deleted

if TYPE_CHECKING:
    import pyarrow as pa

# Inside identity_cache(): path -> identity and folder -> real folder, for one operation only.
_CACHE: contextvars.ContextVar[tuple[dict[str, str], dict[str, str]] | None] = contextvars.ContextVar(
    "icectl_identity_cache", default=None)
# Inside identity_cache(): folder identity -> another table's metadata file found under it ("" none).
_TABLES: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("icectl_table_search", default=None)


@contextmanager
def identity_cache() -> Iterator[None]:
    """Remember identities for the length of one operation. ``realpath`` checks every folder of a
    path (17 us a file); with folders remembered it is one ``lstat`` (2 us), and a path seen again
    costs nothing. Never longer than one run: a folder may become a link between runs. The search
    of a ``write.data.path`` folder for other tables is remembered as long."""
    token = _CACHE.set(({}, {}))
    tables = _TABLES.set({})
    try:
        yield
    finally:
        _CACHE.reset(token)
        _TABLES.reset(tables)


def file_identity(path: str) -> str:
    """One key per physical file or folder: the real path on a local disk (links resolved, so a
    link cannot alias a file or lead out of a folder unseen), ``file_key`` elsewhere."""
    cache = _CACHE.get()
    if cache is None:
        return _identity(path, None)
    known, folders = cache
    got = known.get(path)
    if got is None:
        got = known[path] = _identity(path, folders)
    return got


def file_identities(paths: pa.Array) -> pa.Array:
    """:func:`file_identity` of each row of a string array, computed once per folder
    (:func:`icectl.storage.path_arrays.identities`; the folders resolved are shared with it)."""
    cache = _CACHE.get()
    return identities(paths, cache[1] if cache is not None else None)


def _identity(path: str, folders: dict[str, str] | None) -> str:
    return path_identity(path, folders)


def check_absolute(path: str, format_version: int, what: str, named_by: str, file: str | None = None) -> None:
    """Refuse (exit 4) a relative ``path`` in v1-v3 metadata: ``named_by`` (the manifest list,
    manifest or snapshot that names it; ``file`` its path) names ``what`` (a manifest, a data
    file...) by it. Such a path is invalid before v4 and would name a different file for every
    working directory, so the commands that delete by reachability (expire-snapshots,
    remove-orphan-files, drop --purge, on either engine) stop here instead of resolving it; icectl
    validate reports it as a finding. v4 resolves a relative path of a root or leaf row against the
    table location when it reads the row (:mod:`icectl.table.scan_v4`), so a path still relative
    here is one icectl cannot resolve (a relative ``root-manifest``, a ``file:`` path without ``/``)."""
    if is_relative_path(path):
        why = ("paths are absolute before format v4" if format_version < 4
               else "icectl resolves a v4 row's relative location against the table location, not this one")
        raise CorruptInputError(
            f"{named_by} names {what} by the relative path {path!r}: {why}, "
            "and icectl does not resolve one against the working directory", path=file,
            hint="nothing was deleted; icectl validate lists every relative path (rewrite them as absolute paths)")


def check_snapshot_lists(format_version: int, snapshots: Iterable[Snapshot]) -> None:
    """:func:`check_absolute` on the snapshots' manifest lists and a v1 snapshot's own ``manifests``:
    the first check of every reachability walk, before any of them is read."""
    for s in snapshots:
        if s.manifest_list:
            check_absolute(s.manifest_list, format_version, "its manifest list", f"snapshot {s.snapshot_id}")
        if s.root_manifest:
            check_absolute(s.root_manifest, format_version, "its root manifest", f"snapshot {s.snapshot_id}")
        for m in s.manifests or ():
            check_absolute(m, format_version, "a manifest", f"snapshot {s.snapshot_id}")


def _under(identity: str, root: str) -> bool:
    return identity.startswith(root.rstrip("/") + "/")


def table_folder(table: Table) -> str | None:
    """The folder the table was found in, or None (a catalog table: the catalog says where)."""
    return table.home_folder


@dataclass(frozen=True)
class ExtraRoot:
    """A folder outside the table's home that an own-path property (``write.data.path``, ...) names:
    inside the fence only when :func:`path_property_problem` finds nothing wrong with it (judged on
    first use: the search for other tables lists the folder)."""

    key: str
    value: str
    identity: str
    homes: tuple[str, ...]  # the table's folder, location and home (identities)
    own_metadata: tuple[str, ...]  # the table's own metadata folders (identities)
    io: FileIO | None = field(default=None, compare=False, repr=False)

    def problem(self) -> str | None:
        return _judge(self.identity, self.homes, self.own_metadata, self.io)


@dataclass(frozen=True)
class Fence:
    """The folders (as identities) a command may delete files under."""

    roots: tuple[str, ...]
    home: str | None  # the table's own root (folder ∩ location); its metadata/ holds metadata files
    extra: tuple[ExtraRoot, ...] = ()  # own-path property folders outside home, counted when sound

    def contains(self, path: str) -> bool:
        ident = file_identity(path)
        if any(_under(ident, r) for r in self.roots):
            return True
        return any(_under(ident, x.identity) and x.problem() is None for x in self.extra)

    def describe(self) -> str:
        return " or ".join(self.roots) or "(none)"

    @property
    def ignored(self) -> list[str]:
        """One line per own-path property the fence ignores, and why (lists the folders not yet judged)."""
        out = []
        for x in self.extra:
            why = x.problem()
            if why is not None:
                out.append(f"{x.key}={x.value} is ignored by the delete fence: it {why}; files there are kept")
        return out


def _intersection(a: str, b: str) -> str | None:
    """Of two folders (identities), the one inside the other, None when neither is."""
    if a == b or _under(b, a):
        return b
    if _under(a, b):
        return a
    return None


def _is_root(identity: str) -> bool:
    """A file system root or a bucket: ``/``, ``s3://bucket``."""
    if scheme_of(identity) == "file":
        return identity.rstrip("/") == ""
    return urlparse(identity).path.strip("/") == ""


def _judge(identity: str, homes: Iterable[str], own_metadata: Iterable[str], io: FileIO | None) -> str | None:
    """Why the folder ``identity`` cannot be a table's own (None: it can); see :func:`path_property_problem`."""
    if _is_root(identity):
        return "is a file system root" if scheme_of(identity) == "file" else "is a whole bucket"
    for h in homes:
        if _under(h, identity):
            return f"is a parent of the table location {h}"
    if io is None:
        return None
    found = other_table_under(io, identity, own_metadata)
    return f"holds another table's metadata ({found})" if found else None


def other_table_under(io: FileIO, folder: str, own_metadata: Iterable[str]) -> str | None:
    """The first table metadata file under ``folder`` that is not in one of the ``own_metadata``
    folders (identities): another table lives there. A folder that does not exist holds none; one
    that cannot be listed counts as holding one (its name is returned)."""
    memo = _TABLES.get()
    if memo is not None and folder in memo:
        return memo[folder] or None
    own = {o.rstrip("/") for o in own_metadata}
    found = ""
    try:
        for f in io.walk_files(folder, lambda _name: True):
            if is_metadata_file(basename(f.path)) and file_identity(parent(f.path)).rstrip("/") not in own:
                found = f.path
                break
    except NotFoundError:
        found = ""
    except IcectlError as e:
        found = f"{folder} could not be listed: {e.message}"
    if memo is not None:
        memo[folder] = found
    return found or None


def _homes(table: Table | None, md: TableMetadata, home: str | None) -> tuple[str, ...]:
    folder = table_folder(table) if table is not None else None
    return tuple(dict.fromkeys(file_identity(p) for p in (folder, md.location, home) if p))


def path_property_problem(io: FileIO | None, value: str, *, homes: Iterable[str],
                          own_metadata: Iterable[str] = ()) -> str | None:
    """Why ``value`` may not be a folder of the table's own files (``write.data.path``,
    ``write.metadata.path`` and their older spellings), or None: a file system root or a whole
    bucket, a parent of one of ``homes`` (the table's folder and location), or, with ``io``, a
    folder outside them that holds another table's metadata (a ``*.metadata.json`` outside
    ``own_metadata``). Each would let icectl delete files that are not the table's. A folder
    equal to or inside a home is always fine; so is a separate folder holding no other table
    (where Java's ``LocationProviders`` write data files under ``write.data.path``)."""
    identity = file_identity(value).rstrip("/") or "/"
    homes = [file_identity(h).rstrip("/") or "/" for h in homes]
    if any(identity == h or _under(identity, h) for h in homes):
        return None
    return _judge(identity, homes, [file_identity(o) for o in own_metadata], io)


def own_metadata_folders(table: Table | None, md: TableMetadata, home: str | None) -> tuple[str, ...]:
    """The table's own metadata folders (identities): ``<home>/metadata``, ``<location>/metadata``,
    ``write.metadata.path`` and the folder of the current metadata file."""
    paths = [join(home, "metadata") if home else None, join(md.location, "metadata") if md.location else None,
             md.properties.get(WRITE_METADATA_PATH),
             parent(table.metadata_location) if table is not None and table.metadata_location else None]
    return tuple(dict.fromkeys(file_identity(p).rstrip("/") for p in paths if p))


def table_property_problem(table: Table, value: str) -> str | None:
    """:func:`path_property_problem` for a folder to be set on ``table`` (``properties set``)."""
    home = _home(table, table.metadata)
    return path_property_problem(table.io, value, homes=_homes(table, table.metadata, home),
                                 own_metadata=own_metadata_folders(table, table.metadata, home))


def entry_inside(value: str, table: Table, entries: Iterable[tuple[str, str]]) -> str | None:
    """Of ``entries`` (name, table location: other catalog entries), the first whose location is
    ``value`` or lies under it, other than ``table``'s own; None when there is none."""
    ident = file_identity(value).rstrip("/") or "/"
    own = set(_homes(table, table.metadata, _home(table, table.metadata)))
    for name, location in entries:
        loc = file_identity(location).rstrip("/")
        if loc not in own and (loc == ident or _under(loc, ident)):
            return f"{name} ({location})"
    return None


def _home(table: Table, md: TableMetadata) -> str | None:
    folder = table_folder(table)
    candidates = [file_identity(p) for p in (folder, md.location) if p]
    if len(candidates) == 2:
        return _intersection(candidates[0], candidates[1])
    return candidates[0] if candidates else None


def table_fence(table: Table, metadata: TableMetadata | None = None) -> Fence:
    """The fence of ``table`` as ``metadata`` (default: the table's current) describes it."""
    md = metadata if metadata is not None else table.metadata
    home = _home(table, md)
    roots = [home] if home else []
    homes = _homes(table, md, home)
    own = own_metadata_folders(table, md, home)
    extra: dict[str, ExtraRoot] = {}
    for key in OWN_PATH_PROPERTIES:
        value = md.properties.get(key)
        if not value:
            continue
        ident = file_identity(value).rstrip("/") or "/"
        if home and (ident == home.rstrip("/") or _under(ident, home)):
            continue  # inside the table's own folder: nothing to add
        extra.setdefault(ident, ExtraRoot(key, value, ident, homes, own, table.io))
    return Fence(tuple(dict.fromkeys(r for r in roots if r)), home, tuple(extra.values()))


def metadata_files_to_delete(table: Table, candidates: Iterable[str], new: TableMetadata,
                             keep: Iterable[TableMetadata], keep_locations: Iterable[str]) -> list[str]:
    """Of the metadata-log ``candidates`` that dropped out of ``new``'s log, those that may be
    deleted, each as the path to delete (its identity): named like table metadata, directly in
    the table's metadata folder (``<home>/metadata`` or ``write.metadata.path``), none of
    ``keep_locations`` (the current and base files) nor in ``new``'s log, older by version number
    than they are (when versions are known), and none of the manifest lists, roots or statistics
    files any snapshot of ``keep`` names."""
    fence = table_fence(table, new)
    folders = {file_identity(p) for p in (new.properties.get(WRITE_METADATA_PATH),) if p}
    if fence.home:
        folders.add(fence.home.rstrip("/") + "/metadata")
    spared = {file_identity(p) for p in keep_locations}
    spared |= {file_identity(e.metadata_file) for e in new.metadata_log}
    for md in keep:
        for s in md.snapshots:
            spared |= {file_identity(p) for p in (s.manifest_list, s.root_manifest) if p}
        spared |= {file_identity(s.statistics_path) for s in md.statistics}
        spared |= {file_identity(s.statistics_path) for s in md.partition_statistics}
    # A version not older than the one just written is no earlier file: a concurrent writer's
    # newer version, named by a damaged log, must never go.
    newest = max((v for v in (version_of(p) for p in keep_locations) if v is not None), default=None)
    out: list[str] = []
    for path in candidates:
        ident = file_identity(path)
        version = version_of(ident)
        if newest is not None and (version is None or version >= newest):
            continue
        if (ident.endswith(".metadata.json") and ident not in spared and fence.contains(path)
                and parent(ident).rstrip("/") in folders):
            out.append(ident if scheme_of(path) == "file" else path)
    return out


def delete_with_checksum(io: FileIO, path: str) -> bool:
    """Delete ``path`` (False: it was already gone) and then its Hadoop checksum sidecar
    (``.name.crc``, as Hadoop deletes them together). Raises the storage error of the file itself;
    a sidecar that cannot be deleted is ignored: a stray checksum is litter, not a table file.
    Callers pass a path the fence has judged (on a local disk its real path)."""
    deleted = io.delete(path)
    if deleted:
        count_deleted()  # what an interrupted run reports (icectl.table.delete_tally)
    sidecar = checksum_sidecar(path)
    if sidecar is not None:
        try:
            io.delete(sidecar)
        except IcectlError:
            pass
    return deleted

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
  table's own files there.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from icectl.catalog.hadoop import is_version_file, version_of
from icectl.errors import IcectlError
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import OWN_PATH_PROPERTIES, WRITE_METADATA_PATH
from icectl.storage import FileIO, basename, checksum_sidecar, file_key, local_path, parent, scheme_of
from icectl.table import Table
from icectl.table.delete_tally import count_deleted

# Inside identity_cache(): path -> identity and folder -> real folder, for one operation only.
_CACHE: contextvars.ContextVar[tuple[dict[str, str], dict[str, str]] | None] = contextvars.ContextVar(
    "icectl_identity_cache", default=None)


@contextmanager
def identity_cache() -> Iterator[None]:
    """Remember identities for the length of one operation. ``realpath`` checks every folder of a
    path (17 us a file); with folders remembered it is one ``lstat`` (2 us), and a path seen again
    costs nothing. Never longer than one run: a folder may become a link between runs."""
    token = _CACHE.set(({}, {}))
    try:
        yield
    finally:
        _CACHE.reset(token)


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


def _identity(path: str, folders: dict[str, str] | None) -> str:
    if scheme_of(path) != "file":
        return file_key(path).rstrip("/")
    local = local_path(path)
    folder, name = os.path.split(local)
    if folders is None or name in ("", ".", ".."):
        return os.path.realpath(local)
    real_folder = folders.get(folder)
    if real_folder is None:
        real_folder = folders[folder] = os.path.realpath(folder)
    candidate = os.path.join(real_folder, name)
    return os.path.realpath(candidate) if os.path.islink(candidate) else candidate


def _under(identity: str, root: str) -> bool:
    return identity.startswith(root.rstrip("/") + "/")


def table_folder(table: Table) -> str | None:
    """The folder the table was found in, or None (a catalog table: the catalog says where)."""
    address = table.address
    if address.table_dir is not None:
        return address.table_dir
    if address.catalog is None:
        # A bare vN.metadata.json in a metadata/ folder is committed to that folder's table
        # (icectl.table.commit.operations_for): the same folder is its home.
        directory = parent(address.metadata_location)
        if is_version_file(basename(address.metadata_location)) and basename(directory) == "metadata":
            return parent(directory)
    return None


@dataclass(frozen=True)
class Fence:
    """The folders (as identities) a command may delete files under."""

    roots: tuple[str, ...]
    home: str | None  # the table's own root (folder ∩ location); its metadata/ holds metadata files

    def contains(self, path: str) -> bool:
        ident = file_identity(path)
        return any(_under(ident, r) for r in self.roots)

    def describe(self) -> str:
        return " or ".join(self.roots) or "(none)"


def _intersection(a: str, b: str) -> str | None:
    """Of two folders (identities), the one inside the other, None when neither is."""
    if a == b or _under(b, a):
        return b
    if _under(a, b):
        return a
    return None


def table_fence(table: Table, metadata: TableMetadata | None = None) -> Fence:
    """The fence of ``table`` as ``metadata`` (default: the table's current) describes it."""
    md = metadata if metadata is not None else table.metadata
    folder = table_folder(table)
    location = md.location
    candidates = [file_identity(p) for p in (folder, location) if p]
    home: str | None
    if len(candidates) == 2:
        home = _intersection(candidates[0], candidates[1])
    else:
        home = candidates[0] if candidates else None
    roots = [home] if home else []
    roots += [file_identity(md.properties[k]) for k in OWN_PATH_PROPERTIES if md.properties.get(k)]
    return Fence(tuple(dict.fromkeys(r for r in roots if r)), home)


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

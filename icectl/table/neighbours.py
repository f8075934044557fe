"""Neighbouring tables: the other tables that may share files with a table, and the files they reach.

Iceberg lets two catalog entries point at one table (``register`` of another entry's metadata, a
file-system table also registered in a SQL catalog) and lets a table live inside another one's
folder. Every command that deletes table files (expire-snapshots, remove-orphan-files,
``drop --purge``, the metadata-log cleanup) asks this module first, and never deletes what a
neighbour reaches.

Neighbours of a table (:func:`find_neighbours`), other than the table itself (the same catalog
entry, or the same table folder):

* every entry of every configured catalog whose metadata has the same ``table-uuid``, is the same
  metadata file, or whose ``location`` overlaps the table's (equal, nested inside it, containing it);
* the file-system table (``metadata/vN.metadata.json``) at the table's location and at each folder
  above it (containing tables);
* for a table found by its folder and not in a configured warehouse, the tables of the warehouse it
  lives in (``<warehouse>/<namespace>/<table>``, walked a few levels deep);
* found when asked about particular files (:meth:`Neighbours.shared`): a folder between the
  table's home and a file to delete that holds a table of its own (nested folder tables).

Only metadata JSON is read to find them; what a neighbour reaches is read only for actual
neighbours and only when asked: every snapshot's manifest list or root, every manifest (and v4
leaf, manifest-DV Puffin file) and every file any of their entries names (DELETED ones too: more
is kept, never less), statistics files, the current metadata file, its log and version hint. A
manifest that no longer exists reaches nothing; any other read failure refuses (exit 6).

A catalog that cannot be listed (a server down, a database that cannot be opened) is never taken
for an empty one: :class:`~icectl.errors.RefusedError` (exit 6), so a destructive command deletes
nothing. A catalog that does not exist (a warehouse folder or SQLite file that is not there) holds
no tables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from icectl.catalog import SERVER_WRITTEN_TYPES, Catalog, open_catalog, walk_tables
from icectl.catalog.hadoop_layout import VERSION_HINT, current_version, is_version_file
from icectl.config import Config, active_config
from icectl.errors import AccessDeniedError, CorruptInputError, IcectlError, NotFoundError, RefusedError
from icectl.spec.manifest import ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import OWN_PATH_PROPERTIES
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO, basename, join, parent, scheme_of
from icectl.table import Table, read_table_metadata
from icectl.table.delete_fence import file_identity, table_fence, table_folder
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import leaf_rows, tree_files
from icectl.threads import READ_WORKERS

WAREHOUSE_DEPTH = 3  # folders below a folder table's warehouse walked for tables
WAREHOUSE_FOLDERS = 2000  # at most this many folders of it listed


def _under(ident: str, root: str) -> bool:
    return ident.startswith(root.rstrip("/") + "/")


def _overlap(a: str, b: str) -> str | None:
    """How folder ``a`` (a neighbour's location) lies to ``b`` (ours): same, nested, containing, or None."""
    a, b = a.rstrip("/"), b.rstrip("/")
    if a == b:
        return "the same location"
    if _under(a, b):
        return "a location nested inside this table's"
    if _under(b, a):
        return "a location containing this table's"
    return None


@dataclass
class Neighbour:
    """Another table that may share files with this one."""

    name: str  # catalog.namespace.table, or its folder
    aliases: frozenset[str]  # what --allow-shared accepts for it
    metadata_location: str
    metadata: TableMetadata
    io: FileIO
    why: str
    nested_folder: str | None = None  # identity of its folder when it lies inside this table's home
    _reach: set[str] | None = None
    notes: list[str] = field(default_factory=list)

    def reach(self) -> set[str]:
        """The identities of every file it reaches (computed once)."""
        if self._reach is None:
            self._reach = reach_of(self.metadata, self.metadata_location, self.io, self.notes)
        return self._reach

    def metadata_files(self) -> set[str]:
        """Its current metadata file and its log (no manifests read)."""
        md = self.metadata
        return {file_identity(p) for p in (self.metadata_location, *(e.metadata_file for e in md.metadata_log))}


def reach_of(md: TableMetadata, metadata_location: str, io: FileIO, notes: list[str] | None = None) -> set[str]:
    """Identities of every file ``md`` reaches, conservatively (see the module doc). A manifest list,
    root or manifest that is missing or cannot be decoded reaches nothing (no reader gets past it);
    a storage failure raises RefusedError: what it names cannot be told."""
    out: set[str] = set()

    def add(path: str | None) -> None:
        if path:
            out.add(file_identity(path))
            if md.location and not path.startswith("/") and "://" not in path and ":" not in path.split("/")[0]:
                out.add(file_identity(join(md.location, path)))  # a relative path: either reading of it

    def guarded(what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except (NotFoundError, CorruptInputError) as e:
            if notes is not None:
                notes.append(f"{what}: {e.one_line()}")
        except IcectlError as e:
            raise RefusedError(f"cannot read {what} of a table that may share files with this one "
                               f"({e.one_line()}); nothing deleted", path=e.path,
                               hint="run again when the storage answers") from None

    add(metadata_location)
    for e in md.metadata_log:
        add(e.metadata_file)
    if md.location:
        add(join(md.location, "metadata", VERSION_HINT))
    for st in md.statistics:
        add(st.statistics_path)
    for pst in md.partition_statistics:
        add(pst.statistics_path)
    manifests: dict[str, ManifestFile] = {}
    leaves: dict[str, ManifestFile] = {}

    def snapshot(snap: Snapshot) -> None:
        if snap.root_manifest:
            tree = tree_files(md, snap, io)
            for m, _dv in tree.leaves:
                leaves.setdefault(m.manifest_path, m)
            for path in (*(p for p, _c in tree.files), *tree.manifest_dv_files):
                add(path)
        else:
            for m in manifests_of(md, snap, io):
                manifests.setdefault(m.manifest_path, m)

    for snap in md.snapshots:
        add(snap.manifest_list)
        add(snap.root_manifest)
        guarded(f"snapshot {snap.snapshot_id}", lambda s=snap: snapshot(s))  # type: ignore[misc]
    for path in (*manifests, *leaves):
        add(path)
    def leaf(m: ManifestFile) -> None:
        for path, _content, _live in leaf_rows(md, io, m):
            add(path)

    for m in leaves.values():
        guarded(m.manifest_path, lambda m=m: leaf(m))  # type: ignore[misc]

    def entries(batch: list[ManifestFile]) -> None:
        for _m, e in iter_entries(md, io, batch, fields={"file_path"}, workers=READ_WORKERS):
            add(e.data_file.file_path)

    try:
        entries(list(manifests.values()))
    except IcectlError:
        for m in manifests.values():  # one by one, so one bad manifest hides no other's files
            guarded(m.manifest_path, lambda m=m: entries([m]))  # type: ignore[misc]
    return out


def _table_dir_at(io: FileIO, folder: str) -> str | None:
    """The current metadata file of the file-system table in ``folder``, or None."""
    try:
        return current_version(io, folder)[1]
    except (NotFoundError, AccessDeniedError):
        # Denied: a credential that may not list (a REST catalog's vended one covers the table's own
        # files) gets 403 for an object that is not there, as S3 answers; a table icectl cannot
        # read is none it could know of, and a writer of one would need that access too.
        return None


@dataclass
class Neighbours:
    """The neighbours of one table (see the module doc), found once per command."""

    table: Table
    metadata: TableMetadata
    home: str | None  # identity of the table's own folder
    tables: list[Neighbour] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _keys: set[str] = field(default_factory=set)
    _probed: dict[str, bool] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [n.name for n in self.tables]

    def add(self, key: str, n: Neighbour) -> None:
        if key not in self._keys:
            self._keys.add(key)
            self.tables.append(n)

    # -- what they reach

    def shared(self, paths: Iterable[str], allow: Iterable[str] = ()) -> dict[str, str]:
        """Of ``paths`` (files about to be deleted), those a neighbour reaches or that lie in a nested
        neighbour's folder: path -> the neighbour's name. Neighbours named in ``allow`` (any alias)
        are left out. First looks for nested folder tables above the files (inside the home)."""
        paths = list(paths)
        self._probe_nested(paths)
        allowed = set(allow)
        out: dict[str, str] = {}
        for n in self.tables:
            if n.aliases & allowed:
                continue
            reach = n.reach()
            for p in paths:
                if p in out:
                    continue
                ident = file_identity(p)
                if ident in reach or (n.nested_folder is not None and _under(ident, n.nested_folder)):
                    out[p] = n.name
        return out

    def nested_folders(self) -> dict[str, str]:
        """Identity of each neighbour folder inside the home -> its name."""
        return {n.nested_folder: n.name for n in self.tables if n.nested_folder}

    def _probe_nested(self, paths: list[str]) -> None:
        """Folder tables between the home and each path (the home excluded)."""
        if self.home is None:
            return
        home = self.home.rstrip("/")
        io = self.table.io
        for p in paths:
            ident = file_identity(p)
            if not _under(ident, home):
                continue
            folder = parent(ident).rstrip("/")
            while _under(folder, home):
                known = self._probed.get(folder)
                if known is None:
                    found = self._probed[folder] = self._probe_folder(io, folder)
                    known = found
                if known:
                    break
                folder = parent(folder).rstrip("/")

    def _probe_folder(self, io: FileIO, folder: str) -> bool:
        if basename(folder) == "metadata":
            return False
        location = _table_dir_at(io, folder)
        if location is None:
            return False
        self.add_folder_table(folder, location, "a table folder nested inside this table's location", nested=True)
        return True

    def add_folder_table(self, folder: str, location: str, why: str, *, nested: bool = False) -> None:
        ident = file_identity(folder).rstrip("/")
        if ident in self._keys or ident == _own_folder(self.table):
            return
        try:
            md = read_table_metadata(self.table.io, location)
        except IcectlError as e:
            raise RefusedError(f"cannot tell which files the table at {folder} reaches ({e.one_line()}); "
                               "it may share files with this table; nothing deleted", path=location,
                               hint="repair or remove that table, then run the command again") from None
        self.add(ident, Neighbour(folder, frozenset({folder, ident, folder.rstrip("/")}), location, md,
                                  self.table.io, why, nested_folder=ident if nested else None))


def _own_folder(table: Table) -> str | None:
    folder = table_folder(table)
    return file_identity(folder).rstrip("/") if folder else None


def _self_key(table: Table) -> str | None:
    a = table.address
    if a.catalog is not None and a.name is not None:
        return f"{a.catalog}\0{'.'.join((*a.namespace, a.name))}"
    return None


def find_neighbours(table: Table, metadata: TableMetadata | None = None, metadata_location: str | None = None,
                    config: Config | None = None, *, catalogs: bool = True) -> Neighbours:
    """The neighbours of ``table`` as ``metadata`` (default: its current) describes it. Raises
    RefusedError when a configured catalog cannot be listed."""
    md = metadata if metadata is not None else table.metadata
    mine = file_identity(metadata_location or table.metadata_location)
    fence = table_fence(table, md)
    home = fence.home
    location = file_identity(md.location).rstrip("/") if md.location else home
    out = Neighbours(table, md, home)
    own = _own_folder(table)
    if own:
        out._keys.add(own)
    me = _self_key(table)
    config = config or active_config()

    our_roots = {x for x in (home, location, *_own_paths(md)) if x}

    def judge(n_md: TableMetadata, n_location: str) -> str | None:
        if md.table_uuid and n_md.table_uuid == md.table_uuid:
            return "the same table-uuid"
        if file_identity(n_location) == mine:
            return "the same metadata file"
        if n_md.location:
            theirs = file_identity(n_md.location)
            for ours in our_roots:
                how = _overlap(theirs, ours)
                if how:
                    return how
        for theirs in _own_paths(n_md):  # write.data.path and the like: where it writes its own files
            if any(_overlap(theirs, ours) for ours in our_roots):
                return "a write path overlapping this table's folders"
        return None

    if catalogs:
        for name in sorted(config.catalogs):
            for key, n in _catalog_entries(config, name, table.io, me, own, judge, home, out.notes):
                out.add(key, n)
    # File-system tables around the location: at it (a folder table this entry was registered from),
    # and in each folder above it (containing tables).
    for folder in _folders_up(location or ""):
        # At the location itself only a file-system table (vN.metadata.json) is another table: the
        # NNNNN-<uuid>.metadata.json files there are this catalog table's own.
        found = _table_dir_at(table.io, folder)
        if found is not None and folder == location and file_identity(found) == mine and _server_owned(table, config):
            continue  # a REST server that names its own files vN.metadata.json (SeaweedFS): this table itself
        if found is not None and (folder != location or is_version_file(basename(found))):
            out.add_folder_table(folder, found, "a table folder at or above this table's location")
    if own and catalogs and not _in_configured_warehouse(config, own):
        for folder in _warehouse_tables(table.io, parent(parent(table_folder(table) or "")), own):
            found = _table_dir_at(table.io, folder)
            if found is None:
                continue
            try:
                n_md = read_table_metadata(table.io, found)
            except IcectlError as e:
                out.notes.append(f"{folder}: {e.one_line()}")
                continue
            why = judge(n_md, found)
            if why:
                out.add_folder_table(folder, found, why, nested=_under(file_identity(folder), home or "\0"))
    return out


def _server_owned(table: Table, config: Config) -> bool:
    """Whether a catalog server writes the table's metadata files itself (REST): then a
    ``vN.metadata.json`` at its location that is its current file is its own. Not so for the
    pointer-swap catalogs (SQL, Glue), where such a file is a folder table registered twice."""
    if table.catalog is not None and table.catalog.server_writes_metadata:
        return True
    name = table.address.catalog
    entry = config.catalogs.get(name) if name is not None else None
    return entry is not None and entry.type in SERVER_WRITTEN_TYPES


def _own_paths(md: TableMetadata) -> list[str]:
    """Identities of the folders ``write.data.path`` and the like name (absolute ones only)."""
    return [file_identity(v).rstrip("/") for k in OWN_PATH_PROPERTIES
            if (v := md.properties.get(k)) and (v.startswith("/") or "://" in v or v.startswith("file:"))]


def _folders_up(location: str) -> Iterator[str]:
    """``location`` and every folder above it (to the file-system or bucket root)."""
    current = location.rstrip("/")
    seen = set()
    while current and current not in seen and not current.endswith(":/") and current != "/":
        seen.add(current)
        yield current
        nxt = parent(current).rstrip("/")
        if nxt == current or nxt.endswith((":", ":/", "://")) or not nxt:
            return
        current = nxt


def _in_configured_warehouse(config: Config, folder: str) -> bool:
    for cc in config.catalogs.values():
        if cc.type == "hadoop" and cc.warehouse:
            wh = file_identity(os.path.abspath(cc.warehouse) if scheme_of(cc.warehouse) == "file"
                               and "://" not in cc.warehouse else cc.warehouse).rstrip("/")
            if _under(folder, wh):
                return True
    return False


def _warehouse_tables(io: FileIO, warehouse: str, own: str) -> Iterator[str]:
    """Table folders below ``warehouse`` (bounded walk; a table folder is not entered)."""
    if not warehouse or warehouse in ("/", "."):
        return
    todo = [(warehouse.rstrip("/"), 0)]
    listed = 0
    while todo and listed < WAREHOUSE_FOLDERS:
        folder, depth = todo.pop()
        listed += 1
        try:
            names = io.list_names(folder)
        except IcectlError:
            continue
        for n in sorted(names):
            if n.startswith((".", "_")) or n == "metadata":
                continue
            sub = join(folder, n)
            try:
                meta = io.list_names(join(sub, "metadata")) if io.is_dir(sub) else None
            except IcectlError:
                meta = None
            if meta is None:
                continue
            if any(m.endswith((".metadata.json", ".metadata.json.gz")) for m in meta):
                if file_identity(sub).rstrip("/") != own:
                    yield sub
            elif depth + 1 < WAREHOUSE_DEPTH:
                todo.append((sub, depth + 1))


def _catalog_entries(config: Config, name: str, io: FileIO, me: str | None, own: str | None,
                     judge: Callable[[TableMetadata, str], str | None], home: str | None,
                     notes: list[str]) -> Iterator[tuple[str, Neighbour]]:
    try:
        catalog: Catalog = open_catalog(config, io, name)
        idents = walk_tables(catalog)
    except NotFoundError:
        return  # a warehouse folder or database that does not exist holds no tables
    except IcectlError as e:
        raise RefusedError(
            f"cannot tell which tables share files with this one: catalog '{name}' cannot be listed "
            f"({e.one_line()}); nothing deleted",
            hint=f"bring catalog '{name}' back and run again, or leave it out of the config (--config) for this "
                 "run if it cannot hold a table sharing these files") from None
    for ident in idents:
        full = ".".join(ident)
        key = f"{name}\0{full}"
        if key == me:
            continue
        ops = catalog.table_operations(ident[:-1], ident[-1])
        if ops.table_dir is not None and own and file_identity(ops.table_dir).rstrip("/") == own:
            continue  # this table itself, found through a warehouse
        try:
            current = ops.refresh()
        except IcectlError as e:
            try:
                pointer = ops.current_pointer()  # a pointer catalog's entry, read without the metadata
            except IcectlError:
                pointer = None
            if pointer and home and (_under(file_identity(pointer), home) or file_identity(pointer) == home):
                raise RefusedError(f"cannot read {name}.{full} ({e.one_line()}), whose metadata lies in this table's "
                                   "location: it may share files with it; nothing deleted", path=pointer,
                                   hint=f"repair it, or drop its entry ('icectl drop {name}.{full}')") from None
            notes.append(f"{name}.{full} could not be read ({e.one_line()}); not checked for shared files")
            continue
        why = judge(current.metadata, current.location)
        if why is None:
            continue
        folder = ops.table_dir
        aliases = {f"{name}.{full}", full}
        if folder:
            aliases.add(folder)
        nested = None
        if current.metadata.location and home and _under(file_identity(current.metadata.location), home):
            nested = file_identity(current.metadata.location).rstrip("/")
        table_key = file_identity(folder).rstrip("/") if folder else key
        yield table_key, Neighbour(f"{name}.{full}", frozenset(aliases), current.location, current.metadata, ops.io,
                                   why, nested_folder=nested)


def metadata_neighbours(metadata: TableMetadata, metadata_location: str, io: FileIO,
                        config: Config | None = None) -> tuple[list[str], list[str]]:
    """For ``register``: the configured catalog entries whose metadata is ``metadata_location`` or has
    the same table-uuid (their names), and notes on catalogs that could not be checked."""
    config = config or active_config()
    mine = file_identity(metadata_location)
    exact: list[str] = []
    found: list[str] = []
    notes: list[str] = []
    for name in sorted(config.catalogs):
        try:
            catalog = open_catalog(config, io, name)
            idents = walk_tables(catalog)
        except NotFoundError:
            continue
        except IcectlError as e:
            notes.append(f"catalog '{name}' could not be checked ({e.one_line()})")
            continue
        for ident in idents:
            try:
                current = catalog.table_operations(ident[:-1], ident[-1]).refresh()
            except IcectlError:
                continue
            if file_identity(current.location) == mine:
                exact.append(f"{name}.{'.'.join(ident)}")
            elif metadata.table_uuid and current.metadata.table_uuid == metadata.table_uuid:
                found.append(f"{name}.{'.'.join(ident)}")
    # The entries at this very metadata file come first (a warning names the first few): copies
    # that only share the table-uuid (clones, replicas) may be many.
    found = exact + found
    folder = parent(parent(metadata_location))
    if basename(parent(metadata_location)) == "metadata":
        at = _table_dir_at(io, folder)
        if at is not None:
            try:
                theirs = read_table_metadata(io, at)
            except IcectlError:
                theirs = None
            if file_identity(at) == mine:
                found.insert(len(exact), folder)
            elif theirs is not None and metadata.table_uuid and theirs.table_uuid == metadata.table_uuid:
                found.append(folder)
    return found, notes


__all__ = ["Neighbour", "Neighbours", "find_neighbours", "metadata_neighbours", "reach_of"]

"""`icectl register` and `icectl drop [--purge]`: a table enters or leaves its catalog.

Register (Spark's ``register_table`` procedure, Java's ``BaseMetastoreCatalog.registerTable``):
refused when the name exists; the metadata file is read and must be sound (it parses, Java would
load it, and every branch and tag head's manifest list or root is readable) before anything is
registered; then ``ops.commit(null, metadata)``: a SQL or Glue catalog points at the given file
(no copy), a REST server is asked to (``POST .../register``), a Hadoop warehouse gets the file as
the new table directory's ``v1.metadata.json``. A missing namespace is what Java makes of it: Hadoop
and SQL (non-strict JDBC) catalogs accept it, Glue and REST refuse (exit 3).

Drop (Java's ``dropTable``; ``--purge`` as Spark's ``purgeTable``): the catalog entry goes, only
while it still names the metadata this run read (a commit in between is a conflict: replanned,
nothing deleted). With ``--purge``, refused up front when ``gc.enabled=false``; the files are
planned before the drop (unreadable metadata or manifests: exit 4, nothing dropped) and deleted
only after the entry is gone: everything the last metadata reaches (Spark's
DeleteReachableFiles: live content files of every snapshot, manifests, manifest lists and v4 roots,
leaves and manifest-DV Puffins, statistics and partition-statistics files, every metadata file of
the metadata log, recursively through older logs, the current one and the version hint), and only
inside the table location (:func:`icectl.table.delete_fence.table_fence`; files outside are kept
and reported), then the emptied folders of the table, up to its location. Nothing outside it.

A file-system table (a Hadoop warehouse, a table directory) has no catalog entry apart from its
metadata files, and Java's HadoopCatalog deletes the whole directory even without purge: icectl
refuses a drop without ``--purge`` there (exit 6), and with it deletes the version hint and
version files first (the entry), then the rest as above; files in the directory that the table
does not reach (orphans of failed writes) stay and are not listed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from icectl.catalog import Catalog, is_metadata_file
from icectl.catalog.hadoop_layout import VERSION_HINT, check_table_dir_name, version_of
from icectl.catalog.operations import CommitFailedError, Current, TableOperations
from icectl.errors import (
    CommitConflictError,
    CorruptInputError,
    ExitCode,
    IcectlError,
    NotFoundError,
    RefusedError,
    UsageError,
)
from icectl.results import UNSET, CommandResult, Unset
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import GC_ENABLED, WRITE_METADATA_PATH
from icectl.storage import FileIO, basename, join, local_path, parent, scheme_of
from icectl.table import Table, read_table_metadata
from icectl.table.commit import operations_for
from icectl.table.delete_fence import Fence, file_identity, identity_cache, table_fence
from icectl.table.delete_tally import deleting
from icectl.table.deletes import delete_file_set, file_set_items
from icectl.table.neighbours import find_neighbours, metadata_neighbours
from icectl.table.reach import FileSet, reachable_files, statistics_files
from icectl.table.scan import manifests_of
from icectl.table.write_guard import check_metadata_home, check_metadata_sound, check_table_home

# What a purge deletes, in Java's order: content files, manifests, manifest lists, statistics
# (the categories of expire-snapshots), then the metadata JSON files and the version hint.
DROP_CATEGORIES = ("data_files", "position_delete_files", "equality_delete_files", "manifest_files",
                   "manifest_lists", "statistics_files", "metadata_files")


@dataclass(kw_only=True)
class RegisterResult(CommandResult):
    """``icectl register``: Spark's ``register_table`` (whose output is the last three counts)."""

    view: ClassVar[str] = "register_table"

    table: str  # catalog.namespace.table
    dry_run: bool
    metadata_file: str  # the file given, as read
    format_version: int
    table_uuid: str | None
    current_snapshot_id: int | None
    total_records_count: int | None  # the current snapshot's summary (None for an empty table); Spark's names
    total_data_files_count: int | None
    would_write: list[str] | Unset = UNSET  # dry run
    metadata_location: str | Unset = UNSET  # registered: what the catalog points at now
    warning: str | Unset = UNSET  # the metadata is already another catalog entry's (they share every file)


@dataclass(kw_only=True)
class DropResult(CommandResult):
    """``icectl drop [--purge]``. ``deleted`` counts per :data:`DROP_CATEGORIES`."""

    view: ClassVar[str] = "drop_table"

    table: str
    dry_run: bool
    purge: bool
    metadata_location: str  # the table's last metadata file
    would_drop: str | Unset = UNSET  # dry run: the catalog entry that would go
    would_delete: dict[str, list[str]] | Unset = UNSET  # dry run, --purge: paths per category
    dropped: bool | Unset = UNSET  # done: the catalog entry is gone
    kept_external_files: list[str] | Unset = UNSET  # --purge: reached, but outside the table location
    already_gone: int | Unset = UNSET  # done, --purge
    failures: list[str] | Unset = UNSET  # done, --purge: files that could not be deleted
    removed_directories: list[str] | Unset = UNSET  # done, --purge: emptied folders of the table removed
    shared_with: list[str] | Unset = UNSET  # --purge --allow-shared: the named tables whose files went too
    deleted: dict[str, int] = field(default_factory=dict)  # count per category (dry run: would delete)



DROP_ATTEMPTS = 3  # a commit between planning and dropping: plan again on the new metadata
MAX_LOG_DEPTH = 1000  # older metadata logs followed (Spark's recursive metadataFileLocations)


# --------------------------------------------------------------------------- register


def _split(identifier: str | Sequence[str]) -> tuple[tuple[str, ...], str]:
    parts = identifier.split(".") if isinstance(identifier, str) else list(identifier)
    if len(parts) < 2 or any(not p for p in parts):
        raise UsageError(f"'{'.'.join(parts)}' is not namespace.table",
                         hint="register names a catalog table: [catalog.]namespace.table")
    for part in parts:
        check_table_dir_name(part)
    return tuple(parts[:-1]), parts[-1]


def _absolute(metadata_file: str) -> str:
    text = metadata_file.strip()
    if not text:
        raise UsageError("cannot register an empty metadata file location")
    if scheme_of(text) == "file":
        return os.path.abspath(os.path.expanduser(local_path(text)))
    return text


def read_sound_metadata(io: FileIO, location: str) -> TableMetadata:
    """The metadata at ``location`` if it can be registered: it parses, Iceberg Java would load it
    (:func:`check_metadata_sound`), it has a location, and the manifest list or root of every
    branch and tag head (the current snapshot included) can be read. NotFoundError (exit 3) for a
    missing file, CorruptInputError (exit 4) for anything damaged or missing that it names."""
    md = read_table_metadata(io, location)
    check_metadata_sound(md, location)
    if not md.location:
        raise CorruptInputError(f"table metadata {location} has no location", path=location)
    heads = {s.snapshot_id: s for s in (md.snapshot_for_ref(r) for r in md.refs) if s is not None}
    current = md.current_snapshot()
    if current is not None:
        heads[current.snapshot_id] = current
    for snap in heads.values():
        try:
            manifests_of(md, snap, io)
        except NotFoundError as e:
            raise CorruptInputError(f"table metadata {location}: snapshot {snap.snapshot_id} names a file that "
                                    f"does not exist ({e.message})", path=e.path or location,
                                    hint="register a metadata file whose snapshots' files are all there") from None
    return md


def register_table(catalog: Catalog, identifier: str | Sequence[str], metadata_file: str, *,
                   dry_run: bool = False) -> RegisterResult:
    """Register the table whose metadata is ``metadata_file`` as ``namespace.table`` of ``catalog``."""
    namespace, name = _split(identifier)
    full = f"{catalog.name}.{'.'.join((*namespace, name))}"
    location = _absolute(metadata_file)
    if not is_metadata_file(location):
        raise UsageError(f"{metadata_file} is not a table metadata file (*.metadata.json)",
                         hint="give the table's current metadata file, e.g. .../metadata/v3.metadata.json")
    ops = catalog.table_operations(namespace, name)
    md = read_sound_metadata(catalog.io, location)
    check_metadata_home(location, md)
    _check_register_target(catalog, ops, namespace, full, md)
    snap = md.current_snapshot()
    summary = snap.summary if snap is not None else {}
    res = RegisterResult(table=full, dry_run=dry_run, metadata_file=location, format_version=md.format_version,
                         table_uuid=md.table_uuid, current_snapshot_id=snap.snapshot_id if snap else None,
                         total_records_count=_int(summary.get("total-records")),
                         total_data_files_count=_int(summary.get("total-data-files")))
    others, _unchecked = metadata_neighbours(md, location, catalog.io)
    if others:
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        res.warning = (f"{location} is already the metadata of {', '.join(others[:5])}{more} (the same table-uuid "
                       "or file): these entries share files; expire-snapshots, remove-orphan-files and drop --purge "
                       "of one keep the files the others reach")
        res.warnings.append(res.warning)
    if dry_run:
        res.would_write = [ops.describe_register(full, location, md)]
        res.title = f"Would register {full} at {location}"
        return res
    registered, _ = ops.register(location, md)
    res.metadata_location = registered
    res.title = f"Registered {full} at {registered}"
    return res


def _check_register_target(catalog: Catalog, ops: TableOperations, namespace: tuple[str, ...], full: str,
                           md: TableMetadata) -> None:
    """What the catalog will refuse, checked before anything is written (so a dry run says it too)."""
    try:
        ops.refresh()
    except NotFoundError:
        pass
    else:
        raise RefusedError(f"table {full} already exists", hint="choose another name, or drop the table first")
    if ops.entry_is_metadata_files and WRITE_METADATA_PATH in md.properties:
        raise RefusedError(f"{WRITE_METADATA_PATH} is set in the metadata: a file-system table cannot keep its "
                           "metadata elsewhere", hint="register it in a SQL, REST or Glue catalog")
    highest = ops.max_format_version
    if highest is not None and md.format_version > highest:
        raise RefusedError(f"cannot register a format version {md.format_version} table in catalog {catalog.name}: "
                           f"it holds format versions up to {highest} (the REST protocol has no representation "
                           "of v4 root manifests)")
    if ops.register_checks_namespace:
        catalog.list_tables(namespace)  # Glue and REST: NotFoundError for a missing namespace, as Java


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- drop


class _Plan:
    """What a purge deletes, split by the fence: content files (expire's categories) and metadata."""

    def __init__(self) -> None:
        self.content = FileSet()
        self.metadata: dict[str, str] = {}  # identity -> path as written
        self.kept: dict[str, str] = {}
        self.home: str | None = None  # the fence's home: emptied folders are removed up to it
        self.ignored: list[str] = []  # own-path properties the fence ignores (write.data.path=/, ...)

    def by_category(self) -> dict[str, list[str]]:
        out = self.content.by_category()
        out["metadata_files"] = sorted(self.metadata.values())
        return {c: out[c] for c in DROP_CATEGORIES}

    def fence(self, fence: Fence, metadata_folders: set[str]) -> None:
        """Set apart what lies outside ``fence``, and every "metadata file" that is not one: a log
        entry of damaged metadata may name any file, but only a metadata file (or the version
        hint) directly in the table's metadata folder is deleted as one."""
        self.home = fence.home
        for key, (path, _c) in list(self.content.files.items()):
            if not fence.contains(path):
                self.kept[key] = self.content.files.pop(key)[0]
        for key, path in list(self.metadata.items()):
            name = basename(key)
            in_folder = parent(key).rstrip("/") in metadata_folders
            is_metadata = in_folder and (is_metadata_file(name) or name == VERSION_HINT)
            if not fence.contains(path) or not is_metadata:
                self.kept[key] = self.metadata.pop(key)
        if self.kept:
            self.ignored = fence.ignored


def metadata_files(current: Current, io: FileIO) -> list[str]:
    """The current metadata file and every file of its metadata log, and (as Spark's recursive
    ``metadataFileLocations``) of the logs of the oldest readable earlier file, and so on."""
    out = dict.fromkeys([current.location, *(e.metadata_file for e in current.metadata.metadata_log)])
    log = [e.metadata_file for e in current.metadata.metadata_log]
    for _ in range(MAX_LOG_DEPTH):
        older: list[str] | None = None
        for path in log:  # Java reads the first entry that can be read
            try:
                older = [e.metadata_file for e in read_table_metadata(io, path).metadata_log]
                break
            except IcectlError:
                continue
        new = [p for p in older or () if p not in out]
        if not new:
            break
        out.update(dict.fromkeys(new))
        log = new
    return list(out)


def plan_purge(table: Table, current: Current, io: FileIO) -> _Plan:
    """Every file the table's last metadata reaches, the ones outside the table location set apart."""
    md = current.metadata
    plan = _Plan()
    try:
        plan.content, _ = reachable_files(md, [s.snapshot_id for s in md.snapshots], io)
    except NotFoundError as e:
        raise CorruptInputError(f"cannot plan the purge of {table.identifier}: {e.message}; nothing was dropped",
                                path=e.path, hint="'icectl validate --deep' shows what is missing") from None
    for p in sorted(statistics_files(md)):
        plan.content.add(p, "statistics_files")
    for p in metadata_files(current, io):
        plan.metadata.setdefault(file_identity(p), p)
    if md.location:
        hint = join(md.location, "metadata", VERSION_HINT)
        if io.exists(hint):
            plan.metadata.setdefault(file_identity(hint), hint)
    for key in [k for k in plan.content.files if k in plan.metadata]:
        plan.metadata.pop(key)  # a file named twice (a manifest list in the log?) counts once
    _refuse_newer_metadata(table, current, plan, io)
    fence = table_fence(table, md)
    folders = {file_identity(p).rstrip("/") for p in (md.properties.get(WRITE_METADATA_PATH),
                                                       parent(current.location)) if p}
    if fence.home:
        folders.add(fence.home.rstrip("/") + "/metadata")
    plan.fence(fence, folders)
    return plan


def _refuse_newer_metadata(table: Table, current: Current, plan: _Plan, io: FileIO) -> None:
    """Refuse when the table's metadata folder holds a version newer than the one being dropped that
    the drop does not know: another catalog entry or a file-system table at the same location
    committed after it (a table registered twice), and its files would go with this purge."""
    mine = version_of(current.location)
    if mine is None or not current.metadata.location:
        return
    folder = join(current.metadata.location, "metadata")
    try:
        names = io.list_names(folder)
    except IcectlError:
        return  # no folder to look at: nothing newer there
    for name in sorted(names):
        theirs = version_of(name) if is_metadata_file(name) else None
        path = join(folder, name)
        if theirs is not None and theirs > mine and file_identity(path) not in plan.metadata:
            raise RefusedError(
                f"cannot purge {table.identifier}: {path} is a newer metadata version than the one being "
                f"dropped ({current.location}); another catalog entry or a file-system table at "
                f"{current.metadata.location} uses these files; nothing was dropped",
                path=path, hint="drop without --purge, or purge the table that owns the newer version")


def drop_table(table: Table, *, purge: bool = False, dry_run: bool = False, max_concurrent_deletes: int = 8,
               allow_shared: Sequence[str] = ()) -> DropResult:
    """Drop ``table`` from its catalog; with ``purge``, then delete every file it reaches. A purge
    is refused when another table (:mod:`icectl.table.neighbours`) reaches a file it would delete,
    unless ``allow_shared`` names that table: its files are then deleted too."""
    if max_concurrent_deletes < 1:
        raise UsageError("--max-concurrent-deletes must be 1 or more")
    if allow_shared and not purge:
        raise UsageError("--allow-shared is for --purge: a drop without it deletes no file")
    with identity_cache():
        return _drop(table, purge=purge, dry_run=dry_run, workers=max_concurrent_deletes,
                     allow_shared=tuple(allow_shared))


def _refuse_shared(table: Table, current: Current, plan: _Plan, allow: tuple[str, ...]) -> tuple[list[str], str]:
    """Refuse the purge when another table reaches a file it would delete (unless ``allow`` names
    every such table). Returns the allowed tables that do share files, and a warning about them."""
    paths = [p for p, _c in plan.content.files.values()] + list(plan.metadata.values())
    neighbours = find_neighbours(table, current.metadata, current.location)
    blocked = neighbours.shared(paths, allow=allow)
    if blocked:
        names = sorted(set(blocked.values()))
        why = next(n.why for n in neighbours.tables if n.name == names[0])
        example = next(p for p, n in sorted(blocked.items()) if n == names[0])
        count = sum(1 for n in blocked.values() if n == names[0])
        raise RefusedError(
            f"cannot purge {table.identifier}: {names[0]} ({why}) reaches {count} of the files it would delete "
            f"(e.g. {example})"
            + (f", and {len(names) - 1} other table(s) too ({', '.join(names[1:4])})" if len(names) > 1 else "")
            + "; nothing was dropped",
            path=example, hint=f"drop without --purge to keep every file, or add --allow-shared {names[0]} to "
                               "delete them anyway (that table then breaks)")
    idents = {file_identity(p) for p in paths} if allow else set()
    allowed = sorted({n.name for n in neighbours.tables if n.aliases & set(allow) and not idents.isdisjoint(n.reach())})
    unknown = [a for a in allow if not any(a in n.aliases for n in neighbours.tables)]
    warning = (f"--allow-shared {', '.join(unknown)}: no such table shares files with {table.identifier}"
               if unknown else "")
    if allowed:
        warning = "; ".join(w for w in (warning, f"deleting files that {', '.join(allowed)} still reach"
                                                 " (--allow-shared): that table breaks") if w)
    return allowed, warning


def _drop(table: Table, *, purge: bool, dry_run: bool, workers: int, allow_shared: tuple[str, ...]) -> DropResult:
    check_table_home(table)  # a copy's folder: dropping or purging it would act on the metadata of another table
    ops = operations_for(table)
    if ops.entry_is_metadata_files and not purge:
        raise RefusedError(
            f"{table.identifier} is a file-system table: it has no catalog entry apart from its metadata "
            "files, so dropping it without --purge would leave every file in place and no way back (Spark's "
            "Hadoop catalog deletes the whole directory instead)",
            hint=f"icectl drop --purge {table.identifier} deletes the table's files (--dry-run lists them)")
    for attempt in range(DROP_ATTEMPTS):
        current = ops.refresh()
        io = ops.io
        md = current.metadata
        res = DropResult(table=table.identifier, dry_run=dry_run, purge=purge, metadata_location=current.location)
        plan: _Plan | None = None
        if purge:
            if not GC_ENABLED.parse(md.properties):
                raise RefusedError(f"cannot purge {table.identifier}: gc.enabled is false (deleting its files "
                                   "may corrupt other tables that share them); nothing was dropped",
                                   hint="drop it without --purge, or set gc.enabled=true if no other table "
                                        "uses its files")
            check_metadata_sound(md, current.location)
            plan = plan_purge(table, current, io)
            allowed, warning = _refuse_shared(table, current, plan, allow_shared)
            if allowed:
                res.shared_with = allowed
            if warning:
                res.warnings.append(warning)
        if dry_run:
            return _dry_run(res, table, ops, current, plan)
        try:
            entry = ops.drop(current)
        except CommitFailedError:
            if attempt == DROP_ATTEMPTS - 1:
                raise
            continue
        res.dropped = True
        if plan is None:
            res.title = f"Dropped {table.identifier} (its files are kept)"
            return res
        return _purge(res, table.identifier, plan, entry, io, workers)
    raise AssertionError("unreachable")


def drop_unreadable_entry(catalog: Catalog, identifier: str | Sequence[str], why: IcectlError, *,
                          dry_run: bool = False) -> DropResult:
    """Drop, without purging, the entry of a SQL or Glue catalog table whose current metadata file
    cannot be read (``why``: the error loading it gave), as Java's catalogs drop without reading
    the metadata. Only the entry goes, and only while it still names that same file; every file
    stays. Other catalogs (a file-system table's entry is its metadata files; REST loads through
    its server) raise ``why`` itself."""
    namespace, name = _split(identifier)
    ops = catalog.table_operations(namespace, name)
    location = ops.current_pointer()  # NotFoundError when there is no such table at all
    if location is None:  # no pointer to drop: a file-system table's entry is its files, REST loads via its server
        raise why
    full = ".".join((*namespace, name))
    res = DropResult(table=full, dry_run=dry_run, purge=False, metadata_location=location)
    res.warnings = [f"the metadata of {full} cannot be read ({why.one_line()}); only its catalog entry "
                    "is dropped, every file is kept"]
    if dry_run:
        res.would_drop = f"the catalog entry of {full} (pointing at {location})"
        res.title = f"Would drop {full} (its files are kept)"
        return res
    if not ops.delete_pointer(location):
        raise CommitConflictError(f"table {full} was moved on by another writer meanwhile (it no longer points "
                                  f"at {location}); nothing was dropped", hint="load it and run drop again")
    res.dropped = True
    res.title = f"Dropped {full} (its files are kept)"
    return res


def _dry_run(res: DropResult, table: Table, ops: TableOperations, current: Current, plan: _Plan | None) -> DropResult:
    res.would_drop = ops.describe_entry(table.identifier, current.location)
    if plan is None:
        res.title = f"Would drop {table.identifier} (its files are kept)"
        return res
    res.would_delete = plan.by_category()
    res.deleted = {c: len(v) for c, v in res.would_delete.items()}
    res.kept_external_files = sorted(plan.kept.values())
    res.warnings += plan.ignored
    res.title = f"Would drop {table.identifier} and delete {sum(res.deleted.values())} files" + _kept_note(plan)
    return res


def _purge(res: DropResult, identifier: str, plan: _Plan, entry: list[str], io: FileIO, workers: int) -> DropResult:
    """After the entry is gone: delete the planned files, then the folders they leave empty."""
    done = {file_identity(p) for p in entry}
    for key in done:
        plan.metadata.pop(key, None)
    planned = len(entry) + len(plan.content.files) + len(plan.metadata)
    with deleting(planned, f"files of {identifier}",
                  f"{identifier} is dropped already, so drop cannot find the rest again: they stay under "
                  f"{plan.home or 'the table location'}, named by no table any more") as tally:
        tally.add(len(entry))  # the catalog entry's own files (a file-system table's versions), gone first
        metadata = FileSet({k: (p, "metadata_files") for k, p in plan.metadata.items()})
        outcome = delete_file_set(io, plan.content, workers=workers, extra=file_set_items(metadata),
                                  extra_categories=("metadata_files",))
    deleted = dict(outcome.deleted)
    deleted["metadata_files"] += len(entry)
    res.deleted = {c: deleted.get(c, 0) for c in DROP_CATEGORIES}
    res.already_gone = outcome.already_gone
    res.failures = outcome.failures
    res.kept_external_files = sorted(plan.kept.values())
    res.warnings += plan.ignored
    res.removed_directories = _remove_empty_folders([*plan.content.files, *plan.metadata, *done], plan.home)
    res.title = f"Dropped {identifier} and deleted {sum(res.deleted.values())} files" + _kept_note(plan)
    res.exit_code = ExitCode.STORAGE if res.failures else ExitCode.OK
    return res


def _remove_empty_folders(identities: Iterable[str], home: str | None) -> list[str]:
    """Remove the local folders the deleted files were in, and their parents, while empty and inside
    ``home`` (the table's own root, itself included); never a folder outside it."""
    if home is None or not home.startswith("/"):
        return []  # object storage has no folders
    root = home.rstrip("/")
    folders = {parent(k) for k in identities if k.startswith(root + "/")}
    removed: list[str] = []
    for folder in sorted(folders, key=lambda f: -f.count("/")):
        current = folder.rstrip("/")
        while current == root or current.startswith(root + "/"):
            try:
                names = os.listdir(current)
            except OSError:
                break
            if [n for n in names if not n.startswith(".") or not n.endswith(".crc")]:
                break
            try:
                for n in names:  # only Hadoop checksum sidecars are left: litter of deleted files
                    os.remove(os.path.join(current, n))
                os.rmdir(current)
            except OSError:
                break
            removed.append(current)
            if current == root:
                break
            current = parent(current).rstrip("/")
    return removed


def _kept_note(plan: _Plan) -> str:
    if not plan.kept:
        return ""
    return f"; kept {len(plan.kept)} file(s) outside the table location"


__all__ = ["drop_table", "drop_unreadable_entry", "metadata_files", "plan_purge", "read_sound_metadata",
           "register_table"]

"""`icectl drop [--purge]`: a table leaves its catalog.

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

from icectl.catalog import Catalog, is_metadata_file, table_name_parts
from icectl.catalog.hadoop_layout import VERSION_HINT, version_of
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
from icectl.spec.properties import GC_ENABLED, WRITE_METADATA_PATH
from icectl.storage import FileIO, basename, join, parent
from icectl.table import Table, read_table_metadata
from icectl.table.commit import operations_for
from icectl.table.delete_fence import Fence, file_identity, identity_cache, table_fence
from icectl.table.delete_tally import deleting
from icectl.table.deletes import delete_file_set, file_set_items
from icectl.table.neighbours import find_neighbours
from icectl.table.reach import FileSet, reachable_files, statistics_files
from icectl.table.write_guard import check_metadata_sound, check_table_home

# What a purge deletes, in Java's order: content files, manifests, manifest lists, statistics
# (the categories of expire-snapshots), then the metadata JSON files and the version hint.
DROP_CATEGORIES = ("data_files", "position_delete_files", "equality_delete_files", "manifest_files",
                   "manifest_lists", "statistics_files", "metadata_files")


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
    namespace, name = table_name_parts(identifier)
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


__all__ = ["DROP_CATEGORIES", "DropResult", "drop_table", "drop_unreadable_entry", "metadata_files", "plan_purge"]

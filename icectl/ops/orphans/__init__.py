"""`icectl remove-orphan-files`: delete the files under a table's location that no metadata reaches.

Iceberg Java's DeleteOrphanFiles (Spark's ``remove_orphan_files`` procedure), with its safety:

* **Valid files** (:func:`valid_files`): everything any snapshot of the table reaches (manifest
  lists or v4 roots, manifests and leaves, live data, delete and DV Puffin files, Puffin files of
  manifest DVs; :func:`icectl.ops.expire.reachable_files` over ALL snapshots, every manifest read
  in full: an unreadable one stops the run, it is never taken for empty), the statistics and
  partition-statistics files, the current metadata file and every one in its metadata log, and
  ``<location>/metadata/version-hint.text``. A Hadoop checksum sidecar ``.<name>.crc`` of a valid
  file is valid.
* **Listing** (:func:`icectl.storage.walk_files`): recursive under ``location``; names starting
  with ``_`` or ``.`` are hidden (neither listed nor entered), except partition folders of a
  partition field whose name starts with one of them (``_bucket=3``): Java's
  ``PartitionAwareHiddenPathFilter``. A file is a candidate only when modified strictly before
  the cutoff: a younger file may belong to a commit in flight.
* **Matching** (Java's ``FileURI``): a listed file and a valid file are the same when their URI
  paths are equal; then their schemes (after ``equal_schemes``, default ``s3a,s3n -> s3``) and
  authorities (after ``equal_authorities``) must agree too (a valid file without one agrees with
  any). Equal paths with a differing scheme or authority are a *prefix mismatch*: mode ``error``
  (default) deletes nothing and names them, ``ignore`` keeps such files, ``delete`` deletes them.
  Where Java joins row by row, a listed file here is valid when ANY valid spelling of its path
  agrees (Java's ``delete`` mode may delete a file another spelling keeps valid).
* **Beyond Java**: a local file that IS a valid file under another name (an in-table symbolic
  link) is valid; symbolic links are never deleted and never followed out of the table; only
  files inside the table's own folder (the delete fence's home, :func:`icectl.table.delete_fence.table_fence`;
  not a ``write.data.path`` elsewhere, which other tables may share) are deleted, so ``--location``
  must lie inside it; after listing the table is read again and, if
  another writer committed meanwhile, its new files are valid too; ``max_deletes`` refuses a
  larger run; a cutoff less than 24 hours ago is refused unless ``allow_recent``.
* **Spark engine** (v1-v3 tables): the valid files are a Spark DataFrame
  (:func:`icectl.engine.spark_reach.valid_frame`: manifests decoded on the executors); the listing
  stays on the driver (the same walk, hidden names and cutoff) and is joined with them on Spark
  (:func:`icectl.engine.spark_reach.orphan_candidates`): a listed file whose spelling equals a valid
  one's exactly is valid; every other one is judged here by the same :class:`Matcher`, indexed with
  the valid files it can ask for (same URI path, same local identity, the file of a ``.crc``), so
  the verdicts are the local ones. ``--executor-deletes``: :func:`delete_orphan` runs as Spark tasks.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from icectl import progress
from icectl.engine import Engine, active, using
from icectl.errors import IcectlError, RefusedError, StorageError, UsageError
from icectl.ops.orphans.matching import (
    FileURI,
    Matcher,
    ValidFiles,
    file_uri,
    listed_lookup,
    parse_equal_map,
    valid_lookup,
)
from icectl.ops.orphans.result import RemoveOrphanFilesResult
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import GC_ENABLED
from icectl.storage import FileIO, ListedFile, join, local_path, scheme_of
from icectl.table import Table
from icectl.table.commit import operations_for
from icectl.table.delete_fence import (
    Fence,
    check_absolute,
    delete_with_checksum,
    file_identity,
    identity_cache,
    table_fence,
)
from icectl.table.delete_tally import deleting
from icectl.table.deletes import delete_checked
from icectl.table.neighbours import find_neighbours
from icectl.table.reach import ReadCache, reachable_files, statistics_files
from icectl.table.write_guard import check_metadata_sound, check_writable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DAY_MS = 24 * 3600 * 1000
DEFAULT_OLDER_THAN_MS = 3 * DAY_MS  # Java's default cutoff: three days ago
EQUAL_SCHEMES_DEFAULT: dict[str, str] = {"s3a": "s3", "s3n": "s3"}
PREFIX_MISMATCH_MODES = ("error", "ignore", "delete")
VERSION_HINT = "version-hint.text"


# --------------------------------------------------------------------------- valid files


def valid_files(table: Table, metadata: TableMetadata | None = None, metadata_location: str | None = None,
                cache: ReadCache | None = None) -> ValidFiles:
    """The files ``metadata`` (default: the table's current) keeps valid; see the module doc.
    Raises on any read failure: a manifest that cannot be read is never taken for empty."""
    md = metadata if metadata is not None else table.metadata
    location = metadata_location or table.metadata_location
    out = ValidFiles(metadata_location=location)
    reached, _ = reachable_files(md, [s.snapshot_id for s in md.snapshots], table.io, cache=cache)
    out.columns = reached.table()
    for p, kind in extra_valid_files(table, md, location):
        out.add(p, kind)
    return out


def extra_valid_files(table: Table, md: TableMetadata, location: str) -> list[tuple[str, str]]:
    """The valid files no snapshot reaches: statistics files, the metadata files, the version hint."""
    out = [(p, "statistics_files") for p in sorted(statistics_files(md))]
    out.append((location, "metadata_files"))
    for entry in md.metadata_log:  # a relative one would be valid only against the working directory
        check_absolute(entry.metadata_file, md.format_version, "a metadata file", "the metadata log")
        out.append((entry.metadata_file, "metadata_files"))
    out.append((join(md.location or table.address.table_dir or "", "metadata", VERSION_HINT), "metadata_files"))
    return out


def _hidden_filter(md: TableMetadata) -> Callable[[str], bool]:
    """Java's PartitionAwareHiddenPathFilter: ``_x`` and ``.x`` are hidden, except names starting
    with ``<field>=`` for a partition field (of any spec) whose name starts with ``_`` or ``.``."""
    allowed = tuple(sorted({f"{f.name}=" for spec in md.partition_specs for f in spec.fields
                            if f.name.startswith(("_", "."))}))

    def accept(name: str) -> bool:
        if allowed and name.startswith(allowed):
            return True
        return not name.startswith(("_", "."))

    return accept


# --------------------------------------------------------------------------- the operation


@dataclass
class _Found:
    listed: int = 0
    too_young: int = 0
    orphans: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    conflicts: set[tuple[str, str]] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    other_tables: dict[str, str] = field(default_factory=dict)  # folder holding another table -> why


def _is_metadata_json(path: str) -> bool:
    head, name = posixpath.split(path)
    return posixpath.basename(head) == "metadata" and name.endswith((".metadata.json", ".metadata.json.gz"))


def _other_tables(listed: list[ListedFile], home: str, entries: Mapping[str, str]) -> dict[str, str]:
    """The folders among ``listed`` that hold a table other than the one at ``home``: their own
    ``metadata/*.metadata.json``, or another catalog entry's location (``entries``: identity -> name)."""
    out: dict[str, str] = {}
    for f in listed:
        if _is_metadata_json(f.path):
            folder = posixpath.dirname(posixpath.dirname(f.path))
            if file_identity(folder).rstrip("/") != home.rstrip("/"):
                out.setdefault(folder, "holds a table (metadata/*.metadata.json)")
    for ident, name in entries.items():
        out.setdefault(ident, f"the location of {name}")
    # Only the outermost of nested ones.
    return {d: why for d, why in out.items()
            if not any(d != o and d.startswith(o.rstrip("/") + "/") for o in out)}


def _inside_any(path: str, folders: list[str]) -> bool:
    if not folders:
        return False
    ident = file_identity(path)
    return any(path.startswith(d.rstrip("/") + "/") or ident.startswith(d.rstrip("/") + "/") for d in folders)


def _scan(io: FileIO, location: str, md: TableMetadata, matcher: Matcher, older_than_ms: int,
          *, home: str, entries: Mapping[str, str], spark_valid: DataFrame | None = None) -> _Found:
    """List ``location`` and judge each file. Folders holding another table (:func:`_other_tables`)
    are set apart first: none of their files is judged. With ``spark_valid`` (the Spark engine's
    valid files) the listing (on the driver: the shared walk) is joined with them on Spark first,
    and only the files that are not plainly valid are judged here, by the same matcher and rules."""
    found = _Found()
    accept = _hidden_filter(md)
    listed: list[ListedFile] = []
    with progress.task(f"listing {location}") as advance:
        for f in io.walk_files(location, accept):
            found.listed += 1
            advance(1)
            listed.append(f)
    found.other_tables = _other_tables(listed, home, entries)
    skip = list(found.other_tables)
    listed = [f for f in listed if not _inside_any(f.path, skip)]
    young = [f for f in listed if f.mtime_ms >= older_than_ms]
    found.too_young += len(young)
    listed = [f for f in listed if f.mtime_ms < older_than_ms]
    if spark_valid is not None and listed:
        listed = _spark_candidates(spark_valid, matcher, listed)
    for f, verdict in zip(listed, matcher.judge_all([f.path for f in listed]), strict=True):
        _judge(f, verdict, found)
    return found


def _spark_candidates(valid: DataFrame, matcher: Matcher, listed: list[ListedFile]) -> list[ListedFile]:
    """Of ``listed``, those the Spark join leaves to judge; ``matcher`` then indexes every valid
    file that judging them asks for (and only those)."""
    blank = Matcher(matcher.equal_schemes, matcher.equal_authorities)  # what the executors need of it
    todo, related = active().orphan_candidates(valid, [(f.path, f.mtime_ms, f.is_link) for f in listed],
                                               valid_lookup=valid_lookup, listed_lookup=listed_lookup, shared=blank)
    matcher.index(ValidFiles(dict.fromkeys(related, "valid")))
    return [ListedFile(p, mtime, 0, link) for p, mtime, link in todo]


def _valid(table: Table, md: TableMetadata, location: str, cache: ReadCache,
           frames: list[DataFrame]) -> tuple[int, DataFrame | None, ValidFiles | None]:
    """The valid files: (count, the Spark engine's frame of them (added to ``frames``), or the local
    ValidFiles)."""
    got = active().valid_frame(md, table.io, lambda: extra_valid_files(table, md, location))
    if got is not None:  # the engine keeps them as its own set (Spark: a persisted frame)
        frame, count = got
        frames.append(frame)
        return count, frame, None
    valid = valid_files(table, md, location, cache=cache)
    return len(valid), None, valid


def _judge(f: ListedFile, judged: tuple[str, tuple[str, str] | None], found: _Found) -> None:
    verdict, conflict = judged
    if verdict == "valid":
        return
    if verdict == "mismatch":
        assert conflict is not None
        found.conflicts.add(conflict)
        found.mismatched.append(f.path)
    elif f.is_link:
        found.links.append(f.path)  # never deleted: removing a link loses nothing, following one might
    else:
        found.orphans.append(f.path)


def _inside(fence: Fence, location: str) -> bool:
    ident = file_identity(location).rstrip("/")
    return any(ident == r.rstrip("/") or ident.startswith(r.rstrip("/") + "/") for r in fence.roots)


def remove_orphan_files(table: Table, *, older_than_ms: int | None = None, location: str | None = None,
                        prefix_mismatch_mode: str = "error", equal_schemes: Mapping[str, str] | None = None,
                        equal_authorities: Mapping[str, str] | None = None, max_deletes: int | None = None,
                        max_concurrent_deletes: int = 8, dry_run: bool = False, allow_recent: bool = False,
                        now_ms: int | None = None, engine: Engine | None = None) -> RemoveOrphanFilesResult:
    """Find the files under ``location`` (default: the table location) that no metadata of the
    table reaches and that were last modified before ``older_than_ms`` (default: 3 days ago);
    delete them unless ``dry_run``. See the module doc for the rules. ``engine``: where the valid
    files are judged and files deleted (None: :func:`icectl.engine.active`); it is the run's engine
    below (its set algebra and deletes: :class:`icectl.engine.Engine`)."""
    with identity_cache(), using(engine or active()):
        return _remove_orphan_files(
            table, older_than_ms=older_than_ms, location=location, mode=prefix_mismatch_mode,
            equal_schemes=equal_schemes, equal_authorities=equal_authorities, max_deletes=max_deletes,
            workers=max_concurrent_deletes, dry_run=dry_run, allow_recent=allow_recent, now_ms=now_ms)


def _check_options(table: Table, *, older_than_ms: int, now: int, mode: str, workers: int,
                   max_deletes: int | None, allow_recent: bool) -> None:
    if mode not in PREFIX_MISMATCH_MODES:
        raise UsageError(f"--prefix-mismatch-mode {mode!r}: expected one of {', '.join(PREFIX_MISMATCH_MODES)}")
    if workers < 1:
        raise UsageError(f"--max-concurrent-deletes must be 1 or more, not {workers}")
    if max_deletes is not None and max_deletes < 0:
        raise UsageError("--max-deletes must be 0 or more")
    if not GC_ENABLED.parse(table.metadata.properties):
        raise RefusedError("cannot delete orphan files: gc.enabled is false on this table (its files may "
                           "belong to other tables too)", hint="set gc.enabled=true if this table owns its files")
    if now - older_than_ms < DAY_MS and not allow_recent:
        raise RefusedError(
            "refusing to remove orphan files younger than 24 hours: a commit in flight (a Spark job, a "
            "streaming write) has written files it has not committed yet, and they would be deleted",
            hint="use --older-than 1d or more; --allow-recent overrides when no other writer is running")


def _listed_folder(table: Table, location: str | None) -> tuple[str, Fence, str]:
    """The table's home, the fence of what may be deleted, and the folder to list (``--location``
    or the table's location), refused when it is outside the home.

    Only the table's own folder (its directory ∩ its location): unlike expire, which deletes only
    files the table referenced, this deletes files it does NOT reference, so a write.data.path
    folder elsewhere (the delete fence's other roots, possibly shared with other tables) is out."""
    home = table_fence(table).home
    if home is None:
        raise RefusedError(f"cannot tell the folder of table {table.identifier} (its metadata names no location)",
                           hint="address the table by its directory")
    fence = Fence((home,), home)
    where = location or table.metadata.location or home
    if where and scheme_of(where) == "file" and not where.startswith("file:"):
        where = os.path.abspath(where)  # listed paths are compared with the metadata's absolute ones
    if not _inside(fence, where):
        raise RefusedError(f"--location {where} is outside the table location {fence.describe()}: "
                           "icectl deletes only the table's own files", hint="give a folder inside the table")
    return home, fence, where


def _refuse_mismatches(found: _Found, where: str) -> None:
    pairs = ", ".join(f"{a} (metadata) vs {b} (listed)" for a, b in sorted(found.conflicts))
    raise RefusedError(
        f"cannot tell whether {len(found.mismatched)} file(s) under {where} are orphans: the metadata names "
        f"them with another scheme or authority: {pairs}; nothing deleted",
        hint="declare equal spellings with --equal-schemes/--equal-authorities (e.g. s3a=s3), or "
             "--prefix-mismatch-mode ignore to keep those files (delete only if sure they differ)")


def _remove_orphan_files(table: Table, *, older_than_ms: int | None, location: str | None, mode: str,
                         equal_schemes: Mapping[str, str] | None, equal_authorities: Mapping[str, str] | None,
                         max_deletes: int | None, workers: int, dry_run: bool, allow_recent: bool,
                         now_ms: int | None) -> RemoveOrphanFilesResult:
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    cutoff = older_than_ms if older_than_ms is not None else now - DEFAULT_OLDER_THAN_MS
    _check_options(table, older_than_ms=cutoff, now=now, mode=mode, workers=workers, max_deletes=max_deletes,
                   allow_recent=allow_recent)
    check_writable(table)
    md = table.metadata
    home, fence, where = _listed_folder(table, location)
    # The tables that may share files with this one (a catalog that cannot be listed refuses here).
    neighbours = find_neighbours(table)
    matcher = Matcher({**EQUAL_SCHEMES_DEFAULT, **(equal_schemes or {})}, dict(equal_authorities or {}))
    cache = ReadCache()
    frames: list[DataFrame] = []  # the Spark engine's valid files, cached until the judging is done
    try:
        valid_count, frame, valid = _valid(table, md, table.metadata_location, cache, frames)
        if valid is not None:
            matcher.index(valid)
        found = _scan(table.io, where, md, matcher, cutoff, home=home, entries=neighbours.nested_folders(),
                      spark_valid=frame)
        # Another writer may have committed while we listed: what it reaches is valid too.
        fresh = operations_for(table).refresh()
        if fresh.location != table.metadata_location:
            check_metadata_sound(fresh.metadata, fresh.location)
            _, frame, valid = _valid(table, fresh.metadata, fresh.location, cache, frames)
            left = set(found.orphans)
            if frame is not None and found.orphans:  # those the join leaves; the rest are plainly valid
                left = {f.path for f in _spark_candidates(frame, matcher, [ListedFile(p, 0, 0) for p in found.orphans])}
            elif valid is not None:
                matcher.index(valid)
            left_orphans = [p for p in found.orphans if p in left]
            found.orphans = [p for p, (verdict, _c) in zip(left_orphans, matcher.judge_all(left_orphans), strict=True)
                             if verdict != "valid"]
    except IcectlError as e:
        e.message = f"{e.message}; no file deleted (the table's files could not all be read)"
        raise
    finally:
        for df in frames:
            df.unpersist()
    res = RemoveOrphanFilesResult(
        table=table.identifier, dry_run=dry_run, location=where, older_than_ms=cutoff,
        prefix_mismatch_mode=mode, listed_file_count=found.listed, too_young_count=found.too_young,
        valid_file_count=valid_count)
    if found.conflicts and mode == "error":
        _refuse_mismatches(found, where)
    orphans = sorted(found.orphans + (found.mismatched if mode == "delete" else []))
    outside = [p for p in orphans if not fence.contains(p)]
    if outside:
        orphans = [p for p in orphans if fence.contains(p)]
    shared = neighbours.shared(orphans)  # another table reaches them: never orphans
    orphans = [p for p in orphans if p not in shared]
    res.skipped_table_folders = sorted(found.other_tables)
    res.kept_shared_files = sorted(shared)
    notes = (f"; skipped {len(found.other_tables)} folder(s) holding other tables" if found.other_tables else "") + \
        (f"; kept {len(shared)} file(s) other tables reach" if shared else "")
    res.kept_prefix_mismatch = sorted(found.mismatched) if mode == "ignore" else []
    res.kept_links = sorted(found.links)
    res.kept_external_files = sorted(outside)
    if max_deletes is not None and len(orphans) > max_deletes:
        raise RefusedError(f"remove-orphan-files would delete {len(orphans)} files, more than --max-deletes "
                           f"{max_deletes}; nothing deleted", hint="check the list with --dry-run, then raise "
                                                                   "--max-deletes")
    res.orphan_file_locations = orphans
    if dry_run:
        res.dry.plan([], orphans)
        res.title = f"Would delete {len(orphans)} orphan file(s) of {table.identifier} under {where}{notes}"
        return res
    with deleting(len(orphans), "orphan files", "run the same command again to delete the rest"):
        outcome = delete_checked([("orphans", p) for p in orphans], categories=("orphans",), shared=(table.io, fence),
                                 delete=delete_orphan, workers=workers, description="deleting orphan files",
                                 executor=active().remote_deletes())
        deleted, gone, failures = outcome.total, outcome.already_gone, outcome.failures
    res.deleted_count, res.already_gone, res.failures = deleted, gone, failures
    res.title = f"Deleted {deleted} orphan file(s) of {table.identifier} under {where}{notes}"
    if failures:
        res.exit_code = StorageError.exit_code
    return res


def delete_orphan(shared: tuple[FileIO, Fence], path: str) -> bool | str:
    """Delete one orphan (and its Hadoop checksum sidecar): True, False (already gone) or why not.
    Module-level: ``--executor-deletes`` runs it as Spark tasks."""
    io, fence = shared
    if scheme_of(path) == "file":
        # Judged again right before the delete, links resolved afresh (not from the run's
        # cache): a folder turned into a link since the listing must not lead out of the table.
        real = os.path.realpath(local_path(path))
        if os.path.islink(local_path(path)) or not any(real.startswith(r.rstrip("/") + "/") for r in fence.roots):
            return f"{path}: not deleted: it now leads outside the table location"
    try:
        return delete_with_checksum(io, path)
    except IcectlError as e:
        return e.one_line()


__all__ = ["DEFAULT_OLDER_THAN_MS", "EQUAL_SCHEMES_DEFAULT", "PREFIX_MISMATCH_MODES", "FileURI", "Matcher",
           "ValidFiles", "file_uri", "parse_equal_map", "remove_orphan_files", "valid_files"]

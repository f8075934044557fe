"""Optimistic-concurrency commits: a change, applied to the freshest metadata, swapped in atomically, retried.

A change is a :class:`~icectl.spec.updates.TableChange`: requirements and metadata updates in the
REST spec's vocabulary, applied by :func:`icectl.spec.updates.apply_updates` (Java's
``TableMetadata.Builder``); ``build`` returns one per attempt, nothing else is committed.

:func:`commit` is ``SnapshotProducer.commit``'s loop: refresh, ``build(base)``, then the table's
operations (:mod:`icectl.catalog.operations`) check the requirements against that base, apply the
updates, write and swap atomically; on a conflict (another writer swapped first, or a requirement
no longer holds) it waits (exponential backoff with jitter, ``commit.retry.*`` table properties as
``Tasks``), refreshes and builds again, so every retry re-checks the requirements against the
fresh base. After a success it deletes metadata files that dropped out of the metadata-log when
``write.metadata.delete-after-commit.enabled`` is true (``CatalogUtil.deleteRemovedMetadataFiles``).
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from icectl.catalog import Catalog, folder_table_operations, looks_like_path, open_catalog, split_identifier
from icectl.catalog.hadoop_layout import check_table_dir_name, is_version_file
from icectl.catalog.operations import CommitFailedError, CommitStateUnknownError, LocalCommits, TableOperations
from icectl.config import Config, load_config
from icectl.errors import CommitConflictError, IcectlError, RefusedError, UsageError
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import (
    COMMIT_MAX_RETRY_WAIT_MS,
    COMMIT_MIN_RETRY_WAIT_MS,
    COMMIT_NUM_RETRIES,
    COMMIT_TOTAL_RETRY_TIME_MS,
    METADATA_DELETE_AFTER_COMMIT,
)
from icectl.spec.requirements import AssertTableUUID, RequirementFailedError
from icectl.spec.updates import TableChange
from icectl.storage import FileIO, basename, checksum_sidecar, delete_quietly, local_path, parent, scheme_of
from icectl.table import Table
from icectl.table.delete_fence import file_identity, metadata_files_to_delete
from icectl.table.neighbours import find_neighbours
from icectl.table.write_guard import check_metadata_sound, check_table_home

_MAX_LONG = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# Snapshot ids


def new_snapshot_id(metadata: TableMetadata | None = None) -> int:
    """A random positive 63-bit id, unique in ``metadata`` (Java's SnapshotIdGeneratorUtil).

    Java XORs the two halves of a random UUID and masks the sign bit.
    """
    while True:
        u = uuid.uuid4().int
        snapshot_id = ((u >> 64) ^ (u & ((1 << 64) - 1))) & _MAX_LONG
        if snapshot_id and (metadata is None or metadata.snapshot_by_id(snapshot_id) is None):
            return snapshot_id


def removed_metadata_files(base: TableMetadata, new: TableMetadata, *, base_location: str,
                           new_location: str) -> list[str]:
    """Metadata files listed in ``base``'s log but no longer in ``new``'s: cleanup candidates.

    Never the current or the just-replaced file, whatever the logs say.
    """
    kept = {e.metadata_file for e in new.metadata_log} | {base_location, new_location}
    return [e.metadata_file for e in base.metadata_log if e.metadata_file not in kept]


def delete_removed_metadata_files(io: FileIO, base: TableMetadata, new: TableMetadata, *, base_location: str,
                                  new_location: str, table: Table) -> list[str]:
    """Delete them if ``write.metadata.delete-after-commit.enabled``; failures are ignored, as in Java.

    Unlike Java, only what the delete fence allows (:func:`icectl.table.delete_fence.metadata_files_to_delete`):
    a log entry naming a data file, a manifest or a file outside the table is never deleted.
    """
    if not METADATA_DELETE_AFTER_COMMIT.parse(new.properties):
        return []
    candidates = removed_metadata_files(base, new, base_location=base_location, new_location=new_location)
    deleted = []
    doomed = metadata_files_to_delete(table, candidates, new, (base, new), (base_location, new_location))
    if doomed:
        try:  # another table's metadata (a twin registered at an older version of this one) stays
            spared = set().union(*(n.metadata_files() for n in find_neighbours(table, new, new_location).tables))
        except Exception:  # the commit is done: any failure here only means no cleanup
            return []  # cannot tell which tables share them: delete nothing (Java ignores cleanup failures too)
        doomed = [p for p in doomed if file_identity(p) not in spared]
    for path in doomed:
        try:
            if io.delete(path):
                deleted.append(path)
            sidecar = checksum_sidecar(path)  # Spark's metadata files have Hadoop's .crc
            if sidecar is not None:
                io.delete(sidecar)
        except IcectlError:
            pass  # Java: suppressFailureWhenFinished
    return deleted


# ---------------------------------------------------------------------------------------------
# Retries


@dataclass(frozen=True)
class RetryPolicy:
    """``commit.retry.*`` as Java's ``Tasks.exponentialBackoff(min, max, total, 2.0)`` applies them."""

    num_retries: int = COMMIT_NUM_RETRIES.default
    min_wait_ms: int = COMMIT_MIN_RETRY_WAIT_MS.default
    max_wait_ms: int = COMMIT_MAX_RETRY_WAIT_MS.default
    total_timeout_ms: int = COMMIT_TOTAL_RETRY_TIME_MS.default

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> RetryPolicy:
        return cls(max(0, COMMIT_NUM_RETRIES.parse(properties)),
                   max(0, COMMIT_MIN_RETRY_WAIT_MS.parse(properties)),
                   max(0, COMMIT_MAX_RETRY_WAIT_MS.parse(properties)),
                   max(0, COMMIT_TOTAL_RETRY_TIME_MS.parse(properties)))

    def gives_up(self, attempt: int, elapsed_ms: float) -> bool:
        """After failed attempt ``attempt`` (1-based): Java stops at num-retries + 1 attempts, or
        once the total timeout has passed and at least one retry was made."""
        return attempt >= self.num_retries + 1 or (elapsed_ms > self.total_timeout_ms and attempt > 1)

    def delay_ms(self, attempt: int) -> int:
        """min(min-wait * 2^(attempt-1), max-wait) plus up to 10% jitter, so racing writers spread out."""
        delay = int(min(self.min_wait_ms * 2.0 ** (attempt - 1), self.max_wait_ms))
        return delay + random.randrange(max(1, int(delay * 0.1)))


# ---------------------------------------------------------------------------------------------
# Committing


@dataclass(frozen=True)
class CommitResult:
    metadata_location: str  # the new current metadata file (the old one when nothing changed)
    metadata: TableMetadata
    attempts: int
    committed: bool = True  # False when build returned its base unchanged: nothing was written
    deleted_metadata_files: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()  # why each lost attempt lost


def operations_for(table: Table, *, allow_unsafe_object_store: bool = False) -> TableOperations:
    """How to commit to ``table``, from how it was addressed.

    A bare metadata file can only be committed to when it is a ``v<N>.metadata.json`` in the
    ``metadata/`` directory of a file-system table: anywhere else nothing tells which pointer to swap.
    """
    address = table.address
    if address.catalog is not None and address.name is not None:
        catalog = table.catalog or open_catalog(load_config(), table.io, address.catalog)
        ops = catalog.table_operations(address.namespace, address.name)
        ops.allow_unsafe_object_store = allow_unsafe_object_store
        return ops
    if address.table_dir is not None:
        return folder_table_operations(address.table_dir, table.io, table.identifier,
                                       allow_unsafe_object_store=allow_unsafe_object_store)
    location = address.metadata_location
    directory = parent(location)
    if is_version_file(basename(location)) and basename(directory) == "metadata":
        table_dir = parent(directory)
        if scheme_of(table_dir) == "file":
            table_dir = local_path(table_dir)
        return folder_table_operations(table_dir, table.io, table.identifier,
                                       allow_unsafe_object_store=allow_unsafe_object_store)
    raise RefusedError(f"cannot commit to {address.identifier}: a metadata file outside a table's "
                       "metadata/ directory does not say which table pointer to update, so a concurrent "
                       "commit could be lost", path=location,
                       hint="address the table through its catalog ([catalog.]namespace.table; REST, Glue "
                            "and SQL catalogs are configured in icectl.toml), or by its table directory")


def commit(table: Table, build: Callable[[TableMetadata], TableChange], *,
           ops: TableOperations | None = None, allow_unsafe_object_store: bool = False,
           sleep: Callable[[float], None] = time.sleep) -> CommitResult:
    """Commit the change ``build`` derives from the table's freshest metadata, retrying on conflicts.

    ``build(base)`` returns a :class:`TableChange` derived from ``base`` alone (it is called again
    on the new base after a conflict; raise from it to give up); requirements usually come from
    ``base`` too (``assert-ref-snapshot-id`` of the branch a snapshot goes to), and
    ``assert-table-uuid`` of the loaded table is added to every attempt. A change with no effect
    writes nothing. A table whose folder is not the location its metadata names (a ``cp -r`` copy)
    is refused before anything is read or written (:func:`~icectl.table.write_guard.check_table_home`,
    exit 6): every command that writes metadata passes here.
    On success ``table`` is updated in place. Raises :class:`CommitConflictError` (exit 5) when every
    attempt lost to another writer, and :class:`~icectl.catalog.operations.CommitStateUnknownError`
    when the outcome cannot be told.
    """
    check_table_home(table)  # the write gate: no commit through a copied or moved table's folder
    ops = ops or operations_for(table, allow_unsafe_object_store=allow_unsafe_object_store)
    same_table = AssertTableUUID(table.metadata.table_uuid) if table.metadata.table_uuid is not None else None
    current = ops.refresh()
    _check_same_table(table, same_table, current.metadata)
    check_metadata_sound(current.metadata, current.location)
    policy = RetryPolicy.from_properties(current.metadata.properties)
    start = time.monotonic()
    attempt = 0
    conflicts: list[str] = []
    while True:
        attempt += 1
        base = current.metadata
        change = build(base)
        try:
            if same_table is not None and base.table_uuid is not None:
                change = TableChange((same_table, *change.requirements), change.updates)
            done = ops.commit_change(current, change)
            if done is None:
                return CommitResult(current.location, base, attempt, committed=False, conflicts=tuple(conflicts))
            location, new = done
        except (CommitFailedError, RequirementFailedError) as e:
            conflicts.append(e.message)
            if policy.gives_up(attempt, (time.monotonic() - start) * 1000):
                raise CommitConflictError(
                    f"commit to table {table.identifier} failed: another writer committed first on each of "
                    f"{attempt} attempts ({e.message})", path=e.path,
                    hint="run it again; if this keeps happening, allow more retries: icectl properties set "
                         f"{table.identifier} commit.retry.num-retries=10") from e
            sleep(policy.delay_ms(attempt) / 1000)
            current = ops.refresh()
            _check_same_table(table, same_table, current.metadata)
            check_metadata_sound(current.metadata, current.location)
            continue
        # Catalogs that write metadata themselves (REST) also clean up their old files, as Java's
        # RESTTableOperations leaves CatalogUtil.deleteRemovedMetadataFiles to the server.
        deleted = (delete_removed_metadata_files(ops.io, base, new, base_location=current.location,
                                                 new_location=location, table=table)
                   if isinstance(ops, LocalCommits) else [])
        table.metadata = new
        table.address = dataclasses.replace(table.address, metadata_location=location)
        return CommitResult(location, new, attempt, deleted_metadata_files=tuple(deleted),
                            conflicts=tuple(conflicts))


@contextmanager
def discard_on_failure(io: FileIO, written: Sequence[str]) -> Iterator[None]:
    """Delete the files an operation wrote (``written``, as it grows) if it fails before its commit
    is known to be done. Not when the commit's outcome is unknown (CommitStateUnknownError): the
    new version may be live and reference them, and deleting them would break the table."""
    try:
        yield
    except CommitStateUnknownError:
        raise
    except BaseException:
        for path in list(written):
            delete_quietly(io, path)
        raise


def _check_same_table(table: Table, same_table: AssertTableUUID | None, fresh: TableMetadata) -> None:
    """assert-table-uuid on every refresh (Java's checkUUID): a table dropped and re-created under
    the same name is another table, and no retry helps. A version without a uuid (v1) passes."""
    if same_table is None or fresh.table_uuid is None:
        return
    try:
        same_table.check(fresh)
    except RequirementFailedError:
        raise RefusedError(f"table {table.identifier} was replaced meanwhile (uuid {same_table.uuid} is now "
                           f"{fresh.table_uuid})", hint="load the table again") from None


def create_table(where: str | Catalog, identifier: str | Sequence[str] | None, metadata: TableMetadata, *,
                 config: Config | None = None, io: FileIO | None = None) -> CommitResult:
    """Create a table with ``metadata`` as its first version.

    ``where``: a table directory (``identifier`` None; Hadoop layout, ``v1.metadata.json`` plus
    ``version-hint.text`` through the same no-replace create as commits), a catalog name or a
    :class:`~icectl.catalog.Catalog` with ``identifier`` ``namespace.table`` (a SQLite catalog
    INSERTs the pointer to ``00000-<uuid>.metadata.json``), or ``[catalog.]namespace.table`` itself
    with ``identifier`` None. ``metadata.location`` may be None: the catalog's default is used.
    Raises RefusedError when the table exists. Build ``metadata`` with
    :func:`icectl.ops.create.metadata.new_table_metadata` (Java's ``newTableMetadata``).
    """
    if isinstance(where, str) and identifier is None and looks_like_path(where):
        table_dir = os.path.abspath(local_path(where)) if scheme_of(where) == "file" else where.rstrip("/")
        io = io or FileIO(s3=(config or load_config()).s3)
        metadata = _with_location(metadata, table_dir, strict=True)
        ops: TableOperations = folder_table_operations(table_dir, io, where)
    else:
        catalog, namespace, name = _catalog_target(where, identifier, config, io)
        for part in (*namespace, name):
            check_table_dir_name(part)
        default = catalog.default_table_location(namespace, name)
        if default is not None:
            if scheme_of(default) == "file":
                default = os.path.abspath(local_path(default))  # a relative warehouse names the same place
            # A file-system table lives where its directory is; other catalogs only point at it.
            metadata = _with_location(metadata, default, strict=catalog.table_is_its_folder)
        ops = catalog.table_operations(namespace, name)
    location, created = ops.create(metadata)
    return CommitResult(location, created, 1)


def _catalog_target(where: str | Catalog, identifier: str | Sequence[str] | None, config: Config | None,
                    io: FileIO | None) -> tuple[Catalog, tuple[str, ...], str]:
    if not isinstance(where, str):
        catalog = where
        parts = identifier.split(".") if isinstance(identifier, str) else list(identifier or ())
    else:
        config = config or load_config()
        io = io or FileIO(s3=config.s3)
        if identifier is None:
            name, namespace, table = split_identifier(where, config)
            catalog = open_catalog(config, io, name)
            parts = [*namespace, table]
        else:
            catalog = open_catalog(config, io, where)
            parts = identifier.split(".") if isinstance(identifier, str) else list(identifier)
    if len(parts) < 2 or any(not p for p in parts):
        raise UsageError(f"'{'.'.join(parts)}' is not namespace.table")
    return catalog, tuple(parts[:-1]), parts[-1]


def _with_location(metadata: TableMetadata, table_dir: str, *, strict: bool) -> TableMetadata:
    if metadata.location is None:
        return metadata.replace(location=table_dir)
    given = metadata.location.rstrip("/")
    if scheme_of(given) == "file":
        given = os.path.abspath(local_path(given))
    if strict and given != table_dir.rstrip("/"):
        raise UsageError(f"a file-system table's location is its directory: metadata says {metadata.location}, "
                         f"the table goes to {table_dir}")
    return metadata


__all__ = [
    "CommitResult", "RetryPolicy", "TableChange", "commit", "create_table",
    "delete_removed_metadata_files", "new_snapshot_id", "operations_for", "removed_metadata_files",
]

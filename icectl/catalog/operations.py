"""Table operations: how one commit attempt writes new metadata and atomically makes it current.

Two kinds, as Iceberg Java has them:

* :class:`FileSystemOperations`, ``HadoopTableOperations``: ``metadata/v<N>.metadata.json`` files
  and ``version-hint.text``. The new metadata is written to ``metadata/<uuid>.metadata.json``, then
  published as ``v<N+1>`` by an operation that never replaces an existing file (local: ``link(2)``;
  object storage: a conditional PUT). Java renames instead (exists-check, then ``rename``), which on
  local disks replaces an existing file: this module never does.
* :class:`SqlOperations`, ``JdbcTableOperations``: ``<NNNNN>-<uuid>.metadata.json`` files and the
  check-and-put ``UPDATE ... WHERE metadata_location = <base>`` on the SQLite catalog.

:meth:`commit_change` is how a change expressed as requirements and updates
(:mod:`icectl.spec.updates`) is committed: the requirements are checked against the base this
attempt refreshed, the updates applied to it, ``build()``'s metadata-log and ``last-updated-ms``
added (:func:`~icectl.spec.updates.prepare_commit`), and the result swapped in by :meth:`commit`.
A REST catalog sends the same requirements and updates to its server instead.

Every :meth:`commit` either returns the new metadata location, raises :class:`CommitFailedError`
(another writer won; nothing of ours is visible and our file is gone), raises
:class:`CommitStateUnknownError` (it could not be told whether the atomic step happened), or
re-raises a storage error after making sure nothing was committed.

Object storage without conditional writes cannot give file-system tables a safe commit. icectl
then refuses, unless the race is accepted explicitly with ``ICECTL_UNSAFE_OBJECT_STORE_COMMITS=1``
(or ``allow_unsafe_object_store=True``): a writer committing at the same moment may then be lost.
"""

from __future__ import annotations

import gzip
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from icectl.catalog.hadoop import VERSION_HINT, current_version, is_version_file, metadata_dir, version_file
from icectl.catalog.sql import SqlCatalog
from icectl.errors import (
    CommitConflictError,
    CorruptInputError,
    IcectlError,
    NotFoundError,
    RefusedError,
    StorageError,
)
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.properties import METADATA_COMPRESSION, WRITE_METADATA_PATH
from icectl.spec.updates import TableChange, apply_change, prepare_commit
from icectl.storage import FileIO, basename, checksum_sidecar, join, local_path, scheme_of

UNSAFE_OBJECT_STORE_ENV = "ICECTL_UNSAFE_OBJECT_STORE_COMMITS"
_REFRESH_ATTEMPTS = 5  # a file named by the hint/pointer may be deleted by a concurrent cleanup


class CommitFailedError(CommitConflictError):
    """One attempt lost to another writer (Java's CommitFailedException): re-read and retry."""


class CommitStateUnknownError(StorageError):
    """The atomic step failed in a way that leaves open whether it happened (CommitStateUnknownException)."""

    def __init__(self, message: str, *, location: str, path: str | None = None) -> None:
        super().__init__(message, path=path or location,
                         hint=f"check whether {location} is the table's current metadata before retrying "
                              "(icectl inspect metadata-log); do not rerun blindly")
        self.location = location


@dataclass(frozen=True)
class Current:
    """A table's current metadata as one refresh saw it."""

    location: str
    metadata: TableMetadata
    version: int  # file-system: N of vN; catalog: the NNNNN prefix, -1 when it has none


class TableOperations(Protocol):
    identifier: str
    io: FileIO

    def refresh(self) -> Current: ...
    def commit(self, base: Current, metadata: TableMetadata) -> str: ...
    def commit_change(self, base: Current, change: TableChange) -> tuple[str, TableMetadata] | None: ...
    def create(self, metadata: TableMetadata) -> str: ...


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class LocalCommits:
    """commit_change for catalogs that apply updates themselves and swap the metadata pointer."""

    def commit(self, base: Current, metadata: TableMetadata) -> str:
        raise NotImplementedError

    def commit_change(self, base: Current, change: TableChange) -> tuple[str, TableMetadata] | None:
        """Check ``change``'s requirements against ``base`` (raising
        :class:`~icectl.spec.updates.RequirementFailedError`, a conflict), apply its updates and swap
        the result in. None when the updates change nothing: no version is written."""
        now = now_ms()
        new = apply_change(base.metadata, change, now_ms=now)
        if new is base.metadata:
            return None
        new = prepare_commit(base.metadata, new, base.location, now)
        return self.commit(base, new), new


# ---------------------------------------------------------------------------------------------
# Metadata files


def metadata_codec(properties: Mapping[str, str]) -> str:
    """``none`` or ``gzip``, as TableMetadataParser.Codec.fromName reads the property."""
    codec = properties.get(METADATA_COMPRESSION, "none").strip().lower()
    if codec not in ("none", "gzip"):
        raise CorruptInputError(f"unsupported {METADATA_COMPRESSION} '{codec}'", hint="use none or gzip")
    return codec


def metadata_extension(codec: str) -> str:
    return ".gz.metadata.json" if codec == "gzip" else ".metadata.json"


def encode_metadata(metadata: TableMetadata, codec: str) -> bytes:
    data = metadata.to_json_bytes()
    return gzip.compress(data, mtime=0) if codec == "gzip" else data


def read_metadata(io: FileIO, location: str) -> TableMetadata:
    try:
        return parse_table_metadata(io.read(location))
    except IcectlError as e:
        if location not in e.message and not isinstance(e, NotFoundError):
            e.message = f"{e.message} in {location}"
        e.path = e.path or location
        raise


def metastore_version(location: str) -> int:
    """Java's BaseMetastoreTableOperations.parseVersion: the digits before the first ``-``, else -1."""
    name = basename(location)
    m = re.match(r"^(\d+)-", name)
    return int(m.group(1)) if m else -1


def _quiet_delete(io: FileIO, path: str) -> None:
    try:
        io.delete(path)
    except IcectlError:
        pass  # cleanup is best effort, as in Java


def _unsafe_allowed(flag: bool) -> bool:
    return flag or os.environ.get(UNSAFE_OBJECT_STORE_ENV, "").strip().lower() in {"1", "true", "yes"}


# ---------------------------------------------------------------------------------------------
# File-system tables


@dataclass
class FileSystemOperations(LocalCommits):
    """HadoopTableOperations for a table directory (local or object storage)."""

    table_dir: str
    io: FileIO
    identifier: str
    allow_unsafe_object_store: bool = False

    def __post_init__(self) -> None:
        # Metadata-log entries and results name files absolutely, as Java does.
        if scheme_of(self.table_dir) == "file":
            self.table_dir = os.path.abspath(local_path(self.table_dir))

    @property
    def metadata_dir(self) -> str:
        return metadata_dir(self.table_dir)

    def refresh(self) -> Current:
        for attempt in range(_REFRESH_ATTEMPTS):
            self.io.invalidate(self.metadata_dir)  # other processes add files: no stale listings
            version, location = current_version(self.io, self.table_dir)
            if not is_version_file(basename(location)):
                raise RefusedError(
                    f"{self.table_dir} holds catalog-named metadata ({basename(location)}) but no "
                    "v<N>.metadata.json: it is not a file-system table", path=location,
                    hint="address it by its catalog name (catalog.namespace.table)")
            try:
                return Current(location, read_metadata(self.io, location), version)
            except NotFoundError:
                if attempt == _REFRESH_ATTEMPTS - 1:
                    raise
                time.sleep(0.02 * (attempt + 1))  # deleted by a concurrent commit's cleanup: look again
        raise AssertionError("unreachable")

    def _check_commit_allowed(self, base: TableMetadata | None, metadata: TableMetadata) -> None:
        # The same preconditions as HadoopTableOperations.commit.
        if WRITE_METADATA_PATH in metadata.properties:
            raise RefusedError(f"{WRITE_METADATA_PATH} is set on {self.identifier}: file-system tables cannot "
                               "relocate metadata", hint="remove the property or use a catalog table")
        if base is not None and base.location != metadata.location:
            raise RefusedError(f"file-system table {self.identifier} cannot be relocated "
                               f"({base.location} -> {metadata.location})")
        if scheme_of(self.table_dir) != "file" and not _unsafe_allowed(self.allow_unsafe_object_store):
            if not self.io.supports_conditional_create(self.metadata_dir):
                raise RefusedError(
                    f"cannot commit safely to {self.identifier}: the object store does not support "
                    "conditional writes (If-None-Match), so a concurrent commit could be silently lost",
                    path=self.table_dir,
                    hint=f"register the table in a SQLite catalog (type = \"sql\"), or accept the race "
                         f"with {UNSAFE_OBJECT_STORE_ENV}=1")

    def commit(self, base: Current, metadata: TableMetadata) -> str:
        self._check_commit_allowed(base.metadata, metadata)
        self.io.invalidate(self.metadata_dir)  # the checks below must not answer from a cached listing
        codec = metadata_codec(metadata.properties)
        data = encode_metadata(metadata, codec)
        version = base.version + 1
        final = join(self.metadata_dir, f"v{version}{metadata_extension(codec)}")
        # Any spelling of v<N+1> (another codec) means another writer got there first.
        if version_file(self.io, self.table_dir, version) is not None:
            raise CommitFailedError(f"version {version} of {self.identifier} already exists", path=final)
        if not self._publish(final, data, codec):
            raise CommitFailedError(f"version {version} of {self.identifier} was committed by another writer",
                                    path=final)
        self._write_version_hint(version)
        if scheme_of(final) == "file" and self._replaced(final, data):
            # A writer that checks, then renames (Java's HadoopTableOperations on a local disk) replaced
            # our file just after we created it: our change is not in the table, so apply it again.
            raise CommitFailedError(f"version {version} of {self.identifier} was replaced by another writer",
                                    path=final)
        return final

    def _replaced(self, final: str, data: bytes) -> bool:
        """Only positive evidence counts: a missing file was cleaned up by later commits, not lost."""
        try:
            return self.io.read(final) != data
        except IcectlError:
            return False

    def create(self, metadata: TableMetadata) -> str:
        self._check_commit_allowed(None, metadata)
        if self._exists():
            where = "" if self.identifier.rstrip("/") in (self.table_dir, "") else f" at {self.table_dir}"
            raise RefusedError(f"table {self.identifier} already exists{where}", path=self.table_dir,
                               hint="choose another location")
        codec = metadata_codec(metadata.properties)
        final = join(self.metadata_dir, f"v1{metadata_extension(codec)}")
        if not self._publish(final, encode_metadata(metadata, codec), codec):
            raise RefusedError(f"table {self.identifier} was created by another writer at {self.table_dir}",
                               path=final)
        self._write_version_hint(1)
        return final

    def _exists(self) -> bool:
        try:
            current_version(self.io, self.table_dir)
        except NotFoundError:
            return False
        return True

    def _publish(self, final: str, data: bytes, codec: str) -> bool:
        """The atomic step: ``final`` appears holding ``data`` unless it exists (False then).

        Never replaces an existing file. Errors are resolved by looking at ``final`` afterwards.
        """
        if scheme_of(final) != "file":
            if _unsafe_allowed(self.allow_unsafe_object_store) and \
                    not self.io.supports_conditional_create(self.metadata_dir):
                if self.io.exists(final):  # the accepted race (module docstring): check, then PUT
                    return False
                self.io.write(final, data)
                return True
            try:
                created = self.io.write_if_absent(final, data)  # PUT with If-None-Match: *
            except IcectlError as e:
                return self._resolve(e, final, data)
            # A PUT retried by the SDK is refused by its own first try: ours if the bytes are.
            return created or bool(self._outcome(final, data))
        # As Java: write <uuid>.metadata.json, then give it the final name (without replacing).
        tmp = join(self.metadata_dir, f"{uuid.uuid4()}{metadata_extension(codec)}")
        try:
            self.io.write(tmp, data)
            try:
                return self.io.rename_no_replace(tmp, final)
            except IcectlError as e:
                return self._resolve(e, final, data)
        finally:
            _quiet_delete(self.io, tmp)  # the temp file of a failed attempt (already gone on success)

    def _resolve(self, error: IcectlError, final: str, data: bytes) -> bool:
        """After a failed atomic step: did our file land (True), did another writer's (False)?"""
        outcome = self._outcome(final, data)
        if outcome is None:
            raise CommitStateUnknownError(
                f"commit to {self.identifier} may or may not have happened: {error.message}",
                location=final) from error
        if not outcome and not self.io.exists(final):
            raise error  # nothing was committed: a storage failure, not a conflict
        return outcome

    def _outcome(self, final: str, data: bytes) -> bool | None:
        """True: ``final`` holds our bytes; False: missing or someone else's; None: cannot tell."""
        try:
            return self.io.read(final) == data
        except NotFoundError:
            return False
        except IcectlError:
            return None

    def _write_version_hint(self, version: int) -> None:
        """Best effort, as Java: the hint only speeds up finding the newest version.

        Java writes ``<uuid>-version-hint.temp``, deletes the hint and renames; replacing it in one
        step means readers never find it missing. Skipped when a newer version exists already, so
        a slow writer cannot point readers at a file that a later cleanup deletes.

        Spark's Hadoop file system keeps ``.version-hint.text.crc`` beside the hint and checks every
        read against it: a stale one makes Hadoop's reads fail (ChecksumException). It goes, as
        Hadoop's delete takes it, before and after the replace (a Hadoop writer may rename its own
        in between); with no sidecar Hadoop reads without checking, and writes a fresh one itself.
        """
        hint = join(self.metadata_dir, VERSION_HINT)
        sidecar = checksum_sidecar(hint)
        try:
            if version_file(self.io, self.table_dir, version + 1) is not None:
                return
            if sidecar is not None:
                _quiet_delete(self.io, sidecar)
            self.io.write_atomic(hint, str(version).encode(), temp_name=f"{uuid.uuid4()}-version-hint.temp")
            if sidecar is not None:
                _quiet_delete(self.io, sidecar)
        except IcectlError:
            pass


# ---------------------------------------------------------------------------------------------
# SQLite catalog tables


@dataclass
class SqlOperations(LocalCommits):
    """JdbcTableOperations for one table of a :class:`SqlCatalog`."""

    catalog: SqlCatalog
    namespace: tuple[str, ...]
    name: str
    io: FileIO

    @property
    def identifier(self) -> str:
        return ".".join((*self.namespace, self.name))

    def refresh(self) -> Current:
        for attempt in range(_REFRESH_ATTEMPTS):
            location = self.catalog.load_metadata_location(self.namespace, self.name)
            try:
                return Current(location, read_metadata(self.io, location), metastore_version(location))
            except NotFoundError:
                if attempt == _REFRESH_ATTEMPTS - 1:
                    raise
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")

    def new_location(self, metadata: TableMetadata, version: int) -> str:
        """``<write.metadata.path or location/metadata>/<%05d version>-<uuid><ext>`` as Java names it."""
        root = metadata.properties.get(WRITE_METADATA_PATH)
        if root is None:
            if metadata.location is None:
                raise CorruptInputError(f"table {self.identifier} has no location for its metadata files")
            root = join(metadata.location, "metadata")
        ext = metadata_extension(metadata_codec(metadata.properties))
        return join(root.rstrip("/"), f"{version:05d}-{uuid.uuid4()}{ext}")

    def commit(self, base: Current, metadata: TableMetadata) -> str:
        location = self.new_location(metadata, base.version + 1)
        self.io.write(location, encode_metadata(metadata, metadata_codec(metadata.properties)))
        try:
            swapped = self.catalog.swap_metadata_location(self.namespace, self.name, base.location, location)
        except IcectlError as e:
            committed = self._committed(location)
            if committed is None:
                raise CommitStateUnknownError(
                    f"commit to {self.identifier} may or may not have happened: {e.message}",
                    location=location) from e
            if committed:
                return location
            _quiet_delete(self.io, location)
            raise
        if not swapped:
            _quiet_delete(self.io, location)
            raise CommitFailedError(f"table {self.identifier} no longer points at {base.location}: another "
                                    "writer committed first", path=self.catalog.db_path)
        return location

    def _committed(self, location: str) -> bool | None:
        """Whether ``location`` became current (or already history: someone committed on top)."""
        try:
            now = self.catalog.load_metadata_location(self.namespace, self.name)
            if now == location:
                return True
            return any(e.metadata_file == location for e in read_metadata(self.io, now).metadata_log)
        except IcectlError:
            return None

    def create(self, metadata: TableMetadata) -> str:
        location = self.new_location(metadata, 0)  # Java: version -1 + 1, so 00000-<uuid>
        self.io.write(location, encode_metadata(metadata, metadata_codec(metadata.properties)))
        try:
            self.catalog.create_table_entry(self.namespace, self.name, location)
        except BaseException:
            _quiet_delete(self.io, location)
            raise
        return location

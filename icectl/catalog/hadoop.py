"""File-system tables: Spark's Hadoop catalog (a warehouse directory) and its commits.

:class:`HadoopCatalog` finds tables as ``<warehouse>/<ns1>/<ns2>/<table>`` directories;
:class:`FileSystemOperations` (``HadoopTableOperations``) commits to any table directory, local or
on object storage. The layout itself (version files, the hint) is :mod:`icectl.catalog.hadoop_layout`.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

from icectl.catalog.hadoop_layout import (
    VERSION_HINT,
    check_table_dir_name,
    current_version,
    is_version_file,
    metadata_dir,
    version_file,
    version_of,
)
from icectl.catalog.operations import (
    REFRESH_ATTEMPTS,
    UNSAFE_OBJECT_STORE_ENV,
    CommitFailedError,
    CommitStateUnknownError,
    Current,
    LocalCommits,
    encode_metadata,
    metadata_codec,
    metadata_extension,
    quiet_delete,
    read_metadata,
    unsafe_object_store_allowed,
)
from icectl.errors import IcectlError, NotFoundError, RefusedError, UsageError
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import WRITE_METADATA_PATH
from icectl.storage import FileIO, basename, checksum_sidecar, join, local_path, scheme_of

__all__ = [
    "VERSION_HINT", "FileSystemOperations", "HadoopCatalog", "check_table_dir_name", "current_version",
    "is_version_file", "metadata_dir", "version_file", "version_of",
]


@dataclass
class HadoopCatalog:
    """A warehouse directory: ``<warehouse>/<ns1>/<ns2>/<table>`` is a table."""

    name: str
    warehouse: str
    io: FileIO

    @property
    def table_is_its_folder(self) -> bool:
        return True

    @property
    def server_writes_metadata(self) -> bool:
        return False

    def table_dir(self, namespace: tuple[str, ...], table: str) -> str:
        return join(self.warehouse, *namespace, table)

    def default_table_location(self, namespace: tuple[str, ...], table: str) -> str:
        return self.table_dir(namespace, table)

    def table_operations(self, namespace: tuple[str, ...], table: str) -> FileSystemOperations:
        return FileSystemOperations(self.table_dir(namespace, table), self.io, ".".join((*namespace, table)),
                                    catalog_name=self.name)

    def is_table(self, directory: str) -> bool:
        try:
            names = self.io.list_names(metadata_dir(directory))
        except IcectlError:
            if self.io.exists(directory) and not self.io.is_dir(directory):
                return False  # a file in a namespace folder (what a purged table leaves) is no table
            raise
        return any(is_version_file(n) for n in names)

    def create_namespace(self, namespace: tuple[str, ...], properties: dict[str, str] | None = None, *,
                         exist_ok: bool = False) -> bool:
        """A namespace is a directory (Hadoop catalogs keep no namespace properties). False when it
        existed already (refused unless ``exist_ok``)."""
        if not namespace:
            raise UsageError("empty namespace")
        for part in namespace:
            check_table_dir_name(part)
        if properties:
            raise UsageError(f"catalog '{self.name}' is a file-system warehouse: namespaces have no properties")
        d = join(self.warehouse, *namespace)
        if self.io.is_dir(d):
            if exist_ok:
                return False
            raise RefusedError(f"namespace {'.'.join(namespace)} already exists in catalog '{self.name}'", path=d,
                               hint="pass --exist-ok to accept an existing namespace")
        self.io.makedirs(d)
        return True

    def list_namespaces(self, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        base = join(self.warehouse, *parent) if parent else self.warehouse
        if not self.io.is_dir(base):  # a wrong warehouse must not look like an empty one (cron: "0 tables")
            if parent:
                raise NotFoundError(f"namespace {'.'.join(parent)} not found in catalog '{self.name}'", path=base)
            raise NotFoundError(f"warehouse {self.warehouse} of catalog '{self.name}' does not exist",
                                path=self.warehouse,
                                hint="check the catalog's warehouse in the config (or ICECTL_WAREHOUSE); "
                                     "'icectl namespace create NAME' starts a new one")
        out = []
        for n in sorted(self.io.list_names(base)):
            d = join(base, n)
            if n.startswith(".") or not self.io.is_dir(d) or self.is_table(d):
                continue
            out.append((*parent, n))
        return out

    def list_tables(self, namespace: tuple[str, ...]) -> list[tuple[str, ...]]:
        base = join(self.warehouse, *namespace)
        if not self.io.is_dir(base):
            raise NotFoundError(f"namespace {'.'.join(namespace)} not found in catalog '{self.name}'",
                                path=base)
        return [(*namespace, n) for n in sorted(self.io.list_names(base))
                if self.is_table(join(base, n))]


# A writer that checks, then renames (Java's HadoopTableOperations on a local disk) can replace
# a new metadata version if it checked just before it was published. Its window is short: a
# command that deletes after its commit lets at least this long pass and looks again.
LOCAL_SETTLE_SECONDS = 0.5


@dataclass
class FileSystemOperations(LocalCommits):
    """HadoopTableOperations for a table directory (local or object storage)."""

    table_dir: str
    io: FileIO
    identifier: str
    allow_unsafe_object_store: bool = False
    catalog_name: str | None = None  # addressed as namespace.table of this catalog: named when not found

    def __post_init__(self) -> None:
        # Metadata-log entries and results name files absolutely, as Java does.
        if scheme_of(self.table_dir) == "file":
            self.table_dir = os.path.abspath(local_path(self.table_dir))

    @property
    def metadata_dir(self) -> str:
        return metadata_dir(self.table_dir)

    # -- capabilities (icectl.catalog.operations.TableOperations)

    @property
    def entry_is_metadata_files(self) -> bool:
        return True

    @property
    def max_format_version(self) -> int | None:
        return None

    @property
    def register_checks_namespace(self) -> bool:
        return False  # the namespace is a folder: made when the table's folder is

    def settle_seconds(self) -> float:
        # A local file system's mtime may be coarse: a commit replacing ours within that window
        # could be missed by the read-back; object stores order writes.
        return LOCAL_SETTLE_SECONDS if scheme_of(self.table_dir) == "file" else 0.0

    def current_pointer(self) -> str | None:
        return None

    def delete_pointer(self, expected_location: str) -> bool:
        raise NotImplementedError("a file-system table's entry is its version files: drop deletes them")

    def describe_entry(self, name: str, location: str) -> str:
        return f"the version files and version-hint.text in {self.metadata_dir}"

    def describe_register(self, name: str, location: str, metadata: TableMetadata) -> str:
        v1 = f"v1{metadata_extension(metadata_codec(metadata.properties))}"
        return f"{join(self.metadata_dir, v1)} (a copy of {location}) and its version-hint.text"

    def refresh(self) -> Current:
        for attempt in range(REFRESH_ATTEMPTS):
            self.io.invalidate(self.metadata_dir)  # other processes add files: no stale listings
            try:
                version, location = current_version(self.io, self.table_dir)
            except NotFoundError:
                if self.catalog_name is None:
                    raise
                raise NotFoundError(f"table {self.identifier} not found in catalog '{self.catalog_name}' "
                                    f"(looked in {self.table_dir})", path=self.table_dir,
                                    hint="check the name with 'icectl list'") from None
            if not is_version_file(basename(location)):
                raise RefusedError(
                    f"{self.table_dir} holds catalog-named metadata ({basename(location)}) but no "
                    "v<N>.metadata.json: it is not a file-system table", path=location,
                    hint="address it by its catalog name (catalog.namespace.table)")
            try:
                return Current(location, read_metadata(self.io, location), version)
            except NotFoundError:
                if attempt == REFRESH_ATTEMPTS - 1:
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
        if scheme_of(self.table_dir) != "file" and not unsafe_object_store_allowed(self.allow_unsafe_object_store):
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

    def create(self, metadata: TableMetadata) -> tuple[str, TableMetadata]:
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
        return final, metadata

    def register(self, metadata_location: str, metadata: TableMetadata) -> tuple[str, TableMetadata]:
        """HadoopTableOperations.commit(null, metadata): the registered metadata becomes this
        directory's ``v1.metadata.json`` (a copy, written as every version is; the given file is left
        as it is). Its location stays what it says, as in Java, even when that is another folder."""
        return self.create(metadata)

    def drop(self, base: Current) -> list[str]:
        """Remove the table's catalog entry, which for a file-system table is its version files and
        hint: the hint first (readers then list), then every ``v<N>.metadata.json`` up to ``base``'s
        version, oldest first, so until the last one goes a reader sees ``base`` or nothing.

        Refused (CommitFailedError) when the current version is no longer ``base``'s, before anything
        goes, and when a newer version appeared meanwhile (that writer's version is left in place).
        Returns the deleted paths."""
        self.io.invalidate(self.metadata_dir)
        try:
            version, location = current_version(self.io, self.table_dir)
        except NotFoundError:
            raise NotFoundError(f"table {self.identifier} was dropped by another process meanwhile "
                                f"(no version file left in {self.metadata_dir})", path=self.table_dir) from None
        if version != base.version or basename(location) != basename(base.location):
            raise CommitFailedError(f"table {self.identifier} is at version {version} now, not {base.version}: "
                                    "another writer committed first; nothing was dropped", path=location)
        names = self.io.list_names(self.metadata_dir)
        versions = sorted((version_of(n) or 0, n) for n in names if is_version_file(n))
        doomed = [join(self.metadata_dir, n) for v, n in versions if v <= base.version]
        deleted: list[str] = []
        hint = join(self.metadata_dir, VERSION_HINT)
        for path in (hint, *doomed):
            sidecar = checksum_sidecar(path)
            if self.io.delete(path):
                deleted.append(path)
            if sidecar is not None:
                quiet_delete(self.io, sidecar)
        self.io.invalidate(self.metadata_dir)
        newer = [n for n in self.io.list_names(self.metadata_dir) if is_version_file(n)]
        if newer:
            raise CommitFailedError(f"another writer committed {', '.join(sorted(newer))} to {self.identifier} "
                                    "while it was being dropped: that version is left, no other file was "
                                    "deleted", path=self.metadata_dir)
        return deleted

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
            if unsafe_object_store_allowed(self.allow_unsafe_object_store) and \
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
            quiet_delete(self.io, tmp)  # the temp file of a failed attempt (already gone on success)

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
                quiet_delete(self.io, sidecar)
            self.io.write_atomic(hint, str(version).encode(), temp_name=f"{uuid.uuid4()}-version-hint.temp")
            if sidecar is not None:
                quiet_delete(self.io, sidecar)
        except IcectlError:
            pass



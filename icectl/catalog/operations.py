"""Table operations: how one commit attempt makes new metadata current, for every kind of catalog.

Each catalog gives a table's :class:`TableOperations` (``Catalog.table_operations``), as Iceberg
Java's ``TableOperations``:

* file-system tables (:class:`icectl.catalog.hadoop.FileSystemOperations`, ``HadoopTableOperations``):
  ``metadata/v<N>.metadata.json`` published by a create that never replaces an existing file;
* pointer-swap catalogs (:class:`MetastoreOperations`: the SQL catalog on SQLite or PostgreSQL as
  ``JdbcTableOperations``, Glue as ``GlueTableOperations``): a new ``<NNNNN>-<uuid>.metadata.json``,
  then a compare-and-swap of the table's pointer in the catalog;
* REST catalogs (:mod:`icectl.catalog.rest`): the requirements and updates are sent to the server,
  which checks, applies and commits them itself.

:meth:`LocalCommits.commit_change` is how the first two commit a change expressed as requirements and
updates (:mod:`icectl.spec.updates`): the requirements are checked against the base this attempt
refreshed, the updates applied to it, ``build()``'s metadata-log and ``last-updated-ms`` added
(:func:`~icectl.spec.updates.prepare_commit`), and the result swapped in by ``commit``.

Every commit either returns the new metadata location, raises :class:`CommitFailedError` (another
writer won; nothing of ours is visible and our file is gone), raises :class:`CommitStateUnknownError`
(it could not be told whether the atomic step happened: exit 5, and nothing written is cleaned up),
or re-raises a storage error after making sure nothing was committed.

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
from typing import TYPE_CHECKING, Protocol

from icectl.errors import (
    CommitConflictError,
    CorruptInputError,
    IcectlError,
    NotFoundError,
)
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.properties import METADATA_COMPRESSION, WRITE_METADATA_PATH
from icectl.storage import FileIO, basename, join

if TYPE_CHECKING:
    from icectl.spec.updates import TableChange

UNSAFE_OBJECT_STORE_ENV = "ICECTL_UNSAFE_OBJECT_STORE_COMMITS"
REFRESH_ATTEMPTS = 5  # a file named by the hint/pointer may be deleted by a concurrent cleanup


class CommitFailedError(CommitConflictError):
    """One attempt lost to another writer (Java's CommitFailedException): re-read and retry."""


class CommitStateUnknownError(CommitConflictError):
    """The atomic step failed in a way that leaves open whether it happened (CommitStateUnknownException).

    Exit 5 with the commit-conflict family: the run did not finish its commit, and a rerun must first
    look at the table. Files the run wrote are never cleaned up: the new version may reference them."""

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
    @property
    def identifier(self) -> str: ...  # read-only: catalog tables derive it from namespace and name

    io: FileIO
    # A file-system table on object storage commits only with a conditional PUT unless allowed
    # (--allow-unsafe-object-store); other catalogs swap pointers and ignore it.
    allow_unsafe_object_store: bool

    def refresh(self) -> Current:
        """The table's current metadata, read fresh (NotFoundError when the table does not exist)."""
        ...

    def commit_change(self, base: Current, change: TableChange) -> tuple[str, TableMetadata] | None:
        """Commit ``change`` on top of ``base``: the new location and metadata, None when it changes nothing."""
        ...

    def create(self, metadata: TableMetadata) -> tuple[str, TableMetadata]:
        """Create the table with ``metadata`` as its first version (RefusedError when it exists)."""
        ...

    def register(self, metadata_location: str, metadata: TableMetadata) -> tuple[str, TableMetadata]:
        """Make the table ``metadata`` (read from ``metadata_location``) current under this name: Java's
        ``registerTable`` = ``ops.commit(null, metadata)``. A pointer catalog points at the given file
        (no copy); a file-system table gets it as ``v1.metadata.json``; a REST server is asked to.
        RefusedError when the name is taken. Returns where the catalog now points."""
        ...

    def drop(self, base: Current) -> list[str]:
        """Remove the table from its catalog, only while it is still at ``base`` (CommitFailedError
        when another writer moved it; NotFoundError when it is gone already). The files stay,
        except a file-system table's version files and hint, which are its catalog entry: their
        paths are returned (empty for every other catalog)."""
        ...

    # -- capabilities: what differs between catalogs, asked of the operations (never their class)

    @property
    def table_dir(self) -> str | None:
        """The folder whose version files are the table's catalog entry (a file-system table); None
        for a catalog that keeps a pointer elsewhere."""
        ...

    @property
    def entry_is_metadata_files(self) -> bool:
        """Whether the catalog entry is the table's own metadata files (file-system tables): dropping
        it without deleting files leaves everything in place, and ``write.metadata.path`` cannot move them."""
        ...

    @property
    def max_format_version(self) -> int | None:
        """The highest format version the catalog can hold (REST: 3), None when any."""
        ...

    @property
    def register_checks_namespace(self) -> bool:
        """Whether register must first check the namespace exists (Glue, REST: their servers accept
        any name; Java's catalogs refuse a missing namespace)."""
        ...

    def settle_seconds(self) -> float:
        """How long after a commit to wait before reading the table back to check it was not replaced
        (a local file system's coarse mtime: 0.5 s; 0 where a commit is a compare-and-swap)."""
        ...

    def current_pointer(self) -> str | None:
        """The metadata file the entry names, read without loading it (pointer catalogs: SQL, Glue);
        None where there is no such pointer (a file-system table's entry is its files; REST loads
        through its server). NotFoundError when there is no such table."""
        ...

    def delete_pointer(self, expected_location: str) -> bool:
        """Remove the entry while it still names ``expected_location`` (pointer catalogs only)."""
        ...

    def describe_entry(self, name: str, location: str) -> str:
        """What the entry of table ``name`` at metadata ``location`` is, for dry runs of drop."""
        ...

    def describe_register(self, name: str, location: str, metadata: TableMetadata) -> str:
        """What registering ``location`` as ``name`` would write, for a dry run."""
        ...


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
        # The commit machinery (spec.updates and spec.requirements, ~8 ms to import) loads when a
        # commit is made: reading a table never needs it (RUN_TIME_IMPORTERS, test_architecture.py).
        from icectl.spec.updates import apply_change, prepare_commit

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


def quiet_delete(io: FileIO, path: str) -> None:
    """Best-effort cleanup of a file this run wrote (Java ignores failures too)."""
    try:
        io.delete(path)
    except IcectlError:
        pass  # cleanup is best effort, as in Java


def unsafe_object_store_allowed(flag: bool) -> bool:
    return flag or os.environ.get(UNSAFE_OBJECT_STORE_ENV, "").strip().lower() in {"1", "true", "yes"}




# ---------------------------------------------------------------------------------------------
# Pointer-swap catalogs


class PointerCapabilities:
    """The capabilities (see :class:`TableOperations`) of every catalog that is no file-system table."""

    allow_unsafe_object_store: bool = False  # file-system tables only; set alike on every kind

    @property
    def table_dir(self) -> str | None:
        return None

    @property
    def entry_is_metadata_files(self) -> bool:
        return False

    @property
    def max_format_version(self) -> int | None:
        return None

    @property
    def register_checks_namespace(self) -> bool:
        return True

    def settle_seconds(self) -> float:
        return 0.0

    def current_pointer(self) -> str | None:
        return None

    def delete_pointer(self, expected_location: str) -> bool:
        raise NotImplementedError("this catalog keeps no pointer to delete")

    def describe_entry(self, name: str, location: str) -> str:
        return f"the catalog entry {name} (pointing at {location})"

    def describe_register(self, name: str, location: str, metadata: TableMetadata) -> str:
        return f"a catalog entry {name} pointing at {location}"


class CatalogTable(PointerCapabilities):
    """Operations of a table a catalog names ``namespace.table`` (every catalog but file-system paths)."""

    namespace: tuple[str, ...]
    name: str

    @property
    def identifier(self) -> str:
        return ".".join((*self.namespace, self.name))


class MetastoreOperations(LocalCommits, CatalogTable):
    """``BaseMetastoreTableOperations``: new metadata goes to ``<NNNNN>-<uuid>.metadata.json``, then
    the catalog's pointer to the current file is swapped only if it still names the base.

    A subclass says how its catalog keeps the pointer: :meth:`current_pointer`, :meth:`swap_pointer`,
    :meth:`insert_pointer`, and where it lives (:attr:`pointer_store`, for messages).
    """

    io: FileIO

    @property
    def pointer_store(self) -> str:
        """Where the pointer lives (a database, an endpoint): named by errors."""
        raise NotImplementedError

    def current_pointer(self) -> str:
        """The table's current metadata location; NotFoundError when there is no such table."""
        raise NotImplementedError

    def swap_pointer(self, base_location: str, new_location: str, metadata: TableMetadata) -> bool:
        """Point the table at ``new_location`` only if it still points at ``base_location``.

        False: another writer moved it first. Raise an IcectlError when it cannot be told or failed;
        :meth:`commit` then looks at the pointer to decide."""
        raise NotImplementedError

    def insert_pointer(self, location: str, metadata: TableMetadata) -> None:
        """Register a new table pointing at ``location``; RefusedError when the name is taken."""
        raise NotImplementedError

    def delete_pointer(self, expected_location: str) -> bool:
        """Remove the table's entry only if it still points at ``expected_location``.

        False: it points elsewhere now (another writer committed). NotFoundError when there is no
        such table."""
        raise NotImplementedError

    def register(self, metadata_location: str, metadata: TableMetadata) -> tuple[str, TableMetadata]:
        # BaseMetastoreTableOperations.commit(null, metadata) of a registered table: the pointer names
        # the given file itself, nothing is copied (Java's writeNewMetadataIfRequired skips a
        # metadata that has a file location already).
        self.insert_pointer(metadata_location, metadata)
        return metadata_location, metadata

    def drop(self, base: Current) -> list[str]:
        if not self.delete_pointer(base.location):
            raise CommitFailedError(f"table {self.identifier} no longer points at {base.location}: another "
                                    "writer committed first; nothing was dropped", path=self.pointer_store)
        return []

    def refresh(self) -> Current:
        for attempt in range(REFRESH_ATTEMPTS):
            location = self.current_pointer()
            try:
                return Current(location, read_metadata(self.io, location), metastore_version(location))
            except NotFoundError:
                if attempt == REFRESH_ATTEMPTS - 1:
                    raise
                time.sleep(0.02 * (attempt + 1))  # deleted by a concurrent commit's cleanup: look again
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
            swapped = self.swap_pointer(base.location, location, metadata)
        except IcectlError as e:
            committed = self._committed(location)
            if committed is None:
                raise CommitStateUnknownError(
                    f"commit to {self.identifier} may or may not have happened: {e.message}",
                    location=location) from e
            if committed:
                return location
            quiet_delete(self.io, location)
            raise
        if not swapped:
            quiet_delete(self.io, location)
            raise CommitFailedError(f"table {self.identifier} no longer points at {base.location}: another "
                                    "writer committed first", path=self.pointer_store)
        return location

    def _committed(self, location: str) -> bool | None:
        """Whether ``location`` became current (or already history: someone committed on top)."""
        try:
            now = self.current_pointer()
            if now == location:
                return True
            return any(e.metadata_file == location for e in read_metadata(self.io, now).metadata_log)
        except IcectlError:
            return None

    def create(self, metadata: TableMetadata) -> tuple[str, TableMetadata]:
        location = self.new_location(metadata, 0)  # Java: version -1 + 1, so 00000-<uuid>
        self.io.write(location, encode_metadata(metadata, metadata_codec(metadata.properties)))
        try:
            self.insert_pointer(location, metadata)
        except BaseException:
            quiet_delete(self.io, location)
            raise
        return location, metadata

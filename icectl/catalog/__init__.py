"""Catalogs and table addressing: the one way every command turns an argument into a table.

An address is one of:
- a path or URL of a ``*.metadata.json`` file (also ``.gz.metadata.json``);
- a table directory (``metadata/version-hint.text`` and ``vN.metadata.json``), local or ``s3://``;
- ``[catalog.]namespace.table`` in a configured catalog (the default catalog when the first
  part does not name one).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from icectl.catalog.hadoop import FileSystemOperations, HadoopCatalog, current_version
from icectl.catalog.hadoop_layout import check_table_dir_name
from icectl.catalog.operations import Current, TableOperations
from icectl.config import Config
from icectl.errors import IcectlError, NotFoundError, UnsupportedError, UsageError
from icectl.storage import FileIO, local_path, scheme_of


class Catalog(Protocol):
    """What every catalog does: list and create namespaces, find a table's operations (Iceberg
    Java's ``Catalog`` + ``newTableOps``). Loading and committing go through the operations."""

    name: str
    warehouse: str  # where the catalog puts tables, as configured ("" when its server decides)
    io: FileIO  # the catalog-wide FileIO; a table's own (vended credentials) is its operations' io

    def list_namespaces(self, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        """The namespaces directly below ``parent`` (top level for ``()``)."""
        ...

    def list_tables(self, namespace: tuple[str, ...]) -> list[tuple[str, ...]]:
        """The tables of ``namespace`` as full identifiers ``(*namespace, table)``."""
        ...

    def create_namespace(self, namespace: tuple[str, ...], properties: dict[str, str] | None = None, *,
                         exist_ok: bool = False) -> bool:
        """Create it; False when it existed (RefusedError unless ``exist_ok``)."""
        ...

    def default_table_location(self, namespace: tuple[str, ...], table: str) -> str | None:
        """Where a new table goes when none is given; None when the catalog's server decides."""
        ...

    def table_operations(self, namespace: tuple[str, ...], table: str) -> TableOperations:
        """How to load, commit to and create the table ``namespace.table``."""
        ...

    @property
    def table_is_its_folder(self) -> bool:
        """Whether a table of this catalog is the folder its location names (a Hadoop warehouse:
        a created table's location must be that folder), rather than a pointer to metadata anywhere."""
        ...

    @property
    def server_writes_metadata(self) -> bool:
        """Whether a server writes the table's metadata files (REST): a ``vN.metadata.json`` at the
        table's location that is its current file is its own, not a second table."""
        ...


def table_name_parts(identifier: str | Sequence[str]) -> tuple[tuple[str, ...], str]:
    """``namespace.table`` (a dotted name or its parts) as (namespace, table); each part must be a
    name a table folder can have. UsageError (exit 2) otherwise."""
    parts = identifier.split(".") if isinstance(identifier, str) else list(identifier)
    if len(parts) < 2 or any(not p for p in parts):
        raise UsageError(f"'{'.'.join(parts)}' is not namespace.table",
                         hint="register names a catalog table: [catalog.]namespace.table")
    for part in parts:
        check_table_dir_name(part)
    return tuple(parts[:-1]), parts[-1]


def folder_table_operations(table_dir: str, io: FileIO, identifier: str, *,
                            allow_unsafe_object_store: bool = False) -> TableOperations:
    """The operations of the file-system table in ``table_dir`` (a table addressed by its folder or
    a ``vN.metadata.json`` in its ``metadata/``): Java's HadoopTableOperations."""
    return FileSystemOperations(table_dir, io, identifier, allow_unsafe_object_store)


SERVER_WRITTEN_TYPES = frozenset({"rest"})  # config types whose catalog's server_writes_metadata is True


def open_catalog(config: Config, io: FileIO, name: str | None = None) -> Catalog:
    # The SQL, REST and Glue clients are imported when a catalog of their type is opened: a path
    # address (`icectl inspect table ./t`) opens none, and together they cost ~15 ms to import.
    # (One of the two run-time icectl imports tests/unit/test_architecture.py allows.)
    cc = config.catalog(name)
    if cc.type == "sql":
        from icectl.catalog.sql import SqlCatalog

        return SqlCatalog.from_config(cc, io)
    if cc.type == "hadoop":
        return HadoopCatalog(cc.name, cc.warehouse, io)
    if cc.type == "rest":
        from icectl.catalog.rest import RestCatalog

        return RestCatalog.from_config(cc, io)
    if cc.type == "glue":
        from icectl.catalog.glue import GlueCatalog

        return GlueCatalog.from_config(cc, io)
    raise UnsupportedError(f"catalog '{cc.name}' has type '{cc.type}', which this icectl cannot open",
                           path=config.source)


@dataclass(frozen=True)
class TableAddress:
    """Where a table was found: its current metadata file, and its catalog name if any."""

    metadata_location: str
    identifier: str  # how to show it: namespace.table or the path given
    catalog: str | None = None
    namespace: tuple[str, ...] = ()
    name: str | None = None
    table_dir: str | None = None  # for file-system tables: where vN.metadata.json live


def is_metadata_file(text: str) -> bool:
    return text.endswith((".metadata.json", ".metadata.json.gz"))


def looks_like_path(text: str) -> bool:
    return ("://" in text or text.startswith(("/", "./", "../", "~", "file:"))
            or os.sep in text or "/" in text or os.path.exists(text))


def split_identifier(text: str, config: Config) -> tuple[str | None, tuple[str, ...], str]:
    parts = text.split(".")
    if len(parts) < 2 or any(not p for p in parts):
        raise UsageError(f"'{text}' is not a table address",
                         hint="use namespace.table, catalog.namespace.table, a table directory "
                              "or a *.metadata.json path")
    if len(parts) >= 3 and parts[0] in config.catalogs:
        return parts[0], tuple(parts[1:-1]), parts[-1]
    return None, tuple(parts[:-1]), parts[-1]


@dataclass(frozen=True)
class FoundTable:
    """A table found by its address; ``current`` is set when its catalog loaded it already."""

    address: TableAddress
    io: FileIO  # the FileIO for the table's files (a REST catalog may vend credentials for it)
    catalog: Catalog | None = None
    current: Current | None = None


def find_table(address: str, config: Config, io: FileIO) -> FoundTable:
    """Find the table at any accepted address. A catalog table is loaded through its catalog's
    operations (one request to a REST server); a path names its current metadata file."""
    where = resolve_path(address, config, io)
    if where is not None:
        return FoundTable(where, io)
    catalog_name, namespace, table = split_identifier(address.strip(), config)
    return find_in_catalog(open_catalog(config, io, catalog_name), namespace, table)


def find_in_catalog(catalog: Catalog, namespace: tuple[str, ...], table: str) -> FoundTable:
    """Load ``namespace.table`` through an open catalog (``--all`` runs reuse one catalog: one
    REST session and token for every table)."""
    ops = catalog.table_operations(namespace, table)
    current = ops.refresh()
    where = TableAddress(metadata_location=current.location, identifier=".".join((*namespace, table)),
                         catalog=catalog.name, namespace=namespace, name=table,
                         table_dir=ops.table_dir)
    return FoundTable(where, ops.io, catalog, current)


def resolve_path(address: str, config: Config, io: FileIO) -> TableAddress | None:
    """The table a path address names, or None when the address is ``[catalog.]namespace.table``."""
    address = address.strip()
    if not address:
        raise UsageError("empty table address")
    if is_metadata_file(address):
        path = os.path.expanduser(address) if scheme_of(address) == "file" else address
        if not io.exists(path):
            raise NotFoundError(f"metadata file not found: {address}", path=address)
        return TableAddress(metadata_location=path, identifier=address)
    if looks_like_path(address):
        path = os.path.expanduser(local_path(address)) if scheme_of(address) == "file" else address
        if scheme_of(path) == "file" and not os.path.exists(path):
            raise NotFoundError(f"table directory not found: {address}", path=address)
        if scheme_of(path) == "file" and not os.path.isdir(path):
            raise _file_not_table(io, address, path)
        try:
            _, location = current_version(io, path.rstrip("/"))
        except NotFoundError:
            # Object stores have no directories: a file's "metadata/" just lists empty.
            if scheme_of(path) != "file" and io.exists(path) and not io.is_dir(path):
                raise _file_not_table(io, address, path) from None
            raise
        return TableAddress(metadata_location=location, identifier=address, table_dir=path.rstrip("/"))
    return None


def _file_not_table(io: FileIO, address: str, path: str) -> NotFoundError:
    """The error for a table address naming a regular file (exit 3, not a storage error)."""
    try:
        magic = io.read_range(path, 0, 4)
    except IcectlError:
        magic = b""
    if magic == b"PAR1":
        return NotFoundError(f"{address} is a Parquet file, not an Iceberg table", path=address,
                             hint="a Parquet file: use add-files or create --like")
    return NotFoundError(f"{address} is a file, not an Iceberg table directory", path=address,
                         hint="pass a table directory, a *.metadata.json file or namespace.table")


def walk_tables(catalog: Catalog, namespace: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every table below ``namespace`` (the whole warehouse for ``()``), depth first."""
    found: list[tuple[str, ...]] = []
    if namespace:
        found.extend(catalog.list_tables(namespace))
    for child in catalog.list_namespaces(namespace):
        found.extend(walk_tables(catalog, child))
    return found

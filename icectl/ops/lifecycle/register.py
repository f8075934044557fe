"""`icectl register`: a table enters a catalog.

Register (Spark's ``register_table`` procedure, Java's ``BaseMetastoreCatalog.registerTable``):
refused when the name exists; the metadata file is read and must be sound (it parses, Java would
load it, and every branch and tag head's manifest list or root is readable) before anything is
registered; then ``ops.commit(null, metadata)``: a SQL or Glue catalog points at the given file
(no copy), a REST server is asked to (``POST .../register``), a Hadoop warehouse gets the file as
the new table directory's ``v1.metadata.json``. A missing namespace is what Java makes of it: Hadoop
and SQL (non-strict JDBC) catalogs accept it, Glue and REST refuse (exit 3).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from icectl.catalog import Catalog, is_metadata_file, table_name_parts
from icectl.catalog.operations import TableOperations
from icectl.errors import CorruptInputError, NotFoundError, RefusedError, UsageError
from icectl.results import UNSET, CommandResult, Unset
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import WRITE_METADATA_PATH
from icectl.storage import FileIO, local_path, scheme_of
from icectl.table import read_table_metadata
from icectl.table.neighbours import metadata_neighbours
from icectl.table.scan import manifests_of
from icectl.table.write_guard import check_metadata_home, check_metadata_sound


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
    metadata_location: str | Unset = UNSET
    warning: str | Unset = UNSET  # the metadata is already another catalog entry's (they share every file)


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
    namespace, name = table_name_parts(identifier)
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


__all__ = ["RegisterResult", "read_sound_metadata", "register_table"]

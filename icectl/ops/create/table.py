"""The create-table operation: schema, spec and sort order from text, then the first commit.

``icectl.ops.create.metadata`` builds the metadata exactly as Java would; this module decides where the
table goes (a directory, or a catalog's ``namespace.table``) and writes its first version.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from icectl.catalog import Catalog, looks_like_path, open_catalog, split_identifier
from icectl.config import Config
from icectl.errors import UsageError
from icectl.ops.create.ddl import parse_partition_spec, parse_schema, parse_sort_order, schema_warnings
from icectl.ops.create.metadata import new_table_metadata
from icectl.ops.create.result import CreateResult
from icectl.ops.create.schema_file import schema_from_json_file, schema_from_parquet
from icectl.spec.properties import FORMAT_VERSION_PROPERTY, OWN_PATH_PROPERTIES, check_property_value
from icectl.spec.schema import Schema
from icectl.storage import FileIO, join, local_path, scheme_of
from icectl.table.commit import create_table
from icectl.table.delete_fence import path_property_problem

DEFAULT_FORMAT_VERSION = 2  # as Iceberg Java and Spark


@dataclass
class SchemaSource:
    """Exactly one of: DDL text, a JSON schema file, a Parquet file to copy the schema from."""

    ddl: str | None = None
    json_file: str | None = None
    like: str | None = None

    def load(self, io: FileIO, format_version: int) -> Schema:
        given = [x for x in (self.ddl, self.json_file, self.like) if x]
        if len(given) != 1:
            raise UsageError("give exactly one of --schema, --schema-file, --like")
        if self.ddl:
            return parse_schema(self.ddl, format_version=format_version)
        if self.json_file:
            return schema_from_json_file(self.json_file, io)
        assert self.like is not None
        return schema_from_parquet(self.like, io)


def parse_properties(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"property {p!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def _declared_version(props: dict[str, str]) -> int:
    """The format version a ``--property format-version=N`` asks for (default 2, as Java's)."""
    raw = props.get(FORMAT_VERSION_PROPERTY)
    if raw is None:
        return DEFAULT_FORMAT_VERSION
    try:
        return int(raw.strip())
    except ValueError:
        raise UsageError(f"table property {FORMAT_VERSION_PROPERTY}={raw!r} is not a format version",
                         hint="use --format-version 1, 2 or 3") from None


def _check_own_folders(props: dict[str, str], location: str | None, io: FileIO) -> None:
    """``write.data.path`` and kin: absolute, and no folder that would widen the delete fence beyond
    the new table (:func:`icectl.table.delete_fence.path_property_problem`): refused, exit 2."""
    for key in OWN_PATH_PROPERTIES:
        value = props.get(key)
        if value is None:
            continue
        check_property_value(key, value)
        why = path_property_problem(io, value, homes=[location] if location else [],
                                    own_metadata=[join(location, "metadata")] if location else [])
        if why is not None:
            raise UsageError(f"{key}={value!r} {why}: the delete fence would reach files that are not the "
                             "new table's", hint="give a folder of the table's own (its location, a folder "
                                                 "inside it, or one that holds no other table)")


def create(address: str, source: SchemaSource, *, config: Config, io: FileIO, partition_by: str = "",
           sort_by: str = "", properties: dict[str, str] | None = None, format_version: int | None = None,
           dry_run: bool = False) -> CreateResult:
    """Create an empty table at a directory or as ``[catalog.]namespace.table``."""
    props = dict(properties or {})
    version = format_version or _declared_version(props)
    schema = source.load(io, version)
    spec = parse_partition_spec(partition_by, schema)
    order = parse_sort_order(sort_by, schema)
    location: str | None
    where: str | Catalog
    if looks_like_path(address):
        location = os.path.abspath(local_path(address)) if scheme_of(address) == "file" else address.rstrip("/")
        where, ident = location, None
    else:
        catalog_name, namespace, name = split_identifier(address, config)
        catalog = open_catalog(config, io, catalog_name)
        location = catalog.default_table_location(namespace, name)  # None: the server chooses
        if location is not None and scheme_of(location) == "file":
            location = os.path.abspath(local_path(location))
        where, ident = catalog, ".".join((*namespace, name))
    _check_own_folders(props, location, io)
    metadata = new_table_metadata(schema=schema, location=location, partition_spec=spec, sort_order=order,
                                  properties=props, format_version=version)
    schema_now = metadata.schema()
    result = CreateResult(
        title=f"{'Would create' if dry_run else 'Created'} table {address}",
        warnings=schema_warnings(source.ddl, format_version=version) if source.ddl else [],
        table=address, dry_run=dry_run, location=location, format_version=version,
        schema=[f"{f.field_id}: {f.name} {f.field_type}{' not null' if f.required else ''}" for f in schema_now.fields],
        partition_spec=[f"{f.name}={f.transform}({schema_now.column_name(f.source_id)})"
                        for f in metadata.spec().fields],
        sort_order=[f"{f.transform}({schema_now.column_name(f.source_id)}) {f.direction} {f.null_order}"
                    for f in metadata.sort_order().fields],
        properties=dict(metadata.properties),
    )
    if dry_run:
        result.would_write = [f"{location}/metadata (first table metadata file)"]
        return result
    created = create_table(where, ident, metadata, config=config, io=io)
    result.metadata_location, result.location = created.metadata_location, created.metadata.location
    return result

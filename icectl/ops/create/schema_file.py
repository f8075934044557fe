"""Schemas from files for ``icectl create``: a JSON schema (Appendix C) or a Parquet file (``--like``).

Both return a :class:`Schema` with fresh ids assigned as Java assigns them on create, so the
result can go straight to :func:`icectl.ops.create.metadata.new_table_metadata`.

Parquet types map the way the file declares them, read through pyarrow:

| Arrow / Parquet                                  | Iceberg                                   |
|--------------------------------------------------|-------------------------------------------|
| bool                                             | boolean                                   |
| int8/16/32, uint8/16                             | int                                       |
| int64, uint32                                    | long (uint64 is refused, as Java does)    |
| float16, float32 / float64                       | float / double                            |
| decimal32/64/128/256 (precision <= 38)           | decimal(p, s)                             |
| date32, date64                                   | date                                      |
| time32, time64 (any unit)                        | time                                      |
| timestamp s/ms/us (tz / no tz)                   | timestamptz / timestamp                   |
| timestamp ns (tz / no tz)                        | timestamptz_ns / timestamp_ns             |
| INT96 (Spark's legacy timestamps)                | timestamptz, as Java's ``MessageTypeToType`` |
| string, large_string, string_view (also JSON)    | string                                    |
| binary, large_binary, binary_view                | binary                                    |
| fixed_size_binary(n)                             | fixed[n] (uuid if the file says UUID)     |
| arrow.uuid extension                             | uuid                                      |
| dictionary<values=T>                             | T                                         |
| list, large_list, fixed_size_list, list_view     | list (element required if non-nullable)   |
| map / struct                                     | map / struct                              |
| null                                             | unknown (v3)                              |

A field that is not nullable becomes required. Anything else is a UsageError naming the column.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from icectl.errors import CorruptInputError, UsageError
from icectl.ops.create.metadata import assign_fresh_ids
from icectl.spec.schema import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    UNKNOWN,
    UUID,
    VARIANT,
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
)
from icectl.storage import FileIO

_MAX_DECIMAL_PRECISION = 38


# --------------------------------------------------------------------------- JSON


def schema_from_json_file(path: str, io: FileIO | None = None) -> Schema:
    """A JSON schema (Appendix C) from a file, with fresh ids (identifier fields kept by name).

    Table metadata JSON is accepted too: its current schema is used.
    """
    data = (io or FileIO()).read(path)
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply
        raise UsageError(f"schema file is not valid JSON: {e}", path=path) from None
    if isinstance(obj, dict) and "schemas" in obj and "fields" not in obj:
        current = obj.get("current-schema-id")
        obj = next((s for s in obj["schemas"] if isinstance(s, dict) and s.get("schema-id") == current), None)
    elif isinstance(obj, dict) and "schema" in obj and "fields" not in obj:
        obj = obj["schema"]  # v1 table metadata
    if not isinstance(obj, dict):
        raise UsageError("schema file must hold a JSON schema object (Appendix C)", path=path)
    try:
        schema = Schema.from_json(obj)
    except RecursionError:
        raise UsageError("invalid schema JSON: types nested too deeply", path=path) from None
    except CorruptInputError as e:
        raise UsageError(f"invalid schema JSON: {e.message}", path=path) from None
    fresh, _ = assign_fresh_ids(schema)
    return fresh


# --------------------------------------------------------------------------- Parquet


def schema_from_parquet(path_or_url: str, io: FileIO) -> Schema:
    """The schema of a Parquet file (local or ``s3://``) as an Iceberg schema with fresh ids."""
    import pyarrow.parquet as pq  # imported lazily: only --like needs it

    with io.open(path_or_url) as f:
        try:
            parquet = pq.ParquetFile(f)
            arrow_schema = parquet.schema_arrow
            leaves = [(c.physical_type, c.logical_type.type) for c in parquet.schema]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise CorruptInputError(f"cannot read the Parquet schema: {e}", path=path_or_url) from None
    schema = schema_from_arrow(arrow_schema, leaves, path=path_or_url)
    fresh, _ = assign_fresh_ids(schema)
    return fresh


def schema_from_arrow(schema: pa.Schema, parquet_leaves: list[tuple[str, str]] | None = None,
                      *, path: str | None = None) -> Schema:
    """An Arrow schema as an Iceberg schema (ids not yet assigned: all 0).

    ``parquet_leaves`` are the Parquet leaf columns' (physical type, logical type) in file order,
    which is the depth-first order of the Arrow leaves; they tell INT96 and UUID columns apart.
    """
    converter = _ArrowConverter(iter(parquet_leaves) if parquet_leaves is not None else None, path)
    return Schema(tuple(converter.field(f, f.name) for f in schema))


class _ArrowConverter:
    def __init__(self, leaves: Iterator[tuple[str, str]] | None, path: str | None) -> None:
        self.leaves = leaves
        self.path = path

    def _leaf(self) -> tuple[str, str]:
        if self.leaves is None:
            return "", ""
        return next(self.leaves, ("", ""))

    def unsupported(self, column: str, t: pa.DataType, why: str = "") -> UsageError:
        return UsageError(f"column {column!r} has Arrow type {t}, which Iceberg cannot store{why}",
                          path=self.path, hint="give the schema as DDL or JSON instead")

    def field(self, f: pa.Field, column: str) -> NestedField:
        return NestedField(0, f.name, self.type(f.type, column), required=not f.nullable)

    def type(self, t: pa.DataType, column: str) -> IcebergType:
        if isinstance(t, pa.BaseExtensionType):
            return self._extension(t, column)
        if pa.types.is_dictionary(t):
            return self.type(t.value_type, column)  # dictionary encoding is not a type in Iceberg
        if pa.types.is_struct(t):
            return StructType(tuple(self.field(t.field(i), f"{column}.{t.field(i).name}")
                                    for i in range(t.num_fields)))
        if pa.types.is_map(t):
            key = self.type(t.key_type, f"{column}.key")
            value_field = t.item_field
            value = self.type(value_field.type, f"{column}.value")
            return MapType(0, key, 0, value, value_required=not value_field.nullable)
        if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
                or _is_list_view(t)):
            element = t.value_field
            return ListType(0, self.type(element.type, f"{column}.element"), not element.nullable)
        return self._primitive(t, column, *self._leaf())

    def _extension(self, t: pa.BaseExtensionType, column: str) -> IcebergType:
        name = t.extension_name
        if name == "arrow.uuid":
            self._leaf()
            return UUID
        if name in ("parquet.variant", "arrow.parquet.variant"):
            for _ in range(_leaf_count(t.storage_type)):
                self._leaf()
            return VARIANT
        return self.type(t.storage_type, column)  # arrow.json and others: their stored values

    def _primitive(self, t: pa.DataType, column: str, physical: str, logical: str) -> IcebergType:
        if physical == "INT96":
            return TIMESTAMPTZ  # as Java: INT96 holds instants (Spark's legacy timestamps)
        if pa.types.is_null(t):
            return UNKNOWN
        if pa.types.is_boolean(t):
            return BOOLEAN
        if pa.types.is_integer(t):
            if t.bit_width < 32 or (t.bit_width == 32 and pa.types.is_signed_integer(t)):
                return INT
            if t.bit_width == 64 and pa.types.is_unsigned_integer(t):
                raise self.unsupported(column, t, " (uint64 does not fit a long)")
            return LONG
        if pa.types.is_float16(t) or pa.types.is_float32(t):
            return FLOAT
        if pa.types.is_float64(t):
            return DOUBLE
        if pa.types.is_decimal(t):
            if t.precision > _MAX_DECIMAL_PRECISION:
                raise self.unsupported(column, t, f" (precision above {_MAX_DECIMAL_PRECISION})")
            return DecimalType(t.precision, t.scale)
        if pa.types.is_date(t):
            return DATE
        if pa.types.is_time(t):
            return TIME
        if pa.types.is_timestamp(t):
            zoned = t.tz is not None
            if t.unit == "ns":
                return TIMESTAMPTZ_NS if zoned else TIMESTAMP_NS
            return TIMESTAMPTZ if zoned else TIMESTAMP  # s and ms widen to micros
        if pa.types.is_string(t) or pa.types.is_large_string(t) or _is(t, "is_string_view"):
            return STRING
        if pa.types.is_fixed_size_binary(t):
            if logical == "UUID" and t.byte_width == 16:
                return UUID
            return FixedType(t.byte_width)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or _is(t, "is_binary_view"):
            return BINARY
        raise self.unsupported(column, t)


def _is(t: pa.DataType, predicate: str) -> bool:
    # string_view, binary_view and list_view exist only in newer pyarrow versions.
    check: Any = getattr(pa.types, predicate, None)
    return bool(check(t)) if check is not None else False


def _is_list_view(t: pa.DataType) -> bool:
    return _is(t, "is_list_view") or _is(t, "is_large_list_view")


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or _is_list_view(t):
        return _leaf_count(t.value_type)
    if isinstance(t, pa.BaseExtensionType):
        return _leaf_count(t.storage_type)
    return 1

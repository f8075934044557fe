"""The partition statistics file (spec "Partition Statistics File"): its schema, written and read as Parquet.

The schema is Java 1.10's ``PartitionStatsHandler.schema(unifiedPartitionType, formatVersion)``: field
ids 1-12 (v1/v2: the delete counters 6-9 optional) and, from v3, the delete counters required and
``13 dv_count`` (required, initial and write default 0) last. The file is written as Java's Parquet
writer writes it: every column carries its Iceberg field id (``PARQUET:field_id``), the footer holds
the Iceberg schema JSON under ``iceberg.schema``, and the ``partition`` struct is the table's unified
partition type (optional fields, ids from the partition specs), values in Parquet's logical types
(``date`` as DATE, ``timestamp`` as TIMESTAMP(MICROS), ...).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from icectl.codec.arrow_types import arrow_column, iceberg_field, primitive_arrow_type
from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.schema import (
    INT,
    LONG,
    IcebergType,
    NestedField,
    PrimitiveType,
    Schema,
    StructType,
)

if TYPE_CHECKING:
    import pyarrow as pa

PARTITION_FIELD_ID = 1
PARTITION_FIELD_NAME = "partition"
ICEBERG_SCHEMA_KEY = b"iceberg.schema"

# (id, name, type, required in v1/v2): Java's NestedField constants, in file order.
_STATS_FIELDS: tuple[tuple[int, str, PrimitiveType, bool], ...] = (
    (2, "spec_id", INT, True),
    (3, "data_record_count", LONG, True),
    (4, "data_file_count", INT, True),
    (5, "total_data_file_size_in_bytes", LONG, True),
    (6, "position_delete_record_count", LONG, False),
    (7, "position_delete_file_count", INT, False),
    (8, "equality_delete_record_count", LONG, False),
    (9, "equality_delete_file_count", INT, False),
    (10, "total_record_count", LONG, False),
    (11, "last_updated_at", LONG, False),
    (12, "last_updated_snapshot_id", LONG, False),
)
_V3_REQUIRED = frozenset({6, 7, 8, 9})  # v3: the delete counters are required
DV_COUNT = NestedField(13, "dv_count", INT, required=True, initial_default=0, write_default=0,
                       has_initial_default=True, has_write_default=True)


def stats_schema(partition_type: StructType, format_version: int) -> Schema:
    """The Iceberg schema of the file (Java ``PartitionStatsHandler.schema``)."""
    if not partition_type.fields:
        raise UnsupportedError("the table is not partitioned: it has no partition statistics")
    fields = [NestedField(PARTITION_FIELD_ID, PARTITION_FIELD_NAME, partition_type, required=True)]
    for field_id, name, t, required in _STATS_FIELDS:
        fields.append(NestedField(field_id, name, t,
                                  required=required or (format_version >= 3 and field_id in _V3_REQUIRED)))
    if format_version >= 3:
        fields.append(DV_COUNT)
    return Schema(tuple(fields))


def _primitive_arrow(t: IcebergType) -> pa.DataType:
    try:
        return primitive_arrow_type(t)
    except UnsupportedError:
        raise UnsupportedError(
            f"partition values of type {t} cannot be written to a partition statistics file") from None


def _field(f: NestedField, arrow_type: pa.DataType) -> pa.Field:
    return iceberg_field(f, arrow_type)


def arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema with field ids, nullability as required/optional, and ``iceberg.schema``."""
    import pyarrow as pa

    fields = []
    for f in schema.fields:
        if isinstance(f.field_type, StructType):
            children = [_field(c, _primitive_arrow(c.field_type)) for c in f.field_type.fields]
            fields.append(_field(f, pa.struct(children)))
        else:
            fields.append(_field(f, _primitive_arrow(f.field_type)))
    text = json.dumps(schema.to_json(), separators=(",", ":"), ensure_ascii=False)
    return pa.schema(fields, metadata={ICEBERG_SCHEMA_KEY: text.encode()})


def to_arrow(rows: Sequence[Mapping[str, Any]], schema: Schema) -> pa.Table:
    """``rows`` (``partition``: a tuple in the unified type's field order; the other columns by
    name, absent ones null) as an Arrow table of :func:`arrow_schema`."""
    import pyarrow as pa

    target = arrow_schema(schema)
    columns: list[pa.Array] = []
    for f, af in zip(schema.fields, target, strict=True):
        if isinstance(f.field_type, StructType):
            children = [arrow_column(c.field_type, [r[f.name][i] for r in rows])
                        for i, c in enumerate(f.field_type.fields)]
            if children:
                columns.append(pa.StructArray.from_arrays(children, fields=list(af.type)))
            else:
                columns.append(pa.array([{}] * len(rows), type=af.type))
        else:
            columns.append(pa.array([r.get(f.name) for r in rows], type=af.type))
    return pa.Table.from_arrays(columns, schema=target)


def write_partition_stats(rows: Sequence[Mapping[str, Any]], schema: Schema) -> bytes:
    """The Parquet bytes of the file (one row group; gzip, as Java's internal Parquet writer)."""
    import pyarrow.parquet as pq

    table = to_arrow(rows, schema)
    out = io.BytesIO()
    # No ARROW:schema (Java writes none); the Iceberg schema as Java's writer puts it in the footer.
    # Decimals as INT32/INT64 up to precision 18, as Iceberg's TypeToMessageType writes them.
    with pq.ParquetWriter(out, table.schema, compression="gzip", store_schema=False,
                          store_decimal_as_integer=True) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(dict(table.schema.metadata or {}))
    return out.getvalue()


def read_partition_stats_file(data: bytes, path: str | None = None) -> pa.Table:
    """The rows of a partition statistics Parquet file (raises CorruptInputError when it is not one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptInputError(f"cannot read partition statistics file: {e}", path=path) from None
    missing = [n for n in (PARTITION_FIELD_NAME, "spec_id", "data_record_count") if n not in table.column_names]
    if missing:
        raise CorruptInputError(f"not a partition statistics file: no column {', '.join(missing)}", path=path)
    return table


def field_ids(schema: pa.Schema) -> Iterable[tuple[str, int | None]]:
    """``(dotted name, field id)`` of every column and struct child, for comparing files."""
    for f in schema:
        yield f.name, _id(f)
        if hasattr(f.type, "num_fields") and f.type.num_fields:
            for i in range(f.type.num_fields):
                child = f.type.field(i)
                yield f"{f.name}.{child.name}", _id(child)


def _id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(b"PARQUET:field_id")
    return int(raw) if raw is not None else None


__all__ = ["DV_COUNT", "ICEBERG_SCHEMA_KEY", "PARTITION_FIELD_ID", "PARTITION_FIELD_NAME",
           "arrow_schema", "field_ids", "read_partition_stats_file", "stats_schema", "to_arrow",
           "write_partition_stats"]

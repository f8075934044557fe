"""A Parquet file's ``data_file`` metrics from its footer, as Iceberg's ParquetUtil computes them.

Columns are matched to schema fields by the Parquet field ids Iceberg writers store
(``PARQUET:field_id``); files without ids are matched by name against the table schema.
Bounds follow Iceberg's default metrics mode ``truncate(16)`` for strings and binary.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icectl.errors import UsageError
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.spec.metrics_config import MetricsMode
from icectl.spec.schema import (
    BINARY,
    DATE,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
)
from icectl.spec.values import to_bytes

TRUNCATE_LENGTH = 16  # Iceberg's default metrics mode: truncate(16)
# v3 row-lineage columns (spec "Row Lineage"): files rewritten by an engine may carry them.
ROW_LINEAGE_FIELDS = {2147483540: "_row_id", 2147483539: "_last_updated_sequence_number"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class ParquetColumn:
    """A Parquet leaf column and the schema field it holds."""

    path: str  # Parquet's dotted path, e.g. "tags.list.element"
    field: NestedField
    in_repeated: bool  # inside a list or map: Iceberg keeps only column sizes for these


def field_ids_of(arrow_schema: pa.Schema) -> dict[str, int]:
    """Parquet leaf path -> field id from the ``PARQUET:field_id`` metadata (empty when absent)."""
    out: dict[str, int] = {}

    def walk(f: pa.Field, prefix: str) -> None:
        path = f"{prefix}{f.name}"
        meta = f.metadata or {}
        fid = meta.get(b"PARQUET:field_id")
        t = f.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i), path + ".")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field, path + ".list.")
        elif pa.types.is_map(t):
            walk(t.key_field, path + ".key_value.")
            walk(t.item_field, path + ".key_value.")
        if fid is not None:
            out[path] = int(fid)

    for f in arrow_schema:
        walk(f, "")
    return out


def leaf_columns(schema: Schema, arrow_schema: pa.Schema, parquet_paths: list[str]) -> dict[str, ParquetColumn]:
    """Map each Parquet leaf path to the table field it stores (by field id, else by name)."""
    by_path_id = field_ids_of(arrow_schema)
    by_name = _schema_paths(schema)
    repeated = {f.field_id for f, rep in by_name.values() if rep}
    out: dict[str, ParquetColumn] = {}
    for p in parquet_paths:
        if p in by_path_id:
            fid = by_path_id[p]
            f = schema.find_field(fid)
            if f is None and fid in ROW_LINEAGE_FIELDS:
                out[p] = ParquetColumn(p, NestedField(fid, ROW_LINEAGE_FIELDS[fid], LONG), False)
            elif f is not None:  # else: a column the table no longer has
                out[p] = ParquetColumn(p, f, fid in repeated)
        elif p in by_name:
            f, rep = by_name[p]
            out[p] = ParquetColumn(p, f, rep)
    return out


def _schema_paths(schema: Schema) -> dict[str, tuple[NestedField, bool]]:
    """Parquet-style paths of every leaf of the schema (3-level lists and maps)."""
    out: dict[str, tuple[NestedField, bool]] = {}

    def walk(f: NestedField, prefix: str, repeated: bool) -> None:
        path = f"{prefix}{f.name}"
        t = f.field_type
        if isinstance(t, StructType):
            for c in t.fields:
                walk(c, path + ".", repeated)
        elif isinstance(t, ListType):
            walk(NestedField(t.element_id, "element", t.element_type, t.element_required), path + ".list.", True)
        elif isinstance(t, MapType):
            walk(NestedField(t.key_id, "key", t.key_type, True), path + ".key_value.", True)
            walk(NestedField(t.value_id, "value", t.value_type, t.value_required), path + ".key_value.", True)
        else:
            out[path] = (f, repeated)

    for f in schema.fields:
        walk(f, "", False)
    return out


def data_file_from_footer(path: str, file_size: int, metadata: pq.FileMetaData, schema: Schema,
                          partition: tuple[Any, ...] | None,
                          modes: Callable[[int], MetricsMode] | None = None) -> DataFile:
    """The ``data_file`` of a Parquet file, metrics summed over its row groups; ``modes`` gives each
    field id's metrics mode (default: Iceberg's truncate(16) for every column)."""
    arrow_schema = metadata.schema.to_arrow_schema()
    paths = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    columns = leaf_columns(schema, arrow_schema, paths)
    if not columns and metadata.num_columns:
        raise UsageError(f"no column of {path} matches the table schema (by field id or name)", path=path)
    sizes: dict[int, int] = {}
    values: dict[int, int] = {}
    nulls: dict[int, int | None] = {}
    lower: dict[int, Any] = {}
    upper: dict[int, Any] = {}
    no_bounds: set[int] = set()
    offsets: list[int] = []
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        first_offset = None
        for i in range(rg.num_columns):
            chunk = rg.column(i)
            col = columns.get(chunk.path_in_schema)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            first_offset = start if first_offset is None else min(first_offset, start)
            if col is None:
                continue
            fid = col.field.field_id
            mode = modes(fid) if modes is not None else None
            if mode is not None and not mode.counts:
                continue  # none: not even the column's size, as Java's ParquetMetrics
            sizes[fid] = sizes.get(fid, 0) + chunk.total_compressed_size
            if col.in_repeated:
                continue  # Iceberg keeps only sizes for list elements and map keys/values
            values[fid] = values.get(fid, 0) + chunk.num_values
            st = chunk.statistics
            if st is None or not st.has_null_count:
                nulls[fid] = None
            elif nulls.get(fid, 0) is not None:
                nulls[fid] = nulls.get(fid, 0) + st.null_count
            if mode is not None and not mode.bounds:
                no_bounds.add(fid)
            if fid in no_bounds:
                continue
            if st is None or not st.has_min_max:
                # A row group of only nulls has no min/max and does not widen the bounds.
                if st is not None and st.has_null_count and st.null_count == chunk.num_values:
                    continue
                no_bounds.add(fid)
                lower.pop(fid, None)
                upper.pop(fid, None)
                continue
            lo, hi = _internal(st.min, col.field.field_type), _internal(st.max, col.field.field_type)
            if lo is None or hi is None:
                no_bounds.add(fid)
                continue
            if fid not in lower or lo < lower[fid]:
                lower[fid] = lo
            if fid not in upper or hi > upper[fid]:
                upper[fid] = hi
        if first_offset is not None:
            offsets.append(first_offset)
    lower_bytes: dict[int, bytes] = {}
    upper_bytes: dict[int, bytes] = {}
    for fid, lo in lower.items():
        t = schema.find_type(fid) or LONG  # LONG: a row-lineage column
        length = modes(fid).truncate if modes is not None else TRUNCATE_LENGTH
        lo_t = _truncate_lower(lo, t, length)
        hi_t = _truncate_upper(upper[fid], t, length)
        lower_bytes[fid] = to_bytes(t, lo_t)
        if hi_t is not None:
            upper_bytes[fid] = to_bytes(t, hi_t)
    return DataFile(
        content=DataFileContent.DATA, file_path=path, file_format="PARQUET", partition=partition,
        record_count=metadata.num_rows, file_size_in_bytes=file_size, column_sizes=sizes, value_counts=values,
        null_value_counts={k: v for k, v in nulls.items() if v is not None}, nan_value_counts=None,
        lower_bounds=lower_bytes, upper_bounds=upper_bytes, split_offsets=tuple(sorted(offsets)),
        sort_order_id=None)


def _internal(value: Any, t: IcebergType) -> Any:
    """A Parquet statistic as the spec's internal value of the column type (None: unusable)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None  # NaN bounds are not valid Iceberg bounds
    if t in (TIMESTAMP, TIMESTAMPTZ, TIMESTAMP_NS, TIMESTAMPTZ_NS):
        if isinstance(value, datetime.datetime):
            nanos = t in (TIMESTAMP_NS, TIMESTAMPTZ_NS)
            dt = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
            delta = dt - _EPOCH
            micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
            return micros * 1000 if nanos else micros
        return int(value)
    if t == DATE:
        if isinstance(value, datetime.date):
            return (value - datetime.date(1970, 1, 1)).days
        return int(value)
    if t == TIME:
        if isinstance(value, datetime.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return int(value)
    if isinstance(t, DecimalType):
        return decimal.Decimal(value) if not isinstance(value, decimal.Decimal) else value
    if t == STRING:
        return value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
    if t == BINARY or isinstance(t, FixedType):
        return bytes(value)
    if str(t) == "uuid":
        import uuid

        return value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value))
    if str(t) in ("int", "long"):
        return int(value)
    if str(t) in ("float", "double"):
        return float(value)
    if str(t) == "boolean":
        return bool(value)
    return None  # geometry, variant, unknown: no bounds


def _truncate_lower(value: Any, t: IcebergType, length: int | None = TRUNCATE_LENGTH) -> Any:
    if length is None:
        return value
    if t == STRING and isinstance(value, str):
        cps = list(value)
        return "".join(cps[:length])
    if t == BINARY and isinstance(value, bytes):
        return value[:length]
    return value


def _truncate_upper(value: Any, t: IcebergType, length: int | None = TRUNCATE_LENGTH) -> Any:
    """Truncate and round up so the result still bounds every value; None when impossible."""
    if length is None:
        return value
    if t == STRING and isinstance(value, str):
        cps = list(value)
        if len(cps) <= length:
            return value
        cps = cps[:length]
        for i in range(len(cps) - 1, -1, -1):
            cp = ord(cps[i]) + 1
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0xE000  # skip surrogates, as Java's UnicodeUtil does
            if cp <= 0x10FFFF:
                return "".join(cps[:i]) + chr(cp)
        return None
    if t == BINARY and isinstance(value, bytes):
        if len(value) <= length:
            return value
        b = bytearray(value[:length])
        for i in range(len(b) - 1, -1, -1):
            if b[i] < 0xFF:
                b[i] += 1
                return bytes(b[: i + 1])
        return None
    return value


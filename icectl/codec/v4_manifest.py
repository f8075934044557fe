"""v4 root and leaf manifests as the merged spec lays them out: Parquet files of ``tracked_file``
rows, every field carrying its Iceberg field id, read back by field id only.

The model is :mod:`icectl.spec.tracked_file`; the ids and the choices where the spec text is not
settled are :mod:`icectl.codec.v4_schema`. ``content_stats`` (146) holds one struct per column
(id ``10000 + 200 * column id``) with typed bounds and counts; icectl's model keeps bounds as
Appendix D bytes, converted here. Bytes in, bytes out: callers do the I/O.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icectl.codec import v4_schema as ids
from icectl.codec.arrow_types import (
    arrow_column,
    arrow_field,
    field_id_of,
    has_arrow_type,
    primitive_arrow_type,
    python_values,
)
from icectl.errors import CorruptInputError, IcectlError, UnsupportedError
from icectl.spec.schema import IcebergType, PrimitiveType, StructType
from icectl.spec.tracked_file import (
    FORMAT_VERSION,
    LEAF_TYPES,
    ROOT_TYPES,
    STAT_FIELDS,
    ContentStats,
    ContentType,
    DeletionVector,
    EntryStatus,
    ManifestInfo,
    TrackedFile,
    Tracking,
    V4Manifest,
    check_row,
)
from icectl.spec.values import from_bytes, to_bytes

if TYPE_CHECKING:
    import pyarrow as pa

PARQUET_MAGIC = b"PAR1"


def is_parquet(data: bytes) -> bool:
    return len(data) >= 8 and data[:4] == PARQUET_MAGIC and data[-4:] == PARQUET_MAGIC


def probe_parquet_file(read_range: Callable[[int, int], bytes], size: int) -> None:
    """Whether a file of ``size`` bytes opens as Parquet without decoding it: the magic at both ends
    and a footer length that fits (CorruptInputError otherwise)."""
    if size < 12:
        raise CorruptInputError(f"not a Parquet file ({size} bytes)")
    head, tail = read_range(0, 4), read_range(size - 8, 8)
    if head != PARQUET_MAGIC or tail[4:] != PARQUET_MAGIC:
        raise CorruptInputError("not a Parquet file (no PAR1 magic at both ends)")
    footer = int.from_bytes(tail[:4], "little")
    if footer <= 0 or footer > size - 12:
        raise CorruptInputError(f"Parquet footer length {footer} does not fit the file's {size} bytes")


# --------------------------------------------------------------------------- schema


def _pa() -> Any:
    import pyarrow as pa

    return pa


def _struct(fields: Sequence[pa.Field]) -> pa.DataType:
    return _pa().struct(list(fields))


def _tracking_type() -> pa.DataType:
    pa = _pa()
    return _struct([
        arrow_field(ids.STATUS, "status", pa.int32(), required=True),
        arrow_field(ids.SNAPSHOT_ID, "snapshot_id", pa.int64()),
        arrow_field(ids.SEQUENCE_NUMBER, "sequence_number", pa.int64()),
        arrow_field(ids.FILE_SEQUENCE_NUMBER, "file_sequence_number", pa.int64()),
        arrow_field(ids.MODIFIED_SNAPSHOT_ID, "modified_snapshot_id", pa.int64()),
        arrow_field(ids.FIRST_ROW_ID, "first_row_id", pa.int64()),
        arrow_field(ids.DELETED_POSITIONS, "deleted_positions", pa.binary()),
        arrow_field(ids.REPLACED_POSITIONS, "replaced_positions", pa.binary()),
    ])


def _dv_type() -> pa.DataType:
    pa = _pa()
    return _struct([
        arrow_field(ids.DV_LOCATION, "location", pa.string(), required=True),
        arrow_field(ids.DV_OFFSET, "offset", pa.int64(), required=True),
        arrow_field(ids.DV_SIZE_IN_BYTES, "size_in_bytes", pa.int64(), required=True),
        arrow_field(ids.DV_CARDINALITY, "cardinality", pa.int64(), required=True),
        arrow_field(ids.DV_KEY_METADATA, "key_metadata", pa.binary()),
    ])


_INFO_FIELDS = (  # (id, name, attribute, int32?)
    (ids.ADDED_FILES_COUNT, "added_files_count", True), (ids.EXISTING_FILES_COUNT, "existing_files_count", True),
    (ids.DELETED_FILES_COUNT, "deleted_files_count", True), (ids.REPLACED_FILES_COUNT, "replaced_files_count", True),
    (ids.ADDED_ROWS_COUNT, "added_rows_count", False), (ids.EXISTING_ROWS_COUNT, "existing_rows_count", False),
    (ids.DELETED_ROWS_COUNT, "deleted_rows_count", False), (ids.MIN_SEQUENCE_NUMBER, "min_sequence_number", False),
    (ids.MANIFEST_FORMAT_VERSION, "format_version", True),
)


def _info_type() -> pa.DataType:
    pa = _pa()
    fields = [arrow_field(fid, name, pa.int32() if small else pa.int64(), required=True)
              for fid, name, small in _INFO_FIELDS]
    fields.append(arrow_field(ids.MANIFEST_DV, "dv", pa.binary()))
    return _struct(fields)


def _unique(names: Iterable[tuple[int, str]]) -> dict[int, str]:
    out: dict[int, str] = {}
    seen: set[str] = set()
    for fid, name in names:
        clean = re.sub(r"[^A-Za-z0-9_]", "_", name) or f"field_{fid}"
        if clean in seen:
            clean = f"{clean}_{fid}"
        seen.add(clean)
        out[fid] = clean
    return out


def _bounded(t: IcebergType) -> bool:
    return isinstance(t, PrimitiveType) and has_arrow_type(t) and t.name not in ("variant", "unknown")


def _is_float(t: IcebergType) -> bool:
    return isinstance(t, PrimitiveType) and t.name in ("float", "double")


def stats_columns(rows: Iterable[TrackedFile], column_types: Mapping[int, IcebergType]) -> list[int]:
    """The columns with any statistic in ``rows`` that v4 can hold (scalar, typed, id < 999,950)."""
    found: set[int] = set()
    for e in rows:
        cs = e.content_stats
        if cs is None:
            continue
        for name in STAT_FIELDS:
            found.update(getattr(cs, name) or ())
    return sorted(c for c in found if c in column_types and 0 <= c < ids.MAX_STATS_FIELD_ID
                  and isinstance(column_types[c], PrimitiveType))


def _stats_type(columns: Sequence[int], column_types: Mapping[int, IcebergType],
                names: Mapping[int, str]) -> pa.DataType:
    pa = _pa()
    structs = []
    for c in columns:
        t, base = column_types[c], ids.stats_struct_id(c)
        members = []
        if _bounded(t):
            at = primitive_arrow_type(t)
            members += [arrow_field(base + ids.LOWER_BOUND, "lower_bound", at),
                        arrow_field(base + ids.UPPER_BOUND, "upper_bound", at)]
        members += [arrow_field(base + ids.VALUE_COUNT, "value_count", pa.int64()),
                    arrow_field(base + ids.NULL_VALUE_COUNT, "null_value_count", pa.int64())]
        if _is_float(t):
            members.append(arrow_field(base + ids.NAN_VALUE_COUNT, "nan_value_count", pa.int64()))
        structs.append(arrow_field(base, names.get(c, f"field_{c}"), _struct(members)))
    return _struct(structs)


def tracked_file_schema(partition_type: StructType, stats_column_ids: Sequence[int],
                        column_types: Mapping[int, IcebergType],
                        column_names: Mapping[int, str] | None = None) -> pa.Schema:
    """The Arrow schema of a v4 manifest (fields in Java's ``TrackedFile`` order). ``partition``
    and ``content_stats`` are left out when they would be empty groups, as Java does."""
    pa = _pa()
    fields = [
        arrow_field(ids.TRACKING, "tracking", _tracking_type(), required=True),
        arrow_field(ids.CONTENT_TYPE, "content_type", pa.int32(), required=True),
        arrow_field(ids.LOCATION, "location", pa.string(), required=True),
        arrow_field(ids.FILE_FORMAT, "file_format", pa.string(), required=True),
        arrow_field(ids.RECORD_COUNT, "record_count", pa.int64(), required=True),
        arrow_field(ids.FILE_SIZE_IN_BYTES, "file_size_in_bytes", pa.int64(), required=True),
        arrow_field(ids.SPEC_ID, "spec_id", pa.int32()),
    ]
    if partition_type.fields:
        pnames = _unique((f.field_id, f.name) for f in partition_type.fields)
        fields.append(arrow_field(ids.PARTITION, "partition", _struct([
            arrow_field(f.field_id, pnames[f.field_id], primitive_arrow_type(f.field_type, "partition values"))
            for f in partition_type.fields])))
    if stats_column_ids:
        names = _unique((c, (column_names or {}).get(c, f"field_{c}")) for c in stats_column_ids)
        fields.append(arrow_field(ids.CONTENT_STATS, "content_stats",
                                  _stats_type(stats_column_ids, column_types, names)))
    fields += [
        arrow_field(ids.SORT_ORDER_ID, "sort_order_id", pa.int32()),
        arrow_field(ids.DELETION_VECTOR, "deletion_vector", _dv_type()),
        arrow_field(ids.MANIFEST_INFO, "manifest_info", _info_type()),
        arrow_field(ids.KEY_METADATA, "key_metadata", pa.binary()),
        arrow_field(ids.SPLIT_OFFSETS, "split_offsets",
                    pa.list_(arrow_field(ids.SPLIT_OFFSETS_ELEMENT, "element", pa.int64(), required=True))),
        arrow_field(ids.EQUALITY_IDS, "equality_ids",
                    pa.list_(arrow_field(ids.EQUALITY_IDS_ELEMENT, "element", pa.int32(), required=True))),
    ]
    return pa.schema(fields)


# --------------------------------------------------------------------------- writing


def _struct_array(t: pa.DataType, children: list[pa.Array], present: list[bool]) -> pa.Array:
    pa = _pa()
    mask = pa.array([not p for p in present], type=pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)


def _column(values: list[Any], t: pa.DataType) -> pa.Array:
    return _pa().array(values, type=t)


def _bound_value(t: IcebergType, raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        value = from_bytes(t, raw)
    except (IcectlError, ValueError, TypeError):
        return None  # a bound v4 cannot type (e.g. a truncated fixed) is left out: unknown, not wrong
    if isinstance(t, PrimitiveType) and t.name == "fixed" and len(value) != getattr(t, "length", len(value)):
        return None
    return value


def _stats_array(rows: list[TrackedFile], t: pa.DataType, columns: Sequence[int],
                 column_types: Mapping[int, IcebergType]) -> pa.Array:
    pa = _pa()
    children = []
    for c, field in zip(columns, t, strict=True):
        ct = column_types[c]
        stats = [e.content_stats or ContentStats() for e in rows]
        members: list[Any] = []
        for member in field.type:
            offset = int(field_id_of(member) or 0) - ids.stats_struct_id(c)
            if offset in (ids.LOWER_BOUND, ids.UPPER_BOUND):
                name = "lower_bounds" if offset == ids.LOWER_BOUND else "upper_bounds"
                values = [_bound_value(ct, (getattr(s, name) or {}).get(c)) for s in stats]
                try:
                    members.append(arrow_column(ct, values))
                except (pa.ArrowException, ValueError, TypeError):
                    members.append(pa.nulls(len(rows), member.type))
            else:
                name = {ids.VALUE_COUNT: "value_counts", ids.NULL_VALUE_COUNT: "null_value_counts",
                        ids.NAN_VALUE_COUNT: "nan_value_counts"}[offset]
                members.append(_column([(getattr(s, name) or {}).get(c) for s in stats], pa.int64()))
        has = [any(m[i].is_valid for m in members) for i in range(len(rows))]
        children.append(_struct_array(field.type, members, has))
    return _struct_array(t, children, [e.content_stats is not None for e in rows])


def encode_rows(rows: list[TrackedFile], schema: pa.Schema, partition_type: StructType,
                stats_column_ids: Sequence[int], column_types: Mapping[int, IcebergType]) -> pa.Table:
    """``rows`` as an Arrow table of ``schema`` (:func:`tracked_file_schema`)."""
    pa = _pa()
    cols: dict[int, Any] = {}
    tr = [e.tracking for e in rows]
    tt = schema.field("tracking").type
    cols[ids.TRACKING] = _struct_array(tt, [
        _column([int(t.status) for t in tr], pa.int32()), _column([t.snapshot_id for t in tr], pa.int64()),
        _column([t.sequence_number for t in tr], pa.int64()),
        _column([t.file_sequence_number for t in tr], pa.int64()),
        _column([t.modified_snapshot_id for t in tr], pa.int64()), _column([t.first_row_id for t in tr], pa.int64()),
        _column([t.deleted_positions for t in tr], pa.binary()),
        _column([t.replaced_positions for t in tr], pa.binary())], [True] * len(rows))
    cols[ids.CONTENT_TYPE] = _column([int(e.content_type) for e in rows], pa.int32())
    cols[ids.LOCATION] = _column([e.location for e in rows], pa.string())
    cols[ids.FILE_FORMAT] = _column([e.file_format for e in rows], pa.string())
    cols[ids.RECORD_COUNT] = _column([e.record_count for e in rows], pa.int64())
    cols[ids.FILE_SIZE_IN_BYTES] = _column([e.file_size_in_bytes for e in rows], pa.int64())
    cols[ids.SPEC_ID] = _column([e.spec_id for e in rows], pa.int32())
    if partition_type.fields:
        known = {f.field_id for f in partition_type.fields}
        for e in rows:
            if e.partition is not None and not set(e.partition) <= known:
                raise ValueError(f"{e.location}: partition fields {sorted(set(e.partition) - known)} "
                                 "are not in the table's partition type")
        children = [arrow_column(f.field_type, [None if e.partition is None else e.partition.get(f.field_id)
                                                for e in rows]) for f in partition_type.fields]
        cols[ids.PARTITION] = _struct_array(schema.field("partition").type, children,
                                            [e.partition is not None for e in rows])
    if stats_column_ids:
        cols[ids.CONTENT_STATS] = _stats_array(rows, schema.field("content_stats").type, stats_column_ids,
                                               column_types)
    cols[ids.SORT_ORDER_ID] = _column([e.sort_order_id for e in rows], pa.int32())
    dvs = [e.deletion_vector for e in rows]
    cols[ids.DELETION_VECTOR] = _struct_array(schema.field("deletion_vector").type, [
        _column([d.location if d else "" for d in dvs], pa.string()),
        _column([d.offset if d else 0 for d in dvs], pa.int64()),
        _column([d.size_in_bytes if d else 0 for d in dvs], pa.int64()),
        _column([d.cardinality if d else 0 for d in dvs], pa.int64()),
        _column([d.key_metadata if d else None for d in dvs], pa.binary())], [d is not None for d in dvs])
    infos = [e.manifest_info for e in rows]
    info_children = [_column([getattr(i, name) if i else 0 for i in infos], pa.int32() if small else pa.int64())
                     for _, name, small in _INFO_FIELDS]
    info_children.append(_column([i.dv if i else None for i in infos], pa.binary()))
    cols[ids.MANIFEST_INFO] = _struct_array(schema.field("manifest_info").type, info_children,
                                            [i is not None for i in infos])
    cols[ids.KEY_METADATA] = _column([e.key_metadata for e in rows], pa.binary())
    cols[ids.SPLIT_OFFSETS] = _column([None if e.split_offsets is None else list(e.split_offsets) for e in rows],
                                      schema.field("split_offsets").type)
    cols[ids.EQUALITY_IDS] = _column([None if e.equality_ids is None else list(e.equality_ids) for e in rows],
                                     schema.field("equality_ids").type)
    arrays = [cols[int(field_id_of(f) or -1)] for f in schema]
    # Required struct children filled with placeholders under a null parent must not fail the
    # nullability check: build the table from arrays, then cast to the schema.
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass(frozen=True, slots=True)
class V4WriteResult:
    """A written v4 manifest's bytes and, for a leaf, the manifest_info of its root entry."""

    data: bytes
    rows: int


def write_v4_manifest(rows: Iterable[TrackedFile], *, root: bool, partition_type: StructType,
                      column_types: Mapping[int, IcebergType], schema_id: int,
                      column_names: Mapping[int, str] | None = None) -> V4WriteResult:
    """Write a root (``root=True``) or a v4 leaf as Parquet. ``partition_type`` is the union
    partition type (every field optional); ``column_types`` (column id -> type) types the
    content stats. Rows are checked against the spec's rules first (ValueError: a writer bug)."""
    pa = _pa()
    import pyarrow.parquet as pq

    entries = list(rows)
    for e in entries:
        check_row(e, root=root)
    columns = stats_columns(entries, column_types)
    schema = tracked_file_schema(partition_type, columns, column_types, column_names)
    table = encode_rows(entries, schema, partition_type, columns, column_types)
    out = io.BytesIO()
    metadata = {ids.KV_SCHEMA_ID: str(schema_id), ids.KV_FORMAT_VERSION: str(FORMAT_VERSION)}
    with pq.ParquetWriter(out, table.schema, compression=ids.PARQUET_COMPRESSION, store_schema=False,
                          store_decimal_as_integer=True) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(metadata)
    del pa
    return V4WriteResult(out.getvalue(), len(entries))


# --------------------------------------------------------------------------- reading


def _by_id(fields: Iterable[pa.Field], where: str) -> dict[int, tuple[int, pa.Field]]:
    out: dict[int, tuple[int, pa.Field]] = {}
    for i, f in enumerate(fields):
        fid = field_id_of(f)
        if fid is None:
            raise CorruptInputError(f"v4 manifest field {where}{f.name} has no Parquet field id",
                                    hint="v4 manifests are read by field id; rewrite it with a spec-conforming writer")
        if fid in out:
            raise CorruptInputError(f"v4 manifest has two fields with id {fid} in {where or 'tracked_file'} "
                                    f"({out[fid][1].name}, {f.name})")
        out[fid] = (i, f)
    return out


def read_v4_metadata(data: bytes) -> dict[str, str]:
    """A Parquet manifest's key-value metadata."""
    pa = _pa()
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(pa.BufferReader(data)).metadata or {}
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptInputError(f"cannot read v4 manifest: {e}") from None
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in meta.items()}


def _values(arr: pa.Array) -> list[Any]:
    return arr.to_pylist()


def _struct_rows(arr: pa.Array, where: str, wanted: Mapping[int, str],
                 convert: Mapping[int, Callable[[pa.Array], list[Any]]] | None = None) -> list[dict[str, Any] | None]:
    """A struct column as dicts keyed by ``wanted`` names (resolved by field id); null rows None."""
    fields = _by_id(arr.type, where + ".")
    valid = arr.is_valid().to_pylist()
    cols: dict[str, list[Any]] = {}
    for fid, name in wanted.items():
        if fid in fields:
            child = arr.field(fields[fid][0])
            cols[name] = (convert or {}).get(fid, _values)(child)
    return [({n: c[i] for n, c in cols.items()} if valid[i] else None) for i in range(len(arr))]


_TRACKING = {ids.STATUS: "status", ids.SNAPSHOT_ID: "snapshot_id", ids.SEQUENCE_NUMBER: "sequence_number",
             ids.FILE_SEQUENCE_NUMBER: "file_sequence_number", ids.MODIFIED_SNAPSHOT_ID: "modified_snapshot_id",
             ids.FIRST_ROW_ID: "first_row_id", ids.DELETED_POSITIONS: "deleted_positions",
             ids.REPLACED_POSITIONS: "replaced_positions"}
_DV = {ids.DV_LOCATION: "location", ids.DV_OFFSET: "offset", ids.DV_SIZE_IN_BYTES: "size_in_bytes",
       ids.DV_CARDINALITY: "cardinality", ids.DV_KEY_METADATA: "key_metadata"}
_INFO = {fid: name for fid, name, _ in _INFO_FIELDS} | {ids.MANIFEST_DV: "dv"}
_REQUIRED = {ids.TRACKING: "tracking", ids.CONTENT_TYPE: "content_type", ids.LOCATION: "location",
             ids.FILE_FORMAT: "file_format", ids.RECORD_COUNT: "record_count",
             ids.FILE_SIZE_IN_BYTES: "file_size_in_bytes"}


def _partition_reader(arr: pa.Array, partition_types: Mapping[int, IcebergType]) -> list[dict[int, Any] | None]:
    fields = _by_id(arr.type, "partition.")
    valid = arr.is_valid().to_pylist()
    cols: dict[int, list[Any]] = {}
    for fid, (i, _f) in fields.items():
        child = arr.field(i)
        t = partition_types.get(fid)
        cols[fid] = python_values(t, child) if t is not None else _values(child)
    return [({fid: c[i] for fid, c in cols.items()} if valid[i] else None) for i in range(len(arr))]


def _stats_reader(arr: pa.Array, column_types: Mapping[int, IcebergType]) -> list[ContentStats | None]:
    structs = _by_id(arr.type, "content_stats.")
    valid = arr.is_valid().to_pylist()
    n = len(arr)
    acc: list[dict[str, dict[int, Any]]] = [{name: {} for name in STAT_FIELDS} for _ in range(n)]
    for sid, (si, _sf) in structs.items():
        c = ids.stats_field_of(sid)
        if c is None:
            continue  # reserved ids (9000, 9200) and anything else icectl does not model
        s = arr.field(si)
        s_valid = s.is_valid().to_pylist()
        ct = column_types.get(c)
        for mid, (mi, _mf) in _by_id(s.type, f"content_stats.{c}.").items():
            offset = mid - sid
            child = s.field(mi)
            if offset in (ids.LOWER_BOUND, ids.UPPER_BOUND):
                if ct is None or not _bounded(ct):
                    continue
                name = "lower_bounds" if offset == ids.LOWER_BOUND else "upper_bounds"
                values = [None if v is None else to_bytes(ct, v) for v in python_values(ct, child)]
            elif offset in (ids.VALUE_COUNT, ids.NULL_VALUE_COUNT, ids.NAN_VALUE_COUNT):
                name = {ids.VALUE_COUNT: "value_counts", ids.NULL_VALUE_COUNT: "null_value_counts",
                        ids.NAN_VALUE_COUNT: "nan_value_counts"}[offset]
                values = _values(child)
            else:
                continue
            for i, v in enumerate(values):
                if v is not None and s_valid[i] and valid[i]:
                    acc[i][name][c] = v
    return [ContentStats(**{k: (v or None) for k, v in a.items()}) if valid[i] else None for i, a in enumerate(acc)]


def read_v4_manifest(data: bytes, *, partition_types: Mapping[int, IcebergType],
                     column_types: Mapping[int, IcebergType], root: bool | None = None) -> V4Manifest:
    """Decode a v4 Parquet manifest by field ids. ``partition_types``: partition field id -> type
    (any spec's); ``column_types``: column id -> type, for typed bounds. ``root``: check the
    content types a root (True) or a leaf (False) may hold."""
    pa = _pa()
    import pyarrow.parquet as pq

    if not is_parquet(data):
        raise CorruptInputError("v4 manifest is not a Parquet file", hint="v4 manifests are Parquet (tracked_file)")
    try:
        table = pq.read_table(pa.BufferReader(data))
        metadata = read_v4_metadata(data)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptInputError(f"cannot read v4 manifest: {e}") from None
    fields = _by_id(table.schema, "")
    for fid, name in _REQUIRED.items():
        if fid not in fields:
            raise CorruptInputError(f"v4 manifest has no {name} field (id {fid})")
    if ids.REMOVED_FORMAT_VERSION in fields:
        raise CorruptInputError("v4 manifest has tracked_file field 157 (format_version), which the merged spec "
                                "moved into manifest_info", hint="rewrite it with a spec-conforming writer")
    try:
        return _decode(table, fields, metadata, partition_types, column_types, root)
    except (pa.ArrowException, ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
        # A field of the wrong Parquet type, a value no Iceberg type holds: damaged, not a bug of ours.
        raise CorruptInputError(f"v4 manifest has a value icectl cannot decode: {type(e).__name__}: {e}",
                                hint="nothing was changed") from None


def _decode(table: Any, fields: dict[int, tuple[int, Any]], metadata: dict[str, str],
            partition_types: Mapping[int, IcebergType], column_types: Mapping[int, IcebergType],
            root: bool | None) -> V4Manifest:
    batch = table.combine_chunks()

    def col(fid: int) -> Any:
        return batch.column(fields[fid][0]).chunk(0) if fid in fields and batch.num_rows else None

    n = batch.num_rows
    if n == 0:
        return V4Manifest([], metadata)
    if ids.COLUMN_FILES in fields and col(ids.COLUMN_FILES).null_count != n:
        raise UnsupportedError("v4 manifest has column files (158), which icectl does not support yet",
                               hint="nothing was changed")

    def plain(fid: int) -> list[Any]:
        c = col(fid)
        return [None] * n if c is None else _values(c)

    tracking = _struct_rows(col(ids.TRACKING), "tracking", _TRACKING)
    dvs = _struct_rows(col(ids.DELETION_VECTOR), "deletion_vector", _DV) if ids.DELETION_VECTOR in fields \
        else [None] * n
    infos = _struct_rows(col(ids.MANIFEST_INFO), "manifest_info", _INFO) if ids.MANIFEST_INFO in fields \
        else [None] * n
    partitions = _partition_reader(col(ids.PARTITION), partition_types) if ids.PARTITION in fields else [None] * n
    stats = _stats_reader(col(ids.CONTENT_STATS), column_types) if ids.CONTENT_STATS in fields else [None] * n
    content_types, locations, formats = plain(ids.CONTENT_TYPE), plain(ids.LOCATION), plain(ids.FILE_FORMAT)
    records, sizes, spec_ids = plain(ids.RECORD_COUNT), plain(ids.FILE_SIZE_IN_BYTES), plain(ids.SPEC_ID)
    sort_orders, keys = plain(ids.SORT_ORDER_ID), plain(ids.KEY_METADATA)
    offsets, eq_ids = plain(ids.SPLIT_OFFSETS), plain(ids.EQUALITY_IDS)
    allowed = None if root is None else (ROOT_TYPES if root else LEAF_TYPES)
    entries = []
    for i in range(n):
        where = f"v4 manifest row {i} ({locations[i]})"
        try:
            content_type = ContentType(content_types[i])
        except ValueError:
            raise CorruptInputError(
                f"{where} has content_type {content_types[i]!r}, which v4 does not define") from None
        if content_type == ContentType.POSITION_DELETES:
            raise CorruptInputError(f"{where} has content_type 1 (position deletes), which v4 manifests must not "
                                    "hold (deletion vectors are colocated with their data file)")
        if allowed is not None and content_type not in allowed:
            raise CorruptInputError(f"{where}: a v4 {'root' if root else 'leaf'} manifest cannot hold "
                                    f"{content_type.name} entries")
        t = tracking[i]
        if t is None or t.get("status") is None:
            raise CorruptInputError(f"{where} has no tracking.status")
        try:
            status = EntryStatus(t["status"])
        except ValueError:
            raise CorruptInputError(f"{where} has tracking.status {t['status']!r} (0-4 are defined)") from None
        if None in (locations[i], formats[i], records[i], sizes[i]):
            raise CorruptInputError(f"{where} lacks a required field (location, file_format, record_count, "
                                    "file_size_in_bytes)")
        dv, info = dvs[i], infos[i]
        if dv is not None and None in (dv.get("location"), dv.get("offset"), dv.get("size_in_bytes"),
                                       dv.get("cardinality")):
            raise CorruptInputError(f"{where} has a deletion_vector without location, offset, size or cardinality")
        if info is not None and any(info.get(name) is None for _, name, _ in _INFO_FIELDS):
            missing = [name for _, name, _ in _INFO_FIELDS if info.get(name) is None]
            raise CorruptInputError(f"{where} has manifest_info without {', '.join(missing)}")
        entries.append(TrackedFile(
            tracking=Tracking(status, t.get("snapshot_id"), t.get("sequence_number"), t.get("file_sequence_number"),
                              t.get("modified_snapshot_id"), t.get("first_row_id"), t.get("deleted_positions"),
                              t.get("replaced_positions")),
            content_type=content_type, location=locations[i], file_format=formats[i], record_count=records[i],
            file_size_in_bytes=sizes[i], spec_id=spec_ids[i], partition=partitions[i], content_stats=stats[i],
            sort_order_id=sort_orders[i],
            deletion_vector=None if dv is None else DeletionVector(dv["location"], dv["offset"], dv["size_in_bytes"],
                                                                  dv["cardinality"], dv.get("key_metadata")),
            manifest_info=None if info is None else ManifestInfo(**info),
            key_metadata=keys[i], split_offsets=None if offsets[i] is None else tuple(offsets[i]),
            equality_ids=None if eq_ids[i] is None else tuple(eq_ids[i])))
    return V4Manifest(entries, metadata)


def stored_content_stats(cs: ContentStats, column_types: Mapping[int, IcebergType]) -> ContentStats:
    """What of ``cs`` a v4 manifest keeps, as reading it back gives it: columns v4 can type,
    bounds re-encoded from their typed value, NaN counts of float columns only."""
    keep = set(stats_columns([_with_stats(cs)], column_types))
    out: dict[str, dict[int, Any] | None] = {}
    for name in STAT_FIELDS:
        values = {c: v for c, v in (getattr(cs, name) or {}).items() if c in keep}
        if name in ("lower_bounds", "upper_bounds"):
            values = {c: to_bytes(column_types[c], typed) for c, v in values.items() if _bounded(column_types[c])
                      and (typed := _bound_value(column_types[c], v)) is not None}
        elif name == "nan_value_counts":
            values = {c: v for c, v in values.items() if _is_float(column_types[c])}
        out[name] = {c: values[c] for c in sorted(values) if values[c] is not None} or None
    return ContentStats(**out)


def _with_stats(cs: ContentStats) -> TrackedFile:
    return TrackedFile(Tracking(EntryStatus.EXISTING), ContentType.DATA, "", "", 0, 0, content_stats=cs)

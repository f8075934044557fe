"""Manifests as Arrow tables: the form the manifest cache stores and fast views read.

:func:`manifest_table` decodes a manifest into one Arrow table with every entry and every field,
inheritance applied exactly as :func:`~icectl.codec.manifest_reader.read_manifest` applies it;
:func:`entries_from_table` turns it back into the same :class:`ManifestEntry` objects
(:mod:`icectl.codec.manifest_list_arrow` does the same for manifest lists). Columns are built
in one pass over fastavro's records and converted with one ``pa.array`` per column (a dataclass
per entry costs more than the decode).

Partition values are stored as a ``list<binary>`` of Iceberg single-value bytes
(:func:`icectl.spec.values.to_bytes`), one per partition field, so every type round-trips exactly
(decimal scale, uuid, -0.0). Anything the Arrow form could not give back exactly (an Avro type that
is not the spec's, a partition value that does not survive the round trip) raises
:class:`NotArrowRepresentable`, and callers decode with the reader instead. Errors are the
reader's: on any failure the reference reader runs, so a corrupt manifest raises exactly what
``read_manifest`` raises.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from icectl.codec.arrow_types import distinct_rows
from icectl.codec.avro import (
    AvroSource,
    read_records,
    record_field,
    resolve_type,
)
from icectl.codec.avro_native import native_enabled, read_avro_table
from icectl.codec.manifest_columns import first_row_ids, inherited_columns
from icectl.codec.manifest_reader import (
    ALWAYS_READ_DATA_FILE_FIELDS,
    DATA_FILE_FIELD_IDS,
    ManifestLayout,
    open_manifest,
    read_manifest,
)
from icectl.errors import CorruptInputError, IcectlError
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.schema import PrimitiveType, StructType
from icectl.spec.values import from_bytes, to_bytes

if TYPE_CHECKING:
    import pyarrow as pa

# Bump when the layout of the tables changes: it is part of the cache's key.
ARROW_LAYOUT_VERSION = 1
DECODE_KEY = b"icectl.decode-key"
LIST_METADATA = b"icectl.avro-metadata"


class NotArrowRepresentable(Exception):  # a condition to fall back on, not an IcectlError
    """The manifest is readable but its Arrow form would not give back exactly what the reader
    gives (callers decode it with the reader and do not cache it)."""


# Arrow types by name, made on first use (pyarrow loads only when a manifest is decoded).
T_I64, T_I8, T_BIN, T_STR, _COUNTS, _BOUNDS = "int64", "int8", "binary", "string", "counts", "bounds"
_LIST_BIN, _LIST_I64, T_SUMMARIES = "list<binary>", "list<int64>", "list<field_summary>"


@functools.cache
def arrow_type_of(name: str) -> pa.DataType:
    import pyarrow as pa

    simple = {"int64": pa.int64(), "int8": pa.int8(), "binary": pa.binary(), "string": pa.string()}
    if name in simple:
        return simple[name]
    return {
        "counts": pa.map_(pa.int32(), pa.int64()), "bounds": pa.map_(pa.int32(), pa.binary()),
        "list<binary>": pa.list_(pa.binary()), "list<int64>": pa.list_(pa.int64()),
        "list<field_summary>": pa.list_(pa.struct([("contains_null", pa.bool_()), ("contains_nan", pa.bool_()),
                                                   ("lower_bound", pa.binary()), ("upper_bound", pa.binary())])),
    }[name]

# data_file fields: name -> (Arrow type, Avro primitive types accepted)
AVRO_INTS = ("int", "long")
FILE_COLUMNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "content": (T_I8, ("int",)),
    "file_path": (T_STR, ("string",)),
    "file_format": (T_STR, ("string",)),
    "partition": (_LIST_BIN, ()),
    "record_count": (T_I64, AVRO_INTS),
    "file_size_in_bytes": (T_I64, AVRO_INTS),
    "column_sizes": (_COUNTS, ("long", "int")),
    "value_counts": (_COUNTS, ("long", "int")),
    "null_value_counts": (_COUNTS, ("long", "int")),
    "nan_value_counts": (_COUNTS, ("long", "int")),
    "lower_bounds": (_BOUNDS, ("bytes",)),
    "upper_bounds": (_BOUNDS, ("bytes",)),
    "key_metadata": (T_BIN, ("bytes",)),
    "split_offsets": (_LIST_I64, AVRO_INTS),
    "equality_ids": (_LIST_I64, AVRO_INTS),
    "sort_order_id": (T_I64, AVRO_INTS),
    "first_row_id": (T_I64, AVRO_INTS),
    "referenced_data_file": (T_STR, ("string",)),
    "content_offset": (T_I64, AVRO_INTS),
    "content_size_in_bytes": (T_I64, AVRO_INTS),
}
assert set(FILE_COLUMNS) == set(DATA_FILE_FIELD_IDS)
ENTRY_COLUMNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "status": (T_I8, ("int",)),
    "snapshot_id": (T_I64, AVRO_INTS),
    "sequence_number": (T_I64, AVRO_INTS),
    "file_sequence_number": (T_I64, AVRO_INTS),
}
_MAPS = frozenset({"column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
                   "lower_bounds", "upper_bounds"})
_LISTS = frozenset({"split_offsets", "equality_ids"})
TABLE_COLUMNS = [*ENTRY_COLUMNS, *FILE_COLUMNS]  # the Arrow form's columns, in order
_STATUSES = tuple(ManifestEntryStatus)
_CONTENTS = tuple(DataFileContent)


# --------------------------------------------------------------------------- Avro schema checks


def avro_kind(t: Any, named: dict[str, Any]) -> Any:
    """The Avro type behind an optional union or a name; a multi-branch union stays a list."""
    return resolve_type(t, named)


def primitive_ok(t: Any, named: dict[str, Any], accepted: tuple[str, ...]) -> bool:
    t = avro_kind(t, named)
    if isinstance(t, dict):  # a logical type would make fastavro return datetimes or Decimals
        return "logicalType" not in t and t.get("type") in accepted
    return t in accepted


def _field_ok(name: str, avro_type: Any, named: dict[str, Any], accepted: tuple[str, ...]) -> bool:
    t = avro_kind(avro_type, named)
    if name in _MAPS:  # Java: an array of key/value records (an Avro map has string keys)
        if not isinstance(t, dict) or t.get("type") != "array":
            return False
        item = avro_kind(t.get("items"), named)
        if not isinstance(item, dict) or item.get("type") != "record" or len(item.get("fields", ())) != 2:
            return False
        key, value = item["fields"]
        return primitive_ok(key["type"], named, AVRO_INTS) and primitive_ok(value["type"], named, accepted)
    if name in _LISTS:
        return isinstance(t, dict) and t.get("type") == "array" and primitive_ok(t.get("items"), named, accepted)
    return primitive_ok(avro_type, named, accepted)


def check_avro_types(record: dict[str, Any], names: dict[str, str], named: dict[str, Any],
                 columns: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    for spec_name, avro_name in names.items():
        accepted = columns[spec_name][1] if spec_name in columns else ()
        if accepted and not _field_ok(spec_name, record_field(record, avro_name)["type"], named, accepted):
            raise NotArrowRepresentable(f"field {avro_name!r} has an Avro type the spec does not give it")


# --------------------------------------------------------------------------- partition values


class _PartitionCodec:
    """Typed partition tuples <-> lists of single-value bytes, memoised (partitions repeat)."""

    def __init__(self, partition_type: StructType) -> None:
        self.types = [f.field_type for f in partition_type.fields]
        # -0.0 == 0.0 (and Decimal('1.0') == Decimal('1.00')) hash alike: no memo for such types.
        self.memo_ok = not any(isinstance(t, PrimitiveType) and t.name in ("float", "double")
                               for t in self.types)
        self.decoded: dict[tuple[bytes | None, ...], tuple[Any, ...]] = {}

    def encode(self, values: tuple[Any, ...]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for t, v in zip(self.types, values, strict=True):
            if v is None:
                out.append(None)
                continue
            raw = to_bytes(t, v)
            back = from_bytes(t, raw)
            if type(back) is not type(v) or not (back == v or (back != back and v != v)):
                raise NotArrowRepresentable(f"partition value {v!r} does not round-trip as {t}")
            out.append(raw)
        return out

    def decode(self, raw: list[bytes | None]) -> tuple[Any, ...]:
        key = tuple(raw)
        found = self.decoded.get(key)
        if found is None:
            found = tuple(None if b is None else from_bytes(t, b) for t, b in zip(self.types, raw, strict=True))
            if self.memo_ok:
                self.decoded[key] = found
        return found


def partition_values(partition_type: StructType) -> Callable[[list[bytes | None]], tuple[Any, ...]]:
    """A decoder of the ``partition`` column's values back to typed tuples (memoised)."""
    return _PartitionCodec(partition_type).decode


def _memo_partitions(decode: Callable[[Any], tuple[Any, ...]], codec: _PartitionCodec
                     ) -> Callable[[Any], list[bytes | None]]:
    memo: dict[tuple[Any, ...], list[bytes | None]] = {}

    def one(record: Any) -> list[bytes | None]:
        if not codec.memo_ok or not isinstance(record, dict):
            return codec.encode(decode(record))
        values = tuple(record.values())
        key = (*values, *map(type, values))  # True and 1 hash alike
        found = memo.get(key)
        if found is None:
            found = memo[key] = codec.encode(decode(record))
        return found

    return one


# --------------------------------------------------------------------------- manifests


def decode_key(manifest: ManifestFile, partition_type: StructType, format_version: int) -> bytes:
    """What a manifest's table depends on besides the file: the inherited values and the partition
    type. A cached table made under another key is a miss (a retried commit may list a manifest
    with another sequence number)."""
    row_ids = format_version >= 3 and manifest.content == ManifestContent.DATA
    return json.dumps([ARROW_LAYOUT_VERSION, format_version, manifest.added_snapshot_id, manifest.sequence_number,
                       manifest.first_row_id if row_ids else None, int(manifest.content),
                       str(partition_type)]).encode()


def manifest_table(data: AvroSource, *, manifest: ManifestFile, partition_type: StructType,
                   format_version: int) -> pa.Table:
    """Every entry of a manifest with every field, inheritance applied (see the module docstring)."""
    try:
        return _manifest_table(data, manifest, partition_type, format_version)
    except NotArrowRepresentable:
        reference_read(lambda: list(read_manifest(data, manifest=manifest, partition_type=partition_type,
                                              format_version=format_version)))
        raise
    except Exception as e:  # the reference reader decides what the error is
        reference_read(lambda: list(read_manifest(data, manifest=manifest, partition_type=partition_type,
                                              format_version=format_version)))
        raise NotArrowRepresentable(f"{type(e).__name__}: {e}") from None


def reference_read(read: Callable[[], object]) -> None:
    read()  # raises the reader's own CorruptInputError / UnsupportedError


def native_layout(data: AvroSource, partition_type: StructType, format_version: int) -> ManifestLayout:
    """The reader's layout of a manifest whose fields all have the Avro types the Arrow form takes
    (:class:`NotArrowRepresentable` otherwise; the reader's own error for a schema it refuses)."""
    layout = open_manifest(data, partition_type=partition_type, format_version=format_version)
    check_avro_types(layout.schema, layout.entry_names, layout.named, ENTRY_COLUMNS)
    check_avro_types(layout.file_schema, layout.file_names, layout.named, FILE_COLUMNS)
    if layout.partition is None:  # unreachable: open_manifest raised for a missing partition field
        raise CorruptInputError("manifest data_file has no partition field")
    return layout


def _manifest_table(data: AvroSource, manifest: ManifestFile, partition_type: StructType,
                    format_version: int) -> pa.Table:
    layout = native_layout(data, partition_type, format_version)
    if isinstance(data, (bytes, bytearray, memoryview)) and native_enabled():
        try:
            return native_manifest_table(bytes(data), layout, manifest, partition_type, format_version)
        except Exception:  # NotNative, or the native decoder's own error: fastavro decides
            pass
    return _fastavro_manifest_table(layout, manifest, partition_type, format_version)


def _fastavro_manifest_table(layout: ManifestLayout, manifest: ManifestFile, partition_type: StructType,
                             format_version: int) -> pa.Table:
    import pyarrow as pa

    assert layout.partition is not None
    codec = _PartitionCodec(partition_type)
    partition = _memo_partitions(layout.partition, codec)
    en, fn = layout.entry_names, layout.file_names
    status_n, df_n = en["status"], en["data_file"]
    snap_n, seq_n, fseq_n = en.get("snapshot_id"), en.get("sequence_number"), en.get("file_sequence_number")
    content_n, part_n, rc_n, frid_n = fn.get("content"), fn["partition"], fn["record_count"], fn.get("first_row_id")
    # Plain copies: every data_file field but the computed ones.
    copied = [(n, fn[n]) for n in FILE_COLUMNS if n in fn and n not in ("content", "partition", "first_row_id")]
    cols: dict[str, list[Any]] = {n: [] for n in (*ENTRY_COLUMNS, "content", "partition", "first_row_id")}
    copies: list[list[Any]] = [[] for _ in copied]
    m_snap, m_seq = manifest.added_snapshot_id, manifest.sequence_number
    next_row_id = (manifest.first_row_id if format_version >= 3 and manifest.content == ManifestContent.DATA
                   else None)
    a_status, a_snap, a_seq, a_fseq = (cols["status"].append, cols["snapshot_id"].append,
                                       cols["sequence_number"].append, cols["file_sequence_number"].append)
    a_content, a_part, a_frid = cols["content"].append, cols["partition"].append, cols["first_row_id"].append
    for rec in read_records(layout.reader):
        raw = rec[df_n]
        status = rec[status_n]
        content = raw[content_n] if content_n else 0
        if status not in (0, 1, 2) or content not in (0, 1, 2):
            raise ValueError("invalid status or content")
        # Inheritance: icectl.spec.manifest.inherit_from_manifest, inlined (one call per entry).
        snap = rec.get(snap_n) if snap_n else None
        seq = rec.get(seq_n) if seq_n else None
        fseq = rec.get(fseq_n) if fseq_n else None
        first_row_id = raw.get(frid_n) if frid_n else None
        record_count = raw[rc_n]
        if status == 1 or m_seq == 0:
            seq = m_seq if seq is None else seq
            fseq = m_seq if fseq is None else fseq
        if next_row_id is not None and first_row_id is None and content == 0 and status != 2:
            first_row_id = next_row_id
            next_row_id += record_count
        a_status(status)
        a_snap(m_snap if snap is None else snap)
        a_seq(seq)
        a_fseq(fseq)
        a_content(content)
        a_part(partition(raw[part_n]))
        a_frid(first_row_id)
        for i, (_, avro_name) in enumerate(copied):
            copies[i].append(raw.get(avro_name))
    converted: dict[str, pa.Array] = {}
    for (name, avro_name), values in zip(copied, copies, strict=True):
        if name in _MAPS:
            map_type = arrow_type_of(FILE_COLUMNS[name][0])
            converted[name] = _map_array(values, layout.file_schema, avro_name, layout.named, map_type)
        else:
            cols[name] = values
    arrays, names = [], []
    for name, (type_name, _) in {**ENTRY_COLUMNS, **FILE_COLUMNS}.items():
        arrow_type = arrow_type_of(type_name)
        column = cols.get(name)
        if name in converted:
            arrays.append(converted[name])
        elif column is None:
            arrays.append(pa.nulls(len(cols["status"]), arrow_type))
        else:
            arrays.append(pa.array(column, type=arrow_type))
        names.append(name)
    meta = {DECODE_KEY: decode_key(manifest, partition_type, format_version)}
    return pa.Table.from_arrays(arrays, names=names, metadata=meta)


def native_manifest_table(data: bytes, layout: ManifestLayout, manifest: ManifestFile, partition_type: StructType,
                          format_version: int) -> pa.Table:
    """:func:`manifest_table` through the native decoder (:mod:`icectl.codec.avro_native`), column by
    column with Arrow kernels: the same table as the fastavro path, or an exception to fall back on.
    Partition tuples are converted once per distinct partition, not once per entry."""
    import pyarrow as pa

    raw = read_avro_table(data, layout.schema)
    n = raw.num_rows
    entries, files, part = native_columns(raw, layout)
    status, content = entries["status"], files["content"]
    arrays = table_arrays(entries, files, partition_column(part, layout, partition_type, n),
                          inherited_columns(entries, status, manifest, n),
                          first_row_ids(files, status, content, manifest, format_version, n), n)
    meta = {DECODE_KEY: decode_key(manifest, partition_type, format_version)}
    return pa.Table.from_arrays(arrays, names=TABLE_COLUMNS, metadata=meta)


def table_arrays(entries: dict[str, pa.Array], files: dict[str, pa.Array], partition: pa.Array,
                 inherited: dict[str, pa.Array], first_row_id: pa.Array, n: int) -> list[pa.Array]:
    """The columns of the Arrow form (:data:`TABLE_COLUMNS`, in order) from :func:`native_columns`'
    columns and the manifest-dependent ones; fields the file lacks are nulls."""
    import pyarrow as pa

    cols: dict[str, pa.Array] = {"status": entries["status"], "content": files["content"], **inherited,
                                 "first_row_id": first_row_id, "partition": partition}
    for name in FILE_COLUMNS:
        if name not in cols and name in files:
            cols[name] = files[name]
    return [cols[name] if name in cols else pa.nulls(n, arrow_type_of(type_name))
            for name, (type_name, _) in {**ENTRY_COLUMNS, **FILE_COLUMNS}.items()]


def native_columns(raw: pa.Table, layout: ManifestLayout
                   ) -> tuple[dict[str, pa.Array], dict[str, pa.Array], pa.Array | None]:
    """The natively decoded records of ``layout``'s manifests as the Arrow form's columns, nothing
    inherited: the entry fields written (``status`` int8, the others as written), the data_file
    fields written (``content`` int8 always, maps as Arrow maps, ``partition`` left out), and the
    raw partition records. Raises where the reader would refuse a record (a status or content
    outside the spec's codes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = raw.num_rows
    entries = {name: raw.column(avro).combine_chunks() for name, avro in layout.entry_names.items()
               if name != "data_file"}
    data_file = raw.column(layout.entry_names["data_file"]).combine_chunks()
    if data_file.null_count or not pa.types.is_struct(data_file.type):
        raise NotArrowRepresentable("data_file is not a plain record")
    struct_names = {data_file.type.field(i).name: i for i in range(data_file.type.num_fields)}
    written = {name: data_file.field(struct_names[avro]) for name, avro in layout.file_names.items()
               if avro in struct_names}
    status = entries["status"] = entries["status"].cast(pa.int8())
    content = written["content"].cast(pa.int8()) if "content" in written else pa.array([0] * n, pa.int8())
    if not pc.all(pc.is_in(status, pa.array([0, 1, 2], pa.int8()))).as_py() and n:
        raise ValueError("invalid status")
    if n and not pc.all(pc.is_in(content, pa.array([0, 1, 2], pa.int8()))).as_py():
        raise ValueError("invalid content")
    files: dict[str, pa.Array] = {"content": content}
    for name, (type_name, _) in FILE_COLUMNS.items():
        if name in files or name == "partition" or name not in written:
            continue
        arrow_type = arrow_type_of(type_name)
        column = written[name]
        files[name] = _native_map(column, arrow_type) if name in _MAPS else column.cast(arrow_type)
    return entries, files, written.get("partition")


_PARTITION_ARROW = ("int32", "int64", "float", "double", "bool", "string", "large_string", "binary",
                    "large_binary", "date32[day]")


def partition_column(part: pa.Array | None, layout: ManifestLayout, partition_type: StructType,
                      n: int) -> pa.Array:
    """Partition records as lists of single-value bytes, each distinct record converted once
    through the reader's own decoder (so every value is the reader's)."""
    import pyarrow as pa

    list_type = arrow_type_of(_LIST_BIN)
    if not partition_type.fields:
        return pa.ListArray.from_arrays(pa.array([0] * (n + 1), pa.int32()), pa.array([], pa.binary()))
    groups, _firsts, tuples = distinct_partitions(part, layout, partition_type, n)
    codec = _PartitionCodec(partition_type)
    return pa.array([codec.encode(t) for t in tuples], list_type).take(groups)


def distinct_partitions(part: pa.Array | None, layout: ManifestLayout, partition_type: StructType, n: int,
                        keys: pa.Array | None = None) -> tuple[pa.Array, pa.Array, list[tuple[Any, ...]]]:
    """The natively decoded partition records grouped (with ``keys`` as a further grouping column):
    each row's group, each group's first row, and each group's partition tuple as the reader gives
    it (:func:`distinct_rows`; groups in order of first appearance). Raises
    :class:`NotArrowRepresentable` for a record the conversion cannot vouch for."""
    import pyarrow as pa

    if not partition_type.fields:
        columns: list[pa.Array] = []
    else:
        if part is None or part.null_count or not pa.types.is_struct(part.type):
            raise NotArrowRepresentable("partition is not a plain record")
        for i in range(part.type.num_fields):
            t = part.field(i).type
            if not (str(t) in _PARTITION_ARROW or pa.types.is_fixed_size_binary(t) or pa.types.is_decimal128(t)
                    or t == pa.time64("us") or (pa.types.is_timestamp(t) and t.unit == "us")):
                raise NotArrowRepresentable(f"partition field of Arrow type {t}")
        columns = [part.field(i) for i in range(part.type.num_fields)]
    assert layout.partition is not None
    try:
        groups, firsts = distinct_rows(([keys] if keys is not None else []) + columns, n)
    except OverflowError as e:
        raise NotArrowRepresentable(str(e)) from None
    if not columns:
        return groups, firsts, [()] * len(firsts)
    assert part is not None
    return groups, firsts, [layout.partition(record) for record in part.take(firsts).to_pylist()]


def _native_map(column: pa.Array, arrow_type: pa.MapType) -> pa.Array:
    """A list of key/value structs (Java's int-keyed maps as decoded) as an Arrow map."""
    import pyarrow as pa

    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        raise NotArrowRepresentable(f"map column of Arrow type {column.type}")
    pairs = column.values
    keys = pairs.field(0).cast(arrow_type.key_type)
    items = pairs.field(1).cast(arrow_type.item_type)
    offsets = column.offsets.cast(pa.int32())
    return pa.MapArray.from_arrays(offsets, keys, items, type=arrow_type,
                                   mask=column.is_null() if column.null_count else None)


def _map_array(values: list[Any], record: dict[str, Any], avro_name: str, named: dict[str, Any],
               arrow_type: pa.MapType) -> pa.Array:
    """Java's int-keyed maps (arrays of key/value records) to an Arrow map, converted in C++: a list
    of structs named as the Avro record's two fields, then its children as the map's keys and items."""
    import pyarrow as pa

    item = avro_kind(avro_kind(record_field(record, avro_name)["type"], named)["items"], named)
    key_name, value_name = (f["name"] for f in item["fields"])
    as_list = pa.array(values, type=pa.list_(pa.struct([(key_name, arrow_type.key_type),
                                                        (value_name, arrow_type.item_type)])))
    pairs = as_list.flatten()
    return pa.MapArray.from_arrays(as_list.offsets, pairs.field(0), pairs.field(1), type=arrow_type,
                                   mask=as_list.is_null())


def manifest_table_ipc(data: bytes, manifest: ManifestFile, partition_type: StructType,
                       format_version: int) -> bytes | None:
    """:func:`manifest_table` for a worker process: the table as Arrow IPC stream bytes, or None
    when it cannot be made (the parent decodes again for the reader's exact error or fallback)."""
    import pyarrow as pa

    try:
        table = manifest_table(data, manifest=manifest, partition_type=partition_type,
                               format_version=format_version)
    except (IcectlError, NotArrowRepresentable):
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def entries_from_table(table: pa.Table, *, manifest: ManifestFile | None = None, partition_type: StructType,
                       fields: Iterable[str] | None = None) -> list[ManifestEntry]:
    """The entries of :func:`manifest_table`'s table, equal to ``list(read_manifest(...))`` with the
    same ``fields`` (fields not asked for are ``None``)."""
    del manifest  # the table holds the inherited values; kept for symmetry with read_manifest
    if fields is not None:
        unknown = set(fields) - set(DATA_FILE_FIELD_IDS)
        if unknown:
            raise ValueError(f"unknown data_file fields: {', '.join(sorted(unknown))}")
    wanted = set(DATA_FILE_FIELD_IDS) if fields is None else set(fields) | ALWAYS_READ_DATA_FILE_FIELDS
    n = table.num_rows
    col: dict[str, list[Any]] = {name: table.column(name).to_pylist() if name in wanted else [None] * n
           for name in FILE_COLUMNS}
    if "partition" in wanted:
        codec = _PartitionCodec(partition_type)
        col["partition"] = [codec.decode(p) for p in col["partition"]]
    for name in _MAPS & wanted:
        col[name] = [None if v is None else dict(v) for v in col[name]]
    for name in _LISTS & wanted:
        col[name] = [None if v is None else tuple(v) for v in col[name]]
    files = map(DataFile, [_CONTENTS[c] for c in col["content"]], *(col[name] for name in list(FILE_COLUMNS)[1:]))
    statuses = [_STATUSES[s] for s in table.column("status").to_pylist()]
    return list(map(ManifestEntry, statuses, table.column("snapshot_id").to_pylist(),
                    table.column("sequence_number").to_pylist(), table.column("file_sequence_number").to_pylist(),
                    files))

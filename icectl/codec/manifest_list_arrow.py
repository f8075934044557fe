"""Manifest lists as Arrow tables (the form the manifest cache stores of a list):
:func:`manifest_list_table` decodes every ``manifest_file`` row, v1 defaults applied as
:func:`~icectl.codec.manifest_reader.read_manifest_list` applies them, and
:func:`manifest_files_from_table` gives back the same :class:`ManifestList`. The checks, the
fallback and the errors are those of :mod:`icectl.codec.manifest_arrow` for manifests."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from icectl.codec.avro import AvroSource, named_types, read_records, record_field, writer_schema
from icectl.codec.avro_native import native_enabled
from icectl.codec.manifest_arrow import (
    ARROW_LAYOUT_VERSION,
    AVRO_INTS,
    DECODE_KEY,
    LIST_METADATA,
    T_BIN,
    T_I8,
    T_I64,
    T_STR,
    T_SUMMARIES,
    NotArrowRepresentable,
    arrow_type_of,
    avro_kind,
    check_avro_types,
    primitive_ok,
    reference_read,
)
from icectl.codec.manifest_list_native import native_list_table
from icectl.codec.manifest_reader import ManifestList, open_manifest_list, read_manifest_list
from icectl.errors import CorruptInputError
from icectl.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary

if TYPE_CHECKING:
    import pyarrow as pa


_LIST_COLUMNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "manifest_path": (T_STR, ("string",)),
    "manifest_length": (T_I64, AVRO_INTS),
    "partition_spec_id": (T_I64, AVRO_INTS),
    "content": (T_I8, ("int",)),
    "sequence_number": (T_I64, AVRO_INTS),
    "min_sequence_number": (T_I64, AVRO_INTS),
    "added_snapshot_id": (T_I64, AVRO_INTS),
    "added_files_count": (T_I64, AVRO_INTS),
    "existing_files_count": (T_I64, AVRO_INTS),
    "deleted_files_count": (T_I64, AVRO_INTS),
    "added_rows_count": (T_I64, AVRO_INTS),
    "existing_rows_count": (T_I64, AVRO_INTS),
    "deleted_rows_count": (T_I64, AVRO_INTS),
    "partitions": (T_SUMMARIES, ()),
    "key_metadata": (T_BIN, ("bytes",)),
    "first_row_id": (T_I64, AVRO_INTS),
}
_SUMMARY_TYPES = {"contains_null": ("boolean",), "contains_nan": ("boolean",), "lower_bound": ("bytes",),
                  "upper_bound": ("bytes",)}


def list_decode_key() -> bytes:
    """A manifest list's table depends on nothing but the file (v1 defaults apply to every version)."""
    return json.dumps([ARROW_LAYOUT_VERSION, "list"]).encode()


def manifest_list_table(data: AvroSource, *, format_version: int) -> pa.Table:
    """Every ``manifest_file`` row of a manifest list, v1 defaults applied as
    :func:`~icectl.codec.manifest_reader.read_manifest_list` applies them; the Avro key-value
    metadata is kept in the schema's metadata."""
    try:
        return _manifest_list_table(data, format_version)
    except NotArrowRepresentable:
        reference_read(lambda: read_manifest_list(data, format_version=format_version))
        raise
    except Exception as e:  # the reference reader decides what the error is
        reference_read(lambda: read_manifest_list(data, format_version=format_version))
        raise NotArrowRepresentable(f"{type(e).__name__}: {e}") from None


def _manifest_list_table(data: AvroSource, format_version: int) -> pa.Table:
    import pyarrow as pa

    # Checks and defaults: codec.manifest_reader._manifest_file_builder, column-wise.
    reader, names, summary_names = open_manifest_list(data, format_version=format_version)
    schema = writer_schema(reader)
    named = named_types(schema, {})
    check_avro_types(schema, names, named, _LIST_COLUMNS)
    if summary_names:
        items = avro_kind(avro_kind(record_field(schema, names["partitions"])["type"], named)["items"], named)
        for spec_name, avro_name in summary_names.items():
            if not primitive_ok(record_field(items, avro_name)["type"], named, _SUMMARY_TYPES[spec_name]):
                raise NotArrowRepresentable(f"field_summary field {avro_name!r} has an unexpected Avro type")
    meta = {LIST_METADATA: json.dumps(dict(reader.metadata)).encode(), DECODE_KEY: list_decode_key()}
    if isinstance(data, (bytes, bytearray, memoryview)) and native_enabled():
        columns = {name: arrow_type_of(type_name) for name, (type_name, _) in _LIST_COLUMNS.items()}
        try:
            return native_list_table(bytes(data), schema, names, summary_names, columns, meta)
        except Exception:  # NotNative, or the native decoder's own error: fastavro decides
            pass
    order = list(_LIST_COLUMNS)
    avro = [names.get(f) for f in order]
    rows = [[rec.get(a) if a is not None else None for a in avro] for rec in read_records(reader)]
    cols = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in order]
    path, length, spec_id, content, seq, min_seq = (cols[i] for i in range(6))
    for i in range(len(path)):
        if path[i] is None or length[i] is None or spec_id[i] is None:
            raise CorruptInputError("manifest list entry lacks manifest_path, manifest_length or partition_spec_id")
        content[i] = 0 if content[i] is None else content[i]
        if content[i] not in (0, 1):
            raise CorruptInputError(f"manifest {path[i]}: unknown manifest content {content[i]}")
    cols[4] = [0 if v is None else v for v in seq]
    cols[5] = [0 if v is None else v for v in min_seq]
    s_names = [(k, summary_names.get(k)) for k in _SUMMARY_TYPES]
    cols[13] = [None if summaries is None else
                [{k: (s.get(a) if a else None) for k, a in s_names} for s in summaries]
                for summaries in cols[13]]
    for summaries in cols[13]:
        for s in summaries or ():
            s["contains_null"] = bool(s["contains_null"])
    arrays = [pa.array(values, type=arrow_type_of(_LIST_COLUMNS[name][0]))
              for name, values in zip(order, cols, strict=True)]
    return pa.Table.from_arrays(arrays, names=order, metadata=meta)


def manifest_files_from_table(table: pa.Table) -> ManifestList:
    """The manifest list of :func:`manifest_list_table`'s table, equal to ``read_manifest_list``."""
    cols = [table.column(name).to_pylist() for name in _LIST_COLUMNS]
    cols[3] = [ManifestContent(c) for c in cols[3]]
    cols[13] = [None if s is None else tuple(
        PartitionFieldSummary(x["contains_null"], x["contains_nan"], x["lower_bound"], x["upper_bound"])
        for x in s) for s in cols[13]]
    meta = table.schema.metadata or {}
    avro_meta = json.loads(meta.get(LIST_METADATA, b"{}"))
    return ManifestList(list(map(ManifestFile, *cols)), avro_meta)

"""Manifest lists decoded by the native Avro reader (:mod:`icectl.codec.avro_native`) into the
Arrow table :func:`icectl.codec.manifest_list_arrow.manifest_list_table` makes, column-wise: the v1
defaults and the checks of the reader applied with Arrow kernels. Anything the checks do not pass
raises, and the caller decodes with fastavro, which decides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icectl.codec.avro_native import NotNative, read_avro_table

if TYPE_CHECKING:
    import pyarrow as pa


def native_list_table(data: bytes, schema: dict[str, Any], names: dict[str, str], summary_names: dict[str, str],
                      columns: dict[str, pa.DataType], meta: dict[bytes, bytes]) -> pa.Table:
    """Every ``manifest_file`` row as ``columns`` (spec name -> Arrow type, in order); ``names``
    and ``summary_names`` map spec names to the file's Avro names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    raw = read_avro_table(data, schema)
    n = raw.num_rows
    cols = {name: raw.column(avro).combine_chunks() for name, avro in names.items()}
    for required in ("manifest_path", "manifest_length", "partition_spec_id"):
        if cols[required].null_count:
            raise NotNative("a row lacks a required field")  # fastavro names it
    zero = pa.scalar(0, pa.int64())
    content = pc.fill_null(cols["content"].cast(pa.int64()), zero) if "content" in cols else pa.repeat(zero, n)
    if n and not pc.all(pc.is_in(content, pa.array([0, 1], pa.int64()))).as_py():
        raise NotNative("unknown manifest content")
    cols["content"] = content
    for name in ("sequence_number", "min_sequence_number"):  # v1: 0
        cols[name] = pc.fill_null(cols[name].cast(pa.int64()), zero) if name in cols else pa.repeat(zero, n)
    if "partitions" in cols:
        cols["partitions"] = _summaries(cols["partitions"], summary_names, columns["partitions"])
    arrays = [cols[name].cast(t) if name in cols else pa.nulls(n, t) for name, t in columns.items()]
    return pa.Table.from_arrays(arrays, names=list(columns), metadata=meta)


def _summaries(column: pa.Array, summary_names: dict[str, str], list_type: pa.ListType) -> pa.Array:
    """The ``partitions`` lists with their field_summary records under the spec's names (a field
    the file lacks is null; a null ``contains_null`` is false, as the reader has it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_list(column.type):
        raise NotNative(f"partitions of Arrow type {column.type}")
    items = column.values
    if items.null_count:
        raise NotNative("a null field_summary")
    present = {items.type.field(i).name: items.field(i) for i in range(items.type.num_fields)}
    item_type = list_type.value_type
    children = []
    for i in range(item_type.num_fields):
        field = item_type.field(i)
        avro = summary_names.get(field.name)
        child = present[avro].cast(field.type) if avro in present else pa.nulls(len(items), field.type)
        if field.name == "contains_null":
            child = pc.fill_null(child, False)
        children.append(child)
    rebuilt = pa.StructArray.from_arrays(children, fields=list(item_type))
    return pa.ListArray.from_arrays(column.offsets, rebuilt, type=list_type,
                                    mask=column.is_null() if column.null_count else None)

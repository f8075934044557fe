"""The ``files`` and ``entries`` views' rows: a file's row, its partition as the unified struct, and
the fast JSON of ``inspect files --json``.

The fast path renders a manifest's live rows straight from its Arrow table
(:func:`icectl.table.scan.iter_manifest_tables`), column by column with Arrow's string kernels:
no entry object and no dict per row. Its text is byte for byte what the renderer writes for the
rows of :func:`file_row` (``tests/unit/ops/test_inspect_files_json.py`` checks it on the Spark
fixtures); a manifest with a value it does not handle (key metadata, a string that JSON must
escape, no Arrow table) is rendered row by row instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from icectl.codec.manifest_arrow import partition_values
from icectl.spec.manifest import DataFile, ManifestEntry, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import NestedField, StructType
from icectl.spec.values import from_bytes, to_human
from icectl.storage import FileIO
from icectl.table.scan import iter_manifest_tables

if TYPE_CHECKING:
    import pyarrow as pa


def human_value(f: NestedField, value: Any) -> Any:
    if value is None or (isinstance(value, bytes | bytearray) and not f.field_type.is_primitive):
        return value
    try:
        return to_human(f.field_type, value)
    except Exception:  # display only: never fail a view over one odd value
        return str(value)



class PartitionMapper:
    """Maps a file's partition tuple (its own spec's order) onto the unified partition struct."""

    def __init__(self, md: TableMetadata) -> None:
        self.md = md
        self.unified = md.unified_partition_type()
        self._by_spec: dict[int, list[tuple[int, NestedField]]] = {}
        self._cache: dict[tuple[int, Any], dict[str, Any]] = {}
        # For readable_metrics (the same view): the schema's primitive columns, formatted bounds.
        self.metric_columns: list[tuple[int, str, NestedField]] | None = None
        self.shown_bounds: dict[tuple[int, bytes], Any] = {}

    def to_dict(self, spec_id: int, values: tuple[Any, ...] | None) -> dict[str, Any]:
        # Tables have few distinct partitions and many files: format each partition once.
        try:
            key = (spec_id, values)
            cached = self._cache.get(key)
        except TypeError:  # an unhashable value: format it every time
            key, cached = None, None
        if cached is None:
            cached = self._to_dict(spec_id, values)
            if key is not None and len(self._cache) < 100_000:
                self._cache[key] = cached
        return dict(cached)

    def _to_dict(self, spec_id: int, values: tuple[Any, ...] | None) -> dict[str, Any]:
        if spec_id not in self._by_spec:
            spec = self.md.spec_by_id(spec_id)
            ptype = self.md.partition_type(spec) if spec else StructType(())
            pos = {f.field_id: i for i, f in enumerate(ptype.fields)}
            self._by_spec[spec_id] = [(pos.get(u.field_id, -1), u) for u in self.unified.fields]
        out: dict[str, Any] = {}
        for i, u in self._by_spec[spec_id]:
            v = values[i] if values is not None and 0 <= i < len(values) else None
            out[u.name] = None if v is None else human_value(u, v)
        return out

    def key(self, spec_id: int, values: tuple[Any, ...] | None) -> tuple[Any, ...]:
        d = self.to_dict(spec_id, values)
        return tuple(d.values())


FILE_FIELDS = ("content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes",
               "split_offsets", "equality_ids", "sort_order_id", "key_metadata", "first_row_id",
               "referenced_data_file", "content_offset", "content_size_in_bytes")
METRIC_FIELDS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                 "upper_bounds")


def file_row(md: TableMetadata, mapper: PartitionMapper, m: ManifestFile, f: DataFile,
              metrics: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "content": int(f.content), "file_path": f.file_path, "file_format": f.file_format,
        "spec_id": m.partition_spec_id, "partition": mapper.to_dict(m.partition_spec_id, f.partition),
        "record_count": f.record_count, "file_size_in_bytes": f.file_size_in_bytes,
        "split_offsets": list(f.split_offsets) if f.split_offsets is not None else None,
        "equality_ids": list(f.equality_ids) if f.equality_ids is not None else None,
        "sort_order_id": f.sort_order_id, "key_metadata": f.key_metadata,
    }
    if md.format_version >= 3:
        row["first_row_id"] = f.first_row_id
    if md.format_version >= 2:
        row["referenced_data_file"] = f.referenced_data_file
    if md.format_version >= 3:
        row["content_offset"] = f.content_offset
        row["content_size_in_bytes"] = f.content_size_in_bytes
    if metrics:
        for name in METRIC_FIELDS[:4]:
            row[name] = getattr(f, name)
        row["lower_bounds"] = f.lower_bounds
        row["upper_bounds"] = f.upper_bounds
        row["readable_metrics"] = _readable_metrics(md, f, mapper)
    return row


def _readable_metrics(md: TableMetadata, f: DataFile, mapper: PartitionMapper) -> dict[str, Any]:
    if mapper.metric_columns is None:
        schema = md.schema()
        mapper.metric_columns = [
            (fid, schema.column_name(fid) or str(fid), field) for fid in schema.field_ids()
            if (field := schema.find_field(fid)) is not None and field.field_type.is_primitive]
    shown = mapper.shown_bounds
    sizes, values, nulls, nans = (f.column_sizes or {}, f.value_counts or {}, f.null_value_counts or {},
                                  f.nan_value_counts or {})
    lowers, uppers = f.lower_bounds or {}, f.upper_bounds or {}
    out: dict[str, Any] = {}
    for fid, name, field in mapper.metric_columns:
        bounds = []
        for raw in (lowers.get(fid), uppers.get(fid)):
            if raw is None:
                bounds.append(None)
                continue
            key = (fid, raw)  # bounds repeat from file to file: decode and format each once
            text = shown.get(key, _MISSING)
            if text is _MISSING:
                text = human_value(field, from_bytes(field.field_type, raw))
                if len(shown) < 200_000:
                    shown[key] = text
            bounds.append(text)
        out[name] = {
            "column_size": sizes.get(fid), "value_count": values.get(fid), "null_value_count": nulls.get(fid),
            "nan_value_count": nans.get(fid), "lower_bound": bounds[0], "upper_bound": bounds[1]}
    return out


_MISSING = object()


# --------------------------------------------------------------------------- fast JSON of `inspect files`

# json.dumps escapes these in strings (ensure_ascii=False leaves everything else as is).
_JSON_ESCAPED = r'["\\\x00-\x1f]'


def chunked_json(rows: Iterable[dict[str, Any]], encode: Callable[[Any], str], size: int = 512) -> Iterator[str]:
    """Rows encoded one by one but written in chunks (``RowsResult.json_text``): one write per
    ``size`` rows instead of one per row."""
    batch: list[str] = []
    for row in rows:
        batch.append(encode(row))
        if len(batch) >= size:
            yield ",\n".join(batch)
            batch = []
    if batch:
        yield ",\n".join(batch)


_BATCH_ROWS = 16_384  # rows rendered together: Arrow kernels cost ~0.1 ms a call; the text of a batch is held whole


def file_rows_json(md: TableMetadata, io: FileIO, manifests: Iterable[ManifestFile], mapper: PartitionMapper,
                   encode: Callable[[Any], str]) -> Iterator[str]:
    """The ``files`` view's live rows (no metrics) as JSON text in chunks (rows joined by
    ``",\n"``), ``encode`` being the renderer's encoder of one value. Consecutive manifests of one
    spec are rendered together, up to :data:`_BATCH_ROWS` rows."""
    import pyarrow as pa

    batch: list[pa.Table] = []
    batch_spec: ManifestFile | None = None
    rows = 0
    for m, got in iter_manifest_tables(md, io, manifests):
        live = None if isinstance(got, list) else _live_file_columns(got)
        if batch and (live is None or batch_spec is None or m.partition_spec_id != batch_spec.partition_spec_id
                      or rows >= _BATCH_ROWS):
            assert batch_spec is not None
            yield _table_chunk(md, mapper, batch_spec, pa.concat_tables(batch), encode)
            batch, rows = [], 0
        if isinstance(got, list):
            yield _slow_chunk(md, mapper, m, got, encode)
        elif live is not None and live.num_rows:
            batch.append(live)
            batch_spec = m
            rows += live.num_rows
    if batch:
        assert batch_spec is not None
        yield _table_chunk(md, mapper, batch_spec, pa.concat_tables(batch), encode)


def _live_file_columns(table: pa.Table) -> pa.Table:
    import pyarrow.compute as pc

    # Only the view's columns are filtered (copied): the metric maps are most of a manifest's bytes.
    live = pc.not_equal(table.column("status"), 2)
    return table.select(list(FILE_FIELDS)).filter(live)


def _table_chunk(md: TableMetadata, mapper: PartitionMapper, m: ManifestFile, live: pa.Table,
                 encode: Callable[[Any], str]) -> str:
    text = _fast_chunk(md, mapper, m, live, encode)
    if text is None:
        decode = partition_values(md.partition_type(m.partition_spec_id))
        rows = [file_row(md, mapper, m, _file_of(r, decode), False) for r in live.to_pylist()]
        text = ",\n".join(map(encode, rows))
    return text


def _slow_chunk(md: TableMetadata, mapper: PartitionMapper, m: ManifestFile, entries: list[ManifestEntry],
                encode: Callable[[Any], str]) -> str:
    return ",\n".join(encode(file_row(md, mapper, m, e.data_file, False)) for e in entries if e.is_live)


def _file_of(row: dict[str, Any], decode: Callable[[list[bytes | None]], tuple[Any, ...]]) -> DataFile:
    values = {k: row.get(k) for k in DataFile.__dataclass_fields__}
    values["partition"] = decode(row["partition"])
    for k in ("split_offsets", "equality_ids"):
        values[k] = None if values[k] is None else tuple(values[k])
    return DataFile(**values)


def _num(col: pa.ChunkedArray) -> pa.ChunkedArray:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.fill_null(pc.cast(col, pa.string()), "null")


def _quoted(col: pa.ChunkedArray) -> pa.ChunkedArray:
    import pyarrow.compute as pc

    return pc.fill_null(pc.binary_join_element_wise('"', col, '"', ""), "null")


def _int_list(col: pa.ChunkedArray) -> pa.ChunkedArray:
    import pyarrow as pa
    import pyarrow.compute as pc

    joined = pc.binary_join(pc.cast(col, pa.list_(pa.string())), ", ")
    return pc.fill_null(pc.binary_join_element_wise("[", joined, "]", ""), "null")


def _fast_chunk(md: TableMetadata, mapper: PartitionMapper, m: ManifestFile, t: pa.Table,
                encode: Callable[[Any], str]) -> str | None:
    """The rows of :func:`file_row` (no metrics) as the renderer writes them, or None when a
    value needs the row-by-row path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if t.column("key_metadata").null_count != t.num_rows:
        return None  # bytes: rare, rendered as hex by the encoder
    strings = ["file_path", "file_format", "referenced_data_file"]
    if any(pc.any(pc.match_substring_regex(t.column(c), _JSON_ESCAPED)).as_py() for c in strings):
        return None
    spec_id = m.partition_spec_id
    decode = partition_values(md.partition_type(spec_id))
    texts: dict[tuple[bytes | None, ...], str] = {}
    partitions = []
    for p in t.column("partition").to_pylist():
        key = tuple(p)
        text = texts.get(key)
        if text is None:
            text = texts[key] = encode(mapper.to_dict(spec_id, decode(p)))
        partitions.append(text)
    pieces: list[Any] = [
        '{"content": ', _num(t.column("content")), ', "file_path": ', _quoted(t.column("file_path")),
        ', "file_format": ', _quoted(t.column("file_format")), f', "spec_id": {spec_id}, "partition": ',
        pa.array(partitions, pa.string()), ', "record_count": ', _num(t.column("record_count")),
        ', "file_size_in_bytes": ', _num(t.column("file_size_in_bytes")),
        ', "split_offsets": ', _int_list(t.column("split_offsets")),
        ', "equality_ids": ', _int_list(t.column("equality_ids")),
        ', "sort_order_id": ', _num(t.column("sort_order_id")), ', "key_metadata": null']
    if md.format_version >= 3:
        pieces += [', "first_row_id": ', _num(t.column("first_row_id"))]
    if md.format_version >= 2:
        pieces += [', "referenced_data_file": ', _quoted(t.column("referenced_data_file"))]
    if md.format_version >= 3:
        pieces += [', "content_offset": ', _num(t.column("content_offset")),
                   ', "content_size_in_bytes": ', _num(t.column("content_size_in_bytes"))]
    pieces.append("}")
    rows = pc.binary_join_element_wise(*pieces, "").combine_chunks()
    # One string in C++: the rows as one list, joined (no Python string per row).
    return pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(rows)], pa.int32()), rows), ",\n")[0].as_py()

"""Writing data files as Iceberg Java's Spark writer does: Parquet with field ids, the table's
``write.parquet.*`` properties, partitioned by a spec's transforms, named and placed as the
table's location provider places them, each returned as its manifest ``data_file`` (metrics from
the written footer, :func:`icectl.codec.parquet_metrics.data_file_from_footer`).

Files roll over after a number of rows the caller chooses (its estimate of the target size), and
batches stream through: memory holds a row group per open file, never a whole file.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icectl.codec.arrow_types import python_values
from icectl.codec.parquet_metrics import data_file_from_footer
from icectl.errors import UnsupportedError
from icectl.spec.manifest import DataFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.metrics_config import metrics_modes
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import Schema
from icectl.storage import FileIO, join

# Iceberg's TableProperties and their Java defaults.
COMPRESSION = ("write.parquet.compression-codec", "zstd")
COMPRESSION_LEVEL = ("write.parquet.compression-level", None)
ROW_GROUP_BYTES = ("write.parquet.row-group-size-bytes", 128 * 1024 * 1024)
PAGE_BYTES = ("write.parquet.page-size-bytes", 1024 * 1024)
PAGE_ROW_LIMIT = ("write.parquet.page-row-limit", 20_000)
DICT_BYTES = ("write.parquet.dict-size-bytes", 2 * 1024 * 1024)
DATA_PATH = "write.data.path"
OBJECT_STORAGE = "write.object-storage.enabled"
# Java's codec names as pyarrow's: parquet-mr's "uncompressed" is pyarrow's "none".
_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4", "brotli": "brotli",
           "uncompressed": "none", "none": "none"}
_ZSTD_DEFAULT_LEVEL = 3  # parquet-mr's default zstd level (pyarrow's own is 1)


@dataclass(frozen=True)
class ParquetSettings:
    compression: str
    compression_level: int | None
    row_group_bytes: int
    page_bytes: int
    page_row_limit: int
    dictionary_bytes: int

    @classmethod
    def of(cls, properties: dict[str, str]) -> ParquetSettings:
        codec = properties.get(COMPRESSION[0], COMPRESSION[1]).lower()
        if codec not in _CODECS:
            raise UnsupportedError(f"{COMPRESSION[0]}={codec} is not a Parquet codec icectl can write",
                                   hint=f"one of {', '.join(sorted(_CODECS))}")
        level_text = properties.get(COMPRESSION_LEVEL[0])
        level = int(level_text) if level_text else (_ZSTD_DEFAULT_LEVEL if codec == "zstd" else None)

        def num(p: tuple[str, Any]) -> int:
            return int(properties.get(p[0], p[1]))

        return cls(_CODECS[codec], level, num(ROW_GROUP_BYTES), num(PAGE_BYTES), num(PAGE_ROW_LIMIT), num(DICT_BYTES))


def data_location(md: TableMetadata) -> str:
    """Where new data files go: ``write.data.path``, else ``<table location>/data``."""
    if md.properties.get(OBJECT_STORAGE, "false").lower() == "true":
        raise UnsupportedError(f"{OBJECT_STORAGE}=true: icectl does not write the object-store layout yet",
                               hint="rewrite this table's data files with Spark's rewrite_data_files")
    base = md.properties.get(DATA_PATH)
    if base:
        return base.rstrip("/")
    assert md.location is not None
    return join(md.location, "data")


def partition_values(batch: pa.RecordBatch, spec: PartitionSpec, schema: Schema) -> list[tuple[Any, ...]]:
    """Each row's partition tuple under ``spec`` (the spec's transforms of the source columns)."""
    columns = []
    names = batch.schema.names
    for pf in spec.fields:
        src = schema.find_field(pf.source_id)
        if pf.transform.is_void:
            columns.append([None] * batch.num_rows)
            continue
        if src is None or len(pf.source_ids) != 1 or src.name not in names:
            raise UnsupportedError(f"partition field {pf.name} of spec {spec.spec_id} cannot be computed "
                                   "from the table's columns")
        values = python_values(src.field_type, batch.column(names.index(src.name)))
        columns.append([None if v is None else pf.transform.apply(v, src.field_type) for v in values])
    return list(zip(*columns, strict=True)) if columns else [()] * batch.num_rows


@dataclass
class _OpenFile:
    path: str
    writer: pq.ParquetWriter
    sink: Any
    close_sink: Any
    rows: int = 0
    # Rows not yet written: a row group takes batches until write.parquet.row-group-size-bytes (in
    # Arrow's bytes, more than Parquet's encoded ones), as parquet-mr buffers a row group.
    pending: list[pa.RecordBatch] = field(default_factory=list)
    pending_bytes: int = 0

    def flush(self) -> None:
        if self.pending:
            table = pa.Table.from_batches(self.pending)
            self.writer.write_table(table, row_group_size=max(1, table.num_rows))
            self.pending, self.pending_bytes = [], 0


@dataclass
class DataFileWriter:
    """Writes rows of one partition spec into new data files, rolling over every ``rows_per_file``.

    ``prefix`` starts every file name (Spark: ``<partition id>-<task id>``); ``written`` lists every
    path opened so far, so a caller can remove them when its commit fails.
    """

    io: FileIO
    md: TableMetadata
    spec: PartitionSpec
    schema: Schema
    arrow_schema: pa.Schema
    rows_per_file: int
    prefix: str
    sort_order_id: int | None = None  # the table's sort order the rows are written in
    written: list[str] = field(default_factory=list)
    files: list[DataFile] = field(default_factory=list)
    _open: dict[tuple[Any, ...], _OpenFile] = field(default_factory=dict)
    _operation: str = field(default_factory=lambda: str(uuid.uuid4()))
    _count: int = 0

    def __post_init__(self) -> None:
        self.settings = ParquetSettings.of(self.md.properties)
        self.modes = metrics_modes(self.md.properties, self.schema)
        self.base = data_location(self.md)

    def write(self, batch: pa.RecordBatch, partition: tuple[Any, ...] | None = None) -> None:
        """Append rows; ``partition`` is their one partition tuple, or None to compute it per row."""
        if batch.num_rows == 0:
            return
        if partition is not None:
            self._write_one(partition, batch)
            return
        rows: dict[tuple[Any, ...], list[int]] = {}
        for i, p in enumerate(partition_values(batch, self.spec, self.schema)):
            rows.setdefault(p, []).append(i)
        for p, idx in rows.items():
            self._write_one(p, batch.take(pa.array(idx, pa.int64())))

    def _write_one(self, partition: tuple[Any, ...], batch: pa.RecordBatch) -> None:
        start = 0
        while start < batch.num_rows:
            f = self._open.get(partition) or self._new_file(partition, batch)
            take = min(batch.num_rows - start, self.rows_per_file - f.rows)
            part = batch.slice(start, take)
            f.pending.append(part)
            f.pending_bytes += part.nbytes
            if f.pending_bytes >= self.settings.row_group_bytes:
                f.flush()
            f.rows += take
            start += take
            if f.rows >= self.rows_per_file:
                self._close(partition)

    def _new_file(self, partition: tuple[Any, ...], batch: pa.RecordBatch) -> _OpenFile:
        self._count += 1
        name = f"{self.prefix}-{self._operation}-{self._count:05d}.parquet"
        folder = self.base
        if not self.spec.is_unpartitioned:
            folder = join(folder, self.spec.partition_path(partition, self.schema))
        path = join(folder, name)
        self.written.append(path)
        cm = self.io.create(path)
        sink = cm.__enter__()
        s = self.settings
        writer = pq.ParquetWriter(
            sink, self.arrow_schema, compression=s.compression, compression_level=s.compression_level,
            data_page_size=s.page_bytes, dictionary_pagesize_limit=s.dictionary_bytes,
            store_schema=False, version="2.6")
        f = _OpenFile(path, writer, sink, cm)
        self._open[partition] = f
        return f

    def _close(self, partition: tuple[Any, ...]) -> None:
        f = self._open.pop(partition)
        f.flush()
        f.writer.close()
        f.close_sink.__exit__(None, None, None)
        size = self.io.size(f.path)
        with self.io.open(f.path) as src:
            metadata = pq.ParquetFile(src).metadata
        df = data_file_from_footer(f.path, size, metadata, self.schema,
                                   partition if not self.spec.is_unpartitioned else (), modes=self.modes)
        self.files.append(dataclasses.replace(df, sort_order_id=self.sort_order_id))

    def close(self) -> list[DataFile]:
        """Close every open file; the data files written, in order."""
        for p in list(self._open):
            self._close(p)
        return self.files

    def abort(self) -> None:
        """Close what is open without describing it (the caller removes ``written``)."""
        for f in self._open.values():
            try:
                f.writer.close()
                f.close_sink.__exit__(None, None, None)
            except Exception:  # the files are removed next; an error closing one must not hide the cause
                pass
        self._open.clear()


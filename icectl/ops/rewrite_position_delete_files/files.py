"""Reading and writing position delete files as Iceberg Java does.

A position delete file is Parquet with ``file_path`` (field id 2147483546, string) and ``pos``
(2147483545, long), optionally ``row`` (2147483544); Java's ``PositionDeleteWriter`` writes the
rows sorted by (file_path, pos) (Spark sorts them before the write) and describes the file with
Java's metrics for it (``MetricsConfig.forPositionDelete``: full for both columns; no value, null
or NaN counts for them; the bounds of both only when the file references a single data file, so
that readers derive the referenced data file from equal ``file_path`` bounds). Java 1.10 leaves
``referenced_data_file`` unset in a v2 position delete file; so does this writer.

Where new files go and how they are named: the data location of the table and the partition path
of the delete files' spec, ``<group>-<task>-<operation uuid>-<count>-deletes.parquet`` as Java's
``OutputFileFactory`` with the ``deletes`` suffix.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icectl.codec.arrow_types import FIELD_ID_KEY
from icectl.codec.parquet_metrics import data_file_from_footer
from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.metrics_config import MetricsMode
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import LONG, STRING, NestedField, Schema
from icectl.storage import FileIO, join
from icectl.table.data_writer import ParquetSettings, data_location

FILE_PATH_ID = 2147483546
POS_ID = 2147483545
ROW_ID = 2147483544
FILE_PATH = "file_path"
POS = "pos"
ROW = "row"
DELETE_SCHEMA = Schema((NestedField(FILE_PATH_ID, FILE_PATH, STRING, True), NestedField(POS_ID, POS, LONG, True)))
ARROW_SCHEMA = pa.schema([
    pa.field(FILE_PATH, pa.string(), nullable=False, metadata={FIELD_ID_KEY: str(FILE_PATH_ID).encode()}),
    pa.field(POS, pa.int64(), nullable=False, metadata={FIELD_ID_KEY: str(POS_ID).encode()}),
])
FULL = MetricsMode("full")
DELETE_PARQUET_PREFIX = "write.delete.parquet."
PARQUET_PREFIX = "write.parquet."
GRANULARITY = "write.delete.granularity"  # Spark's default when unset: file (SparkWriteConf)
GRANULARITIES = ("file", "partition")
V = TypeVar("V")


def delete_write_properties(properties: dict[str, str]) -> dict[str, str]:
    """The table's ``write.parquet.*`` with its ``write.delete.parquet.*`` over them (Java's
    delete writers read the delete variant first)."""
    out = dict(properties)
    for k, v in properties.items():
        if k.startswith(DELETE_PARQUET_PREFIX):
            out[PARQUET_PREFIX + k[len(DELETE_PARQUET_PREFIX):]] = v
    return out


def granularity(properties: dict[str, str]) -> str:
    value = properties.get(GRANULARITY, "file").strip().lower()
    if value not in GRANULARITIES:
        raise UnsupportedError(f"{GRANULARITY}={value} is not a delete granularity",
                               hint=f"one of {', '.join(GRANULARITIES)}")
    return value


def read_positions(io: FileIO, path: str) -> pa.Table:
    """A position delete file's ``file_path`` and ``pos`` columns (exit 4 when it cannot be read,
    or when it carries deleted rows in ``row``, which this rewrite does not write yet)."""
    try:
        with io.open(path) as f:
            pfile = pq.ParquetFile(f)
            names = pfile.schema_arrow.names
            if FILE_PATH not in names or POS not in names:
                raise CorruptInputError(f"position delete file {path} has no {FILE_PATH} and {POS} columns",
                                        path=path)
            if ROW in names:
                raise UnsupportedError(f"position delete file {path} stores deleted rows (column {ROW}); "
                                       "rewriting them is not supported yet", path=path,
                                       hint="rewrite this table's position deletes with Spark's "
                                            "rewrite_position_delete_files")
            table = pfile.read(columns=[FILE_PATH, POS])
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptInputError(f"position delete file {path} cannot be read: {e}", path=path,
                                hint="the file is damaged or not Parquet; restore it") from None
    return table.select([FILE_PATH, POS]).cast(ARROW_SCHEMA)


def sort_positions(table: pa.Table) -> pa.Table:
    return table.sort_by([(FILE_PATH, "ascending"), (POS, "ascending")])


class DeleteFileWriter:
    """Writes sorted (file_path, pos) rows of one partition into new position delete files."""

    def __init__(self, io: FileIO, md: TableMetadata, spec: PartitionSpec, partition: tuple[object, ...],
                 prefix: str) -> None:
        self.io, self.md, self.spec, self.partition, self.prefix = io, md, spec, partition, prefix
        self.settings = ParquetSettings.of(delete_write_properties(md.properties))
        self.operation = str(uuid.uuid4())
        folder = data_location(md)
        if not spec.is_unpartitioned:
            folder = join(folder, spec.partition_path(partition, md.schema()))
        self.folder = folder
        self.written: list[str] = []
        self.files: list[DataFile] = []

    def write(self, rows: pa.Table) -> None:
        """One new file holding ``rows`` (already sorted)."""
        if rows.num_rows == 0:
            return
        name = f"{self.prefix}-{self.operation}-{len(self.written) + 1:05d}-deletes.parquet"
        path = join(self.folder, name)
        self.written.append(path)
        s = self.settings
        with self.io.create(path) as sink:
            writer = pq.ParquetWriter(
                sink, ARROW_SCHEMA, compression=s.compression, compression_level=s.compression_level,
                data_page_size=s.page_bytes, dictionary_pagesize_limit=s.dictionary_bytes,
                store_schema=False, version="2.6")
            try:
                writer.write_table(rows, row_group_size=max(1, s.row_group_bytes // 64))
            finally:
                writer.close()
        size = self.io.size(path)
        with self.io.open(path) as src:
            metadata = pq.ParquetFile(src).metadata
        f = data_file_from_footer(path, size, metadata, DELETE_SCHEMA,
                                  self.partition if not self.spec.is_unpartitioned else (), modes=lambda _: FULL)
        single = pc.count_distinct(rows.column(FILE_PATH)).as_py() == 1
        ids = (FILE_PATH_ID, POS_ID)
        self.files.append(dataclasses.replace(
            f, content=DataFileContent.POSITION_DELETES,
            value_counts=_without(f.value_counts, ids), null_value_counts=_without(f.null_value_counts, ids),
            nan_value_counts=None,
            lower_bounds=f.lower_bounds if single else _without(f.lower_bounds, ids),
            upper_bounds=f.upper_bounds if single else _without(f.upper_bounds, ids)))


def _without(d: dict[int, V] | None, ids: Iterable[int]) -> dict[int, V] | None:
    if d is None:
        return None
    drop = set(ids)
    return {k: v for k, v in d.items() if k not in drop} or None  # Java writes no map, not an empty one

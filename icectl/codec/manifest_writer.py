"""Write manifests and manifest lists as Avro, in the shapes Iceberg Java 1.10 writes them.

The schemas are built from the spec's field tables (``V1Metadata``/``V2Metadata``/``V3Metadata``
in Java): same field order, nullability, ``field-id``/``element-id`` attributes, docs and record
names (``manifest_entry``, ``r2``, ``r102``, ``k117_v118``, ``manifest_file``, ``r508``), so Spark
and every other Java reader see exactly what Java would have written. v4 tables still use the
v3 shapes, tagged ``format-version`` 4 (as Java 1.10 does).

Takes and returns bytes; callers write them through their own storage layer. Entries are written
as they are given: a ``None`` sequence number or ``first_row_id`` stays null so that readers
inherit it (see :func:`icectl.spec.manifest.inherit_from_manifest`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from icectl.codec.avro import AvroSchemaBuilder, avro_field_name, avro_partition_value, compact_json, write_avro_file
from icectl.errors import UnsupportedError
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    PartitionFieldSummary,
)
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import (
    BINARY,
    BOOLEAN,
    INT,
    LONG,
    STRING,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
)
from icectl.spec.values import sort_key, to_bytes

# Java's ManifestWriter.UNASSIGNED_SEQ: "the sequence number of the commit that writes the list".
UNASSIGNED_SEQ = -1
# V1Metadata.DEFAULT_BLOCK_SIZE: v1 requires block_size_in_bytes, Java always writes 64 MiB.
V1_DEFAULT_BLOCK_SIZE = 64 * 1024 * 1024
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3, 4)


# --------------------------------------------------------------------------- schemas (Iceberg)


def _field(field_id: int, name: str, t: IcebergType, required: bool, doc: str | None = None) -> NestedField:
    return NestedField(field_id, name, t, required=required, doc=doc)


def _int_map(key_id: int, value_id: int, value: IcebergType) -> MapType:
    return MapType(key_id, INT, value_id, value, value_required=True)


# Names, ids, types and docs as Java's ManifestFile/DataFile constants define them (the docs end
# up in the Avro schema). Counts are optional in v1 lists only ("assumed to be non-zero").
_FIELD_SUMMARY = StructType((
    _field(509, "contains_null", BOOLEAN, True, "True if any file has a null partition value"),
    _field(518, "contains_nan", BOOLEAN, False, "True if any file has a nan partition value"),
    _field(510, "lower_bound", BINARY, False, "Partition lower bound for all files"),
    _field(511, "upper_bound", BINARY, False, "Partition upper bound for all files"),
))
_MF = {f.name: f for f in (
    _field(500, "manifest_path", STRING, True, "Location URI with FS scheme"),
    _field(501, "manifest_length", LONG, True, "Total file size in bytes"),
    _field(502, "partition_spec_id", INT, True, "Spec ID used to write"),
    _field(517, "content", INT, True, "Contents of the manifest: 0=data, 1=deletes"),
    _field(515, "sequence_number", LONG, True, "Sequence number when the manifest was added"),
    _field(516, "min_sequence_number", LONG, True, "Lowest sequence number in the manifest"),
    _field(503, "added_snapshot_id", LONG, True, "Snapshot ID that added the manifest"),
    _field(504, "added_files_count", INT, False, "Added entry count"),
    _field(505, "existing_files_count", INT, False, "Existing entry count"),
    _field(506, "deleted_files_count", INT, False, "Deleted entry count"),
    _field(512, "added_rows_count", LONG, False, "Added rows count"),
    _field(513, "existing_rows_count", LONG, False, "Existing rows count"),
    _field(514, "deleted_rows_count", LONG, False, "Deleted rows count"),
    _field(507, "partitions", ListType(508, _FIELD_SUMMARY, True), False, "Summary for each partition"),
    _field(519, "key_metadata", BINARY, False, "Encryption key metadata blob"),
    _field(520, "first_row_id", LONG, False, "Starting row ID to assign to new rows in ADDED data files"),
)}
_COUNTS = ("added_files_count", "existing_files_count", "deleted_files_count",
           "added_rows_count", "existing_rows_count", "deleted_rows_count")
_PARTITION_DOC = "Partition data tuple, schema based on the partition spec"
_DF = {f.name: f for f in (
    _field(134, "content", INT, True, "Contents of the file: 0=data, 1=position deletes, 2=equality deletes"),
    _field(100, "file_path", STRING, True, "Location URI with FS scheme"),
    _field(101, "file_format", STRING, True, "File format name: avro, orc, or parquet"),
    _field(103, "record_count", LONG, True, "Number of records in the file"),
    _field(104, "file_size_in_bytes", LONG, True, "Total file size in bytes"),
    _field(105, "block_size_in_bytes", LONG, True),
    _field(108, "column_sizes", _int_map(117, 118, LONG), False, "Map of column id to total size on disk"),
    _field(109, "value_counts", _int_map(119, 120, LONG), False,
           "Map of column id to total count, including null and NaN"),
    _field(110, "null_value_counts", _int_map(121, 122, LONG), False, "Map of column id to null value count"),
    _field(137, "nan_value_counts", _int_map(138, 139, LONG), False,
           "Map of column id to number of NaN values in the column"),
    _field(125, "lower_bounds", _int_map(126, 127, BINARY), False, "Map of column id to lower bound"),
    _field(128, "upper_bounds", _int_map(129, 130, BINARY), False, "Map of column id to upper bound"),
    _field(131, "key_metadata", BINARY, False, "Encryption key metadata blob"),
    _field(132, "split_offsets", ListType(133, LONG, True), False, "Splittable offsets"),
    _field(135, "equality_ids", ListType(136, INT, True), False, "Equality comparison field IDs"),
    _field(140, "sort_order_id", INT, False, "Sort order ID"),
    _field(142, "first_row_id", LONG, False, "The first row ID assigned to the first row in the data file"),
    _field(143, "referenced_data_file", STRING, False,
           "Fully qualified location (URI with FS scheme) of a data file that all deletes reference"),
    _field(144, "content_offset", LONG, False, "The offset in the file where the content starts"),
    _field(145, "content_size_in_bytes", LONG, False, "The length of referenced content stored in the file"),
)}
_MAP_FIELDS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
               "lower_bounds", "upper_bounds")
# data_file field order per version (V1Metadata.dataFileSchema, V2Metadata/V3Metadata.fileType).
_STATS = (*_MAP_FIELDS, "key_metadata", "split_offsets")
_DATA_FILE_ORDER = {
    1: ("file_path", "file_format", "partition", "record_count", "file_size_in_bytes",
        "block_size_in_bytes", *_STATS, "sort_order_id"),
    2: ("content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes",
        *_STATS, "equality_ids", "sort_order_id", "referenced_data_file"),
    3: ("content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes",
        *_STATS, "equality_ids", "sort_order_id", "first_row_id", "referenced_data_file",
        "content_offset", "content_size_in_bytes"),
}
_MANIFEST_LIST_ORDER = {
    1: ("manifest_path", "manifest_length", "partition_spec_id", "added_snapshot_id",
        "added_files_count", "existing_files_count", "deleted_files_count", "partitions",
        "added_rows_count", "existing_rows_count", "deleted_rows_count", "key_metadata"),
    2: ("manifest_path", "manifest_length", "partition_spec_id", "content", "sequence_number",
        "min_sequence_number", "added_snapshot_id", *_COUNTS, "partitions", "key_metadata"),
}
_MANIFEST_LIST_ORDER[3] = (*_MANIFEST_LIST_ORDER[2], "first_row_id")


def _shape(format_version: int) -> int:
    """The Avro shape a format version writes: v4 tables still use v3 manifests in Java 1.10."""
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedError(f"cannot write manifests for format version {format_version} "
                               f"(supported: {', '.join(map(str, SUPPORTED_FORMAT_VERSIONS))})")
    return min(format_version, 3)


def manifest_list_struct(format_version: int) -> StructType:
    """The ``manifest_file`` struct of a format version (Java ``V*Metadata.MANIFEST_LIST_SCHEMA``)."""
    shape = _shape(format_version)
    fields = []
    for name in _MANIFEST_LIST_ORDER[shape]:
        f = _MF[name]
        if shape >= 2 and name in _COUNTS:  # optional in v1 only ("assumed to be non-zero")
            f = replace(f, required=True)
        fields.append(f)
    return StructType(tuple(fields))


def manifest_entry_struct(partition_type: StructType, format_version: int) -> StructType:
    """The ``manifest_entry`` struct of a format version (Java ``V*Metadata.entrySchema``)."""
    shape = _shape(format_version)
    partition = _field(102, "partition", partition_type, True, None if shape == 1 else _PARTITION_DOC)
    data_file = StructType(tuple(partition if n == "partition" else _DF[n] for n in _DATA_FILE_ORDER[shape]))
    fields = [_field(0, "status", INT, True), _field(1, "snapshot_id", LONG, False)]
    if shape >= 2:
        fields += [_field(3, "sequence_number", LONG, False), _field(4, "file_sequence_number", LONG, False)]
    fields.append(_field(2, "data_file", data_file, True))
    return StructType(tuple(fields))


# --------------------------------------------------------------------------- Iceberg -> Avro


def manifest_avro_schema(partition_type: StructType, format_version: int) -> dict[str, Any]:
    """The Avro schema (JSON object) of a manifest with this partition type."""
    return AvroSchemaBuilder().record(manifest_entry_struct(partition_type, format_version), "manifest_entry")


def manifest_list_avro_schema(format_version: int) -> dict[str, Any]:
    """The Avro schema (JSON object) of a manifest list."""
    return AvroSchemaBuilder().record(manifest_list_struct(format_version), "manifest_file")


def _iceberg_schema_json(struct: StructType) -> str:
    # Java's Avro writer also stores the file's Iceberg schema under "iceberg.schema".
    return compact_json(Schema(struct.fields).to_json())


# --------------------------------------------------------------------------- partition summaries


class _FieldSummaryStats:
    """Java ``PartitionSummary.PartitionFieldStats`` for one partition field."""

    def __init__(self, t: IcebergType) -> None:
        self.type = t
        self.key = sort_key(t)
        self.contains_null = False
        self.contains_nan = False
        self.min: Any = None
        self.max: Any = None

    def update(self, value: Any) -> None:
        if value is None:
            self.contains_null = True
        elif isinstance(value, float) and math.isnan(value):
            self.contains_nan = True
        elif self.min is None:
            self.min = self.max = value
        else:
            if self.key(value) < self.key(self.min):
                self.min = value
            if self.key(self.max) < self.key(value):
                self.max = value

    def summary(self) -> PartitionFieldSummary:
        return PartitionFieldSummary(
            contains_null=self.contains_null, contains_nan=self.contains_nan,
            lower_bound=None if self.min is None else to_bytes(self.type, self.min),
            upper_bound=None if self.max is None else to_bytes(self.type, self.max))


# --------------------------------------------------------------------------- manifests


@dataclass(frozen=True, slots=True)
class ManifestWriteResult:
    """A written manifest and the manifest-list statistics of its entries."""

    data: bytes
    content: ManifestContent
    added_files_count: int
    existing_files_count: int
    deleted_files_count: int
    added_rows_count: int
    existing_rows_count: int
    deleted_rows_count: int
    partitions: list[PartitionFieldSummary]
    # Smallest explicit data sequence number of a live entry (Java's ManifestWriter); None when
    # every live entry inherits it, i.e. the manifest's own sequence number will be the minimum.
    min_sequence_number: int | None

    def to_manifest_file(self, path: str, length: int, spec_id: int, added_snapshot_id: int | None,
                         sequence_number: int, first_row_id: int | None = None) -> ManifestFile:
        """The manifest-list entry for this manifest.

        Pass ``sequence_number=UNASSIGNED_SEQ`` for a manifest of the snapshot being committed:
        :func:`write_manifest_list` then writes the snapshot's sequence number (as Java does).
        """
        min_seq = self.min_sequence_number if self.min_sequence_number is not None else sequence_number
        return ManifestFile(
            manifest_path=path, manifest_length=length, partition_spec_id=spec_id, content=self.content,
            sequence_number=sequence_number, min_sequence_number=min_seq, added_snapshot_id=added_snapshot_id,
            partitions=tuple(self.partitions), first_row_id=first_row_id,
            **{name: getattr(self, name) for name in _COUNTS})


def _int_map_records(values: dict[int, Any] | None) -> list[dict[str, Any]] | None:
    return None if values is None else [{"key": k, "value": v} for k, v in values.items()]


def _data_file_record(df: DataFile, shape: int, partition: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "content": int(df.content), "file_path": df.file_path, "file_format": df.file_format,
        "partition": partition, "record_count": df.record_count,
        "file_size_in_bytes": df.file_size_in_bytes, "block_size_in_bytes": V1_DEFAULT_BLOCK_SIZE,
        "key_metadata": df.key_metadata,
        "split_offsets": None if df.split_offsets is None else list(df.split_offsets),
        "equality_ids": None if df.equality_ids is None else list(df.equality_ids),
        "sort_order_id": df.sort_order_id,
        # Java's DataFileWrappers: row ids for data files only; DV/referenced-file fields for
        # deletes only (v2: any delete file; v3: position deletes).
        "first_row_id": df.first_row_id if df.content == DataFileContent.DATA else None,
        "referenced_data_file": (df.referenced_data_file if df.content != DataFileContent.DATA and (
            shape == 2 or df.content == DataFileContent.POSITION_DELETES) else None),
        "content_offset": (df.content_offset if df.content == DataFileContent.POSITION_DELETES else None),
        "content_size_in_bytes": (df.content_size_in_bytes if df.content == DataFileContent.POSITION_DELETES
                                  else None),
    }
    for name in _MAP_FIELDS:
        rec[name] = _int_map_records(getattr(df, name))
    return rec


def write_manifest(
    entries: Iterable[ManifestEntry],
    *,
    schema: Schema,
    spec: PartitionSpec,
    partition_type: StructType,
    format_version: int,
    content: ManifestContent,
    snapshot_id: int | None,
    codec: str = "deflate",
) -> ManifestWriteResult:
    """Write one manifest (Java ``ManifestWriter``) and compute its manifest-list statistics.

    ``schema`` is the table schema the spec is bound to (key-value ``schema``); ``partition_type``
    the spec's result type (its field order is the partition tuples' order). ``snapshot_id`` is
    the writing snapshot's id: an entry with a null data sequence number must be ADDED and carry
    that id or null, as Java checks. Entries are written as given (``None`` stays null).
    """
    shape = _shape(format_version)
    if shape == 1 and content != ManifestContent.DATA:
        raise ValueError("v1 tables cannot have delete manifests")
    if len(partition_type.fields) != len(spec.fields):
        raise ValueError(f"partition type has {len(partition_type.fields)} fields, "
                         f"spec {spec.spec_id} has {len(spec.fields)}")
    struct = manifest_entry_struct(partition_type, format_version)
    avro_schema = AvroSchemaBuilder().record(struct, "manifest_entry")
    partition_names = [avro_field_name(f.name) for f in partition_type.fields]
    partition_types = [f.field_type for f in partition_type.fields]
    stats = [_FieldSummaryStats(t) for t in partition_types]
    counts = {status: [0, 0] for status in ManifestEntryStatus}
    min_seq: list[int | None] = [None]

    def records() -> Iterable[dict[str, Any]]:
        for entry in entries:
            df = entry.data_file
            is_data = df.content == DataFileContent.DATA
            if is_data != (content == ManifestContent.DATA):
                raise ValueError(f"cannot write {df.content.name} file {df.file_path} "
                                 f"to a {content.name} manifest")
            if df.partition is None or len(df.partition) != len(partition_types):
                raise ValueError(f"file {df.file_path} has partition {df.partition!r}, "
                                 f"expected {len(partition_types)} values")
            if shape >= 2 and entry.sequence_number is None and (
                    entry.status != ManifestEntryStatus.ADDED
                    or entry.snapshot_id not in (None, snapshot_id)):
                # Java V2/V3 ManifestEntryWrapper: only this commit's ADDED entries may inherit.
                raise ValueError(f"{entry.status.name} entry for {df.file_path} from snapshot "
                                 f"{entry.snapshot_id} has no data sequence number")
            counts[entry.status][0] += 1
            counts[entry.status][1] += df.record_count
            for stat, value in zip(stats, df.partition, strict=True):
                stat.update(value)
            if entry.is_live and entry.sequence_number is not None and (
                    min_seq[0] is None or entry.sequence_number < min_seq[0]):
                min_seq[0] = entry.sequence_number
            partition = {n: avro_partition_value(t, v)
                         for n, t, v in zip(partition_names, partition_types, df.partition, strict=True)}
            rec: dict[str, Any] = {"status": int(entry.status), "snapshot_id": entry.snapshot_id,
                                   "sequence_number": entry.sequence_number,
                                   "file_sequence_number": entry.file_sequence_number,
                                   "data_file": _data_file_record(df, shape, partition)}
            yield rec

    metadata = {
        "schema": compact_json(schema.to_json()),
        "partition-spec": compact_json(spec.fields_to_json()),
        "partition-spec-id": str(spec.spec_id),
        "format-version": str(format_version),
    }
    if shape >= 2:
        metadata["content"] = "data" if content == ManifestContent.DATA else "deletes"
    metadata["iceberg.schema"] = _iceberg_schema_json(struct)
    data = write_avro_file(avro_schema, records(), metadata, codec)
    added, existing, deleted = (counts[s] for s in (ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING,
                                                    ManifestEntryStatus.DELETED))
    return ManifestWriteResult(
        data=data, content=content,
        added_files_count=added[0], existing_files_count=existing[0], deleted_files_count=deleted[0],
        added_rows_count=added[1], existing_rows_count=existing[1], deleted_rows_count=deleted[1],
        partitions=[s.summary() for s in stats], min_sequence_number=min_seq[0])


# --------------------------------------------------------------------------- manifest lists


@dataclass(frozen=True, slots=True)
class ManifestListWriteResult:
    """A written manifest list, the rows as written, and the v3 row-id counter after it."""

    data: bytes
    manifests: list[ManifestFile]  # sequence numbers resolved, first_row_id assigned
    first_row_id: int | None
    next_row_id: int | None  # v3+: the snapshot's first-row-id plus the row ids it assigned

    @property
    def added_rows(self) -> int | None:
        """The snapshot's ``added-rows`` (v3+): row ids assigned by this list (Java's SnapshotProducer)."""
        if self.first_row_id is None or self.next_row_id is None:
            return None
        return self.next_row_id - self.first_row_id


def write_manifest_list(
    manifests: Sequence[ManifestFile],
    *,
    format_version: int,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int,
    first_row_id: int | None = None,
    codec: str = "deflate",
) -> ManifestListWriteResult:
    """Write a snapshot's manifest list (Java ``ManifestListWriter``).

    ``UNASSIGNED_SEQ`` sequence numbers of this snapshot's manifests become ``sequence_number``.
    v3+: ``first_row_id`` (the snapshot's ``first-row-id``) is required; each DATA manifest
    without a ``first_row_id`` gets the running counter, which then grows by its existing and
    added rows. Delete manifests are written with a null ``first_row_id``.
    """
    shape = _shape(format_version)
    if shape >= 3 and first_row_id is None:
        raise ValueError(f"a v{format_version} manifest list needs the snapshot's first-row-id")
    struct = manifest_list_struct(format_version)
    next_row_id = first_row_id if shape >= 3 else None
    written: list[ManifestFile] = []
    for m in manifests:
        if shape == 1 and m.content != ManifestContent.DATA:
            raise ValueError(f"cannot store delete manifest {m.manifest_path} in a v1 table")
        added_snapshot_id = snapshot_id if m.added_snapshot_id is None else m.added_snapshot_id
        seq, min_seq = m.sequence_number, m.min_sequence_number
        if shape >= 2 and UNASSIGNED_SEQ in (seq, min_seq):
            if added_snapshot_id != snapshot_id:  # V2/V3 ManifestFileWrapper's sanity check
                raise ValueError(f"manifest {m.manifest_path} from snapshot {added_snapshot_id} "
                                 "has an unassigned sequence number")
            seq = sequence_number if seq == UNASSIGNED_SEQ else seq
            min_seq = sequence_number if min_seq == UNASSIGNED_SEQ else min_seq
        if shape >= 2 and any(getattr(m, c) is None for c in _COUNTS):
            raise ValueError(f"manifest {m.manifest_path} lacks file or row counts, "
                             f"required in v{format_version} manifest lists")
        row_id = m.first_row_id if m.content == ManifestContent.DATA else None
        if shape >= 3 and m.content == ManifestContent.DATA and row_id is None:
            assert next_row_id is not None and m.existing_rows_count is not None
            assert m.added_rows_count is not None
            row_id = next_row_id
            # Java leaves room for existing rows too: pre-v3 files may lack a first_row_id.
            next_row_id += m.existing_rows_count + m.added_rows_count
        if shape == 1:  # not written: readers take 0 (spec "Manifest Lists")
            seq = min_seq = 0
        written.append(replace(m, added_snapshot_id=added_snapshot_id, sequence_number=seq,
                               min_sequence_number=min_seq, first_row_id=row_id if shape >= 3 else None))

    def records() -> Iterable[dict[str, Any]]:
        for m in written:
            rec = {name: getattr(m, name) for name in _MANIFEST_LIST_ORDER[shape]}
            if shape >= 2:
                rec["content"] = int(m.content)
            rec["partitions"] = None if m.partitions is None else [
                {"contains_null": s.contains_null, "contains_nan": s.contains_nan,
                 "lower_bound": s.lower_bound, "upper_bound": s.upper_bound} for s in m.partitions]
            yield rec

    # Java: ImmutableMap in this order; String.valueOf(null) makes a missing parent "null".
    metadata = {"snapshot-id": str(snapshot_id),
                "parent-snapshot-id": "null" if parent_snapshot_id is None else str(parent_snapshot_id)}
    if shape >= 2:
        metadata["sequence-number"] = str(sequence_number)
    if shape >= 3:
        metadata["first-row-id"] = str(first_row_id)
    metadata["format-version"] = str(format_version)
    metadata["iceberg.schema"] = _iceberg_schema_json(struct)
    avro_schema = AvroSchemaBuilder().record(struct, "manifest_file")
    data = write_avro_file(avro_schema, records(), metadata, codec)
    return ManifestListWriteResult(data=data, manifests=written, first_row_id=first_row_id if shape >= 3 else None,
                                   next_row_id=next_row_id)

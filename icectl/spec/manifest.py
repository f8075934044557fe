"""Manifest lists, manifests and their entries (spec "Manifests", "Manifest Lists").

Pure models: :mod:`icectl.codec.manifest_reader` reads them from Avro. Field names are the spec's.
Entries hold values *after* inheritance (snapshot id, sequence numbers, first row id).
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from icectl.spec.schema import IcebergType, ListType, MapType, Schema, StructType
from icectl.spec.values import from_bytes


class ManifestContent(IntEnum):
    """``manifest_file.content`` (517): what the manifest tracks."""

    DATA = 0
    DELETES = 1


class ManifestEntryStatus(IntEnum):
    """``manifest_entry.status`` (0)."""

    EXISTING = 0
    ADDED = 1
    DELETED = 2


class DataFileContent(IntEnum):
    """``data_file.content`` (134)."""

    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


@dataclass(frozen=True, slots=True)
class PartitionFieldSummary:
    """``field_summary`` (508): one partition field's summary in a manifest-list entry."""

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None  # Appendix D single value of the partition field's type
    upper_bound: bytes | None = None

    def decoded_bounds(self, partition_field_type: IcebergType) -> tuple[Any, Any]:
        """(lower, upper) decoded with the partition field's result type."""
        lower = None if self.lower_bound is None else from_bytes(partition_field_type, self.lower_bound)
        upper = None if self.upper_bound is None else from_bytes(partition_field_type, self.upper_bound)
        return lower, upper


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """``manifest_file``: one manifest-list entry (fields 500-520), with v1 defaults applied.

    Counts stay ``None`` when a v1 manifest list omits them (the spec: "assumed to be non-zero").
    """

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent = ManifestContent.DATA
    sequence_number: int = 0
    min_sequence_number: int = 0
    added_snapshot_id: int | None = None
    added_files_count: int | None = None
    existing_files_count: int | None = None
    deleted_files_count: int | None = None
    added_rows_count: int | None = None
    existing_rows_count: int | None = None
    deleted_rows_count: int | None = None
    partitions: tuple[PartitionFieldSummary, ...] | None = None
    key_metadata: bytes | None = None
    first_row_id: int | None = None

    @property
    def has_added_files(self) -> bool:
        return self.added_files_count is None or self.added_files_count > 0

    @property
    def has_existing_files(self) -> bool:
        return self.existing_files_count is None or self.existing_files_count > 0

    @property
    def has_deleted_files(self) -> bool:
        return self.deleted_files_count is None or self.deleted_files_count > 0


@dataclass(frozen=True, slots=True)
class DataFile:
    """``data_file`` (2): a data file, delete file or deletion vector.

    Fields a caller chose not to read (``read_manifest(fields=...)``) are ``None``; so is
    ``partition`` then. ``partition`` holds typed values (see :mod:`icectl.spec.values`) in the
    order of the manifest's partition type. Bounds stay raw: decode them with a schema.
    """

    content: DataFileContent
    file_path: str
    file_format: str  # as written: Java writes upper case ("PARQUET", "PUFFIN")
    partition: tuple[Any, ...] | None
    record_count: int
    file_size_in_bytes: int
    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    sort_order_id: int | None = None
    first_row_id: int | None = None
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None

    @property
    def is_dv(self) -> bool:
        """A deletion vector: position deletes stored as a Puffin blob (Java: format == PUFFIN)."""
        return (self.content == DataFileContent.POSITION_DELETES
                and self.file_format.lower() == "puffin")

    def lower_bound_values(self, schema: Schema) -> dict[int, Any]:
        """``lower_bounds`` decoded with the column types of ``schema`` (unknown ids skipped)."""
        return _decode_bounds(self.lower_bounds, schema)

    def upper_bound_values(self, schema: Schema) -> dict[int, Any]:
        """``upper_bounds`` decoded with the column types of ``schema`` (unknown ids skipped)."""
        return _decode_bounds(self.upper_bounds, schema)


def _decode_bounds(bounds: dict[int, bytes] | None, schema: Schema) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for field_id, raw in (bounds or {}).items():
        t = schema.find_type(field_id)
        # Dropped columns keep bounds in old manifests; nested types have none to decode.
        if t is not None and t.is_primitive:
            out[field_id] = from_bytes(t, raw)
    return out


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """``manifest_entry``: status and tracking of one file, after inheritance from the manifest.

    ``sequence_number`` is the data sequence number. It and ``file_sequence_number`` stay
    ``None`` only for a malformed EXISTING/DELETED entry that omits them.
    """

    status: ManifestEntryStatus
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile

    @property
    def is_live(self) -> bool:
        """ADDED or EXISTING: part of the snapshot (DELETED entries are informational)."""
        return self.status != ManifestEntryStatus.DELETED

    @property
    def is_dv(self) -> bool:
        return self.data_file.is_dv


@dataclass(frozen=True, slots=True)
class InheritedMetadata:
    """An entry's tracking fields after inheritance, plus the first_row_id counter to carry on."""

    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    first_row_id: int | None
    next_row_id: int | None  # the running first_row_id counter for the next entry


def inherit_from_manifest(
    manifest: ManifestFile, *, status: ManifestEntryStatus, content: DataFileContent,
    snapshot_id: int | None, sequence_number: int | None, file_sequence_number: int | None,
    first_row_id: int | None, record_count: int, next_row_id: int | None,
) -> InheritedMetadata:
    """Apply the spec's inheritance rules to one entry; call it on the entries in manifest order.

    Values are as written in the manifest; ``next_row_id`` starts as the manifest's
    ``first_row_id`` for a v3 data manifest (``None`` otherwise) and is then threaded through
    from each result's ``next_row_id``.

    * ``snapshot_id``: null -> the manifest's ``added_snapshot_id`` (any status).
    * ``sequence_number`` / ``file_sequence_number`` (spec "Sequence Number Inheritance"): null ->
      the manifest's ``sequence_number`` only for ADDED entries, or for any entry when that is 0
      (v1 manifests, where every sequence number defaults to 0). A null on an EXISTING/DELETED
      entry of a v2+ manifest violates the spec and is left ``None`` for validators to report.
    * ``first_row_id`` (spec "First Row ID Inheritance"; v3 data manifests only, ``next_row_id``
      is ``None`` otherwise): a null value on an ADDED or EXISTING data file becomes the running
      ``next_row_id``, which starts at the manifest's ``first_row_id`` and grows by the
      ``record_count`` of each file so assigned. Existing entries count ("even if the data file is
      existing"). DELETED entries neither receive an id nor advance the counter: their rows are
      outside the range the manifest list reserved (added + existing rows), and Iceberg Java
      1.10 (ManifestReader.idAssigner) skips them too. Explicit values are kept as written; with
      a null manifest ``first_row_id`` nothing is assigned.
    """
    if snapshot_id is None:
        snapshot_id = manifest.added_snapshot_id
    inherit_seq = status == ManifestEntryStatus.ADDED or manifest.sequence_number == 0
    if sequence_number is None and inherit_seq:
        sequence_number = manifest.sequence_number
    if file_sequence_number is None and inherit_seq:
        file_sequence_number = manifest.sequence_number
    if (next_row_id is not None and first_row_id is None and content == DataFileContent.DATA
            and status != ManifestEntryStatus.DELETED):
        first_row_id = next_row_id
        next_row_id += record_count
    return InheritedMetadata(snapshot_id, sequence_number, file_sequence_number, first_row_id,
                             next_row_id)


def single_valued_ids(schemas: Iterable[Schema]) -> frozenset[int]:
    """Field ids that hold at most one value per row in every schema given: not a list element,
    a map key or value, or anything nested in one (those count every element, so their
    value_counts may exceed a file's record_count)."""
    single: set[int] = set()
    repeated: set[int] = set()

    def walk(t: IcebergType, inside: bool) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                (repeated if inside else single).add(f.field_id)
                walk(f.field_type, inside)
        elif isinstance(t, ListType):
            repeated.add(t.element_id)
            walk(t.element_type, True)
        elif isinstance(t, MapType):
            repeated.update((t.key_id, t.value_id))
            walk(t.key_type, True)
            walk(t.value_type, True)

    for s in schemas:
        walk(s.struct, False)
    return frozenset(single - repeated)


def impossible_values(f: DataFile, single_valued: Container[int]) -> list[str]:
    """What no writer can have recorded for ``f``: negative sizes or counts, more values, nulls or
    NaNs in a column than the file has rows (columns in ``single_valued`` only), more nulls or NaNs
    than values, a deletion vector's blob beyond the file. Java's ``DataFiles.Builder`` refuses
    negative sizes and record counts; the others follow from the spec's definitions of the
    counts ("including null and NaN values"). Empty when the values are possible."""
    out: list[str] = []
    if f.file_size_in_bytes < 0:
        out.append(f"file_size_in_bytes is {f.file_size_in_bytes}")
    if f.record_count < 0:
        out.append(f"record_count is {f.record_count}")
    for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
        for fid, n in sorted((getattr(f, name) or {}).items()):
            if n is not None and n < 0:
                out.append(f"{name} of column {fid} is {n}")
    values = f.value_counts or {}
    for name in ("value_counts", "null_value_counts", "nan_value_counts"):
        for fid, n in sorted((getattr(f, name) or {}).items()):
            if n is None or n < 0:
                continue
            if fid in single_valued and f.record_count >= 0 and n > f.record_count:
                out.append(f"{name} of column {fid} is {n}, above record_count {f.record_count}")
            elif name != "value_counts" and values.get(fid) is not None and n > values[fid] >= 0:
                out.append(f"{name} of column {fid} is {n}, above its value count {values[fid]}")
    offset, length = f.content_offset, f.content_size_in_bytes
    if offset is not None and length is not None:
        if offset < 0 or length < 0:
            out.append(f"content_offset {offset} / content_size_in_bytes {length} is negative")
        elif f.file_size_in_bytes >= 0 and offset + length > f.file_size_in_bytes:
            out.append(f"the blob at content_offset {offset} ({length} bytes) ends beyond file_size_in_bytes "
                       f"{f.file_size_in_bytes}")
    return out

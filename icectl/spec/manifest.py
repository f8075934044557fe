"""Manifest lists, manifests and their entries (spec "Manifests", "Manifest Lists").

Pure models: :mod:`icectl.avro_manifests` reads them from Avro. Field names are the spec's.
Entries hold values *after* inheritance (snapshot id, sequence numbers, first row id).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from icectl.spec.schema import IcebergType, Schema
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

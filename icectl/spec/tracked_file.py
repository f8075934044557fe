"""Format v4 as the Iceberg spec merged it (apache/iceberg#16025, 2026-10-14): the ``tracked_file``
row of root and leaf manifests, and what a v4 snapshot's rows mean in the v1-v3 model.

* A snapshot's ``root-manifest`` holds data files (content_type 0) and references to leaf
  manifests (3 data, 4 delete). A v4 leaf holds data files only; a delete manifest in a v4 root
  is always a carried-over v1-v3 one (``manifest_info.format_version`` 0).
* A data file's deletion vector is colocated on its own entry (``deletion_vector``, 148) and
  applies to it with no sequence-number or partition check. Carried-over v2/v3 delete manifests
  still apply with the v3 rules to files without a colocated DV.
* A leaf's rows leave a snapshot through the leaf's manifest DV: ``manifest_info.dv`` on the root
  entry that references it (a Mumbling bitmap of row ordinals, cumulative), with the positions
  deleted/replaced in the snapshot that last changed it in ``tracking`` 6/7 and that snapshot in
  ``modified_snapshot_id``; the entry's status is MODIFIED in that snapshot.
* Status 3 REPLACED (not live) and 4 MODIFIED (live): a data file whose DV changes gets both;
  a leaf whose manifest DV changes gets MODIFIED.
* Inheritance (spec section "Inheritance"): ADDED rows of a leaf may leave ``snapshot_id`` and
  both sequence numbers null and take them from the root entry; root entries carry them. A
  null ``first_row_id`` of a leaf's data file is the leaf entry's ``first_row_id`` plus the rows
  of the preceding null-first_row_id files. Data files in the root carry their own.

Where the merged text is not settled, the choice is :mod:`icectl.codec.v4_schema`'s (listed with
sources in ``docs/v4.md``). Encoding is :mod:`icectl.codec.v4_manifest`; the proposal layout that
earlier icectl versions wrote is :mod:`icectl.spec.v4_proposal` (read-only).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.schema import StructType

FORMAT_VERSION = 4
PRE_V4 = 0  # manifest_info.format_version of a v1-v3 manifest referenced from a v4 root
PUFFIN = "puffin"


class EntryStatus(IntEnum):
    """``tracking.status`` (0)."""

    EXISTING = 0
    ADDED = 1
    DELETED = 2
    REPLACED = 3
    MODIFIED = 4


LIVE = frozenset({EntryStatus.EXISTING, EntryStatus.ADDED, EntryStatus.MODIFIED})


class ContentType(IntEnum):
    """``content_type`` (134). 1 (position deletes) must not be written in v4; a v4 writer never
    writes 2 either (equality deletes cannot be added to a v4 table)."""

    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2
    DATA_MANIFEST = 3
    DELETE_MANIFEST = 4


MANIFEST_TYPES = frozenset({ContentType.DATA_MANIFEST, ContentType.DELETE_MANIFEST})
ROOT_TYPES = frozenset({ContentType.DATA, ContentType.DATA_MANIFEST, ContentType.DELETE_MANIFEST})
LEAF_TYPES = frozenset({ContentType.DATA})


@dataclass(frozen=True, slots=True)
class Tracking:
    """``tracking`` (147): status, snapshot and sequence numbers, row ids and manifest-DV changes."""

    status: EntryStatus
    snapshot_id: int | None = None
    sequence_number: int | None = None
    file_sequence_number: int | None = None
    modified_snapshot_id: int | None = None
    first_row_id: int | None = None
    deleted_positions: bytes | None = None  # Mumbling; manifest entries only
    replaced_positions: bytes | None = None


@dataclass(frozen=True, slots=True)
class DeletionVector:
    """``deletion_vector`` (148): the data file's DV, a ``deletion-vector-v1`` blob in a Puffin file."""

    location: str
    offset: int
    size_in_bytes: int
    cardinality: int
    key_metadata: bytes | None = None


@dataclass(frozen=True, slots=True)
class ManifestInfo:
    """``manifest_info`` (150): the counts of a referenced manifest, its format and manifest DV."""

    added_files_count: int
    existing_files_count: int
    deleted_files_count: int
    replaced_files_count: int
    added_rows_count: int
    existing_rows_count: int
    deleted_rows_count: int
    min_sequence_number: int
    format_version: int = FORMAT_VERSION  # 0: a v1-v3 manifest
    dv: bytes | None = None  # Mumbling bitmap of the leaf's removed row ordinals, cumulative


@dataclass(frozen=True, slots=True)
class ContentStats:
    """``content_stats`` (146) as icectl holds it: per column id, the v3 metrics (bounds as
    Appendix D bytes). The codec stores them typed, one struct per column."""

    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None


STAT_FIELDS = ("value_counts", "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds")


@dataclass(frozen=True, slots=True)
class TrackedFile:
    """One row of a v4 root or leaf manifest. ``partition`` maps partition field ids to values."""

    tracking: Tracking
    content_type: ContentType
    location: str
    file_format: str
    record_count: int
    file_size_in_bytes: int
    spec_id: int | None = None
    partition: dict[int, Any] | None = None
    content_stats: ContentStats | None = None
    sort_order_id: int | None = None
    deletion_vector: DeletionVector | None = None
    manifest_info: ManifestInfo | None = None
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None

    @property
    def status(self) -> EntryStatus:
        return self.tracking.status

    @property
    def is_live(self) -> bool:
        return self.tracking.status in LIVE

    @property
    def is_manifest(self) -> bool:
        return self.content_type in MANIFEST_TYPES

    @property
    def is_file(self) -> bool:
        return not self.is_manifest

    @property
    def first_row_id(self) -> int | None:
        return self.tracking.first_row_id

    def with_tracking(self, **changes: Any) -> TrackedFile:
        return dataclasses.replace(self, tracking=dataclasses.replace(self.tracking, **changes))


@dataclass(frozen=True, slots=True)
class V4Manifest:
    """A decoded v4 manifest: its rows in file order and its key-value metadata."""

    entries: list[TrackedFile]
    metadata: dict[str, str]


# --------------------------------------------------------------------------- paths


def resolve_location(path: str, table_location: str) -> str:
    """The spec's path resolution (v4): a location without a URI scheme that is not absolute is
    ``table_location + "/" + path``, with no normalisation."""
    if "://" in path or path.startswith("/") or ":" in path.split("/", 1)[0]:
        return path
    return f"{table_location}/{path}"


def resolved(e: TrackedFile, table_location: str) -> TrackedFile:
    """``e`` with its ``location`` and its DV's resolved against the table location."""
    location = resolve_location(e.location, table_location)
    dv = e.deletion_vector
    if dv is not None and resolve_location(dv.location, table_location) != dv.location:
        dv = dataclasses.replace(dv, location=resolve_location(dv.location, table_location))
    if location == e.location and dv is e.deletion_vector:
        return e
    return dataclasses.replace(e, location=location, deletion_vector=dv)


# --------------------------------------------------------------------------- rules


def check_row(e: TrackedFile, *, root: bool) -> None:
    """The spec's per-row rules for what icectl writes; a violation is a writer bug (ValueError)."""
    what = f"{e.content_type.name} entry {e.location}"
    allowed = ROOT_TYPES if root else LEAF_TYPES
    if e.content_type not in allowed:
        raise ValueError(f"{what} cannot be in a v4 {'root' if root else 'leaf'} manifest")
    if (e.manifest_info is not None) != e.is_manifest:
        raise ValueError(f"{what}: manifest_info is set exactly for manifest entries")
    if e.deletion_vector is not None and e.content_type != ContentType.DATA:
        raise ValueError(f"{what}: a deletion_vector belongs to a data file")
    if e.is_manifest and (e.sort_order_id is not None or e.split_offsets is not None or e.partition is not None):
        raise ValueError(f"{what}: sort_order_id, split_offsets and partition are null for manifests")
    t = e.tracking
    if not e.is_manifest and (t.deleted_positions is not None or t.replaced_positions is not None):
        raise ValueError(f"{what}: deleted/replaced positions are only for manifest entries")
    if e.is_manifest and t.sequence_number != t.file_sequence_number:
        raise ValueError(f"{what}: sequence_number must equal file_sequence_number")
    explicit = root or t.status != EntryStatus.ADDED
    if explicit and None in (t.snapshot_id, t.sequence_number, t.file_sequence_number):
        raise ValueError(f"{what}: {t.status.name} entries{' of a root' if root else ''} carry snapshot_id "
                         "and sequence numbers")
    if root and e.content_type == ContentType.DATA and t.status in LIVE and t.first_row_id is None:
        raise ValueError(f"{what}: data files in a root carry first_row_id")


# --------------------------------------------------------------------------- reading semantics


def with_inherited(e: TrackedFile, snapshot_id: int, sequence_number: int) -> TrackedFile:
    """A root row with ADDED nulls filled from its snapshot: icectl always writes them, and a
    reader accepts a root that leaves them out (the merged text's open question)."""
    t = e.tracking
    if t.status != EntryStatus.ADDED or None not in (t.snapshot_id, t.sequence_number, t.file_sequence_number):
        return e
    return e.with_tracking(
        snapshot_id=snapshot_id if t.snapshot_id is None else t.snapshot_id,
        sequence_number=sequence_number if t.sequence_number is None else t.sequence_number,
        file_sequence_number=sequence_number if t.file_sequence_number is None else t.file_sequence_number)


def manifest_file_of(e: TrackedFile) -> ManifestFile:
    """The manifest-list row a root's DATA_MANIFEST/DELETE_MANIFEST entry stands for."""
    mi, t = e.manifest_info, e.tracking
    if not e.is_manifest or mi is None:
        raise CorruptInputError(f"{e.content_type.name} entry {e.location} is not a manifest with manifest_info")
    return ManifestFile(
        manifest_path=e.location, manifest_length=e.file_size_in_bytes, partition_spec_id=e.spec_id or 0,
        content=ManifestContent.DATA if e.content_type == ContentType.DATA_MANIFEST else ManifestContent.DELETES,
        sequence_number=t.sequence_number or 0, min_sequence_number=mi.min_sequence_number,
        added_snapshot_id=t.snapshot_id, added_files_count=mi.added_files_count,
        existing_files_count=mi.existing_files_count, deleted_files_count=mi.deleted_files_count,
        added_rows_count=mi.added_rows_count, existing_rows_count=mi.existing_rows_count,
        deleted_rows_count=mi.deleted_rows_count, partitions=None, key_metadata=e.key_metadata,
        first_row_id=t.first_row_id)


# A v4 status as the v1-v3 model shows it: MODIFIED is the live new version (EXISTING), REPLACED
# the old one, no longer live (DELETED), so a leaf's rows keep their ordinals.
_V3_STATUS = {EntryStatus.EXISTING: ManifestEntryStatus.EXISTING, EntryStatus.ADDED: ManifestEntryStatus.ADDED,
              EntryStatus.DELETED: ManifestEntryStatus.DELETED, EntryStatus.REPLACED: ManifestEntryStatus.DELETED,
              EntryStatus.MODIFIED: ManifestEntryStatus.EXISTING}


def v3_status(status: EntryStatus) -> ManifestEntryStatus:
    return _V3_STATUS[status]


def data_file_of(e: TrackedFile, partition_type: StructType, first_row_id: int | None = None) -> DataFile:
    """A data-file row as a v1-v3 :class:`DataFile`, partition in its spec's order."""
    if e.content_type != ContentType.DATA:
        raise CorruptInputError(f"{e.content_type.name} entry {e.location} is not a data file")
    values = e.partition or {}
    cs = e.content_stats or ContentStats()
    return DataFile(
        content=DataFileContent.DATA, file_path=e.location, file_format=e.file_format,
        partition=tuple(values.get(f.field_id) for f in partition_type.fields), record_count=e.record_count,
        file_size_in_bytes=e.file_size_in_bytes, column_sizes=None,
        **{n: getattr(cs, n) for n in STAT_FIELDS},
        key_metadata=e.key_metadata, split_offsets=e.split_offsets, equality_ids=None,
        sort_order_id=e.sort_order_id, first_row_id=e.first_row_id if first_row_id is None else first_row_id)


def dv_entry_of(e: TrackedFile, data_file: DataFile, status: ManifestEntryStatus,
                snapshot_id: int | None, sequence_number: int | None) -> ManifestEntry:
    """A colocated DV as the v1-v3 model's DV entry: a Puffin blob that references the data file,
    with the data file's partition and data sequence number (so the v3 rules apply it to exactly
    that file). ``file_size_in_bytes`` is the blob's end: the entry does not record the Puffin file's size."""
    dv = e.deletion_vector
    assert dv is not None
    f = DataFile(
        content=DataFileContent.POSITION_DELETES, file_path=dv.location, file_format=PUFFIN,
        partition=data_file.partition, record_count=dv.cardinality, file_size_in_bytes=dv.offset + dv.size_in_bytes,
        key_metadata=dv.key_metadata, referenced_data_file=e.location, content_offset=dv.offset,
        content_size_in_bytes=dv.size_in_bytes)
    return ManifestEntry(status, snapshot_id, sequence_number, sequence_number, f)


def root_file_entries(e: TrackedFile, partition_type: StructType,
                      snapshot_id: int) -> tuple[ManifestEntry, ManifestEntry | None]:
    """A root data-file row (inheritance applied) as v1-v3 entries: the data file, and its
    colocated DV (None when it has none)."""
    t = e.tracking
    f = data_file_of(e, partition_type)
    entry = ManifestEntry(v3_status(t.status), t.snapshot_id, t.sequence_number, t.file_sequence_number, f)
    if e.deletion_vector is None:
        return entry, None
    dv_status = entry.status
    if t.status == EntryStatus.MODIFIED:  # the DV changed in the snapshot that wrote MODIFIED
        dv_status = (ManifestEntryStatus.ADDED if t.modified_snapshot_id == snapshot_id
                     else ManifestEntryStatus.EXISTING)
    return entry, dv_entry_of(e, f, dv_status, t.modified_snapshot_id or t.snapshot_id, t.sequence_number)


def leaf_entries(rows: Iterable[TrackedFile], manifest: ManifestFile,
                 partition_type: StructType) -> list[ManifestEntry]:
    """Every row of a v4 leaf as a v1-v3 entry, in file order (a row's index is its manifest-DV
    ordinal), inheriting from the root entry (``manifest``). A null ``first_row_id`` of a live row
    is the leaf's plus the rows of the live null-first_row_id rows before it, whether or not the
    manifest DV removed them since (row ids never move)."""
    out: list[ManifestEntry] = []
    next_row_id = manifest.first_row_id
    for e in rows:
        t = e.tracking
        if e.content_type != ContentType.DATA:
            raise CorruptInputError(f"{e.content_type.name} entry {e.location} in a v4 leaf manifest "
                                    "(v4 leaves hold data files only)")
        if e.deletion_vector is not None:
            raise UnsupportedError(f"data file {e.location} has its deletion vector in a leaf manifest, which "
                                   "icectl does not read yet (it reads colocated DVs of root entries)",
                                   hint="nothing was changed; report the table to icectl")
        explicit = t.status != EntryStatus.ADDED
        snapshot_id = manifest.added_snapshot_id if t.snapshot_id is None else t.snapshot_id
        seq = t.sequence_number if t.sequence_number is not None or explicit else manifest.sequence_number
        fseq = (t.file_sequence_number if t.file_sequence_number is not None or explicit
                else manifest.sequence_number)
        row_id = t.first_row_id
        if row_id is None and next_row_id is not None and t.status in LIVE:
            row_id, next_row_id = next_row_id, next_row_id + e.record_count
        out.append(ManifestEntry(v3_status(t.status), snapshot_id, seq, fseq, data_file_of(e, partition_type, row_id)))
    return out


# --------------------------------------------------------------------------- writing from the v1-v3 model


def tracked_file_of(entry: ManifestEntry, spec_id: int, partition_type: StructType,
                    status: EntryStatus | None = None) -> TrackedFile:
    """A v1-v3 data-file entry (partition in its spec's order) as a v4 row. Column sizes have no
    place in v4's content stats and are dropped."""
    f = entry.data_file
    if f.content != DataFileContent.DATA:
        raise UnsupportedError(f"{f.content.name.lower().replace('_', ' ')} file {f.file_path} cannot be written "
                               "to a v4 manifest (v4 colocates deletion vectors; position and equality delete "
                               "files cannot be added to a v4 table)")
    return TrackedFile(
        tracking=Tracking(status if status is not None else EntryStatus(int(entry.status)), entry.snapshot_id,
                          entry.sequence_number, entry.file_sequence_number, first_row_id=f.first_row_id),
        content_type=ContentType.DATA, location=f.file_path, file_format=f.file_format.lower(),
        record_count=f.record_count, file_size_in_bytes=f.file_size_in_bytes, spec_id=spec_id,
        partition={pf.field_id: v for pf, v in zip(partition_type.fields, f.partition or (), strict=False)},
        content_stats=ContentStats(**{n: getattr(f, n) for n in STAT_FIELDS}),
        sort_order_id=f.sort_order_id, key_metadata=f.key_metadata, split_offsets=f.split_offsets)


def colocate(e: TrackedFile, dv: DataFile) -> TrackedFile:
    """``e`` with the v1-v3 DV entry ``dv`` (a Puffin blob referencing it) as its deletion_vector."""
    if not dv.is_dv or dv.referenced_data_file != e.location:
        raise ValueError(f"{dv.file_path} is not a deletion vector of {e.location}")
    assert dv.content_offset is not None and dv.content_size_in_bytes is not None
    return dataclasses.replace(e, deletion_vector=DeletionVector(dv.file_path, dv.content_offset,
                                                                 dv.content_size_in_bytes, dv.record_count,
                                                                 dv.key_metadata))


def manifest_info_of(rows: Iterable[TrackedFile], *, format_version: int = FORMAT_VERSION,
                     default_sequence_number: int | None = None) -> ManifestInfo:
    """A leaf's counts by status (MODIFIED counts as existing) and the smallest data sequence
    number of its live rows (``default_sequence_number`` for rows that inherit it; -1: none)."""
    files = {s: 0 for s in EntryStatus}
    rows_by = {s: 0 for s in EntryStatus}
    min_seq: int | None = None
    for e in rows:
        s = e.status
        files[s] += 1
        rows_by[s] += e.record_count
        seq = e.tracking.sequence_number if e.tracking.sequence_number is not None else default_sequence_number
        if e.is_live and seq is not None and (min_seq is None or seq < min_seq):
            min_seq = seq
    existing = (EntryStatus.EXISTING, EntryStatus.MODIFIED)
    return ManifestInfo(
        added_files_count=files[EntryStatus.ADDED], existing_files_count=sum(files[s] for s in existing),
        deleted_files_count=files[EntryStatus.DELETED], replaced_files_count=files[EntryStatus.REPLACED],
        added_rows_count=rows_by[EntryStatus.ADDED], existing_rows_count=sum(rows_by[s] for s in existing),
        deleted_rows_count=rows_by[EntryStatus.DELETED],
        min_sequence_number=-1 if min_seq is None else min_seq, format_version=format_version)


def manifest_info_of_manifest_file(m: ManifestFile, *, format_version: int, counts: tuple[int, ...] | None = None,
                                   dv: bytes | None = None) -> ManifestInfo:
    """A manifest-list row's counts as manifest_info (``counts``: the six counts when the list
    lacks them, v1)."""
    listed = (m.added_files_count, m.existing_files_count, m.deleted_files_count, m.added_rows_count,
              m.existing_rows_count, m.deleted_rows_count)
    values = [c if v is None else v for v, c in zip(listed, counts or (0,) * 6, strict=True)]
    return ManifestInfo(values[0], values[1], values[2], 0, values[3], values[4], values[5],
                        m.min_sequence_number, format_version, dv)


def manifest_row(m: ManifestFile, info: ManifestInfo, *, status: EntryStatus, record_count: int,
                 modified_snapshot_id: int | None = None, deleted_positions: bytes | None = None,
                 file_format: str | None = None) -> TrackedFile:
    """A root row referencing the manifest ``m`` (sequence numbers and snapshot from ``m``)."""
    seq = m.sequence_number
    data = m.content == ManifestContent.DATA
    return TrackedFile(
        tracking=Tracking(status, m.added_snapshot_id, seq, seq, modified_snapshot_id,
                          m.first_row_id if data else None, deleted_positions),
        content_type=ContentType.DATA_MANIFEST if data else ContentType.DELETE_MANIFEST,
        location=m.manifest_path,
        file_format=file_format or ("parquet" if info.format_version >= FORMAT_VERSION else "avro"),
        record_count=record_count, file_size_in_bytes=m.manifest_length, spec_id=m.partition_spec_id,
        manifest_info=info, key_metadata=m.key_metadata)

"""The v4 content entry (layout page ``v4-layout.md``, section 3): one row of a root or v4 leaf
manifest, and what a v4 table's rows mean in the v1-v3 model.

Format v4 is not adopted upstream; icectl implements the "Single File Commits" proposal as the
project's layout page makes it exact. A root manifest holds data and delete files (content types
0-2), references to leaf manifests (3, 4) with their ``manifest_stats``, and manifest DVs (5) that
remove rows of a leaf by ordinal. ``partition`` is keyed by partition field id (the table's unified
partition type). ADDED entries of a root inherit their snapshot id and sequence numbers from the
snapshot (section 6); a leaf's entries inherit from the root entry that references it, as v1-v3
manifests inherit from their manifest-list row.

The conversions to :class:`~icectl.spec.manifest.ManifestFile` and
:class:`~icectl.spec.manifest.ManifestEntry` let readers of v1-v3 tables read v4 tables unchanged.
Encoding (Avro) is :mod:`icectl.codec.v4_proposal`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
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
    inherit_from_manifest,
)
from icectl.spec.schema import IcebergType, StructType
from icectl.spec.values import from_bytes, sort_key

FORMAT_VERSION = 4
ROOT, DATA, DELETES = "root", "data", "deletes"  # key-value ``content`` of a v4 manifest
PUFFIN = "puffin"


class ContentType(IntEnum):
    """``content_type`` (134) of a content entry."""

    DATA = 0
    POSITION_DELETE = 1
    EQUALITY_DELETE = 2
    DATA_MANIFEST = 3
    DELETE_MANIFEST = 4
    MANIFEST_DV = 5


FILE_TYPES = frozenset({ContentType.DATA, ContentType.POSITION_DELETE, ContentType.EQUALITY_DELETE})
MANIFEST_TYPES = frozenset({ContentType.DATA_MANIFEST, ContentType.DELETE_MANIFEST})
# Which content types each kind of v4 manifest may hold (3, 4 and 5 only in a root).
ALLOWED_TYPES = {
    ROOT: frozenset(ContentType),
    DATA: frozenset({ContentType.DATA}),
    DELETES: frozenset({ContentType.POSITION_DELETE, ContentType.EQUALITY_DELETE}),
}


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """``version_info`` (5)."""

    status: ManifestEntryStatus
    snapshot_id: int | None = None
    sequence_number: int | None = None
    file_sequence_number: int | None = None


@dataclass(frozen=True, slots=True)
class DeletionVectorRef:
    """``deletion_vector`` (147): where a DV's blob is (Puffin range) or the blob itself (inline)."""

    offset: int | None = None
    size_in_bytes: int | None = None
    inline_content: bytes | None = None


@dataclass(frozen=True, slots=True)
class ManifestStats:
    """``manifest_stats`` (521): the manifest-list counts of a leaf."""

    added_files_count: int
    existing_files_count: int
    deleted_files_count: int
    added_rows_count: int
    existing_rows_count: int
    deleted_rows_count: int
    min_sequence_number: int


@dataclass(frozen=True, slots=True)
class ContentStats:
    """``content_stats`` (149): the v3 column metrics, grouped (layout page section 4)."""

    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None


STAT_FIELDS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
               "upper_bounds")


@dataclass(frozen=True, slots=True)
class ContentEntry:
    """One row of a root or v4 leaf manifest. ``partition`` maps partition field ids to values."""

    content_type: ContentType
    location: str
    file_format: str
    partition_spec_id: int
    record_count: int
    version_info: VersionInfo
    deletion_vector: DeletionVectorRef | None = None
    partition: dict[int, Any] | None = None
    sort_order_id: int | None = None
    file_size_in_bytes: int | None = None
    content_stats: ContentStats | None = None
    manifest_stats: ManifestStats | None = None
    referenced_file: str | None = None
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    first_row_id: int | None = None

    @property
    def status(self) -> ManifestEntryStatus:
        return self.version_info.status

    @property
    def is_live(self) -> bool:
        return self.version_info.status != ManifestEntryStatus.DELETED

    @property
    def is_manifest(self) -> bool:
        return self.content_type in MANIFEST_TYPES

    @property
    def is_file(self) -> bool:
        return self.content_type in FILE_TYPES

    @property
    def is_manifest_dv(self) -> bool:
        return self.content_type == ContentType.MANIFEST_DV

    @property
    def manifest_dv_target(self) -> str | None:
        """The leaf manifest a manifest DV removes rows from."""
        return self.referenced_file if self.is_manifest_dv else None


@dataclass(frozen=True, slots=True)
class V4Manifest:
    """A decoded v4 manifest: its entries in file order and its key-value metadata."""

    entries: list[ContentEntry]
    metadata: dict[str, str]

    @property
    def content(self) -> str:
        return self.metadata.get("content", "")



# --------------------------------------------------------------------------- root semantics


def with_inherited(e: ContentEntry, snapshot_id: int, sequence_number: int) -> ContentEntry:
    """A root entry with ADDED nulls filled from its snapshot (layout page section 6)."""
    vi = e.version_info
    if vi.status != ManifestEntryStatus.ADDED or None not in (vi.snapshot_id, vi.sequence_number,
                                                              vi.file_sequence_number):
        return e
    return dataclasses.replace(e, version_info=VersionInfo(
        vi.status, snapshot_id if vi.snapshot_id is None else vi.snapshot_id,
        sequence_number if vi.sequence_number is None else vi.sequence_number,
        sequence_number if vi.file_sequence_number is None else vi.file_sequence_number))


def live_manifest_dvs(entries: Iterable[ContentEntry]) -> dict[str, ContentEntry]:
    """Leaf location -> its live manifest DV entry in a root."""
    out: dict[str, ContentEntry] = {}
    for e in entries:
        if e.is_manifest_dv and e.is_live:
            target = e.referenced_file or e.location
            if target in out:
                raise CorruptInputError(f"root has more than one live manifest DV for {target}")
            out[target] = e
    return out


# --------------------------------------------------------------------------- statistics


def manifest_stats_of(entries: Iterable[ContentEntry]) -> ManifestStats:
    """Counts by status and the smallest explicit sequence number of a live entry (-1: none)."""
    counts = {s: [0, 0] for s in ManifestEntryStatus}
    min_seq: int | None = None
    for e in entries:
        counts[e.status][0] += 1
        counts[e.status][1] += e.record_count
        seq = e.version_info.sequence_number
        if e.is_live and seq is not None and (min_seq is None or seq < min_seq):
            min_seq = seq
    a, x, d = (counts[s] for s in (ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING,
                                   ManifestEntryStatus.DELETED))
    return ManifestStats(a[0], x[0], d[0], a[1], x[1], d[1], -1 if min_seq is None else min_seq)


def aggregate_content_stats(stats: Iterable[ContentEntry | ContentStats | None],
                            field_types: Mapping[int, IcebergType]) -> ContentStats:
    """A manifest entry's content_stats over its live entries (layout page section 4).

    Counts are summed, lower bounds take the type-aware minimum and upper bounds the maximum; a
    column missing from any entry is omitted (so is a bound of a column whose type is unknown).
    """
    acc: dict[str, dict[int, Any] | None] = {}
    first = True
    for item in stats:
        if isinstance(item, ContentEntry):
            if not item.is_live:
                continue
            item = item.content_stats
        cs = item or ContentStats()
        for name in STAT_FIELDS:
            values = getattr(cs, name) or {}
            if first:
                acc[name] = dict(values)
                continue
            current = acc[name]
            assert current is not None
            for fid in list(current):
                if fid not in values:
                    del current[fid]
                elif name in ("lower_bounds", "upper_bounds"):
                    current[fid] = _pick_bound(field_types.get(fid), current[fid], values[fid],
                                               lower=name == "lower_bounds")
                else:
                    current[fid] += values[fid]
        first = False
    out = {name: (acc.get(name) or None) for name in STAT_FIELDS}
    for name in ("lower_bounds", "upper_bounds"):
        bounds = out[name]
        if bounds is not None:
            bounds = {k: v for k, v in bounds.items() if v is not None}
            out[name] = bounds or None
    return ContentStats(**out)


def _pick_bound(t: IcebergType | None, a: bytes | None, b: bytes, *, lower: bool) -> bytes | None:
    if a is None or t is None or not t.is_primitive:
        return None  # cannot order it: leave the bound out rather than guess
    try:
        key = sort_key(t)
        ka, kb = key(from_bytes(t, a)), key(from_bytes(t, b))
    except (CorruptInputError, UnsupportedError, TypeError, ValueError):
        return None
    if lower:
        return b if kb < ka else a
    return b if ka < kb else a


# --------------------------------------------------------------------------- v1-v3 model conversions


def manifest_file_of(e: ContentEntry) -> ManifestFile:
    """The manifest-list row a DATA_MANIFEST/DELETE_MANIFEST entry stands for (inheritance applied
    to the entry first, see :func:`with_inherited`)."""
    if not e.is_manifest or e.manifest_stats is None:
        raise CorruptInputError(f"{e.content_type.name} entry {e.location} is not a manifest with manifest_stats")
    ms, vi = e.manifest_stats, e.version_info
    return ManifestFile(
        manifest_path=e.location, manifest_length=e.file_size_in_bytes or 0, partition_spec_id=e.partition_spec_id,
        content=ManifestContent.DATA if e.content_type == ContentType.DATA_MANIFEST else ManifestContent.DELETES,
        sequence_number=vi.sequence_number or 0, min_sequence_number=ms.min_sequence_number,
        added_snapshot_id=vi.snapshot_id, added_files_count=ms.added_files_count,
        existing_files_count=ms.existing_files_count, deleted_files_count=ms.deleted_files_count,
        added_rows_count=ms.added_rows_count, existing_rows_count=ms.existing_rows_count,
        deleted_rows_count=ms.deleted_rows_count, partitions=None, key_metadata=e.key_metadata,
        first_row_id=e.first_row_id)


def manifest_entry_of_manifest_file(m: ManifestFile, *, status: ManifestEntryStatus, manifest_stats: ManifestStats,
                                    content_stats: ContentStats | None) -> ContentEntry:
    """A root entry referencing a v1-v4 leaf, from its manifest-list row (layout page section 8)."""
    seq = m.sequence_number
    return ContentEntry(
        content_type=ContentType.DATA_MANIFEST if m.content == ManifestContent.DATA else ContentType.DELETE_MANIFEST,
        location=m.manifest_path, file_format="avro", partition_spec_id=m.partition_spec_id,
        record_count=manifest_stats.added_rows_count + manifest_stats.existing_rows_count,
        version_info=VersionInfo(status, m.added_snapshot_id, seq, seq), file_size_in_bytes=m.manifest_length,
        content_stats=content_stats, manifest_stats=manifest_stats, key_metadata=m.key_metadata,
        first_row_id=m.first_row_id if m.content == ManifestContent.DATA else None)


_CONTENT_OF_TYPE = {ContentType.DATA: DataFileContent.DATA,
                    ContentType.POSITION_DELETE: DataFileContent.POSITION_DELETES,
                    ContentType.EQUALITY_DELETE: DataFileContent.EQUALITY_DELETES}
_TYPE_OF_CONTENT = {v: k for k, v in _CONTENT_OF_TYPE.items()}


def data_file_of(e: ContentEntry, partition_type: StructType, first_row_id: int | None = None) -> DataFile:
    """A data/delete file entry as a v1-v3 :class:`DataFile`, partition in its spec's order."""
    if not e.is_file:
        raise CorruptInputError(f"{e.content_type.name} entry {e.location} is not a data or delete file")
    values = e.partition or {}
    cs = e.content_stats or ContentStats()
    dv = e.deletion_vector
    return DataFile(
        content=_CONTENT_OF_TYPE[e.content_type], file_path=e.location, file_format=e.file_format,
        partition=tuple(values.get(f.field_id) for f in partition_type.fields), record_count=e.record_count,
        file_size_in_bytes=e.file_size_in_bytes or 0,
        **{n: getattr(cs, n) for n in STAT_FIELDS},
        key_metadata=e.key_metadata, split_offsets=e.split_offsets, equality_ids=e.equality_ids,
        sort_order_id=e.sort_order_id,
        first_row_id=e.first_row_id if first_row_id is None else first_row_id,
        referenced_data_file=e.referenced_file if e.content_type != ContentType.DATA else None,
        content_offset=dv.offset if dv is not None else None,
        content_size_in_bytes=dv.size_in_bytes if dv is not None else None)


def manifest_entry_of(e: ContentEntry, partition_type: StructType) -> ManifestEntry:
    """A root-level file entry (inheritance already applied) as a :class:`ManifestEntry`."""
    vi = e.version_info
    return ManifestEntry(vi.status, vi.snapshot_id, vi.sequence_number, vi.file_sequence_number,
                         data_file_of(e, partition_type))


def leaf_entries(leaf: V4Manifest, manifest: ManifestFile, partition_type: StructType) -> list[ManifestEntry]:
    """A v4 leaf's rows as :class:`ManifestEntry` objects, inheriting from the root entry
    (``manifest``) as v1-v3 manifests inherit from their manifest-list row."""
    out = []
    next_row_id = manifest.first_row_id if manifest.content == ManifestContent.DATA else None
    for e in leaf.entries:
        vi = e.version_info
        content = _CONTENT_OF_TYPE.get(e.content_type)
        if content is None:
            raise CorruptInputError(f"{e.content_type.name} entry {e.location} in a leaf manifest")
        inherited = inherit_from_manifest(
            manifest, status=vi.status, content=content, snapshot_id=vi.snapshot_id,
            sequence_number=vi.sequence_number, file_sequence_number=vi.file_sequence_number,
            first_row_id=e.first_row_id, record_count=e.record_count, next_row_id=next_row_id)
        next_row_id = inherited.next_row_id
        out.append(ManifestEntry(vi.status, inherited.snapshot_id, inherited.sequence_number,
                                 inherited.file_sequence_number,
                                 data_file_of(e, partition_type, inherited.first_row_id)))
    return out


def content_entry_of(entry: ManifestEntry, spec_id: int, partition_type: StructType) -> ContentEntry:
    """A v1-v3 entry (its DataFile's partition in the spec's order) as a v4 file entry."""
    f = entry.data_file
    content_type = _TYPE_OF_CONTENT[f.content]
    dv = (DeletionVectorRef(f.content_offset, f.content_size_in_bytes) if f.is_dv else None)
    return ContentEntry(
        content_type=content_type, location=f.file_path, file_format=f.file_format.lower(),
        partition_spec_id=spec_id, record_count=f.record_count,
        version_info=VersionInfo(entry.status, entry.snapshot_id, entry.sequence_number,
                                 entry.file_sequence_number),
        deletion_vector=dv,
        partition={pf.field_id: v for pf, v in zip(partition_type.fields, f.partition or (), strict=False)},
        sort_order_id=f.sort_order_id if content_type == ContentType.DATA else None,
        file_size_in_bytes=f.file_size_in_bytes,
        content_stats=ContentStats(**{n: getattr(f, n) for n in STAT_FIELDS}),
        referenced_file=f.referenced_data_file if content_type != ContentType.DATA else None,
        key_metadata=f.key_metadata, split_offsets=f.split_offsets,
        equality_ids=f.equality_ids if content_type == ContentType.EQUALITY_DELETE else None,
        first_row_id=f.first_row_id if content_type == ContentType.DATA else None)

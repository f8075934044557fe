"""The v4 layout's encoding: root manifests, v4 leaf manifests and manifest delete vectors as Avro.

The model (:class:`~icectl.spec.v4_proposal.ContentEntry` and what its rows mean) is
:mod:`icectl.spec.v4_proposal`; it is re-exported here for callers that read or write v4 files.

* A root manifest and a v4 leaf manifest are Avro object-container files of ``content_entry``
  records (field ids in ``field-id``), key-value metadata ``format-version`` = ``"4"`` and
  ``content`` = ``root``/``data``/``deletes``; a root also carries ``snapshot-id``,
  ``sequence-number`` and ``parent-snapshot-id`` for humans. No ``schema``/``partition-spec``.
* ``partition`` (102) is typed as the table's unified partition type (every partition field of
  every spec, by field id, all optional); :class:`ContentEntry` keeps it as ``{field id: value}``.
* A manifest DV (content_type 5) is a complete ``deletion-vector-v1`` blob, inline in the root
  (``location`` = ``referenced_file`` = the leaf) or in a Puffin file (``location`` = the Puffin
  file, ``offset``/``size_in_bytes`` of the blob). Its positions are row ordinals in the leaf.

Bytes in, bytes out: callers do the I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icectl.codec.avro import (
    AvroSchemaBuilder,
    AvroSource,
    as_stream,
    avro_field_name,
    avro_map,
    avro_partition_value,
    avro_value_converter,
    field_names,
    named_types,
    open_reader,
    read_records,
    record_field,
    resolve_type,
    write_avro_file,
    writer_schema,
)
from icectl.codec.puffin import decode_deletion_vector, encode_deletion_vector
from icectl.errors import CorruptInputError
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.schema import BINARY, INT, LONG, STRING, IcebergType, ListType, MapType, NestedField, StructType
from icectl.spec.v4_proposal import (
    ALLOWED_TYPES,
    DATA,
    DELETES,
    FORMAT_VERSION,
    PUFFIN,
    ROOT,
    STAT_FIELDS,
    ContentEntry,
    ContentStats,
    ContentType,
    DeletionVectorRef,
    ManifestStats,
    V4Manifest,
    VersionInfo,
    aggregate_content_stats,
    content_entry_of,
    data_file_of,
    leaf_entries,
    live_manifest_dvs,
    manifest_entry_of,
    manifest_entry_of_manifest_file,
    manifest_file_of,
    manifest_stats_of,
    with_inherited,
)

if TYPE_CHECKING:  # pyroaring is imported where bitmaps are made: most commands read no DV
    from pyroaring import BitMap64

# --------------------------------------------------------------------------- schema


def _f(field_id: int, name: str, t: IcebergType, required: bool = False) -> NestedField:
    return NestedField(field_id, name, t, required=required)


def _int_map(key_id: int, value_id: int, value: IcebergType) -> MapType:
    return MapType(key_id, INT, value_id, value, value_required=True)


VERSION_INFO = StructType((
    _f(0, "status", INT, True), _f(1, "snapshot_id", LONG), _f(3, "sequence_number", LONG),
    _f(4, "file_sequence_number", LONG)))
DELETION_VECTOR = StructType((_f(144, "offset", LONG), _f(145, "size_in_bytes", LONG),
                              _f(146, "inline_content", BINARY)))
MANIFEST_STATS = StructType((
    _f(504, "added_files_count", INT, True), _f(505, "existing_files_count", INT, True),
    _f(506, "deleted_files_count", INT, True), _f(512, "added_rows_count", LONG, True),
    _f(513, "existing_rows_count", LONG, True), _f(514, "deleted_rows_count", LONG, True),
    _f(516, "min_sequence_number", LONG, True)))
CONTENT_STATS = StructType((
    _f(108, "column_sizes", _int_map(117, 118, LONG)), _f(109, "value_counts", _int_map(119, 120, LONG)),
    _f(110, "null_value_counts", _int_map(121, 122, LONG)), _f(137, "nan_value_counts", _int_map(138, 139, LONG)),
    _f(125, "lower_bounds", _int_map(126, 127, BINARY)), _f(128, "upper_bounds", _int_map(129, 130, BINARY))))


def content_entry_struct(partition_type: StructType) -> StructType:
    """The ``content_entry`` struct (layout page section 3), fields in the page's order.

    ``partition_type`` is the table's unified partition type; every field is made optional.
    """
    partition = StructType(tuple(dataclasses.replace(f, required=False) for f in partition_type.fields))
    return StructType((
        _f(134, "content_type", INT, True),
        _f(100, "location", STRING, True),
        _f(101, "file_format", STRING, True),
        _f(5, "version_info", VERSION_INFO),
        _f(147, "deletion_vector", DELETION_VECTOR),
        _f(148, "partition_spec_id", INT, True),
        _f(102, "partition", partition),
        _f(140, "sort_order_id", INT),
        _f(103, "record_count", LONG, True),
        _f(104, "file_size_in_bytes", LONG),
        _f(149, "content_stats", CONTENT_STATS),
        _f(521, "manifest_stats", MANIFEST_STATS),
        _f(143, "referenced_file", STRING),
        _f(131, "key_metadata", BINARY),
        _f(132, "split_offsets", ListType(133, LONG, True)),
        _f(135, "equality_ids", ListType(136, INT, True)),
        _f(142, "first_row_id", LONG),
    ))


def content_entry_avro_schema(partition_type: StructType) -> dict[str, Any]:
    """The Avro schema (JSON object) of a v4 manifest of a table with this unified partition type."""
    return AvroSchemaBuilder().record(content_entry_struct(_unique_names(partition_type)), "content_entry")


def _unique_names(partition_type: StructType) -> StructType:
    # Fields are matched by id; two specs may reuse a name for different ids, Avro names must differ.
    seen: set[str] = set()
    fields = []
    for f in partition_type.fields:
        name = f.name if avro_field_name(f.name) not in seen else f"{f.name}_{f.field_id}"
        seen.add(avro_field_name(name))
        fields.append(dataclasses.replace(f, name=name))
    return StructType(tuple(fields))


# --------------------------------------------------------------------------- rules


def check_entry(e: ContentEntry, content: str) -> None:
    """The layout page's per-entry rules; a violation is a writer bug (ValueError)."""
    what = f"{e.content_type.name} entry {e.location}"
    if e.content_type not in ALLOWED_TYPES[content]:
        raise ValueError(f"{what} cannot be in a '{content}' manifest")
    if (e.manifest_stats is not None) != e.is_manifest:
        raise ValueError(f"{what}: manifest_stats must be set exactly for manifest entries")
    is_dv = e.is_manifest_dv or (e.content_type == ContentType.POSITION_DELETE and e.file_format.lower() == PUFFIN)
    if (e.deletion_vector is not None) != is_dv:
        raise ValueError(f"{what}: deletion_vector must be set exactly for DVs")
    if is_dv and e.file_format.lower() != PUFFIN:
        raise ValueError(f"{what}: a DV's file_format is puffin")
    if (e.equality_ids is not None) != (e.content_type == ContentType.EQUALITY_DELETE):
        raise ValueError(f"{what}: equality_ids must be set exactly for equality deletes")
    if e.sort_order_id is not None and e.content_type != ContentType.DATA:
        raise ValueError(f"{what}: sort_order_id is only for data files")
    if e.partition is not None and not e.is_file:
        raise ValueError(f"{what}: partition is null for manifests and manifest DVs")
    if e.file_size_in_bytes is None:
        raise ValueError(f"{what}: file_size_in_bytes is required (location names a real file)")
    vi = e.version_info
    if e.is_manifest and vi.sequence_number != vi.file_sequence_number:
        raise ValueError(f"{what}: sequence_number must equal file_sequence_number")
    if vi.status != ManifestEntryStatus.ADDED and (vi.snapshot_id is None or vi.sequence_number is None
                                                   or vi.file_sequence_number is None):
        raise ValueError(f"{what}: {vi.status.name} entries carry snapshot_id and sequence numbers")
    if e.is_manifest_dv:
        dv = e.deletion_vector
        assert dv is not None
        if e.referenced_file is None:
            raise ValueError(f"{what}: a manifest DV names its leaf in referenced_file")
        inline = dv.inline_content is not None
        if inline == (dv.offset is not None or dv.size_in_bytes is not None):
            raise ValueError(f"{what}: a manifest DV is either inline or a Puffin range")
        if inline and e.location != e.referenced_file:
            raise ValueError(f"{what}: an inline manifest DV's location is its leaf")
        if inline and len(decode_deletion_vector(dv.inline_content or b"")) != e.record_count:
            raise ValueError(f"{what}: record_count is not the DV's cardinality")


def _check_root(entries: list[ContentEntry]) -> None:
    live_dvs: set[str] = set()
    for e in entries:
        if e.is_manifest_dv and e.is_live:
            target = e.referenced_file or ""
            if target in live_dvs:
                raise ValueError(f"more than one live manifest DV for {target}")
            live_dvs.add(target)


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True, slots=True)
class V4WriteResult:
    """A written v4 manifest and, for a leaf, the root entry's manifest_stats inputs."""

    data: bytes
    stats: ManifestStats  # min_sequence_number: -1 when every live entry inherits it
    content_stats: ContentStats | None


def write_v4_manifest(
    entries: Iterable[ContentEntry],
    *,
    content: str,
    partition_type: StructType,
    field_types: Mapping[int, IcebergType] | None = None,
    snapshot_id: int | None = None,
    sequence_number: int | None = None,
    parent_snapshot_id: int | None = None,
    codec: str = "deflate",
) -> V4WriteResult:
    """Write a root (``content="root"``) or a v4 leaf (``"data"``/``"deletes"``).

    ``partition_type`` is the table's unified partition type. A root takes the snapshot's id,
    sequence number and parent for its key-value metadata. ``field_types`` (column id -> type)
    lets a leaf aggregate its entries' content stats for the root entry that will reference it.
    """
    if content not in ALLOWED_TYPES:
        raise ValueError(f"unknown v4 manifest content {content!r}")
    rows = list(entries)
    for e in rows:
        check_entry(e, content)
    if content == ROOT:
        _check_root(rows)
    ptype = _unique_names(partition_type)
    schema = AvroSchemaBuilder().record(content_entry_struct(ptype), "content_entry")
    pfields = [(f.field_id, avro_field_name(f.name), f.field_type) for f in ptype.fields]
    known = {fid for fid, _, _ in pfields}

    def records() -> Iterable[dict[str, Any]]:
        for e in rows:
            if e.partition is not None and not set(e.partition) <= known:
                raise ValueError(f"{e.location}: partition fields {sorted(set(e.partition) - known)} "
                                 "are not in the table's partition type")
            yield _record(e, pfields)

    metadata = {"format-version": str(FORMAT_VERSION), "content": content}
    if content == ROOT:
        metadata["snapshot-id"] = _str_or_null(snapshot_id)
        metadata["sequence-number"] = _str_or_null(sequence_number)
        metadata["parent-snapshot-id"] = _str_or_null(parent_snapshot_id)
    data = write_avro_file(schema, records(), metadata, codec)
    stats = manifest_stats_of(rows)
    content_stats = aggregate_content_stats(rows, field_types) if field_types is not None else None
    return V4WriteResult(data, stats, content_stats)


def _str_or_null(value: int | None) -> str:
    return "null" if value is None else str(value)


def _record(e: ContentEntry, pfields: list[tuple[int, str, IcebergType]]) -> dict[str, Any]:
    vi, dv, ms, cs = e.version_info, e.deletion_vector, e.manifest_stats, e.content_stats
    return {
        "content_type": int(e.content_type), "location": e.location, "file_format": e.file_format,
        "version_info": {"status": int(vi.status), "snapshot_id": vi.snapshot_id,
                         "sequence_number": vi.sequence_number,
                         "file_sequence_number": vi.file_sequence_number},
        "deletion_vector": None if dv is None else {
            "offset": dv.offset, "size_in_bytes": dv.size_in_bytes, "inline_content": dv.inline_content},
        "partition_spec_id": e.partition_spec_id,
        "partition": None if e.partition is None else {
            name: avro_partition_value(t, e.partition.get(fid)) for fid, name, t in pfields},
        "sort_order_id": e.sort_order_id, "record_count": e.record_count,
        "file_size_in_bytes": e.file_size_in_bytes,
        "content_stats": None if cs is None else {
            n: None if getattr(cs, n) is None else [{"key": k, "value": v} for k, v in getattr(cs, n).items()]
            for n in STAT_FIELDS},
        "manifest_stats": None if ms is None else dataclasses.asdict(ms),
        "referenced_file": e.referenced_file, "key_metadata": e.key_metadata,
        "split_offsets": None if e.split_offsets is None else list(e.split_offsets),
        "equality_ids": None if e.equality_ids is None else list(e.equality_ids),
        "first_row_id": e.first_row_id,
    }


# --------------------------------------------------------------------------- reading


_ENTRY_IDS = {"content_type": 134, "location": 100, "file_format": 101, "version_info": 5,
              "deletion_vector": 147, "partition_spec_id": 148, "partition": 102, "sort_order_id": 140,
              "record_count": 103, "file_size_in_bytes": 104, "content_stats": 149, "manifest_stats": 521,
              "referenced_file": 143, "key_metadata": 131, "split_offsets": 132, "equality_ids": 135,
              "first_row_id": 142}
_STRUCT_IDS = {
    "version_info": {f.name: f.field_id for f in VERSION_INFO.fields},
    "deletion_vector": {f.name: f.field_id for f in DELETION_VECTOR.fields},
    "manifest_stats": {f.name: f.field_id for f in MANIFEST_STATS.fields},
    "content_stats": {f.name: f.field_id for f in CONTENT_STATS.fields},
}
_REQUIRED = ("content_type", "location", "file_format", "partition_spec_id", "record_count")


def v4_format_version(metadata: Mapping[str, str]) -> int:
    """The ``format-version`` key of a manifest's metadata (absent: 1)."""
    raw = metadata.get("format-version")
    try:
        return int(raw) if raw else 1
    except ValueError:
        raise CorruptInputError(f"manifest format-version {raw!r} is not a number") from None


def read_v4_manifest(source: AvroSource, *, partition_types: Mapping[int, IcebergType]) -> V4Manifest:
    """Decode a root or v4 leaf manifest by field ids. ``partition_types``: partition field id ->
    result type (any spec's), used to turn Avro logical types back into icectl values."""
    reader = open_reader(as_stream(source))
    metadata = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in dict(reader.metadata).items()}
    if v4_format_version(metadata) != FORMAT_VERSION:
        raise CorruptInputError(f"not a v4 manifest (format-version {metadata.get('format-version')!r})")
    if metadata.get("content") not in ALLOWED_TYPES:
        raise CorruptInputError(f"v4 manifest has content {metadata.get('content')!r}, "
                                "expected root, data or deletes")
    schema = writer_schema(reader)
    named = named_types(schema, {})
    names = field_names(schema, _ENTRY_IDS)
    for required in _REQUIRED:
        if required not in names:
            raise CorruptInputError(f"v4 manifest schema has no {required} field")
    sub = {}
    for struct_name, ids in _STRUCT_IDS.items():
        if struct_name in names:
            sub[struct_name] = field_names(resolve_type(record_field(schema, names[struct_name])["type"], named), ids)
    partition = _partition_reader(schema, names, named, partition_types)
    decode = _entry_decoder(names, sub, partition)
    entries = []
    for index, rec in enumerate(read_records(reader)):
        try:
            entries.append(decode(rec))
        except CorruptInputError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise CorruptInputError(f"malformed v4 content entry #{index}: {type(e).__name__}: {e}") from None
    return V4Manifest(entries, metadata)


def _partition_reader(schema: dict[str, Any], names: dict[str, str], named: dict[str, Any],
                      partition_types: Mapping[int, IcebergType]) -> Callable[[Any], dict[int, Any] | None]:
    if "partition" not in names:
        return lambda _rec: None
    record = resolve_type(record_field(schema, names["partition"])["type"], named)
    plan = []
    for f in record.get("fields", ()) if isinstance(record, dict) else ():
        if "field-id" not in f:
            raise CorruptInputError(f"v4 partition field {f['name']!r} has no field-id")
        fid = int(f["field-id"])
        t = partition_types.get(fid)
        plan.append((fid, f["name"], avro_value_converter(t) if t is not None else (lambda v: v)))

    def decode(rec: Any) -> dict[int, Any] | None:
        if rec is None:
            return None
        return {fid: convert(rec.get(name)) for fid, name, convert in plan}

    return decode


def _entry_decoder(names: dict[str, str], sub: dict[str, dict[str, str]],
                   partition: Callable[[Any], dict[int, Any] | None]) -> Callable[[dict[str, Any]], ContentEntry]:
    def get(rec: dict[str, Any], name: str) -> Any:
        return rec.get(names[name]) if name in names else None

    def struct(rec: dict[str, Any], name: str) -> dict[str, Any] | None:
        raw = get(rec, name)
        if raw is None:
            return None
        return {n: raw.get(avro) for n, avro in sub[name].items()}

    def decode(rec: dict[str, Any]) -> ContentEntry:
        try:
            content_type = ContentType(get(rec, "content_type"))
        except ValueError:
            raise CorruptInputError(f"unknown content_type {get(rec, 'content_type')!r}") from None
        vi = struct(rec, "version_info")
        if vi is None or vi.get("status") is None:
            raise CorruptInputError(f"content entry {get(rec, 'location')} has no version_info.status")
        try:
            status = ManifestEntryStatus(vi["status"])
        except ValueError:
            raise CorruptInputError(f"invalid version_info.status {vi['status']!r}") from None
        dv = struct(rec, "deletion_vector")
        ms = struct(rec, "manifest_stats")
        cs = struct(rec, "content_stats")
        offsets, eq_ids = get(rec, "split_offsets"), get(rec, "equality_ids")
        return ContentEntry(
            content_type=content_type, location=get(rec, "location"), file_format=get(rec, "file_format"),
            partition_spec_id=get(rec, "partition_spec_id"), record_count=get(rec, "record_count"),
            version_info=VersionInfo(status, vi.get("snapshot_id"), vi.get("sequence_number"),
                                     vi.get("file_sequence_number")),
            deletion_vector=None if dv is None else DeletionVectorRef(
                dv.get("offset"), dv.get("size_in_bytes"),
                None if dv.get("inline_content") is None else bytes(dv["inline_content"])),
            partition=partition(get(rec, "partition")),
            sort_order_id=get(rec, "sort_order_id"), file_size_in_bytes=get(rec, "file_size_in_bytes"),
            content_stats=None if cs is None else ContentStats(**{n: avro_map(cs.get(n)) for n in STAT_FIELDS}),
            manifest_stats=None if ms is None else ManifestStats(**ms),
            referenced_file=get(rec, "referenced_file"), key_metadata=get(rec, "key_metadata"),
            split_offsets=None if offsets is None else tuple(offsets),
            equality_ids=None if eq_ids is None else tuple(eq_ids),
            first_row_id=get(rec, "first_row_id"))

    return decode


# --------------------------------------------------------------------------- manifest DVs


def manifest_dv_positions(e: ContentEntry, puffin_blob: bytes | None = None) -> BitMap64:
    """The leaf ordinals a manifest DV removes: inline, or from ``puffin_blob`` (the bytes at
    ``offset``/``size_in_bytes`` of ``location``). Length, magic, CRC and cardinality are checked."""
    dv = e.deletion_vector
    if dv is None:
        raise CorruptInputError(f"manifest DV for {e.referenced_file} has no deletion_vector")
    blob = dv.inline_content if dv.inline_content is not None else puffin_blob
    if blob is None:
        raise CorruptInputError(f"manifest DV for {e.referenced_file} has neither inline content "
                                "nor a Puffin blob")
    return decode_deletion_vector(blob, expected_cardinality=e.record_count)


def manifest_dv_entry(leaf: str, leaf_size: int, positions: BitMap64 | Iterable[int], *,
                      snapshot_id: int, sequence_number: int,
                      status: ManifestEntryStatus = ManifestEntryStatus.ADDED) -> ContentEntry:
    """An inline manifest DV for ``leaf`` (its ``file_size_in_bytes`` is the leaf's, which
    ``location`` names)."""
    from pyroaring import BitMap64  # here: commands that read no DV never load pyroaring

    bitmap = BitMap64(positions)
    return ContentEntry(
        content_type=ContentType.MANIFEST_DV, location=leaf, file_format=PUFFIN, partition_spec_id=0,
        record_count=len(bitmap),
        version_info=VersionInfo(status, snapshot_id, sequence_number, sequence_number),
        deletion_vector=DeletionVectorRef(inline_content=encode_deletion_vector(bitmap)),
        file_size_in_bytes=leaf_size, referenced_file=leaf)


# The model is re-exported: callers that read or write v4 files need both.
__all__ = [
    "CONTENT_STATS", "DATA", "DELETES", "DELETION_VECTOR", "FORMAT_VERSION", "MANIFEST_STATS", "ROOT",
    "VERSION_INFO", "ContentEntry", "ContentStats", "ContentType", "DeletionVectorRef", "ManifestStats",
    "V4Manifest", "V4WriteResult", "VersionInfo", "aggregate_content_stats", "check_entry",
    "content_entry_avro_schema", "content_entry_of", "content_entry_struct", "data_file_of", "leaf_entries",
    "live_manifest_dvs", "manifest_dv_entry", "manifest_dv_positions", "manifest_entry_of",
    "manifest_entry_of_manifest_file", "manifest_file_of", "manifest_stats_of", "read_v4_manifest",
    "v4_format_version", "with_inherited", "write_v4_manifest",
]

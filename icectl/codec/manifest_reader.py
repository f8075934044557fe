"""Read manifest lists and manifests from Avro (container plumbing in :mod:`icectl.codec.avro`).

Takes binary streams or bytes, never paths: callers open files through their own storage layer.
Fields are matched by the spec's field ids (``field-id`` in the Avro schema) and by name only
when ids are absent, because writers differ in names (old Java: ``added_data_files_count``).

fastavro applies Avro logical types from the *writer* schema, so date, time, timestamp and
decimal partition values arrive as ``datetime``/``Decimal`` objects; they are converted back to
the integer forms of :mod:`icectl.spec.values`.
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from icectl.codec.avro import (
    AVRO_MAGIC,
    AvroSource,
    as_stream,
    avro_errors,
    avro_map,
    avro_value_converter,
    field_names,
    named_types,
    open_reader,
    read_records,
    record_field,
    resolve_type,
    writer_schema,
)
from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    PartitionFieldSummary,
    inherit_from_manifest,
)
from icectl.spec.schema import StructType

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3, 4)  # v4 tables are still written with v3-shaped Avro by Java

# Spec field ids (spec "Manifest Lists", "Manifest Entry Fields", "Data File Fields").
MANIFEST_FILE_FIELD_IDS: dict[str, int] = {
    "manifest_path": 500, "manifest_length": 501, "partition_spec_id": 502, "content": 517,
    "sequence_number": 515, "min_sequence_number": 516, "added_snapshot_id": 503,
    "added_files_count": 504, "existing_files_count": 505, "deleted_files_count": 506,
    "added_rows_count": 512, "existing_rows_count": 513, "deleted_rows_count": 514,
    "partitions": 507, "key_metadata": 519, "first_row_id": 520,
}
FIELD_SUMMARY_FIELD_IDS: dict[str, int] = {
    "contains_null": 509, "contains_nan": 518, "lower_bound": 510, "upper_bound": 511,
}
MANIFEST_ENTRY_FIELD_IDS: dict[str, int] = {
    "status": 0, "snapshot_id": 1, "sequence_number": 3, "file_sequence_number": 4, "data_file": 2,
}
DATA_FILE_FIELD_IDS: dict[str, int] = {
    "content": 134, "file_path": 100, "file_format": 101, "partition": 102, "record_count": 103,
    "file_size_in_bytes": 104, "column_sizes": 108, "value_counts": 109, "null_value_counts": 110,
    "nan_value_counts": 137, "lower_bounds": 125, "upper_bounds": 128, "key_metadata": 131,
    "split_offsets": 132, "equality_ids": 135, "sort_order_id": 140, "first_row_id": 142,
    "referenced_data_file": 143, "content_offset": 144, "content_size_in_bytes": 145,
}
# Always read: cheap, required by the spec, and needed for first_row_id inheritance.
ALWAYS_READ_DATA_FILE_FIELDS = frozenset(
    {"content", "file_path", "file_format", "record_count", "file_size_in_bytes", "first_row_id"})
_MAP_FIELDS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
               "lower_bounds", "upper_bounds")
_LIST_FIELDS = ("split_offsets", "equality_ids")
_SCALAR_OPTIONAL_FIELDS = ("key_metadata", "sort_order_id", "referenced_data_file",
                           "content_offset", "content_size_in_bytes")
assert set(DATA_FILE_FIELD_IDS) == {f.name for f in dataclass_fields(DataFile)}


def read_manifest_metadata(stream: AvroSource) -> dict[str, str]:
    """The Avro key-value metadata of a manifest or manifest list (reads only the header).

    Includes the Iceberg keys (``schema``, ``partition-spec``, ``partition-spec-id``,
    ``format-version``, ``content``; manifest lists: ``snapshot-id``, ...) and Avro's own
    ``avro.schema`` / ``avro.codec``.
    """
    return dict(open_reader(as_stream(stream)).metadata)


# --------------------------------------------------------------------------- manifest lists


@dataclass(frozen=True, slots=True)
class ManifestList:
    """A manifest list's entries plus its Avro key-value metadata (snapshot-id, format-version...)."""

    manifests: list[ManifestFile]
    metadata: dict[str, str]

    def __iter__(self) -> Iterator[ManifestFile]:
        return iter(self.manifests)

    def __len__(self) -> int:
        return len(self.manifests)

    def __getitem__(self, index: int) -> ManifestFile:
        return self.manifests[index]


def read_manifest_list(stream: AvroSource, *, format_version: int,
                       reuse: dict[str, ManifestFile] | None = None) -> ManifestList:
    """Read every ``manifest_file`` of a manifest list.

    Applies the spec's v1 defaults whatever ``format_version`` says, because upgraded tables keep
    v1-written lists: missing ``content`` -> DATA, missing sequence numbers -> 0; missing counts
    stay ``None``.

    ``reuse`` (path -> entry) lets a caller that reads many lists of one table skip building an
    entry it has already built: a manifest's row is copied unchanged from list to list once its
    snapshot committed it. Entries built here are added to it.
    """
    reader, names, summary_names = open_manifest_list(stream, format_version=format_version)
    build = _manifest_file_builder(names, summary_names)
    if reuse is None:
        manifests = [build(rec) for rec in read_records(reader)]
    else:
        path_name = names["manifest_path"]
        manifests = []
        for rec in read_records(reader):
            path = rec.get(path_name)
            known = reuse.get(path) if path is not None else None  # none: build() says it is missing
            if known is None:
                known = build(rec)
                reuse[known.manifest_path] = known
            manifests.append(known)
    return ManifestList(manifests, dict(reader.metadata))


def open_manifest_list(stream: AvroSource, *, format_version: int
                       ) -> tuple[Any, dict[str, str], dict[str, str]]:
    """Open a manifest list and check its schema: (fastavro reader, manifest_file spec name -> Avro
    name, field_summary spec name -> Avro name)."""
    _check_format_version(format_version)
    reader = open_reader(as_stream(stream))
    schema = writer_schema(reader)
    named = named_types(schema, {})
    names = field_names(schema, MANIFEST_FILE_FIELD_IDS)
    for required in ("manifest_path", "manifest_length", "partition_spec_id"):
        if required not in names:
            raise CorruptInputError(f"manifest list schema has no {required} field")
    summary_names: dict[str, str] = {}
    if "partitions" in names:
        array = resolve_type(record_field(schema, names["partitions"])["type"], named)
        element = resolve_type(array.get("items"), named) if isinstance(array, dict) else None
        if not isinstance(element, dict) or element.get("type") != "record":
            raise CorruptInputError("manifest list 'partitions' is not a list of field_summary records")
        summary_names = field_names(element, FIELD_SUMMARY_FIELD_IDS)
    return reader, names, summary_names


def scan_manifest_list_paths(data: bytes, names: dict[bytes, str] | None = None) -> list[str] | None:
    """The ``manifest_path`` of every row of a manifest list, found without decoding the rows;
    ``None`` when this shortcut cannot be sure (then decode with :func:`read_manifest_list`).

    Decoding a row costs ~7 us in fastavro; tables with thousands of snapshots have millions of
    rows. Each Avro row starts with its path (Java's field order), as a length-prefixed string.
    The paths are found by searching the decompressed blocks for the directory of the first
    row's path; the answer is trusted only if every hit is preceded by its own length prefix and
    each block has exactly one hit per row. A row whose path lies elsewhere, or a path that
    contains ``.avro`` before its end, makes the counts or prefixes disagree, hence ``None``.

    ``names`` (shared across calls) maps each hit's bytes to its decoded path: the lists of one
    table repeat the same paths thousands of times, so each is decoded once and the same string
    object is returned every time.
    """
    import fastavro  # here, not at the top: `icectl inspect table` imports this module and reads no Avro

    if data[:len(AVRO_MAGIC)] != AVRO_MAGIC:  # fastavro does not check it: the full decode reports it
        return None
    names = names if names is not None else {}
    try:
        with avro_errors():
            stream = io.BytesIO(data)
            blocks = fastavro.block_reader(stream)
            fields = blocks.writer_schema.get("fields") if isinstance(blocks.writer_schema, dict) else None
            if not fields or fields[0].get("field-id") != MANIFEST_FILE_FIELD_IDS["manifest_path"] \
                    or fields[0].get("type") != "string":
                return None
            out: list[str] = []
            folder: bytes | None = None
            for raw, num_records in raw_blocks(data, stream.tell(), blocks):
                if folder is None:
                    length, start = _zigzag_varint(raw, 0)
                    first = raw[start:start + length]
                    cut = first.rfind(b"/")
                    if cut < 0 or not first.endswith(b".avro"):
                        return None
                    folder = first[:cut + 1]
                hits = _same_length_hits(raw, folder, num_records)
                if hits is None:
                    hits = _prefixed_hits(raw, folder)
                if hits is None or len(hits) != num_records:
                    return None
                for hit in set(hits).difference(names):
                    _, start = _zigzag_varint(hit, 0)
                    names[hit] = hit[start:].decode()
                out.extend(map(names.__getitem__, hits))
            return out
    except (CorruptInputError, UnsupportedError, UnicodeDecodeError, IndexError, zlib.error):
        return None  # the full decode reports the problem properly


def raw_blocks(data: bytes, start: int, blocks: Any) -> Iterator[tuple[bytes, int]]:
    """Each block's decompressed bytes and record count (``start``: where the header ends, ``blocks``:
    fastavro's block reader over ``data``). Deflate blocks are inflated here with
    zlib, which lets other threads run meanwhile (fastavro's reader holds the interpreter), so
    lists read in a thread pool decompress on every core; a block not followed by the file's sync
    marker ends the shortcut (IndexError). Other codecs: fastavro's own block reader."""
    codec = blocks.metadata.get("avro.codec", "null") or "null"
    if codec not in ("deflate", "null"):
        for block in blocks:
            yield block.bytes_.getvalue(), block.num_records
        return
    sync = data[start - 16:start]  # the header ends with the sync marker
    pos = start
    while pos < len(data):
        count, pos = _zigzag_varint(data, pos)
        size, pos = _zigzag_varint(data, pos)
        end = pos + size
        if count < 0 or size < 0 or data[end:end + 16] != sync:
            raise IndexError("not a block")
        chunk = data[pos:end]
        yield (zlib.decompress(chunk, -15) if codec == "deflate" else chunk), count
        pos = end + 16


def _same_length_hits(raw: bytes, folder: bytes, records: int) -> list[bytes] | None:
    """The fast case, when every path of the block has the first path's length (names made of a
    UUID and a counter): one C-speed search for that length prefix, the folder and exactly as many
    bytes as the path has, ending in ``.avro``. Each hit is length-prefixed by construction; the
    hits are trusted only when there is exactly one per row (else the general search decides)."""
    length, start = _zigzag_varint(raw, 0)
    rest = length - len(folder) - len(b".avro")
    if rest < 0:
        return None
    pattern = re.escape(raw[:start] + folder) + rb"[^\x00]{%d}\.avro" % rest
    hits = re.findall(pattern, raw)
    return hits if len(hits) == records else None


def _prefixed_hits(raw: bytes, folder: bytes) -> list[bytes] | None:
    """Every ``<folder>...avro`` string of the block with the length prefix before it (None when a
    hit lacks its own prefix)."""
    out: list[bytes] = []
    for m in re.finditer(re.escape(folder) + rb"[^\x00]*?\.avro", raw):
        path = m.group()
        prefix = zigzag_bytes(len(path))
        if raw[m.start() - len(prefix):m.start()] != prefix:
            return None
        out.append(prefix + path)
    return out


def _zigzag_varint(raw: bytes, pos: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        b = raw[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos


def zigzag_bytes(n: int) -> bytes:
    """Avro's encoding of a long: zig-zag, then a base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _getter(rec: dict[str, Any], names: dict[str, str]) -> Callable[[str], Any]:
    """Look a record's field up by spec name (``None`` when the file does not have it)."""
    return lambda spec_name: rec.get(names[spec_name]) if spec_name in names else None


_MANIFEST_CONTENT = {None: ManifestContent.DATA, 0: ManifestContent.DATA, 1: ManifestContent.DELETES}
_LIST_FIELDS_IN_ORDER = ("manifest_path", "manifest_length", "partition_spec_id", "content", "sequence_number",
                         "min_sequence_number", "added_snapshot_id", "added_files_count", "existing_files_count",
                         "deleted_files_count", "added_rows_count", "existing_rows_count", "deleted_rows_count",
                         "partitions", "key_metadata", "first_row_id")


def _manifest_file_builder(names: dict[str, str],
                           summary_names: dict[str, str]) -> Callable[[dict[str, Any]], ManifestFile]:
    """A fast per-record converter: field names are resolved once per file, not per record
    (tables with thousands of snapshots read millions of manifest-list rows)."""
    avro = tuple(names.get(f) for f in _LIST_FIELDS_IN_ORDER)

    def build(rec: dict[str, Any]) -> ManifestFile:
        (path, length, spec_id, content, seq, min_seq, added_id, added_files, existing_files, deleted_files,
         added_rows, existing_rows, deleted_rows, summaries, key_metadata, first_row_id) = (
            rec.get(n) if n is not None else None for n in avro)
        if path is None or length is None or spec_id is None:
            raise CorruptInputError("manifest list entry lacks manifest_path, manifest_length "
                                    "or partition_spec_id")
        manifest_content = _MANIFEST_CONTENT.get(content)
        if manifest_content is None:
            raise CorruptInputError(f"manifest {path}: unknown manifest content {content}")
        return ManifestFile(
            path, length, spec_id, manifest_content, 0 if seq is None else seq, 0 if min_seq is None else min_seq,
            added_id, added_files, existing_files, deleted_files, added_rows, existing_rows, deleted_rows,
            None if summaries is None else tuple(_field_summary(s, summary_names) for s in summaries),
            key_metadata, first_row_id)

    return build


def _field_summary(rec: dict[str, Any], names: dict[str, str]) -> PartitionFieldSummary:
    get = _getter(rec, names)
    return PartitionFieldSummary(bool(get("contains_null")), get("contains_nan"), get("lower_bound"),
                                 get("upper_bound"))


def _check_format_version(format_version: int) -> None:
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedError(f"format version {format_version} is not supported "
                               f"(supported: {', '.join(map(str, SUPPORTED_FORMAT_VERSIONS))})")


# --------------------------------------------------------------------------- manifests


def read_manifest(
    stream: AvroSource,
    *,
    manifest: ManifestFile,
    partition_type: StructType,
    format_version: int,
    fields: set[str] | frozenset[str] | None = None,
) -> Iterator[ManifestEntry]:
    """Stream the entries of one manifest, with inheritance applied
    (:func:`icectl.spec.manifest.inherit_from_manifest`).

    ``partition_type`` is the partition spec's result type; partition tuples follow its field
    order. ``fields`` names the ``data_file`` fields to read (``None``: all). The fields in
    :data:`ALWAYS_READ_DATA_FILE_FIELDS` are always read; the others, e.g. the column-stat maps,
    are left ``None`` without being converted. (fastavro must still step over their bytes: Avro
    arrays carry no byte size, and a reader-schema projection measured slower, not faster.)
    """
    layout = open_manifest(stream, partition_type=partition_type, format_version=format_version, fields=fields)
    return _entries(layout.reader, manifest, format_version, layout.entry_names, layout.file_names,
                    layout.wanted, layout.partition)


@dataclass(frozen=True, slots=True)
class ManifestLayout:
    """An opened manifest: its fastavro reader and where each spec field is in its Avro schema."""

    reader: Any
    schema: dict[str, Any]            # the writer schema JSON (manifest_entry record)
    named: dict[str, Any]             # its named types
    entry_names: dict[str, str]       # manifest_entry spec name -> Avro name
    file_schema: dict[str, Any]       # the data_file record
    file_names: dict[str, str]        # data_file spec name -> Avro name
    wanted: set[str]                  # the data_file fields to decode
    partition: Callable[[Any], tuple[Any, ...]] | None  # Avro partition record -> typed tuple


def open_manifest(stream: AvroSource, *, partition_type: StructType, format_version: int,
                  fields: set[str] | frozenset[str] | None = None) -> ManifestLayout:
    """Open a manifest and check its schema (what :func:`read_manifest` does before the first record)."""
    _check_format_version(format_version)
    if fields is not None:
        unknown = set(fields) - set(DATA_FILE_FIELD_IDS)
        if unknown:
            raise ValueError(f"unknown data_file fields: {', '.join(sorted(unknown))}")
    reader = open_reader(as_stream(stream))
    schema = writer_schema(reader)
    named = named_types(schema, {})
    entry_names = field_names(schema, MANIFEST_ENTRY_FIELD_IDS)
    if "status" not in entry_names or "data_file" not in entry_names:
        raise CorruptInputError("manifest schema is not a manifest_entry (no status or data_file)")
    file_schema = resolve_type(record_field(schema, entry_names["data_file"])["type"], named)
    if not isinstance(file_schema, dict) or file_schema.get("type") != "record":
        raise CorruptInputError("manifest_entry.data_file is not a record")
    file_names = field_names(file_schema, DATA_FILE_FIELD_IDS)
    for required in ("file_path", "file_format", "record_count", "file_size_in_bytes"):
        if required not in file_names:
            raise CorruptInputError(f"manifest data_file has no {required} field")

    wanted = set(DATA_FILE_FIELD_IDS) if fields is None else set(fields) | ALWAYS_READ_DATA_FILE_FIELDS

    partition = None
    if "partition" in wanted and "partition" in file_names:
        partition_schema = resolve_type(record_field(file_schema, file_names["partition"])["type"], named)
        partition = partition_decoder(partition_schema, partition_type)
    elif "partition" in wanted:
        raise CorruptInputError("manifest data_file has no partition field")
    return ManifestLayout(reader, schema, named, entry_names, file_schema, file_names, wanted, partition)




def _entries(reader: Any, manifest: ManifestFile, format_version: int, entry_names: dict[str, str],
             file_names: dict[str, str], wanted: set[str],
             partition: Callable[[Any], tuple[Any, ...]] | None) -> Iterator[ManifestEntry]:
    decoder = _EntryDecoder(manifest, entry_names, file_names, wanted, partition)
    # The running first_row_id exists only for v3+ data manifests that have one.
    next_row_id = (manifest.first_row_id if format_version >= 3 and manifest.content == ManifestContent.DATA
                   else None)
    for index, rec in enumerate(read_records(reader)):
        try:
            entry, next_row_id = decoder.decode(rec, next_row_id)
        except CorruptInputError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise CorruptInputError(f"malformed manifest entry #{index}: {type(e).__name__}: {e}") from None
        yield entry


class _EntryDecoder:
    """Turns one fastavro ``manifest_entry`` record into a :class:`ManifestEntry`."""

    def __init__(self, manifest: ManifestFile, entry_names: dict[str, str], file_names: dict[str, str],
                 wanted: set[str], partition: Callable[[Any], tuple[Any, ...]] | None) -> None:
        # Names resolved once: decode() runs once per file in the table.
        self.manifest = manifest
        self.status = entry_names["status"]
        self.snapshot_id = entry_names.get("snapshot_id")
        self.sequence_number = entry_names.get("sequence_number")
        self.file_sequence_number = entry_names.get("file_sequence_number")
        self.data_file = entry_names["data_file"]
        self.names = file_names
        self.maps = [(n, file_names[n]) for n in _MAP_FIELDS if n in wanted and n in file_names]
        self.lists = [(n, file_names[n]) for n in _LIST_FIELDS if n in wanted and n in file_names]
        self.scalars = [(n, file_names[n]) for n in _SCALAR_OPTIONAL_FIELDS
                        if n in wanted and n in file_names]
        self.partition = partition

    def decode(self, rec: dict[str, Any], next_row_id: int | None) -> tuple[ManifestEntry, int | None]:
        names = self.names
        raw = rec[self.data_file]
        try:
            status = ManifestEntryStatus(rec[self.status])
            content = DataFileContent(raw[names["content"]] if "content" in names else 0)
        except ValueError as e:
            raise CorruptInputError(f"manifest entry has an invalid status or content: {e}") from None
        extra: dict[str, Any] = {n: raw.get(avro) for n, avro in self.scalars}
        for n, avro in self.maps:
            extra[n] = avro_map(raw.get(avro))
        for n, avro in self.lists:
            value = raw.get(avro)
            extra[n] = None if value is None else tuple(value)
        record_count = raw[names["record_count"]]
        inherited = inherit_from_manifest(
            self.manifest, status=status, content=content,
            snapshot_id=rec.get(self.snapshot_id) if self.snapshot_id else None,
            sequence_number=rec.get(self.sequence_number) if self.sequence_number else None,
            file_sequence_number=rec.get(self.file_sequence_number) if self.file_sequence_number else None,
            first_row_id=raw.get(names["first_row_id"]) if "first_row_id" in names else None,
            record_count=record_count, next_row_id=next_row_id,
        )
        data_file = DataFile(
            content=content,
            file_path=raw[names["file_path"]],
            file_format=raw[names["file_format"]],
            partition=None if self.partition is None else self.partition(raw[names["partition"]]),
            record_count=record_count,
            file_size_in_bytes=raw[names["file_size_in_bytes"]],
            first_row_id=inherited.first_row_id,
            **extra,
        )
        entry = ManifestEntry(status, inherited.snapshot_id, inherited.sequence_number,
                              inherited.file_sequence_number, data_file)
        return entry, inherited.next_row_id


# --------------------------------------------------------------------------- partition values

def partition_decoder(avro_schema: Any,
                       partition_type: StructType) -> Callable[[Any], tuple[Any, ...]]:
    """A function turning an Avro partition record into a tuple in ``partition_type`` order."""
    if not partition_type.fields:
        return lambda _record: ()
    if not isinstance(avro_schema, dict) or avro_schema.get("type") != "record":
        raise CorruptInputError("manifest partition is not a record but the partition spec has fields")
    try:  # a damaged header can hold any JSON: say so, not KeyError
        avro_fields = avro_schema["fields"]
        ids = {int(f["field-id"]): f["name"] for f in avro_fields if "field-id" in f}
        by_name = {f["name"] for f in avro_fields}
        names = [f["name"] for f in avro_fields]
    except (KeyError, TypeError, ValueError):
        raise CorruptInputError("manifest partition record in the header's schema is damaged") from None
    plan: list[tuple[str, Callable[[Any], Any]]] = []
    for pos, pf in enumerate(partition_type.fields):
        if ids:
            name = ids.get(pf.field_id)
        elif pf.name in by_name:
            name = pf.name
        else:  # neither ids nor names: Iceberg writes fields in spec order
            name = names[pos] if len(names) == len(partition_type.fields) else None
        if name is None:
            raise CorruptInputError(f"manifest partition has no field for partition field "
                                    f"{pf.name!r} (id {pf.field_id})")
        plan.append((name, avro_value_converter(pf.field_type)))

    def decode(record: Any) -> tuple[Any, ...]:
        if record is None:
            raise CorruptInputError("manifest entry has a null partition")
        return tuple(convert(record.get(name)) for name, convert in plan)

    return decode



"""Puffin files and deletion-vector blobs (Puffin spec; table spec "Deletion Vectors").

Layout: ``PFA1 blob1 ... blobN footer`` with footer
``PFA1 payload payload-size(int32 LE) flags(4 bytes) PFA1``; the payload is UTF-8 JSON
(``FileMetadata``), LZ4-framed when flag bit 0 is set.

``deletion-vector-v1`` blob: ``length(uint32 BE) D1 D3 39 64 vector CRC-32(BE)`` where length
counts magic + vector and the CRC covers them too; the vector is a portable 64-bit Roaring
bitmap, which ``pyroaring.BitMap64.(de)serialize`` reads and writes as Iceberg Java does.

Reading is designed for object storage: give :func:`read_puffin_footer` a
``read_range(offset, length)`` callable and the file size, and only the tail (plus 4 header
bytes) is fetched.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from icectl import __version__
from icectl.errors import CorruptInputError, UnsupportedError

if TYPE_CHECKING:  # pyroaring is imported where bitmaps are made: most commands read no DV
    from pyroaring import BitMap64

MAGIC = b"PFA1"
DV_MAGIC = b"\xd1\xd3\x39\x64"
DELETION_VECTOR_V1 = "deletion-vector-v1"
ROW_POSITION_FIELD_ID = 2147483645  # _pos: the field Java lists in a DV blob's "fields"
FOOTER_FLAG_COMPRESSED = 0x1  # byte 0, bit 0; every other bit is reserved
_FOOTER_TRAILER = 12  # payload size (4) + flags (4) + magic (4)
_MIN_FOOTER = 16  # magic + trailer, empty payload
_TAIL_FETCH = 64 * 1024  # first tail request: covers the footer of most Puffin files
_MAX_DV_POSITION = 2**63 - 1  # positions are positive 64-bit values (MSB 0)

RangeReader = Callable[[int, int], bytes]


@dataclass(frozen=True, slots=True)
class PuffinBlobMetadata:
    """``BlobMetadata`` of the footer."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PuffinFileMetadata:
    """The decoded footer (``FileMetadata``) plus where it sits in the file."""

    blobs: tuple[PuffinBlobMetadata, ...]
    properties: dict[str, str]
    file_size: int
    footer_size: int  # magic + payload + trailer: table statistics' file-footer-size-in-bytes
    footer_compressed: bool = False


class PuffinBlob(NamedTuple):
    """A blob to write. DV blobs use snapshot id and sequence number -1 (the spec's rule)."""

    type: str
    fields: Sequence[int]
    properties: dict[str, str]
    payload: bytes
    snapshot_id: int = -1
    sequence_number: int = -1


@dataclass(frozen=True, slots=True)
class PuffinWriteResult:
    data: bytes  # the whole file
    metadata: PuffinFileMetadata  # blob offsets/lengths: the manifest's content_offset/_size


# --------------------------------------------------------------------------- footer


def read_puffin_footer(source: bytes | bytearray | memoryview | RangeReader,
                       file_size: int | None = None) -> PuffinFileMetadata:
    """Parse and check a Puffin footer: magics, payload size, flags, JSON, blob ranges.

    ``source`` is the whole file, or ``read_range(offset, length) -> bytes`` together with
    ``file_size`` (then only the tail and the 4 leading bytes are read).
    """
    read_range: RangeReader
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        size = len(data)
        if file_size is not None and file_size != size:
            raise CorruptInputError(f"Puffin file is {size} bytes, expected {file_size}")

        def read_data(offset: int, length: int) -> bytes:
            return data[offset:offset + length]
        read_range = read_data
    else:
        if file_size is None:
            raise ValueError("file_size is required with a read_range callable")
        size, read_range = file_size, source

    if size < len(MAGIC) + _MIN_FOOTER:
        raise CorruptInputError(f"not a Puffin file: {size} bytes is too short")
    tail_start = max(0, size - _TAIL_FETCH)
    tail = _read_exact(read_range, tail_start, size - tail_start)
    head = tail[:4] if tail_start == 0 else _read_exact(read_range, 0, 4)
    if head != MAGIC:
        raise CorruptInputError("not a Puffin file: bad leading magic (expected PFA1)")
    if tail[-4:] != MAGIC:
        raise CorruptInputError("bad Puffin footer: bad trailing magic (expected PFA1)")
    payload_size, flags = struct.unpack("<iI", tail[-_FOOTER_TRAILER:-4])
    footer_size = payload_size + _MIN_FOOTER
    if payload_size < 0 or footer_size + len(MAGIC) > size:
        raise CorruptInputError(f"bad Puffin footer: payload size {payload_size} does not fit "
                                f"a {size}-byte file")
    if flags & ~FOOTER_FLAG_COMPRESSED:
        raise UnsupportedError(f"Puffin footer has unknown flags set (0x{flags:08x})")
    footer_start = size - footer_size
    if footer_start < tail_start:  # footer larger than the first fetch: get the rest
        footer = _read_exact(read_range, footer_start, tail_start - footer_start) + tail
    else:
        footer = tail[footer_start - tail_start:]
    if footer[:4] != MAGIC:
        raise CorruptInputError("bad Puffin footer: bad footer-start magic (payload size is wrong)")
    payload = footer[4:4 + payload_size]
    compressed = bool(flags & FOOTER_FLAG_COMPRESSED)
    if compressed:
        payload = _lz4_decompress(payload)
    try:
        doc = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nested too deeply
        raise CorruptInputError(f"bad Puffin footer: payload is not UTF-8 JSON ({e})") from None
    blobs, properties = _file_metadata(doc)
    for b in blobs:
        if b.offset < len(MAGIC) or b.length < 0 or b.offset + b.length > footer_start:
            raise CorruptInputError(f"bad Puffin footer: blob {b.type} at offset {b.offset} "
                                    f"length {b.length} is outside the blob area [4, {footer_start})")
    return PuffinFileMetadata(blobs, properties, size, footer_size, compressed)


def _read_exact(read_range: RangeReader, offset: int, length: int) -> bytes:
    data = bytes(read_range(offset, length))
    if len(data) != length:
        raise CorruptInputError(f"truncated Puffin file: read {len(data)} of {length} bytes "
                                f"at offset {offset}")
    return data


def _lz4_decompress(payload: bytes) -> bytes:
    try:
        import lz4.frame  # optional dependency: Java never compresses footers
    except ImportError:
        raise UnsupportedError("Puffin footer is LZ4-compressed and the 'lz4' package is not "
                               "installed (pip install lz4)") from None
    try:
        return bytes(lz4.frame.decompress(payload))
    except Exception as e:  # lz4 raises RuntimeError today; any failure means a bad payload
        raise CorruptInputError(f"bad Puffin footer: LZ4 payload does not decompress ({e})") from None


def _file_metadata(doc: Any) -> tuple[tuple[PuffinBlobMetadata, ...], dict[str, str]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("blobs"), list):
        raise CorruptInputError("bad Puffin footer: FileMetadata has no 'blobs' list")
    properties = doc.get("properties") or {}
    if not isinstance(properties, dict):
        raise CorruptInputError("bad Puffin footer: 'properties' is not an object")
    return tuple(_blob_metadata(b, i) for i, b in enumerate(doc["blobs"])), dict(properties)


def _blob_metadata(obj: Any, index: int) -> PuffinBlobMetadata:
    if not isinstance(obj, dict):
        raise CorruptInputError(f"bad Puffin footer: blob {index} is not an object")

    def need(key: str, kind: type) -> Any:
        value = obj.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CorruptInputError(f"bad Puffin footer: blob {index} has no valid {key!r}")
        return value

    fields = need("fields", list)
    if not all(isinstance(f, int) and not isinstance(f, bool) for f in fields):
        raise CorruptInputError(f"bad Puffin footer: blob {index} 'fields' must be integers")
    codec = obj.get("compression-codec")
    props = obj.get("properties") or {}
    if (codec is not None and not isinstance(codec, str)) or not isinstance(props, dict):
        raise CorruptInputError(f"bad Puffin footer: blob {index} has an invalid codec or properties")
    return PuffinBlobMetadata(
        type=need("type", str), fields=tuple(fields), snapshot_id=need("snapshot-id", int),
        sequence_number=need("sequence-number", int), offset=need("offset", int),
        length=need("length", int), compression_codec=codec, properties=dict(props))


# --------------------------------------------------------------------------- writing


def write_puffin(blobs: Iterable[PuffinBlob | tuple[Any, ...]],
                 properties: dict[str, str] | None = None) -> PuffinWriteResult:
    """A Puffin file with the given (uncompressed) blobs and an uncompressed footer (flags 0).

    Blobs are tuples ``(type, fields, properties, payload[, snapshot_id, sequence_number])``.
    ``created-by`` is added to the file properties unless given.
    """
    out = bytearray(MAGIC)
    written: list[PuffinBlobMetadata] = []
    for item in blobs:
        blob = item if isinstance(item, PuffinBlob) else PuffinBlob(*item)
        written.append(PuffinBlobMetadata(
            type=blob.type, fields=tuple(blob.fields), snapshot_id=blob.snapshot_id,
            sequence_number=blob.sequence_number, offset=len(out), length=len(blob.payload),
            properties=dict(blob.properties)))
        out += blob.payload
    file_properties = {"created-by": f"icectl {__version__}", **(properties or {})}
    payload = json.dumps({"blobs": [_blob_json(b) for b in written], "properties": file_properties},
                         separators=(",", ":")).encode("utf-8")
    out += MAGIC + payload + struct.pack("<iI", len(payload), 0) + MAGIC
    meta = PuffinFileMetadata(tuple(written), file_properties, len(out), len(payload) + _MIN_FOOTER)
    return PuffinWriteResult(bytes(out), meta)


def _blob_json(b: PuffinBlobMetadata) -> dict[str, Any]:
    # Key order and omissions as Iceberg Java's FileMetadataParser writes them.
    obj: dict[str, Any] = {"type": b.type, "fields": list(b.fields), "snapshot-id": b.snapshot_id,
                           "sequence-number": b.sequence_number, "offset": b.offset,
                           "length": b.length}
    if b.compression_codec is not None:
        obj["compression-codec"] = b.compression_codec
    if b.properties:
        obj["properties"] = b.properties
    return obj


# --------------------------------------------------------------------------- deletion vectors


def decode_deletion_vector(blob: bytes, *, expected_cardinality: int | None = None) -> BitMap64:
    """Decode a ``deletion-vector-v1`` blob, checking length, magic, CRC and positions.

    ``expected_cardinality`` (the manifest's ``record_count``) is checked when given.
    """
    blob = bytes(blob)
    if len(blob) < 12:
        raise CorruptInputError(f"DV blob too short: {len(blob)} bytes")
    (length,) = struct.unpack(">I", blob[:4])
    if length != len(blob) - 8:
        raise CorruptInputError(f"DV length mismatch: length field says {length}, "
                                f"blob holds {len(blob) - 8} bytes of magic + vector")
    if blob[4:8] != DV_MAGIC:
        raise CorruptInputError(f"bad DV magic: {blob[4:8].hex(' ')} (expected d1 d3 39 64)")
    body = blob[4:-4]
    (crc,) = struct.unpack(">I", blob[-4:])
    actual = zlib.crc32(body) & 0xFFFFFFFF
    if crc != actual:
        raise CorruptInputError(f"DV CRC mismatch: stored {crc:08x}, computed {actual:08x}")
    from pyroaring import BitMap64

    try:
        positions = BitMap64.deserialize(body[4:])
    except (ValueError, MemoryError) as e:
        raise CorruptInputError(f"DV vector is not a portable 64-bit Roaring bitmap ({e})") from None
    if positions and positions.max() > _MAX_DV_POSITION:
        raise CorruptInputError("DV has a position with the most significant bit set")
    if expected_cardinality is not None and len(positions) != expected_cardinality:
        raise CorruptInputError(f"DV cardinality mismatch: {len(positions)} positions, "
                                f"expected {expected_cardinality}")
    return positions


def encode_deletion_vector(positions: BitMap64 | Iterable[int]) -> bytes:
    """A ``deletion-vector-v1`` blob; run-length encoded first, as Java does."""
    from pyroaring import BitMap64

    bitmap = BitMap64(positions)  # a copy: run_optimize must not change the caller's bitmap
    if bitmap and (bitmap.max() > _MAX_DV_POSITION):
        raise ValueError("DV positions must be below 2**63")
    bitmap.run_optimize()
    body = DV_MAGIC + bitmap.serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def deletion_vector_blob(referenced_data_file: str, positions: BitMap64 | Iterable[int]) -> PuffinBlob:
    """A ready-to-write DV blob with the properties the spec requires."""
    from pyroaring import BitMap64

    bitmap = BitMap64(positions)
    return PuffinBlob(DELETION_VECTOR_V1, (ROW_POSITION_FIELD_ID,),
                      {"referenced-data-file": referenced_data_file, "cardinality": str(len(bitmap))},
                      encode_deletion_vector(bitmap))

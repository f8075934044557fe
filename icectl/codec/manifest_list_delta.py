"""Decode a table's manifest lists without decoding the same rows over and over.

A snapshot's manifest list is, for a fast append (Java's and icectl's), its new manifests'
rows followed by its parent's rows copied unchanged; N such snapshots hold N^2/2 rows (2,000
snapshots: 2M rows, ~40 s of decoding), nearly all of them copies. When a list's decompressed
record stream ends with the whole record stream of a list decoded before, under the very same
writer schema, those rows are byte for byte the rows already decoded: only the rows before them
are decoded (by :func:`read_manifest_list` itself, re-framed as a one-block container), and the
earlier list's entries are reused. Any doubt (another codec, a different schema, a decode that
does not consume exactly those bytes) decodes the whole list as :func:`read_manifest_list` does,
so results, errors included, equal a full decode.
"""

from __future__ import annotations

import io
import json
import zlib
from collections import deque
from dataclasses import dataclass

import fastavro
from fastavro.types import Schema as AvroSchema

from icectl.codec.avro import AVRO_MAGIC
from icectl.codec.manifest_reader import ManifestList, raw_blocks, read_manifest_list, zigzag_bytes

_CODECS = ("null", "deflate")  # re-framing the new rows needs their codec; others decode whole


@dataclass(frozen=True)
class DecodedList:
    """A decoded manifest list with what another list needs to share its rows."""

    listing: ManifestList
    schema: str  # the writer schema JSON (avro.schema)
    records: bytes  # the decompressed record stream, every block's bytes in order


class ListDecoder:
    """Decodes manifest lists, reusing the rows of the last few lists it decoded (a parent's list
    is usually decoded just before its child's)."""

    def __init__(self, *, format_version: int, keep: int = 4) -> None:
        self.format_version = format_version
        self.recent: deque[DecodedList] = deque(maxlen=keep)
        self.shared_rows = 0  # rows taken from an earlier list, for tests and diagnostics
        self.parsed: dict[str, AvroSchema] = {}  # writer schema JSON -> fastavro's parsed schema
        self._prepared: dict[int, tuple[bytes, _Framing | None]] = {}  # id(data) -> (data, its framing)

    def prepare(self, data: bytes) -> None:
        """Decompress ``data``'s blocks ahead of :meth:`read`, e.g. in the thread that fetched it
        (zlib lets other threads run meanwhile, so lists decompress on every core)."""
        self._prepared[id(data)] = (data, _safe_framing(data))

    def read(self, data: bytes) -> ManifestList:
        """The manifest list in ``data``, equal to ``read_manifest_list(data, format_version=...)``."""
        prepared = self._prepared.pop(id(data), None)
        framing = prepared[1] if prepared is not None and prepared[0] is data else _safe_framing(data)
        decoded = self._shared(data, framing)
        if decoded is None:
            listing = read_manifest_list(data, format_version=self.format_version)  # raises on damage
            decoded = self._remember_whole(listing, framing)
        if decoded is not None:
            self.recent.append(decoded)
            return decoded.listing
        return listing

    def _shared(self, data: bytes, framing: _Framing | None) -> DecodedList | None:
        """The list decoded from its new rows plus an earlier list's, or None to decode it whole."""
        if not self.recent or framing is None:
            return None
        header, codec, schema, records, count, meta = framing
        for earlier in reversed(self.recent):
            rows = earlier.records
            new = count - len(earlier.listing)
            if earlier.schema != schema or new < 0 or len(records) < len(rows) or not records.endswith(rows):
                continue
            head = records[:len(records) - len(rows)]
            try:
                if not self._exactly(schema, head, new):
                    continue
                fresh = read_manifest_list(_one_block(header, codec, head, new), format_version=self.format_version)
            except Exception:  # decode whole: it raises what a full decode raises
                return None
            if len(fresh) != new:
                return None
            self.shared_rows += len(earlier.listing)
            listing = ManifestList([*fresh.manifests, *earlier.listing.manifests], meta)
            return DecodedList(listing, schema, records)
        return None

    def _exactly(self, schema: str, head: bytes, count: int) -> bool:
        """Whether ``count`` rows take up exactly ``head``: then the rows after them start where the
        earlier list's rows start, and decode as they did there."""
        parsed = self.parsed.get(schema)
        if parsed is None:
            parsed = self.parsed[schema] = fastavro.parse_schema(json.loads(schema))
        stream = io.BytesIO(head)
        for _ in range(count):
            fastavro.schemaless_reader(stream, parsed, None)
        return stream.tell() == len(head)

    def _remember_whole(self, listing: ManifestList, framing: _Framing | None) -> DecodedList | None:
        if framing is None or framing[4] != len(listing):
            return None
        return DecodedList(listing, framing[2], framing[3])


# (header bytes, codec, schema JSON, decompressed records, record count, metadata)
_Framing = tuple[bytes, str, str, bytes, int, dict[str, str]]


def _safe_framing(data: bytes) -> _Framing | None:
    """The framing of an Avro container whose codec can be re-framed; None for another codec or
    any doubt (the full decode then reports the problem properly)."""
    if data[:len(AVRO_MAGIC)] != AVRO_MAGIC:
        return None
    try:
        stream = io.BytesIO(data)
        blocks = fastavro.block_reader(stream)
        start = stream.tell()  # the reader has read the header, and only it
        meta = dict(blocks.metadata)
        codec = meta.get("avro.codec", "null") or "null"
        if codec not in _CODECS:
            return None
        parts: list[bytes] = []
        count = 0
        for raw, num_records in raw_blocks(data, start, blocks):  # checks each block's sync marker
            parts.append(raw)
            count += num_records
        return data[:start], codec, meta["avro.schema"], b"".join(parts), count, meta
    except Exception:  # any doubt: decode whole
        return None


def _one_block(header: bytes, codec: str, records: bytes, count: int) -> bytes:
    """A container of ``header`` and one block holding ``records`` (``count`` rows)."""
    sync = header[-16:]
    if count == 0:
        return header
    body = records
    if codec == "deflate":
        packer = zlib.compressobj(1, zlib.DEFLATED, -15)
        body = packer.compress(records) + packer.flush()
    return header + zigzag_bytes(count) + zigzag_bytes(len(body)) + body + sync

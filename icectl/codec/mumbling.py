"""Mumbling bitmaps (``format/mumbling-spec.md``, version 1): the encoding of v4 manifest deletion
vectors, stored inline on a leaf's root entry (``manifest_info.dv``, ``tracking`` 6 and 7).

Byte layout (all integers unsigned little-endian, no padding, nothing after the last container):

* header, 6 bytes: version ``0x01``, cardinality (u24), container count ``C`` (u16, at most 8,192);
* the ``C`` descriptor bytes, PFOR-encoded in chunks of 256 (Appendix A of the Mumbling spec);
* the containers in descriptor order. Container ``k`` covers positions ``[256k, 256k + 255]``. A
  descriptor ``000nnnnn`` is a sparse container of ``n`` (0-31) strictly ascending in-container
  positions, one byte each; ``001xxxxx`` a dense one, a 32-byte bitset read MSB-first (position
  ``p`` is bit ``7 - (p & 7)`` of byte ``p >> 3``; the low bits are ignored when reading). The top
  two bits are reserved.

The encoder writes ``C = (max >> 8) + 1`` (0 for an empty bitmap), sparse containers below 32
positions and dense ones from 32, and picks each PFOR chunk's primary width ``b1`` as the spec
recommends: the smallest encoded size, the smaller width on a tie (the spec's example; Iceberg
Java's prototype takes the larger one, which decodes the same). Decoders accept any valid width
choice and empty containers anywhere. Two valid encoders can write different bytes for the same
set: compare bitmaps by content.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from icectl.errors import CorruptInputError, UnsupportedError

MUMBLING_VERSION = 1
MAX_CONTAINERS = 8192
MAX_POSITIONS = MAX_CONTAINERS * 256  # 2,097,152: positions are below it, the cardinality at most it
HEADER_BYTES = 6
CHUNK = 256
DENSE = 32  # bytes of a dense container; also its descriptor value
_HINT = "the bitmap is damaged; nothing was changed"
_BITS = [tuple(j for j in range(8) if byte & (0x80 >> j)) for byte in range(256)]


def _corrupt(message: str) -> CorruptInputError:
    return CorruptInputError(f"Mumbling bitmap: {message}", hint=_HINT)


# --------------------------------------------------------------------------- PFOR (Appendix A)


def _pack(values: Sequence[int], width: int) -> bytes:
    """``values`` as ``width``-bit fields, MSB first, zero-padded to a byte boundary."""
    if width == 0 or not values:
        return b""
    acc = 0
    for v in values:
        acc = (acc << width) | v
    bits = len(values) * width
    pad = -bits % 8
    return (acc << pad).to_bytes((bits + pad) // 8, "big")


def _unpack(data: bytes, count: int, width: int) -> list[int]:
    if width == 0:
        return [0] * count
    acc = int.from_bytes(data, "big") >> (len(data) * 8 - count * width)
    mask = (1 << width) - 1
    return [(acc >> (width * (count - 1 - i))) & mask for i in range(count)]


def _encode_chunk(values: Sequence[int]) -> bytes:
    if any(not 0 <= v <= 255 for v in values):
        raise ValueError("PFOR values are bytes (0-255)")
    m = min(values)
    norm = [v - m for v in values]
    max_width = max(norm).bit_length()
    best: tuple[int, int] | None = None  # (size, b1)
    for b in range(max_width + 1):
        e = sum(1 for v in norm if v >> b)
        if e > 255:
            continue
        size = (len(norm) * b + 7) // 8 + e + (e * (max_width - b) + 7) // 8
        if best is None or size < best[0]:
            best = (size, b)
    assert best is not None  # b = max_width has no exception
    b1 = best[1]
    if b1 == 8:  # the spec's recommendation for full-width chunks: the raw bytes, m = 0
        return bytes([8, 0, 0]) + bytes(values)
    b2 = max_width - b1
    exceptions = [i for i, v in enumerate(norm) if v >> b1]
    if not exceptions:
        b2 = 0
    primary = _pack([v & ((1 << b1) - 1) for v in norm], b1)
    return (bytes([b1 | (b2 << 4), len(exceptions), m]) + primary + bytes(exceptions)
            + _pack([norm[i] >> b1 for i in exceptions], b2))


def pfor_encode(values: Sequence[int]) -> bytes:
    """Byte values (0-255) PFOR-encoded in chunks of 256; the count is not stored."""
    return b"".join(_encode_chunk(values[i:i + CHUNK]) for i in range(0, len(values), CHUNK))


def pfor_decode(data: bytes, count: int, offset: int = 0) -> tuple[list[int], int]:
    """``count`` values PFOR-decoded from ``data`` at ``offset``; the values and the end offset."""
    out: list[int] = []
    pos = offset
    while len(out) < count:
        n = min(CHUNK, count - len(out))
        if pos + 3 > len(data):
            raise _corrupt("the descriptors are truncated (a chunk header is missing)")
        b1, b2, e, m = data[pos] & 0x0F, data[pos] >> 4, data[pos + 1], data[pos + 2]
        pos += 3
        if b1 + b2 > 8:
            raise _corrupt(f"a descriptor chunk has b1 + b2 = {b1 + b2}, above 8")
        if e > n:
            raise _corrupt(f"a descriptor chunk of {n} values has {e} exceptions")
        primary_bytes = (n * b1 + 7) // 8
        exception_bytes = (e * b2 + 7) // 8
        end = pos + primary_bytes + e + exception_bytes
        if end > len(data):
            raise _corrupt("the descriptors are truncated")
        values = _unpack(data[pos:pos + primary_bytes], n, b1)
        where = data[pos + primary_bytes:pos + primary_bytes + e]
        high = _unpack(data[pos + primary_bytes + e:end], e, b2)
        for i, h in zip(where, high, strict=True):
            if i >= n:
                raise _corrupt(f"exception offset {i} is outside its chunk of {n} values")
            values[i] |= h << b1
        out.extend(v + m for v in values)
        pos = end
    return out, pos


# --------------------------------------------------------------------------- bitmaps


def encode_mumbling(positions: Iterable[int]) -> bytes:
    """The Mumbling bytes of a set of positions (duplicates collapse)."""
    ps = sorted(set(positions))
    if ps and (ps[0] < 0 or ps[-1] >= MAX_POSITIONS):
        bad = ps[0] if ps[0] < 0 else ps[-1]
        raise UnsupportedError(f"position {bad} cannot be in a manifest DV: a Mumbling bitmap holds positions "
                               f"0 to {MAX_POSITIONS - 1}",
                               hint="compact the leaf manifest (icectl compact) so its rows fit one manifest DV")
    containers = (ps[-1] >> 8) + 1 if ps else 0
    buckets: list[list[int]] = [[] for _ in range(containers)]
    for p in ps:
        buckets[p >> 8].append(p & 0xFF)
    descriptors: list[int] = []
    body = bytearray()
    for b in buckets:
        if len(b) < DENSE:
            descriptors.append(len(b))
            body += bytes(b)
        else:
            descriptors.append(DENSE)
            dense = bytearray(DENSE)
            for q in b:
                dense[q >> 3] |= 0x80 >> (q & 7)
            body += dense
    header = bytes([MUMBLING_VERSION]) + len(ps).to_bytes(3, "little") + containers.to_bytes(2, "little")
    return header + pfor_encode(descriptors) + bytes(body)


def _header(data: bytes) -> tuple[int, int]:
    if len(data) < HEADER_BYTES:
        raise _corrupt(f"{len(data)} bytes, shorter than its 6-byte header")
    if data[0] != MUMBLING_VERSION:
        raise _corrupt(f"version {data[0]} (icectl reads version 1)")
    cardinality = int.from_bytes(data[1:4], "little")
    containers = int.from_bytes(data[4:6], "little")
    if containers > MAX_CONTAINERS:
        raise _corrupt(f"{containers} containers, over the limit of {MAX_CONTAINERS}")
    if cardinality > MAX_POSITIONS:
        raise _corrupt(f"cardinality {cardinality}, over the limit of {MAX_POSITIONS}")
    return cardinality, containers


def mumbling_cardinality(data: bytes) -> int:
    """The cardinality a bitmap's header states (the header checked, not the containers)."""
    return _header(data)[0]


def decode_mumbling(data: bytes) -> list[int]:
    """The sorted positions of a Mumbling bitmap, every rule of the format checked."""
    cardinality, containers = _header(data)
    descriptors, pos = pfor_decode(data, containers, HEADER_BYTES)
    out: list[int] = []
    for k, d in enumerate(descriptors):
        kind = d >> 5
        base = k << 8
        if kind == 0:  # sparse
            chunk = data[pos:pos + d]
            if len(chunk) < d:
                raise _corrupt(f"container {k} is truncated")
            previous = -1
            for q in chunk:
                if q <= previous:
                    raise _corrupt(f"sparse container {k} is not strictly ascending")
                previous = q
                out.append(base + q)
            pos += d
        elif kind == 1:  # dense; the low five bits are ignored when reading
            chunk = data[pos:pos + DENSE]
            if len(chunk) < DENSE:
                raise _corrupt(f"container {k} is truncated")
            for i, byte in enumerate(chunk):
                if byte:
                    at = base + (i << 3)
                    out.extend(at + j for j in _BITS[byte])
            pos += DENSE
        else:
            raise _corrupt(f"descriptor {d:#04x} of container {k} has reserved bits set")
    if pos != len(data):
        raise _corrupt(f"{len(data) - pos} bytes follow the last container")
    if len(out) != cardinality:
        raise _corrupt(f"its containers hold {len(out)} positions, its header says {cardinality}")
    return out

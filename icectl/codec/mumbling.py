"""Mumbling bitmaps: the encoding of Iceberg v4 manifest deletion vectors (``format/mumbling-spec.md``).

Layout (all integers unsigned little-endian; three sections, no padding, nothing after the last one):

- header, 6 bytes: version ``0x01`` (1), cardinality = number of set bits (u24), container count ``C`` (u16);
- ``C`` descriptor bytes, PFOR-encoded (Appendix A, :func:`pfor_encode`): ``000nnnnn`` is a sparse
  container of ``n`` (0-31) bytes, ``001xxxxx`` a dense one of 32 bytes (readers ignore ``xxxxx``), the
  top two bits are reserved;
- the containers in descriptor order. Container ``k`` holds positions ``256k .. 256k+255``; sparse: one
  strictly ascending byte ``pos & 0xFF`` per set position; dense: a 32-byte bitset, MSB-first (position
  ``p`` is bit ``7 - (p & 7)`` of byte ``(p & 0xFF) >> 3``). A container with fewer than 32 set bits is
  sparse, one with 32 or more is dense.

``C <= 8192``, so positions are below 2,097,152 and there are at most 2,097,152 of them. The encoder
writes ``C = (max >> 8) + 1`` (``C = 0`` for the empty set) and picks each PFOR chunk's width as the
spec recommends (the smallest encoded size; on a tie the smaller width, which is the spec's own example
``32 01 06 09 01 E0`` and not Java's ``05 00 06 07 04 10``). Two valid encoders can therefore write
different bytes for one set: compare bitmaps by content, never by bytes. The decoder accepts any valid
width choice and trailing empty containers, and rejects everything else with
:class:`~icectl.errors.CorruptInputError` (the caller names the file).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from operator import lt

from icectl.errors import CorruptInputError, UnsupportedError

MUMBLING_VERSION = 1
MAX_CONTAINERS = 8192
MAX_POSITIONS = 2_097_152  # 8192 containers x 256 positions: positions are < this; cardinality <= this
HEADER_SIZE = 6
CONTAINER_BITS = 256
DENSE_SIZE = 32  # bytes of a dense container
DENSE_MIN = 32  # set bits from which a container must be dense
PFOR_CHUNK = 256

_DENSE_BIT = 0x20
_RESERVED_BITS = 0xC0
_CORRUPT_HINT = ("the manifest deletion vector is damaged or is not a Mumbling v1 bitmap: restore the "
                 "root manifest from a good copy or roll back to a snapshot before it")
_OVER_LIMIT_HINT = "compact the leaf manifest (a manifest DV holds positions below 2,097,152 only)"

# byte value -> its 8 bits as 0/1 bytes, most significant first (a dense container's bit order)
_EXPAND = tuple(bytes((v >> (7 - i)) & 1 for i in range(8)) for v in range(256))
_TO_DIGITS = bytes.maketrans(b"\x00\x01", b"01")  # 0/1 flags -> "0"/"1" for int(..., 2)
_IN_CONTAINER = range(CONTAINER_BITS)


def _corrupt(message: str) -> CorruptInputError:
    return CorruptInputError(f"bad Mumbling bitmap: {message}", hint=_CORRUPT_HINT)


# ------------------------------------------------------------------------------------------------
# PFOR (spec Appendix A)


def _pack(width: int, values: Sequence[int]) -> bytes:
    """``values`` (each < 2**width) bit-packed MSB-first, the first value in the highest bits, padded
    with 0 bits to a byte boundary."""
    if width == 0 or not values:
        return b""
    if width == 8:
        return bytes(values)
    acc = 0
    for v in values:
        acc = (acc << width) | v
    bits = width * len(values)
    size = (bits + 7) // 8
    return (acc << (size * 8 - bits)).to_bytes(size, "big")


def _unpack(width: int, data: bytes, offset: int, count: int) -> list[int]:
    """``count`` values of ``width`` bits packed MSB-first at ``data[offset:]`` (the caller checked the
    length)."""
    if width == 0:
        return [0] * count
    if width == 8:
        return list(data[offset:offset + count])
    bits = width * count
    size = (bits + 7) // 8
    acc = int.from_bytes(data[offset:offset + size], "big") >> (size * 8 - bits)
    mask = (1 << width) - 1
    return [(acc >> shift) & mask for shift in range(bits - width, -1, -width)]


def _pfor_chunk_size(n: int, b1: int, b2: int, e: int) -> int:
    """Bytes of a chunk of ``n`` values after its 3-byte header."""
    return (n * b1 + 7) // 8 + e + (e * b2 + 7) // 8


def _encode_chunk(chunk: Sequence[int]) -> bytes:
    n = len(chunk)
    m = min(chunk)
    norm = [v - m for v in chunk]
    max_width = max(norm).bit_length()
    # The spec's recommended choice: the width of the smallest chunk. The spec writes the primary array's
    # size as 32*b (a full chunk); the last, shorter chunk is sized by its real ceil(n*b/8) bytes. Ties go
    # to the smaller width (strict <), as the spec's example 5 does; Java's encoder takes the larger one.
    best_b1, best_size = 0, -1
    for b in range(max_width + 1):
        e = 0 if b >= 8 else sum(1 for v in norm if v >> b)
        size = _pfor_chunk_size(n, b, max_width - b, e)
        if best_size < 0 or size < best_size:
            best_b1, best_size = b, size
    b1 = best_b1
    if b1 == 8:  # raw bytes, b2 = e = m = 0 (the spec's recommendation, Java's output)
        return bytes((8, 0, 0)) + bytes(chunk)
    b2 = max_width - b1
    mask = (1 << b1) - 1
    offsets = [i for i, v in enumerate(norm) if v >> b1]
    return (bytes((b1 | (b2 << 4), len(offsets), m))
            + _pack(b1, [v & mask for v in norm])
            + bytes(offsets)
            + _pack(b2, [norm[i] >> b1 for i in offsets]))


def pfor_encode(values: Sequence[int]) -> bytes:
    """Unsigned byte values PFOR-encoded in chunks of 256 (spec Appendix A). ``values`` holds ints in
    0..255 (ValueError otherwise: a caller's bug, not bad input)."""
    for v in values:
        if not 0 <= v <= 255:
            raise ValueError(f"PFOR encodes unsigned bytes, got {v}")
    return b"".join(_encode_chunk(values[i:i + PFOR_CHUNK]) for i in range(0, len(values), PFOR_CHUNK))


def pfor_decode(data: bytes, count: int, offset: int = 0) -> tuple[list[int], int]:
    """``count`` unsigned byte values PFOR-encoded at ``data[offset:]``, and the offset after them.

    Any valid width choice is read. Raises CorruptInputError for a truncated chunk, ``b1 + b2 > 8``,
    exceptions with ``b1 = 8``, an exception offset outside its chunk or given twice, and a value above 255.
    """
    if count < 0 or offset < 0:
        raise ValueError(f"cannot decode {count} PFOR values at offset {offset}")
    values: list[int] = []
    pos = offset
    for chunk_index, start in enumerate(range(0, count, PFOR_CHUNK)):
        n = min(PFOR_CHUNK, count - start)
        where = f"PFOR chunk {chunk_index} at offset {pos}"
        if len(data) - pos < 3:
            raise _corrupt(f"{where} is truncated: its 3-byte header has {max(len(data) - pos, 0)} bytes")
        b1, b2, e, m = data[pos] & 0x0F, data[pos] >> 4, data[pos + 1], data[pos + 2]
        if b1 + b2 > 8:
            raise _corrupt(f"{where} has bit widths b1={b1} + b2={b2} > 8")
        if b1 == 8 and e:
            raise _corrupt(f"{where} has b1=8 and {e} exceptions (must be 0)")
        if e > n:
            raise _corrupt(f"{where} has {e} exceptions for {n} values")
        size = _pfor_chunk_size(n, b1, b2, e)
        if len(data) - pos - 3 < size:
            raise _corrupt(f"{where} is truncated: {n} values need {3 + size} bytes, "
                           f"{len(data) - pos} present")
        pos += 3
        chunk = _unpack(b1, data, pos, n)
        pos += (n * b1 + 7) // 8
        if e:
            exc_offsets = data[pos:pos + e]
            pos += e
            highs = _unpack(b2, data, pos, e)
            pos += (e * b2 + 7) // 8
            if max(exc_offsets) >= n:
                raise _corrupt(f"{where} has an exception offset {max(exc_offsets)} outside its {n} values")
            if len(set(exc_offsets)) != e:
                raise _corrupt(f"{where} names an exception offset twice")
            for i, high in zip(exc_offsets, highs, strict=True):
                chunk[i] |= high << b1
        if m:
            chunk = [v + m for v in chunk]
        if chunk and max(chunk) > 255:
            raise _corrupt(f"{where} decodes to {max(chunk)}, more than a byte")
        values.extend(chunk)
    return values, pos


# ------------------------------------------------------------------------------------------------
# Mumbling


def encode_mumbling(positions: Iterable[int]) -> bytes:
    """The Mumbling v1 bitmap of ``positions`` (any order, repeats allowed).

    Raises UnsupportedError for a position below 0 or at/above 2,097,152 (a manifest DV cannot hold it).
    """
    items = positions if isinstance(positions, (list, tuple, range)) else list(positions)
    if not items:
        return bytes((MUMBLING_VERSION, 0, 0, 0, 0, 0))
    low, high = min(items), max(items)
    for p in (low, high):
        if not 0 <= p < MAX_POSITIONS:
            raise UnsupportedError(f"position {p} cannot go into a Mumbling bitmap (manifest DV): positions "
                                   f"must be >= 0 and < {MAX_POSITIONS:,}", hint=_OVER_LIMIT_HINT)
    count = (high >> 8) + 1
    flags = bytearray(count * CONTAINER_BITS)  # one 0/1 byte per position: dedups without sorting
    deque(map(flags.__setitem__, items, repeat(1)), maxlen=0)
    descriptors: list[int] = []
    containers: list[bytes] = []
    cardinality = 0
    for base in range(0, len(flags), CONTAINER_BITS):
        bits = flags[base:base + CONTAINER_BITS]
        n = bits.count(1)
        cardinality += n
        if n >= DENSE_MIN:
            descriptors.append(_DENSE_BIT)
            containers.append(int(bits.translate(_TO_DIGITS), 2).to_bytes(DENSE_SIZE, "big"))
        else:
            descriptors.append(n)
            if n:
                containers.append(bytes(compress(_IN_CONTAINER, bits)))
    header = bytes((MUMBLING_VERSION,)) + cardinality.to_bytes(3, "little") + count.to_bytes(2, "little")
    return header + pfor_encode(descriptors) + b"".join(containers)


def _header(data: bytes) -> tuple[int, int]:
    """(cardinality, container count) of a bitmap's header, after checking its length and version."""
    if len(data) < HEADER_SIZE:
        raise _corrupt(f"truncated header: {len(data)} bytes, the header alone is {HEADER_SIZE}")
    if data[0] != MUMBLING_VERSION:
        raise UnsupportedError(f"unknown Mumbling bitmap version {data[0]} (icectl reads version "
                               f"{MUMBLING_VERSION})", hint=_CORRUPT_HINT)
    return int.from_bytes(data[1:4], "little"), int.from_bytes(data[4:6], "little")


def mumbling_cardinality(data: bytes) -> int:
    """The number of set positions a bitmap's header states (the header alone is read and checked)."""
    return _header(data)[0]


def decode_mumbling(data: bytes) -> list[int]:
    """The set positions of a Mumbling v1 bitmap, ascending, after validating all of it.

    Raises CorruptInputError (UnsupportedError for an unknown version) naming what is wrong: a truncated
    header, descriptor array or container, trailing bytes, more than 8,192 containers, a descriptor with
    reserved bits set, sparse bytes not strictly ascending, a dense container with fewer than 32 set bits,
    or a popcount other than the header's cardinality.
    """
    data = bytes(data)
    cardinality, count = _header(data)
    if count > MAX_CONTAINERS:
        raise _corrupt(f"container count {count} is over the limit of {MAX_CONTAINERS}")
    if cardinality > count * CONTAINER_BITS:
        raise _corrupt(f"cardinality {cardinality} is more than {count} containers can hold")
    descriptors, pos = pfor_decode(data, count, HEADER_SIZE)
    lengths = []
    for k, d in enumerate(descriptors):
        if d & _RESERVED_BITS:
            raise _corrupt(f"descriptor 0x{d:02X} of container {k} has reserved bits set")
        lengths.append(DENSE_SIZE if d & _DENSE_BIT else d)
    need = sum(lengths)
    if len(data) - pos < need:
        raise _corrupt(f"truncated containers: {count} containers need {need} bytes after offset {pos}, "
                       f"{len(data) - pos} present")
    if len(data) - pos > need:
        raise _corrupt(f"{len(data) - pos - need} trailing bytes after the last container "
                       f"(bitmap ends at offset {pos + need} of {len(data)})")
    out: list[int] = []
    for k, (d, size) in enumerate(zip(descriptors, lengths, strict=True)):
        if not size:
            continue
        body = data[pos:pos + size]
        base = k * CONTAINER_BITS
        if d & _DENSE_BIT:
            bits = b"".join(map(_EXPAND.__getitem__, body))
            if bits.count(1) < DENSE_MIN:
                raise _corrupt(f"dense container {k} has {bits.count(1)} set bits (fewer than 32 must be "
                               "sparse)")
            out.extend(compress(range(base, base + CONTAINER_BITS), bits))
        else:
            if not all(map(lt, body, body[1:])):
                raise _corrupt(f"sparse container {k} at offset {pos}: positions not strictly ascending")
            out.extend(map(base.__add__, body))
        pos += size
    if len(out) != cardinality:
        raise _corrupt(f"header cardinality {cardinality} but {len(out)} positions are set")
    return out

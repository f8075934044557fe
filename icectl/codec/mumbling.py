"""Mumbling bitmaps (placeholder: replaced by the full codec)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from icectl.errors import CorruptInputError, UnsupportedError

MUMBLING_VERSION = 1
MAX_CONTAINERS = 8192
MAX_POSITIONS = 2_097_152


def pfor_decode(data: bytes, count: int, offset: int = 0) -> tuple[list[int], int]:
    out: list[int] = []
    pos = offset
    while len(out) < count:
        n = min(256, count - len(out))
        if pos + 3 > len(data):
            raise CorruptInputError("Mumbling descriptors are truncated")
        b1, b2, e, m = data[pos] & 0xF, data[pos] >> 4, data[pos + 1], data[pos + 2]
        pos += 3
        if b1 + b2 > 8:
            raise CorruptInputError("Mumbling PFOR chunk has b1 + b2 > 8")
        nbytes = (n * b1 + 7) // 8
        bits = int.from_bytes(data[pos:pos + nbytes], "big") if nbytes else 0
        if pos + nbytes > len(data):
            raise CorruptInputError("Mumbling descriptors are truncated")
        total = nbytes * 8
        vals = [((bits >> (total - (i + 1) * b1)) & ((1 << b1) - 1)) if b1 else 0 for i in range(n)]
        pos += nbytes
        idx = list(data[pos:pos + e])
        pos += e
        eb = (e * b2 + 7) // 8
        ebits = int.from_bytes(data[pos:pos + eb], "big") if eb else 0
        if pos + eb > len(data):
            raise CorruptInputError("Mumbling descriptors are truncated")
        for j, k in enumerate(idx):
            if k >= n:
                raise CorruptInputError("Mumbling exception offset out of range")
            vals[k] |= ((ebits >> (eb * 8 - (j + 1) * b2)) & ((1 << b2) - 1)) << b1
        pos += eb
        out.extend(v + m for v in vals)
    return out, pos


def pfor_encode(values: Sequence[int]) -> bytes:
    out = bytearray()
    for i in range(0, len(values), 256):
        out += bytes([8, 0, 0]) + bytes(values[i:i + 256])
    return bytes(out)


def encode_mumbling(positions: Iterable[int]) -> bytes:
    ps = sorted(set(positions))
    for p in (ps[:1] + ps[-1:]):
        if p < 0 or p >= MAX_POSITIONS:
            raise UnsupportedError(f"position {p} is outside a Mumbling bitmap (0 to {MAX_POSITIONS - 1})",
                                   hint="compact the leaf manifest")
    c = (ps[-1] >> 8) + 1 if ps else 0
    buckets: list[list[int]] = [[] for _ in range(c)]
    for p in ps:
        buckets[p >> 8].append(p & 0xFF)
    descs, body = [], bytearray()
    for b in buckets:
        if len(b) < 32:
            descs.append(len(b))
            body += bytes(b)
        else:
            descs.append(32)
            dense = bytearray(32)
            for q in b:
                dense[q >> 3] |= 0x80 >> (q & 7)
            body += dense
    return bytes([1]) + len(ps).to_bytes(3, "little") + c.to_bytes(2, "little") + pfor_encode(descs) + bytes(body)


def decode_mumbling(data: bytes) -> list[int]:
    if len(data) < 6:
        raise CorruptInputError("Mumbling bitmap is truncated (header)")
    if data[0] != 1:
        raise CorruptInputError(f"Mumbling bitmap version {data[0]} is not 1")
    card = int.from_bytes(data[1:4], "little")
    c = int.from_bytes(data[4:6], "little")
    if c > MAX_CONTAINERS:
        raise CorruptInputError(f"Mumbling bitmap has {c} containers (at most {MAX_CONTAINERS})")
    descs, pos = pfor_decode(data, c, 6)
    out: list[int] = []
    for k, d in enumerate(descs):
        if d > 32:
            raise CorruptInputError(f"Mumbling descriptor {d} is invalid")
        if d == 32:
            chunk = data[pos:pos + 32]
            if len(chunk) < 32:
                raise CorruptInputError("Mumbling container is truncated")
            out.extend((k << 8) | (i * 8 + j) for i, byte in enumerate(chunk) for j in range(8) if byte & (0x80 >> j))
            pos += 32
        else:
            chunk = data[pos:pos + d]
            if len(chunk) < d or any(a >= b for a, b in zip(chunk, chunk[1:])):
                raise CorruptInputError("Mumbling sparse container is truncated or not ascending")
            out.extend((k << 8) | q for q in chunk)
            pos += d
    if pos != len(data):
        raise CorruptInputError("Mumbling bitmap has trailing bytes")
    if len(out) != card:
        raise CorruptInputError(f"Mumbling bitmap holds {len(out)} positions, its header says {card}")
    return out


def mumbling_cardinality(data: bytes) -> int:
    if len(data) < 6 or data[0] != 1:
        raise CorruptInputError("not a Mumbling bitmap")
    return int.from_bytes(data[1:4], "little")

"""A minimal PNG reader (8-bit greyscale/RGB/RGBA, not interlaced: what Chromium's screenshots are)
with zlib alone, so tests can look at a screenshot's pixels without an imaging library.

The "Up" filter, which Chromium uses for most rows, is undone on whole rows at once: bytewise
addition modulo 256 of two rows as big integers, with the carries between bytes masked off
(SWAR). The other filters go byte by byte; they are rare rows in a screenshot.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 6: 4}  # colour type -> bytes per pixel at bit depth 8


@dataclass
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]

    def pixel(self, x: int, y: int) -> tuple[int, ...]:
        c = self.channels
        return tuple(self.rows[y][x * c:(x + 1) * c])

    def colours(self, step: int = 1) -> Counter[tuple[int, ...]]:
        """How many pixels of each colour (every ``step``-th pixel of every ``step``-th row)."""
        c = self.channels
        found: Counter[tuple[int, ...]] = Counter()
        for row in self.rows[::step]:
            found.update(tuple(row[i:i + c]) for i in range(0, len(row), c * step))
        return found


def _add_bytes(a: bytes, b: bytes) -> bytes:
    """``(a[i] + b[i]) % 256`` for every i, on whole rows."""
    n = len(a)
    x, y = int.from_bytes(a, "big"), int.from_bytes(b, "big")
    low, high = int.from_bytes(b"\x7f" * n, "big"), int.from_bytes(b"\x80" * n, "big")
    return (((x & low) + (y & low)) ^ ((x ^ y) & high)).to_bytes(n, "big")


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _unfilter(kind: int, line: bytes, prev: bytes, bpp: int) -> bytes:
    if kind == 0:
        return line
    if kind == 2:
        return _add_bytes(line, prev)
    out = bytearray(line)
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        if kind == 1:
            out[i] = (out[i] + a) & 0xFF
        elif kind == 3:
            out[i] = (out[i] + ((a + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            out[i] = (out[i] + _paeth(a, prev[i], prev[i - bpp] if i >= bpp else 0)) & 0xFF
        else:
            raise ValueError(f"PNG filter type {kind}")
    return bytes(out)


def read_png(data: bytes) -> Image:
    assert data[:8] == SIGNATURE, "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    assert header is not None, "no IHDR"
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = CHANNELS[colour]
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp + 1
    assert len(raw) == stride * height, "truncated image data"
    rows, prev = [], bytes(width * bpp)
    for y in range(height):
        line = raw[y * stride:(y + 1) * stride]
        prev = _unfilter(line[0], line[1:], prev, bpp)
        rows.append(prev)
    return Image(width, height, bpp, rows)

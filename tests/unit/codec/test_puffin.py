"""Puffin footers and deletion-vector blobs, checked against byte layouts built by hand."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
import zlib

import pytest
from pyroaring import BitMap64

from icectl.codec.puffin import (
    DELETION_VECTOR_V1,
    PuffinBlob,
    decode_deletion_vector,
    deletion_vector_blob,
    encode_deletion_vector,
    read_puffin_footer,
    write_puffin,
)
from icectl.errors import CorruptInputError, UnsupportedError

DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])

# Portable 64-bit Roaring for {1, 2, 5} written from RoaringFormatSpec by hand:
# bitmap count (u64 LE) = 1, key (u32 LE) = 0, then a 32-bit Roaring bitmap without runs:
# cookie 12346 (u32 LE), container count 1 (u32 LE), key 0 / cardinality-1 = 2 (u16 LE each),
# offset of the container = 16 (u32 LE), array container 1, 2, 5 (u16 LE each).
VECTOR_1_2_5 = (
    (1).to_bytes(8, "little") + (0).to_bytes(4, "little")
    + (12346).to_bytes(4, "little") + (1).to_bytes(4, "little")
    + (0).to_bytes(2, "little") + (2).to_bytes(2, "little")
    + (16).to_bytes(4, "little")
    + b"".join(v.to_bytes(2, "little") for v in (1, 2, 5))
)
# {0..999} run-optimized: cookie 12347 | (containers-1) << 16, run flags (1 byte), key 0 /
# cardinality-1 = 999, no offsets (fewer than 4 containers), run container: 1 run, start 0, length-1 999.
VECTOR_RUN_0_999 = (
    (1).to_bytes(8, "little") + (0).to_bytes(4, "little")
    + (12347).to_bytes(2, "little") + (0).to_bytes(2, "little") + b"\x01"
    + (0).to_bytes(2, "little") + (999).to_bytes(2, "little")
    + (1).to_bytes(2, "little") + (0).to_bytes(2, "little") + (999).to_bytes(2, "little")
)


def dv_blob(vector: bytes) -> bytes:
    body = DV_MAGIC + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def test_decode_hand_built_deletion_vector():
    assert set(decode_deletion_vector(dv_blob(VECTOR_1_2_5))) == {1, 2, 5}
    assert set(decode_deletion_vector(dv_blob(VECTOR_RUN_0_999))) == set(range(1000))


def test_decode_positions_beyond_32_bits():
    # Two keys: high 32 bits 0 and 3, each with one array container holding 7.
    def bitmap32(value: int) -> bytes:
        return ((12346).to_bytes(4, "little") + (1).to_bytes(4, "little") + (0).to_bytes(4, "little")
                + (16).to_bytes(4, "little") + value.to_bytes(2, "little"))
    vector = ((2).to_bytes(8, "little") + (0).to_bytes(4, "little") + bitmap32(7)
              + (3).to_bytes(4, "little") + bitmap32(7))
    assert sorted(decode_deletion_vector(dv_blob(vector))) == [7, (3 << 32) | 7]


def test_encode_matches_the_hand_built_layout_and_run_optimizes():
    assert encode_deletion_vector(BitMap64([1, 2, 5])) == dv_blob(VECTOR_1_2_5)
    bitmap = BitMap64(range(1000))
    assert encode_deletion_vector(bitmap) == dv_blob(VECTOR_RUN_0_999)
    assert encode_deletion_vector([5, 2, 1]) == dv_blob(VECTOR_1_2_5)


def test_dv_length_mismatch():
    blob = bytearray(dv_blob(VECTOR_1_2_5))
    blob[3] += 1
    with pytest.raises(CorruptInputError, match="DV length mismatch"):
        decode_deletion_vector(bytes(blob))
    with pytest.raises(CorruptInputError, match="DV length mismatch"):
        decode_deletion_vector(dv_blob(VECTOR_1_2_5) + b"\x00")


def test_bad_dv_magic():
    blob = bytearray(dv_blob(VECTOR_1_2_5))
    blob[4:8] = (1681511377).to_bytes(4, "big")  # the magic as a big-endian int: wrong byte order
    with pytest.raises(CorruptInputError, match="bad DV magic"):
        decode_deletion_vector(bytes(blob))


def test_dv_crc_mismatch():
    blob = bytearray(dv_blob(VECTOR_1_2_5))
    blob[-6] ^= 0x01  # flip a bit of the last position
    with pytest.raises(CorruptInputError, match="DV CRC mismatch"):
        decode_deletion_vector(bytes(blob))
    little_endian_crc = dv_blob(VECTOR_1_2_5)[:-4] + struct.pack("<I", zlib.crc32(DV_MAGIC + VECTOR_1_2_5))
    with pytest.raises(CorruptInputError, match="DV CRC mismatch"):
        decode_deletion_vector(little_endian_crc)


def test_dv_vector_that_is_not_roaring():
    with pytest.raises(CorruptInputError, match="not a portable 64-bit Roaring bitmap"):
        decode_deletion_vector(dv_blob(b"\x05" + b"\x00" * 11))
    with pytest.raises(CorruptInputError, match="too short"):
        decode_deletion_vector(b"\x00\x00\x00\x04")


def test_dv_cardinality_check():
    assert len(decode_deletion_vector(dv_blob(VECTOR_1_2_5), expected_cardinality=3)) == 3
    with pytest.raises(CorruptInputError, match="DV cardinality mismatch: 3 positions, expected 4"):
        decode_deletion_vector(dv_blob(VECTOR_1_2_5), expected_cardinality=4)


# --------------------------------------------------------------------------- Puffin files


def hand_built_puffin(blobs: list[bytes], footer: dict, *, flags: int = 0, size_delta: int = 0) -> bytes:
    payload = json.dumps(footer).encode()
    return (b"PFA1" + b"".join(blobs) + b"PFA1" + payload
            + struct.pack("<i", len(payload) + size_delta) + struct.pack("<I", flags) + b"PFA1")


DV1 = dv_blob(VECTOR_1_2_5)
DV2 = dv_blob(VECTOR_RUN_0_999)
FOOTER = {"blobs": [
    {"type": "deletion-vector-v1", "fields": [2147483645], "snapshot-id": -1, "sequence-number": -1,
     "offset": 4, "length": len(DV1),
     "properties": {"referenced-data-file": "s3://b/t/data/a.parquet", "cardinality": "3"}},
    {"type": "apache-datasketches-theta-v1", "fields": [1], "snapshot-id": 7, "sequence-number": 2,
     "offset": 4 + len(DV1), "length": len(DV2), "compression-codec": "zstd"},
], "properties": {"created-by": "Trino version 381"}}


def test_read_hand_built_footer():
    data = hand_built_puffin([DV1, DV2], FOOTER)
    meta = read_puffin_footer(data)
    first, second = meta.blobs
    assert (first.type, first.fields, first.snapshot_id, first.sequence_number) == (
        "deletion-vector-v1", (2147483645,), -1, -1)
    assert (first.offset, first.length) == (4, len(DV1))
    assert first.properties["referenced-data-file"] == "s3://b/t/data/a.parquet"
    assert first.compression_codec is None
    assert (second.compression_codec, second.properties) == ("zstd", {})
    assert meta.properties == {"created-by": "Trino version 381"}
    assert meta.file_size == len(data)
    assert meta.footer_size == len(json.dumps(FOOTER)) + 16
    assert set(decode_deletion_vector(data[first.offset:first.offset + first.length])) == {1, 2, 5}


def test_read_footer_by_ranges_fetches_only_the_tail():
    big_blob = b"\x00" * 500_000
    footer = {"blobs": [{"type": "x", "fields": [], "snapshot-id": 1, "sequence-number": 1,
                         "offset": 4, "length": len(big_blob)}]}
    data = hand_built_puffin([big_blob], footer)
    calls: list[tuple[int, int]] = []

    def read_range(offset: int, length: int) -> bytes:
        calls.append((offset, length))
        return data[offset:offset + length]

    meta = read_puffin_footer(read_range, len(data))
    assert meta.blobs[0].length == len(big_blob)
    assert sum(length for _, length in calls) < 70_000  # the tail and the 4 leading bytes
    assert (0, 4) in calls
    with pytest.raises(ValueError, match="file_size is required"):
        read_puffin_footer(read_range)


def test_read_footer_larger_than_the_first_range_fetch():
    blobs = [{"type": "deletion-vector-v1", "fields": [2147483645], "snapshot-id": -1, "sequence-number": -1,
              "offset": 4, "length": 0, "properties": {"referenced-data-file": "f" * 100 + str(i)}}
             for i in range(1000)]
    data = hand_built_puffin([], {"blobs": blobs})
    assert len(data) > 100_000
    meta = read_puffin_footer(lambda offset, length: data[offset:offset + length], len(data))
    assert len(meta.blobs) == 1000 and meta.blobs[-1].properties["referenced-data-file"].endswith("999")


@pytest.mark.parametrize(("mutate", "error", "problem"), [
    (lambda d: b"PFA2" + d[4:], CorruptInputError, "bad leading magic"),
    (lambda d: d[:-4] + b"PFA2", CorruptInputError, "bad trailing magic"),
    (lambda d: d[:-1], CorruptInputError, "bad trailing magic"),
    (lambda d: d[:10], CorruptInputError, "too short"),
])
def test_footer_corruption(mutate, error, problem):
    with pytest.raises(error, match=problem):
        read_puffin_footer(mutate(hand_built_puffin([DV1], FOOTER | {"blobs": FOOTER["blobs"][:1]})))


def test_footer_size_and_flag_problems():
    one = FOOTER | {"blobs": FOOTER["blobs"][:1]}
    with pytest.raises(CorruptInputError, match="footer-start magic"):
        read_puffin_footer(hand_built_puffin([DV1], one, size_delta=-1))
    with pytest.raises(CorruptInputError, match="does not fit"):
        read_puffin_footer(hand_built_puffin([DV1], one, size_delta=10_000))
    with pytest.raises(UnsupportedError, match="unknown flags"):
        read_puffin_footer(hand_built_puffin([DV1], one, flags=0x100))


def test_compressed_footer_without_lz4_is_unsupported(monkeypatch):
    # None in sys.modules makes `import lz4.frame` fail as if the package were absent.
    monkeypatch.setitem(sys.modules, "lz4", None)
    monkeypatch.setitem(sys.modules, "lz4.frame", None)
    data = hand_built_puffin([DV1], FOOTER | {"blobs": FOOTER["blobs"][:1]}, flags=1)
    with pytest.raises(UnsupportedError, match=r"LZ4-compressed.*'lz4' package is not installed"):
        read_puffin_footer(data)


@pytest.mark.skipif(importlib.util.find_spec("lz4") is None, reason="lz4 is not installed")
def test_compressed_footer_with_lz4():
    import lz4.frame

    payload = lz4.frame.compress(json.dumps(FOOTER).encode(), store_size=True)
    data = (b"PFA1" + DV1 + DV2 + b"PFA1" + payload + struct.pack("<iI", len(payload), 1) + b"PFA1")
    meta = read_puffin_footer(data)
    assert meta.footer_compressed and len(meta.blobs) == 2


@pytest.mark.parametrize(("footer", "problem"), [
    ({"blobs": "nope"}, "no 'blobs' list"),
    ({"blobs": [{"type": "x", "fields": [], "snapshot-id": 1, "sequence-number": 1, "offset": 4}]},
     "blob 0 has no valid 'length'"),
    ({"blobs": [{"type": "x", "fields": ["a"], "snapshot-id": 1, "sequence-number": 1, "offset": 4,
                 "length": 1}]}, "'fields' must be integers"),
    ({"blobs": [{"type": "x", "fields": [], "snapshot-id": 1, "sequence-number": 1, "offset": 4,
                 "length": 10_000}]}, "outside the blob area"),
])
def test_footer_json_problems(footer, problem):
    with pytest.raises(CorruptInputError, match=problem):
        read_puffin_footer(hand_built_puffin([DV1], footer))
    bad_json = b"PFA1" + DV1 + b"PFA1" + b"{nope" + struct.pack("<iI", 5, 0) + b"PFA1"
    with pytest.raises(CorruptInputError, match="not UTF-8 JSON"):
        read_puffin_footer(bad_json)


def test_write_puffin_layout():
    result = write_puffin([
        deletion_vector_blob("s3://b/t/data/a.parquet", [1, 2, 5]),
        ("apache-datasketches-theta-v1", [1], {"ndv": "3"}, b"sketch", 7, 2),
    ], {"x": "y"})
    data = result.data
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    assert data[-8:-4] == b"\x00\x00\x00\x00"  # flags: uncompressed footer
    assert data[4:4 + len(DV1)] == DV1  # the first blob starts right after the magic
    payload_size = struct.unpack("<i", data[-12:-8])[0]
    footer = json.loads(data[-12 - payload_size:-12])
    assert data[-16 - payload_size:-12 - payload_size] == b"PFA1"
    assert footer == {"blobs": [
        {"type": DELETION_VECTOR_V1, "fields": [2147483645], "snapshot-id": -1, "sequence-number": -1,
         "offset": 4, "length": len(DV1),
         "properties": {"referenced-data-file": "s3://b/t/data/a.parquet", "cardinality": "3"}},
        {"type": "apache-datasketches-theta-v1", "fields": [1], "snapshot-id": 7, "sequence-number": 2,
         "offset": 4 + len(DV1), "length": 6, "properties": {"ndv": "3"}},
    ], "properties": {"created-by": footer["properties"]["created-by"], "x": "y"}}
    assert footer["properties"]["created-by"].startswith("icectl ")
    assert read_puffin_footer(data) == result.metadata
    assert result.metadata.footer_size == payload_size + 16


def test_puffin_blob_defaults_to_unassigned_snapshot():
    blob = PuffinBlob("t", [], {}, b"")
    assert (blob.snapshot_id, blob.sequence_number) == (-1, -1)

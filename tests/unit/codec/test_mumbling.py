"""Mumbling bitmaps (v4 manifest DVs) and their PFOR descriptor encoding, checked against the test vectors of
``format/mumbling-spec.md`` and Java's ``TestPFOREncoding`` / ``TestMumblingBitmap`` (PR #16747), a PFOR
writer of this file that takes any width, round trips at the limits, and every kind of malformed input.

Bitmaps are compared by content (the set they decode to); bytes are compared as well wherever our PFOR
width choice is the one that produced the vector (all but one: see ``WHOLE_BITMAPS``).

Each check was seen failing against a deliberately broken codec (one break at a time): dense bits
LSB-first (in the encoder; in the decoder), ties to the larger PFOR width, dense from 31 bits, padding at
the front of a packed array, the cardinality big-endian, C one too large, the position limit off by one,
and each decoder check (trailing bytes, ascending sparse bytes, cardinality, reserved bits, b1 + b2) removed.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icectl.codec.mumbling import (
    MAX_CONTAINERS,
    MAX_POSITIONS,
    MUMBLING_VERSION,
    decode_mumbling,
    encode_mumbling,
    mumbling_cardinality,
    pfor_decode,
    pfor_encode,
)
from icectl.errors import CorruptInputError, UnsupportedError

EXAMPLES = 25 if os.environ.get("CI") else 200


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# ------------------------------------------------------------------------------------------------
# A PFOR writer of the test's own, with the width forced (bit strings, not the module's packing)


def pack_bits(width: int, values: list[int]) -> bytes:
    bits = "".join(format(v, f"0{width}b") for v in values) if width else ""
    bits += "0" * (-len(bits) % 8)
    return int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""


def chunk_with_width(values: list[int], b1: int, m: int | None = None) -> bytes:
    """One PFOR chunk of ``values`` with primary width ``b1`` (any valid choice), base ``m``."""
    m = min(values) if m is None else m
    norm = [v - m for v in values]
    max_width = max(norm).bit_length()
    b2 = max(max_width - b1, 0)
    exceptions = [i for i, v in enumerate(norm) if v >> b1]
    return (bytes([b1 | b2 << 4, len(exceptions), m]) + pack_bits(b1, [v & ((1 << b1) - 1) for v in norm])
            + bytes(exceptions) + pack_bits(b2, [norm[i] >> b1 for i in exceptions]))


def header(cardinality: int, containers: int, version: int = MUMBLING_VERSION) -> bytes:
    return bytes([version]) + cardinality.to_bytes(3, "little") + containers.to_bytes(2, "little")


def one_container(descriptor: int, body: bytes, cardinality: int) -> bytes:
    """A bitmap of one container; its one descriptor is the PFOR chunk ``00 00 d`` (b1 = 0, m = d)."""
    return header(cardinality, 1) + bytes([0, 0, descriptor]) + body


# ------------------------------------------------------------------------------------------------
# 2.3(a): PFOR vectors

PFOR_VECTORS = [
    ([0] * 256, "00 00 00"),
    ([5] * 51, "00 00 05"),
    ([0, 0, 0, 0, 255, 0, 0, 254], "80 02 00 04 07 FF FE"),
    ([6, 7, 8], "02 00 06 18"),
    ([6, 34, 8, 7], "32 01 06 09 01 E0"),  # the spec's bytes: b1 = 2 ties with b1 = 5 (3 bytes each)
]


@pytest.mark.parametrize(("values", "encoded"), PFOR_VECTORS)
def test_pfor_vectors_encode_and_decode(values: list[int], encoded: str) -> None:
    assert pfor_encode(values) == h(encoded)  # our width choice is the spec's for every vector
    assert pfor_decode(h(encoded), len(values)) == (values, len(h(encoded)))


def test_pfor_decodes_javas_tie_choice() -> None:
    # Java's encoder takes the larger width on the tie of [6, 34, 8, 7]: b1 = 5, no exceptions.
    assert pfor_decode(h("05 00 06 07 04 10"), 4) == ([6, 34, 8, 7], 6)


def test_pfor_bit_packing_example() -> None:
    # The spec's example: [3, 2, 1, 2, 3] at b = 2 is E6 C0 (MSB-first, zero-padded).
    assert pfor_decode(h("02 00 00 E6 C0"), 5) == ([3, 2, 1, 2, 3], 5)
    # With a trailing 0 (so that m = 0 and b1 = 2 is the best width) the encoder writes the same bits.
    assert pfor_encode([3, 2, 1, 2, 3, 0]) == h("02 00 00 E6 C0")


def test_pfor_decodes_at_an_offset_and_chunks_by_256() -> None:
    values = [i % 7 for i in range(600)]  # chunks of 256, 256, 88
    encoded = pfor_encode(values)
    assert pfor_decode(b"\xAA\xBB" + encoded + b"\xCC", 600, 2) == (values, 2 + len(encoded))
    assert pfor_decode(b"", 0) == ([], 0)
    assert pfor_encode([]) == b""


def test_pfor_chunks_are_encoded_separately() -> None:
    # Each chunk has its own m: 256 values of 9 then 3 values of 200 -> two chunks with b1 = 0.
    assert pfor_encode([9] * 256 + [200] * 3) == h("00 00 09 00 00 C8")


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.integers(0, 255), min_size=1, max_size=600), st.data())
def test_pfor_reads_any_width_and_writes_the_smallest(values: list[int], data: st.DataObject) -> None:
    chunks = [values[i:i + 256] for i in range(0, len(values), 256)]
    written = []
    for chunk in chunks:
        b1 = data.draw(st.integers(0, 8))
        m = data.draw(st.sampled_from([0, min(chunk)]))
        written.append(chunk_with_width(chunk, b1, m))
    assert pfor_decode(b"".join(written), len(values)) == (values, sum(map(len, written)))

    # The encoder's size is the minimum over all widths, and on a tie the smallest width wins.
    ours = pfor_encode(values)
    assert pfor_decode(ours, len(values)) == (values, len(ours))
    pos = 0
    for chunk in chunks:
        max_width = (max(chunk) - min(chunk)).bit_length()
        sizes = [len(chunk_with_width(chunk, b)) for b in range(max_width + 1)]
        best = min(sizes)
        b1 = ours[pos] & 0x0F
        assert b1 == sizes.index(best)
        pos += best
    assert pos == len(ours)


# ------------------------------------------------------------------------------------------------
# 2.3(b): containers

CONTAINERS = [
    (3, "00 22 FF", {0, 34, 255}),
    (31, bytes(range(31)).hex(), set(range(31))),
    (0x20, "FF FF FF FF" + "00" * 28, set(range(32))),
    (0x20, "FF FF FF FF 80" + "00" * 27, set(range(33))),
    (0x20, "FF FF" + "00" * 28 + "FF FF", set(range(16)) | set(range(240, 256))),
    (0x20, "AA" * 32, set(range(0, 256, 2))),
]


@pytest.mark.parametrize(("descriptor", "body", "positions"), CONTAINERS)
def test_container_examples(descriptor: int, body: str, positions: set[int]) -> None:
    bitmap = one_container(descriptor, h(body), len(positions))
    assert decode_mumbling(bitmap) == sorted(positions)
    assert encode_mumbling(positions) == bitmap
    # The same container as container 5 (positions + 1280): only the descriptor's place changes.
    far = {p + 5 * 256 for p in positions}
    assert decode_mumbling(encode_mumbling(far)) == sorted(far)


def test_dense_descriptor_low_bits_are_ignored_when_reading() -> None:
    # The spec: the low 5 bits of a dense descriptor must be 0 when written and ignored when read.
    assert decode_mumbling(one_container(0x3F, h("AA" * 32), 128)) == list(range(0, 256, 2))


# ------------------------------------------------------------------------------------------------
# 2.3(c): whole bitmaps

WHOLE_BITMAPS = [
    (set(), "01 00 00 00 00 00", True),
    ({0}, "01 01 00 00 01 00  00 00 01  00", True),
    ({5}, "01 01 00 00 01 00  00 00 01  05", True),
    ({42}, "01 01 00 00 01 00  00 00 01  2A", True),
    ({0, 5, 100, 255}, "01 04 00 00 01 00  00 00 04  00 05 64 FF", True),
    ({5, 522}, "01 02 00 00 03 00  01 00 00 A0  05 0A", True),
    ({1000}, "01 01 00 00 04 00  01 00 00 10  E8", True),
    (set(range(32)), "01 20 00 00 01 00  00 00 20  FF FF FF FF" + "00" * 28, True),
    (set(range(33)), "01 21 00 00 01 00  00 00 20  FF FF FF FF 80" + "00" * 27, True),
    # Descriptors [32, 1]: b1 = 5 without exceptions (Java's `05 00 01 F8 00`) and b1 = 0 with one
    # exception (`50 01 01 00 F8`) are both 2 bytes; Java takes the larger width, we the smaller, so
    # only the content is compared.
    (set(range(32)) | {257}, "01 21 00 00 02 00  05 00 01 F8 00  FF FF FF FF" + "00" * 28 + "01", False),
    ({300, 70000}, "01 02 00 00 12 01  10 01 00 01 80 10 01 00 11 80  2C 70", True),
]


@pytest.mark.parametrize(("positions", "encoded", "same_bytes"), WHOLE_BITMAPS)
def test_whole_bitmap_vectors(positions: set[int], encoded: str, same_bytes: bool) -> None:
    assert decode_mumbling(h(encoded)) == sorted(positions)
    assert mumbling_cardinality(h(encoded)) == len(positions)
    ours = encode_mumbling(positions)
    assert decode_mumbling(ours) == sorted(positions)
    assert (ours == h(encoded)) is same_bytes


def test_our_tie_choice_for_the_dense_plus_sparse_vector() -> None:
    assert encode_mumbling(set(range(32)) | {257}) == h(
        "01 21 00 00 02 00  50 01 01 00 F8  FF FF FF FF" + "00" * 28 + "01")


# ------------------------------------------------------------------------------------------------
# Round trips and limits


def container_count(bitmap: bytes) -> int:
    return int.from_bytes(bitmap[4:6], "little")


def expected_size(positions: set[int]) -> int:
    """6 + descriptors + containers, sparse below 32 set bits and dense (32 bytes) from 32."""
    if not positions:
        return 6
    per = [0] * ((max(positions) >> 8) + 1)
    for p in positions:
        per[p >> 8] += 1
    return 6 + len(pfor_encode([n if n < 32 else 32 for n in per])) + sum(n if n < 32 else 32 for n in per)


def assert_round_trip(positions: set[int]) -> bytes:
    bitmap = encode_mumbling(positions)
    assert decode_mumbling(bitmap) == sorted(positions)
    assert mumbling_cardinality(bitmap) == len(positions)
    assert container_count(bitmap) == ((max(positions) >> 8) + 1 if positions else 0)
    assert len(bitmap) == expected_size(positions)
    return bitmap


@st.composite
def position_sets(draw: st.DrawFn) -> set[int]:
    """Sets around the interesting shapes: a few containers anywhere (often the first and the last),
    each with 0-33 or all 256 positions, and a random spread."""
    keys = draw(st.sets(st.one_of(st.integers(0, MAX_CONTAINERS - 1), st.sampled_from([0, 1, MAX_CONTAINERS - 1])),
                        max_size=6))
    out: set[int] = set()
    for k in keys:
        n = draw(st.one_of(st.integers(0, 33), st.sampled_from([30, 31, 32, 33, 255, 256])))
        offsets = draw(st.sets(st.integers(0, 255), min_size=n, max_size=n)) if n < 256 else set(range(256))
        out |= {k * 256 + o for o in offsets}
    out |= draw(st.sets(st.integers(0, MAX_POSITIONS - 1), max_size=50))
    return out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position_sets())
def test_round_trip(positions: set[int]) -> None:
    assert_round_trip(positions)
    assert encode_mumbling(list(positions) * 2) == encode_mumbling(sorted(positions))  # order, repeats


@pytest.mark.parametrize("positions", [set(), {0}, {MAX_POSITIONS - 1}, {0, MAX_POSITIONS - 1}],
                         ids=["empty", "zero", "last", "first-and-last"])
def test_round_trip_limits(positions: set[int]) -> None:
    assert_round_trip(positions)


def test_every_position_set() -> None:
    bitmap = encode_mumbling(range(MAX_POSITIONS))
    assert bitmap[:6] == header(MAX_POSITIONS, MAX_CONTAINERS)  # cardinality 2,097,152 fits the u24
    # 8192 dense descriptors: 32 PFOR chunks `00 00 20`, then 8192 all-ones dense containers.
    assert bitmap[6:] == h("00 00 20") * 32 + b"\xFF" * (32 * MAX_CONTAINERS)
    assert decode_mumbling(bitmap) == list(range(MAX_POSITIONS))


@pytest.mark.parametrize("n", [30, 31, 32, 33])
def test_dense_sparse_boundary(n: int) -> None:
    positions = set(range(256 * 7, 256 * 7 + 2 * n, 2))  # container 7, n positions
    bitmap = assert_round_trip(positions)
    descriptors, end = pfor_decode(bitmap, 8, 6)
    assert descriptors == [0] * 7 + [n if n < 32 else 0x20]
    assert len(bitmap) - end == (n if n < 32 else 32)


def test_trailing_empty_containers_are_read() -> None:
    # {0, 5, 100, 255} with C = 4: three empty containers after the last set one (Java reads them).
    bitmap = header(4, 4) + chunk_with_width([4, 0, 0, 0], 3) + h("00 05 64 FF")
    assert decode_mumbling(bitmap) == [0, 5, 100, 255]


# ------------------------------------------------------------------------------------------------
# Rejection

VALID = h("01 04 00 00 01 00  00 00 04  00 05 64 FF")  # {0, 5, 100, 255}

MALFORMED = [
    ("empty", b"", "truncated header"),
    ("short-header", h("01 00 00 00 00"), "truncated header"),
    ("version-0", h("00 00 00 00 00 00"), "version 0"),
    ("version-2", h("02") + VALID[1:], "version 2"),
    ("truncated-descriptors", h("01 04 00 00 01 00  00 00"), "truncated"),
    ("truncated-pfor-body", header(2, 3) + h("01 00 00"), "truncated"),
    ("truncated-container", VALID[:-1], "truncated containers"),
    ("trailing-bytes", VALID + b"\x00", "1 trailing bytes"),
    ("too-many-containers", header(0, MAX_CONTAINERS + 1) + h("00 00 00") * 33, "8192"),
    ("cardinality-over-capacity", header(257, 1) + h("00 00 20") + b"\xFF" * 32, "cardinality 257"),
    ("reserved-bits-0x40", one_container(0x40, b"", 0), "reserved bits"),
    ("reserved-bits-0xA0", one_container(0xA0, b"\xFF" * 32, 256), "reserved bits"),
    ("reserved-bits-0xC3", one_container(0xC3, h("01 02 03"), 3), "reserved bits"),
    ("sparse-repeat", one_container(2, h("05 05"), 2), "not strictly ascending"),
    ("sparse-descending", one_container(3, h("01 07 03"), 3), "not strictly ascending"),
    ("dense-under-32", one_container(0x20, b"\xFF" * 3 + b"\x00" * 29, 24), "fewer than 32"),
    ("cardinality-too-high", h("01 05") + VALID[2:], "header cardinality 5 but 4"),
    ("cardinality-too-low", h("01 03") + VALID[2:], "header cardinality 3 but 4"),
    ("b1-plus-b2-over-8", header(0, 1) + h("45 00 00 00 00"), "b1=5 + b2=4 > 8"),
    ("b1-8-with-exceptions", header(0, 1) + h("08 01 00 00 00"), "b1=8"),
    ("exception-offset-outside", header(0, 1) + h("10 01 00 01 80"), "outside"),
    ("exception-offset-twice", header(2, 4) + h("10 02 00 01 01 C0"), "twice"),
    ("more-exceptions-than-values", header(0, 1) + h("10 02 00 00 00 C0"), "2 exceptions for 1"),
    ("value-over-255", header(0, 1) + h("01 00 FF 80"), "more than a byte"),
]


@pytest.mark.parametrize(("data", "words"), [pytest.param(d, w, id=i) for i, d, w in MALFORMED])
def test_malformed_bitmaps_are_rejected(data: bytes, words: str) -> None:
    with pytest.raises(CorruptInputError) as caught:
        decode_mumbling(data)
    assert words in caught.value.message
    line = caught.value.in_file("root.parquet").one_line()
    assert "\n" not in line and "root.parquet" in line and caught.value.hint
    assert caught.value.exit_code == 4


def test_unknown_version_is_unsupported() -> None:
    with pytest.raises(UnsupportedError, match="version 2"):
        decode_mumbling(h("02") + VALID[1:])
    with pytest.raises(UnsupportedError, match="version 7"):
        mumbling_cardinality(h("07 00 00 00 00 00"))


def test_cardinality_reads_the_header_only() -> None:
    assert mumbling_cardinality(h("01 2A 00 00 00 00") + b"anything") == 42
    with pytest.raises(CorruptInputError, match="truncated header"):
        mumbling_cardinality(h("01 2A 00 00 00"))


@pytest.mark.parametrize("position", [-1, MAX_POSITIONS, MAX_POSITIONS + 255, 2**40])
def test_over_limit_positions_are_unsupported(position: int) -> None:
    with pytest.raises(UnsupportedError) as caught:
        encode_mumbling([0, 7, position])
    assert str(position) in caught.value.message and "2,097,152" in caught.value.message
    assert caught.value.hint and "compact the leaf manifest" in caught.value.hint
    assert caught.value.exit_code == 4


def test_pfor_encode_refuses_non_bytes() -> None:
    with pytest.raises(ValueError, match="256"):
        pfor_encode([1, 256])


def truncations_of(bitmap: bytes) -> None:
    for cut in range(len(bitmap)):
        with pytest.raises(CorruptInputError):
            decode_mumbling(bitmap[:cut])


@pytest.mark.parametrize("encoded", [e for _, e, _ in WHOLE_BITMAPS] + [VALID.hex()])
def test_every_truncation_of_the_vectors_is_rejected(encoded: str) -> None:
    truncations_of(h(encoded))


def test_every_truncation_of_mixed_bitmaps_is_rejected() -> None:
    rng = random.Random(29)
    for _ in range(6):
        keys = rng.sample(range(600), 8)
        positions = {k * 256 + o for k in keys for o in rng.sample(range(256), rng.choice([1, 31, 32, 200]))}
        truncations_of(encode_mumbling(positions))


@settings(max_examples=25 if os.environ.get("CI") else 200, deadline=None)
@given(st.frozensets(st.integers(0, MAX_POSITIONS - 1), max_size=300))
def test_the_independent_readers_decoder_agrees(positions: frozenset[int]) -> None:
    # tests/support/v4_reader.py decodes Mumbling its own way (written from the spec, no icectl code).
    from support.v4_reader import mumbling_positions

    assert mumbling_positions(encode_mumbling(positions)) == set(positions)

"""Appendix D single values: binary vectors from the spec, bound promotion, display, JSON."""

from __future__ import annotations

import math
import struct
import uuid
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.schema import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    UNKNOWN,
    UUID,
    VARIANT,
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    ListType,
    MapType,
    NestedField,
    StructType,
)
from icectl.spec.values import (
    from_bytes,
    from_json_single_value,
    to_bytes,
    to_human,
    to_json_single_value,
)

# Appendix B's test values: 2017-11-16 is day 17486; 2017-11-16T22:31:08 UTC is 1510871468 s.
DAY_2017_11_16 = 17486
TS_2017_11_16_223108 = 1_510_871_468_000_000
SPEC_UUID = "f79c3e09-677c-4bbd-a479-3f349cb785e7"
SPEC_UUID_BYTES = bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7")

# (type, value, bytes written by hand from Appendix D's table)
VECTORS = [
    (BOOLEAN, False, b"\x00"),
    (BOOLEAN, True, b"\x01"),
    (INT, 34, b"\x22\x00\x00\x00"),
    (INT, -1, b"\xff\xff\xff\xff"),
    (LONG, 34, b"\x22\x00\x00\x00\x00\x00\x00\x00"),
    (LONG, -(2**63), b"\x00\x00\x00\x00\x00\x00\x00\x80"),
    (FLOAT, 1.0, b"\x00\x00\x80\x3f"),
    (DOUBLE, 1.0, b"\x00\x00\x00\x00\x00\x00\xf0\x3f"),
    (DOUBLE, -0.0, b"\x00\x00\x00\x00\x00\x00\x00\x80"),
    (DATE, DAY_2017_11_16, b"\x4e\x44\x00\x00"),  # 17486 = 0x444E
    (TIME, 81_068_000_000, (81_068_000_000).to_bytes(8, "little")),  # 22:31:08
    (TIMESTAMP, TS_2017_11_16_223108, bytes.fromhex("00c3262d215e0500")),
    (TIMESTAMPTZ, TS_2017_11_16_223108, bytes.fromhex("00c3262d215e0500")),
    (TIMESTAMP_NS, TS_2017_11_16_223108 * 1000, (TS_2017_11_16_223108 * 1000).to_bytes(8, "little")),
    (TIMESTAMPTZ_NS, 1, b"\x01" + b"\x00" * 7),
    (STRING, "iceberg", b"iceberg"),
    (STRING, "é", b"\xc3\xa9"),
    (UUID, uuid.UUID(SPEC_UUID), SPEC_UUID_BYTES),
    (FixedType(4), b"\x00\x01\x02\x03", b"\x00\x01\x02\x03"),
    (BINARY, b"\x00\x01\x02\xff", b"\x00\x01\x02\xff"),
    (DecimalType(9, 2), Decimal("14.20"), b"\x05\x8c"),  # unscaled 1420
    (DecimalType(9, 2), Decimal("-14.20"), b"\xfa\x74"),  # -1420, two's complement
    (DecimalType(9, 2), Decimal("1.27"), b"\x7f"),  # 127: one byte
    (DecimalType(9, 2), Decimal("1.28"), b"\x00\x80"),  # 128 needs a sign byte
    (DecimalType(9, 2), Decimal("-1.28"), b"\x80"),
    (DecimalType(9, 2), Decimal("-1.29"), b"\xff\x7f"),
    (DecimalType(9, 0), Decimal("0"), b"\x00"),
    (DecimalType(38, 10), Decimal("9999999999999999999999999999.9999999999"),
     (10**38 - 1).to_bytes(16, "big", signed=True)),
    (GeometryType(), (1.0, 2.0), struct.pack("<2d", 1.0, 2.0)),
    (GeographyType(), (1.0, 2.0, 3.0, 4.0), struct.pack("<4d", 1.0, 2.0, 3.0, 4.0)),
]


@pytest.mark.parametrize(("t", "value", "raw"), VECTORS, ids=lambda x: str(x)[:30])
def test_binary_vectors(t, value, raw):
    assert to_bytes(t, value) == raw
    decoded = from_bytes(t, raw)
    assert decoded == value
    assert type(decoded) is type(value)


def test_decimal_keeps_scale_and_precision_beyond_context():
    d = from_bytes(DecimalType(38, 2), (10**37 + 5).to_bytes(16, "big", signed=True))
    assert d.as_tuple().exponent == -2
    assert str(d) == "1" + "0" * 35 + ".05"


def test_decimal_rescales_exactly_and_refuses_lost_digits():
    assert to_bytes(DecimalType(9, 2), Decimal("14.2")) == b"\x05\x8c"
    assert to_bytes(DecimalType(9, 2), 3) == (300).to_bytes(2, "big")
    with pytest.raises(ValueError, match="digits after the point"):
        to_bytes(DecimalType(9, 2), Decimal("1.234"))


def test_boolean_nonzero_is_true():
    assert from_bytes(BOOLEAN, b"\x07") is True


@pytest.mark.parametrize(("t", "raw", "expected"), [
    (LONG, b"\x22\x00\x00\x00", 34),  # written as int, column promoted to long
    (LONG, b"\xfe\xff\xff\xff", -2),
    (DOUBLE, struct.pack("<f", 1.5), 1.5),  # written as float
    (TIMESTAMP, b"\x4e\x44\x00\x00", DAY_2017_11_16 * 86_400_000_000),  # written as date
    (TIMESTAMP_NS, b"\x4e\x44\x00\x00", DAY_2017_11_16 * 86_400_000_000_000),
])
def test_bounds_written_before_type_promotion(t, raw, expected):
    assert from_bytes(t, raw) == expected


@pytest.mark.parametrize(("t", "raw", "problem"), [
    (INT, b"\x01\x02\x03", "int value must be 4 bytes, got 3"),
    (LONG, b"\x01" * 5, "long value must be 8 bytes, got 5"),
    (FLOAT, b"\x00" * 8, "float value must be 4 bytes"),
    (TIMESTAMPTZ, b"\x00" * 4, "timestamptz value must be 8 bytes"),  # date -> tz promotion is invalid
    (UUID, b"\x00" * 15, "uuid value must be 16 bytes"),
    (BOOLEAN, b"", "boolean value must be 1 bytes"),
    (STRING, b"\xff\xfe", "not valid UTF-8"),
    (DecimalType(9, 2), b"", "decimal value has no bytes"),
    (GeometryType(), b"\x00" * 20, "geometry bound must be 16, 24 or 32 bytes, got 20"),
])
def test_malformed_values_name_the_problem(t, raw, problem):
    with pytest.raises(CorruptInputError, match=problem):
        from_bytes(t, raw)


def test_geometry_bound_with_only_m_keeps_nan_z():
    raw = struct.pack("<4d", 1.0, 2.0, math.nan, 7.0)
    x, y, z, m = from_bytes(GeometryType(), raw)
    assert (x, y, m) == (1.0, 2.0, 7.0) and math.isnan(z)
    assert to_human(GeometryType(), (x, y, z, m)) == {"x": 1.0, "y": 2.0, "z": None, "m": 7.0}


def test_variant_and_unknown_stay_raw_and_nested_types_are_refused():
    assert from_bytes(VARIANT, b"\x01\x02") == b"\x01\x02"
    assert from_bytes(UNKNOWN, b"\x01") == b"\x01"
    with pytest.raises(UnsupportedError, match="not defined for type struct"):
        from_bytes(StructType(()), b"")


def test_int_range_is_checked_on_write():
    with pytest.raises(ValueError, match="out of range"):
        to_bytes(INT, 2**31)
    with pytest.raises(ValueError, match="must be an int"):
        to_bytes(LONG, True)


@given(st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1), st.integers(0, 38))
def test_decimal_round_trip_uses_minimal_bytes(unscaled, scale):
    t = DecimalType(38, scale)
    raw = to_bytes(t, Decimal(f"{unscaled}E-{scale}"))
    assert int.from_bytes(raw, "big", signed=True) == unscaled
    # minimal: dropping the first byte would change the value or the sign
    if len(raw) > 1:
        assert int.from_bytes(raw[1:], "big", signed=True) != unscaled
    assert from_bytes(t, raw) == Decimal(f"{unscaled}E-{scale}")


@given(st.integers(-(2**63), 2**63 - 1))
def test_long_round_trip(v):
    assert from_bytes(LONG, to_bytes(LONG, v)) == v


# --------------------------------------------------------------------------- display


@pytest.mark.parametrize(("t", "value", "human"), [
    (DATE, DAY_2017_11_16, "2017-11-16"),
    (DATE, -1, "1969-12-31"),
    (TIME, 81_068_123_456, "22:31:08.123456"),
    (TIMESTAMP, TS_2017_11_16_223108, "2017-11-16T22:31:08.000000"),
    (TIMESTAMP, TS_2017_11_16_223108 + 1, "2017-11-16T22:31:08.000001"),
    (TIMESTAMPTZ, TS_2017_11_16_223108, "2017-11-16T22:31:08.000000+00:00"),
    (TIMESTAMP, -1, "1969-12-31T23:59:59.999999"),
    (TIMESTAMP_NS, TS_2017_11_16_223108 * 1000 + 123_456_789, "2017-11-16T22:31:08.123456789"),
    (TIMESTAMPTZ_NS, -1, "1969-12-31T23:59:59.999999999+00:00"),
    (DecimalType(9, 2), Decimal("14.20"), "14.20"),
    (DecimalType(38, 10), Decimal("1E-10"), "0.0000000001"),
    (BINARY, b"\x00\x01\x02\xff", "000102ff"),
    (FixedType(2), b"\xab\xcd", "abcd"),
    (UUID, uuid.UUID(SPEC_UUID), SPEC_UUID),
    (DOUBLE, math.inf, "Infinity"),
    (FLOAT, math.nan, "NaN"),
    (LONG, 5, 5),
    (STRING, "x", "x"),
    (DATE, 10**9, 10**9),  # beyond year 9999: shown raw rather than failing
])
def test_to_human(t, value, human):
    assert to_human(t, value) == human


# --------------------------------------------------------------------------- JSON single values

# The examples of Appendix D's JSON table.
JSON_EXAMPLES = [
    (BOOLEAN, True, True),
    (INT, 34, 34),
    (LONG, 34, 34),
    (FLOAT, 1.0, 1.0),
    (DOUBLE, 1.0, 1.0),
    (DecimalType(9, 2), "14.20", Decimal("14.20")),
    (DecimalType(38, -20), "2E+20", Decimal("2E+20")),
    (DATE, "2017-11-16", DAY_2017_11_16),
    (TIME, "22:31:08.123456", 81_068_123_456),
    (TIMESTAMP, "2017-11-16T22:31:08.123456", TS_2017_11_16_223108 + 123_456),
    (TIMESTAMPTZ, "2017-11-16T22:31:08.123456+00:00", TS_2017_11_16_223108 + 123_456),
    (TIMESTAMP_NS, "2017-11-16T22:31:08.123456789", TS_2017_11_16_223108 * 1000 + 123_456_789),
    (TIMESTAMPTZ_NS, "2017-11-16T22:31:08.123456789+00:00", TS_2017_11_16_223108 * 1000 + 123_456_789),
    (STRING, "iceberg", "iceberg"),
    (UUID, SPEC_UUID, uuid.UUID(SPEC_UUID)),
    (FixedType(4), "000102ff", b"\x00\x01\x02\xff"),
    (BINARY, "000102ff", b"\x00\x01\x02\xff"),
    (StructType((NestedField(1, "a", INT), NestedField(2, "b", STRING))), {"1": 1, "2": "bar"},
     {1: 1, 2: "bar"}),
    (ListType(3, INT), [1, 2, 3], [1, 2, 3]),
    (MapType(4, STRING, 5, INT), {"keys": ["a", "b"], "values": [1, 2]}, {"a": 1, "b": 2}),
]


@pytest.mark.parametrize(("t", "obj", "value"), JSON_EXAMPLES, ids=lambda x: str(x)[:30])
def test_json_single_values_from_the_spec(t, obj, value):
    assert from_json_single_value(t, obj) == value
    assert to_json_single_value(t, value) == obj


def test_json_parses_shorter_fractions_and_writes_full_precision():
    assert from_json_single_value(TIMESTAMP, "2017-11-16T22:31:08") == TS_2017_11_16_223108
    assert from_json_single_value(TIMESTAMP, "2017-11-16T22:31:08.1") == TS_2017_11_16_223108 + 100_000
    assert to_json_single_value(TIMESTAMP, TS_2017_11_16_223108) == "2017-11-16T22:31:08.000000"


def test_json_struct_default_may_be_empty():
    t = StructType((NestedField(1, "x", INT),))
    assert from_json_single_value(t, {}) == {}
    assert to_json_single_value(t, {}) == {}


@pytest.mark.parametrize(("t", "obj", "problem"), [
    (DecimalType(9, 2), "14.2", "scale must be 2"),
    (DecimalType(9, 2), 14.2, "expected a JSON string"),
    (TIMESTAMPTZ, "2017-11-16T22:31:08.123456", r"\+00:00"),
    (TIMESTAMPTZ, "2017-11-16T22:31:08.123456-08:00", r"\+00:00"),
    (TIMESTAMP, "2017-11-16T22:31:08.123456+00:00", "must not have a zone offset"),
    (TIMESTAMP, "2017-11-16T22:31:08.1234567", "at most 6 fractional digits"),
    (INT, True, "expected a JSON integer"),
    (INT, 2**31, "out of range"),
    (BOOLEAN, 1, "expected a JSON boolean"),
    (FixedType(4), "0001", "expected 8 hex digits"),
    (UUID, "f79c3e09677c4bbda4793f349cb785e7", "36-character"),
    (DATE, "2017-13-01", "month"),
    (MapType(4, STRING, 5, INT), {"keys": ["a"], "values": []}, "differ in length"),
])
def test_json_single_value_errors_name_the_problem(t, obj, problem):
    with pytest.raises(CorruptInputError, match=problem):
        from_json_single_value(t, obj)

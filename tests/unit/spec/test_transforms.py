"""Partition transforms against the spec's Appendix B vectors and its truncate/time rules."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import mmh3
import pytest

from icectl.errors import CorruptInputError
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
    UUID,
    VARIANT,
    DecimalType,
    FixedType,
    GeometryType,
)
from icectl.spec.transforms import (
    DAY,
    HOUR,
    IDENTITY,
    MONTH,
    VOID,
    YEAR,
    BucketTransform,
    TruncateTransform,
    UnknownTransform,
    human_value,
    murmur3_hash,
    parse_transform,
)

PST = dt.timezone(dt.timedelta(hours=-8))
TS = dt.datetime(2017, 11, 16, 22, 31, 8)
TS_MICROS = 1510871468000000  # 2017-11-16T22:31:08Z in microseconds
DAYS_2017_11_16 = 17486


# --- Appendix B: 32-bit hash requirements ----------------------------------------------------

@pytest.mark.parametrize(("value", "source_type", "expected"), [
    (34, INT, 2017239379),
    (34, LONG, 2017239379),
    (Decimal("14.20"), DecimalType(9, 2), -500754589),
    (dt.date(2017, 11, 16), DATE, -653330422),
    (DAYS_2017_11_16, DATE, -653330422),
    (dt.time(22, 31, 8), TIME, -662762989),
    (TS, TIMESTAMP, -2047944441),
    (TS_MICROS, TIMESTAMP, -2047944441),
    (TS.replace(microsecond=1), TIMESTAMP, -1207196810),
    (dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=PST), TIMESTAMPTZ, -2047944441),
    (dt.datetime(2017, 11, 16, 14, 31, 8, 1, tzinfo=PST), TIMESTAMPTZ, -1207196810),
    (TS_MICROS * 1000, TIMESTAMP_NS, -2047944441),
    (TS_MICROS * 1000 + 1001, TIMESTAMP_NS, -1207196810),  # ...08.000001001
    (TS_MICROS * 1000 + 1001, TIMESTAMPTZ_NS, -1207196810),
    ("iceberg", STRING, 1210000089),
    (uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), UUID, 1488055340),
    (bytes([0, 1, 2, 3]), FixedType(4), -188683207),
    (bytes([0, 1, 2, 3]), BINARY, -188683207),
    # not bucketable, but Appendix B still defines their hashes
    (True, BOOLEAN, 1392991556),
    (1.0, FLOAT, -142385009),
    (0.0, DOUBLE, 1669671676),
    (-0.0, DOUBLE, 1669671676),
])
def test_appendix_b_hash_vectors(value: object, source_type: object, expected: int) -> None:
    assert murmur3_hash(value, source_type) == expected  # type: ignore[arg-type]


def test_decimal_hash_uses_minimum_twos_complement_bytes() -> None:
    # 1.28 -> unscaled 128 needs a leading 0x00; -1.28 -> unscaled -128 fits in one byte 0x80
    assert murmur3_hash(Decimal("1.28")) == mmh3.hash(b"\x00\x80", 0, signed=True)
    assert murmur3_hash(Decimal("-1.28")) == mmh3.hash(b"\x80", 0, signed=True)
    assert murmur3_hash(Decimal("-1.29")) == mmh3.hash(b"\xff\x7f", 0, signed=True)
    assert murmur3_hash(Decimal("0.00")) == mmh3.hash(b"\x00", 0, signed=True)
    # the column scale decides the unscaled value, not how the Python Decimal was written
    assert murmur3_hash(Decimal("14.2"), DecimalType(9, 2)) == -500754589


def test_bucket_follows_spec_formula() -> None:
    # (hash & Integer.MAX_VALUE) % N, worked by hand from the Appendix B hashes
    assert BucketTransform(100).apply(34, INT) == 79  # 2017239379 % 100
    assert BucketTransform(16).apply("iceberg", STRING) == 9  # 1210000089 % 16
    assert BucketTransform(100).apply(bytes([0, 1, 2, 3]), BINARY) == 41  # 1958800441 % 100
    assert BucketTransform(100).apply(None, INT) is None
    # int and long bucket alike, as do timestamp and timestamp_ns of the same instant
    assert BucketTransform(7).apply(34, INT) == BucketTransform(7).apply(34, LONG)
    bucket = BucketTransform(7)
    assert bucket.apply(TS_MICROS, TIMESTAMP) == bucket.apply(TS_MICROS * 1000, TIMESTAMP_NS)


def test_bucket_refuses_float_double_and_boolean() -> None:
    bucket = BucketTransform(4)
    for t in (FLOAT, DOUBLE, BOOLEAN):
        assert not bucket.can_transform(t)
    with pytest.raises(ValueError):
        bucket.apply(1.0)
    with pytest.raises(ValueError):
        bucket.apply(1.0, DOUBLE)
    assert bucket.can_transform(DecimalType(9, 2)) and bucket.can_transform(TIMESTAMPTZ_NS)


# --- truncate --------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [(0, 0), (1, 0), (5, 0), (9, 0), (10, 10), (-1, -10),
                                                 (-5, -10), (-10, -10), (-11, -20)])
def test_truncate_integers_round_towards_negative_infinity(value: int, expected: int) -> None:
    assert TruncateTransform(10).apply(value, INT) == expected
    assert TruncateTransform(10).apply(value, LONG) == expected


@pytest.mark.parametrize(("value", "expected"), [("12.34", "12.30"), ("12.30", "12.30"), ("12.29", "12.20"),
                                                 ("0.05", "0.00"), ("-0.05", "-0.10")])
def test_truncate_decimal_on_unscaled_value(value: str, expected: str) -> None:
    result = TruncateTransform(10).apply(Decimal(value), DecimalType(9, 2))
    assert str(result) == expected  # also checks the scale is kept


def test_truncate_spec_examples_and_code_points() -> None:
    assert TruncateTransform(50).apply(Decimal("10.65"), DecimalType(9, 2)) == Decimal("10.50")
    assert TruncateTransform(3).apply("iceberg", STRING) == "ice"
    assert TruncateTransform(2).apply("😀😁😂", STRING) == "😀😁"  # code points, not UTF-16 units
    assert TruncateTransform(2).apply("éa", STRING) == "éa"  # not bytes either
    assert TruncateTransform(3).apply(b"\x01\x02\x03\x04\x05", BINARY) == b"\x01\x02\x03"
    assert TruncateTransform(3).apply(None, STRING) is None
    assert not TruncateTransform(3).can_transform(DATE)


# --- year / month / day / hour ----------------------------------------------------------------

def test_time_transforms_of_a_known_instant() -> None:
    assert YEAR.apply(TS_MICROS, TIMESTAMP) == 47
    assert MONTH.apply(TS_MICROS, TIMESTAMP) == 47 * 12 + 10
    assert DAY.apply(TS_MICROS, TIMESTAMP) == DAYS_2017_11_16
    assert HOUR.apply(TS_MICROS, TIMESTAMP) == DAYS_2017_11_16 * 24 + 22
    assert DAY.apply(TS_MICROS * 1000 + 999, TIMESTAMPTZ_NS) == DAYS_2017_11_16
    assert MONTH.apply(DAYS_2017_11_16, DATE) == 574
    assert DAY.apply(dt.date(2017, 11, 16)) == DAYS_2017_11_16


@pytest.mark.parametrize(("transform", "micros", "expected"), [
    (YEAR, -1, -1), (MONTH, -1, -1), (DAY, -1, -1), (HOUR, -1, -1),
    (YEAR, -365 * 86_400_000_000, -1),  # exactly 1969-01-01T00:00
    (MONTH, -365 * 86_400_000_000, -12),
    (YEAR, -365 * 86_400_000_000 - 1, -2),  # one microsecond into 1968
    (DAY, -86_400_000_000, -1),
    (DAY, -86_400_000_001, -2),
    (HOUR, -3_600_000_000, -1),
    (HOUR, -3_600_000_001, -2),
])
def test_time_transforms_floor_before_the_epoch(transform: object, micros: int, expected: int) -> None:
    assert transform.apply(micros, TIMESTAMP) == expected  # type: ignore[attr-defined]
    assert transform.apply(micros * 1000, TIMESTAMP_NS) == expected  # type: ignore[attr-defined]


def test_negative_nanos_and_dates() -> None:
    assert DAY.apply(-1, TIMESTAMP_NS) == -1
    assert HOUR.apply(-1, TIMESTAMPTZ_NS) == -1
    assert YEAR.apply(-1, DATE) == -1
    assert MONTH.apply(-1, DATE) == -1
    assert MONTH.apply(-31, DATE) == -1  # 1969-12-01
    assert MONTH.apply(-32, DATE) == -2  # 1969-11-30
    assert DAY.apply(-1, DATE) == -1


def test_time_transforms_need_to_know_what_an_int_is() -> None:
    with pytest.raises(ValueError):
        DAY.apply(5)
    assert not HOUR.can_transform(DATE)
    with pytest.raises(ValueError):
        HOUR.apply(1, DATE)


# --- result types, strings, parsing ------------------------------------------------------------

def test_result_types() -> None:
    dec = DecimalType(9, 2)
    assert IDENTITY.result_type(dec) == dec
    assert BucketTransform(8).result_type(STRING) == INT
    assert TruncateTransform(8).result_type(STRING) == STRING
    assert YEAR.result_type(TIMESTAMP) == INT
    assert MONTH.result_type(DATE) == INT
    assert DAY.result_type(TIMESTAMPTZ) == DATE  # Java's DayTransform result type
    assert HOUR.result_type(TIMESTAMP_NS) == INT
    assert VOID.result_type(LONG) == LONG
    assert UnknownTransform("zorder").result_type(LONG) == STRING  # as Java's UnknownTransform


def test_parse_transform_strings() -> None:
    for text in ("identity", "bucket[16]", "truncate[4]", "year", "month", "day", "hour", "void"):
        assert str(parse_transform(text)) == text
    assert parse_transform("bucket[16]") == BucketTransform(16)
    assert parse_transform("BUCKET[16]") == BucketTransform(16)  # Java ignores case
    assert parse_transform("Day") is DAY
    unknown = parse_transform("zorder[2]")
    assert isinstance(unknown, UnknownTransform) and str(unknown) == "zorder[2]"
    assert parse_transform("bucket[ 16]") == UnknownTransform("bucket[ 16]")
    with pytest.raises(CorruptInputError):
        parse_transform("bucket[0]")
    with pytest.raises(ValueError):
        unknown.apply(1)


def test_preserves_order_and_identity_support() -> None:
    assert IDENTITY.preserves_order and TruncateTransform(2).preserves_order and DAY.preserves_order
    assert not BucketTransform(2).preserves_order and not VOID.preserves_order
    assert not IDENTITY.can_transform(VARIANT)
    assert not IDENTITY.can_transform(GeometryType())
    assert IDENTITY.can_transform(TIMESTAMPTZ_NS)
    assert VOID.apply(42, LONG) is None


def test_human_strings_of_time_transforms() -> None:
    assert DAY.to_human_string(DAY.apply(dt.datetime(2024, 1, 31, 13, 5), TIMESTAMP)) == "2024-01-31"
    assert HOUR.to_human_string(HOUR.apply(dt.datetime(2024, 1, 31, 13, 5), TIMESTAMP)) == "2024-01-31-13"
    assert MONTH.to_human_string(MONTH.apply(dt.date(2024, 1, 31))) == "2024-01"
    assert YEAR.to_human_string(YEAR.apply(dt.date(2024, 1, 31))) == "2024"
    assert MONTH.to_human_string(-1) == "1969-12"
    assert HOUR.to_human_string(-1) == "1969-12-31-23"
    assert DAY.to_human_string(-1) == "1969-12-31"
    assert YEAR.to_human_string(None) == "null"
    assert BucketTransform(4).to_human_string(None) == "null"


def test_human_strings_of_values_as_java_prints_them() -> None:
    assert human_value(DAYS_2017_11_16, DATE) == "2017-11-16"
    assert human_value(TS_MICROS, TIMESTAMP) == "2017-11-16T22:31:08"
    assert human_value(TS_MICROS + 1, TIMESTAMP) == "2017-11-16T22:31:08.000001"
    assert human_value(TS_MICROS + 100_000, TIMESTAMPTZ) == "2017-11-16T22:31:08.1+00:00"
    assert human_value(TS_MICROS * 1000 + 1, TIMESTAMP_NS) == "2017-11-16T22:31:08.000000001"
    assert human_value(-1, TIMESTAMP) == "1969-12-31T23:59:59.999999"
    assert human_value(0, TIME) == "00:00"
    assert human_value(81_068_000_000, TIME) == "22:31:08"
    assert human_value(81_068_500_000, TIME) == "22:31:08.500"
    assert human_value(b"\x00\x01\x02\x03", BINARY) == "AAECAw=="
    assert human_value(uuid.UUID("F79C3E09-677C-4BBD-A479-3F349CB785E7"), UUID) == \
        "f79c3e09-677c-4bbd-a479-3f349cb785e7"
    assert human_value(True, BOOLEAN) == "true"
    assert human_value(Decimal("14.2"), DecimalType(9, 2)) == "14.20"
    assert human_value(1.0, DOUBLE) == "1.0"
    assert human_value(1e7, DOUBLE) == "1.0E7"
    assert human_value(1e-4, DOUBLE) == "1.0E-4"
    assert human_value(0.1, FLOAT) == "0.1"
    assert human_value(-34, LONG) == "-34"
    assert human_value(None, LONG) == "null"

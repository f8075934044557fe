"""Iceberg partition transforms (spec "Partition Transforms", Appendix B hashing).

A :class:`Transform` is unbound: it knows its parameters, not its source column. Methods that
must tell apart values of the same Python type (days vs. microseconds vs. nanoseconds, a
decimal's scale) take the source or result type as an argument.

Values use the spec's internal representation: ``int`` for int/long, days since the epoch for
date, microseconds for time/timestamp/timestamptz, nanoseconds for the ``*_ns`` types, ``str``,
``bytes``, ``decimal.Decimal``, ``uuid.UUID``, ``float``. ``datetime.date``/``datetime``/``time``
objects are accepted too and converted.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import struct
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import mmh3

from icectl.errors import CorruptInputError
from icectl.spec.schema import (
    BINARY,
    DATE,
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
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    PrimitiveType,
)

INTEGER_MAX_VALUE = 0x7FFFFFFF  # Java Integer.MAX_VALUE: bucket discards the hash's sign bit with it
MICROS_PER_SECOND = 1_000_000
MICROS_PER_HOUR = 3_600 * MICROS_PER_SECOND
MICROS_PER_DAY = 24 * MICROS_PER_HOUR
NANOS_PER_MICRO = 1_000

_NANO_TYPES = (TIMESTAMP_NS, TIMESTAMPTZ_NS)
_MICRO_TIMESTAMP_TYPES = (TIMESTAMP, TIMESTAMPTZ)
_TIMESTAMP_TYPES = _MICRO_TIMESTAMP_TYPES + _NANO_TYPES
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


# ---------------------------------------------------------------------------------------------
# Value conversion helpers


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def days_to_civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day ordinal; proleptic Gregorian, any range (Hinnant's algorithm)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def _to_internal(value: Any, source_type: IcebergType | None) -> Any:
    """Turn datetime objects into the spec's integer representation for ``source_type``."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        delta = aware - _EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds
        return micros * NANOS_PER_MICRO if source_type in _NANO_TYPES else micros
    if isinstance(value, dt.date):
        return value.toordinal() - dt.date(1970, 1, 1).toordinal()
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * MICROS_PER_SECOND + value.microsecond
    return value


def _unscaled(value: Decimal, source_type: IcebergType | None) -> tuple[int, int]:
    """(unscaled, scale) of a decimal, rescaled to the column's scale when it is known."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"cannot transform a non-finite decimal: {value}")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    if isinstance(source_type, DecimalType) and source_type.scale != scale:
        if source_type.scale < scale:
            raise ValueError(f"decimal {value} has more digits than scale {source_type.scale}")
        unscaled *= 10 ** (source_type.scale - scale)
        scale = source_type.scale
    return unscaled, scale


def _decimal_from_unscaled(unscaled: int, scale: int) -> Decimal:
    # Built from the tuple form: exact at any precision (the default context keeps only 28 digits).
    return Decimal((1 if unscaled < 0 else 0, tuple(int(c) for c in str(abs(unscaled))), -scale))


def _min_big_endian(n: int) -> bytes:
    """Java ``BigInteger.toByteArray``: minimum two's-complement big-endian bytes."""
    length = (n if n >= 0 else ~n).bit_length() // 8 + 1
    return n.to_bytes(length, "big", signed=True)


def _hash_long(v: int) -> int:
    return mmh3.hash(struct.pack("<q", v), 0, signed=True)


def murmur3_hash(value: Any, source_type: IcebergType | None = None) -> int:
    """The signed 32-bit Murmur3 hash of a value, per Appendix B (also for types bucket refuses)."""
    value = _to_internal(value, source_type)
    if isinstance(value, bool):  # before int: bool is an int in Python
        return _hash_long(1 if value else 0)
    if _is_int(value):
        if source_type in _NANO_TYPES:
            value //= NANOS_PER_MICRO  # nanos hash as micros so both precisions bucket alike
        return _hash_long(value)
    if isinstance(value, float):
        if math.isnan(value):
            bits = 0x7FF8000000000000  # canonical NaN
        else:
            bits = struct.unpack("<q", struct.pack("<d", 0.0 if value == 0.0 else value))[0]
        return _hash_long(bits)
    if isinstance(value, Decimal):
        return mmh3.hash(_min_big_endian(_unscaled(value, source_type)[0]), 0, signed=True)
    if isinstance(value, str):
        return mmh3.hash(value.encode("utf-8"), 0, signed=True)
    if isinstance(value, uuid.UUID):
        return mmh3.hash(value.bytes, 0, signed=True)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return mmh3.hash(bytes(value), 0, signed=True)
    raise ValueError(f"cannot hash a {type(value).__name__} value")


# ---------------------------------------------------------------------------------------------
# Human strings (Java TransformUtil / Transform.toHumanString), used in partition paths


def human_year(ordinal: int) -> str:
    return f"{1970 + ordinal:04d}"


def human_month(ordinal: int) -> str:
    return f"{1970 + ordinal // 12:04d}-{1 + ordinal % 12:02d}"


def human_day(ordinal: int) -> str:
    y, m, d = days_to_civil(ordinal)
    return f"{y:04d}-{m:02d}-{d:02d}"


def human_hour(ordinal: int) -> str:
    days, hour = divmod(ordinal, 24)
    return f"{human_day(days)}-{hour:02d}"


def _iso_date(days: int) -> str:
    # java.time ISO_LOCAL_DATE: years past 9999 get an explicit "+"
    y, m, d = days_to_civil(days)
    year = f"+{y}" if y > 9999 else f"{y:04d}"
    return f"{year}-{m:02d}-{d:02d}"


def _iso_timestamp(value: int, units_per_second: int) -> str:
    """java.time ISO_LOCAL_DATE_TIME: seconds always, fraction only as long as needed."""
    days, rem = divmod(value, 86_400 * units_per_second)
    secs, frac = divmod(rem, units_per_second)
    h, rest = divmod(secs, 3600)
    mi, s = divmod(rest, 60)
    text = f"{_iso_date(days)}T{h:02d}:{mi:02d}:{s:02d}"
    if frac:
        nanos = frac * (1_000_000_000 // units_per_second)
        text += "." + f"{nanos:09d}".rstrip("0")
    return text


def _local_time(micros: int) -> str:
    """java.time LocalTime.toString: HH:mm, then :ss and a 3/6/9-digit fraction only if non-zero."""
    secs, frac = divmod(micros, MICROS_PER_SECOND)
    h, rest = divmod(secs, 3600)
    mi, s = divmod(rest, 60)
    text = f"{h:02d}:{mi:02d}"
    if s or frac:
        text += f":{s:02d}"
    if frac:
        text += f".{frac // 1000:03d}" if frac % 1000 == 0 else f".{frac:06d}"
    return text


def _as_float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _java_double_string(value: float, single: bool = False) -> str:
    """Java Double.toString / Float.toString (shortest digits; sci notation outside [1e-3, 1e7))."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if single:  # the fewest digits that read back as the same 32-bit float
        value = _as_float32(value)
        shortest = next(t for t in (f"{value:.{p}e}" for p in range(9))
                        if _as_float32(float(t)) == value)
    else:
        shortest = repr(value)
    sign, digits, exponent = Decimal(shortest).normalize().as_tuple()
    assert isinstance(exponent, int)
    text_digits = "".join(map(str, digits))
    point = len(text_digits) + exponent  # position of the decimal point in the digit string
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{text_digits}"
        if point >= len(text_digits):
            return f"{prefix}{text_digits}{'0' * (point - len(text_digits))}.0"
        return f"{prefix}{text_digits[:point]}.{text_digits[point:]}"
    mantissa = text_digits[0] + "." + (text_digits[1:] or "0")
    return f"{prefix}{mantissa}E{point - 1}"


def human_value(value: Any, value_type: IcebergType | None = None) -> str:
    """Render a (transformed) value as Java's ``Transform.toHumanString(type, value)`` does."""
    if value is None:
        return "null"
    value = _to_internal(value, value_type)
    if value_type == DATE:
        return human_day(value)
    if value_type == TIME:
        return _local_time(value)
    if value_type == TIMESTAMP:
        return _iso_timestamp(value, MICROS_PER_SECOND)
    if value_type == TIMESTAMPTZ:
        return _iso_timestamp(value, MICROS_PER_SECOND) + "+00:00"
    if value_type == TIMESTAMP_NS:
        return _iso_timestamp(value, 1_000_000_000)
    if value_type == TIMESTAMPTZ_NS:
        return _iso_timestamp(value, 1_000_000_000) + "+00:00"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double_string(value, single=value_type == FLOAT)
    if isinstance(value, Decimal) and isinstance(value_type, DecimalType):
        unscaled, scale = _unscaled(value, value_type)
        return str(_decimal_from_unscaled(unscaled, scale))
    return str(value)  # int, str, Decimal (same notation as BigDecimal), UUID (lower case)


# ---------------------------------------------------------------------------------------------
# Transforms


class Transform:
    """An Iceberg transform. Subclasses are frozen dataclasses, so they compare by value."""

    def __str__(self) -> str:  # the spec's JSON string
        raise NotImplementedError

    def result_type(self, source_type: IcebergType) -> IcebergType:
        raise NotImplementedError

    def can_transform(self, source_type: IcebergType) -> bool:
        raise NotImplementedError

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        """Transform one source value; ``source_type`` resolves ints (days/micros/nanos) and scale."""
        raise NotImplementedError

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        """A transformed value as Iceberg renders it in partition paths; ``null`` for None."""
        return human_value(value, result_type)

    @property
    def preserves_order(self) -> bool:
        return False

    @property
    def is_void(self) -> bool:
        return False

    @property
    def is_unknown(self) -> bool:
        return False

    def _check(self, source_type: IcebergType | None) -> None:
        if source_type is not None and not self.can_transform(source_type):
            raise ValueError(f"{self} cannot transform a {source_type} value")


@dataclass(frozen=True)
class IdentityTransform(Transform):
    def __str__(self) -> str:
        return "identity"

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def can_transform(self, source_type: IcebergType) -> bool:
        # Spec: any primitive except geometry, geography and variant.
        if isinstance(source_type, (GeometryType, GeographyType)):
            return False
        return isinstance(source_type, PrimitiveType) and source_type.name != "variant"

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        self._check(source_type)
        return None if value is None else _to_internal(value, source_type)

    @property
    def preserves_order(self) -> bool:
        return True


@dataclass(frozen=True)
class BucketTransform(Transform):
    num_buckets: int

    def __post_init__(self) -> None:
        if self.num_buckets <= 0:
            raise ValueError(f"invalid number of buckets: {self.num_buckets} (must be > 0)")

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return INT

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type in (INT, LONG, DATE, TIME, STRING, UUID, BINARY, *_TIMESTAMP_TYPES) or \
            isinstance(source_type, (DecimalType, FixedType))

    def apply(self, value: Any, source_type: IcebergType | None = None) -> int | None:
        self._check(source_type)
        if value is None:
            return None
        if isinstance(value, (bool, float)):  # Appendix B: hashable, but not valid for bucketing
            raise ValueError(f"cannot bucket a {type(value).__name__} value")
        return (murmur3_hash(value, source_type) & INTEGER_MAX_VALUE) % self.num_buckets

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return human_value(value, INT)


@dataclass(frozen=True)
class TruncateTransform(Transform):
    width: int

    def __post_init__(self) -> None:
        if self.width <= 0:
            raise ValueError(f"invalid truncate width: {self.width} (must be > 0)")

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type in (INT, LONG, STRING, BINARY) or isinstance(source_type, DecimalType)

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        self._check(source_type)
        if value is None:
            return None
        if _is_int(value):
            return value - (((value % self.width) + self.width) % self.width)  # spec's formula
        if isinstance(value, str):
            return value[: self.width]  # Python indexes str by code point, as the spec requires
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value[: self.width])
        if isinstance(value, Decimal):
            unscaled, scale = _unscaled(value, source_type)
            return _decimal_from_unscaled(unscaled - unscaled % self.width, scale)
        raise ValueError(f"cannot truncate a {type(value).__name__} value")

    @property
    def preserves_order(self) -> bool:
        return True


@dataclass(frozen=True)
class _TimeTransform(Transform):
    """year/month/day/hour: floor semantics, so instants before 1970 map to negative ordinals."""

    name: ClassVar[str] = ""

    def __str__(self) -> str:
        return self.name

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return INT

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type == DATE or source_type in _TIMESTAMP_TYPES

    def apply(self, value: Any, source_type: IcebergType | None = None) -> int | None:
        self._check(source_type)
        if value is None:
            return None
        if source_type is None:
            if isinstance(value, dt.datetime):
                source_type = TIMESTAMP
            elif isinstance(value, dt.date):
                source_type = DATE
            else:
                raise ValueError(f"{self} needs the source type to read an int value")
        value = _to_internal(value, source_type)
        if source_type == DATE:
            return self._from_days(value)
        micros = value // NANOS_PER_MICRO if source_type in _NANO_TYPES else value
        return self._from_micros(micros)

    def _from_days(self, days: int) -> int:
        raise NotImplementedError

    def _from_micros(self, micros: int) -> int:
        return self._from_days(micros // MICROS_PER_DAY)

    @property
    def preserves_order(self) -> bool:
        return True


@dataclass(frozen=True)
class YearTransform(_TimeTransform):
    name: ClassVar[str] = "year"

    def _from_days(self, days: int) -> int:
        return days_to_civil(days)[0] - 1970

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return "null" if value is None else human_year(value)


@dataclass(frozen=True)
class MonthTransform(_TimeTransform):
    name: ClassVar[str] = "month"

    def _from_days(self, days: int) -> int:
        y, m, _ = days_to_civil(days)
        return (y - 1970) * 12 + m - 1

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return "null" if value is None else human_month(value)


@dataclass(frozen=True)
class DayTransform(_TimeTransform):
    name: ClassVar[str] = "day"

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return DATE  # Java's result type; the spec table says int, and both store days

    def _from_days(self, days: int) -> int:
        return days

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return "null" if value is None else human_day(_to_internal(value, DATE))  # int or date


@dataclass(frozen=True)
class HourTransform(_TimeTransform):
    name: ClassVar[str] = "hour"

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type in _TIMESTAMP_TYPES

    def _from_days(self, days: int) -> int:
        return days * 24

    def _from_micros(self, micros: int) -> int:
        return micros // MICROS_PER_HOUR

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return "null" if value is None else human_hour(value)


@dataclass(frozen=True)
class VoidTransform(Transform):
    def __str__(self) -> str:
        return "void"

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def can_transform(self, source_type: IcebergType) -> bool:
        return True

    def apply(self, value: Any, source_type: IcebergType | None = None) -> None:
        return None

    @property
    def is_void(self) -> bool:
        return True


@dataclass(frozen=True)
class UnknownTransform(Transform):
    """A transform this version does not know; kept verbatim (v3 readers must tolerate them)."""

    text: str

    def __str__(self) -> str:
        return self.text

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return STRING  # as Java's UnknownTransform: the real type cannot be known

    def can_transform(self, source_type: IcebergType) -> bool:
        return True  # assumed, as Java does; writers must not use it anyway

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        raise ValueError(f"cannot apply unknown transform {self.text!r}")

    @property
    def is_unknown(self) -> bool:
        return True


IDENTITY = IdentityTransform()
YEAR = YearTransform()
MONTH = MonthTransform()
DAY = DayTransform()
HOUR = HourTransform()
VOID = VoidTransform()

_BY_NAME: dict[str, Transform] = {"identity": IDENTITY, "year": YEAR, "month": MONTH, "day": DAY,
                                  "hour": HOUR, "void": VOID}
_HAS_WIDTH = re.compile(r"(\w+)\[(\d+)\]", re.ASCII)  # Java's HAS_WIDTH pattern


def parse_transform(text: str) -> Transform:
    """Parse a transform string as Java's ``Transforms.fromString`` does (case-insensitive names).

    Anything unrecognised becomes an :class:`UnknownTransform` that keeps the original text.
    """
    if not isinstance(text, str):
        raise CorruptInputError(f"a transform must be a string, got {text!r}")
    if m := _HAS_WIDTH.fullmatch(text):
        name, width = m.group(1).lower(), int(m.group(2))
        try:
            if name == "bucket":
                return BucketTransform(width)
            if name == "truncate":
                return TruncateTransform(width)
        except ValueError as e:
            raise CorruptInputError(f"invalid transform {text!r}: {e}") from None
    return _BY_NAME.get(text.lower(), None) or UnknownTransform(text)


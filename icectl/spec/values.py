"""Single values of Iceberg primitive types (spec Appendix D, "Bound serialization", JSON single values).

Python representation used across icectl (the same as the Avro manifest readers produce):

| Iceberg type                  | Python value                                  |
|-------------------------------|-----------------------------------------------|
| boolean                       | ``bool``                                      |
| int, long                     | ``int``                                       |
| float, double                 | ``float``                                     |
| date                          | ``int`` days from 1970-01-01                  |
| time                          | ``int`` microseconds from midnight            |
| timestamp, timestamptz        | ``int`` microseconds from the epoch           |
| timestamp_ns, timestamptz_ns  | ``int`` nanoseconds from the epoch            |
| string                        | ``str``                                       |
| uuid                          | ``uuid.UUID``                                 |
| fixed(L), binary              | ``bytes``                                     |
| decimal(P, S)                 | ``decimal.Decimal`` with exponent ``-S``      |
| geometry, geography (bounds)  | ``tuple[float, ...]`` point x, y[, z[, m]]    |
| variant, unknown              | raw ``bytes`` (no single-value form defined)  |

Keeping temporal values as integers makes them exact (no time zone or datetime range issues);
:func:`to_human` renders them for display.
"""

from __future__ import annotations

import math
import re
import struct
import uuid
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from icectl.errors import CorruptInputError, IcectlError, UnsupportedError
from icectl.spec.schema import (
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    PrimitiveType,
    StructType,
)

_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)
_MICROS_PER_DAY = 86_400_000_000
_NANOS_PER_DAY = 86_400_000_000_000

_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")

_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)


def _name(t: IcebergType) -> str:
    return t.name if isinstance(t, PrimitiveType) else str(t)


# --------------------------------------------------------------------------- binary


def from_bytes(iceberg_type: IcebergType, data: bytes) -> Any:
    """Decode a binary single value or a lower/upper bound (Appendix D, "Bound serialization").

    Bounds are not rewritten on type promotion, so the spec's length table is applied: a 4-byte
    ``long`` bound was written as ``int``, a 4-byte ``double`` as ``float``, a 4-byte
    ``timestamp``/``timestamp_ns`` as ``date`` (converted to micros/nanos at midnight).
    """
    name = _name(iceberg_type)
    n = len(data)
    try:
        if name == "boolean":
            _expect_len(name, n, 1)
            return data[0] != 0
        if name in ("int", "date"):
            _expect_len(name, n, 4)
            return _INT.unpack(data)[0]
        if name == "long":
            if n == 4:  # written as int before promotion to long
                return _INT.unpack(data)[0]
            _expect_len(name, n, 8)
            return _LONG.unpack(data)[0]
        if name == "float":
            _expect_len(name, n, 4)
            return _FLOAT.unpack(data)[0]
        if name == "double":
            if n == 4:  # written as float before promotion to double
                return _FLOAT.unpack(data)[0]
            _expect_len(name, n, 8)
            return _DOUBLE.unpack(data)[0]
        if name in ("time", "timestamptz", "timestamptz_ns"):
            _expect_len(name, n, 8)
            return _LONG.unpack(data)[0]
        if name in ("timestamp", "timestamp_ns"):
            if n == 4:  # written as date before the v3 promotion date -> timestamp[_ns]
                days = _INT.unpack(data)[0]
                return days * (_MICROS_PER_DAY if name == "timestamp" else _NANOS_PER_DAY)
            _expect_len(name, n, 8)
            return _LONG.unpack(data)[0]
        if name == "string":
            return bytes(data).decode("utf-8")
        if name == "uuid":
            _expect_len(name, n, 16)
            return uuid.UUID(bytes=bytes(data))
        if name in ("fixed", "binary"):
            # No length check for fixed: writers may truncate binary bounds.
            return bytes(data)
        if isinstance(iceberg_type, DecimalType):
            if n == 0:
                raise CorruptInputError("decimal value has no bytes")
            return decimal_from_unscaled(int.from_bytes(data, "big", signed=True), iceberg_type.scale)
        if isinstance(iceberg_type, (GeometryType, GeographyType)):
            return _point_from_bytes(name, data)
        if name in ("variant", "unknown"):
            return bytes(data)
    except UnicodeDecodeError as e:
        raise CorruptInputError(f"string value is not valid UTF-8: {e.reason}") from None
    raise UnsupportedError(f"single-value serialization is not defined for type {iceberg_type}")


def from_bytes_or_none(iceberg_type: IcebergType, data: bytes | None) -> Any:
    """:func:`from_bytes`, or None when there is no value or it does not decode as ``iceberg_type``
    (a bound or summary to judge by, not a value to report as broken)."""
    if data is None:
        return None
    try:
        return from_bytes(iceberg_type, data)
    except (IcectlError, ValueError):
        return None


def to_bytes(iceberg_type: IcebergType, value: Any) -> bytes:
    """Encode a value as its binary single value (geometry/geography: as a bound point)."""
    name = _name(iceberg_type)
    if name == "boolean":
        return b"\x01" if value else b"\x00"
    if name in ("int", "date"):
        return _INT.pack(_checked_int(name, value, _INT_RANGE))
    if name in ("long", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"):
        return _LONG.pack(_checked_int(name, value, _LONG_RANGE))
    if name == "float":
        return _FLOAT.pack(float(value))
    if name == "double":
        return _DOUBLE.pack(float(value))
    if name == "string":
        return str(value).encode("utf-8")
    if name == "uuid":
        if isinstance(value, (bytes, bytearray)) and len(value) == 16:
            return bytes(value)
        return (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes
    if name in ("fixed", "binary"):
        return bytes(value)
    if isinstance(iceberg_type, DecimalType):
        unscaled = decimal_unscaled(value, iceberg_type.scale)
        return unscaled.to_bytes(_min_signed_bytes(unscaled), "big", signed=True)
    if isinstance(iceberg_type, (GeometryType, GeographyType)):
        coords = tuple(float(c) for c in value)
        if not 2 <= len(coords) <= 4:
            raise ValueError(f"a {name} bound point needs 2 to 4 coordinates, got {len(coords)}")
        return struct.pack(f"<{len(coords)}d", *coords)
    if name in ("variant", "unknown"):
        return bytes(value)
    raise UnsupportedError(f"single-value serialization is not defined for type {iceberg_type}")


def sort_key(t: IcebergType) -> Callable[[Any], Any]:
    """A key function ordering values of ``t`` as Java's ``Comparators.forType`` does."""
    name = t.name if isinstance(t, PrimitiveType) else ""
    if name in ("float", "double"):
        return lambda v: (v, math.copysign(1.0, v))  # Float.compare: -0.0 < 0.0
    if name == "uuid":
        def signed_halves(v: Any) -> tuple[int, int]:  # java.util.UUID.compareTo: signed longs
            n = (v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v))).int
            hi, lo = n >> 64, n & (2**64 - 1)
            return hi - (hi >> 63 << 64), lo - (lo >> 63 << 64)
        return signed_halves
    return lambda v: v  # str: code points; bytes: unsigned lexicographic; numbers; Decimal


def _expect_len(name: str, actual: int, expected: int) -> None:
    if actual != expected:
        raise CorruptInputError(f"{name} value must be {expected} bytes, got {actual}")


def _checked_int(name: str, value: Any, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} value must be an int, got {type(value).__name__}")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{name} value {value} is out of range")
    return value


def _point_from_bytes(name: str, data: bytes) -> tuple[float, ...]:
    # x:y, x:y:z, or x:y:z:m (z is NaN when only m is set), 8-byte little-endian doubles.
    if len(data) not in (16, 24, 32):
        raise CorruptInputError(f"{name} bound must be 16, 24 or 32 bytes, got {len(data)}")
    return struct.unpack(f"<{len(data) // 8}d", data)


def _min_signed_bytes(n: int) -> int:
    # Minimal two's-complement width, as Java's BigInteger.toByteArray (always at least 1 byte).
    return (n if n >= 0 else ~n).bit_length() // 8 + 1


def decimal_from_unscaled(unscaled: int, scale: int) -> Decimal:
    """The decimal ``unscaled * 10**-scale``, exactly."""
    # Built from the digit tuple so no decimal context (28 digits by default) can round it.
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -scale))


def decimal_unscaled(value: Any, scale: int) -> int:
    """The unscaled integer of a decimal at ``scale``; refuses values that would lose digits."""
    d = value if isinstance(value, Decimal) else Decimal(str(value))
    if not d.is_finite():
        raise ValueError(f"decimal value must be finite, got {d}")
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        unscaled *= 10**shift
    else:
        unscaled, rest = divmod(unscaled, 10**-shift)
        if rest:
            raise ValueError(f"decimal value {d} has more than {scale} digits after the point")
    return -unscaled if sign else unscaled


# --------------------------------------------------------------------------- display


def to_human(iceberg_type: IcebergType, value: Any) -> Any:
    """A JSON-able rendering of a decoded value for display (ISO dates, hex bytes, ...)."""
    if value is None:
        return None
    name = _name(iceberg_type)
    if name in ("float", "double"):
        f = float(value)
        if math.isnan(f) or math.isinf(f):  # not valid JSON numbers
            return "NaN" if math.isnan(f) else ("Infinity" if f > 0 else "-Infinity")
        return f
    if name in ("boolean", "int", "long", "string"):
        return value
    if name == "date":
        return _days_to_iso(value) if _date_in_range(value) else value
    if name == "time":
        return _micros_to_iso_time(value)
    if name in ("timestamp", "timestamptz"):
        return _safe(_micros_to_iso, value, name == "timestamptz")
    if name in ("timestamp_ns", "timestamptz_ns"):
        return _safe(_nanos_to_iso, value, name == "timestamptz_ns")
    if name == "uuid":
        return str(value)
    if isinstance(iceberg_type, DecimalType):
        return _decimal_to_str(value)
    if isinstance(iceberg_type, (GeometryType, GeographyType)) and isinstance(value, tuple):
        keys = ("x", "y", "z", "m")
        return {k: (None if math.isnan(c) else c) for k, c in zip(keys, value, strict=False)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value if isinstance(value, (str, int, float, bool)) else str(value)


def _safe(fn: Any, value: int, tz: bool) -> Any:
    # Values outside Python's datetime range (years 1-9999) are shown as the raw integer.
    try:
        return fn(value, tz)
    except OverflowError:
        return value


def _date_in_range(days: int) -> bool:
    return date.min.toordinal() <= _EPOCH_DATE.toordinal() + days <= date.max.toordinal()


def _days_to_iso(days: int) -> str:
    return (_EPOCH_DATE + timedelta(days=days)).isoformat()


def _micros_to_iso_time(micros: int) -> str:
    seconds, frac = divmod(micros, 1_000_000)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours:02d}:{minute:02d}:{sec:02d}.{frac:06d}"


def _micros_to_iso(micros: int, tz: bool) -> str:
    text = (_EPOCH + timedelta(microseconds=micros)).isoformat(timespec="microseconds")
    return text + "+00:00" if tz else text


def _nanos_to_iso(nanos: int, tz: bool) -> str:
    seconds, frac = divmod(nanos, 1_000_000_000)
    text = (_EPOCH + timedelta(seconds=seconds)).isoformat(timespec="seconds") + f".{frac:09d}"
    return text + "+00:00" if tz else text


def _decimal_to_str(value: Decimal) -> str:
    # Plain notation for a non-negative scale, scientific for a negative one (JSON single value).
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent <= 0:
        return format(value, "f")
    return str(value)


# --------------------------------------------------------------------------- JSON single values

_TIME = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")
_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(\+00:00)?$")


def from_json_single_value(iceberg_type: IcebergType, obj: Any) -> Any:
    """Parse a JSON single value (Appendix D), e.g. a v3 ``initial-default``.

    Structs become ``dict[field_id, value]`` (absent fields omitted), lists ``list``, maps ``dict``.
    Raises CorruptInputError naming the type and value when the JSON does not fit the type.
    """
    if obj is None:
        return None
    try:
        return _from_json(iceberg_type, obj)
    except (ValueError, TypeError, InvalidOperation, OverflowError) as e:
        raise CorruptInputError(f"cannot parse {obj!r} as a {iceberg_type} value: {e}") from None


def _from_json(t: IcebergType, obj: Any) -> Any:
    if obj is None:
        return None
    if isinstance(t, StructType):
        _require(isinstance(obj, dict), "expected a JSON object keyed by field id")
        return {f.field_id: _from_json(f.field_type, obj[str(f.field_id)])
                for f in t.fields if str(f.field_id) in obj}
    if isinstance(t, ListType):
        _require(isinstance(obj, list), "expected a JSON array")
        return [_from_json(t.element_type, e) for e in obj]
    if isinstance(t, MapType):
        _require(isinstance(obj, dict) and isinstance(obj.get("keys"), list)
                 and isinstance(obj.get("values"), list), "expected {\"keys\": [...], \"values\": [...]}")
        _require(len(obj["keys"]) == len(obj["values"]), "keys and values differ in length")
        return {_from_json(t.key_type, k): _from_json(t.value_type, v)
                for k, v in zip(obj["keys"], obj["values"], strict=True)}
    name = _name(t)
    if name == "boolean":
        _require(isinstance(obj, bool), "expected a JSON boolean")
        return obj
    if name in ("int", "long"):
        _require(isinstance(obj, int) and not isinstance(obj, bool), "expected a JSON integer")
        return _checked_int(name, obj, _INT_RANGE if name == "int" else _LONG_RANGE)
    if name in ("float", "double"):
        _require(isinstance(obj, (int, float)) and not isinstance(obj, bool), "expected a JSON number")
        return float(obj)
    _require(isinstance(obj, str), "expected a JSON string")
    if isinstance(t, DecimalType):
        d = Decimal(obj)
        _require(d.as_tuple().exponent == -t.scale, f"the scale must be {t.scale}")
        return d
    if name == "date":
        return (date.fromisoformat(obj) - _EPOCH_DATE).days
    if name == "time":
        return _parse_time(obj, 6)
    if name in ("timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"):
        return _parse_timestamp(obj, name)
    if name == "string":
        return obj
    if name == "uuid":
        _require(len(obj) == 36, "expected a 36-character UUID string")
        return uuid.UUID(obj)
    if isinstance(t, FixedType):
        _require(len(obj) == 2 * t.length, f"expected {2 * t.length} hex digits")
        return bytes.fromhex(obj)
    if name == "binary":
        return bytes.fromhex(obj)
    if isinstance(t, (GeometryType, GeographyType)):
        return obj  # WKT text, kept as is (defaults for these types must be null anyway)
    raise UnsupportedError(f"JSON single values are not defined for type {t}")


def _require(ok: bool, problem: str) -> None:
    if not ok:
        raise ValueError(problem)


def _fraction(text: str | None, digits: int) -> int:
    if not text:
        return 0
    _require(len(text) <= digits, f"at most {digits} fractional digits allowed")
    return int(text.ljust(digits, "0"))


def _parse_time(text: str, digits: int) -> int:
    m = _TIME.match(text)
    _require(m is not None, "expected HH:MM[:SS[.ffffff]]")
    assert m is not None
    h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    _require(h < 24 and mi < 60 and s < 60, "time of day out of range")
    return ((h * 60 + mi) * 60 + s) * 10**digits + _fraction(m.group(4), digits)


def _parse_timestamp(text: str, name: str) -> int:
    tz = name.startswith("timestamptz")
    m = _TIMESTAMP.match(text)
    _require(m is not None, "expected an ISO-8601 timestamp" + (" ending in +00:00" if tz else ""))
    assert m is not None
    _require(bool(m.group(3)) == tz,
             "the zone offset must be +00:00" if tz else "a timestamp must not have a zone offset")
    digits = 9 if name.endswith("_ns") else 6
    days = (date.fromisoformat(m.group(1)) - _EPOCH_DATE).days
    return days * 86_400 * 10**digits + _parse_time(m.group(2), digits)


def to_json_single_value(iceberg_type: IcebergType, value: Any) -> Any:
    """Serialize a value as its JSON single value (Appendix D); the inverse of the parser."""
    if value is None:
        return None
    t = iceberg_type
    if isinstance(t, StructType):
        return {str(f.field_id): to_json_single_value(f.field_type, value[f.field_id])
                for f in t.fields if value.get(f.field_id) is not None}
    if isinstance(t, ListType):
        return [to_json_single_value(t.element_type, e) for e in value]
    if isinstance(t, MapType):
        return {"keys": [to_json_single_value(t.key_type, k) for k in value],
                "values": [to_json_single_value(t.value_type, v) for v in value.values()]}
    name = _name(t)
    if name == "boolean":
        return bool(value)
    if name in ("int", "long"):
        return _checked_int(name, value, _INT_RANGE if name == "int" else _LONG_RANGE)
    if name in ("float", "double"):
        return float(value)
    if isinstance(t, DecimalType):
        return _decimal_to_str(decimal_from_unscaled(decimal_unscaled(value, t.scale), t.scale))
    if name == "date":
        return _days_to_iso(value)
    if name == "time":
        return _micros_to_iso_time(value)
    if name in ("timestamp", "timestamptz"):
        return _micros_to_iso(value, name == "timestamptz")
    if name in ("timestamp_ns", "timestamptz_ns"):
        return _nanos_to_iso(value, name == "timestamptz_ns")
    if name == "string":
        return str(value)
    if name == "uuid":
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    if name in ("fixed", "binary"):
        return bytes(value).hex()
    if isinstance(t, (GeometryType, GeographyType)):
        return str(value)
    raise UnsupportedError(f"JSON single values are not defined for type {t}")

"""Durations and points in time as the command line writes them, and retention as people read it.

One parser for every option that takes a duration (``--older-than``, a ref's ``--max-ref-age``,
``--max-snapshot-age``) and one for points in time (``--to-timestamp``), so ``7d`` means the same
everywhere; :func:`human_duration` is how a retention in milliseconds (``max-ref-age-ms``) is shown.
"""

from __future__ import annotations

import datetime
import re

from icectl.errors import UsageError

MAX_LONG = (1 << 63) - 1  # Java's Long.MAX_VALUE: "forever" in history.expire.max-ref-age-ms

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_LONG_UNITS = {"millisecond": "ms", "milliseconds": "ms", "sec": "s", "second": "s", "seconds": "s",
               "min": "m", "minute": "m", "minutes": "m", "hour": "h", "hours": "h", "day": "d", "days": "d",
               "week": "w", "weeks": "w"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]+)")


def duration_ms(text: str) -> int | None:
    """``7d``, ``12h``, ``30m``, ``90s``, ``500ms``, ``2w`` (also ``7 days``, ``1h30m``) in
    milliseconds; None when ``text`` is not a duration."""
    t = text.strip().lower()
    if not t:
        return None
    total = 0.0
    pos = 0
    for m in _DURATION.finditer(t):
        if t[pos:m.start()].strip():
            return None
        unit = _LONG_UNITS.get(m.group(2), m.group(2))
        if unit not in _UNITS:
            return None
        total += float(m.group(1)) * _UNITS[unit]
        pos = m.end()
    if pos == 0 or t[pos:].strip():
        return None
    return int(total)


def parse_duration_ms(text: str, option: str) -> int:
    """A duration for ``option``; a usage error (exit 2) naming the option when it is not one."""
    ms = duration_ms(text)
    if ms is None:
        raise UsageError(f"{option} {text!r} is not a duration (7d, 12h, 30m, 90s, 2w)")
    return ms


def parse_point_in_time_ms(text: str, now_ms: int, option: str) -> int:
    """A point in time for ``option``: a duration back from ``now_ms`` (``7d``), an ISO timestamp
    (UTC when no zone is given) or epoch milliseconds."""
    t = text.strip()
    ms = duration_ms(t)
    if ms is not None:
        return now_ms - ms
    digits = t.lstrip("-")
    if digits.isdigit() and len(digits) == 10:  # 1700000000: epoch seconds, read as ms it would be 1970
        raise UsageError(f"{option} {text!r} looks like epoch seconds; give epoch milliseconds (13 digits), "
                         "a timestamp (2024-05-01T00:00:00Z) or a duration (7d)")
    if digits.isdigit() and digits.isascii() and len(digits) != 8:  # 8 digits: a date, 20240501
        # Epoch milliseconds. Fewer than 10 digits is a time before any Iceberg table (0 is
        # 1970-01-01) read as seconds or as ms alike: nothing is older (rollback: exit 3).
        if not -MAX_LONG - 1 <= int(t) <= MAX_LONG:
            raise UsageError(f"{option} {text!r} is beyond the signed 64-bit range of epoch milliseconds")
        return int(t)
    try:
        dt = datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {text!r} is neither a duration (7d, 12h, 30m) nor a timestamp "
                         "(2024-05-01T00:00:00Z) nor epoch milliseconds") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)


def human_duration(ms: int | None) -> str:
    """``432000000`` -> ``5d``, ``129600000`` -> ``1d 12h``; Long.MAX_VALUE -> ``forever``;
    None -> ``-``. At most the two largest units, so a column stays short."""
    if ms is None:
        return "-"
    if ms >= MAX_LONG:
        return "forever"
    if ms < 1000:
        return f"{ms}ms"
    parts = []
    rest = ms
    for unit, size in (("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if unit == "w" and rest % size:  # weeks only when exact: 10d reads better than 1w 3d
            continue
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n}{unit}")
    return " ".join(parts[:2]) if parts else f"{ms}ms"


__all__ = ["MAX_LONG", "duration_ms", "human_duration", "parse_duration_ms", "parse_point_in_time_ms"]

"""Numbers as people read them: byte sizes, counts, durations, ratios, times (the ground floor: any layer
may use it). Each takes what a JSON document holds (a number, ``None``, or something else) and returns
"–" for what is missing or not a number, so a document from another icectl version still reads."""

from __future__ import annotations

import datetime as dt
from typing import Any

from icectl.spec.durations import human_duration

MISSING = "–"
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def number(value: Any) -> float | None:
    """A JSON number as a float; None for null, booleans and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def fmt_count(value: Any) -> str:
    n = number(value)
    if n is None:
        return MISSING
    return f"{int(n):,}" if n == int(n) else f"{n:,.2f}"


def fmt_bytes(value: Any) -> str:
    """``536870912`` -> ``512 MiB``; two significant decimals below 10 of a unit."""
    n = number(value)
    if n is None:
        return MISSING
    size, unit = abs(n), 0
    while size >= 1024 and unit < len(_BYTE_UNITS) - 1:
        size /= 1024
        unit += 1
    sign = "-" if n < 0 else ""
    if unit == 0:
        return f"{sign}{int(size)} B"
    text = f"{size:.1f}" if size < 10 else f"{size:.0f}"
    return f"{sign}{text.removesuffix('.0')} {_BYTE_UNITS[unit]}"


def fmt_duration(value: Any) -> str:
    """Milliseconds as every view shows a duration (:func:`icectl.spec.durations.human_duration`:
    ``432000000`` -> ``5d``, ``5400000`` -> ``1h 30m``)."""
    n = number(value)
    if n is None:
        return MISSING
    return ("-" if n < 0 else "") + human_duration(int(abs(n)))


def fmt_ratio(value: Any) -> str:
    """A ratio as a percentage with two significant digits below 10 %: ``0.002`` -> ``0.2%``."""
    n = number(value)
    if n is None:
        return MISSING
    pct = n * 100
    if pct == 0 or abs(pct) >= 10:  # one decimal: 99.8% of small files is not "100%"
        return f"{pct:.1f}".removesuffix(".0") + "%"
    return f"{pct:.2g}%" if abs(pct) >= 0.01 else "<0.01%"


def fmt_time(value: Any) -> str:
    """Milliseconds since the epoch as a UTC minute: ``2024-01-02 13:45``."""
    n = number(value)
    if n is None:
        return MISSING
    try:
        return dt.datetime.fromtimestamp(n / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return MISSING


__all__ = ["MISSING", "fmt_bytes", "fmt_count", "fmt_duration", "fmt_ratio", "fmt_time", "number"]

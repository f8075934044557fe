"""Values as a person reads them on a terminal: sizes (1.2 MiB), durations (5d), short timestamps,
paths relative to the table location, enum names. Never used for JSON, CSV or piped output."""

from __future__ import annotations

from typing import Any

from icectl.humanize import fmt_bytes
from icectl.results import Column
from icectl.spec.durations import human_duration


def relative_path(path: str, location: str | None) -> str:
    """``path`` below the table location without it (``data/x.parquet``); other paths whole. A
    ``file:`` prefix on either side is no difference (Spark writes ``file:/...`` into local tables)."""
    if location:
        base = location.rstrip("/") + "/"
        for prefix in (base, base.removeprefix("file:"), "file:" + base):
            if path.startswith(prefix):
                return path[len(prefix):]
    return path


def short_timestamp(text: str) -> str:
    """``2026-11-25T00:18:13.667+00:00`` -> ``2026-11-25 00:18:13`` (UTC, as the views write them)."""
    if len(text) >= 19 and text[10] == "T" and text.endswith("+00:00"):
        return text[:10] + " " + text[11:19]
    return text


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def text(value: Any) -> str:
    """Compact text of any value: no Python reprs; maps as ``k=v, k=v``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))  # an int subclass (Millis) shows its number; the kind adds the duration
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex() if len(value) <= 16 else bytes(value[:16]).hex() + "…"
    if isinstance(value, dict):
        return ", ".join(f"{k}={'null' if v is None else text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "[" + ", ".join(text(v) for v in value) + "]"
    return str(value)


def show(value: Any, column: Column, location: str | None) -> str:
    """The terminal text of ``value`` in a column of ``column``'s kind."""
    if value is None:
        return ""
    kind = column.kind
    for names in (column.short, column.labels):
        if names and not isinstance(value, bool) and value in names:
            return names[value]
    if kind == "path" and isinstance(value, str):
        return relative_path(value, location)
    if kind in ("bytes", "duration") and (n := _int(value)) is not None:
        return fmt_bytes(n) if kind == "bytes" else human_duration(n)
    if kind == "timestamp" and isinstance(value, str):
        return short_timestamp(value)
    return text(value)


def human_document(value: Any, key: str = "") -> Any:
    """A document (``inspect table``) for a terminal: sizes and durations also in human units,
    timestamps short; the raw number stays beside them so it can be copied."""
    if isinstance(value, dict):
        return {k: human_document(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [human_document(v, key) for v in value]
    n = _int(value)
    if n is not None and key.endswith(("-ms", "_ms")):
        return f"{human_duration(n)} ({n})"
    if n is not None and key.endswith(("-size", "-bytes", "_bytes")):
        return f"{fmt_bytes(n)} ({n})"
    if isinstance(value, str) and key.endswith(("_updated", "_at", "timestamp")):
        return short_timestamp(value)
    return value

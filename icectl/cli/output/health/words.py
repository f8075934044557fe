"""Words and numbers of a health document, shared by its HTML page and its terminal report.

Both drawings read the document ``icectl health --json`` prints (a plain dict), never the result
object, so a saved JSON document can be drawn again. Every reader here tolerates missing keys and
``null`` values: a document from an older or newer icectl still draws, with "–" where a figure is
missing.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from icectl.humanize import MISSING, fmt_bytes, fmt_count, fmt_duration, fmt_ratio, fmt_time, number

# Snapshot operations in the order they stack (bottom first); the glyph tells them apart in a terminal
# without colour, the CSS class colours them on the page. Others (an engine's own) follow, as "other".
OPERATIONS: tuple[str, ...] = ("append", "overwrite", "delete", "replace")
OTHER = "other"


def section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``doc[key]`` when it is an object, else an empty one (a missing or null section)."""
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def fmt_day(value: Any) -> str:
    """Milliseconds since the epoch as a UTC day."""
    return fmt_time(value)[:10]


def fmt_axis_time(value: Any, span_ms: Any) -> str:
    """A time on a chart's axis, as precise as the chart's span needs: a day over two days or more,
    the minute over two minutes, else the second (a table written by a quick job)."""
    span = number(span_ms) or 0
    if span >= 2 * 86_400_000:
        return fmt_day(value)
    if span >= 120_000:
        return fmt_time(value)
    n = number(value)
    if n is None:
        return MISSING
    seconds = dt.datetime.fromtimestamp(n / 1000, tz=dt.timezone.utc).strftime(":%S")
    return fmt_time(value) + seconds + (f".{int(n) % 1000:03d}" if span < 10_000 else "")


def timeline_span(buckets: list[Mapping[str, Any]]) -> float:
    """Milliseconds from the first period's start to the last period's end (0 when unknown)."""
    if not buckets:
        return 0.0
    start, end = number(buckets[0].get("start_ms")), number(buckets[-1].get("end_ms"))
    return end - start if start is not None and end is not None else 0.0


def fmt_value(value: Any, unit: Any) -> str:
    """A check's value or threshold in its unit (``count``, ``bytes``, ``ratio``, ``ms``)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    formatter = {"bytes": fmt_bytes, "ratio": fmt_ratio, "ms": fmt_duration}.get(str(unit), fmt_count)
    text = formatter(value)
    return text if text != MISSING or number(value) is not None else str(value)


COMPARISONS = {">=": "≥", "<=": "≤", ">": ">", "<": "<"}


def fmt_threshold(check: Mapping[str, Any]) -> str:
    """A check's threshold with the comparison that crosses it: ``≥ 500``, ``< 8 MiB``."""
    text = fmt_value(check.get("threshold"), check.get("unit"))
    op = COMPARISONS.get(str(check.get("comparison")))
    return f"{op} {text}" if op and text != MISSING else text


def fmt_partition(partition: Any) -> str:
    """A partition tuple as ``day=2024-01-02/bucket=3``; the unpartitioned table's as ``(unpartitioned)``."""
    if isinstance(partition, Mapping):
        return "/".join(f"{k}={'null' if v is None else v}" for k, v in partition.items()) or "(unpartitioned)"
    return "(unpartitioned)" if partition in (None, "", []) else str(partition)


def bin_label(bin_: Mapping[str, Any]) -> str:
    """A histogram bin's range: ``1 MiB – 2 MiB``; an open last bin is ``≥ 1 GiB``."""
    upper = bin_.get("upper_bytes")
    if number(upper) is None:
        return f"≥ {fmt_bytes(bin_.get('lower_bytes'))}"
    return f"{fmt_bytes(bin_.get('lower_bytes'))} – {fmt_bytes(upper)}"


def histogram(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The data-file size bins (objects only), in the document's order (smallest first)."""
    bins = section(doc, "data_files").get("size_histogram")
    return [b for b in bins if isinstance(b, Mapping)] if isinstance(bins, list) else []


def bin_is_small(bin_: Mapping[str, Any], target: Any) -> bool:
    """Whether a histogram bin holds small files: the document's ``small`` flag (files under the
    small-file size), else a range that ends at or below the target file size."""
    flag = bin_.get("small")
    if isinstance(flag, bool):
        return flag
    upper, t = number(bin_.get("upper_bytes")), number(target)
    return upper is not None and t is not None and upper <= t


def small_words(doc: Mapping[str, Any]) -> str:
    """What a small file is in this document: ``under 384 MiB``."""
    data = section(doc, "data_files")
    if number(data.get("small_file_bytes")) is not None:
        return f"under {fmt_bytes(data.get('small_file_bytes'))}"
    return "below the target file size"


def bin_count(bin_: Mapping[str, Any]) -> int:
    n = number(bin_.get("count"))
    return max(int(n), 0) if n is not None else 0


def target_position(bins: list[Mapping[str, Any]], target: Any) -> float | None:
    """Where the target file size falls on the histogram's axis, in bins from the left edge.

    Inside a bin the position is interpolated on a log scale when the bin's bounds allow it (the
    bins are usually powers of two). None without a target or bins; past the last bin: its right edge.
    """
    t = number(target)
    if t is None or not bins:
        return None
    for i, b in enumerate(bins):
        lower, upper = number(b.get("lower_bytes")) or 0.0, number(b.get("upper_bytes"))
        if t < lower:
            return float(i)
        if upper is None or t < upper:
            if upper is None or upper <= lower:
                return float(i)
            if lower > 0:
                return i + math.log(t / lower) / math.log(upper / lower)
            return i + t / upper
    return float(len(bins))


def timeline(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The snapshots-over-time buckets (objects only), oldest first."""
    buckets = doc.get("timeline")
    return [b for b in buckets if isinstance(b, Mapping)] if isinstance(buckets, list) else []


def bucket_operations(bucket: Mapping[str, Any]) -> dict[str, int]:
    """A bucket's snapshot counts by operation, folded onto :data:`OPERATIONS` and ``other``, in
    stacking order; snapshots the bucket counts without an operation are ``other`` too."""
    ops = bucket.get("operations")
    counts = {op: 0 for op in (*OPERATIONS, OTHER)}
    if isinstance(ops, Mapping):
        for op, n in ops.items():
            value = number(n)
            if value is not None and value > 0:
                counts[op if op in OPERATIONS else OTHER] += int(value)
    total = number(bucket.get("snapshots"))
    if total is not None and int(total) > sum(counts.values()):
        counts[OTHER] += int(total) - sum(counts.values())
    return counts


def operations_used(buckets: list[Mapping[str, Any]]) -> dict[str, int]:
    """Snapshot counts per operation over the whole timeline, only the operations that occur."""
    totals = {op: 0 for op in (*OPERATIONS, OTHER)}
    for b in buckets:
        for op, n in bucket_operations(b).items():
            totals[op] += n
    return {op: n for op, n in totals.items() if n}


def checks(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The checks, crossed ones first (stable otherwise: the document's order)."""
    found = doc.get("checks")
    items = [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []
    return sorted(items, key=lambda c: not c.get("crossed"))


def crossed_count(doc: Mapping[str, Any]) -> int:
    return sum(1 for c in checks(doc) if c.get("crossed"))


def recommendations(doc: Mapping[str, Any]) -> list[str]:
    """The commands to run: the document's list, else the crossed checks' commands, unique, in order."""
    found = doc.get("recommendations")
    if isinstance(found, list):
        out = [str(r) for r in found if r]
    else:
        out = [str(c["recommendation"]) for c in checks(doc) if c.get("crossed") and c.get("recommendation")]
    return list(dict.fromkeys(out))


def status_words(doc: Mapping[str, Any]) -> str:
    """``healthy`` or ``needs attention (2 of 9 checks crossed)``; ``could not be checked`` for a failure."""
    if doc.get("error") is not None:
        return "could not be checked"
    n, total = crossed_count(doc), len(checks(doc))
    healthy = doc.get("healthy")
    if healthy is True or (healthy is None and n == 0):
        return "healthy"
    return f"needs attention ({n} of {total} checks crossed)" if total else "needs attention"


def is_healthy(doc: Mapping[str, Any]) -> bool:
    return doc.get("error") is None and status_words(doc) == "healthy"


def key_figures(doc: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The figures that decide maintenance, by section: ``[(section title, [(label, text), ...]), ...]``."""
    snaps, meta, mans = section(doc, "snapshots"), section(doc, "metadata_files"), section(doc, "manifests")
    data, dels, lineage = section(doc, "data_files"), section(doc, "delete_files"), section(doc, "row_lineage")
    stats = section(doc, "partition_stats")
    current = doc.get("current_snapshot_id")
    out: list[tuple[str, list[tuple[str, str]]]] = [
        ("Table", [
            ("format version", fmt_count(doc.get("format_version"))),
            ("current snapshot", MISSING if current is None else str(current)),
            ("row lineage", (f"on, next row id {fmt_count(lineage.get('next_row_id'))}" if lineage.get("enabled")
                             else "off")),
            ("partition stats", str(stats.get("path")) if stats.get("path") else "none"),
        ]),
        ("Snapshots", [
            ("count", fmt_count(snaps.get("count"))),
            ("oldest age", fmt_duration(snaps.get("oldest_age_ms"))),
            ("newest", fmt_time(snaps.get("newest_ms"))),
            ("expirable", fmt_count(snaps.get("expirable_count"))),
            ("policy", f"max age {fmt_duration(snaps.get('max_snapshot_age_ms'))}, "
                       f"keep {fmt_count(snaps.get('min_snapshots_to_keep'))}"),
        ]),
        ("Metadata files", [("count", fmt_count(meta.get("count"))), ("total", fmt_bytes(meta.get("total_bytes")))]),
        ("Manifests", [
            ("count", f"{fmt_count(mans.get('count'))} ({fmt_count(mans.get('data_count'))} data, "
                      f"{fmt_count(mans.get('delete_count'))} delete)"),
            ("total", fmt_bytes(mans.get("total_bytes"))),
            ("mean size", fmt_bytes(mans.get("mean_bytes"))),
            ("compact would merge", fmt_count(mans.get("mergeable_count"))),
        ]),
        ("Data files", [
            ("count", fmt_count(data.get("count"))),
            ("records", fmt_count(data.get("record_count"))),
            ("total", fmt_bytes(data.get("total_bytes"))),
            ("target file size", fmt_bytes(data.get("target_file_size_bytes"))),
            ("mean size", fmt_bytes(data.get("mean_bytes"))),
            ("small files", f"{fmt_count(data.get('small_file_count'))} ({fmt_ratio(data.get('small_file_ratio'))})"),
        ]),
        ("Delete files", [
            ("position deletes", fmt_count(dels.get("position_delete_file_count"))),
            ("equality deletes", fmt_count(dels.get("equality_delete_file_count"))),
            ("deletion vectors", fmt_count(dels.get("dv_count"))),
            ("deleted records", fmt_count(dels.get("delete_record_count"))),
            ("per data file", fmt_ratio(dels.get("delete_file_ratio"))),
            ("of rows", fmt_ratio(dels.get("deleted_row_ratio"))),
        ]),
    ]
    orphans = doc.get("orphans")
    if isinstance(orphans, Mapping):
        rows = [("count", fmt_count(orphans.get("count"))), ("total", fmt_bytes(orphans.get("total_bytes")))]
        if orphans.get("skipped"):  # remove-orphan-files would refuse: say why instead of a count
            rows.append(("skipped", str(orphans["skipped"])))
        out.append(("Orphan files", rows))
    return out


def top_delete_partitions(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = section(doc, "delete_files").get("top_partitions")
    return [p for p in found if isinstance(p, Mapping)] if isinstance(found, list) else []


def orphan_sample(doc: Mapping[str, Any]) -> list[str]:
    sample = section(doc, "orphans").get("sample")
    return [str(s) for s in sample] if isinstance(sample, list) else []

"""`icectl health`: per table, the figures that decide maintenance, each judged by a threshold,
with the command to run for each threshold crossed.

Figures are of the current snapshot (files, manifests) and of the metadata (snapshots, metadata
files); each manifest is read once (:mod:`icectl.ops.health.figures`). What maintenance would do is
asked of the maintenance commands' own planning, never re-derived: the snapshots the table's
retention policy expires (:func:`icectl.ops.expire.retention.apply_retention`, what
`expire-snapshots --dry-run` expires), the manifests `compact` would merge (its plan), and with
``orphans`` the files `remove-orphan-files --dry-run` lists. Thresholds and checks:
:mod:`icectl.ops.health.checks`.
"""

from __future__ import annotations

import datetime
import math
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from icectl.errors import CorruptInputError, IcectlError, NotFoundError, RefusedError
from icectl.ops.expire.retention import ExpirePolicy, apply_retention
from icectl.ops.health.checks import TARGET_FILE_SIZE_BYTES, Commands, evaluate, recommendations, thresholds_for
from icectl.ops.health.figures import FileFigures, bucket_edges, histogram_bounds, operations, read_figures
from icectl.ops.health.result import HealthResult
from icectl.ops.orphans import remove_orphan_files
from icectl.ops.partition_stats import read_partition_stats
from icectl.spec.metadata import MIN_ROW_LINEAGE_VERSION, TableMetadata
from icectl.spec.properties import (
    MAX_SNAPSHOT_AGE_MS,
    METADATA_DELETE_AFTER_COMMIT,
    METADATA_PREVIOUS_VERSIONS_MAX,
    MIN_SNAPSHOTS_TO_KEEP,
)
from icectl.spec.snapshots import Snapshot, ancestors_of
from icectl.storage import FileIO
from icectl.table import Table
from icectl.table.scan import manifests_of
from icectl.threads import STAT_WORKERS, ordered_map

TIMELINE_BUCKETS = 30
ORPHAN_SAMPLE = 10


def table_health(table: Table, *, name: str | None = None, config_thresholds: Mapping[str, float | int] | None = None,
                 orphans: bool = False, now_ms: int | None = None) -> HealthResult:
    """The health document of ``table`` (``name``: how to call it, default its identifier).

    Raises :class:`CorruptInputError` when a manifest list or manifest of the current snapshot is
    missing or unreadable: a health report built on part of the files would look better than the
    table is.
    """
    md = table.metadata
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    th = thresholds_for(md, config_thresholds or {})
    head = md.current_snapshot()
    target = TARGET_FILE_SIZE_BYTES.parse(md.properties)
    small = int(target * th["small-file-size-ratio"])
    figures = FileFigures(histogram_bounds(target, small), small)
    manifests, mergeable = _read_snapshot(table, md, head, figures)
    stats = read_partition_stats(table, head.snapshot_id) if head is not None else None
    top = _stats_top_partitions(stats) if stats is not None else figures.top_partitions(md)
    total = sum(m.manifest_length for m in manifests)
    res = HealthResult(
        table=name or table.identifier, location=md.location, format_version=md.format_version,
        current_snapshot_id=md.current_snapshot_id, checked_at_ms=now, healthy=True,
        snapshots=_snapshots(md, now), metadata_files=_metadata_files(table),
        manifests={"count": len(manifests),
                   "data_count": sum(1 for m in manifests if int(m.content) == 0),
                   "delete_count": sum(1 for m in manifests if int(m.content) != 0),
                   "total_bytes": total, "mean_bytes": total // len(manifests) if manifests else 0,
                   "mergeable_count": mergeable},
        data_files=figures.data_section(target),
        delete_files={**figures.delete_section(top),
                      "top_partitions_source": "partition_stats" if stats is not None else "manifests"},
        row_lineage={"enabled": md.format_version >= MIN_ROW_LINEAGE_VERSION,
                     "next_row_id": md.next_row_id if md.format_version >= MIN_ROW_LINEAGE_VERSION else None},
        timeline=timeline(md.snapshots), partition_stats=_stats_file(md, head) if stats is not None else None,
        partition_stats_files=_stats_lag(md), thresholds=th)
    if orphans:
        res.orphans = _orphans(table, now)
    doc = res.to_json()
    res.checks = evaluate(doc, th, _commands(table, name))
    res.recommendations = recommendations(res.checks)
    return res.finish()


def _read_snapshot(table: Table, md: TableMetadata, head: Snapshot | None,
                   figures: FileFigures) -> tuple[list[Any], int]:
    if head is None:
        return [], 0
    try:
        manifests = manifests_of(md, head, table.io)
        mergeable = read_figures(table, md, manifests, figures)
    except NotFoundError as e:  # the table names the file: a damaged table, not a wrong argument
        raise CorruptInputError(f"a manifest list or manifest of snapshot {head.snapshot_id} is missing "
                                f"({e.message})", path=e.path or head.manifest_list,
                                hint="'icectl validate' lists every problem") from None
    return manifests, mergeable


def _snapshots(md: TableMetadata, now: int) -> dict[str, Any]:
    times = [s.timestamp_ms for s in md.snapshots]
    out: dict[str, Any] = {
        "count": len(times), "oldest_ms": min(times, default=None), "newest_ms": max(times, default=None),
        "oldest_age_ms": now - min(times) if times else None, "expirable_count": None,
        "max_snapshot_age_ms": MAX_SNAPSHOT_AGE_MS.parse(md.properties),
        "min_snapshots_to_keep": MIN_SNAPSHOTS_TO_KEEP.parse(md.properties), "gc_enabled": True,
        "refs": len(md.refs)}
    try:
        out["expirable_count"] = len(apply_retention(md, ExpirePolicy(), now).expired)
    except RefusedError:  # gc.enabled=false: expire-snapshots refuses, nothing is expirable
        out["gc_enabled"] = False
    return out


def _sizes(io: FileIO, paths: list[str]) -> list[int | None]:
    """Each file's size, None when it is gone: stat in parallel (object stores answer slowly)."""
    def one(path: str) -> int | None:
        try:
            return io.size(path)
        except NotFoundError:
            return None

    if not paths:
        return []
    return list(ordered_map(one, paths, workers=STAT_WORKERS))


def _metadata_files(table: Table) -> dict[str, Any]:
    """The current metadata file and the metadata log's files that still exist."""
    paths = [e.metadata_file for e in table.metadata.metadata_log]
    if table.metadata_location not in paths:
        paths.append(table.metadata_location)
    sizes = _sizes(table.io, paths)
    present = [s for s in sizes if s is not None]
    props = table.metadata.properties
    return {"count": len(present), "total_bytes": sum(present), "log_entries": len(table.metadata.metadata_log),
            "missing_count": len(sizes) - len(present),
            "previous_versions_max": METADATA_PREVIOUS_VERSIONS_MAX.parse(props),
            "delete_after_commit": METADATA_DELETE_AFTER_COMMIT.parse(props)}


def timeline(snapshots: tuple[Snapshot, ...] | list[Snapshot], buckets: int = TIMELINE_BUCKETS) -> list[dict[str, Any]]:
    """Snapshots over time: at most ``buckets`` equal spans from the oldest to the newest, oldest first."""
    if not snapshots:
        return []
    first = min(s.timestamp_ms for s in snapshots)
    last = max(s.timestamp_ms for s in snapshots)
    n = max(1, min(buckets, last - first + 1))
    edges = bucket_edges(first, last, n)
    width = edges[1] - edges[0]
    counts: list[Counter[str]] = [Counter() for _ in range(n)]
    for s in snapshots:
        counts[min(n - 1, (s.timestamp_ms - first) // width)][s.operation or "unknown"] += 1
    return [{"start_ms": edges[i], "end_ms": min(edges[i + 1], last + 1), "snapshots": sum(c.values()),
             "operations": operations(c)} for i, c in enumerate(counts) if edges[i] <= last]


def _stats_file(md: TableMetadata, head: Snapshot | None) -> dict[str, Any] | None:
    found = next((p for p in md.partition_statistics if head and p.snapshot_id == head.snapshot_id), None)
    return {"snapshot_id": found.snapshot_id, "path": found.statistics_path} if found else None


def _stats_lag(md: TableMetadata) -> dict[str, Any]:
    """The partition statistics files, and how many commits of the current branch came after the
    newest snapshot that has one (None when the table has none)."""
    with_stats = {p.snapshot_id for p in md.partition_statistics}
    since = None
    if with_stats:
        since = 0
        for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id):
            if s.snapshot_id in with_stats:
                break
            since += 1
    return {"count": len(md.partition_statistics), "snapshots_since": since}


def _stats_top_partitions(stats: Any) -> list[dict[str, Any]]:
    """The partitions with the most delete files, from a partition statistics file's rows."""
    rows = []
    for r in stats.to_pylist():
        files = sum(r.get(k) or 0 for k in ("position_delete_file_count", "equality_delete_file_count", "dv_count"))
        records = sum(r.get(k) or 0 for k in ("position_delete_record_count", "equality_delete_record_count"))
        if files:
            rows.append({"partition": {k: _human(v) for k, v in (r.get("partition") or {}).items()},
                         "spec_id": r.get("spec_id"),
                         "delete_files": files, "delete_records": records})
    rows.sort(key=lambda r: (-r["delete_files"], -r["delete_records"]))
    return rows[:10]


def _human(value: Any) -> Any:
    """A partition value of a statistics file (pyarrow's Python value) as the files view shows it."""
    if isinstance(value, datetime.date | datetime.time):  # datetime too: it is a date
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def _orphans(table: Table, now: int) -> dict[str, Any]:
    """What `remove-orphan-files --dry-run` would delete (its default cutoff: 3 days)."""
    try:
        found = remove_orphan_files(table, dry_run=True, now_ms=now).orphan_file_locations
    except RefusedError as e:  # gc.enabled=false, a table without a folder: it would refuse
        return {"count": None, "total_bytes": None, "sample": [], "skipped": e.one_line()}
    except IcectlError as e:
        e.message = f"listing orphan files: {e.message}"
        raise
    paths = list(found or [])
    sizes = _sizes(table.io, paths)
    base = (table.location or "").rstrip("/") + "/"
    return {"count": len(paths), "total_bytes": sum(s or 0 for s in sizes),
            "sample": [p[len(base):] if p.startswith(base) else p for p in paths[:ORPHAN_SAMPLE]]}


def _commands(table: Table, name: str | None) -> Commands:
    a = table.address
    spark_table = ".".join((*a.namespace, a.name)) if a.name else table.identifier
    return Commands(name or table.identifier, a.catalog or "<catalog>", spark_table)

"""Health documents made by hand to the schema of `icectl health --json` (issue 16's brief), for the
tests of the drawings (HTML page, terminal report) that must not depend on a table being built."""

from __future__ import annotations

import copy
from typing import Any

MiB = 1 << 20
DAY_MS = 86_400_000
T0 = 1_735_689_600_000  # 2025-01-01 00:00 UTC
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>&amp;"\''


def size_histogram(counts: list[int]) -> list[dict[str, Any]]:
    """Bins [0, 1 KiB), then powers of two up to the last, open bin; ``counts`` from the smallest."""
    bounds = [0] + [1024 << i for i in range(len(counts) - 1)]
    out = []
    for i, n in enumerate(counts):
        upper = bounds[i + 1] if i + 1 < len(bounds) else None
        out.append({"lower_bytes": bounds[i], "upper_bytes": upper, "count": n,
                    "total_bytes": n * (bounds[i] + (upper or bounds[i] * 2)) // 2})
    return out


def timeline(ops_per_bucket: list[dict[str, int]], start_ms: int = T0, width_ms: int = DAY_MS) -> list[dict[str, Any]]:
    return [{"start_ms": start_ms + i * width_ms, "end_ms": start_ms + (i + 1) * width_ms,
             "snapshots": sum(ops.values()), "operations": dict(ops)} for i, ops in enumerate(ops_per_bucket)]


def unhealthy_doc(table: str = "db.events") -> dict[str, Any]:
    """A table with too many small files, manifests and snapshots: three crossed checks."""
    counts = [0] * 22
    counts[3], counts[4], counts[5], counts[10], counts[19] = 40, 900, 1200, 35, 4  # 8 KiB.. and ~512 MiB files
    buckets = [{"append": 60 + 3 * i} if i % 7 else {"append": 50, "delete": 5, "overwrite": 2, "replace": 1}
               for i in range(30)]
    buckets[-1] = {"append": 10, "rewrite_manifests": 1}  # an operation outside the four: drawn as "other"
    return {
        "view": "health", "table": table, "location": f"/warehouse/{table.replace('.', '/')}",
        "format_version": 2, "current_snapshot_id": 8_743_111_222_333_444_555, "checked_at_ms": T0 + 31 * DAY_MS,
        "healthy": False,
        "snapshots": {"count": 2_216, "oldest_ms": T0, "newest_ms": T0 + 30 * DAY_MS, "oldest_age_ms": 31 * DAY_MS,
                      "expirable_count": 2_100, "max_snapshot_age_ms": 5 * DAY_MS, "min_snapshots_to_keep": 1},
        "metadata_files": {"count": 101, "total_bytes": 88 * MiB},
        "manifests": {"count": 2_216, "data_count": 2_200, "delete_count": 16, "total_bytes": 30 * MiB,
                      "mean_bytes": 14_200, "mergeable_count": 2_210},
        "data_files": {"count": 2_179, "total_bytes": 2_400 * MiB, "record_count": 12_345_678,
                       "target_file_size_bytes": 512 * MiB, "small_file_count": 2_175, "small_file_ratio": 0.998,
                       "size_histogram": size_histogram(counts)},
        "delete_files": {"position_delete_file_count": 16, "equality_delete_file_count": 0, "dv_count": 0,
                         "delete_record_count": 1_000, "delete_file_ratio": 16 / 2_179,
                         "deleted_row_ratio": 1_000 / 12_345_678,
                         "top_partitions": [
                             {"partition": {"day": "2025-01-02"}, "delete_files": 9, "delete_records": 700},
                             {"partition": {"day": "2025-01-03"}, "delete_files": 7, "delete_records": 300}]},
        "row_lineage": {"enabled": False, "next_row_id": None},
        "timeline": timeline(buckets),
        "partition_stats": None,
        "checks": [
            {"id": "snapshots.count", "section": "snapshots", "title": "Snapshots", "value": 2_216, "threshold": 1_000,
             "unit": "count", "crossed": True, "message": "2,216 snapshots (threshold 1,000)",
             "recommendation": f"icectl expire-snapshots {table}"},
            {"id": "snapshots.oldest_age", "section": "snapshots", "title": "Oldest snapshot", "value": 31 * DAY_MS,
             "threshold": 7 * DAY_MS, "unit": "ms", "crossed": True, "message": "oldest snapshot is 31 d old",
             "recommendation": f"icectl expire-snapshots {table}"},
            {"id": "metadata_files.count", "section": "metadata_files", "title": "Metadata files", "value": 101,
             "threshold": 500, "unit": "count", "crossed": False, "message": "101 metadata files",
             "recommendation": None},
            {"id": "manifests.count", "section": "manifests", "title": "Manifests", "value": 2_216, "threshold": 500,
             "unit": "count", "crossed": True, "message": "2,216 manifests (threshold 500)",
             "recommendation": f"icectl compact {table}"},
            {"id": "data_files.small_file_ratio", "section": "data_files", "title": "Small data files",
             "value": 0.998, "threshold": 0.5, "unit": "ratio", "crossed": True,
             "message": "99.8% of data files are under 75% of the target size",
             "recommendation": f"icectl compact {table} --data"},
            {"id": "delete_files.ratio", "section": "delete_files", "title": "Delete files per data file",
             "value": 16 / 2_179, "threshold": 0.1, "unit": "ratio", "crossed": False,
             "message": "0.73% delete files per data file", "recommendation": None},
            {"id": "manifests.mean_bytes", "section": "manifests", "title": "Mean manifest size", "value": 14_200,
             "threshold": 8 * MiB, "unit": "bytes", "crossed": False, "message": "mean manifest 14 KiB",
             "recommendation": None},
        ],
        "recommendations": [f"icectl expire-snapshots {table}", f"icectl compact {table}",
                            f"icectl compact {table} --data"],
    }


def healthy_doc(table: str = "db.small") -> dict[str, Any]:
    doc = unhealthy_doc(table)
    for c in doc["checks"]:
        c["crossed"], c["recommendation"] = False, None
    doc["healthy"], doc["recommendations"] = True, []
    doc["timeline"] = timeline([{"append": 1}, {}, {"overwrite": 2}])
    return doc


def empty_doc(table: str = "db.empty") -> dict[str, Any]:
    """A table created and never written: no snapshot, no file, an all-zero histogram, no timeline."""
    doc = healthy_doc(table)
    doc["current_snapshot_id"] = None
    doc["snapshots"] = {"count": 0, "oldest_ms": None, "newest_ms": None, "oldest_age_ms": None,
                        "expirable_count": 0, "max_snapshot_age_ms": 5 * DAY_MS, "min_snapshots_to_keep": 1}
    doc["manifests"] = {"count": 0, "data_count": 0, "delete_count": 0, "total_bytes": 0, "mean_bytes": None,
                        "mergeable_count": 0}
    doc["data_files"] = {"count": 0, "total_bytes": 0, "record_count": 0, "target_file_size_bytes": 512 * MiB,
                         "small_file_count": 0, "small_file_ratio": None, "size_histogram": size_histogram([0] * 22)}
    doc["delete_files"] = {"position_delete_file_count": 0, "equality_delete_file_count": 0, "dv_count": 0,
                           "delete_record_count": 0, "delete_file_ratio": None, "deleted_row_ratio": None,
                           "top_partitions": []}
    doc["timeline"] = []
    return doc


def hostile_doc() -> dict[str, Any]:
    """Every string a table's metadata decides carries markup: the name, location, partition values,
    orphan paths, a check's message and the recommended command."""
    doc = unhealthy_doc("db." + HOSTILE)
    doc["location"] = "/w/" + HOSTILE
    doc["delete_files"]["top_partitions"][0]["partition"] = {"day": HOSTILE, HOSTILE: "x"}
    doc["orphans"] = {"count": 1, "total_bytes": 10, "sample": ["data/" + HOSTILE + ".parquet"]}
    doc["checks"][0]["message"] = HOSTILE
    doc["partition_stats"] = {"snapshot_id": 1, "path": "/w/" + HOSTILE + ".parquet"}
    return copy.deepcopy(doc)

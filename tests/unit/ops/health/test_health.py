"""icectl.ops.health: what maintenance would do is what the maintenance commands' own dry runs say.

The judges: `expire_snapshots(dry_run=True)` for the expirable snapshots, `compact(dry_run=True)` for
the manifests it would merge, `remove_orphan_files(dry_run=True)` for orphans, prometheus_client's
parser for the exposition text.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import tomllib
from prometheus_client.parser import text_string_to_metric_families
from support.appends import build_appends

from icectl.cli.output.health.prometheus import prometheus_text
from icectl.cli.output.health.terminal import health_line
from icectl.config import parse_config
from icectl.errors import CorruptInputError
from icectl.ops import health as health_module
from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import CompactOptions
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.health import table_health, timeline
from icectl.ops.health.checks import THRESHOLDS, check_config, thresholds_for
from icectl.ops.lifecycle.upgrade import upgrade
from icectl.ops.orphans import remove_orphan_files
from icectl.ops.properties import set_properties
from icectl.results import TableFailure
from icectl.spec.snapshots import PartitionStatisticsFile, Snapshot
from icectl.table import Table, load_table

HOUR_MS = 3600 * 1000


def table_of(path: Path) -> Table:
    return load_table(str(path))


@pytest.fixture
def appends(tmp_path: Path) -> Path:
    """60 appends, one every 3 hours: the last 40 are inside the default 5-day retention."""
    build_appends(tmp_path / "t", 60, step_ms=3 * HOUR_MS)
    return tmp_path / "t"


def test_expirable_is_what_expire_snapshots_dry_run_expires(appends: Path) -> None:
    now = int(time.time() * 1000)
    cases = ({}, {"history.expire.min-snapshots-to-keep": "50"},
             {"history.expire.min-snapshots-to-keep": "1", "history.expire.max-snapshot-age-ms": "0"})
    for props in cases:
        if props:
            set_properties(table_of(appends), props)
        t = table_of(appends)
        expected = expire_snapshots(t, ExpirePolicy(), dry_run=True, now_ms=now).expired_snapshots
        doc = table_health(t, now_ms=now).to_json()
        assert doc["snapshots"]["expirable_count"] == len(expected), props
        assert doc["snapshots"]["min_snapshots_to_keep"] == int(props.get("history.expire.min-snapshots-to-keep", 1))
    assert len(expected) == 59  # max age 0: all but the head
    set_properties(table_of(appends), {"gc.enabled": "false"})  # expire-snapshots refuses: nothing expirable
    doc = table_health(table_of(appends), now_ms=now).to_json()
    assert doc["snapshots"]["expirable_count"] is None and doc["snapshots"]["gc_enabled"] is False
    assert "snapshots.expirable" not in {c["id"] for c in doc["checks"] if c["crossed"]}


def test_mergeable_is_what_compact_dry_run_replaces(appends: Path) -> None:
    def both() -> tuple[int, int]:
        t = table_of(appends)
        return (table_health(t).manifests["mergeable_count"],
                compact(t, CompactOptions(), dry_run=True).manifests_replaced)

    assert both() == (60, 60)
    compact(table_of(appends), CompactOptions())
    assert both() == (0, 0)  # one manifest: nothing to merge
    set_properties(table_of(appends), {"commit.manifest.target-size-bytes": "4096"})
    assert both()[0] == both()[1] > 0  # a small target splits the merged manifest


def test_timeline_buckets_cover_every_snapshot_oldest_first() -> None:
    snaps = [Snapshot(snapshot_id=i, timestamp_ms=1_000_000 + i * 997, summary={"operation": op})
             for i, op in enumerate(["append"] * 70 + ["delete"] * 30)]
    buckets = timeline(snaps)
    assert len(buckets) == 30 and sum(b["snapshots"] for b in buckets) == 100
    assert buckets[0]["start_ms"] == 1_000_000 and buckets[-1]["end_ms"] > snaps[-1].timestamp_ms
    assert all(a["end_ms"] == b["start_ms"] for a, b in itertools.pairwise(buckets))
    assert sum(b["operations"].get("delete", 0) for b in buckets) == 30
    assert timeline(snaps[:1]) == [{"start_ms": 1_000_000, "end_ms": 1_000_001, "snapshots": 1,
                                    "operations": {"append": 1}}]
    assert timeline([]) == []


def test_orphans_are_what_remove_orphan_files_dry_run_lists(appends: Path) -> None:
    planted = appends / "data" / "left-behind.parquet"
    planted.write_bytes(b"x" * 123)
    old = time.time() - 10 * 24 * 3600
    os.utime(planted, (old, old))
    t = table_of(appends)
    listed = remove_orphan_files(t, dry_run=True).orphan_file_locations
    doc = table_health(t, orphans=True).to_json()
    assert doc["orphans"] == {"count": len(listed), "total_bytes": 123, "sample": ["data/left-behind.parquet"]}
    check = next(c for c in doc["checks"] if c["id"] == "orphans.count")
    assert check["crossed"] and check["recommendation"] == f"icectl remove-orphan-files {t.identifier}"
    assert "orphans" not in table_health(t).to_json()  # only when asked: it lists the table's folders


def test_thresholds_table_over_config_over_defaults(appends: Path) -> None:
    md = table_of(appends).metadata
    assert thresholds_for(md, {}) == {k: v.default for k, v in THRESHOLDS.items() if v.default is not None} | {
        "small-manifests-mean-bytes": 8 * 1024 * 1024, "metadata-file-count": 101}
    config = check_config(parse_config({"health": {"manifest-count": 10, "small-manifests-mean-bytes": "1MiB",
                                                   "small-file-ratio": "0.25"}}).health, None)
    assert config == {"manifest-count": 10, "small-manifests-mean-bytes": 1024 * 1024, "small-file-ratio": 0.25}
    set_properties(table_of(appends), {"icectl.health.manifest-count": "70",
                                       "write.metadata.previous-versions-max": "5"})
    th = thresholds_for(table_of(appends).metadata, config)
    assert (th["manifest-count"], th["small-file-ratio"], th["metadata-file-count"]) == (70, 0.25, 6)
    set_properties(table_of(appends), {"icectl.health.manifest-cnt": "70"})
    with pytest.raises(CorruptInputError, match="manifest-cnt"):
        thresholds_for(table_of(appends).metadata, config)


def test_partition_statistics_give_the_top_partitions(appends: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stats = pa.table({"partition": [{"d": "2024-01-01"}, {"d": "2024-01-02"}, {"d": "2024-01-03"}],
                      "spec_id": [0, 0, 0], "position_delete_file_count": [1, 4, 0],
                      "position_delete_record_count": [3, 9, 0], "equality_delete_file_count": [0, 1, 0],
                      "equality_delete_record_count": [0, 2, 0], "dv_count": [2, 0, 0]})
    asked: list[int] = []

    def fake(table: Table, snapshot_id: int) -> Any:
        asked.append(snapshot_id)
        return stats

    monkeypatch.setattr(health_module, "read_partition_stats", fake)
    t = table_of(appends)
    doc = table_health(t).to_json()
    assert asked == [t.metadata.current_snapshot_id]
    assert doc["delete_files"]["top_partitions"] == [
        {"partition": {"d": "2024-01-02"}, "spec_id": 0, "delete_files": 5, "delete_records": 11},
        {"partition": {"d": "2024-01-01"}, "spec_id": 0, "delete_files": 3, "delete_records": 3}]


def test_prometheus_labels_are_escaped_and_failures_are_down(appends: Path) -> None:
    doc = table_health(table_of(appends)).to_json()
    odd = 'we"ird\\name\nx'
    text = prometheus_text([{**doc, "table": odd}, {"view": "health", "table": "db.broken", "error": "corrupt"}])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    up = {s.labels["table"]: s.value for s in families["icectl_table_health_up"].samples}
    assert up == {odd: 1, "db.broken": 0}
    assert [s.labels["table"] for s in families["icectl_table_snapshots"].samples] == [odd]
    assert all(f.type == "gauge" for f in families.values())


def test_one_line_per_table() -> None:
    failure = TableFailure(view="health", table="db.b", error="metadata file is not JSON", exit_code=4)
    assert health_line(failure) == "db.b  failed: metadata file is not JSON"


def test_the_one_line_names_the_commands_of_the_crossed_checks(appends: Path) -> None:
    """The line reads each crossed check's command (structured, never parsed back from its text)."""
    result = table_health(table_of(appends), config_thresholds={"snapshot-count": 1, "metadata-file-count": 1})
    crossed = [c for c in result.checks if c.crossed]
    assert crossed and all(c.command and c.recommendation for c in crossed)
    assert all(c.command in (c.recommendation or "") for c in crossed)
    names = ", ".join(dict.fromkeys(c.command for c in crossed if c.command))
    assert health_line(result).endswith(f"needs attention: {len(crossed)} check(s) ({names})")
    assert "command" not in result.to_json()["checks"][0]  # not part of the JSON document


def test_stale_partition_statistics_recommend_computing_them(appends: Path) -> None:
    t = table_of(appends)
    check = next(c for c in table_health(t).checks if c.id == "partition_stats_files.lag")
    assert not check.crossed and check.value is None  # a table without statistics is not asked to have them
    snaps = t.metadata.snapshots
    for with_stats, lag in ((snaps[-1], 0), (snaps[-4], 3)):
        stats = (PartitionStatisticsFile(with_stats.snapshot_id, f"{appends}/metadata/stats.parquet", 10),)
        doc = table_health(Table(t.address, t.metadata.replace(partition_statistics=stats), t.io)).to_json()
        assert doc["partition_stats_files"] == {"count": 1, "snapshots_since": lag}
        check = next(c for c in doc["checks"] if c["id"] == "partition_stats_files.lag")
        assert check["crossed"] == (lag > 0)
        assert (f"icectl compute-partition-stats {t.identifier}" in doc["recommendations"]) == (lag > 0)


def test_the_readme_lists_every_threshold_with_its_default(appends: Path) -> None:
    section = (Path(__file__).resolve().parents[4] / "README.md").read_text().split("### Table health", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block
    documented = check_config(tomllib.loads(block.group(1))["health"], "README.md")
    assert documented == thresholds_for(table_of(appends).metadata, {})


# The document's keys that helper D's charts and the HTML page are written against (issue 16's brief).
SCHEMA: dict[str, Any] = {
    "": ["view", "table", "location", "format_version", "current_snapshot_id", "checked_at_ms", "healthy",
         "snapshots", "metadata_files", "manifests", "data_files", "delete_files", "row_lineage", "timeline",
         "partition_stats", "orphans", "checks", "recommendations"],
    "snapshots": ["count", "oldest_ms", "newest_ms", "oldest_age_ms", "expirable_count", "max_snapshot_age_ms",
                  "min_snapshots_to_keep"],
    "metadata_files": ["count", "total_bytes"],
    "manifests": ["count", "data_count", "delete_count", "total_bytes", "mean_bytes", "mergeable_count"],
    "data_files": ["count", "total_bytes", "record_count", "target_file_size_bytes", "small_file_count",
                   "small_file_ratio", "size_histogram"],
    "delete_files": ["position_delete_file_count", "equality_delete_file_count", "dv_count", "delete_record_count",
                     "delete_file_ratio", "deleted_row_ratio", "top_partitions"],
    "row_lineage": ["enabled", "next_row_id"],
    "orphans": ["count", "total_bytes", "sample"],
}


def test_the_document_has_every_key_of_the_shared_schema_in_order(appends: Path) -> None:
    doc = table_health(table_of(appends), orphans=True).to_json()
    keys = [k for k in doc if k in SCHEMA[""]]
    assert keys == SCHEMA[""]
    for section, wanted in SCHEMA.items():
        if section:
            assert set(wanted) <= set(doc[section]), section
    assert set(doc["data_files"]["size_histogram"][0]) >= {"lower_bytes", "upper_bytes", "count", "total_bytes"}
    assert set(doc["timeline"][0]) >= {"start_ms", "end_ms", "snapshots", "operations"}
    assert set(doc["checks"][0]) >= {"id", "section", "title", "value", "threshold", "unit", "crossed", "message",
                                     "recommendation"}
    assert {c["section"] for c in doc["checks"]} <= set(doc)  # each check points at a section of the document
    assert doc["view"] == "health" and isinstance(doc["checked_at_ms"], int)


def test_a_v4_table_asks_compacts_own_plan(tmp_path: Path) -> None:
    build_appends(tmp_path / "t", 6)
    upgrade(table_of(tmp_path / "t"), 3)
    upgrade(table_of(tmp_path / "t"), 4)
    t = table_of(tmp_path / "t")
    doc = table_health(t).to_json()
    assert doc["format_version"] == 4 and doc["data_files"]["count"] == 6
    assert doc["row_lineage"] == {"enabled": True, "next_row_id": t.metadata.next_row_id}
    assert doc["manifests"]["mergeable_count"] == compact(t, CompactOptions(), dry_run=True).manifests_replaced > 0


def test_too_many_metadata_files_recommend_deleting_them_after_commit(appends: Path) -> None:
    set_properties(table_of(appends), {"icectl.health.metadata-file-count": "2"})
    t = table_of(appends)
    doc = table_health(t).to_json()
    files = sorted((appends / "metadata").glob("*.metadata.json"))
    logged = {Path(e.metadata_file).name for e in t.metadata.metadata_log} | {Path(t.metadata_location).name}
    assert doc["metadata_files"]["count"] == len(logged) == len(files) == 3
    assert doc["metadata_files"]["total_bytes"] == sum(f.stat().st_size for f in files)
    check = next(c for c in doc["checks"] if c["id"] == "metadata_files.count")
    assert check["crossed"] and check["threshold"] == 2
    assert check["recommendation"] == (f"icectl properties set {t.identifier} "
                                       "write.metadata.delete-after-commit.enabled=true")
    # Already deleting after commit: the next commit trims the log; nothing to recommend.
    set_properties(t, {"write.metadata.delete-after-commit.enabled": "true"})
    check = next(c for c in table_health(table_of(appends)).checks if c.id == "metadata_files.count")
    assert check.crossed and check.recommendation is None
    (appends / "metadata" / "v1.metadata.json").unlink()  # a logged file that is gone is not counted
    assert table_health(table_of(appends)).metadata_files["missing_count"] == 1

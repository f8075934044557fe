"""icectl's inspect views against Spark's own Iceberg metadata tables, on Spark-written tables.

Spark is the judge: every value icectl shows (paths, ids, sequence numbers, counts, partition
values, bounds) must equal what Spark's metadata table says for the same table.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from typing import Any

import pytest
from support.spark import metadata_table
from typer.testing import CliRunner

from icectl.cli.app import app

KINDS = ["v1_unpart", "v2_part", "v3_dv", "many_snaps"]


def icectl_json(*args: str) -> dict[str, Any]:
    """Run ``icectl ... --json`` in-process; stdout must be exactly one JSON document."""
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def rows(view: str, table_dir: str, *extra: str) -> list[dict[str, Any]]:
    return icectl_json("inspect", view, table_dir, *extra)["rows"]


def ms(value: Any) -> int | None:
    """A timestamp from either side as epoch milliseconds."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):  # Spark: naive local time
        return round(value.timestamp() * 1000)
    return round(datetime.datetime.fromisoformat(value).timestamp() * 1000)


def human(value: Any) -> Any:
    """Spark's Python values in icectl's JSON form (dates as ISO strings, bytes as hex)."""
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): human(v) for k, v in value.items()}
    if isinstance(value, list):
        return [human(v) for v in value]
    return value


@pytest.fixture(scope="module", params=KINDS)
def fixture_table(request: pytest.FixtureRequest, spark_tables: Any) -> Any:
    return spark_tables[request.param]


def test_snapshots(spark: Any, fixture_table: Any) -> None:
    ours = {r["snapshot_id"]: r for r in rows("snapshots", str(fixture_table.location))}
    theirs = metadata_table(spark, fixture_table.name, "snapshots")
    assert set(ours) == {r["snapshot_id"] for r in theirs}
    for t in theirs:
        o = ours[t["snapshot_id"]]
        assert (ms(o["committed_at"]), o["parent_id"], o["operation"], o["manifest_list"], o["summary"]) == (
            ms(t["committed_at"]), t["parent_id"], t["operation"], t["manifest_list"], t["summary"])


def test_history(spark: Any, fixture_table: Any) -> None:
    ours = [(ms(r["made_current_at"]), r["snapshot_id"], r["parent_id"], r["is_current_ancestor"])
            for r in rows("history", str(fixture_table.location))]
    theirs = [(ms(r["made_current_at"]), r["snapshot_id"], r["parent_id"], r["is_current_ancestor"])
              for r in metadata_table(spark, fixture_table.name, "history")]
    assert ours == theirs


def test_refs(spark: Any, fixture_table: Any) -> None:
    keys = ("name", "type", "snapshot_id", "max_reference_age_in_ms", "min_snapshots_to_keep",
            "max_snapshot_age_in_ms")
    ours = sorted(tuple(r[k] for k in keys) for r in rows("refs", str(fixture_table.location)))
    theirs = sorted(tuple(r[k] for k in keys) for r in metadata_table(spark, fixture_table.name, "refs"))
    assert ours == theirs


def test_metadata_log(spark: Any, fixture_table: Any) -> None:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (ms(r["timestamp"]), r["file"], r["latest_snapshot_id"], r["latest_schema_id"],
                r["latest_sequence_number"])

    ours = [key(r) for r in rows("metadata-log", str(fixture_table.location))]
    theirs = [key(r) for r in metadata_table(spark, fixture_table.name, "metadata_log_entries")]
    assert ours == theirs


MANIFEST_KEYS = ("content", "path", "length", "partition_spec_id", "added_snapshot_id", "added_data_files_count",
                 "existing_data_files_count", "deleted_data_files_count", "added_delete_files_count",
                 "existing_delete_files_count", "deleted_delete_files_count")


def test_manifests(spark: Any, fixture_table: Any) -> None:
    ours = {r["path"]: r for r in rows("manifests", str(fixture_table.location))}
    theirs = metadata_table(spark, fixture_table.name, "manifests")
    assert set(ours) == {t["path"] for t in theirs}
    for t in theirs:
        o = ours[t["path"]]
        assert {k: o[k] for k in MANIFEST_KEYS} == {k: t[k] for k in MANIFEST_KEYS}
        assert o["partition_summaries"] == human(t["partition_summaries"])


def test_all_manifests(spark: Any, fixture_table: Any) -> None:
    ours = Counter((r["path"], r["reference_snapshot_id"], r["length"])
                   for r in rows("manifests", str(fixture_table.location), "--all"))
    theirs = Counter((r["path"], r["reference_snapshot_id"], r["length"])
                     for r in metadata_table(spark, fixture_table.name, "all_manifests"))
    assert ours == theirs


FILE_KEYS = ("content", "file_format", "spec_id", "record_count", "file_size_in_bytes", "split_offsets",
             "equality_ids", "sort_order_id")
METRIC_KEYS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
               "upper_bounds")


def _file_view(r: dict[str, Any], version: int, metrics: bool) -> dict[str, Any]:
    keys = list(FILE_KEYS)
    if version >= 2:
        keys.append("referenced_data_file")
    if version >= 3:
        keys += ["first_row_id", "content_offset", "content_size_in_bytes"]
    if metrics:
        keys += list(METRIC_KEYS)
    out = {k: human(r.get(k)) for k in keys}
    out["partition"] = human(r.get("partition") or {})
    return out


@pytest.mark.parametrize("metrics", [False, True])
def test_files(spark: Any, fixture_table: Any, metrics: bool) -> None:
    args = ["--metrics"] if metrics else []
    v = fixture_table.format_version
    ours = {r["file_path"]: _file_view(r, v, metrics) for r in rows("files", str(fixture_table.location), *args)}
    theirs = {r["file_path"]: _file_view(r, v, metrics) for r in metadata_table(spark, fixture_table.name, "files")}
    assert ours == theirs
    if metrics:
        ours_rm = {r["file_path"]: human(r["readable_metrics"])
                   for r in rows("files", str(fixture_table.location), "--metrics")}
        for r in metadata_table(spark, fixture_table.name, "files"):
            for col, m in r["readable_metrics"].items():
                mine = ours_rm[r["file_path"]][col]
                for k in ("column_size", "value_count", "null_value_count", "nan_value_count"):
                    assert mine[k] == m[k], (r["file_path"], col, k)
                for k in ("lower_bound", "upper_bound"):
                    if isinstance(m[k], datetime.datetime):
                        assert ms(mine[k]) == ms(m[k])
                    elif m[k] is not None:
                        assert mine[k] == human(m[k]) or str(mine[k]) == str(m[k]), (col, k, mine[k], m[k])


def test_entries(spark: Any, fixture_table: Any) -> None:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["status"], r["snapshot_id"], r["sequence_number"], r["file_sequence_number"],
                r["data_file"]["file_path"], r["data_file"]["record_count"])

    ours = Counter(key(r) for r in rows("entries", str(fixture_table.location)))
    theirs = Counter(key(r) for r in metadata_table(spark, fixture_table.name, "entries"))
    assert ours == theirs


def test_partitions(spark: Any, fixture_table: Any) -> None:
    keys = ("spec_id", "record_count", "file_count", "total_data_file_size_in_bytes",
            "position_delete_file_count", "equality_delete_file_count", "last_updated_snapshot_id")

    def key(r: dict[str, Any]) -> str:
        return json.dumps([r.get("spec_id"), human(r.get("partition") or {})], sort_keys=True)

    ours = {key(r): r for r in rows("partitions", str(fixture_table.location))}
    theirs = {key(r): r for r in metadata_table(spark, fixture_table.name, "partitions")}
    assert set(ours) == set(theirs)
    for k, t in theirs.items():
        assert {c: ours[k].get(c) for c in keys if c in t} == {c: t[c] for c in keys if c in t}
        assert ms(ours[k]["last_updated_at"]) == ms(t["last_updated_at"])


def test_files_of_a_tag(spark: Any, spark_tables: Any) -> None:
    t = spark_tables["v2_part"]
    ours = {r["file_path"]: r["record_count"] for r in rows("files", str(t.location), "--ref", "after_merge")}
    theirs = {r["file_path"]: r["record_count"]
              for r in spark.sql(f"SELECT * FROM {t.name}.files VERSION AS OF 'after_merge'").collect()}
    assert ours == theirs and ours


def test_files_of_a_branch(spark: Any, spark_tables: Any) -> None:
    # Spark 3.5 cannot time-travel this metadata table after the partition evolution, so the judge is
    # the set of data files Spark actually reads rows from on the branch.
    t = spark_tables["v2_part"]
    ours = {r["file_path"] for r in rows("files", str(t.location), "--ref", "dev", "--content", "data")}
    read = {r[0].removeprefix("file:") for r in spark.sql(
        f"SELECT DISTINCT _file FROM {t.name} VERSION AS OF 'dev'").collect()}
    assert read and read <= ours
    main = {r["file_path"] for r in rows("files", str(t.location), "--content", "data")}
    assert ours != main


def test_deletion_vectors(spark: Any, spark_tables: Any) -> None:
    t = spark_tables["v3_dv"]
    dvs = rows("dvs", str(t.location))
    spark_dvs = [r for r in metadata_table(spark, t.name, "delete_files") if r["file_format"] == "PUFFIN"]
    assert len(dvs) == len(spark_dvs) > 0
    assert {(d["referenced_data_file"], d["content_offset"]) for d in dvs} == {
        (r["referenced_data_file"], r["content_offset"]) for r in spark_dvs}
    assert all(d["status"] == "ok" and d["cardinality"] == d["record_count"] for d in dvs)
    # At least one Puffin file holds DVs of several data files.
    assert max(Counter(d["puffin_path"] for d in dvs).values()) > 1
    # The positions deleted are the rows Spark no longer returns: cardinality sums per data file
    # match what Spark's position-delete metadata says.
    pos = metadata_table(spark, t.name, "position_deletes")
    per_file = Counter(r["file_path"] for r in pos)
    assert {d["referenced_data_file"]: d["cardinality"] for d in dvs} == dict(per_file)


def test_files_and_entries_from_a_warm_cache_equal_spark(spark: Any, fixture_table: Any, tmp_path: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The cached read path judged by Spark, not by icectl's uncached path: every manifest of the
    fixture goes into a fresh cache (small and fresh files too), then a second run answers from it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(cache))
    monkeypatch.setenv("ICECTL_CACHE_RACY_SECONDS", "0")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")
    monkeypatch.delenv("ICECTL_CACHE", raising=False)
    v, where = fixture_table.format_version, str(fixture_table.location)
    theirs_files = {r["file_path"]: _file_view(r, v, True) for r in metadata_table(spark, fixture_table.name, "files")}
    spark_entries = metadata_table(spark, fixture_table.name, "entries")
    theirs_entries = Counter((r["status"], r["snapshot_id"], r["sequence_number"], r["file_sequence_number"],
                              r["data_file"]["file_path"]) for r in spark_entries)
    for run in ("cold", "warm"):
        ours_files = {r["file_path"]: _file_view(r, v, True) for r in rows("files", where, "--metrics")}
        ours_entries = Counter((r["status"], r["snapshot_id"], r["sequence_number"], r["file_sequence_number"],
                                r["data_file"]["file_path"]) for r in rows("entries", where))
        assert ours_files == theirs_files, run
        assert ours_entries == theirs_entries, run
        if theirs_files:
            assert any(cache.rglob("*.arrow")), run  # the cache was really used

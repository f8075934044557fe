"""ops/partition_stats.py and codec/partition_stats_file.py on tables icectl writes (no Spark; the rows
and schema against Spark's compute_partition_stats on twin tables are in
tests/interop/test_partition_stats_vs_spark.py).

The expected counts come from the Parquet files themselves (pyarrow's row counts, the sizes on disk),
not from icectl's manifests. Hostile cases: an unknown snapshot, a damaged manifest, a concurrent
writer, an unpartitioned or empty table, a snapshot expired since its files were added.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.catalog.hadoop import FileSystemOperations
from icectl.cli.app import app
from icectl.codec.partition_stats_file import field_ids
from icectl.errors import CommitConflictError, ExitCode, NotFoundError
from icectl.ops import partition_stats
from icectl.ops.partition_stats import compute_partition_stats, compute_rows, read_partition_stats
from icectl.ops.properties import set_properties
from icectl.spec.manifest import DataFile, DataFileContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.table import load_table
from icectl.table.scan import manifests_of
from unit.ops.lifecycle.test_upgrade import icectl


def _file(path: Path, ids: list[int], region: str | None, day: int) -> str:
    n = len(ids)
    pq.write_table(pa.table({
        "id": pa.array(ids, pa.int64()), "region": pa.array([region] * n, pa.string()),
        "ts": pa.array([datetime.datetime(2024, 3, day, 1, tzinfo=datetime.UTC)] * n, pa.timestamp("us", tz="UTC"))}),
        path)
    return str(path)


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """v3, partitioned by (region, days(ts)); appends s1: us/day 1, s2: eu/day 2, s3: eu/day 2 again and
    a null region on day 1 (one file each)."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, region string, ts timestamptz", "--partition-by",
           "region, days(ts)", "--format-version", "3")
    icectl("add-files", str(d), _file(tmp_path / "a.parquet", [1, 2, 3], "us", 1))
    icectl("add-files", str(d), _file(tmp_path / "b.parquet", [4, 5], "eu", 2))
    icectl("add-files", str(d), _file(tmp_path / "c.parquet", [6], "eu", 2),
           _file(tmp_path / "n.parquet", [7], None, 1))
    return d


def _snapshots(d: Path) -> list[Any]:
    return sorted(load_table(str(d)).metadata.snapshots, key=lambda s: s.sequence_number)


def _listing(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()}


def _size(tmp: Path, name: str) -> int:
    return os.path.getsize(tmp / name)


def test_rows_are_the_files_counts_per_partition(table_dir: Path) -> None:
    tmp = table_dir.parent
    s1, s2, s3 = _snapshots(table_dir)
    before = _listing(table_dir)
    res = compute_partition_stats(load_table(str(table_dir)))
    assert res.snapshot_id == s3.snapshot_id and res.row_count == 3 and res.commit.commit_attempts == 1
    # Java's name, in the table's metadata folder, and nothing else written but the next metadata version.
    assert re.fullmatch(rf"{re.escape(str(table_dir))}/metadata/partition-stats-{s3.snapshot_id}-"
                        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.parquet", res.path)
    added = _listing(table_dir) - before
    assert added == {str(Path(res.path).relative_to(table_dir)), "metadata/v5.metadata.json"}
    on_disk = json.loads((table_dir / "metadata" / "v5.metadata.json").read_text())["partition-statistics"]
    assert on_disk == [{"snapshot-id": s3.snapshot_id, "statistics-path": res.path,
                        "file-size-in-bytes": os.path.getsize(res.path)}]
    rows = pq.read_table(res.path).to_pylist()
    day1, day2 = datetime.date(2024, 3, 1), datetime.date(2024, 3, 2)
    zero = {"position_delete_record_count": 0, "position_delete_file_count": 0, "equality_delete_record_count": 0,
            "equality_delete_file_count": 0, "total_record_count": None, "dv_count": 0}
    assert rows == [  # sorted by partition, nulls first
        {"partition": {"region": None, "ts_day": day1}, "spec_id": 0, "data_record_count": 1, "data_file_count": 1,
         "total_data_file_size_in_bytes": _size(tmp, "n.parquet"), **zero,
         "last_updated_at": s3.timestamp_ms, "last_updated_snapshot_id": s3.snapshot_id},
        {"partition": {"region": "eu", "ts_day": day2}, "spec_id": 0, "data_record_count": 3, "data_file_count": 2,
         "total_data_file_size_in_bytes": _size(tmp, "b.parquet") + _size(tmp, "c.parquet"), **zero,
         "last_updated_at": s3.timestamp_ms, "last_updated_snapshot_id": s3.snapshot_id},
        {"partition": {"region": "us", "ts_day": day1}, "spec_id": 0, "data_record_count": 3, "data_file_count": 1,
         "total_data_file_size_in_bytes": _size(tmp, "a.parquet"), **zero,
         "last_updated_at": s1.timestamp_ms, "last_updated_snapshot_id": s1.snapshot_id},
    ]
    schema = pq.read_schema(res.path)
    assert list(field_ids(schema)) == [
        ("partition", 1), ("partition.region", 1000), ("partition.ts_day", 1001), ("spec_id", 2),
        ("data_record_count", 3), ("data_file_count", 4), ("total_data_file_size_in_bytes", 5),
        ("position_delete_record_count", 6), ("position_delete_file_count", 7), ("equality_delete_record_count", 8),
        ("equality_delete_file_count", 9), ("total_record_count", 10), ("last_updated_at", 11),
        ("last_updated_snapshot_id", 12), ("dv_count", 13)]
    assert [f.name for f in schema if f.nullable] == ["total_record_count", "last_updated_at",
                                                      "last_updated_snapshot_id"]
    # read_partition_stats: the registered file's rows for that snapshot, None for another one.
    t = load_table(str(table_dir))
    got = read_partition_stats(t, s3.snapshot_id)
    assert got is not None and got.to_pylist() == rows
    assert read_partition_stats(t, s2.snapshot_id) is None


def test_an_older_snapshot_and_a_second_run(table_dir: Path) -> None:
    s1, s2, _ = _snapshots(table_dir)
    res = compute_partition_stats(load_table(str(table_dir)), s2.snapshot_id)
    rows = pq.read_table(res.path).to_pylist()
    assert [(r["partition"]["region"], r["data_file_count"], r["last_updated_snapshot_id"]) for r in rows] == [
        ("eu", 1, s2.snapshot_id), ("us", 1, s1.snapshot_id)]
    # The snapshot has a file now: Java returns it, nothing is written.
    before = _listing(table_dir)
    again = compute_partition_stats(load_table(str(table_dir)), s2.snapshot_id)
    assert again.existing and again.path == res.path and again.row_count == 2 and _listing(table_dir) == before


def test_an_expired_snapshot_updates_nothing(table_dir: Path) -> None:
    """Java takes last_updated from ``table.snapshot(entry.snapshotId())``, null once expired."""
    s1 = _snapshots(table_dir)[0]
    icectl("expire-snapshots", str(table_dir), "--snapshot-id", str(s1.snapshot_id))
    res = compute_partition_stats(load_table(str(table_dir)))
    us = next(r for r in pq.read_table(res.path).to_pylist() if r["partition"]["region"] == "us")
    assert us["data_file_count"] == 1 and us["last_updated_at"] is None and us["last_updated_snapshot_id"] is None


def test_dry_run_writes_nothing(table_dir: Path) -> None:
    before = _listing(table_dir)
    out = icectl("compute-partition-stats", str(table_dir), "--dry-run")
    assert _listing(table_dir) == before
    assert out["dry_run"] and out["row_count"] == 3 and out["path"].startswith(f"{table_dir}/metadata/partition-stats-")
    r = CliRunner().invoke(app, ["compute-partition-stats", str(table_dir), "--dry-run"])
    assert r.exit_code == 0 and "would write" in r.stdout and "3 partitions" in r.stdout


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_unknown_snapshot_exits_3_with_one_line(table_dir: Path) -> None:
    before = _listing(table_dir)
    r = _cli("compute-partition-stats", str(table_dir), "--snapshot", "12345")
    assert r.exit_code == ExitCode.NOT_FOUND and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "snapshot 12345 not found" in r.stderr
    assert _listing(table_dir) == before


def test_damaged_manifest_exits_4_and_leaves_nothing(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    path = manifests_of(t.metadata, t.metadata.current_snapshot(), t.io)[0].manifest_path
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])  # cut in half
    before = _listing(table_dir)
    r = _cli("compute-partition-stats", str(table_dir))
    assert r.exit_code == ExitCode.CORRUPT and r.stderr.count("\n") == 1
    assert _listing(table_dir) == before  # no file, no metadata version


def test_unpartitioned_is_refused_and_an_empty_table_has_nothing(tmp_path: Path) -> None:
    d = tmp_path / "u"
    icectl("create", str(d), "--schema", "id long")
    out = icectl("compute-partition-stats", str(d))  # no snapshot: Java's empty result, before any check
    assert out["snapshot_id"] is None and out["path"] is None and out["row_count"] == 0
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), tmp_path / "f.parquet")
    icectl("add-files", str(d), str(tmp_path / "f.parquet"))
    before = _listing(d)
    r = _cli("compute-partition-stats", str(d))
    assert r.exit_code == ExitCode.USAGE and "not partitioned" in r.stderr and r.stderr.count("\n") == 1
    assert _listing(d) == before


def test_a_concurrent_commit_is_retried(table_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer sets a property while we commit: our commit is retried on the fresh metadata."""
    real = FileSystemOperations.commit_change
    raced: list[bool] = []

    def racing(self: FileSystemOperations, current: Any, change: Any) -> Any:
        if not raced:
            raced.append(True)
            set_properties(load_table(str(table_dir)), {"owner": "other"})
        return real(self, current, change)

    monkeypatch.setattr(FileSystemOperations, "commit_change", racing)
    res = compute_partition_stats(load_table(str(table_dir)))
    md = load_table(str(table_dir)).metadata
    assert raced and res.commit.commit_attempts == 2 and md.properties["owner"] == "other"
    assert [s.statistics_path for s in md.partition_statistics] == [res.path]


def test_conflict_after_retries_exits_5_and_removes_the_file(table_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    set_properties(load_table(str(table_dir)), {"commit.retry.num-retries": "0"})
    real = FileSystemOperations.commit_change

    racing_now: list[bool] = []

    def racing(self: FileSystemOperations, current: Any, change: Any) -> Any:
        if not racing_now:  # every attempt of ours loses to another writer (whose commit goes through)
            racing_now.append(True)
            set_properties(load_table(str(table_dir)), {"owner": str(len(os.listdir(table_dir / "metadata")))})
            racing_now.pop()
        return real(self, current, change)

    monkeypatch.setattr(FileSystemOperations, "commit_change", racing)
    with pytest.raises(CommitConflictError) as info:
        compute_partition_stats(load_table(str(table_dir)))
    assert info.value.exit_code == ExitCode.CONFLICT
    assert not list((table_dir / "metadata").glob("partition-stats-*"))
    assert load_table(str(table_dir)).metadata.partition_statistics == ()


def test_a_snapshot_expired_meanwhile_is_not_registered(table_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer expires the snapshot between our compute and our commit: the retry finds it gone."""
    s1 = _snapshots(table_dir)[0]
    real = FileSystemOperations.commit_change
    raced: list[bool] = []

    def racing(self: FileSystemOperations, current: Any, change: Any) -> Any:
        if not raced:
            raced.append(True)
            icectl("expire-snapshots", str(table_dir), "--snapshot-id", str(s1.snapshot_id))
        return real(self, current, change)

    monkeypatch.setattr(FileSystemOperations, "commit_change", racing)
    with pytest.raises(NotFoundError, match="removed from table"):
        compute_partition_stats(load_table(str(table_dir)), s1.snapshot_id)
    assert raced and not list((table_dir / "metadata").glob("partition-stats-*"))
    assert load_table(str(table_dir)).metadata.partition_statistics == ()


def test_read_partition_stats_of_a_missing_or_damaged_file_is_none(table_dir: Path) -> None:
    res = compute_partition_stats(load_table(str(table_dir)))
    t = load_table(str(table_dir))
    Path(res.path).write_bytes(b"not parquet")
    assert read_partition_stats(t, res.snapshot_id) is None
    os.remove(res.path)
    assert read_partition_stats(t, res.snapshot_id) is None


def test_counting_rules_of_java_partition_stats(table_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's PartitionStats.liveEntry/deletedEntry on entries no fixture has: equality deletes, a v2
    position delete file next to a DV, a DELETED entry (moves last_updated, counts nothing), an entry of
    an unknown snapshot (moves nothing), and a DELETED entry alone (a row of zeros, as Java's
    computeIfAbsent makes one)."""
    s1, s2, s3 = _snapshots(table_dir)
    day = 19_784  # days(ts) of 2024-03-02
    C = DataFileContent

    def entry(status: ManifestEntryStatus, sid: int, content: DataFileContent, fmt: str, region: str,
              records: int, size: int) -> ManifestEntry:
        return ManifestEntry(status, sid, 1, 1, DataFile(content, f"/x/{region}-{records}", fmt, (region, day),
                                                         records, size))

    ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED
    entries = [
        entry(EXISTING, s1.snapshot_id, C.DATA, "PARQUET", "eu", 10, 100),
        entry(ADDED, s2.snapshot_id, C.EQUALITY_DELETES, "PARQUET", "eu", 3, 30),
        entry(ADDED, s2.snapshot_id, C.POSITION_DELETES, "PARQUET", "eu", 2, 20),
        entry(ADDED, s1.snapshot_id, C.POSITION_DELETES, "PUFFIN", "eu", 4, 40),
        entry(DELETED, s3.snapshot_id, C.DATA, "PARQUET", "eu", 99, 999),
        entry(ADDED, 424242, C.DATA, "PARQUET", "eu", 1, 1),  # its snapshot is not in the table
        entry(DELETED, s2.snapshot_id, C.DATA, "PARQUET", "gone", 5, 50),
    ]
    manifest = ManifestFile("/x/m.avro", 1, 0)
    monkeypatch.setattr(partition_stats, "manifests_of", lambda *a, **k: [manifest])
    monkeypatch.setattr(partition_stats, "iter_entries", lambda *a, **k: ((manifest, e) for e in entries))
    rows = compute_rows(load_table(str(table_dir)), s3)
    assert [{k: v for k, v in r.items() if k != "spec_id"} for r in rows] == [
        {"partition": ("eu", day), "data_record_count": 11, "data_file_count": 2, "total_data_file_size_in_bytes": 101,
         "position_delete_record_count": 6, "position_delete_file_count": 1, "equality_delete_record_count": 3,
         "equality_delete_file_count": 1, "total_record_count": None, "dv_count": 1,
         "last_updated_at": s3.timestamp_ms, "last_updated_snapshot_id": s3.snapshot_id},
        {"partition": ("gone", day), "data_record_count": 0, "data_file_count": 0, "total_data_file_size_in_bytes": 0,
         "position_delete_record_count": 0, "position_delete_file_count": 0, "equality_delete_record_count": 0,
         "equality_delete_file_count": 0, "total_record_count": None, "dv_count": 0,
         "last_updated_at": s2.timestamp_ms, "last_updated_snapshot_id": s2.snapshot_id},
    ]


def test_expire_removes_the_file_of_an_expired_snapshot(table_dir: Path) -> None:
    """As Java's RemoveSnapshots: the expired snapshot's partition statistics go from metadata and disk."""
    s1, _, s3 = _snapshots(table_dir)
    old = compute_partition_stats(load_table(str(table_dir)), s1.snapshot_id)
    kept = compute_partition_stats(load_table(str(table_dir)), s3.snapshot_id)
    icectl("expire-snapshots", str(table_dir), "--snapshot-id", str(s1.snapshot_id))
    t = load_table(str(table_dir))
    assert [s.snapshot_id for s in t.metadata.partition_statistics] == [s3.snapshot_id]
    assert not os.path.exists(str(old.path)) and os.path.exists(str(kept.path))
    assert read_partition_stats(t, s1.snapshot_id) is None and read_partition_stats(t, s3.snapshot_id) is not None


def test_an_unreadable_registered_file_is_kept_with_a_warning(table_dir: Path) -> None:
    res = compute_partition_stats(load_table(str(table_dir)))
    os.remove(str(res.path))
    again = compute_partition_stats(load_table(str(table_dir)))
    assert again.existing and again.row_count == 0 and "cannot be read" in again.warnings[0]


def test_v4_roots_give_the_rows_the_manifests_gave(table_dir: Path) -> None:
    """icectl's experimental v4: the same rows through root manifests, plus a file added at the root."""
    v3 = pq.read_table(str(compute_partition_stats(load_table(str(table_dir))).path)).to_pylist()
    icectl("upgrade", str(table_dir), "--to", "4", "--yes")
    icectl("add-files", str(table_dir), _file(table_dir.parent / "z.parquet", [8, 9], "zz", 3))
    res = compute_partition_stats(load_table(str(table_dir)))
    rows = pq.read_table(str(res.path)).to_pylist()
    assert rows[:-1] == v3 and res.row_count == 4
    assert rows[-1]["partition"] == {"region": "zz", "ts_day": datetime.date(2024, 3, 3)}
    assert rows[-1]["data_file_count"] == 1 and rows[-1]["data_record_count"] == 2
    assert rows[-1]["last_updated_snapshot_id"] == res.snapshot_id


def test_float_partitions_group_and_sort_as_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's Float.compare: every NaN is one partition, sorted last; -0.0 and 0.0 are two, -0.0 first."""
    d = tmp_path / "f"
    icectl("create", str(d), "--schema", "x double", "--partition-by", "x")
    pq.write_table(pa.table({"x": pa.array([1.0], pa.float64())}), tmp_path / "one.parquet")
    icectl("add-files", str(d), str(tmp_path / "one.parquet"))
    t = load_table(str(d))
    snap = t.metadata.current_snapshot()
    assert snap is not None
    values = [float("nan"), 0.0, float("nan"), -0.0, 1.0, float("-inf")]
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, snap.snapshot_id, 1, 1,
                             DataFile(DataFileContent.DATA, f"/x/{i}", "PARQUET", (v,), 1, 1))
               for i, v in enumerate(values)]
    manifest = ManifestFile("/x/m.avro", 1, 0)
    monkeypatch.setattr(partition_stats, "manifests_of", lambda *a, **k: [manifest])
    monkeypatch.setattr(partition_stats, "iter_entries", lambda *a, **k: ((manifest, e) for e in entries))
    rows = compute_rows(t, snap)
    got = [(repr(r["partition"][0]), r["data_file_count"]) for r in rows]
    assert got == [("-inf", 1), ("-0.0", 1), ("0.0", 1), ("1.0", 1), ("nan", 2)]

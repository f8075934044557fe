"""`icectl rewrite-position-delete-files` (issue 30, deliver 4) on Spark-written tables, Spark
judging the rows: a dry run changes nothing and plans what the run does; the new delete files are
sorted, carry Java's metrics and the group's largest data sequence number; v1 and v3 tables have
nothing to do, v4 is refused; bad options and a damaged delete file change nothing.
(The side-by-side comparison with Spark's procedure is tests/interop/test_rewrite_position_deletes_vs_spark.py.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.fixtures import FixtureTable
from support.spark import latest_metadata_json, metadata_table, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import CommitConflictError
from icectl.ops.rewrite_position_delete_files import PositionDeleteOptions, rewrite_position_delete_files
from icectl.table import load_table
from icectl.table.scan_tasks import live_files


def icectl(*args: str, expect: int = 0) -> Any:
    r = CliRunner().invoke(app, [*args, "--json"] if "--json" not in args and not expect else list(args))
    assert r.exit_code == expect, (args, r.exit_code, r.stdout, r.stderr)
    if expect:
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r.stderr
    return json.loads(r.stdout)


def listing(d: Path) -> dict[str, int]:
    return {str(p.relative_to(d)): p.stat().st_size for p in d.rglob("*") if p.is_file()}


def live_delete_files(t: FixtureTable) -> list[str]:
    table = load_table(str(t.location))
    return [f["file_path"] for f in _delete_rows(table)]


def _delete_rows(table: Any) -> list[dict[str, Any]]:
    md = table.metadata
    _, deletes = live_files(md, md.snapshot_for_ref("main"), table.io)
    return [{"file_path": d.file.file_path, "seq": d.data_sequence_number} for d in deletes]


def test_dry_run_changes_nothing_and_plans_what_the_run_does(spark: Any,
                                                             spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    before = listing(t.location)
    plan = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all", "--dry-run")
    assert listing(t.location) == before
    assert plan["dry_run"] is True and plan["snapshot_id"] is None and plan["would_delete"] == []
    assert "added_bytes_count" not in plan
    done = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all")
    for key in ("rewritten_delete_files_count", "added_delete_files_count", "rewritten_bytes_count",
                "dangling_deletes_count"):
        assert plan[key] == done[key], key
    assert [(g["files_in"], g["files_out"], g["records_out"]) for g in plan["groups"]] == \
        [(g["files_in"], g["files_out"], g["records_out"]) for g in done["groups"]]
    assert done["added_bytes_count"] == sum(g["bytes_out"] for g in done["groups"]) > 0


def test_new_files_are_sorted_with_javas_metrics_and_sequence_numbers(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    expected = table_rows_digest(spark, t.name)
    old = {d["file_path"]: d["seq"] for d in _delete_rows(load_table(str(t.location)))}
    doc = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all")
    spark.sql(f"REFRESH TABLE {t.name}")
    assert table_rows_digest(spark, t.name) == expected
    entries = [e for e in metadata_table(spark, t.name, "entries") if e["snapshot_id"] == doc["snapshot_id"]]
    added = [e for e in entries if e["status"] == 1]
    deleted = [e for e in entries if e["status"] == 2]
    assert {e["data_file"]["file_path"] for e in deleted} == set(old)
    assert len(added) == doc["added_delete_files_count"]
    md = latest_metadata_json(t.location)
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == doc["snapshot_id"])
    by_group_seq = {g["data_sequence_number"] for g in doc["groups"]}
    for e in added:
        f = e["data_file"]
        assert f["content"] == 1 and f["file_path"].endswith("-deletes.parquet")
        assert e["sequence_number"] in by_group_seq and e["file_sequence_number"] == snap["sequence-number"]
        assert f["referenced_data_file"] is None  # Java 1.10 derives it from the file_path bounds
        assert 2147483546 not in (f["value_counts"] or {}) and 2147483545 not in (f["null_value_counts"] or {})
        rows = pq.read_table(f["file_path"].removeprefix("file:"))
        assert rows.schema.names == ["file_path", "pos"]
        assert rows.schema.field("file_path").metadata[b"PARQUET:field_id"] == b"2147483546"
        pairs = list(zip(rows.column("file_path").to_pylist(), rows.column("pos").to_pylist(), strict=True))
        assert pairs == sorted(pairs)
        paths = {p for p, _ in pairs}
        assert len(paths) == 1  # write.delete.granularity defaults to file in Spark
        assert f["lower_bounds"][2147483546].decode() == f["upper_bounds"][2147483546].decode() == next(iter(paths))
    assert max(e["sequence_number"] for e in added) == max(old.values())


def test_partition_granularity_writes_a_file_per_group(spark: Any,
                                                       spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    spark.sql(f"ALTER TABLE {t.name} SET TBLPROPERTIES ('write.delete.granularity'='partition')")
    expected = table_rows_digest(spark, t.name)
    doc = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all")
    assert doc["delete_granularity"] == "partition"
    assert doc["added_delete_files_count"] == sum(1 for g in doc["groups"] if g["records_out"])
    spark.sql(f"REFRESH TABLE {t.name}")
    assert table_rows_digest(spark, t.name) == expected


def test_dangling_deletes_are_dropped(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    icectl("rewrite-data-files", str(t.location), "--rewrite-all")
    spark.sql(f"REFRESH TABLE {t.name}")
    expected = table_rows_digest(spark, t.name)
    # (Spark 1.10 cannot read v2_part's position_deletes table: a list column, apache/iceberg#15080.)
    n = sum(f["record_count"] for f in metadata_table(spark, t.name, "delete_files"))
    assert n > 0
    doc = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all")
    assert doc["dangling_deletes_count"] == n and doc["added_delete_files_count"] == 0
    spark.sql(f"REFRESH TABLE {t.name}")
    assert metadata_table(spark, t.name, "delete_files") == []
    assert table_rows_digest(spark, t.name) == expected


def test_branch_option_rewrites_that_branch_only(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    main_before = table_rows_digest(spark, t.name)
    dev_before = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF 'dev'")
    md = latest_metadata_json(t.location)
    main_head = md["current-snapshot-id"]
    doc = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all", "--branch", "dev")
    assert doc["rewritten_delete_files_count"] > 0
    md = latest_metadata_json(t.location)
    assert md["current-snapshot-id"] == main_head and md["refs"]["dev"]["snapshot-id"] == doc["snapshot_id"]
    spark.sql(f"REFRESH TABLE {t.name}")
    assert table_rows_digest(spark, t.name) == main_before
    assert table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF 'dev'") == dev_before
    err = icectl("rewrite-position-delete-files", str(t.location), "--branch", "after_merge", expect=6)
    assert "tag" in err


@pytest.mark.parametrize("kind,words", [("v1_unpart", "v1"), ("v3_dv", "deletion vectors")])
def test_v1_and_v3_have_nothing_to_do(spark: Any, spark_clone: Callable[..., FixtureTable], kind: str,
                                      words: str) -> None:
    t = spark_clone(kind)
    before = listing(t.location)
    doc = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all")
    assert doc["snapshot_id"] is None and doc["rewritten_delete_files_count"] == 0 and words in doc["reason"]
    assert listing(t.location) == before


@pytest.mark.parametrize("args,words", [
    (["--target-file-size-bytes", "0"], "must be > 0"),
    (["--min-input-files", "0"], "min-input-files"),
    (["--max-file-group-size-bytes", "0"], "max-file-group-size-bytes"),
    (["--target-file-size-bytes", "1000", "--min-file-size-bytes", "2000"], "min-file-size-bytes"),
    (["--target-file-size-bytes", "1000", "--max-file-size-bytes", "900"], "max-file-size-bytes"),
    (["--target-file-size-bytes", "lots"], "not a size"),
])
def test_bad_options_are_one_line_exit_2_and_change_nothing(spark: Any, spark_clone: Callable[..., FixtureTable],
                                                            args: list[str], words: str) -> None:
    t = spark_clone("v2_part")
    before = listing(t.location)
    err = icectl("rewrite-position-delete-files", str(t.location), *args, expect=2)
    assert words in err
    assert listing(t.location) == before


def test_a_damaged_delete_file_is_exit_4_and_nothing_is_committed_or_left(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    victim = Path(sorted(live_delete_files(t))[-1].removeprefix("file:"))
    victim.write_bytes(b"PAR1 not really" + b"\0" * 64)
    before = listing(t.location)
    err = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all", expect=4)
    assert str(victim) in err
    assert listing(t.location) == before  # no metadata, no new delete file left behind


def test_a_rewritten_delete_file_removed_meanwhile_is_a_conflict_and_nothing_is_left(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """Java's failMissingDeletePaths: the delete files a rewrite planned on left the branch head
    before its commit (another rewrite replaced them): exit 5, and its new files are removed."""
    t = spark_clone("v2_part")
    stale = load_table(str(t.location))
    icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all")
    after_first = {p for p in listing(t.location) if p.startswith("data/")}
    with pytest.raises(CommitConflictError):
        rewrite_position_delete_files(stale, PositionDeleteOptions(rewrite_all=True))
    assert {p for p in listing(t.location) if p.startswith("data/")} == after_first


def test_v4_is_refused_with_one_line_and_nothing_written(spark: Any,
                                                         spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    icectl("upgrade", str(t.location), "--to", "3")
    icectl("upgrade", str(t.location), "--to", "4", "--yes")
    before = listing(t.location)
    err = icectl("rewrite-position-delete-files", str(t.location), expect=4)
    assert "v4" in err
    assert listing(t.location) == before

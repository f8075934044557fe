"""`icectl rewrite-data-files` (issue 30) on Spark-written tables, Spark judging the rows.

Every case runs on a private copy of a fixture: the rows Spark reads at the head, at every snapshot
and at every ref are the same before and after; the new snapshot is a `replace` whose added entries
keep the starting snapshot's data sequence number; in v3 each row keeps its `_row_id` and
`_last_updated_sequence_number` and the deletion vectors of rewritten files leave the snapshot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FixtureTable
from support.spark import latest_metadata_json, metadata_table, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import CommitConflictError
from icectl.ops.rewrite_data_files import RewriteOptions, rewrite_data_files
from icectl.table import load_table


def icectl(*args: str, expect: int = 0) -> Any:
    r = CliRunner().invoke(app, [*args, "--json"] if "--json" not in args and not expect else list(args))
    assert r.exit_code == expect, (args, r.exit_code, r.stdout, r.stderr)
    if expect:
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r.stderr
    return json.loads(r.stdout)


def versions(spark: Any, t: FixtureTable, also: int | None = None) -> dict[str, tuple[int, str]]:
    """Spark's rows of ``t`` at its head and at every snapshot and ref (past a dozen snapshots: the
    first, the last and every tenth between), and at snapshot ``also``."""
    spark.sql(f"REFRESH TABLE {t.name}")
    md = latest_metadata_json(t.location)
    out = {"current": table_rows_digest(spark, t.name)}
    snapshots = [s for s in md.get("snapshots", []) if s["snapshot-id"] != also]
    if len(snapshots) > 12:  # 200 appends: the first, the last and ten between judge as well as all
        snapshots = [*snapshots[::len(snapshots) // 10], snapshots[-1]]
    if also is not None:
        snapshots.append({"snapshot-id": also})
    for s in snapshots:
        sid = s["snapshot-id"]
        out[str(sid)] = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF {sid}")
    for ref in md.get("refs", {}):
        out[ref] = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF '{ref}'")
    return out


def listing(d: Path) -> dict[str, int]:
    return {str(p.relative_to(d)): p.stat().st_size for p in d.rglob("*") if p.is_file()}


def _new_entries(spark: Any, t: FixtureTable, snapshot_id: int) -> list[dict[str, Any]]:
    spark.sql(f"REFRESH TABLE {t.name}")
    return [e for e in metadata_table(spark, t.name, "entries") if e["snapshot_id"] == snapshot_id]


@pytest.mark.parametrize("kind,options", [
    ("many_appends", ["--min-input-files", "2"]),
    ("v1_unpart", ["--rewrite-all"]),
    ("v2_part", ["--rewrite-all"]),
    ("v3_dv", ["--rewrite-all"]),
])
def test_spark_reads_the_same_rows_at_every_snapshot_and_ref(
        spark: Any, spark_clone: Callable[..., FixtureTable], kind: str, options: list[str]) -> None:
    t = spark_clone(kind)
    before = versions(spark, t)
    start = latest_metadata_json(t.location)
    start_head = next(s for s in start["snapshots"] if s["snapshot-id"] == start["current-snapshot-id"])
    doc = icectl("rewrite-data-files", str(t.location), *options)
    assert doc["rewritten_data_files_count"] > 1 and doc["added_data_files_count"] >= 1
    assert doc["added_data_files_count"] < doc["rewritten_data_files_count"]
    after = versions(spark, t, also=doc["snapshot_id"])
    assert after.pop(str(doc["snapshot_id"])) == before["current"]
    assert after == before
    md = latest_metadata_json(t.location)
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == doc["snapshot_id"])
    assert snap["summary"]["operation"] == "replace"
    assert snap["summary"]["deleted-data-files"] == str(doc["rewritten_data_files_count"])
    assert snap["summary"]["added-data-files"] == str(doc["added_data_files_count"])
    entries = _new_entries(spark, t, doc["snapshot_id"])
    added = [e for e in entries if e["status"] == 1]
    assert len(added) == doc["added_data_files_count"]
    if md["format-version"] >= 2:  # the starting snapshot's sequence number (use-starting-sequence-number)
        assert {e["sequence_number"] for e in added} == {start_head["sequence-number"]}
        assert {e["file_sequence_number"] for e in added} == {snap["sequence-number"]}
    # Spark's own scan of the files table agrees with the rows: every live row is in a listed file.
    files = metadata_table(spark, t.name, "data_files")
    assert sum(f["record_count"] for f in files) >= before["current"][0]
    # Spark can still write to it.
    spark.sql(f"DELETE FROM {t.name} WHERE id % 2 = 0")
    assert table_rows_digest(spark, t.name)[0] == spark.sql(
        f"SELECT count(*) AS n FROM {t.name} VERSION AS OF {doc['snapshot_id']} WHERE id % 2 = 1").collect()[0].n


def test_v3_rows_keep_their_row_ids_and_deletion_vectors_go(spark: Any,
                                                             spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v3_dv")
    query = f"SELECT id, _row_id, _last_updated_sequence_number FROM {t.name} ORDER BY id"
    lineage = [tuple(r) for r in spark.sql(query).collect()]
    assert len({r[1] for r in lineage}) == len(lineage)  # the ids the fixture's rows have
    dvs_before = [d for d in metadata_table(spark, t.name, "delete_files") if d["file_format"] == "PUFFIN"]
    assert dvs_before
    doc = icectl("rewrite-data-files", str(t.location), "--rewrite-all")
    assert doc["removed_delete_files_count"] == len(dvs_before)
    spark.sql(f"REFRESH TABLE {t.name}")
    assert [tuple(r) for r in spark.sql(query).collect()] == lineage
    assert metadata_table(spark, t.name, "delete_files") == []
    md = latest_metadata_json(t.location)
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == doc["snapshot_id"])
    assert snap["summary"]["removed-dvs"] == str(len(dvs_before))


def test_dry_run_writes_nothing_and_plans_what_the_run_does(spark: Any,
                                                             spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("many_appends")
    before = listing(t.location)
    plan = icectl("rewrite-data-files", str(t.location), "--min-input-files", "2", "--dry-run")
    assert listing(t.location) == before
    assert plan["dry_run"] is True and plan["snapshot_id"] is None and plan["would_delete"] == []
    done = icectl("rewrite-data-files", str(t.location), "--min-input-files", "2")
    for key in ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
                "removed_delete_files_count"):
        assert plan[key] == done[key], key
    assert [g["files_in"] for g in plan["groups"]] == [g["files_in"] for g in done["groups"]]
    # Nothing left to do on the compacted table: each partition has one file now.
    again = icectl("rewrite-data-files", str(t.location), "--min-input-files", "2")
    assert again["groups"] == [] and again["snapshot_id"] is None


def test_nothing_to_do_under_spark_defaults_commits_nothing(spark: Any,
                                                             spark_clone: Callable[..., FixtureTable]) -> None:
    """Spark's defaults (min-input-files 5): v1_unpart's handful of files stays as it is."""
    t = spark_clone("v1_unpart")
    before = listing(t.location)
    doc = icectl("rewrite-data-files", str(t.location))
    if doc["groups"]:
        pytest.skip("the fixture has enough files for a group under the defaults")
    assert doc["snapshot_id"] is None and listing(t.location) == before


def test_a_delete_committed_meanwhile_fails_the_rewrite_and_nothing_is_left(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """Java's validateNoNewDeletesForDataFiles: Spark deletes rows of a file being rewritten after
    icectl planned; the commit must fail (exit 5), the table keep Spark's delete, and the data
    files icectl wrote be removed."""
    t = spark_clone("v3_dv")
    stale = load_table(str(t.location))  # planned on this head
    spark.sql(f"DELETE FROM {t.name} WHERE id = 1")
    expected = table_rows_digest(spark, t.name)
    data_before = {p for p in listing(t.location) if p.startswith("data/")}
    with pytest.raises(CommitConflictError):
        rewrite_data_files(stale, RewriteOptions(rewrite_all=True))
    spark.sql(f"REFRESH TABLE {t.name}")
    assert table_rows_digest(spark, t.name) == expected
    assert {p for p in listing(t.location) if p.startswith("data/")} == data_before


@pytest.mark.parametrize("args,code,words", [
    (["--target-file-size-bytes", "0"], 2, "must be > 0"),
    (["--strategy", "sort"], 2, "binpack"),
    (["--min-input-files", "0"], 2, "min-input-files"),
    (["--delete-ratio-threshold", "1.5"], 2, "delete-ratio-threshold"),
    (["--target-file-size-bytes", "1000", "--min-file-size-bytes", "2000"], 2, "min-file-size-bytes"),
])
def test_bad_options_are_one_line_and_change_nothing(spark: Any, spark_clone: Callable[..., FixtureTable],
                                                     args: list[str], code: int, words: str) -> None:
    t = spark_clone("many_appends")
    before = listing(t.location)
    err = icectl("rewrite-data-files", str(t.location), *args, expect=code)
    assert words in err
    assert listing(t.location) == before


def test_a_damaged_data_file_is_exit_4_and_nothing_is_committed(spark: Any,
                                                                spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("many_appends")
    victim = sorted((t.location / "data").rglob("*.parquet"))[3]
    victim.write_bytes(b"PAR1 not really" + b"\0" * 64)
    metadata_before = {p for p in listing(t.location) if p.startswith("metadata/")}
    data_before = {p for p in listing(t.location) if p.startswith("data/")}
    err = icectl("rewrite-data-files", str(t.location), "--min-input-files", "2", expect=4)
    assert str(victim) in err
    assert {p for p in listing(t.location) if p.startswith("metadata/")} == metadata_before
    assert {p for p in listing(t.location) if p.startswith("data/")} == data_before  # what it wrote is gone


def test_files_of_a_table_never_leave_it(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """The rewrite deletes nothing from storage: every data, delete, manifest and metadata file is
    still there (only the Hadoop catalog's version hint is replaced, as every commit does)."""
    t = spark_clone("v2_part")
    before = [p for p in listing(t.location) if "version-hint" not in p]
    assert any(p.endswith("-deletes.parquet") for p in before)
    icectl("rewrite-data-files", str(t.location), "--rewrite-all")
    assert not [p for p in before if not os.path.exists(t.location / p)]

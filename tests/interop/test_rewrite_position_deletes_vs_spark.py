"""`icectl rewrite-position-delete-files` against Spark's `rewrite_position_delete_files` (issue 30,
deliver 4), on twin clones of the v2_part fixture (position deletes from DELETE, UPDATE and MERGE,
two partition specs, a tag and a branch).

Iceberg 1.10's procedure cannot read the position deletes of a table with a list or map column
(``ValidationException: Invalid partition field parent: list<string>``, apache/iceberg#15080,
fixed after 1.10 by #15079): the twins are v2_part with its ``tags`` and ``attrs`` columns dropped
(the snapshots, deletes, specs and refs stay). Spark runs its procedure on one twin, icectl on
the other: Spark reads the same rows on icectl's twin at the head and at every snapshot and ref,
both twins hold the same (data file, position) deletes in the same number of delete files, and
the counts match Spark's except the bytes (two Parquet writers).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FixtureTable
from support.spark import latest_metadata_json, metadata_table, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import CommitConflictError
from icectl.ops.rewrite_position_delete_files import PositionDeleteOptions, rewrite_position_delete_files
from icectl.table import load_table


def icectl(*args: str) -> Any:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, (args, r.exit_code, r.stdout, r.stderr)
    return json.loads(r.stdout)


def versions(spark: Any, t: FixtureTable, skip: int | None = None) -> dict[str, tuple[int, str]]:
    """Spark's rows of ``t`` at its head and at every snapshot and ref (but snapshot ``skip``)."""
    spark.sql(f"REFRESH TABLE {t.name}")
    md = latest_metadata_json(t.location)
    out = {"current": table_rows_digest(spark, t.name)}
    for s in md.get("snapshots", []):
        if s["snapshot-id"] != skip:
            out[str(s["snapshot-id"])] = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF "
                                                                  f"{s['snapshot-id']}")
    for ref in md.get("refs", {}):
        out[ref] = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF '{ref}'")
    return out


def _relative(path: str, location: Path) -> str:
    return path.removeprefix("file:").removeprefix(str(location))


def position_deletes(spark: Any, t: FixtureTable) -> list[tuple[str, int]]:
    """Every (data file, position) of the head's position delete files, paths relative to the table."""
    rows = spark.sql(f"SELECT file_path, pos FROM {t.name}.position_deletes").collect()
    return sorted((_relative(r.file_path, t.location), r.pos) for r in rows)


def call(spark: Any, t: FixtureTable, options: str = "") -> Any:
    opts = f", options => map({options})" if options else ""
    return spark.sql(f"CALL local.system.rewrite_position_delete_files(table => '{t.name.split('.', 1)[1]}'"
                     f"{opts})").collect()[0]


def twins(spark: Any, spark_clone: Callable[..., FixtureTable]) -> tuple[FixtureTable, FixtureTable]:
    flat = spark_clone("v2_part")
    spark.sql(f"ALTER TABLE {flat.name} DROP COLUMNS (tags, attrs)")
    return spark_clone(flat.name), spark_clone(flat.name)


def test_sparks_procedure_fails_on_v2_part_and_icectls_does_not(spark: Any,
                                                                spark_clone: Callable[..., FixtureTable]) -> None:
    """Java 1.10's bug (#15080) on a table with list and map columns; icectl rewrites it."""
    t = spark_clone("v2_part")
    expected = table_rows_digest(spark, t.name)
    with pytest.raises(Exception, match="Invalid partition field parent"):
        call(spark, t, "'rewrite-all', 'true'")
    doc = icectl("rewrite-position-delete-files", str(t.location), "--rewrite-all")
    assert doc["rewritten_delete_files_count"] >= doc["added_delete_files_count"] > 0
    spark.sql(f"REFRESH TABLE {t.name}")
    assert table_rows_digest(spark, t.name) == expected


def test_icectl_twin_matches_sparks_procedure(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    ours, theirs = twins(spark, spark_clone)
    before = versions(spark, ours)
    deletes_before = position_deletes(spark, ours)
    assert deletes_before and deletes_before == position_deletes(spark, theirs)
    # Each twin's own delete file sizes: the clones' relocated paths compress a few bytes apart.
    sizes = {t.name: sum(f["file_size_in_bytes"] for f in metadata_table(spark, t.name, "delete_files"))
             for t in (ours, theirs)}
    t0 = time.perf_counter()
    spark_row = call(spark, theirs, "'rewrite-all', 'true'")
    t1 = time.perf_counter()
    doc = icectl("rewrite-position-delete-files", str(ours.location), "--rewrite-all")
    t2 = time.perf_counter()
    # Rows: unchanged at the head and at every snapshot and ref (the tag and branch dev keep theirs).
    after = versions(spark, ours, skip=doc["snapshot_id"])
    assert after == before
    assert table_rows_digest(spark, f"SELECT * FROM {ours.name} VERSION AS OF {doc['snapshot_id']}") \
        == before["current"]
    spark.sql(f"REFRESH TABLE {theirs.name}")
    assert table_rows_digest(spark, theirs.name) == before["current"]
    # The same deletes on both twins (none dangling in this fixture), in the same number of files.
    assert position_deletes(spark, ours) == position_deletes(spark, theirs) == deletes_before
    assert doc["rewritten_delete_files_count"] == spark_row.rewritten_delete_files_count > 0
    assert doc["rewritten_bytes_count"] == sizes[ours.name] and spark_row.rewritten_bytes_count == sizes[theirs.name]
    assert doc["added_delete_files_count"] == spark_row.added_delete_files_count > 0
    print(f"[rewrite-position-delete-files] spark {tuple(spark_row)} icectl "
          f"({doc['rewritten_delete_files_count']}, {doc['added_delete_files_count']}, "
          f"{doc['rewritten_bytes_count']}, {doc['added_bytes_count']}); seconds: spark {t1 - t0:.2f} "
          f"icectl {t2 - t1:.2f}", flush=True)
    # Bytes: two Parquet writers (parquet-mr's and Arrow's); the same order of magnitude.
    assert 0.5 < doc["added_bytes_count"] / spark_row.added_bytes_count < 2, (doc["added_bytes_count"],
                                                                              spark_row.added_bytes_count)
    # delete_files on icectl's twin: what Spark's twin lists (counts, referenced files, bounds).
    spark.sql(f"REFRESH TABLE {ours.name}")

    def described(t: FixtureTable) -> list[tuple[Any, ...]]:
        out = []
        for f in metadata_table(spark, t.name, "delete_files"):
            lo, hi = f["lower_bounds"].get(2147483546), f["upper_bounds"].get(2147483546)
            out.append((f["content"], f["spec_id"], f["record_count"],
                        _relative(lo.decode(), t.location) if lo else None,
                        _relative(hi.decode(), t.location) if hi else None,
                        f["value_counts"], f["null_value_counts"], f["referenced_data_file"]))
        return sorted(out, key=repr)

    assert described(ours) == described(theirs)
    md = latest_metadata_json(ours.location)
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == doc["snapshot_id"])
    theirs_md = latest_metadata_json(theirs.location)
    theirs_snap = next(s for s in theirs_md["snapshots"] if s["snapshot-id"] == theirs_md["current-snapshot-id"])
    assert snap["summary"]["operation"] == theirs_snap["summary"]["operation"] == "replace"
    for key in ("removed-position-delete-files", "added-position-delete-files", "removed-position-deletes",
                "added-position-deletes", "total-position-deletes", "total-delete-files", "total-records"):
        assert snap["summary"].get(key) == theirs_snap["summary"].get(key), key
    # Sequence numbers as Java assigns them: each new file the largest of its group's rewritten ones.
    ours_entries = sorted((e["sequence_number"], e["file_sequence_number"]) for e in
                          metadata_table(spark, ours.name, "entries")
                          if e["snapshot_id"] == doc["snapshot_id"] and e["status"] == 1)
    theirs_entries = sorted((e["sequence_number"], e["file_sequence_number"]) for e in
                            metadata_table(spark, theirs.name, "entries")
                            if e["snapshot_id"] == theirs_snap["snapshot-id"] and e["status"] == 1)
    assert ours_entries == theirs_entries
    # Spark can still delete rows of icectl's twin.
    spark.sql(f"DELETE FROM {ours.name} WHERE id % 3 = 1")
    spark.sql(f"DELETE FROM {theirs.name} WHERE id % 3 = 1")
    assert table_rows_digest(spark, ours.name) == table_rows_digest(spark, theirs.name)


def test_dangling_deletes_are_dropped_as_spark_drops_them(spark: Any,
                                                          spark_clone: Callable[..., FixtureTable]) -> None:
    """After rewrite-data-files --rewrite-all every position delete of main is dangling (its data
    file left the snapshot): both procedures drop them all and add no delete file."""
    ours, theirs = twins(spark, spark_clone)
    for t in (ours, theirs):
        icectl("rewrite-data-files", str(t.location), "--rewrite-all")
    spark.sql(f"REFRESH TABLE {ours.name}")
    expected = table_rows_digest(spark, ours.name)
    dangling = len(position_deletes(spark, ours))
    assert dangling > 0
    spark_row = call(spark, theirs)  # Spark's defaults: min-input-files 5 per partition
    doc = icectl("rewrite-position-delete-files", str(ours.location))
    assert doc["rewritten_delete_files_count"] == spark_row.rewritten_delete_files_count
    assert doc["added_delete_files_count"] == spark_row.added_delete_files_count
    spark.sql(f"REFRESH TABLE {theirs.name}")
    assert table_rows_digest(spark, ours.name) == table_rows_digest(spark, theirs.name) == expected
    assert position_deletes(spark, ours) == position_deletes(spark, theirs)
    left = len(position_deletes(spark, ours))  # what the defaults left (groups of fewer than 5 files)
    again = icectl("rewrite-position-delete-files", str(ours.location), "--rewrite-all")
    assert again["added_delete_files_count"] == 0 and again["dangling_deletes_count"] == left
    spark.sql(f"REFRESH TABLE {ours.name}")
    assert metadata_table(spark, ours.name, "delete_files") == []
    assert table_rows_digest(spark, ours.name) == expected


def v3_with_leftovers(spark: Any, spark_clone: Callable[..., FixtureTable]) -> FixtureTable:
    """v2_part (list and map columns dropped) upgraded to v3, then a DELETE: position delete
    files from v2 and deletion vectors side by side."""
    flat = spark_clone("v2_part")
    spark.sql(f"ALTER TABLE {flat.name} DROP COLUMNS (tags, attrs)")
    spark.sql(f"ALTER TABLE {flat.name} SET TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"DELETE FROM {flat.name} WHERE id % 11 = 0")
    return flat


def test_v3_leftover_position_deletes_become_deletion_vectors_as_spark_makes_them(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """A v2 table upgraded to v3 keeps its position delete files; a later DELETE writes DVs. Spark's
    procedure (requiresRewriteToDVs) rewrites them, with the DVs of their partitions, into DVs."""
    flat = v3_with_leftovers(spark, spark_clone)
    ours, theirs = spark_clone(flat.name), spark_clone(flat.name)
    before = versions(spark, ours)
    formats = {f["file_format"] for f in metadata_table(spark, ours.name, "delete_files")}
    assert formats == {"PARQUET", "PUFFIN"}, formats
    spark_row = call(spark, theirs, "'rewrite-all', 'true'")
    doc = icectl("rewrite-position-delete-files", str(ours.location), "--rewrite-all")
    assert versions(spark, ours, skip=doc["snapshot_id"]) == before
    spark.sql(f"REFRESH TABLE {theirs.name}")
    assert table_rows_digest(spark, ours.name) == table_rows_digest(spark, theirs.name) == before["current"]
    assert doc["rewritten_delete_files_count"] == spark_row.rewritten_delete_files_count > 0
    assert doc["added_delete_files_count"] == spark_row.added_delete_files_count > 0

    def described(t: FixtureTable) -> list[tuple[Any, ...]]:
        return sorted((f["file_format"], f["record_count"], _relative(f["referenced_data_file"] or "", t.location))
                      for f in metadata_table(spark, t.name, "delete_files"))

    assert described(ours) == described(theirs)
    assert {d[0] for d in described(ours)} == {"PUFFIN"}
    again = icectl("rewrite-position-delete-files", str(ours.location))
    assert again["snapshot_id"] is None and "deletion vectors" in again["reason"]
    # Spark's row lineage and later writes still work on icectl's twin.
    spark.sql(f"DELETE FROM {ours.name} WHERE id % 13 = 0")
    spark.sql(f"DELETE FROM {theirs.name} WHERE id % 13 = 0")
    assert table_rows_digest(spark, ours.name) == table_rows_digest(spark, theirs.name)


def test_v3_a_dv_added_meanwhile_for_a_rewritten_data_file_fails_the_commit(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """Spark deletes rows after icectl planned: its new DVs name data files icectl writes DVs for.
    Two DVs for one data file would break the table (Java's RewriteFiles does not check this): the
    commit fails with exit 5 before anything else, Spark's rows stay, icectl's Puffin files go."""
    t = v3_with_leftovers(spark, spark_clone)
    stale = load_table(str(t.location))
    spark.sql(f"DELETE FROM {t.name} WHERE id % 7 = 4")
    expected = table_rows_digest(spark, t.name)
    files_before = {p for p in t.location.rglob("*") if p.is_file()}
    with pytest.raises(CommitConflictError, match="added meanwhile"):
        rewrite_position_delete_files(stale, PositionDeleteOptions(rewrite_all=True))
    spark.sql(f"REFRESH TABLE {t.name}")
    assert table_rows_digest(spark, t.name) == expected
    assert {p for p in t.location.rglob("*") if p.is_file()} == files_before

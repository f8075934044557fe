"""``spark_clone`` copies a fixture's directory and rewrites its paths (support.relocate) instead of
rebuilding it with Spark: Spark must read the copy as the same table (every snapshot, time travel,
refs, files), icectl must validate it clean, and Hadoop's checksum sidecars must be ones Hadoop
itself would have written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FIXTURE_KINDS, FixtureTable, LazyFixtureTables
from support.relocate import hadoop_crc
from support.spark import latest_metadata_json, metadata_table, table_rows_digest

from icectl.table import load_table
from icectl.validate import Severity, validate_table


def _relocated(value: Any, src: FixtureTable, dst: FixtureTable) -> Any:
    """``value`` with the source table directory replaced by the clone's (in any nested string)."""
    if isinstance(value, dict):
        return {k: _relocated(v, src, dst) for k, v in value.items()}
    if isinstance(value, list):
        return [_relocated(v, src, dst) for v in value]
    if isinstance(value, str):
        return value.replace(str(src.location), str(dst.location))
    if isinstance(value, bytes):  # a position delete file's file_path bounds
        return value.replace(str(src.location).encode(), str(dst.location).encode())
    return value


# Rewriting a position delete file (its file_path column) changes these; nothing else may change.
_REWRITTEN = {"all_files": ("file_size_in_bytes", "column_sizes", "split_offsets"), "all_manifests": ("length",)}


def _masked(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    def rewritten(r: dict[str, Any]) -> bool:
        return table == "all_manifests" or r.get("content") == 1
    return [{**r, **dict.fromkeys(_REWRITTEN[table])} if rewritten(r) else r for r in rows]


def _sorted(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    # Several rows may share the key (the DVs of one Puffin file): order by the whole row after it.
    return sorted(rows, key=lambda r: (str(r[key]), json.dumps(r, sort_keys=True, default=repr)))


@pytest.mark.parametrize("kind", FIXTURE_KINDS)
def test_copied_clone_is_the_same_table_to_spark_and_icectl(
        kind: str, spark: Any, spark_tables: LazyFixtureTables, spark_clone: Callable[..., FixtureTable]) -> None:
    src = spark_tables[kind]
    clone = spark_clone(kind)
    assert clone.location == src.location.parent / clone.name.rsplit(".", 1)[1]

    # Every snapshot, ref and history row; ids are the source's (a copy, not a rebuild).
    for table, key in (("snapshots", "snapshot_id"), ("refs", "name"), ("history", "snapshot_id")):
        theirs = _sorted(metadata_table(spark, src.name, table), key)
        ours = _sorted(metadata_table(spark, clone.name, table), key)
        assert ours == _relocated(theirs, src, clone), table
    # Current rows, and time travel to the first, a middle and the last snapshot.
    assert table_rows_digest(spark, clone.name) == table_rows_digest(spark, src.name)
    snaps = sorted(metadata_table(spark, src.name, "snapshots"), key=lambda s: s["committed_at"])
    for snap in {snaps[0]["snapshot_id"], snaps[len(snaps) // 2]["snapshot_id"], snaps[-1]["snapshot_id"]}:
        assert (table_rows_digest(spark, f"SELECT * FROM {clone.name} VERSION AS OF {snap}")
                == table_rows_digest(spark, f"SELECT * FROM {src.name} VERSION AS OF {snap}")), snap
    # Data and delete files (incl. v3 DVs: Puffin offsets and referenced files), all of them under the clone.
    for table in ("all_files", "all_manifests"):
        key = "file_path" if table == "all_files" else "path"
        ours = metadata_table(spark, clone.name, table)
        assert all(str(clone.location) in r[key] for r in ours)
        theirs = _relocated(metadata_table(spark, src.name, table), src, clone)
        assert _sorted(_masked(ours, table), key) == _sorted(_masked(theirs, table), key), table
    if kind == "v2_part":
        assert (table_rows_digest(spark, f"{clone.name}.branch_dev")
                == table_rows_digest(spark, f"{src.name}.branch_dev"))

    md = latest_metadata_json(clone.location)
    assert md["location"].endswith(str(clone.location)) and md == _relocated(latest_metadata_json(src.location),
                                                                              src, clone)
    # icectl: deep validation of every snapshot finds what it finds in the source, and no error.
    ours_found = validate_table(load_table(str(clone.location)), all_snapshots=True, deep=True)
    theirs_found = validate_table(load_table(str(src.location)), all_snapshots=True, deep=True)
    assert ours_found.exit_code == 0 and ours_found.count(Severity.ERROR) == 0, ours_found.findings
    assert ([f.to_row() for f in ours_found.findings]
            == _relocated([f.to_row() for f in theirs_found.findings], src, clone))

    # Sidecars: one per file that had one; for files copied unchanged they are Hadoop's own bytes.
    src_crcs = sorted(p.relative_to(src.location) for p in src.location.rglob(".*.crc"))
    assert sorted(p.relative_to(clone.location) for p in clone.location.rglob(".*.crc")) == src_crcs
    unchanged = 0
    for rel in src_crcs:
        data_rel = rel.with_name(rel.name[1:-len(".crc")])
        data = (clone.location / data_rel).read_bytes()
        assert (clone.location / rel).read_bytes() == hadoop_crc(data), rel
        if data == (src.location / data_rel).read_bytes():
            assert (clone.location / rel).read_bytes() == (src.location / rel).read_bytes(), rel
            unchanged += 1
    assert unchanged > 0


def test_clone_of_a_clone_and_independence(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    first = spark_clone("v1_unpart")
    spark.sql(f"DELETE FROM {first.name} WHERE id < 10")
    second = spark_clone(first.name)  # copies the clone as it is now
    assert table_rows_digest(spark, second.name) == table_rows_digest(spark, first.name)
    spark.sql(f"DELETE FROM {second.name} WHERE id < 20")
    assert table_rows_digest(spark, first.name)[0] == 40 and table_rows_digest(spark, second.name)[0] == 30
    assert Path(second.location).is_dir()

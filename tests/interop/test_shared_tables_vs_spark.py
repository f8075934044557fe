"""Issue 27, Deliver 1 and 2: no delete crosses into another table (twins, nested tables), on Spark tables.

Each case is one of the campaign's, on private copies of Spark-written fixtures in Spark's Hadoop
catalog ``local`` plus a SQLite catalog ``sq`` (both configured, as a user would): a SQLite entry
registered at a folder table's metadata (the twins share every file), two SQLite entries at one
metadata file, a metadata file another entry points at left only in a table's log, and a Spark
table copied into another table's folder (nested). Survivors are judged by
:mod:`support.reach` (json + fastavro, independent of icectl) and rows by Spark at every snapshot.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.fixtures import FixtureTable
from support.reach import files_under, physical, reach, table_reach
from support.relocate import copy_table_dir
from support.spark import latest_metadata_path, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app

DAY = 86_400


def config_file(tmp_path: Path, warehouse: str) -> Path:
    config = tmp_path / "icectl.toml"
    config.write_text(f'default-catalog = "local"\n[catalog.local]\ntype = "hadoop"\nwarehouse = "{warehouse}"\n'
                      f'[catalog.sq]\ntype = "sql"\nuri = "{tmp_path / "sq.db"}"\nwarehouse = "{tmp_path / "sqwh"}"\n')
    return config


def icectl(config: Path, *args: str, expect: int = 0) -> Any:
    r = CliRunner().invoke(app, ["--config", str(config), *args], env={"ICECTL_WAREHOUSE": "", "ICECTL_CONFIG": ""})
    assert r.exit_code == expect, (args, r.exit_code, r.stdout, r.stderr)
    if expect:
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r.stderr
    return json.loads(r.stdout.splitlines()[0]) if "--json" in args else r


def short(t: FixtureTable) -> str:
    return t.name.removeprefix("local.")


def versions(spark: Any, t: FixtureTable) -> dict[str, tuple[int, str]]:
    """Spark's rows at the current state and at every snapshot and ref of ``t``."""
    spark.sql(f"REFRESH TABLE {t.name}")
    md = json.loads(latest_metadata_path(t.location).read_text())
    out = {"current": table_rows_digest(spark, t.name)}
    for s in md.get("snapshots", []):
        sid = s["snapshot-id"]
        out[str(sid)] = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF {sid}")
    for ref in md.get("refs", {}):
        out[ref] = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF '{ref}'")
    return out


def age(root: Path, days: int = 10) -> None:
    when = time.time() - days * DAY
    for p in root.rglob("*"):
        os.utime(p, (when, when), follow_symlinks=False)


def test_expire_through_a_registered_twin_keeps_every_file_the_folder_table_reaches(
        spark: Any, spark_clone: Callable[..., FixtureTable], spark_warehouse: str, tmp_path: Path) -> None:
    config = config_file(tmp_path, spark_warehouse)
    a = spark_clone("v2_part")
    metadata = str(latest_metadata_path(a.location))
    before = versions(spark, a)
    reached = table_reach(a.location)
    got = icectl(config, "register", "sq.db.ev", metadata, "--json")
    assert latest_metadata_path(a.location) == Path(metadata)  # the folder table is untouched

    doc = icectl(config, "expire-snapshots", "sq.db.ev", "--older-than", str(int(time.time() * 1000) + 1000),
                 "--retain-last", "1", "--json")
    assert doc["expired_snapshot_count"] > 0
    assert not [p for p in reached if not os.path.exists(p)]
    assert versions(spark, a) == before  # every snapshot and ref of the folder table still reads
    assert sum(v for k, v in doc.items() if k.startswith("deleted_")) == 0
    assert doc["kept_shared_files_count"] > 0 and doc["shared_with"] == [f"local.{short(a)}"]
    assert f"local.{short(a)}" in got["warning"]  # register said so (stderr too)


def test_drop_purge_of_either_twin_is_refused_unless_allowed(
        spark: Any, spark_clone: Callable[..., FixtureTable], spark_warehouse: str, tmp_path: Path) -> None:
    config = config_file(tmp_path, spark_warehouse)
    b = spark_clone("v2_part")
    md = json.loads(latest_metadata_path(b.location).read_text())
    metadata = str(latest_metadata_path(b.location))
    older = physical(md["metadata-log"][0]["metadata-file"])
    icectl(config, "register", "sq.db.b", metadata, "--json")
    icectl(config, "register", "sq.db.old", older, "--json")  # an earlier version of the same table
    before, on_disk = versions(spark, b), files_under(b.location)

    err = icectl(config, "drop", "sq.db.b", "--purge", expect=6)
    assert f"local.{short(b)}" in err and "--allow-shared" in err
    err = icectl(config, "drop", short(b), "--purge", expect=6)  # the folder table itself
    assert "sq.db." in err
    err = icectl(config, "drop", short(b), "--purge", "--dry-run", expect=6)
    # Naming one sharer is not enough while another un-named one reaches files too.
    err = icectl(config, "drop", short(b), "--purge", "--allow-shared", "sq.db.b", expect=6)
    assert "sq.db.old" in err
    assert files_under(b.location) == on_disk and versions(spark, b) == before
    assert icectl(config, "inspect", "table", "sq.db.b", "--json")["table"]

    # Every sharer named: the purge goes ahead and deletes what they reach too (they break).
    old_reach = reach(older)
    doc = icectl(config, "drop", short(b), "--purge", "--allow-shared", "sq.db.b", "--allow-shared", "sq.db.old",
                 "--json")
    assert doc["dropped"] is True and sorted(doc["shared_with"]) == ["sq.db.b", "sq.db.old"]
    assert not [p for p in old_reach if os.path.exists(p) and p.endswith(".parquet")]


def test_a_second_sqlite_entry_at_v1_metadata_blocks_the_purge(
        spark: Any, spark_clone: Callable[..., FixtureTable], spark_warehouse: str, tmp_path: Path) -> None:
    config = config_file(tmp_path, spark_warehouse)
    c = spark_clone("v1_unpart")
    metadata = str(latest_metadata_path(c.location))
    icectl(config, "register", "sq.db.c1", metadata, "--json")
    got = icectl(config, "register", "sq.db.c2", metadata, "--json")
    before, on_disk = versions(spark, c), files_under(c.location)
    err = icectl(config, "drop", "sq.db.c1", "--purge", expect=6)
    assert files_under(c.location) == on_disk and versions(spark, c) == before
    assert f"local.{short(c)}" in err or "sq.db.c2" in err
    # Without --purge the entry goes and every file stays.
    icectl(config, "drop", "sq.db.c1", "--json")
    assert files_under(c.location) == on_disk and versions(spark, c) == before
    assert "sq.db.c1" in got["warning"] and f"local.{short(c)}" in got["warning"]


def test_the_metadata_log_cleanup_keeps_a_file_another_entry_points_at(
        spark: Any, spark_clone: Callable[..., FixtureTable], spark_warehouse: str, tmp_path: Path) -> None:
    config = config_file(tmp_path, spark_warehouse)
    d = spark_clone("v2_part")
    icectl(config, "properties", "set", short(d), "write.metadata.delete-after-commit.enabled=true",
           "write.metadata.previous-versions-max=1")
    pointed = str(latest_metadata_path(d.location))
    icectl(config, "register", "sq.db.d", pointed, "--json")
    held = reach(pointed)
    for i in range(3):  # the registered version drops out of the folder table's log
        icectl(config, "properties", "set", short(d), f"note.n={i}")
    current = json.loads(latest_metadata_path(d.location).read_text())
    assert pointed not in {physical(e["metadata-file"]) for e in current["metadata-log"]}
    assert os.path.exists(pointed) and not [p for p in held if not os.path.exists(p)]
    assert icectl(config, "inspect", "table", "sq.db.d", "--json")["table"]
    # Versions nobody points at still go, as the property says.
    assert len(list((d.location / "metadata").glob("v*.metadata.json"))) < 6


def _nested(spark_clone: Callable[..., FixtureTable], spark_tables: Any, kind: str) -> tuple[FixtureTable, Path]:
    """A copy of ``v1_unpart`` with a copy of fixture ``kind`` inside its folder (``<T>/nested``), 10 days old."""
    t = spark_clone("v1_unpart")
    nested = copy_table_dir(spark_tables[kind].location, t.location / "nested")
    age(nested)  # every orphan cutoff passes it
    return t, nested


def test_remove_orphan_files_skips_a_nested_table(spark: Any, spark_clone: Callable[..., FixtureTable],
                                                  spark_tables: Any, spark_warehouse: str, tmp_path: Path) -> None:
    config = config_file(tmp_path, spark_warehouse)
    t, nested = _nested(spark_clone, spark_tables, "v2_part")
    reached = table_reach(nested)
    before = sorted(spark.read.format("iceberg").load(str(nested)).collect())
    doc = icectl(config, "remove-orphan-files", short(t), "--json")
    assert not [p for p in reached if not os.path.exists(p)]
    assert doc["orphan_file_count"] == 0 and doc["skipped_table_folders"] == [str(nested)]
    # The same through --all over a warehouse of its own (the session's warehouse holds every test's
    # tables, damaged ones among them; walking all of them took 5 minutes of the suite): the outer
    # table with its nested copy, and a second table beside it, so the run works more than one table.
    wh = tmp_path / "wh"
    outer = copy_table_dir(spark_tables["v1_unpart"].location, wh / "db" / "outer")
    inner = copy_table_dir(spark_tables["v2_part"].location, outer / "nested")
    copy_table_dir(spark_tables["v1_unpart"].location, wh / "db" / "beside")
    age(inner)
    inner_reached = table_reach(inner)
    inner_before = sorted(spark.read.format("iceberg").load(str(inner)).collect())
    r = CliRunner().invoke(app, ["remove-orphan-files", "--all", "db", "--json"],
                           env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": ""})
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert {d.get("table") for d in lines} >= {"db.outer", "db.beside"}, lines
    outer_doc = next(d for d in lines if d.get("table") == "db.outer")
    assert outer_doc["orphan_file_count"] == 0 and outer_doc["skipped_table_folders"] == [str(inner)]
    assert not [p for p in inner_reached if not os.path.exists(p)]
    assert sorted(spark.read.format("iceberg").load(str(inner)).collect()) == inner_before
    assert sorted(spark.read.format("iceberg").load(str(nested)).collect()) == before
    table_rows_digest(spark, t.name)  # the outer table reads too


def test_drop_purge_keeps_a_nested_tables_file_the_table_names(
        spark: Any, spark_clone: Callable[..., FixtureTable], spark_tables: Any, spark_warehouse: str,
        tmp_path: Path) -> None:
    config = config_file(tmp_path, spark_warehouse)
    t, nested = _nested(spark_clone, spark_tables, "v1_unpart")
    reached = table_reach(nested)
    live = sorted(p for p in reached if p.endswith(".parquet"))[0]
    icectl(config, "add-files", short(t), live, "--json")  # the outer table names the nested table's live file
    before = sorted(spark.read.format("iceberg").load(str(nested)).collect())
    err = icectl(config, "drop", short(t), "--purge", expect=6)
    assert str(nested) in err
    assert not [p for p in reached if not os.path.exists(p)]
    assert sorted(spark.read.format("iceberg").load(str(nested)).collect()) == before


def test_the_spark_engine_keeps_shared_files_too(spark: Any, spark_clone: Callable[..., FixtureTable],
                                                 spark_tables: Any, spark_engine: Any, spark_warehouse: str,
                                                 tmp_path: Path) -> None:
    """--engine spark: reachability and the set differences run on Spark, the neighbours' files are
    taken out on the driver before anything is deleted (expire through a twin, orphans around a
    nested table)."""
    import icectl.engine as engines
    from icectl.config import load_config, set_active_config
    from icectl.ops.expire import ExpirePolicy, expire_snapshots
    from icectl.ops.orphans import remove_orphan_files
    from icectl.table import load_table

    config = config_file(tmp_path, spark_warehouse)
    a = spark_clone("v2_part")
    icectl(config, "register", "sq.db.ev", str(latest_metadata_path(a.location)), "--json")
    t, nested = _nested(spark_clone, spark_tables, "v2_part")
    reached, nested_reached, before = table_reach(a.location), table_reach(nested), versions(spark, a)
    cfg = load_config(str(config))
    set_active_config(cfg)
    try:
        with engines.using(spark_engine):
            res = expire_snapshots(load_table("sq.db.ev", cfg),
                                   ExpirePolicy(older_than_ms=int(time.time() * 1000) + 1000, retain_last=1))
            orphans = remove_orphan_files(load_table(short(t), cfg))
    finally:
        set_active_config(None)
    assert res.expired_snapshots and res.kept_shared_files and sum(res.deleted.values()) == 0
    assert not [p for p in reached | nested_reached if not os.path.exists(p)]
    assert orphans.skipped_table_folders == [str(nested)] and orphans.orphan_file_count == 0
    assert versions(spark, a) == before

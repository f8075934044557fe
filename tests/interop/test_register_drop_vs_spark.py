"""`icectl register` and `icectl drop --purge` judged against Spark on twin copies of a fixture.

- register: Spark's ``CALL <catalog>.system.register_table`` on one twin, ``icectl register`` on the
  other, in Spark's Hadoop catalog ``local`` (the same warehouse) and in Iceberg's JdbcCatalog on
  PostgreSQL (the same database): the registered tables' current metadata is the same (snapshots,
  refs, snapshot log, properties, schemas, specs; the twins' own paths aside), the procedure's
  output equals icectl's, and Spark reads the same rows at the current snapshot and every ref.
- drop --purge: Spark's ``DROP TABLE ... PURGE`` on one twin, ``icectl drop --purge`` on the
  other; the same files (relative to the table folder) are left on disk: none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.postgres import PgServer, add_spark_jdbc_catalog
from support.spark import latest_metadata_path, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.config import load_config
from icectl.table import load_table

JDBC = "regjdbc"


def icectl(env: dict[str, str], *args: str, config: Path | None = None) -> dict[str, Any]:
    argv = (["--config", str(config)] if config else []) + list(args)
    r = CliRunner().invoke(app, argv, env=env)
    assert r.exit_code == 0, (args, r.exit_code, r.stdout, r.stderr)
    return json.loads(r.stdout)


def _normalized(doc: dict[str, Any], location: str) -> dict[str, Any]:
    """A metadata document with its twin's own paths replaced, and what each writer stamps itself."""
    text = json.dumps(doc).replace("file:" + location, "<T>").replace(location, "<T>")
    return json.loads(text)


def _metadata(path: str) -> dict[str, Any]:
    return json.loads(Path(path.removeprefix("file:")).read_text())


def _same_rows(spark: Any, a: str, b: str, refs: list[str]) -> None:
    for ref in [None, *refs]:
        suffix = f" VERSION AS OF '{ref}'" if ref else ""
        assert table_rows_digest(spark, f"SELECT * FROM {a}{suffix}") == \
            table_rows_digest(spark, f"SELECT * FROM {b}{suffix}"), ref


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()} \
        if root.exists() else set()


def test_register_in_hadoop_and_jdbc_catalogs_matches_spark(spark: Any, spark_clone: Any, spark_warehouse: str,
                                                            pg_server: PgServer, tmp_path: Path) -> None:
    env = {"ICECTL_WAREHOUSE": spark_warehouse, "ICECTL_CONFIG": ""}
    a, b = spark_clone("v2_part"), spark_clone("v2_part")
    ma, mb = str(latest_metadata_path(a.location)), str(latest_metadata_path(b.location))
    refs = sorted(_metadata(ma)["refs"])
    assert {"after_merge", "dev"} <= set(refs)

    # Hadoop catalog `local`: Spark's register_table vs icectl register, into the same warehouse.
    na, nb = f"{a.name.rsplit('.', 1)[-1]}_reg", f"{b.name.rsplit('.', 1)[-1]}_reg"
    out = spark.sql(f"CALL local.system.register_table(table => 'db.{na}', metadata_file => '{ma}')").collect()[0]
    got = icectl(env, "register", f"db.{nb}", mb, "--json")
    keys = ("current_snapshot_id", "total_records_count", "total_data_files_count")  # the procedure's columns
    assert [got[k] for k in keys] == [out[k] for k in keys]
    va = Path(spark_warehouse) / "db" / na / "metadata" / "v1.metadata.json"
    vb = Path(spark_warehouse) / "db" / nb / "metadata" / "v1.metadata.json"
    assert va.is_file() and got["metadata_location"] == str(vb)
    doc_a = _normalized(json.loads(va.read_text()), str(a.location))
    doc_b = _normalized(json.loads(vb.read_text()), str(b.location))
    assert doc_a == doc_b
    _same_rows(spark, f"local.db.{na}", f"local.db.{nb}", refs)

    # Iceberg's JdbcCatalog on PostgreSQL: the pointer names the given file on both sides.
    c, d = spark_clone("v2_part"), spark_clone("v2_part")
    mc, md = str(latest_metadata_path(c.location)), str(latest_metadata_path(d.location))
    db = f"reg_{os.getpid()}"
    uri = pg_server.create_database(db)
    add_spark_jdbc_catalog(spark, JDBC, pg_server.jdbc_uri(db), f"file:{tmp_path}")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {JDBC}.db")
    config = tmp_path / "icectl.toml"
    config.write_text(f'[catalog.{JDBC}]\ntype = "sql"\nuri = "{uri}"\nwarehouse = "file:{tmp_path}"\n')
    spark.sql(f"CALL {JDBC}.system.register_table(table => 'db.c', metadata_file => '{mc}')").collect()
    got = icectl({}, "register", f"{JDBC}.db.d", md, "--json", config=config)
    assert got["metadata_location"] == md  # no copy: the row points at the file given
    cfg = load_config(str(config))
    tc, td = load_table(f"{JDBC}.db.c", cfg), load_table(f"{JDBC}.db.d", cfg)
    assert tc.metadata_location.removeprefix("file:") == mc  # Spark's row names the given file too
    assert _normalized(_metadata(tc.metadata_location), str(c.location)) == \
        _normalized(_metadata(td.metadata_location), str(d.location))
    _same_rows(spark, f"{JDBC}.db.c", f"{JDBC}.db.d", refs)

    # DROP TABLE ... PURGE (Spark's purgeTable: drop the row, then DeleteReachableFiles) vs
    # icectl drop --purge, on the JDBC twins: the same files are left (none of the table's).
    before = _files(Path(c.location))
    assert before == _files(Path(d.location)) and before
    spark.sql(f"DROP TABLE {JDBC}.db.c PURGE")
    # The folder table d was registered from still reads these files: icectl refuses unless told it may break.
    res = icectl({}, "drop", f"{JDBC}.db.d", "--purge", "--allow-shared", str(d.location), "--json", config=config)
    assert res["dropped"] is True and res["failures"] == [] and res["kept_external_files"] == []
    left_spark, left_icectl = _files(Path(c.location)), _files(Path(d.location))
    assert left_icectl == left_spark
    assert not [f for f in left_icectl if f.endswith((".parquet", ".avro", ".metadata.json", ".puffin"))]


@pytest.mark.parametrize("kind", ["v3_dv"])
def test_drop_purge_in_the_hadoop_catalog_leaves_what_spark_leaves(spark: Any, spark_clone: Any,
                                                                   spark_warehouse: str, kind: str) -> None:
    env = {"ICECTL_WAREHOUSE": spark_warehouse, "ICECTL_CONFIG": ""}
    a, b = spark_clone(kind), spark_clone(kind)
    assert _files(Path(a.location)) == _files(Path(b.location))
    plan = icectl(env, "drop", b.name.removeprefix("local."), "--purge", "--dry-run", "--json")
    assert plan["deleted"]["position_delete_files"] > 0  # the DV Puffin files are planned too
    spark.sql(f"DROP TABLE {a.name} PURGE")
    icectl(env, "drop", b.name.removeprefix("local."), "--purge", "--json")
    assert _files(Path(b.location)) == _files(Path(a.location)) == set()

"""Tables icectl creates and files it adds, judged by real Spark.

- A table created by icectl takes Spark INSERTs, merge-on-read DELETEs (deletion vectors on v3)
  and schema changes, and Spark reads back exactly what was written.
- A table written by Spark takes an icectl add-files commit, then more Spark commits, and every
  snapshot stays readable with the rows it had.
- The metrics icectl computes from a Parquet footer equal those Spark's own add_files computes.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.spark import metadata_table, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode


def icectl(*args: str, warehouse: str | None = None, expect: int = 0) -> dict[str, Any]:
    env = {"ICECTL_WAREHOUSE": warehouse} if warehouse else None
    r = CliRunner().invoke(app, [*args, "--json"], env=env)
    assert r.exit_code == expect, r.stderr
    return json.loads(r.stdout) if r.stdout.strip() else {}


def _utc(d: int, h: int) -> datetime.datetime:
    return datetime.datetime(2024, 3, d, h, tzinfo=datetime.timezone.utc)


def write_parquet(path: Path, ids: range, day: int) -> Path:
    """A plain Parquet file (no Iceberg field ids: columns are matched by name)."""
    t = pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "ts": pa.array([_utc(day, i % 24) for i in ids], pa.timestamp("us", tz="UTC")),
        "name": pa.array([f"name-{i:05d}-{'x' * (i % 30)}" for i in ids]),
        "price": pa.array([i / 4 for i in ids], pa.float64()),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, path, row_group_size=max(1, len(ids) // 2))
    return path


@pytest.mark.parametrize("version", [2, 3])
def test_created_table_takes_spark_writes(spark: Any, spark_warehouse: str, tmp_path: Path, version: int) -> None:
    name = f"created_v{version}"
    icectl("create", f"db.{name}", "--schema", "id long not null, ts timestamptz, name string, price double",
           "--partition-by", "days(ts)", "--format-version", str(version),
           "--property", "write.delete.mode=merge-on-read", warehouse=spark_warehouse)
    t = f"local.db.{name}"
    files = [write_parquet(tmp_path / f"f{d}.parquet", range(d * 100, d * 100 + 50), d) for d in (1, 2)]
    added = icectl("add-files", f"db.{name}", *map(str, files), warehouse=spark_warehouse)
    assert added["added_data_files"] == 2 and added["added_records"] == 100
    # Spark reads exactly the rows of the files.
    src = spark.read.parquet(*[str(f) for f in files])
    src.createOrReplaceTempView(f"src_{name}")
    assert table_rows_digest(spark, t) == table_rows_digest(spark, f"SELECT * FROM src_{name}")
    # Spark writes on top: INSERT, merge-on-read DELETE, a new column.
    spark.sql(f"INSERT INTO {t} VALUES (1, TIMESTAMP '2024-03-03 05:00:00+00:00', 'spark', 9.5)")
    spark.sql(f"DELETE FROM {t} WHERE id % 7 = 0")
    spark.sql(f"ALTER TABLE {t} ADD COLUMN note string")
    spark.sql(f"INSERT INTO {t} VALUES (2, TIMESTAMP '2024-03-03 06:00:00+00:00', 'spark2', 1.0, 'hi')")
    expected = spark.sql(f"""
        SELECT id, ts, name, price, CAST(NULL AS STRING) AS note FROM src_{name} WHERE id % 7 <> 0
        UNION ALL SELECT 1, TIMESTAMP '2024-03-03 05:00:00+00:00', 'spark', 9.5D, NULL
        UNION ALL SELECT 2, TIMESTAMP '2024-03-03 06:00:00+00:00', 'spark2', 1.0D, 'hi'""")
    expected.createOrReplaceTempView(f"expected_{name}")
    assert table_rows_digest(spark, t) == table_rows_digest(spark, f"SELECT * FROM expected_{name}")
    deletes = metadata_table(spark, t, "delete_files")
    assert deletes
    assert {d["file_format"] for d in deletes} == ({"PUFFIN"} if version == 3 else {"PARQUET"})
    # icectl still reads the table Spark changed.
    ours = {r["file_path"] for r in icectl("inspect", "files", f"db.{name}", warehouse=spark_warehouse)["rows"]}
    assert ours == {r["file_path"] for r in metadata_table(spark, t, "files")}


def test_spark_table_takes_add_files_then_spark_commits(spark: Any, spark_warehouse: str, tmp_path: Path) -> None:
    t = "local.db.spark_then_icectl"
    spark.sql(f"CREATE TABLE {t} (id bigint, ts timestamp, name string, price double) USING iceberg "
              "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {t} VALUES (1, TIMESTAMP '2024-03-01 01:00:00+00:00', 'a', 1.0)")
    before = spark.sql(f"SELECT snapshot_id FROM {t}.snapshots").collect()[0][0]
    digest_before = table_rows_digest(spark, t)
    f = write_parquet(tmp_path / "more.parquet", range(500, 540), 2)
    out = icectl("add-files", "db.spark_then_icectl", str(f), warehouse=spark_warehouse)
    spark.sql(f"INSERT INTO {t} VALUES (2, TIMESTAMP '2024-03-04 01:00:00+00:00', 'b', 2.0)")
    spark.sql(f"DELETE FROM {t} WHERE id = 510")
    snaps = [r["snapshot_id"] for r in metadata_table(spark, t, "snapshots")]
    assert out["snapshot_id"] in snaps and before in snaps and len(snaps) == 4
    assert table_rows_digest(spark, f"SELECT * FROM {t} VERSION AS OF {before}") == digest_before
    ours = table_rows_digest(spark, f"SELECT * FROM {t} VERSION AS OF {out['snapshot_id']}")
    spark.read.parquet(str(f)).createOrReplaceTempView("more_src")
    assert ours == table_rows_digest(spark, f"SELECT * FROM {t} VERSION AS OF {before} UNION ALL "
                                            "SELECT * FROM more_src")
    n, _ = table_rows_digest(spark, t)
    assert n == 1 + 40 + 1 - 1


def test_footer_metrics_equal_spark_add_files(spark: Any, spark_warehouse: str, tmp_path: Path) -> None:
    """Spark's add_files procedure and icectl add the same file to twin tables: same data_file."""
    f = write_parquet(tmp_path / "twin" / "data.parquet", range(0, 300), 5)
    ddl = "(id bigint, ts timestamp, name string, price double) USING iceberg TBLPROPERTIES ('format-version'='2')"
    spark.sql(f"CREATE TABLE local.db.twin_spark {ddl}")
    spark.sql(f"CREATE TABLE local.db.twin_icectl {ddl}")
    spark.sql(f"CALL local.system.add_files(table => 'db.twin_spark', source_table => '`parquet`.`{f.parent}`')")
    icectl("add-files", "db.twin_icectl", str(f), warehouse=spark_warehouse)
    # split_offsets: Spark's procedure leaves them null; icectl records the row groups' starts, as
    # Spark's own writer does for files it writes (checked against the footer below).
    keys = ("record_count", "file_size_in_bytes", "column_sizes", "value_counts", "null_value_counts",
            "lower_bounds", "upper_bounds")
    theirs = metadata_table(spark, "local.db.twin_spark", "files")
    ours = metadata_table(spark, "local.db.twin_icectl", "files")
    assert len(theirs) == len(ours) == 1
    assert {k: ours[0][k] for k in keys} == {k: theirs[0][k] for k in keys}
    md = pq.read_metadata(f)
    starts = []  # Parquet's row group starting position: its first chunk's first page
    for i in range(md.num_row_groups):
        c = md.row_group(i).column(0)
        starts.append(c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset)
    assert ours[0]["split_offsets"] == starts and len(starts) == 2
    # The string bounds were truncated to 16 characters, as Iceberg's default metrics mode does.
    assert len(ours[0]["upper_bounds"][3]) == 16


def test_add_files_refusals(spark_warehouse: str, tmp_path: Path, spark: Any) -> None:
    icectl("create", "db.refusals", "--schema", "id long, ts timestamptz, name string, price double",
           "--partition-by", "days(ts)", warehouse=spark_warehouse)
    mixed = tmp_path / "mixed.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()),
                             "ts": pa.array([_utc(1, 1), _utc(2, 1)], pa.timestamp("us", tz="UTC")),
                             "name": ["a", "b"], "price": [1.0, 2.0]}), mixed)
    r = CliRunner().invoke(app, ["add-files", "db.refusals", str(mixed)], env={"ICECTL_WAREHOUSE": spark_warehouse})
    assert r.exit_code == ExitCode.REFUSED and "spans several partitions" in r.stderr
    not_parquet = tmp_path / "x.parquet"
    not_parquet.write_text("nope")
    r = CliRunner().invoke(app, ["add-files", "db.refusals", str(not_parquet)],
                           env={"ICECTL_WAREHOUSE": spark_warehouse})
    assert r.exit_code == ExitCode.CORRUPT and str(not_parquet) in r.stderr
    r = CliRunner().invoke(app, ["add-files", "db.refusals", str(tmp_path / "missing.parquet")],
                           env={"ICECTL_WAREHOUSE": spark_warehouse})
    assert r.exit_code == ExitCode.NOT_FOUND
    # Nothing was committed by the refused runs.
    assert icectl("inspect", "snapshots", "db.refusals", warehouse=spark_warehouse)["rows"] == []


def test_add_files_partition_values_match_spark(spark: Any, spark_warehouse: str, tmp_path: Path) -> None:
    """Partition values icectl derives through bucket (mmh3), truncate, identity and month transforms
    equal the ``_partition`` Spark computes for the same rows."""
    icectl("create", "db.transforms", "--schema", "id long, name string, amount decimal(10,2), d date",
           "--partition-by", "bucket(8, id), truncate(3, name), identity(amount), months(d)",
           warehouse=spark_warehouse)
    import decimal

    paths = []
    for i, (ident, name, amount, day) in enumerate([
            (42, "alpha-1", "12.50", datetime.date(2024, 2, 29)), (-7, "zz", "-0.01", datetime.date(1969, 12, 31)),
            (10**12, "βeta", "99999999.99", datetime.date(2000, 1, 1))]):
        p = tmp_path / f"p{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([ident] * 3, pa.int64()), "name": [name] * 3,
                                 "amount": pa.array([decimal.Decimal(amount)] * 3, pa.decimal128(10, 2)),
                                 "d": pa.array([day] * 3, pa.date32())}), p)
        paths.append(str(p))
    icectl("add-files", "db.transforms", *paths, warehouse=spark_warehouse)
    ours = {r["file_path"]: r["partition"]
            for r in icectl("inspect", "files", "db.transforms", warehouse=spark_warehouse)["rows"]}
    rows = spark.sql("SELECT _file, _partition FROM local.db.transforms").collect()
    theirs = {r[0].removeprefix("file:"): r[1].asDict() for r in rows}
    assert set(ours) == set(theirs) == set(paths)
    for path, part in theirs.items():
        mine = ours[path]
        assert mine["id_bucket"] == part["id_bucket"]
        assert mine["name_trunc"] == part["name_trunc"]
        assert decimal.Decimal(mine["amount"]) == part["amount"]
        assert mine["d_month"] == part["d_month"]  # months since 1970, as Spark's files table shows

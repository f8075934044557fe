"""add-files of Parquet files without field ids, and on branches, judged by real Spark.

Spark reads a data file without field ids by position unless the table has a name mapping
(``schema.name-mapping.default``); add-files sets it as Spark's own ``add_files`` does, so files
whose columns are reordered, missing or extra read as the rows written. A branch add-files
creates starts at main's head, so Spark reading it sees main's rows and the new file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode
from icectl.spec.name_mapping import DEFAULT_NAME_MAPPING
from interop.test_write_vs_spark import icectl

SCHEMA = "id long, name string, price double, qty int"


def _write(path: Path, columns: dict[str, pa.Array]) -> Path:
    pq.write_table(pa.table(columns), path)  # pyarrow writes no field ids
    return path


def _files(tmp_path: Path) -> tuple[list[Path], list[tuple[Any, ...]]]:
    """Four files whose columns differ from the table's order, and the rows Spark must read."""
    def ids(lo: int) -> list[int]:
        return list(range(lo, lo + 5))

    files = [
        _write(tmp_path / "same.parquet", {  # the table's order
            "id": pa.array(ids(0), pa.int64()), "name": pa.array([f"s{i}" for i in ids(0)]),
            "price": pa.array([i / 2 for i in ids(0)]), "qty": pa.array(ids(0), pa.int32())}),
        _write(tmp_path / "reordered.parquet", {  # by position, qty would be read as id, name as price
            "qty": pa.array([i * 10 for i in ids(10)], pa.int32()), "price": pa.array([i / 2 for i in ids(10)]),
            "id": pa.array(ids(10), pa.int64()), "name": pa.array([f"r{i}" for i in ids(10)])}),
        _write(tmp_path / "missing.parquet", {  # no qty: null
            "id": pa.array(ids(20), pa.int64()), "price": pa.array([i / 2 for i in ids(20)]),
            "name": pa.array([f"m{i}" for i in ids(20)])}),
        _write(tmp_path / "extra.parquet", {  # a column the table lacks, first
            "comment": pa.array([f"c{i}" for i in ids(30)]), "id": pa.array(ids(30), pa.int64()),
            "name": pa.array([f"e{i}" for i in ids(30)]), "price": pa.array([i / 2 for i in ids(30)]),
            "qty": pa.array([i + 1 for i in ids(30)], pa.int32())}),
    ]
    rows = ([(i, f"s{i}", i / 2, i) for i in ids(0)] + [(i, f"r{i}", i / 2, i * 10) for i in ids(10)]
            + [(i, f"m{i}", i / 2, None) for i in ids(20)] + [(i, f"e{i}", i / 2, i + 1) for i in ids(30)])
    return files, rows


def _rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=lambda r: r[0])


def _assert_reads_as_written(spark: Any, t: str, rows: list[tuple[Any, ...]]) -> None:
    assert _rows(spark, f"SELECT id, name, price, qty FROM {t}") == sorted(rows)
    # Filters prune by the files' metrics and match by value: each must find its rows.
    assert _rows(spark, f"SELECT id FROM {t} WHERE name = 'r12'") == [(12,)]
    assert _rows(spark, f"SELECT id FROM {t} WHERE qty = 120") == [(12,)]
    assert _rows(spark, f"SELECT id FROM {t} WHERE qty IS NULL") == [(i,) for i in range(20, 25)]
    assert _rows(spark, f"SELECT id FROM {t} WHERE price > 16") == [(i,) for i in range(33, 35)]


def test_add_files_without_field_ids_reads_by_name(spark: Any, spark_warehouse: str, tmp_path: Path) -> None:
    icectl("create", "db.nm_new", "--schema", SCHEMA, warehouse=spark_warehouse)
    files, rows = _files(tmp_path)
    added = icectl("add-files", "db.nm_new", *map(str, files), warehouse=spark_warehouse)
    _assert_reads_as_written(spark, "local.db.nm_new", rows)
    assert added["name_mapping"] == "created"
    # The property is Java's: Spark parses it and maps every column.
    props = dict((r[0], r[1]) for r in spark.sql("SHOW TBLPROPERTIES local.db.nm_new").collect())
    mapped = {f["names"][0]: f["field-id"] for f in json.loads(props[DEFAULT_NAME_MAPPING])}
    assert set(mapped) == {"id", "name", "price", "qty"}
    # A second add-files leaves the mapping as it is.
    more = _write(tmp_path / "more.parquet", {"name": pa.array(["z"]), "id": pa.array([99], pa.int64())})
    again = icectl("add-files", "db.nm_new", str(more), warehouse=spark_warehouse)
    assert again["name_mapping"] == "unchanged"
    assert _rows(spark, "SELECT id, name, price, qty FROM local.db.nm_new WHERE id = 99") == [(99, "z", None, None)]


def test_add_files_extends_a_stale_name_mapping(spark: Any, spark_warehouse: str, tmp_path: Path) -> None:
    # A mapping from before three columns were added (as a writer that does not maintain it leaves it).
    stale = json.dumps([{"field-id": 1, "names": ["id", "record_id"]}])
    icectl("create", "db.nm_stale", "--schema", SCHEMA, "--property", f"{DEFAULT_NAME_MAPPING}={stale}",
           warehouse=spark_warehouse)
    files, rows = _files(tmp_path)
    added = icectl("add-files", "db.nm_stale", *map(str, files), warehouse=spark_warehouse)
    _assert_reads_as_written(spark, "local.db.nm_stale", rows)
    assert added["name_mapping"] == "extended"
    props = dict((r[0], r[1]) for r in spark.sql("SHOW TBLPROPERTIES local.db.nm_stale").collect())
    mapping = json.loads(props[DEFAULT_NAME_MAPPING])
    assert mapping[0] == {"field-id": 1, "names": ["id", "record_id"]}  # the alias is kept
    # A file naming id by its alias is read through it.
    alias = _write(tmp_path / "alias.parquet", {"name": pa.array(["a"]), "record_id": pa.array([77], pa.int64())})
    icectl("add-files", "db.nm_stale", str(alias), warehouse=spark_warehouse)
    assert _rows(spark, "SELECT id, name FROM local.db.nm_stale WHERE name = 'a'") == [(77, "a")]


def test_add_files_to_a_new_branch(spark: Any, spark_warehouse: str, tmp_path: Path) -> None:
    icectl("create", "db.br", "--schema", SCHEMA, warehouse=spark_warehouse)
    spark.sql("INSERT INTO local.db.br VALUES (1, 'main', 1.0, 1), (2, 'main', 2.0, 2)")
    f = _write(tmp_path / "b.parquet", {"id": pa.array([3], pa.int64()), "name": pa.array(["branch"]),
                                        "price": pa.array([3.0]), "qty": pa.array([3], pa.int32())})
    before = icectl("inspect", "refs", "db.br", warehouse=spark_warehouse)
    # An unknown branch is refused: one line, exit 3, a hint; nothing changes.
    r = CliRunner().invoke(app, ["add-files", "db.br", str(f), "--branch", "dev"],
                           env={"ICECTL_WAREHOUSE": spark_warehouse})
    assert r.exit_code == ExitCode.NOT_FOUND
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "branch 'dev'" in r.stderr and "--create-branch" in r.stderr
    assert icectl("inspect", "refs", "db.br", warehouse=spark_warehouse) == before
    # A tag is refused as before (exit 6), whatever --create-branch says.
    spark.sql("ALTER TABLE local.db.br CREATE TAG t1")
    icectl("add-files", "db.br", str(f), "--branch", "t1", "--create-branch", warehouse=spark_warehouse,
           expect=ExitCode.REFUSED)
    # --create-branch starts it at main's head and says so.
    main_head = spark.sql("SELECT snapshot_id FROM local.db.br.refs WHERE name = 'main'").collect()[0][0]
    added = icectl("add-files", "db.br", str(f), "--branch", "dev", "--create-branch", warehouse=spark_warehouse)
    assert added["created_branch"] == {"name": "dev", "from": "main", "from_snapshot_id": main_head}
    assert _rows(spark, "SELECT id, name FROM local.db.br VERSION AS OF 'dev'") == \
        [(1, "main"), (2, "main"), (3, "branch")]
    assert _rows(spark, "SELECT id, name FROM local.db.br") == [(1, "main"), (2, "main")]
    # The branch exists now: a plain --branch appends to it, no new branch is reported.
    g = _write(tmp_path / "c.parquet", {"id": pa.array([4], pa.int64())})
    again = icectl("add-files", "db.br", str(g), "--branch", "dev", warehouse=spark_warehouse)
    assert "created_branch" not in again
    assert [r[0] for r in _rows(spark, "SELECT id FROM local.db.br VERSION AS OF 'dev'")] == [1, 2, 3, 4]

"""Table addressing: metadata file, table directory, [catalog.]namespace.table; config; `icectl list`."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icectl.catalog import find_table
from icectl.catalog.hadoop import current_version
from icectl.cli.app import app
from icectl.config import load_config, parse_config
from icectl.errors import CorruptInputError, NotFoundError, UsageError
from icectl.storage import FileIO
from icectl.table import load_table


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env)


def _tree(spark_tables: Any, kind: str, dst: Path) -> Path:
    """A byte copy of a fixture's metadata directory (enough for metadata-only views)."""
    src = Path(spark_tables[kind].location)
    shutil.copytree(src / "metadata", dst / "metadata")
    return dst


def test_all_forms_reach_the_same_metadata(spark_tables: Any, tmp_path: Path) -> None:
    t = spark_tables["v2_part"]
    wh = Path(t.location).parent.parent  # <warehouse>/db/v2_part
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'[catalog.spark]\ntype = "hadoop"\nwarehouse = "{wh}"\n')
    locations = set()
    for address in (str(t.location), f"file://{t.location}", "spark.db.v2_part"):
        r = cli("--config", str(cfg), "inspect", "table", address, "--json")
        assert r.exit_code == 0, r.stderr
        locations.add(json.loads(r.stdout)["metadata_location"])
    assert len(locations) == 1
    meta = locations.pop()
    r = cli("inspect", "table", meta, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["metadata_location"] == meta
    # The default catalog is the warehouse given by ICECTL_WAREHOUSE.
    r = cli("inspect", "table", "db.v2_part", "--json", env={"ICECTL_WAREHOUSE": str(wh)})
    assert r.exit_code == 0 and json.loads(r.stdout)["metadata_location"] == meta


def test_version_hint_stale_missing_and_gzip(spark_tables: Any, tmp_path: Path) -> None:
    d = _tree(spark_tables, "v1_unpart", tmp_path / "t")
    io = FileIO()
    newest, path = current_version(io, str(d))
    hint = d / "metadata" / "version-hint.text"
    # A stale hint: the commit renamed vN+1 into place but had not updated the hint yet.
    hint.write_text(str(newest - 1))
    assert current_version(io, str(d)) == (newest, path)
    hint.unlink()  # no hint at all: listing finds the newest version
    assert current_version(io, str(d)) == (newest, path)
    # gzip-compressed metadata, named as Java names it.
    gz = d / "metadata" / f"v{newest + 1}.gz.metadata.json"
    gz.write_bytes(gzip.compress(Path(path).read_bytes()))
    v, p = current_version(io, str(d))
    assert (v, p) == (newest + 1, str(gz))
    assert load_table(str(d)).metadata == load_table(path).metadata


def test_metastore_style_names(spark_tables: Any, tmp_path: Path) -> None:
    d = tmp_path / "t"
    (d / "metadata").mkdir(parents=True)
    src = Path(current_version(FileIO(), str(spark_tables["v1_unpart"].location))[1])
    shutil.copy(src, d / "metadata" / "00003-6b1c7a5e-0f7e-4a8e-9a55-0f3f0d9c1a11.metadata.json")
    shutil.copy(src, d / "metadata" / "00010-1c2d3e4f-0f7e-4a8e-9a55-0f3f0d9c1a11.metadata.json")
    where = find_table(str(d), load_config(), FileIO()).address
    assert where.metadata_location.endswith("00010-1c2d3e4f-0f7e-4a8e-9a55-0f3f0d9c1a11.metadata.json")


def test_sqlite_catalog(spark_tables: Any, tmp_path: Path) -> None:
    # The iceberg_tables layout of Iceberg's JdbcCatalog (and PyIceberg's SqlCatalog).
    db = tmp_path / "catalog.db"
    t = spark_tables["v3_dv"]
    meta = current_version(FileIO(), str(t.location))[1]
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace "
                  "VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), "
                  "previous_metadata_location VARCHAR(1000), "
                  "PRIMARY KEY (catalog_name, table_namespace, table_name))")
        c.execute("INSERT INTO iceberg_tables VALUES ('prod', 'sales.eu', 'orders', ?, NULL)", (meta,))
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'default-catalog = "prod"\n[catalog.prod]\ntype = "sql"\nuri = "{db}"\n'
                   f'warehouse = "{tmp_path}"\n')
    for address in ("prod.sales.eu.orders", "sales.eu.orders"):
        r = cli("--config", str(cfg), "inspect", "table", address, "--json")
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["metadata_location"] == meta
    r = cli("--config", str(cfg), "list", "sales.eu", "--json")
    assert [row["identifier"] for row in json.loads(r.stdout)["rows"]] == ["sales.eu.orders"]
    r = cli("--config", str(cfg), "inspect", "table", "sales.eu.missing")
    assert r.exit_code == 3 and "sales.eu.missing" in r.stderr


def test_list_the_default_warehouse(spark_tables: Any, tmp_path: Path) -> None:
    wh = Path(spark_tables["v1_unpart"].location).parent.parent
    spark_tables["v2_part"]
    r = cli("list", "--all", "--json", env={"ICECTL_WAREHOUSE": str(wh)})
    assert r.exit_code == 0, r.stderr
    names = {row["identifier"] for row in json.loads(r.stdout)["rows"]}
    assert {"db.v1_unpart", "db.v2_part"} <= names
    # A warehouse that does not exist is not found (exit 3), never an empty list: a wrong path
    # must not look like an empty catalog. (`namespace create` starts a fresh one.)
    r = cli("list", "--all", "--json", env={"ICECTL_WAREHOUSE": str(tmp_path / "none")})
    assert r.exit_code == 3 and r.stdout == "" and "does not exist" in r.stderr


def test_bad_addresses_and_config(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        find_table("justonename", load_config(), FileIO())
    with pytest.raises(NotFoundError):
        parse_config({}).catalog("nope")
    with pytest.raises(CorruptInputError):
        parse_config({"catalog": {"x": {"type": "hive"}}})
    bad = tmp_path / "bad.toml"
    bad.write_text("[catalog.x\n")
    r = cli("--config", str(bad), "list")
    assert r.exit_code == 4 and str(bad) in r.stderr

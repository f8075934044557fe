"""The SQL (JDBC-schema) catalog on SQLite: schema versions, namespaces, create and commit; PyIceberg
committing to the same catalog file.

Moved from tests/unit/table/test_commit.py, whose helpers these tests share.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.forge import property_change

from icectl.catalog.sql import SqlCatalog
from icectl.config import load_config
from icectl.errors import RefusedError
from icectl.table import load_table
from icectl.table.commit import commit, create_table
from unit.table.test_commit import new_md, write_sql_config


def test_sql_catalog_schema_namespaces_and_create(tmp_path: Path) -> None:
    config = load_config(write_sql_config(tmp_path))
    result = create_table("prod.db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    assert Path(result.metadata_location).name.startswith("00000-")
    assert result.metadata.location == str(tmp_path / "sqlwh" / "db" / "t")
    with pytest.raises(RefusedError, match="already exists"):
        create_table("prod.db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    catalog = load_table("prod.db.t", config=config).catalog
    assert isinstance(catalog, SqlCatalog)
    assert catalog.namespace_exists(("db",)) and not catalog.namespace_exists(("nope",))
    catalog.create_namespace(("sales", "eu"), {"owner": "ops"})
    assert catalog.namespace_exists(("sales",)) and catalog.list_namespaces() == [("db",), ("sales",)]
    with pytest.raises(RefusedError):
        catalog.create_namespace(("sales", "eu"))
    db = sqlite3.connect(tmp_path / "catalog.db")
    columns = [r[1] for r in db.execute("PRAGMA table_info(iceberg_tables)")]
    assert columns == ["catalog_name", "table_namespace", "table_name", "metadata_location",
                       "previous_metadata_location", "iceberg_type"]
    assert db.execute("SELECT property_key, property_value FROM iceberg_namespace_properties "
                      "WHERE namespace = 'sales.eu' ORDER BY 1").fetchall() == [("exists", "true"), ("owner", "ops")]
    r = commit(load_table("prod.db.t", config=config), lambda b: property_change({"k": "v"}))
    row = db.execute("SELECT metadata_location, previous_metadata_location, iceberg_type "
                     "FROM iceberg_tables").fetchone()
    assert row == (r.metadata_location, result.metadata_location, "TABLE")
    assert Path(r.metadata_location).name.startswith("00001-")


def test_sql_catalog_v0_schema_is_kept(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "catalog.db")
    db.execute("CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,table_namespace VARCHAR(255) NOT NULL,"
               "table_name VARCHAR(255) NOT NULL,metadata_location VARCHAR(1000),previous_metadata_location "
               "VARCHAR(1000),PRIMARY KEY (catalog_name, table_namespace, table_name))")
    db.commit()
    config = load_config(write_sql_config(tmp_path))
    create_table("db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    commit(load_table("db.t", config=config), lambda b: property_change({"k": "v"}))
    assert "iceberg_type" not in [r[1] for r in db.execute("PRAGMA table_info(iceberg_tables)")]


def test_pyiceberg_reads_and_commits_to_our_catalog(tmp_path: Path) -> None:
    import pyiceberg.catalog.sql as pyiceberg_sql  # the test extra has it (pyiceberg[sql-sqlite]): no skip
    config = load_config(write_sql_config(tmp_path))
    create_table("db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    commit(load_table("db.t", config=config), lambda b: property_change({"from": "icectl"}))
    theirs = pyiceberg_sql.SqlCatalog("prod", uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                                      warehouse=f"file://{tmp_path / 'sqlwh'}")
    assert theirs.list_tables("db") == [("db", "t")]
    t = theirs.load_table("db.t")
    assert t.properties["from"] == "icectl"
    t.transaction().set_properties({"from": "pyiceberg"}).commit_transaction()
    # ... and icectl continues on top of PyIceberg's commit.
    ours = load_table("db.t", config=config)
    assert ours.metadata.properties["from"] == "pyiceberg"
    assert commit(ours, lambda b: property_change({"again": "icectl"})).committed
    assert theirs.load_table("db.t").properties["again"] == "icectl"

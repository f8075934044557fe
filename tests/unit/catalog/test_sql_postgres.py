"""The SQL catalog on a real PostgreSQL (a private cluster per session, support.postgres): Iceberg's
JdbcCatalog schema, compare-and-swap commits, V0 catalogs, and one-line errors for each way the
connection can fail."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from support.forge import property_change
from support.postgres import PASSWORD, USER, PgServer

from icectl.catalog.sql import SqlCatalog
from icectl.config import load_config, parse_config
from icectl.errors import (
    CorruptInputError,
    ExitCode,
    IcectlError,
    NotFoundError,
    RefusedError,
    StorageError,
    UsageError,
)
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit, create_table
from unit.table.test_commit import new_md

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 not installed (pip install 'icectl[postgres]')")


def write_pg_config(tmp_path: Path, uri: str, catalog: str = "prod", extra: str = "") -> Path:
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'default-catalog = "{catalog}"\n[catalog.{catalog}]\ntype = "sql"\n'
                   f'uri = "{uri}"\nwarehouse = "{tmp_path / "wh"}"\n{extra}')
    return cfg


def rows(uri: str, sql: str) -> list[tuple]:
    with psycopg.connect(uri) as conn:
        return conn.execute(sql).fetchall()


def catalog_columns(uri: str) -> list[str]:
    return [r[0] for r in rows(uri, "SELECT column_name FROM information_schema.columns "
                                    "WHERE table_name = 'iceberg_tables' ORDER BY ordinal_position")]


def test_schema_namespaces_create_and_commit(tmp_path: Path, pg_database: str) -> None:
    config = load_config(write_pg_config(tmp_path, pg_database))
    created = create_table("prod.db.t", None, new_md(tmp_path / "wh" / "db" / "t"), config=config)
    assert Path(created.metadata_location).name.startswith("00000-")
    with pytest.raises(RefusedError, match="already exists"):
        create_table("prod.db.t", None, new_md(tmp_path / "wh" / "db" / "t"), config=config)
    # Exactly JdbcUtil's tables (V0 DDL + the V1 column), as Spark's JdbcCatalog makes them.
    assert catalog_columns(pg_database) == ["catalog_name", "table_namespace", "table_name", "metadata_location",
                                            "previous_metadata_location", "iceberg_type"]
    catalog = load_table("prod.db.t", config=config).catalog
    assert isinstance(catalog, SqlCatalog)
    catalog.create_namespace(("sales", "eu"), {"owner": "ops"})
    assert catalog.list_namespaces() == [("db",), ("sales",)]
    assert catalog.list_tables(("db",)) == [("db", "t")]
    with pytest.raises(RefusedError):
        catalog.create_namespace(("sales", "eu"))
    assert not catalog.create_namespace(("sales", "eu"), exist_ok=True)
    assert rows(pg_database, "SELECT property_key, property_value FROM iceberg_namespace_properties "
                             "WHERE namespace = 'sales.eu' ORDER BY 1") == [("exists", "true"), ("owner", "ops")]
    r = commit(load_table("prod.db.t", config=config), lambda b: property_change({"k": "v"}))
    assert rows(pg_database, "SELECT catalog_name, table_namespace, table_name, metadata_location, "
                             "previous_metadata_location, iceberg_type FROM iceberg_tables") == [
        ("prod", "db", "t", r.metadata_location, created.metadata_location, "TABLE")]
    assert Path(r.metadata_location).name.startswith("00001-")
    assert load_table("prod.db.t", config=config).metadata.properties["k"] == "v"


def test_compare_and_swap(tmp_path: Path, pg_database: str) -> None:
    catalog = SqlCatalog("c", pg_database, str(tmp_path / "wh"), FileIO())
    catalog.create_table_entry(("db",), "t", "file:/m0")
    assert not catalog.swap_metadata_location(("db",), "t", "file:/other", "file:/m1")  # lost: no row changed
    assert catalog.load_metadata_location(("db",), "t") == "file:/m0"
    assert catalog.swap_metadata_location(("db",), "t", "file:/m0", "file:/m1")
    assert not catalog.swap_metadata_location(("db",), "t", "file:/m0", "file:/m2")  # stale base
    assert rows(pg_database, "SELECT metadata_location, previous_metadata_location FROM iceberg_tables") == [
        ("file:/m1", "file:/m0")]
    # A VIEW row of the same name (V1 catalogs hold views too) is never treated as the table.
    with psycopg.connect(pg_database) as conn:
        conn.execute("INSERT INTO iceberg_tables VALUES ('c', 'db', 'v', 'file:/view', null, 'VIEW')")
    assert catalog.list_tables(("db",)) == [("db", "t")]
    assert not catalog.swap_metadata_location(("db",), "v", "file:/view", "file:/x")


def test_concurrent_commits_lose_nothing(tmp_path: Path, pg_database: str) -> None:
    config = load_config(write_pg_config(tmp_path, pg_database))
    create_table("db.t", None, new_md(tmp_path / "wh" / "db" / "t"), config=config)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(5):
                commit(load_table("db.t", config=config), lambda b, n=n, i=i: property_change({f"w{n}.{i}": "x"}))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    props = load_table("db.t", config=config).metadata.properties
    written = {k for k in props if k.startswith("w") and k[1].isdigit()}
    assert written == {f"w{n}.{i}" for n in range(4) for i in range(5)}
    # 1 create + 20 commits: each commit swapped exactly once, on top of the one before.
    assert Path(load_table("db.t", config=config).metadata_location).name.startswith("00020-")


def test_v0_catalog_stays_v0(tmp_path: Path, pg_database: str) -> None:
    with psycopg.connect(pg_database) as conn:  # what Java writes with jdbc.schema-version=V0 (its default)
        conn.execute("CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,table_namespace VARCHAR(255) "
                     "NOT NULL,table_name VARCHAR(255) NOT NULL,metadata_location VARCHAR(1000),"
                     "previous_metadata_location VARCHAR(1000),"
                     "PRIMARY KEY (catalog_name, table_namespace, table_name))")
    config = load_config(write_pg_config(tmp_path, pg_database))
    create_table("db.t", None, new_md(tmp_path / "wh" / "db" / "t"), config=config)
    r = commit(load_table("db.t", config=config), lambda b: property_change({"k": "v"}))
    assert "iceberg_type" not in catalog_columns(pg_database)
    assert rows(pg_database, "SELECT metadata_location FROM iceberg_tables") == [(r.metadata_location,)]
    assert load_table("db.t", config=config).catalog.list_tables(("db",)) == [("db", "t")]


@pytest.mark.parametrize("spelling", ["postgresql+psycopg", "postgres", "jdbc"])
def test_uri_spellings(tmp_path: Path, pg_server: PgServer, pg_database: str, spelling: str) -> None:
    db = pg_database.rsplit("/", 1)[1]
    if spelling == "jdbc":  # Java's config: credentials as catalog properties
        uri, props = f"{pg_server.jdbc_uri(db)}", {"jdbc.user": USER, "jdbc.password": PASSWORD}
    else:
        uri, props = pg_database.replace("postgresql://", f"{spelling}://"), {}
    catalog = SqlCatalog("c", uri, str(tmp_path / "wh"), FileIO(), props)
    catalog.create_namespace(("ns",))
    assert catalog.list_namespaces() == [("ns",)]
    assert PASSWORD not in catalog.db_path


def _one_line(e: IcectlError) -> str:
    line = e.one_line()
    assert "\n" not in line and PASSWORD not in line and "bad-pw" not in line
    return line


def test_connection_failures_are_one_line(tmp_path: Path, pg_server: PgServer, pg_database: str) -> None:
    db = pg_database.rsplit("/", 1)[1]
    cases = {
        "bad password": (pg_server.uri(db, password="bad-pw"), StorageError, "credentials rejected"),
        "unknown user": (pg_server.uri(db, user="nobody_here"), StorageError, "credentials rejected"),
        "server down": (pg_server.uri(db, port=_closed_port()), StorageError, "cannot connect"),
        "missing database": (pg_server.uri("no_such_db"), NotFoundError, "does not exist"),
    }
    for label, (uri, kind, text) in cases.items():
        catalog = SqlCatalog("c", uri, str(tmp_path / "wh"), FileIO())
        for action in ("load", "create"):
            with pytest.raises(kind) as info:
                if action == "load":
                    catalog.load_metadata_location(("db",), "t")
                else:
                    catalog.create_namespace(("db",))
            assert text in _one_line(info.value), label
            assert info.value.exit_code == (ExitCode.NOT_FOUND if kind is NotFoundError else ExitCode.STORAGE)
    # Nothing was written by any of them: the catalog tables were never created.
    assert rows(pg_database, "SELECT to_regclass('iceberg_tables') IS NULL") == [(True,)]


def test_missing_table_and_missing_tables(tmp_path: Path, pg_database: str) -> None:
    catalog = SqlCatalog("c", pg_database, str(tmp_path / "wh"), FileIO())
    with pytest.raises(NotFoundError, match="not found"):  # no iceberg_tables at all: an empty catalog
        catalog.load_metadata_location(("db",), "t")
    assert catalog.list_namespaces() == []
    with pytest.raises(NotFoundError, match="namespace db not found"):  # as JdbcCatalog.listTables
        catalog.list_tables(("db",))
    catalog.create_namespace(("db",))
    assert catalog.list_tables(("db",)) == []
    with pytest.raises(NotFoundError, match="not found"):
        catalog.load_metadata_location(("db",), "t")


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_from_config_jdbc_properties_and_bad_uris(tmp_path: Path, pg_server: PgServer,
                                                  pg_database: str) -> None:
    db = pg_database.rsplit("/", 1)[1]
    cfg = parse_config({"catalog": {"pg": {"type": "sql", "uri": pg_server.jdbc_uri(db), "warehouse": str(tmp_path),
                                           "jdbc.user": USER, "jdbc.password": PASSWORD}}}, source="/etc/icectl.toml")
    catalog = SqlCatalog.from_config(cfg.catalog("pg"), FileIO())
    assert catalog.create_namespace(("ns",)) and catalog.list_namespaces() == [("ns",)]
    for uri in ("mysql://u:p@127.0.0.1/db", "postgresql://127.0.0.1", "postgresql://h/db?ssl=true"):
        bad = parse_config({"catalog": {"pg": {"type": "sql", "uri": uri, "warehouse": str(tmp_path)}}},
                           source="/etc/icectl.toml")
        with pytest.raises(CorruptInputError) as info:
            SqlCatalog.from_config(bad.catalog("pg"), FileIO())
        assert info.value.exit_code == ExitCode.CORRUPT and "/etc/icectl.toml" in info.value.one_line()


def test_missing_driver_is_one_line(tmp_path: Path, pg_database: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    catalog = SqlCatalog("c", pg_database, str(tmp_path / "wh"), FileIO())
    with pytest.raises(UsageError) as info:
        catalog.list_namespaces()
    assert "pip install 'icectl[postgres]'" in _one_line(info.value) and info.value.exit_code == ExitCode.USAGE


def test_catalog_names_share_a_database_and_current_schema(tmp_path: Path, pg_server: PgServer,
                                                          pg_database: str) -> None:
    a = SqlCatalog("a", pg_database, str(tmp_path / "wa"), FileIO())
    b = SqlCatalog("b", pg_database, str(tmp_path / "wb"), FileIO())
    a.create_table_entry(("db",), "t", "file:/a0")
    assert b.list_namespaces() == []  # catalog_name separates them: b has no namespace db
    with pytest.raises(NotFoundError, match="namespace db not found in catalog 'b'"):
        b.list_tables(("db",))
    with pytest.raises(NotFoundError):
        b.load_metadata_location(("db",), "t")
    assert not b.swap_metadata_location(("db",), "t", "file:/a0", "file:/b1")
    assert a.load_metadata_location(("db",), "t") == "file:/a0"
    # JDBC's currentSchema: the catalog tables live in that schema, not in public.
    with psycopg.connect(pg_database) as conn:
        conn.execute("CREATE SCHEMA ice")
    db = pg_database.rsplit("/", 1)[1]
    c = SqlCatalog("c", f"{pg_server.jdbc_uri(db)}?currentSchema=ice", str(tmp_path / "wc"), FileIO(),
                   {"jdbc.user": USER, "jdbc.password": PASSWORD})
    c.create_table_entry(("db",), "t", "file:/c0")
    assert rows(pg_database, "SELECT catalog_name FROM ice.iceberg_tables") == [("c",)]
    assert rows(pg_database, "SELECT catalog_name FROM public.iceberg_tables") == [("a",)]

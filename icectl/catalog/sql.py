"""A SQLite catalog in the layout of Iceberg's JDBC catalog and PyIceberg's SqlCatalog.

Tables live in ``iceberg_tables(catalog_name, table_namespace, table_name,
metadata_location, previous_metadata_location)``; namespaces in
``iceberg_namespace_properties``. Namespaces are stored dot-joined, as both do.

Writes (used by :mod:`icectl.catalog.operations`) use Java's ``JdbcUtil`` statements. A new
catalog gets the V1 schema: Java's V0 DDL plus its ``V1_UPDATE_CATALOG_SQL`` column
``iceberg_type`` (what Java writes with ``jdbc.schema-version=V1`` and PyIceberg 0.12 creates by
default; Java switches to V1 by itself when it sees the column, older clients ignore it). An
existing V0 catalog is left as it is and written in V0 form.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from icectl.catalog.operations import MetastoreOperations
from icectl.errors import CorruptInputError, NotFoundError, RefusedError, StorageError
from icectl.spec.metadata import TableMetadata
from icectl.storage import FileIO, join, local_path

# JdbcUtil.V0_CREATE_CATALOG_SQL and CREATE_NAMESPACE_PROPERTIES_TABLE_SQL, verbatim (PyIceberg's
# SQLAlchemy models produce the same columns), so Java and PyIceberg can both open our file.
CREATE_CATALOG_SQL = (
    "CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,table_namespace VARCHAR(255) NOT NULL,"
    "table_name VARCHAR(255) NOT NULL,metadata_location VARCHAR(1000),previous_metadata_location VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, table_namespace, table_name))")
CREATE_NAMESPACE_PROPERTIES_SQL = (
    "CREATE TABLE iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL,"
    "namespace VARCHAR(255) NOT NULL,property_key VARCHAR(255),property_value VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, namespace, property_key))")
V1_UPDATE_CATALOG_SQL = "ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)"
RECORD_TYPE = "iceberg_type"  # V1 schema only: 'TABLE' or 'VIEW' (NULL for rows written by V0 clients)
_TABLE_ROWS = f"({RECORD_TYPE} = 'TABLE' OR {RECORD_TYPE} IS NULL)"
NAMESPACE_EXISTS_PROPERTY = "exists"  # what Java and PyIceberg store for a namespace without properties


@dataclass
class SqlCatalog:
    name: str
    uri: str  # path of the SQLite file (``sqlite:///x.db`` accepted)
    warehouse: str
    io: FileIO

    @property
    def db_path(self) -> str:
        # SQLAlchemy style: sqlite:///rel.db is relative, sqlite:////abs.db absolute.
        for prefix in ("sqlite:///", "jdbc:sqlite:"):
            if self.uri.startswith(prefix):
                return self.uri[len(prefix):]
        return local_path(self.uri)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        except sqlite3.Error as e:
            raise StorageError(f"cannot open SQLite catalog {self.db_path}: {e}", path=self.db_path) from e
        try:
            yield conn
        except sqlite3.DatabaseError as e:
            raise CorruptInputError(f"SQLite catalog {self.db_path} failed: {e}", path=self.db_path) from e
        finally:
            conn.close()

    def default_table_location(self, namespace: tuple[str, ...], table: str) -> str:
        """``<warehouse>/<ns1>/<ns2>/<table>``, as JdbcCatalog.defaultWarehouseLocation."""
        return join(self.warehouse, *namespace, table)

    def table_operations(self, namespace: tuple[str, ...], table: str) -> SqlOperations:
        return SqlOperations(self, namespace, table, self.io)

    def require_db(self) -> None:
        """Reading a catalog whose database file is missing is an error, not an empty catalog
        (sqlite3 would create the file, and a cron job on a wrong path would report 0 tables)."""
        if not os.path.exists(self.db_path):
            raise NotFoundError(f"SQLite catalog '{self.name}' does not exist: no database {self.db_path}",
                                path=self.db_path,
                                hint="check the catalog's uri in the config; 'icectl namespace create NAME' "
                                     "starts a new one")

    def load_metadata_location(self, namespace: tuple[str, ...], table: str) -> str:
        self.require_db()
        with self.connect() as c:
            try:
                row = c.execute(
                    "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? "
                    "AND table_namespace = ? AND table_name = ?",
                    (self.name, ".".join(namespace), table)).fetchone()
            except sqlite3.OperationalError:
                row = None  # no iceberg_tables yet: an empty catalog
        if row is None or not row[0]:
            raise NotFoundError(f"table {'.'.join((*namespace, table))} not found in catalog '{self.name}'",
                                path=self.db_path, hint="check the name with 'icectl list'")
        return str(row[0])

    def list_namespaces(self, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        self.require_db()
        names: set[str] = set()
        with self.connect() as c:
            for sql in ("SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?",
                        "SELECT DISTINCT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?"):
                try:
                    names.update(r[0] for r in c.execute(sql, (self.name,)))
                except sqlite3.OperationalError:
                    pass
        out = set()
        for n in names:
            parts = tuple(n.split("."))
            if parts[: len(parent)] == parent and len(parts) > len(parent):
                out.add(parts[: len(parent) + 1])
        return sorted(out)

    def list_tables(self, namespace: tuple[str, ...]) -> list[tuple[str, ...]]:
        self.require_db()
        with self.connect() as c:
            try:
                rows = c.execute("SELECT table_name FROM iceberg_tables WHERE catalog_name = ? "
                                 "AND table_namespace = ? ORDER BY table_name",
                                 (self.name, ".".join(namespace))).fetchall()
            except sqlite3.OperationalError:
                rows = []
        return [(*namespace, r[0]) for r in rows]

    # -- writes ---------------------------------------------------------------------------------

    def ensure_tables(self) -> None:
        """Create the catalog tables when missing (as JdbcCatalog.initializeCatalogTables does)."""
        with self.connect() as c:
            existing = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table, ddl in (("iceberg_tables", CREATE_CATALOG_SQL),
                               ("iceberg_namespace_properties", CREATE_NAMESPACE_PROPERTIES_SQL)):
                if table not in existing:
                    try:
                        c.execute("BEGIN IMMEDIATE")  # the table and its V1 column together
                        c.execute(ddl)
                        if table == "iceberg_tables":
                            c.execute(V1_UPDATE_CATALOG_SQL)
                        c.execute("COMMIT")
                    except sqlite3.OperationalError:
                        if c.in_transaction:
                            c.execute("ROLLBACK")
                        # Created by another process meanwhile (Java re-checks the same way).
                        if not c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                         (table,)).fetchone():
                            raise

    @staticmethod
    def _is_v1(c: sqlite3.Connection) -> bool:
        return any(r[1].lower() == RECORD_TYPE for r in c.execute("PRAGMA table_info(iceberg_tables)"))

    def create_table_entry(self, namespace: tuple[str, ...], table: str, metadata_location: str) -> None:
        """INSERT the new table's pointer; RefusedError when the name is taken (primary key)."""
        self.ensure_tables()
        ident = ".".join((*namespace, table))
        with self.connect() as c:
            try:
                if self._is_v1(c):
                    c.execute("INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                              f"metadata_location, previous_metadata_location, {RECORD_TYPE}) "
                              "VALUES (?,?,?,?,null,'TABLE')", (self.name, ".".join(namespace), table,
                                                                metadata_location))
                else:
                    c.execute("INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                              "metadata_location, previous_metadata_location) VALUES (?,?,?,?,null)",
                              (self.name, ".".join(namespace), table, metadata_location))
            except sqlite3.IntegrityError:
                raise RefusedError(f"table {ident} already exists in catalog '{self.name}'", path=self.db_path,
                                   hint="choose another name") from None
            except sqlite3.OperationalError as e:
                raise StorageError(f"cannot create table {ident} in {self.db_path}: {e}",
                                   path=self.db_path) from e

    def swap_metadata_location(self, namespace: tuple[str, ...], table: str, expected: str, new: str) -> bool:
        """The commit's check-and-put: point the table at ``new`` only if it still points at ``expected``.

        JdbcUtil's DO_COMMIT statement; False (no row updated) means another writer committed first.
        """
        sql = ("UPDATE iceberg_tables SET metadata_location = ? , previous_metadata_location = ? "
               "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?")
        with self.connect() as c:
            try:
                if self._is_v1(c):
                    sql += f" AND {_TABLE_ROWS}"
                cur = c.execute(sql, (new, expected, self.name, ".".join(namespace), table, expected))
            except sqlite3.OperationalError as e:  # busy past the timeout, I/O error: nothing was changed
                raise StorageError(f"commit to {'.'.join((*namespace, table))} in {self.db_path} failed: {e}",
                                   path=self.db_path) from e
            return cur.rowcount == 1

    def namespace_exists(self, namespace: tuple[str, ...]) -> bool:
        """As JdbcUtil.namespaceExists: the namespace or a child of it holds a table or properties."""
        name = ".".join(namespace)
        return any(n == name or n.startswith(name + ".") for n in self._all_namespaces())

    def _all_namespaces(self) -> set[str]:
        names: set[str] = set()
        with self.connect() as c:
            for sql in ("SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?",
                        "SELECT DISTINCT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?"):
                try:
                    names.update(r[0] for r in c.execute(sql, (self.name,)))
                except sqlite3.OperationalError:
                    pass  # table not created yet
        return names

    def create_namespace(self, namespace: tuple[str, ...], properties: dict[str, str] | None = None, *,
                         exist_ok: bool = False) -> bool:
        """Store a namespace as Java/PyIceberg do: its properties plus ``exists`` = ``true``. False
        when it existed already (refused unless ``exist_ok``; its properties are left as they are)."""
        if not namespace or any(not part or "." in part for part in namespace):
            raise CorruptInputError(f"invalid namespace {namespace!r}")
        self.ensure_tables()
        name = ".".join(namespace)
        if self.namespace_exists(namespace):
            if exist_ok:
                return False
            raise RefusedError(f"namespace {name} already exists in catalog '{self.name}'", path=self.db_path,
                               hint="pass --exist-ok to accept an existing namespace")
        rows = {**(properties or {}), NAMESPACE_EXISTS_PROPERTY: "true"}
        with self.connect() as c:
            try:
                c.execute("BEGIN IMMEDIATE")  # all properties or none
                c.executemany("INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, "
                              "property_value) VALUES (?,?,?,?)",
                              [(self.name, name, k, v) for k, v in rows.items()])
                c.execute("COMMIT")
            except sqlite3.IntegrityError:  # created by another process meanwhile
                c.execute("ROLLBACK")
                if exist_ok:
                    return False
                raise RefusedError(f"namespace {name} already exists in catalog '{self.name}'",
                                   path=self.db_path) from None
        return True


@dataclass
class SqlOperations(MetastoreOperations):
    """JdbcTableOperations for one table of a :class:`SqlCatalog`."""

    catalog: SqlCatalog
    namespace: tuple[str, ...]
    name: str
    io: FileIO

    @property
    def pointer_store(self) -> str:
        return self.catalog.db_path

    def current_pointer(self) -> str:
        return self.catalog.load_metadata_location(self.namespace, self.name)

    def swap_pointer(self, base_location: str, new_location: str, metadata: TableMetadata) -> bool:
        return self.catalog.swap_metadata_location(self.namespace, self.name, base_location, new_location)

    def insert_pointer(self, location: str, metadata: TableMetadata) -> None:
        self.catalog.create_table_entry(self.namespace, self.name, location)

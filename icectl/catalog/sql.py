"""The SQL catalog in the layout of Iceberg's JDBC catalog and PyIceberg's SqlCatalog, on SQLite or
PostgreSQL (:mod:`icectl.catalog.sql_dialect` holds what differs between the two).

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

from dataclasses import dataclass, field

from icectl.catalog.operations import MetastoreOperations
from icectl.catalog.sql_dialect import DuplicateKey, NoCatalogTables, SqlConnection, SqlDatabase, open_database
from icectl.config import CatalogConfig
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, RefusedError
from icectl.spec.metadata import TableMetadata
from icectl.storage import FileIO, join

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
    uri: str  # a SQLite file (``sqlite:///x.db`` accepted) or ``postgresql://USER:PASS@HOST:PORT/DB``
    warehouse: str
    io: FileIO
    properties: dict[str, str] = field(default_factory=dict)  # jdbc.user / jdbc.password
    db: SqlDatabase = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.db = open_database(self.uri, self.properties)

    @classmethod
    def from_config(cls, cc: CatalogConfig, io: FileIO) -> SqlCatalog:
        """From ``[catalog.NAME]``: ``uri`` (SQLite file or PostgreSQL URL), ``warehouse``, and the
        JDBC-style ``jdbc.user`` / ``jdbc.password`` when the URL carries no credentials."""
        source = cc.source
        if not cc.uri or not cc.warehouse:
            raise CorruptInputError(f"sql catalog '{cc.name}' needs uri and warehouse", path=source)
        props = {str(k): str(v) for k, v in cc.properties.items()}
        try:
            return cls(cc.name, str(cc.uri), str(cc.warehouse), io, props)
        except IcectlError as e:
            raise CorruptInputError(f"catalog '{cc.name}': {e.message}", path=source, hint=e.hint) from None

    @property
    def table_is_its_folder(self) -> bool:
        return False

    @property
    def server_writes_metadata(self) -> bool:
        return False

    @property
    def db_path(self) -> str:
        """Where the catalog lives, for messages (a SQLite path, or a PostgreSQL URL without password)."""
        return self.db.where

    def default_table_location(self, namespace: tuple[str, ...], table: str) -> str:
        """``<warehouse>/<ns1>/<ns2>/<table>``, as JdbcCatalog.defaultWarehouseLocation."""
        return join(self.warehouse, *namespace, table)

    def table_operations(self, namespace: tuple[str, ...], table: str) -> SqlOperations:
        return SqlOperations(self, namespace, table, self.io)

    def require_db(self) -> None:
        self.db.require(self.name)

    def load_metadata_location(self, namespace: tuple[str, ...], table: str) -> str:
        self.require_db()
        with self.db.connect() as c:
            try:
                rows = c.rows("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? "
                              "AND table_namespace = ? AND table_name = ?",
                              (self.name, ".".join(namespace), table))
            except NoCatalogTables:
                rows = []  # an empty catalog
        if not rows or not rows[0][0]:
            raise NotFoundError(f"table {'.'.join((*namespace, table))} not found in catalog '{self.name}' "
                                f"({self.db_path})",
                                path=self.db_path, hint="check the name with 'icectl list'")
        return str(rows[0][0])

    def list_namespaces(self, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        self.require_db()
        names = self._all_namespaces()
        if parent and not _namespace_in(parent, names):
            raise self._no_namespace(parent)
        out = set()
        for n in names:
            parts = tuple(n.split("."))
            if parts[: len(parent)] == parent and len(parts) > len(parent):
                out.add(parts[: len(parent) + 1])
        return sorted(out)

    def list_tables(self, namespace: tuple[str, ...]) -> list[tuple[str, ...]]:
        self.require_db()
        with self.db.connect() as c:
            try:
                rows = c.rows("SELECT table_name FROM iceberg_tables WHERE catalog_name = ? "
                              f"AND table_namespace = ?{self._tables_only(c)} ORDER BY table_name",
                              (self.name, ".".join(namespace)))
            except NoCatalogTables:
                rows = []
        if not rows and not self.namespace_exists(namespace):  # as JdbcCatalog.listTables
            raise self._no_namespace(namespace)
        return [(*namespace, r[0]) for r in rows]

    def _no_namespace(self, namespace: tuple[str, ...]) -> NotFoundError:
        return NotFoundError(f"namespace {'.'.join(namespace)} not found in catalog '{self.name}' ({self.db_path})",
                             path=self.db_path, hint="list the namespaces with 'icectl list'")

    # -- writes ---------------------------------------------------------------------------------

    def ensure_tables(self) -> None:
        """Create the catalog tables when missing (as JdbcCatalog.initializeCatalogTables does)."""
        with self.db.connect() as c:
            for table, ddl in (("iceberg_tables", CREATE_CATALOG_SQL),
                               ("iceberg_namespace_properties", CREATE_NAMESPACE_PROPERTIES_SQL)):
                if c.has_table(table):
                    continue
                try:
                    with c.transaction():  # the table and its V1 column together
                        c.execute(ddl)
                        if table == "iceberg_tables":
                            c.execute(V1_UPDATE_CATALOG_SQL)
                except Exception:
                    # Created by another process meanwhile (Java re-checks the same way).
                    if not c.has_table(table):
                        raise

    @staticmethod
    def _is_v1(c: SqlConnection) -> bool:
        return any(col.lower() == RECORD_TYPE for col in c.columns("iceberg_tables"))

    def _tables_only(self, c: SqlConnection) -> str:
        # V1 catalogs also hold views (iceberg_type = 'VIEW'): never list or commit to those.
        return f" AND {_TABLE_ROWS}" if self._is_v1(c) else ""

    def create_table_entry(self, namespace: tuple[str, ...], table: str, metadata_location: str) -> None:
        """INSERT the new table's pointer; RefusedError when the name is taken (primary key)."""
        self.ensure_tables()
        ident = ".".join((*namespace, table))
        with self.db.connect() as c:
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
            except DuplicateKey:
                raise RefusedError(f"table {ident} already exists in catalog '{self.name}'", path=self.db_path,
                                   hint="choose another name") from None

    def swap_metadata_location(self, namespace: tuple[str, ...], table: str, expected: str, new: str) -> bool:
        """The commit's check-and-put: point the table at ``new`` only if it still points at ``expected``.

        JdbcUtil's DO_COMMIT statement, one atomic UPDATE; False (no row updated) means another
        writer committed first. A StorageError (connection lost mid-statement) leaves the outcome
        unknown: the caller re-reads the pointer to decide.
        """
        sql = ("UPDATE iceberg_tables SET metadata_location = ? , previous_metadata_location = ? "
               "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?")
        with self.db.connect() as c:
            sql += self._tables_only(c)
            return c.execute(sql, (new, expected, self.name, ".".join(namespace), table, expected)) == 1

    def delete_table_entry(self, namespace: tuple[str, ...], table: str, expected: str) -> bool:
        """JdbcUtil's DROP_TABLE_SQL, conditioned on the pointer: remove the row only while it names
        ``expected`` (one atomic DELETE). False when it names another file now; NotFoundError when
        there is no such table (of type TABLE: a view of that name is never dropped)."""
        sql = ("DELETE FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? "
               "AND metadata_location = ?")
        self.require_db()
        with self.db.connect() as c:
            try:
                sql += self._tables_only(c)
                deleted = c.execute(sql, (self.name, ".".join(namespace), table, expected))
            except NoCatalogTables:
                deleted = 0
        if deleted:
            return True
        self.load_metadata_location(namespace, table)  # NotFoundError when it is gone
        return False

    def namespace_exists(self, namespace: tuple[str, ...]) -> bool:
        """As JdbcUtil.namespaceExists: the namespace or a child of it holds a table or properties."""
        return _namespace_in(namespace, self._all_namespaces())

    def _all_namespaces(self) -> set[str]:
        names: set[str] = set()
        with self.db.connect() as c:
            for sql in ("SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?",
                        "SELECT DISTINCT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?"):
                try:
                    names.update(r[0] for r in c.rows(sql, (self.name,)))
                except NoCatalogTables:
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
        with self.db.connect() as c:
            try:
                with c.transaction():  # all properties or none
                    c.execute_many("INSERT INTO iceberg_namespace_properties (catalog_name, namespace, "
                                   "property_key, property_value) VALUES (?,?,?,?)",
                                   [(self.name, name, k, v) for k, v in rows.items()])
            except DuplicateKey:  # created by another process meanwhile
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

    @property
    def register_checks_namespace(self) -> bool:
        return False  # a JDBC catalog registers into any namespace name, as Java's does

    def current_pointer(self) -> str:
        return self.catalog.load_metadata_location(self.namespace, self.name)

    def swap_pointer(self, base_location: str, new_location: str, metadata: TableMetadata) -> bool:
        return self.catalog.swap_metadata_location(self.namespace, self.name, base_location, new_location)

    def insert_pointer(self, location: str, metadata: TableMetadata) -> None:
        self.catalog.create_table_entry(self.namespace, self.name, location)

    def delete_pointer(self, expected_location: str) -> bool:
        return self.catalog.delete_table_entry(self.namespace, self.name, expected_location)


def _namespace_in(namespace: tuple[str, ...], names: set[str]) -> bool:
    """JdbcUtil.namespaceExists over the catalog's namespace names: it or a child of it is there."""
    name = ".".join(namespace)
    return any(n == name or n.startswith(name + ".") for n in names)

"""A SQLite catalog in the layout of Iceberg's JDBC catalog and PyIceberg's SqlCatalog.

Tables live in ``iceberg_tables(catalog_name, table_namespace, table_name,
metadata_location, previous_metadata_location)``; namespaces in
``iceberg_namespace_properties``. Namespaces are stored dot-joined, as both do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from icectl.errors import CorruptInputError, NotFoundError, StorageError
from icectl.storage import FileIO, join, local_path


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

    def table_dir(self, namespace: tuple[str, ...], table: str) -> str:
        return join(self.warehouse, *namespace, table)

    def load_metadata_location(self, namespace: tuple[str, ...], table: str) -> str:
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
        with self.connect() as c:
            try:
                rows = c.execute("SELECT table_name FROM iceberg_tables WHERE catalog_name = ? "
                                 "AND table_namespace = ? ORDER BY table_name",
                                 (self.name, ".".join(namespace))).fetchall()
            except sqlite3.OperationalError:
                rows = []
        return [(*namespace, r[0]) for r in rows]

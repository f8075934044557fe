"""The databases a SQL (JDBC-schema) catalog lives in: a SQLite file, or PostgreSQL.

:class:`~icectl.catalog.sql.SqlCatalog` writes its statements once, with ``?`` placeholders, against
:class:`SqlConnection`; a :class:`SqlDatabase` opens connections and turns the driver's errors into
ours. Two driver outcomes matter to the catalog logic and get their own exceptions:
:class:`DuplicateKey` (a primary-key clash: the name is taken) and :class:`NoCatalogTables` (the
JDBC tables were never created: an empty catalog). Everything else is an :class:`IcectlError` with
one line: connection and I/O problems a :class:`StorageError` (exit 8; a rejected password says so),
a PostgreSQL database that does not exist a :class:`NotFoundError` (exit 3).

PostgreSQL goes through psycopg 3, imported lazily (``pip install 'icectl[postgres]'``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from icectl.errors import CorruptInputError, IcectlError, NotFoundError, StorageError, UsageError
from icectl.storage import local_path

Params = Sequence[Any]

POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2",
                    "postgresql+pg8000", "postgresql+asyncpg")
SQLITE_PREFIXES = ("sqlite:///", "jdbc:sqlite:")
CONNECT_TIMEOUT_S = 10  # a down or firewalled server fails the command instead of hanging it
# A row held by a stuck transaction of another client fails the statement instead of hanging the
# command; a commit's UPDATE that fails so is resolved by re-reading the pointer.
SERVER_OPTIONS = "-c lock_timeout=30s -c statement_timeout=120s"
# libpq parameters a JDBC URL's query may carry with the same meaning (others are JDBC-only).
_LIBPQ_QUERY_KEYS = frozenset({"user", "password", "sslmode", "sslrootcert", "sslcert", "sslkey",
                               "application_name", "connect_timeout", "options", "target_session_attrs"})


class DuplicateKey(Exception):
    """An INSERT hit a primary key: the table or namespace property exists already."""


class NoCatalogTables(Exception):
    """``iceberg_tables`` / ``iceberg_namespace_properties`` do not exist yet."""


class SqlConnection(Protocol):
    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]: ...
    def execute(self, sql: str, params: Params = ()) -> int: ...   # rows affected
    def execute_many(self, sql: str, rows: Sequence[Params]) -> None: ...
    def transaction(self) -> Any: ...   # context manager: all statements inside or none
    def has_table(self, table: str) -> bool: ...
    def columns(self, table: str) -> list[str]: ...


class SqlDatabase(Protocol):
    @property
    def where(self) -> str: ...  # for messages and error paths; never holds a password

    def require(self, catalog: str) -> None: ...   # NotFoundError when the database does not exist
    def connect(self) -> Any: ...   # context manager yielding a SqlConnection


def open_database(uri: str, properties: dict[str, str] | None = None) -> SqlDatabase:
    """The database a catalog ``uri`` names: PostgreSQL URLs (SQLAlchemy and JDBC spellings), else a
    SQLite file (``sqlite:///x.db``, ``jdbc:sqlite:x.db`` or a plain path)."""
    props = properties or {}
    text = uri[len("jdbc:"):] if uri.startswith("jdbc:postgresql:") else uri
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme in POSTGRES_SCHEMES:
        return PostgresDatabase.from_uri(text, props)
    if scheme and scheme not in ("sqlite", "file"):
        raise CorruptInputError(f"sql catalog uri '{scheme}://...' is not supported",
                                hint="use postgresql://USER:PASS@HOST:PORT/DB or a SQLite file (sqlite:///PATH)")
    for prefix in SQLITE_PREFIXES:
        if uri.startswith(prefix):
            return SqliteDatabase(uri[len(prefix):])
    return SqliteDatabase(local_path(uri))


# --------------------------------------------------------------------------- SQLite


@dataclass
class SqliteConnection:
    conn: sqlite3.Connection
    where: str

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as e:
            raise DuplicateKey(str(e)) from e
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                raise NoCatalogTables(str(e)) from e
            # Locked past the timeout, read-only file, I/O error: nothing was changed.
            raise StorageError(f"SQLite catalog {self.where} failed: {e}", path=self.where) from e
        except sqlite3.DatabaseError as e:  # not a database, malformed image
            raise CorruptInputError(f"SQLite catalog {self.where} failed: {e}", path=self.where) from e

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            return self.conn.execute(sql, tuple(params)).fetchall()

    def execute(self, sql: str, params: Params = ()) -> int:
        with self._errors():
            return self.conn.execute(sql, tuple(params)).rowcount

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        with self._errors():
            self.conn.executemany(sql, [tuple(r) for r in rows])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._errors():
            self.conn.execute("BEGIN IMMEDIATE")  # takes the write lock now, not at the first write
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        with self._errors():
            self.conn.execute("COMMIT")

    def has_table(self, table: str) -> bool:
        return bool(self.rows("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)))

    def columns(self, table: str) -> list[str]:
        return [str(r[1]) for r in self.rows(f"PRAGMA table_info({table})")]


@dataclass
class SqliteDatabase:
    path: str

    @property
    def where(self) -> str:
        return self.path

    def require(self, catalog: str) -> None:
        """Reading a catalog whose database file is missing is an error, not an empty catalog
        (sqlite3 would create the file, and a cron job on a wrong path would report 0 tables)."""
        if not os.path.exists(self.path):
            raise NotFoundError(f"SQLite catalog '{catalog}' does not exist: no database {self.path}",
                                path=self.path,
                                hint="check the catalog's uri in the config; 'icectl namespace create NAME' "
                                     "starts a new one")

    @contextmanager
    def connect(self) -> Iterator[SqliteConnection]:
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except sqlite3.Error as e:
            raise StorageError(f"cannot open SQLite catalog {self.path}: {e}", path=self.path) from e
        try:
            yield SqliteConnection(conn, self.path)
        finally:
            conn.close()


# --------------------------------------------------------------------------- PostgreSQL


@dataclass
class PostgresConnection:
    conn: Any  # psycopg.Connection in autocommit mode: each statement is its own transaction
    where: str

    @contextmanager
    def _errors(self) -> Iterator[None]:
        import psycopg  # already imported by PostgresDatabase.connect

        try:
            yield
        except psycopg.errors.UniqueViolation as e:
            raise DuplicateKey(str(e)) from e
        except psycopg.errors.UndefinedTable as e:
            raise NoCatalogTables(str(e)) from e
        except psycopg.errors.InsufficientPrivilege as e:
            raise StorageError(f"PostgreSQL catalog {self.where}: permission denied ({_first_line(e)})",
                               path=self.where, hint="grant the catalog user access to the iceberg_* tables") from e
        except psycopg.Error as e:  # lost connection, statement timeout, server shutting down
            raise StorageError(f"PostgreSQL catalog {self.where} failed: {_first_line(e)}", path=self.where) from e

    @staticmethod
    def _sql(sql: str) -> str:
        # Our statements carry no literal '?' or '%': only placeholders need translating.
        return sql.replace("?", "%s")

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            return list(self.conn.execute(self._sql(sql), tuple(params)).fetchall())

    def execute(self, sql: str, params: Params = ()) -> int:
        with self._errors():
            return int(self.conn.execute(self._sql(sql), tuple(params)).rowcount)

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        with self._errors(), self.conn.cursor() as cur:
            cur.executemany(self._sql(sql), [tuple(r) for r in rows])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._errors(), self.conn.transaction():
            yield

    def has_table(self, table: str) -> bool:
        # to_regclass resolves through search_path, as the unqualified statements will.
        return bool(self.rows("SELECT to_regclass(?) IS NOT NULL", (table,))[0][0])

    def columns(self, table: str) -> list[str]:
        with self._errors():
            cur = self.conn.execute(f"SELECT * FROM {table} WHERE 1 = 0")
            return [str(d.name) for d in cur.description or ()]


@dataclass
class PostgresDatabase:
    host: str
    port: int
    dbname: str
    user: str | None
    password: str | None = field(repr=False)
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_uri(cls, uri: str, properties: dict[str, str]) -> PostgresDatabase:
        """``postgresql[+driver]://[user[:pass]@]host[:port]/db[?k=v]``; JDBC's ``jdbc.user`` /
        ``jdbc.password`` catalog properties (or ``user``/``password`` query keys) also count."""
        parts = urlsplit(uri)
        dbname = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not dbname:
            raise CorruptInputError("sql catalog uri needs a host and a database",
                                    hint="uri = \"postgresql://USER:PASS@HOST:PORT/DB\"")
        query = dict(parse_qsl(parts.query))
        unknown = sorted(k for k in query if k not in _LIBPQ_QUERY_KEYS and k != "currentSchema")
        if unknown:
            raise CorruptInputError(f"sql catalog uri has parameters libpq does not know: {', '.join(unknown)}",
                                    hint=f"supported: {', '.join(sorted(_LIBPQ_QUERY_KEYS))}, currentSchema")
        user = (unquote(parts.username) if parts.username else None) or query.pop("user", None) \
            or properties.get("jdbc.user") or properties.get("user")
        password = (unquote(parts.password) if parts.password else None) or query.pop("password", None) \
            or properties.get("jdbc.password") or properties.get("password")
        query.pop("user", None)
        query.pop("password", None)
        schema = query.pop("currentSchema", None)
        if schema:  # JDBC's spelling of the search path
            query["options"] = f"{query.get('options', '')} -c search_path={schema}".strip()
        try:
            port = parts.port or 5432
        except ValueError as e:
            raise CorruptInputError(f"sql catalog uri has a bad port: {e}") from None
        return cls(parts.hostname, port, dbname, user, password, query)

    @property
    def where(self) -> str:
        who = f"{quote(self.user)}@" if self.user else ""
        return f"postgresql://{who}{self.host}:{self.port}/{self.dbname}"

    def require(self, catalog: str) -> None:
        """A missing database is found when connecting (NotFoundError there)."""

    @contextmanager
    def connect(self) -> Iterator[PostgresConnection]:
        try:
            import psycopg  # lazy: only PostgreSQL catalogs need it, and it costs ~50 ms to import
        except ImportError:
            # Exit 2 as for Glue without boto3: the installation cannot do what was asked.
            raise UsageError(f"catalog {self.where} is on PostgreSQL and the psycopg driver is not installed",
                             hint="pip install 'icectl[postgres]'") from None
        kwargs: dict[str, Any] = {"host": self.host, "port": self.port, "dbname": self.dbname,
                                  "connect_timeout": CONNECT_TIMEOUT_S, **self.options}
        kwargs["options"] = f"{SERVER_OPTIONS} {kwargs.get('options', '')}".strip()  # the uri's settings win
        if self.user:
            kwargs["user"] = self.user
        if self.password is not None:
            kwargs["password"] = self.password
        try:
            conn = psycopg.connect(autocommit=True, **kwargs)
        except psycopg.Error as e:
            raise self._connect_error(e) from None
        try:
            yield PostgresConnection(conn, self.where)
        finally:
            conn.close()

    def _connect_error(self, e: Exception) -> IcectlError:
        # libpq reports connection failures as text only (no SQLSTATE reaches the client).
        text = _first_line(e)
        low = text.lower()
        if f'database "{self.dbname.lower()}" does not exist' in low:
            return NotFoundError(f"PostgreSQL database does not exist: {self.where}",
                                 path=self.where, hint="check the database name in the catalog's uri")
        if any(s in low for s in ("password authentication failed", "no password supplied",
                                  "role \"", "no pg_hba.conf entry", "authentication failed")):
            return StorageError(f"PostgreSQL credentials rejected for {self.where}",
                                path=self.where, hint="check the user and password in the catalog's uri")
        return StorageError(f"cannot connect to PostgreSQL catalog {self.where}: {_short(text)}",
                            path=self.where, hint="is the server running and reachable?")


def _first_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


def _short(text: str) -> str:
    # libpq prefixes "connection failed: connection to server at "h", port p failed: "; keep the cause.
    return text.rsplit(" failed: ", 1)[-1].replace("FATAL:", "").strip() or text

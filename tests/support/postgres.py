"""A private PostgreSQL cluster for tests: initdb into a temp dir, loopback only, a free port.

* :func:`start_postgres` runs ``initdb`` + ``pg_ctl start`` from Debian's ``postgresql`` package
  (``/usr/lib/postgresql/<v>/bin`` or ``PATH``). PostgreSQL refuses to run as root, so when the
  tests run as root the cluster directory is handed to an unprivileged user (``postgres`` if the
  package created it, else ``nobody``) and the server runs as that user via ``runuser``.
* The server listens on 127.0.0.1 only; its unix socket lives in the cluster's temp dir.
  Authentication is ``scram-sha-256`` over TCP, so a wrong password is really rejected and the
  URI ``postgresql://USER:PASS@127.0.0.1:PORT/DB`` is exercised with its password.
* The session fixture ``pg_server`` starts one cluster for the session and stops it at the end;
  it SKIPS (with the reason) when the binaries are missing. ``pg_database`` makes a fresh empty
  database per test, owned by the test user.

Use the fixtures by importing them into a test module::

    from support.postgres import pg_database, pg_server  # noqa: F401
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HOST = "127.0.0.1"
USER = "icectl"  # the catalog user (not a superuser): what a real deployment would give us
PASSWORD = "icectl-pw"
DATABASE = "iceberg"
SUPERUSER = "pgadmin"  # the cluster's bootstrap superuser (trust on the unix socket only)
JDBC_JAR = "/usr/share/java/postgresql.jar"  # Debian's libpostgresql-jdbc-java


@dataclass(frozen=True)
class PgServer:
    root: str  # temp dir: data/, sockets, log
    port: int
    bindir: str
    run_as: str | None  # unprivileged user the server runs as (None: the current user)

    def uri(self, database: str = DATABASE, *, user: str = USER, password: str = PASSWORD,
            port: int | None = None) -> str:
        return f"postgresql://{user}:{password}@{HOST}:{port or self.port}/{database}"

    def jdbc_uri(self, database: str = DATABASE) -> str:
        return f"jdbc:postgresql://{HOST}:{self.port}/{database}"

    @property
    def socket_dir(self) -> str:
        return self.root

    def admin_sql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` as the superuser over the unix socket (psql), returning its output."""
        psql = os.path.join(self.bindir, "psql")
        cmd = [psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.socket_dir,
               "-p", str(self.port), "-U", SUPERUSER, "-d", database, "-c", sql]
        return subprocess.run(_as_user(cmd, self.run_as), check=True, capture_output=True,
                              text=True, timeout=60).stdout

    def create_database(self, name: str) -> str:
        self.admin_sql(f'CREATE DATABASE "{name}" OWNER {USER}')
        return self.uri(name)


def find_bindir() -> str | None:
    """Directory holding ``initdb``/``pg_ctl``/``postgres``/``psql``, newest Debian version first."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for d in candidates:
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres", "psql")):
            return d
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl") and shutil.which("psql"):
        return os.path.dirname(os.path.realpath(initdb))
    return None


def _version_key(path: str) -> int:
    try:
        return int(path.split("/")[-2])
    except ValueError:
        return 0


def _as_user(cmd: list[str], user: str | None) -> list[str]:
    return cmd if user is None else ["runuser", "-u", user, "--", *cmd]


def _unprivileged_user() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither 'postgres' nor 'nobody' exists to run PostgreSQL")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_postgres(bindir: str) -> PgServer:
    """initdb + start a cluster in a fresh temp dir; returns once it accepts connections."""
    run_as = _unprivileged_user()
    root = tempfile.mkdtemp(prefix="icectl-pg-")
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data = os.path.join(root, "data")
    pwfile = os.path.join(root, "pw")
    subprocess.run(_as_user(["sh", "-c", f"umask 077; echo {PASSWORD}-admin > {pwfile}"], run_as), check=True)
    subprocess.run(
        _as_user([os.path.join(bindir, "initdb"), "-D", data, "-U", SUPERUSER, "--pwfile", pwfile,
                  "-E", "UTF8", "--locale", "C", "--auth-local", "trust", "--auth-host", "scram-sha-256"],
                 run_as),
        check=True, capture_output=True, text=True, timeout=120)
    server: PgServer | None = None
    for _attempt in range(3):  # the free port may be taken between probing and binding
        candidate = PgServer(root=root, port=free_port(), bindir=bindir, run_as=run_as)
        proc = _pg_ctl_start(candidate)
        if proc.returncode == 0:
            server = candidate
            break
    if server is None:
        log_file = os.path.join(root, "log")
        log = open(log_file).read()[-2000:] if os.path.exists(log_file) else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {proc.stderr.strip()} {log}")
    server.admin_sql(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
    server.create_database(DATABASE)
    return server


def _pg_ctl_start(server: PgServer) -> subprocess.CompletedProcess[str]:
    opts = (f"-c listen_addresses={HOST} -c port={server.port} -c unix_socket_directories={server.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=50")
    return subprocess.run(
        _as_user([os.path.join(server.bindir, "pg_ctl"), "-D", os.path.join(server.root, "data"),
                  "-l", os.path.join(server.root, "log"), "-o", opts, "-w", "-t", "60", "start"], server.run_as),
        capture_output=True, text=True, timeout=90)


def start_again(server: PgServer) -> None:
    """Restart a cluster stopped with ``stop_postgres(server, remove=False)`` on the same port."""
    proc = _pg_ctl_start(server)
    if proc.returncode != 0:
        raise RuntimeError(f"PostgreSQL did not restart: {proc.stderr.strip()}")


def stop_postgres(server: PgServer, *, remove: bool = True) -> None:
    """Stop the cluster (fast: open connections are terminated); ``remove`` deletes its files."""
    data = os.path.join(server.root, "data")
    subprocess.run(_as_user([os.path.join(server.bindir, "pg_ctl"), "-D", data, "-m", "fast",
                             "-w", "stop"], server.run_as), capture_output=True, timeout=60)
    if remove:
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One private PostgreSQL cluster for the session (skips when the server binaries are missing)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql)")
    server = start_postgres(bindir)
    try:
        yield server
    finally:
        stop_postgres(server)


_db_ids = itertools.count(1)


@pytest.fixture
def pg_database(pg_server: PgServer) -> str:
    """URI of a fresh empty database owned by the test user (one per test: no shared state)."""
    return pg_server.create_database(f"t{os.getpid()}_{next(_db_ids)}")


# --------------------------------------------------------------------------- Spark's JdbcCatalog


def add_spark_jdbc_catalog(spark: object, name: str, jdbc_uri: str, warehouse: str) -> None:
    """Register Iceberg's ``JdbcCatalog`` on ``jdbc_uri`` as Spark catalog ``name`` at runtime.

    Catalogs are plain SQL confs read when first used, so the session-scoped ``spark`` serves any
    number of them; only the driver jar has to be on the classpath from JVM start (support.spark's
    OPTIONAL_JARS). ``jdbc.schema-version=V1`` makes Java create the ``iceberg_type`` column.
    """
    if not os.path.isfile(JDBC_JAR):
        pytest.skip(f"{JDBC_JAR} missing (apt-get install libpostgresql-jdbc-java)")
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": jdbc_uri,
        f"{prefix}.jdbc.user": USER,
        f"{prefix}.jdbc.password": PASSWORD,
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": warehouse,
        # icectl commits behind Spark's back: a cached Table would serve stale snapshots.
        f"{prefix}.cache-enabled": "false",
    }
    for key, value in conf.items():
        spark.conf.set(key, value)  # type: ignore[attr-defined]


@pytest.fixture
def postgres_catalog_config(pg_database: str, tmp_path: Path) -> dict[str, Any]:
    """A ``[catalog.c]`` of type sql on a fresh PostgreSQL database (tests/unit/catalog/test_catalog_contract)."""
    return {"catalog": {"c": {"type": "sql", "uri": pg_database, "warehouse": str(tmp_path / "pg-wh")}}}

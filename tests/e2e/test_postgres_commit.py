"""Commits to a PostgreSQL catalog when the database misbehaves during the compare-and-swap UPDATE.

Real server conditions, no mocks: another client holds the table's row lock (a stuck JDBC
transaction), then our UPDATE's connection is terminated by the server (``pg_terminate_backend``),
or the holder commits its own swap first. Each time icectl re-reads the pointer to decide what
happened, and leaves the catalog and the table's files consistent.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.forge import property_change
from support.postgres import PgServer, find_bindir, start_again, start_postgres, stop_postgres
from typer.testing import CliRunner
from unit.table.test_commit import new_md

from icectl.cli.app import app
from icectl.config import load_config
from icectl.errors import StorageError
from icectl.table import load_table
from icectl.table.commit import commit, create_table

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 not installed (pip install 'icectl[postgres]')")


def _setup(tmp_path: Path, uri: str) -> tuple[Any, Path]:
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'default-catalog = "pg"\n[catalog.pg]\ntype = "sql"\nuri = "{uri}"\n'
                   f'warehouse = "{tmp_path / "wh"}"\n')
    config = load_config(cfg)
    create_table("db.t", None, new_md(tmp_path / "wh" / "db" / "t"), config=config)
    return config, cfg


def _pointer(uri: str) -> str:
    with psycopg.connect(uri) as conn:
        return str(conn.execute("SELECT metadata_location FROM iceberg_tables").fetchone()[0])


def _metadata_files(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "wh" / "db" / "t" / "metadata").glob("*.metadata.json")}


def _waiting_pid(uri: str, timeout: float = 20) -> int:
    """The backend whose UPDATE waits for the row lock (our commit)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(uri, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                               "AND query LIKE 'UPDATE iceberg_tables%'").fetchone()
            if row:
                return int(row[0])
            time.sleep(0.05)
    raise AssertionError("the commit's UPDATE never waited for the lock")


def test_connection_killed_during_update_is_not_committed_and_cleans_up(
        tmp_path: Path, pg_server: PgServer, pg_database: str) -> None:
    config, _ = _setup(tmp_path, pg_database)
    before_pointer, before_files = _pointer(pg_database), _metadata_files(tmp_path)
    outcome: list[BaseException | object] = []
    with psycopg.connect(pg_database) as holder:  # a stuck client: holds the row lock in a transaction
        holder.execute("SELECT * FROM iceberg_tables FOR UPDATE")

        def run() -> None:
            try:
                outcome.append(commit(load_table("db.t", config=config), lambda b: property_change({"k": "v"})))
            except BaseException as e:
                outcome.append(e)

        worker = threading.Thread(target=run)
        worker.start()
        pid = _waiting_pid(pg_database)
        pg_server.admin_sql(f"SELECT pg_terminate_backend({pid})")
        worker.join(30)
        holder.rollback()
    assert len(outcome) == 1 and isinstance(outcome[0], StorageError), outcome
    assert "\n" not in outcome[0].one_line()
    # The pointer never moved, so icectl knew it had not committed and removed its new file.
    assert _pointer(pg_database) == before_pointer
    assert _metadata_files(tmp_path) == before_files


def test_other_writer_swaps_while_we_wait_then_we_retry(tmp_path: Path, pg_database: str) -> None:
    config, _ = _setup(tmp_path, pg_database)
    base = _pointer(pg_database)
    other = str(tmp_path / "wh" / "db" / "t" / "metadata" / "other.metadata.json")
    Path(other).write_bytes(Path(base).read_bytes())  # same table state under a new name
    result: list[Any] = []
    with psycopg.connect(pg_database) as holder:
        holder.execute("UPDATE iceberg_tables SET metadata_location = %s, previous_metadata_location = %s",
                       (other, base))

        def run() -> None:
            result.append(commit(load_table("db.t", config=config), lambda b: property_change({"k": "v"})))

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.5)
        holder.commit()  # our UPDATE then finds the old pointer gone: a lost race, retried on the new base
        worker.join(60)
    r = result[0]
    assert len(r.conflicts) == 1 and r.attempts == 2, r
    assert _pointer(pg_database) == r.metadata_location
    assert load_table("db.t", config=config).metadata.properties["k"] == "v"


def test_server_gone_during_update_is_unknown_and_keeps_the_file(tmp_path: Path) -> None:
    """Server shut down while the UPDATE waits: the swap fails and the pointer cannot be re-read, so
    the outcome is unknown: exit 5, and the new metadata file stays (it may be the table's now)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql)")
    server = start_postgres(bindir)  # a cluster of its own: this test stops it
    try:
        _, cfg = _setup(tmp_path, server.uri())
        before_pointer, before_files = _pointer(server.uri()), _metadata_files(tmp_path)
        outcome: list[Any] = []
        holder = psycopg.connect(server.uri())
        holder.execute("SELECT * FROM iceberg_tables FOR UPDATE")

        def run() -> None:
            outcome.append(CliRunner().invoke(app, ["--config", str(cfg), "upgrade", "pg.db.t", "--to", "3"]))

        worker = threading.Thread(target=run)
        worker.start()
        _waiting_pid(server.uri())
        stop_postgres(server, remove=False)
        worker.join(60)
        holder.close()
        r = outcome[0]
        assert r.exit_code == 5, (r.exit_code, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "may or may not" in r.stderr
        new = _metadata_files(tmp_path) - before_files
        assert len(new) == 1, "the possibly committed metadata file must not be deleted"
        start_again(server)
        assert _pointer(server.uri()) == before_pointer  # this time the UPDATE had not happened
    finally:
        stop_postgres(server)

"""The command line on a PostgreSQL catalog (no Spark): namespace create, create, add-files, list
--all, expire, compact, validate, inspect; and every hostile configuration once per command kind:
one stderr line, the documented exit code, nothing written to the catalog or the warehouse."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from support.postgres import PASSWORD, PgServer
from typer.testing import CliRunner

from icectl.cli.app import app

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 not installed (pip install 'icectl[postgres]')")


def write_config(path: Path, uri: str, warehouse: Path) -> Path:
    path.write_text(f'default-catalog = "pg"\n[catalog.pg]\ntype = "sql"\nuri = "{uri}"\nwarehouse = "{warehouse}"\n')
    return path


def run(config: Path, *args: str, expect: int = 0) -> Any:
    r = CliRunner().invoke(app, ["--config", str(config), *args])
    assert r.exit_code == expect, (args, r.exit_code, r.stdout, r.stderr)
    return json.loads(r.stdout) if "--json" in args and expect == 0 else r


def catalog_rows(uri: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(uri) as conn:
        return conn.execute("SELECT * FROM iceberg_tables ORDER BY table_name").fetchall()


def tree(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def made(tmp_path: Path, pg_database: str) -> tuple[Path, Path]:
    """A pg catalog with db.t: created, two add-files commits (icectl only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    wh = tmp_path / "wh"
    config = write_config(tmp_path / "icectl.toml", pg_database, wh)
    run(config, "namespace", "create", "db", "--property", "owner=ops")
    run(config, "create", "db.t", "--schema", "id long, name string")
    data = tmp_path / "in"
    data.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "name": [f"n{i}"]}), data / f"f{i}.parquet")
        run(config, "add-files", "db.t", str(data / f"f{i}.parquet"))
    return config, wh


def test_commands_through_the_catalog(made: tuple[Path, Path], pg_database: str) -> None:
    config, _ = made
    assert [t["identifier"] for t in run(config, "list", "--all", "--json")["rows"]] == ["db.t"]
    snaps = run(config, "inspect", "snapshots", "pg.db.t", "--json")["rows"]
    assert len(snaps) == 2
    run(config, "validate", "pg.db.t")
    out = run(config, "expire-snapshots", "pg.db.t", "--older-than", "0s", "--retain-last", "1", "--json")
    assert out["expired_snapshot_count"] == 1
    run(config, "compact", "pg.db.t")
    (row,) = catalog_rows(pg_database)
    assert row[:3] == ("pg", "db", "t") and row[5] == "TABLE"
    assert row[3] == run(config, "inspect", "table", "pg.db.t", "--json")["metadata_location"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("case", ["bad password", "server down", "missing database", "missing table", "bad uri"])
def test_hostile_configs(made: tuple[Path, Path], pg_server: PgServer, pg_database: str,
                         tmp_path: Path, case: str) -> None:
    _, wh = made
    db = pg_database.rsplit("/", 1)[1]
    uri, table, code, text = {
        "bad password": (pg_server.uri(db, password="wrong-pw"), "t", 8, "credentials rejected"),
        "server down": (pg_server.uri(db, port=_closed_port()), "t", 8, "cannot connect"),
        "missing database": (pg_server.uri("nope"), "t", 3, "does not exist"),
        "missing table": (pg_database, "ghost", 3, "not found"),
        "bad uri": (f"postgresql://icectl:wrong-pw@127.0.0.1:{pg_server.port}", "t", 4, "needs a host and a database"),
    }[case]
    config = write_config(tmp_path / "bad.toml", uri, wh)
    before_rows, before_files = catalog_rows(pg_database), tree(wh)
    for args in (("inspect", "snapshots", f"pg.db.{table}"), ("expire-snapshots", f"pg.db.{table}", "--older-than",
                 "0s"), ("compact", f"pg.db.{table}"), ("upgrade", f"pg.db.{table}", "--to", "3"),
                 ("create", f"pg.db.{table}2", "--schema", "id long")):
        r = run(config, *args, expect=code if not (case == "missing table" and args[0] == "create") else 0)
        if r.exit_code == 0:  # creating a new table in a working catalog works; drop it from the check
            with psycopg.connect(pg_database) as conn:
                conn.execute("DELETE FROM iceberg_tables WHERE table_name = 'ghost2'")
            continue
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], (case, args, r.stderr)
        assert PASSWORD not in lines[0] and "wrong-pw" not in lines[0]
    assert catalog_rows(pg_database) == before_rows
    assert {p: m for p, m in tree(wh).items() if "/ghost2/" not in p} == before_files

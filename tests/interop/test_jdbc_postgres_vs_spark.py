"""icectl and Spark's own JdbcCatalog (``org.apache.iceberg.jdbc.JdbcCatalog``) on one PostgreSQL catalog.

Spark writes through the JDBC catalog; icectl, configured with ``[catalog.pg] type = "sql"
uri = "postgresql://..."``, inspects, expires, compacts, creates and add-files through the same
``iceberg_tables`` rows; Spark then reads and writes again. The database is a private cluster
(support.postgres), the catalog is registered on the session's Spark at runtime.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.postgres import PgServer, add_spark_jdbc_catalog
from support.spark import metadata_table, table_rows_digest
from typer.testing import CliRunner

from icectl.catalog.sql import SqlOperations
from icectl.cli.app import app

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 not installed (pip install 'icectl[postgres]')")

CATALOG = "pg"


@dataclass
class PgCatalog:
    spark: Any
    uri: str
    warehouse: Path
    config: Path

    def icectl(self, *args: str, expect: int = 0, config: Path | None = None) -> Any:
        r = CliRunner().invoke(app, ["--config", str(config or self.config), *args])
        assert r.exit_code == expect, (args, r.exit_code, r.stdout, r.stderr)
        if "--json" in args and expect == 0:
            return json.loads(r.stdout)
        return r

    def sql(self, text: str) -> list[Any]:
        return self.spark.sql(text).collect()

    def pointer(self, table: str) -> str:
        with psycopg.connect(self.uri) as conn:
            row = conn.execute("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = %s "
                               "AND table_namespace = 'db' AND table_name = %s", (CATALOG, table)).fetchone()
        return str(row[0])

    def files(self, table: str) -> set[str]:
        root = self.warehouse / "db" / table
        return {str(p) for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")}

    def new_table(self, name: str, inserts: int, props: str = "") -> str:
        full = f"{CATALOG}.db.{name}"
        self.sql(f"CREATE TABLE {full} (id bigint, part string) USING iceberg PARTITIONED BY (part) "
                 f"TBLPROPERTIES ('format-version'='2', 'commit.retry.num-retries'='50'{props})")
        for i in range(inserts):
            self.sql(f"INSERT INTO {full} VALUES ({i}, 'p{i % 2}'), ({100 + i}, 'p{i % 3}')")
        return full


@pytest.fixture(scope="module")
def pgcat(spark: Any, pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgCatalog]:
    db = f"spark_{os.getpid()}"
    uri = pg_server.create_database(db)
    warehouse = tmp_path_factory.mktemp("pg-warehouse")
    add_spark_jdbc_catalog(spark, CATALOG, pg_server.jdbc_uri(db), f"file:{warehouse}")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
    config = warehouse.parent / f"{warehouse.name}.toml"
    config.write_text(f'[catalog.{CATALOG}]\ntype = "sql"\nuri = "{uri}"\nwarehouse = "file:{warehouse}"\n')
    yield PgCatalog(spark, uri, warehouse, config)


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


def reachable(cat: PgCatalog, full: str) -> set[str]:
    """Every file Spark says the table still references (data, deletes, manifests, lists, metadata)."""
    paths = {_local(r["path"]) for r in cat.sql(f"SELECT path FROM {full}.all_manifests")}
    paths |= {_local(r["file_path"]) for r in cat.sql(f"SELECT file_path FROM {full}.all_files")}
    paths |= {_local(r["manifest_list"]) for r in cat.sql(f"SELECT manifest_list FROM {full}.snapshots")}
    paths |= {_local(r["file"]) for r in cat.sql(f"SELECT file FROM {full}.metadata_log_entries")}
    return paths


def snapshot_ids(cat: PgCatalog, full: str) -> list[int]:
    return [r[0] for r in cat.sql(f"SELECT snapshot_id FROM {full}.snapshots ORDER BY committed_at")]


def ancestors(cat: PgCatalog, full: str, head: int, n: int) -> list[int]:
    parents = {r[0]: r[1] for r in cat.sql(f"SELECT snapshot_id, parent_id FROM {full}.snapshots")}
    out: list[int] = []
    current: int | None = head
    while current is not None and len(out) < n:
        out.append(current)
        current = parents.get(current)
    return out


def test_inspect_matches_spark(pgcat: PgCatalog) -> None:
    full = pgcat.new_table("inspected", 3)
    first = snapshot_ids(pgcat, full)[0]
    pgcat.sql(f"ALTER TABLE {full} CREATE TAG t1 AS OF VERSION {first}")
    pgcat.sql(f"ALTER TABLE {full} CREATE BRANCH b1")
    pgcat.sql(f"INSERT INTO {full}.branch_b1 VALUES (7, 'p7')")
    address = f"{CATALOG}.db.inspected"
    ours = pgcat.icectl("inspect", "snapshots", address, "--json")
    assert ours["metadata_location"] == pgcat.pointer("inspected")
    theirs = metadata_table(pgcat.spark, full, "snapshots")
    assert [(r["snapshot_id"], r["parent_id"], r["operation"], r["manifest_list"]) for r in ours["rows"]] == [
        (r["snapshot_id"], r["parent_id"], r["operation"], r["manifest_list"]) for r in theirs]
    refs = pgcat.icectl("inspect", "refs", address, "--json")["rows"]
    assert sorted((r["name"], r["type"], r["snapshot_id"]) for r in refs) == sorted(
        (r["name"], r["type"], r["snapshot_id"]) for r in metadata_table(pgcat.spark, full, "refs"))
    files = pgcat.icectl("inspect", "files", address, "--json")["rows"]
    assert sorted((f["file_path"], f["record_count"]) for f in files) == sorted(
        (f["file_path"], f["record_count"]) for f in metadata_table(pgcat.spark, full, "files"))
    assert len(files) == 4 and len(refs) == 3


def test_expire_keeps_exactly_the_retained_snapshots(pgcat: PgCatalog) -> None:
    full = pgcat.new_table("expired", 4)
    s = snapshot_ids(pgcat, full)
    pgcat.sql(f"ALTER TABLE {full} CREATE TAG t1 AS OF VERSION {s[0]}")
    pgcat.sql(f"ALTER TABLE {full} CREATE BRANCH b1 AS OF VERSION {s[2]}")
    pgcat.sql(f"INSERT INTO {full}.branch_b1 VALUES (7, 'p7')")
    # Drops whole files; the one s4 added (3, 'p1') is then reached by s4 alone.
    pgcat.sql(f"DELETE FROM {full} WHERE part = 'p1'")
    heads = {r["name"]: r["snapshot_id"] for r in metadata_table(pgcat.spark, full, "refs")}
    # --retain-last 1 with everything older than the cutoff: each ref keeps only its head.
    expected = {heads["t1"], *ancestors(pgcat, full, heads["main"], 1), *ancestors(pgcat, full, heads["b1"], 1)}
    rows_at = {sid: table_rows_digest(pgcat.spark, f"SELECT * FROM {full} VERSION AS OF {sid}")
               for sid in snapshot_ids(pgcat, full)}
    refs_rows = {ref: table_rows_digest(pgcat.spark, f"SELECT * FROM {full} VERSION AS OF '{ref}'")
                 for ref in heads}
    before_reachable = reachable(pgcat, full)
    before = pgcat.files("expired")
    out = pgcat.icectl("expire-snapshots", f"{CATALOG}.db.expired", "--older-than", "0s", "--retain-last", "1",
                       "--json")
    after = pgcat.files("expired")
    kept = set(snapshot_ids(pgcat, full))
    assert kept == expected and len(kept) < len(rows_at), (kept, expected)
    assert out["metadata_location"] == pgcat.pointer("expired")  # the commit went to the catalog
    assert set(out["expired_snapshots"]) == set(rows_at) - expected
    deleted = before - after
    now_reachable = reachable(pgcat, full)
    assert deleted and deleted <= before_reachable, "deleted a file the table never referenced"
    assert not deleted & now_reachable, "deleted a live file"
    assert not {p for p in now_reachable if not os.path.exists(p)}
    # Exactly the unreachable data files and manifests went (old metadata JSON stay by design).
    leftovers = {p for p in after - now_reachable if not p.endswith(".metadata.json")}
    assert not leftovers, sorted(leftovers)[:5]
    assert any("/data/" in p for p in deleted) and any(p.endswith(".avro") for p in deleted)
    for sid in kept:
        assert table_rows_digest(pgcat.spark, f"SELECT * FROM {full} VERSION AS OF {sid}") == rows_at[sid]
    for ref, digest in refs_rows.items():
        assert table_rows_digest(pgcat.spark, f"SELECT * FROM {full} VERSION AS OF '{ref}'") == digest
    pgcat.sql(f"INSERT INTO {full} VALUES (42, 'p9')")
    n, _ = table_rows_digest(pgcat.spark, full)
    assert n == refs_rows["main"][0] + 1
    assert pgcat.sql(f"SELECT id FROM {full} WHERE part = 'p9'")[0][0] == 42


def test_compact_keeps_rows_and_spark_writes_on(pgcat: PgCatalog) -> None:
    full = pgcat.new_table("compacted", 6)
    rows = table_rows_digest(pgcat.spark, full)
    manifests = len(pgcat.sql(f"SELECT * FROM {full}.manifests"))
    pgcat.icectl("compact", f"{CATALOG}.db.compacted", "--json")
    assert table_rows_digest(pgcat.spark, full) == rows
    assert len(pgcat.sql(f"SELECT * FROM {full}.manifests")) < manifests
    pgcat.sql(f"INSERT INTO {full} VALUES (42, 'p9')")
    assert table_rows_digest(pgcat.spark, full)[0] == rows[0] + 1


def test_create_and_add_files_then_spark_reads(pgcat: PgCatalog, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    address = f"{CATALOG}.db.added"
    pgcat.icectl("create", address, "--schema", "id long, name string", "--json")
    data = pgcat.warehouse / "db" / "added" / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]}), data / "f1.parquet")
    pgcat.icectl("add-files", address, str(data / "f1.parquet"), "--json")
    assert sorted(tuple(r) for r in pgcat.sql(f"SELECT id, name FROM {address}")) == [(1, "a"), (2, "b"), (3, "c")]
    pgcat.sql(f"INSERT INTO {address} VALUES (4, 'd')")
    assert pgcat.sql(f"SELECT count(*) FROM {address}")[0][0] == 4


def test_upgrade_to_v4_is_clear(pgcat: PgCatalog) -> None:
    full = pgcat.new_table("upgraded", 2)
    pointer = pgcat.pointer("upgraded")
    address = f"{CATALOG}.db.upgraded"
    # Refused by default (Spark cannot read v4): one line, exit 6, nothing committed.
    r = pgcat.icectl("upgrade", address, "--to", "4", expect=6)
    assert len(r.stderr.strip().splitlines()) == 1 and "--yes" in r.stderr
    assert pgcat.pointer("upgraded") == pointer and table_rows_digest(pgcat.spark, full)[0] == 4
    # With --yes it is a plain pointer swap through the catalog; Spark then refuses the table.
    pgcat.icectl("upgrade", address, "--to", "4", "--yes")
    assert pgcat.pointer("upgraded") != pointer
    assert json.loads(Path(_local(pgcat.pointer("upgraded"))).read_text())["format-version"] == 4
    # Iceberg 1.10 cannot parse it ("Cannot parse missing list: manifests"). Parsed directly: a
    # table load would retry the failing read 20 times with backoff (~90 s) before giving up.
    jvm = pgcat.spark._jvm
    java_io = jvm.org.apache.iceberg.hadoop.HadoopFileIO(pgcat.spark._jsc.hadoopConfiguration())
    with pytest.raises(Exception, match=r"manifests|version"):
        jvm.org.apache.iceberg.TableMetadataParser.read(java_io, pgcat.pointer("upgraded"))


def test_spark_inserts_while_icectl_expires_and_compacts(pgcat: PgCatalog) -> None:
    full = pgcat.new_table("busy", 2)
    base = table_rows_digest(pgcat.spark, full)[0]
    inserts = 12
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(inserts):
                pgcat.sql(f"INSERT INTO {full} VALUES ({1000 + i}, 'w')")
        except BaseException as e:
            failures.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    runs, retried = 0, 0
    while thread.is_alive() or runs < 2:
        for args in (("expire-snapshots", "--older-than", "0s", "--retain-last", "2"), ("compact",)):
            out = pgcat.icectl(args[0], f"{CATALOG}.db.busy", *args[1:], "--json")
            retried += int(out.get("commit_attempts") or 1) > 1
        runs += 1
    thread.join()
    assert not failures, failures
    assert runs >= 2
    print(f"[pg concurrency] {inserts} Spark INSERTs, {runs} icectl expire+compact rounds, {retried} retried")
    ids = sorted(r[0] for r in pgcat.sql(f"SELECT id FROM {full} WHERE part = 'w'"))
    assert ids == [1000 + i for i in range(inserts)], "a Spark commit was lost"
    assert table_rows_digest(pgcat.spark, full)[0] == base + inserts
    missing = {p for p in reachable(pgcat, full) if not os.path.exists(p)}
    assert not missing, f"live files deleted: {sorted(missing)[:3]}"


@pytest.mark.parametrize("case", ["bad password", "server down", "missing database", "missing table"])
def test_hostile_catalogs_one_line_nothing_written(pgcat: PgCatalog, pg_server: PgServer,
                                                   tmp_path: Path, case: str) -> None:
    if not (pgcat.warehouse / "db" / "victim").exists():
        pgcat.new_table("victim", 2)
    db = pgcat.uri.rsplit("/", 1)[1]
    uri, table, code, text = {
        "bad password": (pg_server.uri(db, password="wrong"), "victim", 8, "credentials rejected"),
        "server down": (pg_server.uri(db, port=_closed_port()), "victim", 8, "cannot connect"),
        "missing database": (pg_server.uri("nope"), "victim", 3, "does not exist"),
        "missing table": (pgcat.uri, "ghost", 3, "not found"),
    }[case]
    config = tmp_path / "bad.toml"
    config.write_text(f'[catalog.{CATALOG}]\ntype = "sql"\nuri = "{uri}"\nwarehouse = "file:{pgcat.warehouse}"\n')
    pointer, files = pgcat.pointer("victim"), pgcat.files("victim")
    for args in (("inspect", "snapshots"), ("expire-snapshots",), ("compact",)):
        r = CliRunner().invoke(app, ["--config", str(config), *args, f"{CATALOG}.db.{table}", "--older-than", "0s"]
                               if args[0] == "expire-snapshots" else ["--config", str(config), *args,
                                                                      f"{CATALOG}.db.{table}"])
        assert r.exit_code == code, (case, args, r.exit_code, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0] and "wrong" not in lines[0], (case, r.stderr)
    assert pgcat.pointer("victim") == pointer and pgcat.files("victim") == files


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("command", ["expire-snapshots", "compact"])
def test_spark_commits_inside_icectls_commit_window(pgcat: PgCatalog, monkeypatch: pytest.MonkeyPatch,
                                                    command: str) -> None:
    """Deterministic race: Spark commits after icectl read its base and before icectl's UPDATE. icectl's
    swap must lose (no row matches the old pointer), retry on Spark's snapshot and keep it."""
    name = f"raced_{command.replace('-', '_')}"
    full = pgcat.new_table(name, 3)
    real_swap = SqlOperations.swap_pointer
    calls: list[str] = []

    def swap_after_spark(self: SqlOperations, base: str, new: str, metadata: Any) -> bool:
        if not calls:
            pgcat.sql(f"INSERT INTO {full} VALUES (999, 'race')")
        calls.append(base)
        return real_swap(self, base, new, metadata)

    monkeypatch.setattr(SqlOperations, "swap_pointer", swap_after_spark)
    args = ("--older-than", "0s", "--retain-last", "1") if command == "expire-snapshots" else ()
    out = pgcat.icectl(command, f"{CATALOG}.db.{name}", *args, "--json")
    assert len(calls) == 2 and calls[0] != calls[1] and out["commit_attempts"] == 2
    assert pgcat.sql(f"SELECT id FROM {full} WHERE part = 'race'")[0][0] == 999
    assert table_rows_digest(pgcat.spark, full)[0] == 7
    missing = {p for p in reachable(pgcat, full) if not os.path.exists(p)}
    assert not missing, f"live files deleted: {sorted(missing)[:3]}"


def test_expire_keeps_an_unreachable_file_outside_the_table(pgcat: PgCatalog, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    full = pgcat.new_table("external", 1)
    outside = tmp_path / "elsewhere" / "ext.parquet"  # not under the table's location
    outside.parent.mkdir()
    pq.write_table(pa.table({"id": pa.array([5000], pa.int64()), "part": ["ext"]}), outside)
    pgcat.icectl("add-files", f"{CATALOG}.db.external", str(outside))
    pgcat.sql(f"DELETE FROM {full} WHERE part = 'ext'")  # the whole file drops out of the table
    out = pgcat.icectl("expire-snapshots", f"{CATALOG}.db.external", "--older-than", "0s", "--retain-last", "1",
                       "--json")
    assert outside.exists(), "expire deleted a file outside the table's location"
    assert out["expired_snapshot_count"] == 2 and out["kept_external_files"] == [str(outside)]
    assert pgcat.sql(f"SELECT count(*) FROM {full}")[0][0] == 2

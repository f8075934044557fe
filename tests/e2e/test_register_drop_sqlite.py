"""register and drop as separate processes on a SQLite catalog (no Spark): a file-system table is
registered into the catalog (the row points at its file), dropped without --purge (files kept) and
registered again from the same file, then purged; each refused case is one stderr line, its exit
code, and no change to the catalog file or the table's files."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from unit.ops.expire.test_expire import Tbl

ROOT = Path(__file__).resolve().parents[2]


def icectl(config: Path, *args: str, expect: int = 0) -> Any:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICECTL_CONFIG": str(config)}
    env.pop("ICECTL_WAREHOUSE", None)
    r = subprocess.run([sys.executable, "-m", "icectl", *args], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == expect, (args, r.returncode, r.stdout, r.stderr)
    if expect:
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return json.loads(r.stdout) if "--json" in args and expect == 0 else r


def rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
                         "ORDER BY table_name").fetchall()


def tree(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_register_drop_register_purge_through_a_sqlite_catalog(tmp_path: Path) -> None:
    t = Tbl(tmp_path / "fs")
    t.add()
    t.add()
    current = str(sorted((t.dir / "metadata").glob("v*.metadata.json"))[-1])
    db = tmp_path / "cat.db"
    config = tmp_path / "icectl.toml"
    config.write_text(f'default-catalog = "s"\n[catalog.s]\ntype = "sql"\nuri = "{db}"\n'
                      f'warehouse = "{tmp_path / "wh"}"\n')
    got = icectl(config, "register", "s.sales.orders", current, "--json")
    assert got["metadata_location"] == current and rows(db) == [("sales", "orders", current)]
    files = tree(t.dir)
    icectl(config, "register", "sales.orders", current, expect=6)  # taken
    icectl(config, "register", "sales.other", str(t.dir / "metadata" / "v9.metadata.json"), expect=3)
    (tmp_path / "bad.metadata.json").write_text('{"format-version": 2, "table-uuid": ')
    icectl(config, "register", "sales.bad", str(tmp_path / "bad.metadata.json"), expect=4)
    assert rows(db) == [("sales", "orders", current)] and tree(t.dir) == files

    plan = icectl(config, "drop", "sales.orders", "--dry-run", "--json")
    assert plan["would_drop"] == f"the catalog entry sales.orders (pointing at {current})"
    assert rows(db) == [("sales", "orders", current)]
    dropped = icectl(config, "drop", "sales.orders", "--json")
    assert dropped["dropped"] is True and rows(db) == [] and tree(t.dir) == files  # files kept
    icectl(config, "drop", "sales.orders", expect=3)
    icectl(config, "register", "sales.orders", current, "--json")  # the same file registers again
    t.change(lambda md: md.replace(properties={**md.properties, "gc.enabled": "false"}))
    # The folder's own newer version (v4, gc.enabled=false) is not the catalog's: the row still names
    # v3, so purging the row's table would delete files v4 uses. Refused, nothing dropped.
    files = tree(t.dir)
    icectl(config, "drop", "sales.orders", "--purge", expect=6)
    assert rows(db) == [("sales", "orders", current)] and tree(t.dir) == files
    t.change(lambda md: md.replace(properties={**md.properties, "gc.enabled": "true"}))
    icectl(config, "drop", "sales.orders", "--json")
    newest = str(sorted((t.dir / "metadata").glob("v*.metadata.json"))[-1])
    got = icectl(config, "register", "sales.orders", newest, "--json")  # the newest version: it owns them all
    assert str(t.dir) in got["warning"]  # ... with the folder table, which reads the same files
    # The folder table still reads every file: refused (one line naming it), unless --allow-shared names it.
    err = icectl(config, "drop", "sales.orders", "--purge", expect=6).stderr
    assert str(t.dir) in err and "--allow-shared" in err and rows(db) == [("sales", "orders", newest)]
    purged = icectl(config, "drop", "sales.orders", "--purge", "--allow-shared", str(t.dir), "--json")
    assert purged["dropped"] is True and rows(db) == [] and not t.dir.exists()
    assert purged["deleted"]["data_files"] == 2 and purged["deleted"]["metadata_files"] == 6  # v1-v5, hint


def test_an_entry_whose_metadata_is_damaged_or_gone_can_be_dropped_without_purge(tmp_path: Path) -> None:
    """As Java's JDBC catalog drops without reading the metadata: the entry goes (with a warning on
    stderr), every file stays; --purge (which must know the files) and a dry run change nothing."""
    t = Tbl(tmp_path / "fs")
    t.add()
    current = sorted((t.dir / "metadata").glob("v*.metadata.json"))[-1]
    db = tmp_path / "cat.db"
    config = tmp_path / "icectl.toml"
    config.write_text(f'default-catalog = "s"\n[catalog.s]\ntype = "sql"\nuri = "{db}"\n'
                      f'warehouse = "{tmp_path / "wh"}"\n')
    icectl(config, "register", "sales.damaged", str(current))
    icectl(config, "register", "sales.gone", str(t.dir / "metadata" / "v1.metadata.json"))
    current.write_text(current.read_text()[:40])  # cut short: no longer JSON
    (t.dir / "metadata" / "v1.metadata.json").unlink()
    files = tree(t.dir)
    before = rows(db)

    icectl(config, "drop", "sales.damaged", "--purge", expect=4)
    icectl(config, "drop", "sales.gone", "--purge", expect=3)
    plan = icectl(config, "drop", "sales.damaged", "--dry-run", "--json")
    assert plan["would_drop"].startswith("the catalog entry") and "dropped" not in plan
    assert rows(db) == before and tree(t.dir) == files

    r = icectl(config, "drop", "sales.damaged")
    assert "only its catalog entry is dropped" in r.stderr and "warning" in r.stderr
    assert icectl(config, "drop", "sales.gone", "--json")["dropped"] is True
    assert rows(db) == [] and tree(t.dir) == files
    icectl(config, "drop", "sales.gone", expect=3)  # no such table any more

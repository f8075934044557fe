"""Concurrent writers on one table lose no commit: icectl add-files against itself and against Spark."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.spark import metadata_table
from typer.testing import CliRunner

from icectl.cli.app import app

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent("""
    import json, sys
    from icectl.ops.files.add_files import add_files
    from icectl.config import load_config
    from icectl.table import load_table
    table, files = sys.argv[1], sys.argv[2:]
    made = []
    for f in files:
        t = load_table(table, load_config())
        made.append(add_files(t, [f]).data["snapshot_id"])
    print(json.dumps(made))
""")


def _files(d: Path, prefix: str, n: int) -> list[str]:
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = d / f"{prefix}-{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "who": [prefix]}), p)
        out.append(str(p))
    return out


def _create(address: str, env: dict[str, str] | None = None) -> None:
    r = CliRunner().invoke(app, ["create", address, "--schema", "id long, who string",
                                 "--property", "commit.retry.num-retries=50",
                                 "--property", "commit.retry.min-wait-ms=5",
                                 "--property", "commit.retry.max-wait-ms=50"], env=env)
    assert r.exit_code == 0, r.stderr


def _start(table: str, files: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WORKER, table, *files], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)


@pytest.mark.parametrize("catalog", ["hadoop", "sql"])
def test_two_icectl_writers_lose_nothing(tmp_path: Path, catalog: str) -> None:
    import os

    cfg = tmp_path / "icectl.toml"
    uri = f'uri = "{tmp_path / "catalog.db"}"\n' if catalog == "sql" else ""
    cfg.write_text(f'[catalog.local]\ntype = "{catalog}"\nwarehouse = "{tmp_path / "wh"}"\n{uri}')
    env = {**os.environ, "ICECTL_CONFIG": str(cfg)}
    if catalog == "sql":
        r = CliRunner().invoke(app, ["namespace", "create", "db"], env={"ICECTL_CONFIG": str(cfg)})
        assert r.exit_code == 0, r.stderr
    _create("db.t", {"ICECTL_CONFIG": str(cfg)})
    a, b = _files(tmp_path / "a", "a", 12), _files(tmp_path / "b", "b", 12)
    procs = [_start("db.t", a, env), _start("db.t", b, env)]
    made = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        made += json.loads(out)
    r = CliRunner().invoke(app, ["inspect", "snapshots", "db.t", "--json"], env={"ICECTL_CONFIG": str(cfg)})
    snaps = json.loads(r.stdout)["rows"]
    assert sorted(s["snapshot_id"] for s in snaps) == sorted(made) and len(made) == 24
    # One linear history: each snapshot's parent is the one before it.
    parents = {s["snapshot_id"]: s["parent_id"] for s in snaps}
    assert sum(1 for p in parents.values() if p is None) == 1 and len(set(parents.values())) == 24
    r = CliRunner().invoke(app, ["inspect", "files", "db.t", "--json"], env={"ICECTL_CONFIG": str(cfg)})
    assert sorted(f["file_path"] for f in json.loads(r.stdout)["rows"]) == sorted(a + b)


def test_icectl_add_files_against_spark_inserts(spark: Any, spark_warehouse: str, tmp_path: Path) -> None:
    import os

    t = "local.db.race_add_files"
    spark.sql(f"CREATE TABLE {t} (id bigint, who string) USING iceberg TBLPROPERTIES ('format-version'='2', "
              "'commit.retry.num-retries'='60', 'commit.retry.min-wait-ms'='5', 'commit.retry.max-wait-ms'='100')")
    ours = _files(tmp_path / "icectl", "icectl", 15)
    env = {**os.environ, "ICECTL_WAREHOUSE": spark_warehouse}
    proc = _start("db.race_add_files", ours, env)
    spark_ids: list[int] = []

    def spark_loop() -> None:
        for i in range(10):
            spark.sql(f"INSERT INTO {t} VALUES ({1000 + i}, 'spark')")
            spark_ids.append(1000 + i)

    th = threading.Thread(target=spark_loop)
    th.start()
    out, err = proc.communicate(timeout=600)
    th.join(timeout=600)
    assert proc.returncode == 0, err
    made = json.loads(out)
    snaps = {r["snapshot_id"] for r in metadata_table(spark, t, "snapshots")}
    assert set(made) <= snaps and len(snaps) == len(made) + 10
    rows = spark.sql(f"SELECT id, who FROM {t}").collect()
    assert sorted(r[0] for r in rows if r[1] == "spark") == spark_ids
    assert sorted(r[0] for r in rows if r[1] == "icectl") == list(range(15))

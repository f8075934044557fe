"""Creating a table and adding files on object storage (moto's S3 server on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from support.s3 import create_bucket, s3_filesystem
from typer.testing import CliRunner

from icectl.cli.app import app


def run(*args: str, config: Path) -> dict[str, Any]:
    r = CliRunner().invoke(app, ["--config", str(config), *args, "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_create_and_add_files_on_s3(s3_env: str, tmp_path: Path) -> None:
    create_bucket(s3_env, "wh-write")
    fs = s3_filesystem(s3_env)
    local = tmp_path / "part.parquet"
    pq.write_table(pa.table({"id": pa.array(range(20), pa.int64()), "region": ["eu"] * 20}), local)
    fs.put(str(local), "wh-write/incoming/part.parquet")
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'[catalog.lake]\ntype = "hadoop"\nwarehouse = "s3://wh-write/wh"\n[s3]\nendpoint = "{s3_env}"\n')
    created = run("create", "lake.db.events", "--schema", "id long, region string", "--partition-by", "region",
                  config=cfg)
    assert created["metadata_location"] == "s3://wh-write/wh/db/events/metadata/v1.metadata.json"
    added = run("add-files", "lake.db.events", "s3://wh-write/incoming/part.parquet", config=cfg)
    assert added["added_records"] == 20
    files = run("inspect", "files", "lake.db.events", config=cfg)["rows"]
    assert [(f["file_path"], f["partition"], f["record_count"]) for f in files] == [
        ("s3://wh-write/incoming/part.parquet", {"region": "eu"}, 20)]
    # The commit went through the no-replace protocol: v2 exists, the hint names it.
    assert fs.cat_file("wh-write/wh/db/events/metadata/version-hint.text").strip() == b"2"
    assert run("list", "--all", "-c", "lake", config=cfg)["rows"][0]["identifier"] == "db.events"

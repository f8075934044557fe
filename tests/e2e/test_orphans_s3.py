"""`icectl remove-orphan-files` on object storage (moto's S3 server on 127.0.0.1).

A history built without Spark (``support.history``, format v2 and v3) is copied to ``s3a://``
(the Spark spelling) with ``relocate_table``; objects are planted where failed writers leave
them. S3 sets every object's LastModified itself, so the ages are judged against cutoffs before
and after the upload. What the table reaches is the copy's own set of objects minus the planted
ones, as listed with a private s3fs client, never icectl's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.history import AddDeletes, Append, CompactManifests, HistoryBuilder, SetRef, SetStatistics
from support.s3 import create_bucket, relocate_table, s3_filesystem, s3_put
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode

BUCKET = "icectl-test-orphans"


def icectl(*args: str, expect: int = 0) -> tuple[dict[str, Any], str]:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == expect, (r.stdout, r.stderr)
    return (json.loads(r.stdout) if r.stdout.strip() else {}), r.stderr


@pytest.mark.parametrize("format_version", [2, 3])
def test_orphans_on_s3(s3_env: str, tmp_path: Path, format_version: int) -> None:
    b = HistoryBuilder(tmp_path / "t", format_version=format_version, spelling="file:")
    # (the builder's v3 DVs and statistics Puffins are stand-ins relocate_table cannot rewrite)
    deletes = [AddDeletes()] if format_version == 2 else []
    for op in (Append(files=2), *deletes, SetRef(name=3, at=0), CompactManifests(), Append(),
               SetStatistics(partition=True)):
        b.apply(op)
    create_bucket(s3_env, BUCKET)
    fs = s3_filesystem(s3_env)
    location = relocate_table(b.table_dir, f"s3a://{BUCKET}/wh/db/t{format_version}", s3_put(fs))
    key = location.split("://", 1)[1]
    table_objects = set(fs.find(key))
    before_upload = int(time.time() * 1000) - 60_000
    planted = {f"{key}/data/00000-killed.parquet", f"{key}/data/id_bucket=1/00001-killed.parquet",
               f"{key}/metadata/stale-m0.avro", f"{key}/stray.bin"}
    hidden = {f"{key}/data/_temporary/0/x.parquet", f"{key}/data/.staging/y.parquet", f"{key}/data/_SUCCESS"}
    for k in planted | hidden:
        fs.pipe_file(k, b"orphan")
    after_upload = int(time.time() * 1000) + 60_000

    # Every object was modified after this cutoff: nothing is old enough.
    doc, _ = icectl("remove-orphan-files", location, "--older-than", str(before_upload), "--allow-recent",
                    "--dry-run")
    assert doc["orphan_file_locations"] == [] and doc["too_young_count"] == len(table_objects | planted)

    # A cutoff after the upload (only allowed explicitly): exactly the planted visible objects.
    doc, _ = icectl("remove-orphan-files", location, "--older-than", str(after_upload), "--dry-run",
                    expect=ExitCode.REFUSED)
    doc, _ = icectl("remove-orphan-files", location, "--older-than", str(after_upload), "--allow-recent",
                    "--dry-run")
    assert {p.split("://", 1)[1] for p in doc["orphan_file_locations"]} == planted
    assert all(p.startswith("s3a://") for p in doc["orphan_file_locations"])  # as listed: the table's spelling
    doc, _ = icectl("remove-orphan-files", location, "--older-than", str(after_upload), "--allow-recent",
                    "--location", f"s3://{key}/metadata", "--dry-run")
    assert {p.split("://", 1)[1] for p in doc["orphan_file_locations"]} == {f"{key}/metadata/stale-m0.avro"}
    doc, _ = icectl("remove-orphan-files", location, "--older-than", str(after_upload), "--allow-recent")
    assert doc["deleted_count"] == len(planted)
    assert set(fs.find(key)) == table_objects | hidden
    # Outside the table: refused.
    icectl("remove-orphan-files", location, "--location", f"s3://{BUCKET}/wh", expect=ExitCode.REFUSED)
    icectl("validate", location)
